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

pub mod collect;
pub mod flame;
pub mod html;
pub mod verdicts;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use regex_lite::Regex;

use crate::clock::CollectiveEnds;
use crate::convert::ConvertOptions;
use crate::input::{discover, Notes, Source};
use crate::model::Tee;
use crate::steps::DEFAULT_STEP_PATTERN;
use crate::summary::{RankAnalysis, Summary};
use collect::{ProcReport, ReportCollector};
use verdicts::DiagnosisView;

/// Arguments of `tprof report`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "EXAMPLES:
    tprof report ./tprof-out -o report.html        every rank of a job, one page
    tprof report 'run/*.tprof' --peak-busbw 180    flag collectives below 50% of 180 GB/s busbw
    tprof report trace.pt.trace.json.gz -o r.html  an imported PyTorch-profiler trace")]
pub struct ReportCmd {
    /// Ring files, directories, globs, or Kineto .json/.json.gz traces.
    #[arg(required = true)]
    pub paths: Vec<String>,
    /// Where to write the page.
    #[arg(short, long, default_value = "tprof-report.html")]
    pub output: PathBuf,
    /// Page title (default: the command line of rank 0).
    #[arg(long)]
    pub title: Option<String>,
    /// Expected peak bus bandwidth of the fabric in GB/s (nccl-tests busbw).
    #[arg(long, value_name = "GBPS")]
    pub peak_busbw: Option<f64>,
    /// Regex naming the NVTX ranges that are steps (default: step, train_step, ProfilerStep#N).
    #[arg(long, value_name = "REGEX")]
    pub step_marker: Option<String>,
    /// Decoding threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Everything the page is drawn from.
#[derive(Debug, Default)]
pub struct ReportData {
    pub title: String,
    pub summary: Summary,
    /// None when the diagnosis could not run (then the page says so).
    pub diagnosis: Option<DiagnosisView>,
    pub procs: Vec<ProcReport>,
    pub notes: Vec<String>,
}

/// Decodes `sources` once and gathers the report's data.
pub fn gather(
    sources: &[Source],
    step_pattern: &Regex,
    peak_busbw: Option<f64>,
    convert: &ConvertOptions,
) -> ReportData {
    let each = crate::convert::feed_each(
        sources,
        || Tee(RankAnalysis::new(step_pattern), Tee(verdicts::collector(step_pattern), ReportCollector::new())),
        convert,
    );
    let mut notes: Vec<String> = each.notes.iter().map(|n| n.to_string()).collect();
    notes.extend(each.errors.iter().map(|e| format!("not used: {e}")));
    let with_colls = each.sinks.iter().filter(|s| !s.0.clock.ends.is_empty()).count();
    let plan = (with_colls > 1).then(|| {
        let ends: Vec<&CollectiveEnds> = each.sinks.iter().map(|s| &s.0.clock).collect();
        crate::clock::plan(&each.processes, &ends)
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
    ReportData { title, summary, diagnosis, procs, notes }
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

/// `tprof report`: returns the exit status. The last line printed says where the page is.
pub fn run(a: &ReportCmd) -> i32 {
    let pattern = match Regex::new(a.step_marker.as_deref().unwrap_or(DEFAULT_STEP_PATTERN)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tprof: --step-marker: bad regex: {e}");
            return 2;
        }
    };
    let mut notes = Notes::default();
    let sources = match discover(&a.paths, &mut notes) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tprof: {e}");
            return 2;
        }
    };
    let t0 = Instant::now();
    let convert = ConvertOptions { threads: a.threads, progress: true, align_clocks: true };
    let mut data = gather(&sources, &pattern, a.peak_busbw, &convert);
    let mut pre: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
    pre.append(&mut data.notes);
    data.notes = pre;
    if let Some(t) = &a.title {
        data.title = t.clone();
    }
    if data.summary.ranks.is_empty() {
        for n in &data.notes {
            eprintln!("tprof: {n}");
        }
        eprintln!("tprof: nothing could be decoded");
        return 1;
    }
    match write(&data, &a.output) {
        Ok(w) => {
            let abs = std::fs::canonicalize(&w.path).unwrap_or(w.path.clone());
            eprintln!(
                "tprof: {} ranks, {} events, {} verdicts in {:.2} s; {:.1} MB",
                w.ranks,
                w.events,
                w.verdicts,
                t0.elapsed().as_secs_f64(),
                w.bytes as f64 / 1e6
            );
            let done = format!("tprof: report written to {} (open it in a browser; it works offline)", abs.display());
            crate::cli::stdout::status(crate::cli::stdout::println(&done), 0)
        }
        Err(e) => {
            eprintln!("tprof: cannot write {}: {e}", a.output.display());
            1
        }
    }
}
