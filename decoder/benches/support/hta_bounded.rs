//! HTA on a trace too big to wait for: its load + temporal breakdown run with a wall-clock budget and
//! a memory cap, stopped when either runs out. A stopped run still measures something: the CPU time
//! HTA had spent without finishing, a lower bound on what it needs, so the ratio to tprof's CPU time
//! is a lower bound too (">= 20x HTA" on a generated 1 GB trace, issue #19).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{children_cpu, proc_status_kb, HTA_SCRIPT};

/// What a bounded HTA run came to.
pub enum HtaOutcome {
    /// It finished: load + breakdown seconds measured inside python, and its peak RSS.
    Finished { inner_s: f64, peak_rss_kb: u64 },
    /// It was stopped (`why`: "time" or "memory") after `wall_s`, having spent `cpu_s` CPU seconds
    /// (start-up and imports included) and reached `peak_rss_kb`.
    Stopped { why: &'static str, wall_s: f64, cpu_s: f64, peak_rss_kb: u64 },
    /// It exited with an error (its last line of stderr).
    Failed(String),
}

/// CPU seconds python spends importing HTA (taken off a stopped run's CPU time for the bound).
pub fn import_cpu(py: &Path) -> f64 {
    let before = children_cpu();
    let ok = Command::new(py)
        .args(["-c", "import hta.trace_analysis"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    match (ok, children_cpu().zip(before)) {
        (true, Some((a, b))) => (a - b).max(0.0),
        _ => 0.0,
    }
}

/// Runs HTA's load + temporal breakdown on the trace directory `dir`, stopped after `budget_s` wall
/// seconds or once its resident memory passes `max_rss_mb`.
pub fn run(py: &Path, dir: &Path, budget_s: u64, max_rss_mb: u64) -> HtaOutcome {
    let script = std::env::temp_dir().join(format!("tprof-bench-hta-bounded-{}.py", std::process::id()));
    if let Err(e) = std::fs::write(&script, HTA_SCRIPT) {
        return HtaOutcome::Failed(format!("cannot write {}: {e}", script.display()));
    }
    let err_file = script.with_extension("err");
    let stderr = match std::fs::File::create(&err_file) {
        Ok(f) => f,
        Err(e) => return HtaOutcome::Failed(format!("cannot create {}: {e}", err_file.display())),
    };
    let before = children_cpu();
    let t0 = Instant::now();
    let mut child = match Command::new(py)
        .arg(&script)
        .arg(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return HtaOutcome::Failed(format!("cannot start {}: {e}", py.display())),
    };
    let pid = child.id();
    let mut peak_kb = 0;
    let mut stopped = None;
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break Some(st);
        }
        peak_kb = peak_kb.max(proc_status_kb(pid, "VmHWM:").unwrap_or(0));
        if t0.elapsed() > Duration::from_secs(budget_s) {
            stopped = Some("time");
        } else if proc_status_kb(pid, "VmRSS:").unwrap_or(0) > max_rss_mb << 10 {
            stopped = Some("memory");
        }
        if stopped.is_some() {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let wall_s = t0.elapsed().as_secs_f64();
    // The child has been waited for, finished or killed: its CPU time is in this process's
    // children's times.
    let cpu_s = children_cpu().zip(before).map(|(a, b)| a - b).unwrap_or(0.0);
    let err = std::fs::read_to_string(&err_file).unwrap_or_default();
    let _ = std::fs::remove_file(&script);
    let _ = std::fs::remove_file(&err_file);
    if let Some(why) = stopped {
        return HtaOutcome::Stopped { why, wall_s, cpu_s, peak_rss_kb: peak_kb };
    }
    let inner = err
        .lines()
        .find(|l| l.starts_with("{\"load\""))
        .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .and_then(|v| Some(v["load"].as_f64()? + v["breakdown"].as_f64()?));
    match (status, inner) {
        (Some(st), Some(inner_s)) if st.success() => HtaOutcome::Finished { inner_s, peak_rss_kb: peak_kb },
        _ => HtaOutcome::Failed(err.lines().last().unwrap_or("no output").to_string()),
    }
}
