//! `tprof diagnose`: arguments -> [`crate::diagnose::diagnose`] -> the efficiency headline and
//! the ranked verdicts (text), or the [`crate::diagnose::Diagnosis`] document (`--json`).

use clap::Args;
use regex_lite::Regex;

use super::table::Table;
use crate::convert::ConvertOptions;
use crate::diagnose::{self, pct, DiagnoseOptions, Diagnosis, CLEAN_THRESHOLD};
use crate::input::{discover, Notes};
use crate::steps::DEFAULT_STEP_PATTERN;

/// Arguments of `tprof diagnose`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "EXAMPLES:
    tprof diagnose ./tprof-out                      every rank of a job: efficiency, then verdicts
    tprof diagnose ./tprof-out --json > diag.json   machine-readable (keys documented in the README)
    tprof diagnose ./tprof-out --peak-busbw 180     flag collectives below 50% of 180 GB/s busbw
    tprof diagnose trace.pt.trace.json.gz           an imported PyTorch-profiler trace")]
pub struct DiagnoseCmd {
    /// Ring files, directories, globs, or Kineto .json/.json.gz traces.
    #[arg(required = true)]
    pub paths: Vec<String>,
    /// Print JSON (stable keys) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Expected peak bus bandwidth of the fabric in GB/s (nccl-tests busbw).
    #[arg(long, value_name = "GBPS")]
    pub peak_busbw: Option<f64>,
    /// Regex naming the NVTX ranges that are steps (default: step, train_step, ProfilerStep#N).
    #[arg(long, value_name = "REGEX")]
    pub step_marker: Option<String>,
    /// Also list verdicts below the 5% severity a clean run stays under.
    #[arg(long)]
    pub all: bool,
    /// Decoding threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

pub fn run(a: &DiagnoseCmd) -> i32 {
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
    let opts = DiagnoseOptions { peak_busbw_gbps: a.peak_busbw };
    let convert = ConvertOptions { threads: a.threads, progress: !a.json, align_clocks: true };
    let (mut d, errors) = diagnose::diagnose(&sources, &pattern, &opts, &convert);
    let mut pre: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
    pre.extend(errors.iter().map(|e| format!("not used: {e}")));
    pre.append(&mut d.notes);
    d.notes = pre;
    if d.efficiency.ranks.is_empty() {
        for n in &d.notes {
            eprintln!("tprof: {n}");
        }
        eprintln!("tprof: nothing could be decoded");
        return 1;
    }
    if a.json {
        match serde_json::to_string_pretty(&d) {
            Ok(s) => {
                if let Err(code) = super::stdout::println(&s) {
                    return code;
                }
            }
            Err(e) => {
                eprintln!("tprof: {e}");
                return 1;
            }
        }
    } else {
        if let Err(code) = super::stdout::print(&render(&d, a.all)) {
            return code;
        }
    }
    0
}

/// The human-readable diagnosis: the efficiency headline first, then the verdicts.
pub fn render(d: &Diagnosis, all: bool) -> String {
    let mut out = String::new();
    let e = &d.efficiency;
    if e.overall.gpu_times {
        out.push_str(&format!(
            "== Efficiency: the GPUs spent {} of wall time on useful compute\n",
            pct(e.overall.useful)
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
        cells.extend(row.breakdown.parts().iter().map(|(_, x)| pct(*x)));
        cells.push(diagnose::ms(row.wall_ns));
        tb.row(cells);
    }
    out.push_str(&tb.render());
    let shown: Vec<_> = d.verdicts.iter().filter(|v| all || v.severity >= CLEAN_THRESHOLD).collect();
    out.push('\n');
    if shown.is_empty() {
        out.push_str(&format!(
            "== No problem costs more than {} of wall time{}\n",
            pct(CLEAN_THRESHOLD),
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
