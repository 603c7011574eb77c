//! Prometheus textfile metrics (`TPROF_METRICS_FILE`, every `TPROF_METRICS_INTERVAL`, default 10 s).
//!
//! The node_exporter textfile-collector convention: `# HELP` / `# TYPE` per family, one sample per
//! line with labels `rank`, `host`, `pid`, the file replaced atomically (written to an owner-only
//! temporary file in the same directory, then renamed over the old one). Written by the writer thread
//! (no extra thread), and a last time at exit after the final drain, so the `_total` counters of the
//! last file match the ring (`tprof summary`) in full mode.
//!
//! Interval gauges (`tprof_gpu_busy_ratio`, `tprof_collective_busbw_bytes_per_second`,
//! `tprof_step_seconds`, `tprof_overhead_ratio`) cover the time since the previous file.
//! GPU busy is the sum of kernel time over the interval, capped at 1 (overlapping streams count twice
//! before the cap). The overhead estimate is calls x per-call cost, both costs measured in this process
//! at the first write (see [`CallCosts`]). `tprof_step_slowdown` and its companions are the
//! fail-slow watch of [`super::step_watch`].

use std::fmt::Write as _;
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use crate::base::config::config;
use crate::base::{messages, process, switch, ticks};
use crate::capture;
use crate::capture::tallies::{self, Tally};
use crate::record::call_counters;

/// Per-call cost of the shim measured in this process (ns).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CallCosts {
    /// A call recorded in an open window: two timestamps and one record stored in a thread buffer.
    pub open_ns: f64,
    /// A call while the window is closed: the window check and the per-thread counter.
    pub closed_ns: f64,
}

/// What the previous file reported (for interval gauges). Only the writer thread uses it; the mutex
/// is never contended and is not held across anything that could fork.
struct Previous {
    mono_ns: u64,
    ticks: u64,
    tally: Tally,
    calls: (u64, u64),
    costs: Option<CallCosts>,
    step_seconds: f64,
}

static PREVIOUS: Mutex<Option<Previous>> = Mutex::new(None);
static NEXT_DUE_NS: AtomicU64 = AtomicU64::new(0);
static START: Mutex<Option<(u64, u64)>> = Mutex::new(None);
static WARNED: AtomicBool = AtomicBool::new(false);
/// The fail-slow watch (writer thread only; the mutex is never contended).
static WATCH: Mutex<super::step_watch::StepWatch> = Mutex::new(super::step_watch::StepWatch::new());

/// At enable time: schedules the first file one interval from now.
pub fn on_enabled() {
    let Some(_) = config().metrics_file.as_ref() else { return };
    let (ticks, mono, _) = ticks::sync_pair();
    *START.lock().unwrap_or_else(|e| e.into_inner()) = Some((ticks, mono));
    *PREVIOUS.lock().unwrap_or_else(|e| e.into_inner()) = None;
    *WATCH.lock().unwrap_or_else(|e| e.into_inner()) = super::step_watch::StepWatch::new();
    NEXT_DUE_NS.store(mono + config().metrics_interval.as_nanos() as u64, Ordering::Release);
}

/// Writer thread, every iteration: writes the file when due.
pub fn tick(now_ns: u64) {
    let due = NEXT_DUE_NS.load(Ordering::Relaxed);
    if due == 0 || now_ns < due || config().metrics_file.is_none() {
        return;
    }
    NEXT_DUE_NS.store(now_ns + config().metrics_interval.as_nanos() as u64, Ordering::Relaxed);
    write_now();
}

/// Writer thread at exit, after the final drain.
pub fn write_final() {
    if config().metrics_file.is_some() && switch::state() != switch::UNINIT {
        write_now();
    }
}

fn ticks_per_sec(now_ticks: u64, now_mono: u64) -> f64 {
    if ticks::source() == tprof_format::ClockSource::Monotonic {
        return 1e9;
    }
    match *START.lock().unwrap_or_else(|e| e.into_inner()) {
        Some((t0, m0)) if now_mono > m0 + 1_000_000 && now_ticks > t0 => {
            (now_ticks - t0) as f64 * 1e9 / (now_mono - m0) as f64
        }
        _ => ticks::calibrate(1_000_000),
    }
}

