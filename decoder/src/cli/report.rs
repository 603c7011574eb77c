//! `tprof report PATH... -o report.html`: arguments -> [`crate::report::gather`] ->
//! [`crate::report::write`]; the last line says where the page is.

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;

use super::input::{leading_notes, nothing_decoded, InputArgs};
use crate::report::{gather, write};

/// Arguments of `tprof report`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "EXAMPLES:
    tprof report ./tprof-out -o report.html        every rank of a job, one page
    tprof report 'run/*.tprof' --peak-busbw 180    flag collectives below 50% of 180 GB/s busbw
    tprof report trace.pt.trace.json.gz -o r.html  an imported PyTorch-profiler trace
    tprof report ./after --baseline ./before       with a comparison section (as tprof diff)")]
pub struct ReportCmd {
    #[command(flatten)]
    pub input: InputArgs,
    /// Where to write the page.
    #[arg(short, long, default_value = "tprof-report.html")]
    pub output: PathBuf,
    /// Page title (default: the command line of rank 0).
    #[arg(long)]
    pub title: Option<String>,
    /// Expected peak bus bandwidth of the fabric in GB/s (nccl-tests busbw).
    #[arg(long, value_name = "GBPS")]
    pub peak_busbw: Option<f64>,
    /// Compare with this run (rings, a directory or a Kineto trace), as `tprof diff BASE PATH`.
    #[arg(long, value_name = "BASE")]
    pub baseline: Option<String>,
}

/// `tprof report`: returns the exit status. The last line printed says where the page is.
pub fn run(a: &ReportCmd) -> i32 {
    let inputs = match a.input.open() {
        Ok(i) => i,
        Err(code) => return code,
    };
    if let Err(code) = super::input::refuse_output_among_inputs(&a.output, &inputs.sources) {
        return code;
    }
    crate::output::replace::remove_on_interrupt();
    let before = super::replaced::existing(&a.output);
    let t0 = Instant::now();
    let convert = a.input.convert(true, true);
    let mut data = gather(&inputs.sources, &inputs.step_pattern, a.peak_busbw, &convert);
    data.notes = leading_notes(&inputs.notes, &[], &mut data.notes);
    if let Some(t) = &a.title {
        data.title = t.clone();
    }
    if let Some(b) = &a.baseline {
        // The comparison works on summaries and diagnoses: both sides are decoded for it.
        let side = |paths: Vec<String>| InputArgs { paths, ..a.input.clone() };
        let base = match super::diff::load_side("BASE", &side(vec![b.clone()]), true) {
            Ok(r) => r,
            Err(code) => return code,
        };
        let new = match super::diff::load_side("NEW", &side(a.input.paths.clone()), true) {
            Ok(r) => r,
            Err(code) => return code,
        };
        data.baseline = Some((b.clone(), crate::compare::compare(&base, &new)));
    }
    if data.summary.ranks.is_empty() {
        return nothing_decoded(&data.notes);
    }
    // The page shows the notes; damage and files not used are said here too, as export says them.
    for n in &data.notes {
        eprintln!("tprof: {n}");
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
            let replaced = super::replaced::note(&before, std::slice::from_ref(&w.path));
            let done = format!(
                "tprof: report written to {}{replaced} (open it in a browser; it works offline)",
                abs.display()
            );
            super::stdout::status(super::stdout::println(&done), 0)
        }
        Err(e) => {
            eprintln!("tprof: cannot write {}: {e}", a.output.display());
            1
        }
    }
}
