//! `tprof diff BASE NEW`: each side decoded once ([`crate::compare::load`]), set side by side
//! ([`crate::compare::compare`]), printed as text or the [`Comparison`] document (`--json`).

use clap::Args;

use super::input::{nothing_decoded, print_json, InputArgs};
use super::table::{short, Table};
use crate::compare::{self, Comparison, RunProfile};
use crate::diagnose::DiagnoseOptions;
use crate::units::share;

/// Arguments of `tprof diff`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "EXAMPLES:
    tprof diff ./run-before ./run-after            two jobs' ring directories
    tprof diff before.pt.trace.json.gz ./tprof-out a Kineto trace against rings
    tprof diff ./a ./b --json > diff.json          machine-readable")]
pub struct DiffCmd {
    /// The baseline: ring files, a directory, a glob or a Kineto trace.
    pub base: String,
    /// The run compared with it.
    pub new: String,
    /// Print JSON (stable keys) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Regex naming the NVTX ranges that are steps (default: step, train_step, ProfilerStep#N).
    #[arg(long, value_name = "REGEX")]
    pub step_marker: Option<String>,
    /// Decoding threads (0 = all cores).
    #[arg(long, default_value_t = 0)]
    pub threads: usize,
}

/// Opens and decodes one side; on failure the exit status, said why.
pub fn load_side(what: &str, input: &InputArgs, progress: bool) -> Result<RunProfile, i32> {
    let inputs = input.open()?;
    let (run, errors) = compare::load(
        &inputs.sources,
        &inputs.step_pattern,
        &DiagnoseOptions::default(),
        &input.convert(progress, true),
    );
    if run.summary.ranks.is_empty() {
        let mut notes: Vec<String> = inputs.notes.iter().map(|n| n.to_string()).collect();
        notes.extend(errors.iter().map(|e| format!("not used: {e}")));
        eprintln!("tprof: {what} ({}):", input.paths.join(" "));
        return Err(nothing_decoded(&notes));
    }
    for e in &errors {
        eprintln!("tprof: {what}: not used: {e}");
    }
    Ok(run)
}

pub fn run(a: &DiffCmd) -> i32 {
    let side =
        |p: &str| InputArgs { paths: vec![p.to_string()], step_marker: a.step_marker.clone(), threads: a.threads };
    let base = match load_side("BASE", &side(&a.base), !a.json) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let new = match load_side("NEW", &side(&a.new), !a.json) {
        Ok(r) => r,
        Err(c) => return c,
    };
    let c = compare::compare(&base, &new);
    if a.json {
        return print_json(&c);
    }
    super::stdout::status(super::stdout::print(&render(&c)), 0)
}

fn ms(ns: f64) -> String {
    format!("{:.3}", ns / 1e6)
}

fn signed_ms(ns: f64) -> String {
    format!("{:+.3}", ns / 1e6)
}

fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

