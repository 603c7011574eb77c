//! `tprof top [PATH...|--all] [--once]`: a live view of running processes from their rings
//! ([`crate::live`]); refreshed every second, `q` quits; `--once` prints one frame for scripts.
//! The training processes are not touched: their rings are only read.

use std::time::{Duration, Instant};

use clap::Args;

use super::input::{print_json, InputArgs};
use super::table::{short, Table};
use super::terminal::{Keys, RawMode, CLEAR};
use crate::compare;
use crate::diagnose::DiagnoseOptions;
use crate::live::{self, LiveView, Previous};
use crate::units::{byte_size, duration, share};

/// Arguments of `tprof top`.
#[derive(Debug, Clone, Args)]
#[command(after_help = "EXAMPLES:
    tprof top ./tprof-out               every rank writing into a (shared) output directory
    tprof top --all                     every process on this host writing a ring
    tprof top ./tprof-out --once        one plain-text frame (scripts); --json for the document")]
pub struct TopCmd {
    /// Ring files or directories (default: $TPROF_OUT, else ./tprof-out).
    pub paths: Vec<String>,
    /// Every ring that a running process of this user has mapped on this host.
    #[arg(long)]
    pub all: bool,
    /// Print one frame and exit.
    #[arg(long)]
    pub once: bool,
    /// With --once: the frame as JSON.
    #[arg(long, requires = "once")]
    pub json: bool,
    /// Steps per rank the step figures cover (the last ones).
    #[arg(long, default_value_t = 10)]
    pub last: usize,
    /// Seconds between refreshes.
    #[arg(long, default_value_t = 1.0)]
    pub interval: f64,
    /// Regex naming the NVTX ranges that are steps (default: step, train_step, ProfilerStep#N).
    #[arg(long, value_name = "REGEX")]
    pub step_marker: Option<String>,
}

impl TopCmd {
    fn paths(&self) -> Result<Vec<String>, String> {
        if self.all {
            let rings = live::procs::mapped_rings();
            if rings.is_empty() {
                return Err("no running process on this host has a ring file mapped".into());
            }
            return Ok(rings.into_iter().map(|p| p.display().to_string()).collect());
        }
        if !self.paths.is_empty() {
            return Ok(self.paths.clone());
        }
        Ok(vec![std::env::var("TPROF_OUT").unwrap_or_else(|_| "./tprof-out".into())])
    }
}

/// One frame: discover (new ranks appear), decode the committed data, build the view.
fn frame(a: &TopCmd, prev: &mut Previous) -> Result<LiveView, String> {
    let input = InputArgs { paths: a.paths()?, step_marker: a.step_marker.clone(), threads: 0 };
    let step_pattern = input.step_pattern().map_err(|_| "bad --step-marker".to_string())?;
    let mut notes = crate::input::Notes::default();
    let sources = crate::input::discover(&input.paths, &mut notes).map_err(|e| e.to_string())?;
    let (run, errors) =
        compare::load(&sources, &step_pattern, &DiagnoseOptions::default(), &input.convert(false, true));
    let mut v = live::view(&run, prev, a.last, 10);
    let mut all: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
    all.extend(errors.iter().map(|e| format!("not used: {e}")));
    all.append(&mut v.notes);
    v.notes = all;
    Ok(v)
}

pub fn run(a: &TopCmd) -> i32 {
    let mut prev = Previous::default();
    if a.once {
        return match frame(a, &mut prev) {
            Ok(v) if a.json => print_json(&v),
            Ok(v) => super::stdout::status(super::stdout::print(&render(&v)), 0),
            Err(e) => {
                eprintln!("tprof: top: {e}");
                2
            }
        };
    }
    let _raw = RawMode::enter();
    let keys = Keys::start();
    let interval = Duration::from_secs_f64(a.interval.clamp(0.1, 3600.0));
    loop {
        let t0 = Instant::now();
        let text = match frame(a, &mut prev) {
            Ok(v) => render(&v),
            Err(e) => format!("tprof top: {e}\n"),
        };
        let out = format!("{CLEAR}{text}\n(q quits; refresh every {:.1} s)\n", interval.as_secs_f64());
        if super::stdout::print(&out).is_err() {
            return 0;
        }
        loop {
            let left = interval.saturating_sub(t0.elapsed());
            if left.is_zero() {
                break;
            }
            if matches!(keys.next(left), Some(b'q') | Some(b'Q') | Some(3)) {
                return 0;
            }
        }
    }
}

/// One frame as text.
pub fn render(v: &LiveView) -> String {
    let mut out = format!(
        "== tprof top: {} ranks{}\n",
        v.ranks.len(),
        v.slowest_rank.as_ref().map(|r| format!(", slowest {r}")).unwrap_or_default()
    );
    let mut tb = Table::new(&[
        "rank",
        "host",
        "pid",
        "state",
        "steps",
        "last steps",
        "step time",
        "compute",
        "exposed comm",
        "idle",
    ])
    .left(1);
    for r in &v.ranks {
        tb.row(vec![
            r.label.clone(),
            r.host.clone(),
            r.pid.to_string(),
            match r.alive {
                Some(true) => "running".into(),
                Some(false) => "exited".into(),
                None => "-".into(),
            },
            r.steps.to_string(),
            r.window.map(|[a, b]| format!("{a}-{b}")).unwrap_or_else(|| "-".into()),
            duration(r.step_ns),
            share(r.compute),
            share(r.exposed_comm),
            share(r.idle),
        ]);
    }
    out.push_str(&tb.render());
    out.push_str(&if v.kernels_since_s > 0.0 {
        format!("\n== Kernels of the last {:.1} s\n", v.kernels_since_s)
    } else {
        "\n== Kernels (whole run so far)\n".to_string()
    });
    let mut tb = Table::new(&["time", "count", "kernel"]).left(2);
    for k in &v.kernels {
        tb.row(vec![duration(k.total_ns), k.count.to_string(), short(&k.name, 80)]);
    }
    out.push_str(&tb.render());
    if !v.collectives.is_empty() {
        out.push_str("\n== NCCL (whole run so far)\n");
        let mut tb = Table::new(&["op", "size <=", "count", "busbw GB/s"]).left(0);
        for c in &v.collectives {
            tb.row(vec![c.op.clone(), byte_size(c.size_bucket), c.count.to_string(), format!("{:.1}", c.busbw_gbps)]);
        }
        out.push_str(&tb.render());
    }
    out.push_str("\n== Verdicts\n");
    if v.verdicts.is_empty() {
        out.push_str("none above 5% of wall time\n");
    }
    for x in &v.verdicts {
        out.push_str(&format!("[{}] {:.2} {}\n", x.kind, x.severity, x.summary));
    }
    for n in &v.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}