/// Measures this process's per-call costs (about 2 ms of the writer thread, once).
pub fn measure_call_costs() -> CallCosts {
    const N: u64 = 200_000;
    let mut slots = vec![
        tprof_format::Record::Marker {
            kind: tprof_format::MarkerKind::Note,
            ts: 0,
            value: 0,
            name: tprof_format::StrId::NONE
        };
        1024
    ];
    let t0 = ticks::monotonic_ns();
    for i in 0..N {
        let start = ticks::now();
        let end = ticks::now();
        let slot = &mut slots[(i as usize) & 1023];
        *slot = tprof_format::Record::Marker {
            kind: tprof_format::MarkerKind::Note,
            ts: start,
            value: end,
            name: tprof_format::StrId(i as u32),
        };
        std::hint::black_box(slot);
    }
    let open_ns = (ticks::monotonic_ns() - t0) as f64 / N as f64;
    let local = std::cell::Cell::new(0u64);
    let flag = std::sync::atomic::AtomicBool::new(false);
    let t0 = ticks::monotonic_ns();
    for _ in 0..N {
        if !std::hint::black_box(&flag).load(Ordering::Relaxed) {
            local.set(std::hint::black_box(local.get()) + 1);
        }
    }
    let closed_ns = (ticks::monotonic_ns() - t0) as f64 / N as f64;
    std::hint::black_box(local.get());
    CallCosts { open_ns, closed_ns }
}

/// The labels of every sample: `{rank="0",host="h",pid="123"}`.
fn labels() -> String {
    let (rank, _, _, _) = process::job_identity();
    let rank = rank.map(|r| r.to_string()).unwrap_or_default();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    format!("{{rank=\"{}\",host=\"{}\",pid=\"{}\"}}", escape(&rank), escape(&host), std::process::id())
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn family(out: &mut String, name: &str, kind: &str, help: &str, labels: &str, value: f64) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    if value.is_finite() {
        let _ = writeln!(out, "{name}{labels} {value}");
    } else {
        let _ = writeln!(out, "{name}{labels} NaN");
    }
}

/// Inputs of one file (separate from I/O so it can be tested).
pub struct Sample {
    pub tally: Tally,
    pub previous: Tally,
    pub interval_s: f64,
    pub ticks_per_sec: f64,
    pub calls: (u64, u64),
    pub previous_calls: (u64, u64),
    pub costs: CallCosts,
    pub dropped: u64,
    pub window_open: bool,
    pub events: u64,
    pub previous_step_seconds: f64,
}