/// The human-readable comparison.
pub fn render(c: &Comparison) -> String {
    let mut out = format!("== {}\n", c.headline);
    let s = &c.step_time;
    out.push_str(&format!("\n== Step time ({} vs {} ranks)\n", s.base.ranks, s.new.ranks));
    let mut tb = Table::new(&["", "BASE", "NEW", "change"]).left(0);
    tb.row(vec!["steps".into(), s.base.steps.to_string(), s.new.steps.to_string(), String::new()]);
    tb.row(vec!["median ms".into(), ms(s.base.median_ns), ms(s.new.median_ns), signed_ms(s.median_change_ns)]);
    tb.row(vec!["p90 ms".into(), ms(s.base.p90_ns), ms(s.new.p90_ns), signed_ms(s.p90_change_ns)]);
    tb.row(vec!["mean ms".into(), ms(s.base.mean_ns), ms(s.new.mean_ns), signed_ms(s.mean_change_ns)]);
    tb.row(vec![
        "steps/s".into(),
        format!("{:.2}", s.base.steps_per_s),
        format!("{:.2}", s.new.steps_per_s),
        format!("{:+.1}%", 100.0 * s.throughput_change),
    ]);
    out.push_str(&tb.render());
    out.push_str(&format!("{}\n", s.statement));

    out.push_str("\n== Efficiency breakdown (share of wall time; ms per step and rank)\n");
    let mut tb = Table::new(&["category", "BASE", "NEW", "BASE ms", "NEW ms", "change ms"]).left(0);
    for p in &c.breakdown {
        tb.row(vec![
            p.category.to_string(),
            share(p.base_share),
            share(p.new_share),
            ms(p.base_ns_per_step),
            ms(p.new_ns_per_step),
            signed_ms(p.change_ns_per_step),
        ]);
    }
    out.push_str(&tb.render());

    let k = &c.kernels;
    if !(k.new.is_empty() && k.gone.is_empty() && k.changed.is_empty()) {
        out.push_str("\n== Kernels (per step and rank; names without template arguments)\n");
        let mut tb = Table::new(&["", "kernel", "BASE count", "NEW count", "BASE ms", "NEW ms", "mean us B/N"]).left(1);
        for (tag, list) in [("new", &k.new), ("gone", &k.gone), ("changed", &k.changed)] {
            for d in list {
                tb.row(vec![
                    tag.into(),
                    short(&d.name, 70),
                    opt(d.base.map(|f| f.count_per_step), |x| format!("{x:.1}")),
                    opt(d.new.map(|f| f.count_per_step), |x| format!("{x:.1}")),
                    opt(d.base.map(|f| f.ns_per_step), ms),
                    opt(d.new.map(|f| f.ns_per_step), ms),
                    format!(
                        "{}/{}",
                        opt(d.base.map(|f| f.mean_ns), |x| format!("{:.1}", x / 1e3)),
                        opt(d.new.map(|f| f.mean_ns), |x| format!("{:.1}", x / 1e3))
                    ),
                ]);
            }
        }
        out.push_str(&tb.render());
    }

    if !c.collectives.is_empty() {
        out.push_str("\n== NCCL collectives (calls per step and rank; busbw GB/s)\n");
        let mut tb =
            Table::new(&["op", "size <=", "ranks B/N", "calls B/N", "mean ms B/N", "busbw B/N", "busbw change"])
                .left(0);
        for d in &c.collectives {
            let both = |f: &dyn Fn(&compare::sections::CollectiveFigures) -> String| {
                format!(
                    "{}/{}",
                    d.base.as_ref().map(f).unwrap_or("-".into()),
                    d.new.as_ref().map(f).unwrap_or("-".into())
                )
            };
            tb.row(vec![
                d.op.clone(),
                crate::units::byte_size(d.size_bucket),
                both(&|f| f.nranks.to_string()),
                both(&|f| format!("{:.1}", f.calls_per_step)),
                both(&|f| ms(f.mean_ns)),
                both(&|f| format!("{:.1}", f.busbw_gbps)),
                opt(d.busbw_change, |x| format!("{:+.1}%", 100.0 * x)),
            ]);
        }
        out.push_str(&tb.render());
    }

    let v = &c.verdicts;
    out.push_str("\n== Verdicts (severity above 0.05)\n");
    if v.appeared.is_empty() && v.disappeared.is_empty() && v.changed.is_empty() {
        out.push_str("no verdict appeared, disappeared or changed severity\n");
    }
    for (tag, list) in [("appeared", &v.appeared), ("disappeared", &v.disappeared), ("changed", &v.changed)] {
        for x in list {
            out.push_str(&format!(
                "{tag:>11} [{}] {} -> {}: {}\n",
                x.kind,
                opt(x.base_severity, |s| format!("{s:.2}")),
                opt(x.new_severity, |s| format!("{s:.2}")),
                x.summary
            ));
        }
    }

    if !c.counters.is_empty() {
        out.push_str("\n== GPU counters (mean of the ranks' means; max)\n");
        let mut tb = Table::new(&["counter", "BASE mean", "NEW mean", "BASE max", "NEW max"]).left(0);
        let f = |x: f64| format!("{x:.4}");
        for d in &c.counters {
            tb.row(vec![
                d.name.clone(),
                opt(d.base_mean, f),
                opt(d.new_mean, f),
                opt(d.base_max, f),
                opt(d.new_max, f),
            ]);
        }
        out.push_str(&tb.render());
    }
    if !c.notes.is_empty() {
        out.push_str("\nnotes:\n");
        for n in &c.notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}
