//! Fail-slow detection end to end: simtrain with one rank's GPU 20% slower from step 300 on
//! (`--slowdown-at 300 --slowdown-rank 1`) must get a `slowdown` verdict at step 300 +- 10 naming
//! rank 1 (its kernels grew), and the metrics file's watch must be in the slowdown state; a clean
//! 1000-step run must get no `slowdown` and a metrics file in the normal state.
//!
//! Run: `make -C tests/simgpu && make -C tests/programs && cargo build --release -p tprof-shim -p tprof-decoder &&
//!       cargo test -p tprof-e2e --release --test slowdown_detect`

use tprof_e2e::programs::TempDir;
use tprof_e2e::runs::{profile, tprof_json};

fn metric(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(&format!("{name}{{")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} not in the metrics file:\n{text}"))
}

fn slowdowns(d: &serde_json::Value) -> Vec<serde_json::Value> {
    d["verdicts"].as_array().unwrap().iter().filter(|v| v["kind"] == "slowdown").cloned().collect()
}

#[test]
fn one_rank_slowing_from_step_300_is_found() {
    let m = TempDir::new("slowdown-metrics");
    let file = m.path().join("m-%r.prom");
    let env = [("TPROF_METRICS_FILE", file.to_str().unwrap()), ("TPROF_METRICS_INTERVAL", "300ms")];
    let run = profile(2, 500, &["--slowdown-at", "300", "--slowdown-rank", "1", "--slowdown-pct", "20"], &env);
    let d = tprof_json(&["diagnose", run.rings.path().to_str().unwrap(), "--json", "--all"]);
    let found = slowdowns(&d);
    assert_eq!(found.len(), 1, "{d:#}");
    let v = &found[0];
    let step = v["steps"][0].as_u64().unwrap();
    assert!((290..=310).contains(&step), "began at step {step}: {v:#}");
    assert_eq!(v["ranks"], serde_json::json!([1]), "{v:#}");
    let e = &v["evidence"];
    let shift = e["shift"].as_f64().unwrap();
    assert!((0.12..=0.30).contains(&shift), "shift {shift}: {v:#}");
    assert_eq!(e["category"], "compute", "{v:#}");
    assert!(v["severity"].as_f64().unwrap() > 0.05, "{v:#}");
    // The shim's cheap watch saw it too (both ranks slowed: rank 0 waits for rank 1).
    let text = std::fs::read_to_string(m.path().join("m-1.prom")).expect("metrics file of rank 1");
    assert_eq!(metric(&text, "tprof_step_slowdown"), 1.0, "{text}");
    assert!(metric(&text, "tprof_step_slowdown_ratio") >= 1.1, "{text}");
    assert!(metric(&text, "tprof_step_seconds_baseline") > 0.0, "{text}");
}

#[test]
fn a_clean_1000_step_run_has_no_slowdown() {
    let m = TempDir::new("slowdown-metrics-clean");
    let file = m.path().join("m-%r.prom");
    let env = [("TPROF_METRICS_FILE", file.to_str().unwrap()), ("TPROF_METRICS_INTERVAL", "300ms")];
    let run = profile(2, 1000, &[], &env);
    let d = tprof_json(&["diagnose", run.rings.path().to_str().unwrap(), "--json", "--all"]);
    assert!(slowdowns(&d).is_empty(), "{d:#}");
    for r in 0..2 {
        let text = std::fs::read_to_string(m.path().join(format!("m-{r}.prom"))).expect("metrics file");
        assert_eq!(metric(&text, "tprof_step_slowdown"), 0.0, "rank {r}:\n{text}");
    }
}
