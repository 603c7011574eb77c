//! `tprof diagnose`: arguments -> [`crate::diagnose::diagnose`] -> the efficiency headline and
//! the ranked verdicts (text), or the [`crate::diagnose::Diagnosis`] document (`--json`).

use clap::Args;

use super::input::{leading_notes, nothing_decoded, print_json, InputArgs};
use super::table::Table;
use crate::diagnose::{self, DiagnoseOptions, Diagnosis, CLEAN_THRESHOLD};
use crate::units::{millis, share};

/// Arguments of `tprof diagnose`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "EXAMPLES:
    tprof diagnose ./tprof-out                      every rank of a job: efficiency, then verdicts
    tprof diagnose ./tprof-out --json > diag.json   machine-readable (keys documented in the README)
    tprof diagnose ./tprof-out --peak-busbw 180     flag collectives below 50% of 180 GB/s busbw
    tprof diagnose trace.pt.trace.json.gz           an imported PyTorch-profiler trace")]
pub struct DiagnoseCmd {
    #[command(flatten)]
    pub input: InputArgs,
    /// Print JSON (stable keys) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Expected peak bus bandwidth of the fabric in GB/s (nccl-tests busbw).
    #[arg(long, value_name = "GBPS")]
    pub peak_busbw: Option<f64>,
    /// Also list verdicts below the 5% severity a clean run stays under.
    #[arg(long)]
    pub all: bool,
}

pub fn run(a: &DiagnoseCmd) -> i32 {
    let inputs = match a.input.open() {
        Ok(i) => i,
        Err(code) => return code,
    };
    let opts = DiagnoseOptions { peak_busbw_gbps: a.peak_busbw };
    let convert = a.input.convert(!a.json, true);
    let (mut d, errors) = diagnose::diagnose(&inputs.sources, &inputs.step_pattern, &opts, &convert);
    d.notes = leading_notes(&inputs.notes, &errors, &mut d.notes);
    if d.efficiency.ranks.is_empty() {
        return nothing_decoded(&d.notes);
    }
    if a.json {
        return print_json(&d);
    }
    super::stdout::status(super::stdout::print(&render(&d, a.all)), 0)
}

/// The human-readable diagnosis: the efficiency headline first, then the verdicts.
pub fn render(d: &Diagnosis, all: bool) -> String {
    let mut out = String::new();
    let e = &d.efficiency;
    if e.overall.gpu_times {
        out.push_str(&format!(
            "== Efficiency: the GPUs spent {} of wall time on useful compute\n",
            share(e.overall.useful)
        ));
    } else {
        out.push_str("== Efficiency: unknown, the input has no GPU activity with times (a CPU-only trace?)\n");
    }
    let mut tb = Table::new(&["rank", "compute", "comm", "wait", "memcpy", "data", "launch", "sync", "idle", "wall"]);
    for row in e.ranks.iter().chain(std::iter::once(&e.overall)) {
        if !row.gpu_times {
            tb.row(vec![row.label.clone(), "no GPU times".into()]);
            continue;
        }
        let mut cells = vec![row.label.clone()];
        cells.extend(row.breakdown.parts().iter().map(|(_, x)| share(*x)));
        cells.push(millis(row.wall_ns));
        tb.row(cells);
    }
    out.push_str(&tb.render());
    let shown: Vec<_> = d.verdicts.iter().filter(|v| all || v.severity >= CLEAN_THRESHOLD).collect();
    out.push('\n');
    if shown.is_empty() {
        out.push_str(&format!(
            "== No problem costs more than {} of wall time{}\n",
            share(CLEAN_THRESHOLD),
            if d.verdicts.is_empty() {
                String::new()
            } else {
                format!(" ({} minor findings: --all)", d.verdicts.len())
            }
        ));
    } else {
        out.push_str("== Verdicts, most costly first\n");
    }
    for (i, v) in shown.iter().enumerate() {
        out.push_str(&format!("\n{}. [{}] {} (severity {:.2})\n", i + 1, v.kind.id(), v.summary, v.severity));
        out.push_str(&format!("   evidence: {}\n", v.evidence_text()));
        for a in &v.advice {
            out.push_str(&format!("   - {a}\n"));
        }
    }
    if !d.notes.is_empty() {
        out.push_str("\nnotes:\n");
        for n in &d.notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}