/// Renders the text file; returns it and the interval's mean step time (for the next file).
pub fn render(s: &Sample, labels: &str) -> (String, f64) {
    let sec = |ticks: u64| ticks as f64 / s.ticks_per_sec.max(1.0);
    let t = &s.tally;
    let p = &s.previous;
    let interval = s.interval_s.max(1e-9);
    let busy = (sec(t.kernel_ticks - p.kernel_ticks) / interval).min(1.0);
    let nccl_s = sec(t.nccl_kernel_ticks - p.nccl_kernel_ticks);
    let busbw = if nccl_s > 0.0 { (t.collective_bus_bytes - p.collective_bus_bytes) as f64 / nccl_s } else { 0.0 };
    let steps = t.steps - p.steps;
    let step_s = if steps > 0 { sec(t.step_ticks - p.step_ticks) / steps as f64 } else { s.previous_step_seconds };
    let overhead_total =
        (s.calls.0 - s.calls.1) as f64 * s.costs.open_ns * 1e-9 + s.calls.1 as f64 * s.costs.closed_ns * 1e-9;
    let d_calls = s.calls.0 - s.previous_calls.0;
    let d_closed = s.calls.1 - s.previous_calls.1;
    let overhead_interval =
        (d_calls - d_closed) as f64 * s.costs.open_ns * 1e-9 + d_closed as f64 * s.costs.closed_ns * 1e-9;
    let mut out = String::with_capacity(4096);
    let l = labels;
    family(
        &mut out,
        "tprof_gpu_busy_ratio",
        "gauge",
        "Kernel time over the last interval divided by its length (capped at 1).",
        l,
        busy,
    );
    family(&mut out, "tprof_kernel_seconds_total", "counter", "GPU kernel time seen by tprof.", l, sec(t.kernel_ticks));
    family(&mut out, "tprof_kernels_total", "counter", "GPU kernels seen by tprof.", l, t.kernels as f64);
    family(&mut out, "tprof_collectives_total", "counter", "Data-moving NCCL calls.", l, t.collectives as f64);
    family(
        &mut out,
        "tprof_collective_bytes_total",
        "counter",
        "Bytes of data-moving NCCL calls (per rank, nccl-tests convention).",
        l,
        t.collective_bytes as f64,
    );
    family(
        &mut out,
        "tprof_collective_busbw_bytes_per_second",
        "gauge",
        "NCCL bus bandwidth over the last interval: bytes x bus factor / NCCL kernel time.",
        l,
        busbw,
    );
    family(&mut out, "tprof_steps_total", "counter", "Training steps completed (NVTX step ranges).", l, t.steps as f64);
    family(
        &mut out,
        "tprof_step_seconds_total",
        "counter",
        "Sum of the completed steps' durations.",
        l,
        sec(t.step_ticks),
    );
    family(
        &mut out,
        "tprof_step_seconds",
        "gauge",
        "Mean step time over the last interval (the previous value when no step completed).",
        l,
        step_s,
    );
    family(
        &mut out,
        "tprof_dropped_events_total",
        "counter",
        "Events tprof dropped because a thread buffer was full.",
        l,
        s.dropped as f64,
    );
    family(&mut out, "tprof_ring_events_total", "counter", "Events written into the ring file.", l, s.events as f64);
    family(&mut out, "tprof_intercepted_calls_total", "counter", "CUDA calls tprof intercepted.", l, s.calls.0 as f64);
    family(
        &mut out,
        "tprof_intercepted_calls_unrecorded_total",
        "counter",
        "Intercepted calls while the capture window was closed.",
        l,
        s.calls.1 as f64,
    );
    family(
        &mut out,
        "tprof_capture_window_open",
        "gauge",
        "1 while the capture window is open.",
        l,
        if s.window_open { 1.0 } else { 0.0 },
    );
    family(
        &mut out,
        "tprof_overhead_seconds_total",
        "counter",
        "Estimated host time tprof added to intercepted calls (calls x measured per-call cost).",
        l,
        overhead_total,
    );
    family(
        &mut out,
        "tprof_overhead_ratio",
        "gauge",
        "Estimated tprof overhead over the last interval divided by its length.",
        l,
        overhead_interval / interval,
    );
    family(
        &mut out,
        "tprof_call_cost_seconds",
        "gauge",
        "Measured per-call cost of tprof with the window open.",
        l,
        s.costs.open_ns * 1e-9,
    );
    (out, step_s)
}

/// The metrics path with `%p` replaced by the pid and `%r` by the rank (`x` without one), so the
/// processes of a job can share one setting (`TPROF_METRICS_FILE=/var/lib/node_exporter/tprof-%r.prom`).
pub fn resolve_path(template: &Path, pid: u32, rank: Option<u32>) -> std::path::PathBuf {
    let s = template.to_string_lossy();
    if !s.contains('%') {
        return template.to_path_buf();
    }
    let rank = rank.map(|r| r.to_string()).unwrap_or_else(|| "x".into());
    std::path::PathBuf::from(s.replace("%p", &pid.to_string()).replace("%r", &rank))
}

