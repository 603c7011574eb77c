//! `tprof export`: arguments -> [`crate::export::ExportOptions`] -> the exporter; the last line
//! says what was written, how many events, and where to open it.

use std::path::PathBuf;

use clap::Args;

use super::input::InputArgs;
use crate::export::select::{parse_offset, IdSet, Selection};
use crate::export::{self, ExportFormat, ExportOptions};
use crate::units::byte_size;

/// Arguments of `tprof export`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "EXAMPLES:
    tprof export ./tprof-out --format perfetto -o run.perfetto-trace
    tprof export ./tprof-out --format chrome -o run.json.gz --ranks 0-3 --steps 10-12
    tprof export ./tprof-out --format kineto -o kineto/        (one rank-<r>.json per rank, for HTA)
    tprof export ./tprof-out --format parquet -o tables/       (kernels.parquet, api.parquet, ...)
    tprof export trace.pt.trace.json.gz --format flamegraph -o gpu.svg --from 2s --to 3s")]
pub struct ExportCmd {
    #[command(flatten)]
    pub input: InputArgs,
    /// The format to write.
    #[arg(long, short = 'f', value_enum, ignore_case = true)]
    pub format: ExportFormat,
    /// Output file (perfetto, chrome, folded, flamegraph) or directory (kineto, parquet).
    #[arg(long, short = 'o')]
    pub output: Option<PathBuf>,
    /// Only these ranks, e.g. 0,2-3.
    #[arg(long, value_parser = parse_ids)]
    pub ranks: Option<IdSet>,
    /// Window start, from the first event: seconds (1.5) or with a unit (1.5s, 200ms, 40us, 1000ns).
    #[arg(long, value_parser = parse_offset)]
    pub from: Option<u64>,
    /// Window end, from the first event (same units as --from).
    #[arg(long, value_parser = parse_offset)]
    pub to: Option<u64>,
    /// Only these steps (as `tprof summary` numbers them), e.g. 10-12.
    #[arg(long, value_parser = parse_ids)]
    pub steps: Option<IdSet>,
    /// Keep each host's own clock (no alignment by collective ends).
    #[arg(long)]
    pub no_align: bool,
}

fn parse_ids(s: &str) -> Result<IdSet, String> {
    IdSet::parse(s)
}

pub fn run(a: &ExportCmd) -> i32 {
    let pattern = match a.input.step_pattern() {
        Ok(p) => p,
        Err(code) => return code,
    };
    if let (Some(f), Some(t)) = (a.from, a.to) {
        if f > t {
            eprintln!("tprof: --from is after --to");
            return 2;
        }
    }
    let (sources, notes) = match a.input.sources() {
        Ok(found) => found,
        Err(code) => return code,
    };
    let output = a.output.clone().unwrap_or_else(|| PathBuf::from(a.format.default_output()));
    if let Err(code) = super::input::refuse_output_among_inputs(&output, &sources) {
        return code;
    }
    crate::output::replace::remove_on_interrupt();
    let before = super::replaced::existing(&output);
    let opts = ExportOptions {
        format: a.format,
        output,
        selection: Selection { ranks: a.ranks.clone(), from: a.from, to: a.to, steps: a.steps.clone() },
        step_pattern: pattern,
        convert: a.input.convert(true, !a.no_align),
    };
    let report = match export::run(&sources, &opts) {
        Ok(r) => r,
        Err(e) => {
            if let export::ExportError::Finish { notes, .. } = &e {
                for n in notes {
                    eprintln!("tprof: {n}");
                }
            }
            eprintln!("tprof: {e}");
            return 1;
        }
    };
    for n in notes.iter().chain(report.decode.notes.iter()) {
        eprintln!("tprof: {n}");
    }
    for e in &report.decode.errors {
        eprintln!("tprof: not used: {e}");
    }
    if report.decode.processes.is_empty() {
        eprintln!("tprof: nothing was selected or decoded; nothing exported");
        return 1;
    }
    let w = &report.written;
    let bytes: u64 = w.files.iter().filter_map(|f| std::fs::metadata(f).ok()).map(|m| m.len()).sum();
    let secs = report.elapsed.as_secs_f64().max(1e-9);
    let place = if w.files.len() == 1 {
        w.files[0].display().to_string()
    } else {
        format!("{} files in {}", w.files.len(), opts.output.display())
    };
    let replaced = super::replaced::note(&before, &w.files);
    let filtered = if report.filtered_out > 0 {
        format!(", {} outside the window left out", report.filtered_out)
    } else {
        String::new()
    };
    let done = format!(
        "tprof: wrote {} events from {} process{} to {place} ({}) in {secs:.2} s ({:.1} M events/s{filtered}){replaced}; {}",
        w.events,
        report.decode.processes.len(),
        if report.decode.processes.len() == 1 { "" } else { "es" },
        byte_size(bytes),
        w.events as f64 / secs / 1e6,
        a.format.open_hint()
    );
    super::stdout::status(super::stdout::println(&done), 0)
}
