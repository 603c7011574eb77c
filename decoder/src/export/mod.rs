//! `tprof export`: the decoded trace in formats other tools open. One module per format, each a
//! [`TraceSink`] that writes as events arrive (memory bounded by names and open ranges):
//!
//! | format | module | output |
//! |---|---|---|
//! | `perfetto` | [`perfetto`] | Perfetto protobuf trace (tracks per rank / stream / thread, flows, counters) |
//! | `chrome` | [`chrome`] | Chrome trace-event JSON (`.json` or `.json.gz`) |
//! | `kineto` | [`kineto`] | PyTorch-profiler JSON, one file per rank (HTA loads it) |
//! | `parquet` | [`parquet`] | one Parquet table per record kind, with rank and host columns |
//! | `folded`, `flamegraph` | [`folded`] | NVTX range stacks -> kernel weighted by GPU time; SVG via inferno |
//!
//! [`run`] plans the decode ([`plan`]: rank / time / step filters, clock alignment), feeds every
//! selected source through a [`filter::Filter`] into the exporter, and reports what was written.

pub mod chrome;
pub mod columns;
pub mod display_names;
pub mod filter;
pub mod folded;
pub mod json;
pub mod kineto;
pub mod parquet;
pub mod perfetto;
pub mod plan;
pub mod proto;
pub mod select;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use regex_lite::Regex;

use crate::convert::{check_job, feed_source, ConvertOptions, DecodeReport};
use crate::input::{Notes, Source};
use crate::model::*;
use filter::Filter;
use select::Selection;

/// An output format (its `--format` name is the variant's, in lower case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    Perfetto,
    Chrome,
    Kineto,
    Parquet,
    Folded,
    Flamegraph,
}

impl ExportFormat {
    /// Output path used when `-o` is not given.
    pub fn default_output(self) -> &'static str {
        match self {
            ExportFormat::Perfetto => "tprof.perfetto-trace",
            ExportFormat::Chrome => "tprof.trace.json",
            ExportFormat::Kineto => "tprof-kineto",
            ExportFormat::Parquet => "tprof-parquet",
            ExportFormat::Folded => "tprof.folded",
            ExportFormat::Flamegraph => "tprof-flamegraph.svg",
        }
    }

    /// Where to open what was written.
    pub fn open_hint(self) -> &'static str {
        match self {
            ExportFormat::Perfetto | ExportFormat::Chrome => "open it at https://ui.perfetto.dev",
            ExportFormat::Kineto => "load it with HTA: TraceAnalysis(trace_dir=...), or open a file in ui.perfetto.dev",
            ExportFormat::Parquet => "query it with DuckDB: SELECT ... FROM '<dir>/kernels.parquet'",
            ExportFormat::Folded => "render it with inferno-flamegraph or flamegraph.pl",
            ExportFormat::Flamegraph => "open it in a web browser",
        }
    }
}

/// What an exporter wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Written {
    pub files: Vec<PathBuf>,
    /// Trace events written (slices, instants, counter samples, flows are not counted; for
    /// Parquet: rows; for folded / flamegraph: GPU activities folded).
    pub events: u64,
}

/// An exporter: a sink that writes one format and says what it wrote.
pub trait Exporter: TraceSink {
    fn written(&self) -> Written;
}

/// Everything `tprof export` needs, parsed.
#[derive(Debug, Clone)]
pub struct ExportOptions {
    pub format: ExportFormat,
    pub output: PathBuf,
    pub selection: Selection,
    pub step_pattern: Regex,
    pub convert: ConvertOptions,
}

/// What an export did.
#[derive(Debug)]
pub struct ExportReport {
    pub written: Written,
    pub decode: DecodeReport,
    /// Events outside the selected window (selected processes only).
    pub filtered_out: u64,
    pub elapsed: Duration,
}

/// Why an export failed as a whole.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("cannot write {path}: {source}")]
    Create { path: PathBuf, source: std::io::Error },
    #[error("writing the export failed: {0}")]
    Sink(#[from] SinkError),
    /// Finishing the output failed ("no GPU time to draw"); `notes` say what the inputs held
    /// (damage, files not used), which is often why.
    #[error("writing the export failed: {source}")]
    Finish { source: SinkError, notes: Vec<String> },
}

/// Make the exporter for `format` writing to `out`. `origin` is the global time that JSON
/// timestamps are relative to (ns).
pub fn make_exporter(
    format: ExportFormat,
    out: &Path,
    origin: Ns,
    step_pattern: &Regex,
) -> Result<Box<dyn Exporter>, ExportError> {
    let create = |source| ExportError::Create { path: out.to_path_buf(), source };
    Ok(match format {
        ExportFormat::Perfetto => Box::new(perfetto::PerfettoExporter::create(out).map_err(create)?),
        ExportFormat::Chrome => Box::new(chrome::ChromeExporter::create(out, origin).map_err(create)?),
        ExportFormat::Kineto => Box::new(kineto::KinetoExporter::new(out, origin, step_pattern)),
        ExportFormat::Parquet => Box::new(parquet::ParquetExporter::create(out, step_pattern).map_err(create)?),
        ExportFormat::Folded => Box::new(folded::FoldedExporter::new(out, folded::FoldedOutput::Folded)),
        ExportFormat::Flamegraph => Box::new(folded::FoldedExporter::new(out, folded::FoldedOutput::Svg)),
    })
}

/// Export `sources` as `opts` says.
pub fn run(sources: &[Source], opts: &ExportOptions) -> Result<ExportReport, ExportError> {
    let t0 = Instant::now();
    let mut report = DecodeReport::default();
    let plan = plan::make_plan(
        sources,
        &opts.selection,
        &opts.step_pattern,
        opts.convert.align_clocks,
        &opts.convert,
        &mut report.notes,
    );
    let mut exporter = make_exporter(opts.format, &opts.output, plan.origin, &opts.step_pattern)?;
    let filter = Filter::new(&mut *exporter, plan.windows.clone(), opts.selection.ranks.clone());
    // Host samples become counter tracks before the filter sees them.
    let mut hosted = crate::host::counters::HostCounters::new(filter);
    let todo = plan.windows.iter().filter(|w| w.is_some()).count();
    let pb = crate::progress::bar(todo as u64, "exporting", opts.convert.progress);
    let mut notes = Notes::default();
    for (i, src) in sources.iter().enumerate() {
        if plan.windows[i].is_none() {
            continue;
        }
        match feed_source(src, ProcId(i as u32), plan.offsets[i], &mut hosted, &mut notes) {
            Ok(info) => {
                if opts.selection.rank_selected(info.rank) {
                    report.processes.push(info);
                }
            }
            Err(e) => report.errors.push(e),
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    report.notes.extend(notes);
    if opts.selection.ranks.is_none() {
        check_job(&report.processes, &mut report.notes);
    }
    report.clock = plan.clock;
    let filtered_out = hosted.inner.dropped;
    if let Err(source) = hosted.finish() {
        let mut notes: Vec<String> = report.notes.iter().map(|n| n.to_string()).collect();
        notes.extend(report.errors.iter().map(|e| format!("not used: {e}")));
        return Err(ExportError::Finish { source, notes });
    }
    drop(hosted);
    Ok(ExportReport { written: exporter.written(), decode: report, filtered_out, elapsed: t0.elapsed() })
}
