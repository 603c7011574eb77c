//! `tprof report PATH... -o report.html`: one self-contained HTML page a person opens first.
//!
//! One decoding pass per file (in parallel) feeds three sinks at once: the summary's
//! [`RankAnalysis`], the diagnosis' fact collector and the report's own [`collect::ReportCollector`]
//! (flame-graph stacks, memory, counters). Everything is aggregated before drawing (steps and
//! time series are binned to a fixed number of buckets), so the page size depends on the number
//! of ranks, kernels and counters, not on the number of events.
//!
//! The page: verdicts with advice, the efficiency pipeline per rank, a step timeline per rank,
//! top kernels, the NCCL table, memory and counters over time, and the flame graph (inferno,
//! NVTX stacks -> kernels weighted by GPU time). No network, no external fonts; inline SVG and a
//! little vanilla JS, which writes `id="report-ok"` once it has rendered without an exception.

pub mod baseline;
pub mod collect;
pub mod flame;
pub mod host;
pub mod html;
pub mod id_window;
pub mod kernel_times;
pub mod launches;
pub mod nccl_links;
pub mod stacks;
pub mod verdicts;

use std::path::{Path, PathBuf};

use regex_lite::Regex;

use crate::clock_alignment::CollectiveEnds;
use crate::convert::ConvertOptions;
use crate::input::Source;
use crate::model::Tee;
use crate::summary::{RankAnalysis, Summary};
use collect::{KernelFrames, ProcReport, ReportCollector};
use verdicts::DiagnosisView;

/// Everything the page is drawn from.
#[derive(Debug, Default)]
pub struct ReportData {
    pub title: String,
    pub summary: Summary,
    /// None when the diagnosis could not run (then the page says so).
    pub diagnosis: Option<DiagnosisView>,
    pub procs: Vec<ProcReport>,
    pub notes: Vec<String>,
    /// `--baseline BASE`: (what BASE was, the comparison with it).
    pub baseline: Option<(String, crate::compare::Comparison)>,
}

/// Decodes `sources` once and gathers the report's data.
pub fn gather(
    sources: &[Source],
    step_pattern: &Regex,
    peak_busbw: Option<f64>,
    convert: &ConvertOptions,
) -> ReportData {
    let frames = KernelFrames::default();
    let each = crate::convert::feed_each(
        sources,
        || {
            let report = ReportCollector::with_frames(frames.clone());
            Tee(RankAnalysis::new(step_pattern), Tee(verdicts::collector(step_pattern), report))
        },
        convert,
    );
    let mut notes: Vec<String> = each.notes.iter().map(|n| n.to_string()).collect();
    notes.extend(each.errors.iter().map(|e| format!("not used: {e}")));
    let with_colls = each.sinks.iter().filter(|s| !s.0.clock.ends.is_empty()).count();
    let plan = (with_colls > 1).then(|| {
        let ends: Vec<&CollectiveEnds> = each.sinks.iter().map(|s| &s.0.clock).collect();
        crate::clock_alignment::plan(&each.processes, &ends)
    });
    let offsets: Vec<i64> =
        each.processes.iter().map(|p| plan.as_ref().map(|pl| pl.offset_of(&p.path)).unwrap_or(0)).collect();
    let mut ranks = Vec::new();
    let mut facts = Vec::new();
    let mut procs = Vec::new();
    for Tee(analysis, Tee(fc, rc)) in each.sinks {
        ranks.extend(analysis.result);
        facts.push(fc);
        procs.extend(rc.result);
    }
    let summary = Summary::merge(ranks, plan, Vec::new());
    let diagnosis = Some(verdicts::diagnose(facts, offsets, peak_busbw));
    procs.sort_by_key(|p| (p.rank.unwrap_or(u32::MAX), p.label.clone()));
    let title = each
        .processes
        .iter()
        .min_by_key(|p| p.rank.unwrap_or(u32::MAX))
        .map(|p| if p.cmdline.is_empty() { "tprof report".to_string() } else { p.cmdline.clone() })
        .unwrap_or_else(|| "tprof report".into());
    notes.extend(summary.notes.iter().cloned());
    ReportData { title, summary, diagnosis, procs, notes, baseline: None }
}

/// What [`write`] produced.
#[derive(Debug, Clone)]
pub struct Written {
    pub path: PathBuf,
    pub bytes: u64,
    pub ranks: usize,
    pub events: u64,
    pub verdicts: usize,
}

/// Renders `data` into `path`.
pub fn write(data: &ReportData, path: &Path) -> std::io::Result<Written> {
    let page = html::render(data);
    crate::output::write_file(path, page.as_bytes())?;
    Ok(Written {
        path: path.to_path_buf(),
        bytes: page.len() as u64,
        ranks: data.summary.ranks.len(),
        events: data.summary.totals.events,
        verdicts: data.diagnosis.as_ref().map(|d| d.verdicts.len()).unwrap_or(0),
    })
}
