//! The diagnosis as the report shows it: verdicts with their advice and the efficiency pipeline,
//! computed by the diagnose library (`crate::diagnose`) from facts gathered in the report's pass.

use crate::diagnose::{self, collect::FactCollector, facts::RankFacts, DiagnoseOptions};

/// One verdict, ready to print.
#[derive(Debug, Clone)]
pub struct VerdictView {
    pub kind: String,
    /// Fraction of wall time lost, 0..1.
    pub severity: f64,
    pub summary: String,
    pub evidence: String,
    pub advice: Vec<String>,
    pub ranks: String,
    pub steps: String,
}

/// One row of the efficiency pipeline (a rank, or the whole job first).
#[derive(Debug, Clone)]
pub struct EfficiencyView {
    pub label: String,
    pub wall_ns: u64,
    /// Useful compute share, 0..1.
    pub useful: f64,
    /// (part, share) in display order: compute, comm, wait, memcpy, data, launch, sync, idle.
    pub parts: Vec<(&'static str, f64)>,
}

#[derive(Debug, Clone, Default)]
pub struct DiagnosisView {
    pub verdicts: Vec<VerdictView>,
    /// Overall first, then ranks.
    pub efficiency: Vec<EfficiencyView>,
    pub notes: Vec<String>,
}

/// The per-process sink of the diagnosis.
pub type Collector = FactCollector;

pub fn collector(step_pattern: &regex_lite::Regex) -> Collector {
    FactCollector::new(step_pattern)
}

/// The clock-alignment input of a collector.
pub fn clock_of(c: &Collector) -> &crate::clock_alignment::CollectiveEnds {
    &c.clock
}

/// Runs the rules over the collected facts. `offsets[i]` aligns `collectors[i]`'s process.
pub fn diagnose(collectors: Vec<Collector>, offsets: Vec<i64>, peak_busbw_gbps: Option<f64>) -> DiagnosisView {
    let mut ranks: Vec<RankFacts> = Vec::new();
    let mut offs = Vec::new();
    let mut notes = Vec::new();
    for (c, off) in collectors.into_iter().zip(offsets) {
        if let Some(f) = c.result {
            if !f.gpu_times {
                notes.push(format!("{}: no GPU activity with times: GPU-side verdicts are not possible", f.label));
            }
            ranks.push(f);
            offs.push(off);
        }
    }
    let d = diagnose::diagnose_facts(ranks, offs, &DiagnoseOptions { peak_busbw_gbps }, notes);
    let row = |r: &diagnose::efficiency::EfficiencyRow| EfficiencyView {
        label: r.label.clone(),
        wall_ns: r.wall_ns,
        useful: r.useful,
        parts: r.breakdown.parts().to_vec(),
    };
    let mut efficiency = vec![row(&d.efficiency.overall)];
    efficiency.extend(d.efficiency.ranks.iter().map(row));
    DiagnosisView {
        verdicts: d
            .verdicts
            .iter()
            .map(|v| VerdictView {
                kind: v.kind.id().to_string(),
                severity: v.severity,
                summary: v.summary.clone(),
                evidence: v.evidence_text().to_string(),
                advice: v.advice.clone(),
                ranks: if v.ranks.is_empty() { String::new() } else { diagnose::rank_list(&v.ranks) },
                steps: if v.steps.is_empty() { String::new() } else { diagnose::step_list(&v.steps) },
            })
            .collect(),
        efficiency,
        notes: d.notes,
    }
}