/// Writes the file now (writer thread).
pub fn write_now() {
    let Some(template) = config().metrics_file.as_ref() else { return };
    let path = &resolve_path(template, std::process::id(), process::job_identity().0);
    let (now_ticks, now_mono, _) = ticks::sync_pair();
    let tps = ticks_per_sec(now_ticks, now_mono);
    let mut prev_guard = PREVIOUS.lock().unwrap_or_else(|e| e.into_inner());
    let start_mono = START.lock().unwrap_or_else(|e| e.into_inner()).map(|(_, m)| m).unwrap_or(now_mono);
    let prev = prev_guard.get_or_insert_with(|| Previous {
        mono_ns: start_mono,
        ticks: 0,
        tally: Tally::default(),
        calls: (0, 0),
        costs: None,
        step_seconds: f64::NAN,
    });
    let costs = *prev.costs.get_or_insert_with(measure_call_costs);
    let st = capture::status();
    let sample = Sample {
        tally: tallies::tally_snapshot(),
        previous: prev.tally,
        interval_s: (now_mono.saturating_sub(prev.mono_ns)) as f64 / 1e9,
        ticks_per_sec: tps,
        calls: call_counters::calls(),
        previous_calls: prev.calls,
        costs,
        dropped: st.dropped,
        window_open: st.open,
        events: st.events,
        previous_step_seconds: prev.step_seconds,
    };
    let (mut text, step_s) = render(&sample, &labels());
    let mut watch = WATCH.lock().unwrap_or_else(|e| e.into_inner());
    if sample.tally.steps > prev.tally.steps {
        // The median of the interval's steps: a few long steps do not make a slow interval.
        let mut d = tallies::recent_steps(prev.tally.steps, sample.tally.steps);
        d.sort_unstable();
        let median_s = d.get(d.len() / 2).map(|&t| t as f64 / tps.max(1.0)).unwrap_or(step_s);
        watch.observe(median_s);
    }
    let l = labels();
    for (name, kind, help, value) in watch.families() {
        family(&mut text, name, kind, help, &l, value);
    }
    drop(watch);
    prev.mono_ns = now_mono;
    prev.ticks = now_ticks;
    prev.tally = sample.tally;
    prev.calls = sample.calls;
    prev.step_seconds = step_s;
    drop(prev_guard);
    if let Err(e) = replace_file(path, text.as_bytes()) {
        if !WARNED.swap(true, Ordering::AcqRel) {
            messages::warn_line(&format!(
                "cannot write TPROF_METRICS_FILE={} ({e}); metrics are not exported",
                path.display()
            ));
        }
    }
}

/// Atomic replace: an owner-only temporary file in the same directory, then `rename`.
pub fn replace_file(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "metrics".into());
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&tmp)?;
    let written = f.write_all(bytes).and_then(|_| f.flush());
    drop(f);
    if let Err(e) = written.and_then(|_| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_families_with_labels() {
        let tally = Tally {
            kernels: 10,
            kernel_ticks: 500_000_000,
            nccl_kernel_ticks: 100_000_000,
            collectives: 4,
            collective_bytes: 4000,
            collective_bus_bytes: 4000,
            steps: 2,
            step_ticks: 1_000_000_000,
        };
        let s = Sample {
            tally,
            previous: Tally::default(),
            interval_s: 1.0,
            ticks_per_sec: 1e9,
            calls: (100, 40),
            previous_calls: (0, 0),
            costs: CallCosts { open_ns: 20.0, closed_ns: 2.0 },
            dropped: 3,
            window_open: true,
            events: 99,
            previous_step_seconds: f64::NAN,
        };
        let (text, step) = render(&s, "{rank=\"0\",host=\"h\",pid=\"1\"}");
        assert_eq!(step, 0.5);
        assert!(text.contains("tprof_gpu_busy_ratio{rank=\"0\",host=\"h\",pid=\"1\"} 0.5\n"), "{text}");
        assert!(text.contains("# TYPE tprof_kernels_total counter\n"));
        assert!(text.contains("tprof_collective_busbw_bytes_per_second{rank=\"0\",host=\"h\",pid=\"1\"} 40000\n"));
        assert!(text.contains("tprof_dropped_events_total{rank=\"0\",host=\"h\",pid=\"1\"} 3\n"));
        let help = text.lines().filter(|l| l.starts_with("# HELP")).count();
        let samples = text.lines().filter(|l| !l.starts_with('#')).count();
        assert_eq!(help, samples);
    }

    #[test]
    fn paths_per_process() {
        let p = resolve_path(Path::new("/m/tprof-%r-%p.prom"), 42, Some(3));
        assert_eq!(p, Path::new("/m/tprof-3-42.prom"));
        assert_eq!(resolve_path(Path::new("/m/t-%r.prom"), 1, None), Path::new("/m/t-x.prom"));
        assert_eq!(resolve_path(Path::new("/m/t.prom"), 1, None), Path::new("/m/t.prom"));
    }

    #[test]
    fn replace_is_atomic_and_private() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("tprof.prom");
        replace_file(&p, b"a 1\n").unwrap();
        replace_file(&p, b"a 2\n").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a 2\n");
        assert_eq!(std::fs::metadata(&p).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
