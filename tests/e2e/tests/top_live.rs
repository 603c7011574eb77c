//! `tprof top --once` end to end: against a running simtrain it shows every rank with a step time
//! within 5% of what `tprof summary` reports for the same steps once the run is over; reading a
//! ring while it is written takes only committed data: a run killed mid-way (SIGKILL) is shown
//! consistently (the same steps as `summary`, frame after frame, no damage).
//!
//! Run: `make -C tests/simgpu && make -C tests/programs && cargo build --release -p tprof-shim -p tprof-decoder &&
//!       cargo test -p tprof-e2e --release --test top_live`

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use tprof_e2e::runs::{start, tprof_json, tprof_text};

fn top(dir: &Path) -> Value {
    tprof_json(&["top", dir.to_str().unwrap(), "--once", "--json"])
}

/// Polls `top --once` until every one of `ranks` ranks shows at least `steps` steps.
fn wait_for_steps(dir: &Path, ranks: usize, steps: u64) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let ready = std::fs::read_dir(dir).map(|d| d.count() >= ranks).unwrap_or(false);
        if ready {
            let v = top(dir);
            let r = v["ranks"].as_array().unwrap();
            if r.len() == ranks && r.iter().all(|x| x["steps"].as_u64().unwrap_or(0) >= steps) {
                return v;
            }
        }
        assert!(Instant::now() < deadline, "top never showed {ranks} ranks with {steps} steps");
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn summary_steps(dir: &Path) -> Value {
    tprof_json(&["summary", dir.to_str().unwrap(), "--json"])
}

/// Mean duration of rank `label`'s steps `a..=b` in the summary.
fn summary_mean(s: &Value, label: &str, a: u64, b: u64) -> f64 {
    let r = s["ranks"].as_array().unwrap().iter().find(|r| r["label"] == label).unwrap();
    let d: Vec<f64> = r["steps"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|st| (a..=b).contains(&st["index"].as_u64().unwrap()))
        .map(|st| st["duration_ns"].as_f64().unwrap())
        .collect();
    assert_eq!(d.len() as u64, b - a + 1, "summary lacks steps {a}-{b} of {label}");
    d.iter().sum::<f64>() / d.len() as f64
}

#[test]
fn top_once_shows_every_rank_of_a_running_job() {
    let (running, rings, _truth) = start(2, 300, &[]);
    let first = wait_for_steps(rings.path(), 2, 30);
    let text = tprof_text(&["top", rings.path().to_str().unwrap(), "--once"]);
    let second = top(rings.path());
    let out = running.finish(Duration::from_secs(120));
    assert_eq!(out.code, 0, "{}", out.describe());
    assert!(text.starts_with("== tprof top: 2 ranks"), "{text}");
    // Frames taken while it ran only move forward.
    for (a, b) in first["ranks"].as_array().unwrap().iter().zip(second["ranks"].as_array().unwrap()) {
        assert_eq!(a["label"], b["label"]);
        assert!(b["steps"].as_u64() >= a["steps"].as_u64(), "{a} then {b}");
        assert!(text.contains(a["label"].as_str().unwrap()), "{text}");
    }
    // Step times against the finished run's summary of the same steps.
    let s = summary_steps(rings.path());
    for r in first["ranks"].as_array().unwrap() {
        let label = r["label"].as_str().unwrap();
        let [a, b] = [r["window"][0].as_u64().unwrap(), r["window"][1].as_u64().unwrap()];
        let want = summary_mean(&s, label, a, b);
        let got = r["step_ns"].as_f64().unwrap();
        assert!((got - want).abs() <= 0.05 * want, "{label} steps {a}-{b}: top {got} vs summary {want}");
        assert_eq!(r["alive"], true, "{r}");
    }
}

#[test]
fn a_run_killed_midway_is_shown_consistently() {
    let (mut running, rings, _truth) = start(2, 5000, &[]);
    let live = wait_for_steps(rings.path(), 2, 40);
    // SIGKILL every rank (no exit handler runs), then the launcher.
    for r in live["ranks"].as_array().unwrap() {
        let pid = r["pid"].as_u64().unwrap().to_string();
        let _ = std::process::Command::new("kill").args(["-KILL", &pid]).status();
    }
    running.terminate();
    let out = running.finish(Duration::from_secs(30));
    assert_ne!(out.code, 0, "the killed run should fail: {}", out.describe());
    let a = top(rings.path());
    std::thread::sleep(Duration::from_millis(300));
    let b = top(rings.path());
    let s = summary_steps(rings.path());
    assert_eq!(a["ranks"].as_array().unwrap().len(), 2, "{a:#}");
    for ((x, y), r) in
        a["ranks"].as_array().unwrap().iter().zip(b["ranks"].as_array().unwrap()).zip(s["ranks"].as_array().unwrap())
    {
        assert_eq!(x, y, "two frames of a dead job differ");
        assert_eq!(x["label"], r["label"]);
        assert_eq!(
            x["steps"].as_u64(),
            Some(r["steps"].as_array().unwrap().len() as u64),
            "top vs summary: {x} vs {}",
            r["steps"].as_array().unwrap().len()
        );
        assert!(x["steps"].as_u64().unwrap() >= 40 && x["alive"] == false, "{x}");
    }
    let damage: Vec<&Value> =
        a["notes"].as_array().unwrap().iter().filter(|n| n.as_str().unwrap_or("").contains("damage")).collect();
    assert!(damage.is_empty(), "{a:#}");
}
