//! Grouped NCCL calls, as one process driving two GPUs issues them (`ncclCommInitAll`, every call
//! inside `ncclGroupStart/End`): the kernels a group end launches share its correlation id, and each
//! must be paired with its own call. Checked against the simulated GPU's ground truth: every call
//! GPU-timed, per-size busbw of every collective within 2% of the truth's, no false verdict.
//!
//! Prerequisites: `cargo build --release --workspace`, `make -C tests/simgpu`, `make -C tests/programs`.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::Value;
use tprof_e2e::diagnose::{summary_json, tprof_bin};
use tprof_e2e::programs::programs_dir;
use tprof_e2e::shim::*;

/// nccl-tests' bus bytes for one rank's call of `bytes` (per-rank send size, as the truth records it).
fn bus_bytes(op: &str, bytes: f64, n: f64) -> f64 {
    match op {
        "AllReduce" => 2.0 * (n - 1.0) / n * bytes,
        "AllGather" | "ReduceScatter" | "AllToAll" => (n - 1.0) * bytes,
        _ => bytes,
    }
}

/// The size bucket tprof files a call under: its message bytes (all-gather and reduce-scatter count
/// the whole buffer, as nccl-tests does) rounded up to a power of two.
fn bucket(op: &str, bytes: u64, n: u64) -> u64 {
    let b = if matches!(op, "AllGather" | "ReduceScatter") { bytes * n } else { bytes };
    b.next_power_of_two()
}

#[test]
fn grouped_collectives_on_two_devices_match_the_truth() {
    let prog = programs_dir().join("rt12_nccl_grouped");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let run = RunSpec::new(&prog, &[], simgpu_dir()).run("nccl-grouped");
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert!(run.stdout().contains("180 grouped calls on 2 devices"), "{}", run.stdout());

    // Truth: per (op, bucket) the nccl-tests busbw from each instance's shortest kernel (the last rank
    // to arrive), over instances (comm, seq) of the collectives.
    let truth = read_truth(&run.truth_dir);
    let mut instances: BTreeMap<(String, u64, String), (f64, u64, u64)> = BTreeMap::new();
    for t in truth.iter().filter(|t| t["type"] == "collective") {
        let op = t["op"].as_str().unwrap().to_string();
        if !matches!(op.as_str(), "AllReduce" | "AllGather" | "ReduceScatter" | "Broadcast") {
            continue;
        }
        let (bytes, n) = (t["bytes"].as_u64().unwrap(), t["nranks"].as_u64().unwrap());
        let dur = t["end_ns"].as_u64().unwrap() - t["start_ns"].as_u64().unwrap();
        let key = (t["comm"].as_str().unwrap().to_string(), t["seq"].as_u64().unwrap(), op.clone());
        let e = instances.entry(key).or_insert((bus_bytes(&op, bytes as f64, n as f64), bucket(&op, bytes, n), dur));
        e.2 = e.2.min(dur);
    }
    let mut expected: BTreeMap<(String, u64), (f64, u64)> = BTreeMap::new();
    for ((_, _, op), (bus, b, dur)) in instances {
        let e = expected.entry((op, b)).or_default();
        e.0 += bus;
        e.1 += dur;
    }
    assert_eq!(expected.len(), 12, "4 collectives x 3 sizes in the truth");

    let summary = summary_json(&run.out_dir);
    let rows = summary["collectives"].as_array().expect("collectives");
    let mut calls = 0;
    for r in rows {
        let op = r["op"].as_str().unwrap();
        let (count, timed) = (r["count"].as_u64().unwrap(), r["gpu_timed"].as_u64().unwrap());
        calls += count;
        assert_eq!(timed, count, "{op} <= {}: every call paired with its kernel", r["size_bucket"]);
        if let Some(&(bus, dur)) = expected.get(&(op.to_string(), r["size_bucket"].as_u64().unwrap())) {
            let truth_busbw = bus / dur as f64;
            let busbw = r["busbw_gbps"].as_f64().unwrap();
            assert!(
                (busbw - truth_busbw).abs() <= 0.02 * truth_busbw,
                "{op} <= {} B: busbw {busbw:.2} GB/s, truth {truth_busbw:.2} GB/s",
                r["size_bucket"]
            );
        } else {
            assert!(matches!(op, "Send" | "Recv"), "unexpected row {r}");
        }
    }
    assert_eq!(calls, 180, "every grouped call in the summary");

    // The diagnoses pair calls and kernels the same way: nothing is slow, nothing hangs.
    let out = Command::new(tprof_bin()).arg("diagnose").arg(&run.out_dir).arg("--json").output().unwrap();
    let diag: Value = serde_json::from_slice(&out.stdout).unwrap();
    let alarms: Vec<&Value> = diag["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["severity"].as_f64().unwrap_or(0.0) > 0.05)
        .filter(|v| matches!(v["kind"].as_str(), Some("slow_collective" | "hang" | "desync" | "straggler")))
        .collect();
    assert!(alarms.is_empty(), "false verdicts: {alarms:#?}");
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
}

#[test]
fn a_send_recv_pipeline_is_neither_a_desync_nor_a_hang() {
    // 4 stages, 24 micro-batches forward and backward, each exchange one group of recv + send.
    let prog = programs_dir().join("rt12_nccl_pipeline");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let run = RunSpec::new(&prog, &[], simgpu_dir()).run("nccl-pipeline");
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    assert_eq!(run.stdout().lines().count(), 4, "{}", run.stdout());
    let truth = read_truth(&run.truth_dir);
    let fused = truth.iter().filter(|t| t["type"] == "collective").count();
    assert!(fused > 0, "the truth has the pipeline's kernels");
    assert!(
        truth.iter().filter(|t| t["type"] == "collective").all(|t| !t["end_ns"].is_null()),
        "every transfer completed in the ground truth"
    );

    let summary = summary_json(&run.out_dir);
    let mut by_op: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in summary["collectives"].as_array().unwrap() {
        let e = by_op.entry(r["op"].as_str().unwrap().to_string()).or_default();
        e.0 += r["count"].as_u64().unwrap();
        e.1 += r["gpu_timed"].as_u64().unwrap();
    }
    // Stages 0 and 3 exchange with one neighbour, 1 and 2 with two: 24 + 48 + 48 + 24 of each.
    assert_eq!(by_op.get("Send"), Some(&(144, 144)), "{by_op:?}");
    assert_eq!(by_op.get("Recv"), Some(&(144, 144)), "{by_op:?}");

    let out = Command::new(tprof_bin()).arg("diagnose").arg(&run.out_dir).arg("--json").output().unwrap();
    let diag: Value = serde_json::from_slice(&out.stdout).unwrap();
    let alarms: Vec<&Value> = diag["verdicts"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["severity"].as_f64().unwrap_or(0.0) > 0.05)
        .filter(|v| {
            matches!(
                v["kind"].as_str(),
                Some("desync" | "hang" | "straggler" | "slow_collective" | "launch_bound" | "data_loading")
            )
        })
        .collect();
    assert!(alarms.is_empty(), "false verdicts: {alarms:#?}");
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
}
