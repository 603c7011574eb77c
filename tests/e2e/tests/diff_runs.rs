//! `tprof diff` end to end: two simtrain runs on the simulated GPU that differ in one switch.
//! The change must be named with the right sign and a size within 10% of the ground truth (the
//! runs' own wall time per step, and the simulated GPU's record of every collective); two runs of
//! one configuration must show no significant change.
//!
//! Run: `make -C tests/simgpu && make -C tests/programs && cargo build --release -p tprof-shim -p tprof-decoder &&
//!       cargo test -p tprof-e2e --release --test diff_runs`

use tprof_e2e::programs::Truth;
use tprof_e2e::runs::{profile, tprof_json, tprof_text, true_step_s};

const STEPS: u32 = 120;

fn diff(base: &std::path::Path, new: &std::path::Path) -> serde_json::Value {
    tprof_json(&["diff", base.to_str().unwrap(), new.to_str().unwrap(), "--json"])
}

fn category(d: &serde_json::Value, name: &str) -> f64 {
    d["breakdown"].as_array().unwrap().iter().find(|c| c["category"] == name).unwrap()["change_ns_per_step"]
        .as_f64()
        .unwrap()
}

#[test]
fn data_stall_is_named_with_its_size_and_the_same_configuration_is_no_change() {
    let base = profile(2, STEPS, &[], &[]);
    let stall = profile(2, STEPS, &["--data-stall", "40"], &[]);
    let again = profile(2, STEPS, &[], &[]);

    let d = diff(base.rings.path(), stall.rings.path());
    let truth_ns = (true_step_s(&stall.out) - true_step_s(&base.out)) * 1e9;
    let st = &d["step_time"];
    let mean_change = st["new"]["mean_ns"].as_f64().unwrap() - st["base"]["mean_ns"].as_f64().unwrap();
    let report = format!("truth {:.3} ms/step\n{d:#}", truth_ns / 1e6);
    assert!(truth_ns > 10e6, "the stall should cost >10 ms/step: {report}");
    assert_eq!(st["significant"], true, "{report}");
    assert!((mean_change - truth_ns).abs() <= 0.10 * truth_ns, "step time change {mean_change}: {report}");
    // Each rank loses its own stall (GPU idle at step start: data) or waits for its peer's
    // (wait, at the all-reduce): together the step-time change.
    let (data, wait) = (category(&d, "data"), category(&d, "wait"));
    assert!(data > 0.3 * truth_ns, "data loading change {data}: {report}");
    assert!((data + wait - truth_ns).abs() <= 0.10 * truth_ns, "data + wait change {}: {report}", data + wait);
    let headline = d["headline"].as_str().unwrap();
    assert!(headline.starts_with("NEW is ") && headline.contains("slower"), "{headline}");
    assert!(headline.contains("data loading +"), "{headline}");
    assert!(d["verdicts"]["appeared"].as_array().unwrap().iter().any(|v| v["kind"] == "data_loading"), "{report}");
    // And the other way round: faster, data loading down.
    let back = diff(stall.rings.path(), base.rings.path());
    assert!(back["headline"].as_str().unwrap().contains("faster"), "{}", back["headline"]);
    assert!(category(&back, "data") + category(&back, "wait") < -0.9 * truth_ns, "{back:#}");

    // Two runs of one configuration: within run-to-run noise.
    let same = diff(base.rings.path(), again.rings.path());
    assert_eq!(same["step_time"]["significant"], false, "{same:#}");
    assert!(same["headline"].as_str().unwrap().starts_with("no significant change"), "{}", same["headline"]);
    assert!(same["verdicts"]["appeared"].as_array().unwrap().is_empty(), "{same:#}");
    assert!(
        same["kernels"]["new"].as_array().unwrap().is_empty() && same["kernels"]["gone"].as_array().unwrap().is_empty(),
        "{same:#}"
    );

    // The text form and the report's baseline section say the same.
    let text = tprof_text(&["diff", base.rings.path().to_str().unwrap(), stall.rings.path().to_str().unwrap()]);
    assert!(text.starts_with(&format!("== {headline}")), "{text}");
    let page = base.rings.path().join("with-baseline.html");
    tprof_text(&[
        "report",
        stall.rings.path().to_str().unwrap(),
        "--baseline",
        base.rings.path().to_str().unwrap(),
        "-o",
        page.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Compared with the baseline") && html.contains("data loading +"), "no baseline section");
}

/// Mean duration of the all-reduces the simulated GPU ran (ground truth), ns.
fn truth_allreduce_ns(dir: &std::path::Path) -> f64 {
    let t = Truth::load(dir);
    let d: Vec<u64> = t
        .of_kind("collective")
        .filter(|r| r.op.as_deref() == Some("AllReduce"))
        .filter_map(|r| r.duration_ns())
        .collect();
    assert!(!d.is_empty(), "no all-reduce in the truth: {}", t.summary());
    d.iter().sum::<u64>() as f64 / d.len() as f64
}

#[test]
fn two_against_four_ranks_compares_per_step() {
    let two = profile(2, STEPS, &[], &[]);
    let four = profile(4, STEPS, &[], &[]);
    let d = diff(two.rings.path(), four.rings.path());
    let report = format!("{d:#}");
    assert_eq!(d["step_time"]["base"]["ranks"], 2, "{report}");
    assert_eq!(d["step_time"]["new"]["ranks"], 4, "{report}");
    assert!(d["headline"].as_str().unwrap().contains("(2 -> 4 ranks)"), "{report}");
    // Step time: the all-reduces overlap with backward, so the step hardly changes; against the
    // runs' own wall time per step (which also holds the longer first step of 4 ranks' NCCL set-up,
    // left out of the diff as warm-up) the change agrees within 5% of a step.
    let truth_ns = (true_step_s(&four.out) - true_step_s(&two.out)) * 1e9;
    let st = &d["step_time"];
    let change = st["new"]["mean_ns"].as_f64().unwrap() - st["base"]["mean_ns"].as_f64().unwrap();
    let base_ns = st["base"]["mean_ns"].as_f64().unwrap();
    assert!((change - truth_ns).abs() <= 0.05 * base_ns, "change {change} truth {truth_ns}: {report}");
    // The all-reduce: per step and rank the same number of calls, each longer with 4 ranks (bus
    // factor 2(n-1)/n), by what the simulated GPU ran.
    let ar: Vec<&serde_json::Value> = d["collectives"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["op"] == "AllReduce" && !c["base"].is_null() && !c["new"].is_null())
        .collect();
    assert_eq!(ar.len(), 1, "{report}");
    let (b, n) = (&ar[0]["base"], &ar[0]["new"]);
    assert_eq!((b["nranks"].as_u64(), n["nranks"].as_u64()), (Some(2), Some(4)), "{report}");
    assert!((b["calls_per_step"].as_f64().unwrap() - n["calls_per_step"].as_f64().unwrap()).abs() < 0.1, "{report}");
    let truth_change = truth_allreduce_ns(four.truth.path()) - truth_allreduce_ns(two.truth.path());
    let seen_change = n["mean_ns"].as_f64().unwrap() - b["mean_ns"].as_f64().unwrap();
    assert!(truth_change > 0.0, "{truth_change}");
    assert!(
        (seen_change - truth_change).abs() <= 0.10 * truth_change,
        "all-reduce change {seen_change} vs truth {truth_change}: {report}"
    );
}
