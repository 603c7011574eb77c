//! The NIC counters in the network analysis: 2 simulated nodes x 4 ranks (LOCAL_RANK 0-3 on each,
//! so each node's local rank 0 samples its machine), a fake sysfs per node whose InfiniBand port
//! counters the simulated NCCL advances with the bytes its ring edges across nodes carry, plus other
//! traffic where asked (`SIMGPU_NIC_OTHER_GBPS_NODE<k>`, which NCCL's share of that NIC loses).
//! The host sampler reads them (`TPROF_HOST_HZ=50`) and `diagnose` tells a full NIC from an idle one:
//!
//! - 20 GB/s of other traffic on node 1's 25 GB/s NIC: `network_bound` with `cause: shared_nic`
//!   naming simnode1, ~20 GB/s of other traffic, the NIC ~full; not a degraded link;
//! - node 1's NIC at 5 GB/s with nothing else on it: `topology` `degraded_link`, its counters at
//!   ~20% of the line rate (5 of 25 GB/s);
//! - the world communicator at the line rate: `network_bound` with `cause: line_rate`, the
//!   counters at ~100% of the line rate.
//!
//! The truth is the simulator's: its NIC rates and the collectives' bus bytes (`truth_busbw`).
//! Prerequisites: `cargo build --release --workspace`, `make -C tests/simgpu`, `make -C tests/programs`.

use std::process::Command;

use serde_json::Value;
use tprof_e2e::diagnose::{diagnose_json, tprof_bin, verdict_table};
use tprof_e2e::fake_sysfs;
use tprof_e2e::programs::programs_dir;
use tprof_e2e::shim::*;

struct Profiled {
    diagnosis: Value,
    plugin: Value,
    truth: Vec<Value>,
}

/// Truth busbw of the all-reduces: nccl-tests bus bytes over the kernel times.
fn truth_busbw(truth: &[Value]) -> f64 {
    let (mut bus, mut dur) = (0.0, 0.0);
    for t in truth.iter().filter(|t| t["type"] == "collective" && t["op"] == "AllReduce") {
        let n = t["nranks"].as_u64().unwrap() as f64;
        bus += 2.0 * (n - 1.0) / n * t["bytes"].as_u64().unwrap() as f64;
        dur += (t["end_ns"].as_u64().unwrap() - t["start_ns"].as_u64().unwrap()) as f64;
    }
    bus / dur
}

fn profile(name: &str, iters: &str, extra_env: &[(&str, &str)]) -> Profiled {
    let prog = programs_dir().join("rt12_nccl_nodes");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let sys = temp_dir(&format!("{name}-sys"));
    let root = fake_sysfs::build(&sys, 2, 4, true);
    let args = ["--ranks", "8", "--iters", iters, "--bytes", "67108864"];
    let mut spec = RunSpec::new(&prog, &args, simgpu_dir())
        .env("SIMGPU_NODES", "2")
        .env("NCCL_NODES_LOCAL_RANKS", "4")
        .env("SIMGPU_NIC_COUNTERS", &fake_sysfs::counters_pattern(&sys))
        .env("TPROF_HOST_HZ", "50")
        .env("TPROF_RING_MB", "8")
        .env("TPROF_SYSROOT", &root);
    for (k, v) in extra_env {
        spec = spec.env(k, v);
    }
    let run = spec.run(name);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let out = Command::new(tprof_bin()).arg("summary").arg(&run.out_dir).arg("--json").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap();
    let diagnosis = diagnose_json(&run.out_dir, &["--all"]);
    let truth = read_truth(&run.truth_dir);
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
    let _ = std::fs::remove_dir_all(&sys);
    Profiled { diagnosis, plugin: summary["nccl_plugin"].clone(), truth }
}

fn fired<'a>(p: &'a Profiled, kind: &str) -> Option<&'a Value> {
    p.diagnosis["verdicts"].as_array().unwrap().iter().find(|v| v["kind"] == kind)
}

fn num(e: &Value, key: &str) -> f64 {
    e[key].as_f64().unwrap_or_else(|| panic!("no {key}: {e}"))
}

#[test]
fn other_traffic_filling_one_nodes_nic_is_a_shared_nic_not_a_degraded_link() {
    let p = profile("nccl-nic-shared", "60", &[("SIMGPU_NIC_OTHER_GBPS_NODE1", "20")]);
    let table = verdict_table(&p.diagnosis);
    assert!(fired(&p, "topology").is_none(), "a full NIC is not a degraded link:\n{table}");
    let v = fired(&p, "network_bound").unwrap_or_else(|| panic!("no network_bound:\n{table}\n{:#}", p.plugin));
    let e = &v["evidence"];
    assert_eq!((e["cause"].as_str(), e["nic_host"].as_str()), (Some("shared_nic"), Some("simnode1")), "{e}");
    // NCCL gets 25 - 20 = 5 GB/s through node 1's NIC; the counters carry those plus 20 GB/s.
    let other = num(e, "other_traffic_gbps");
    assert!((other - 20.0).abs() <= 3.0, "20 GB/s of other traffic: {e}");
    let busy = num(e, "nic_busy_share");
    assert!((busy - 1.0).abs() <= 0.15, "the NIC is full (25 of 25 GB/s): {e}");
    let truth = truth_busbw(&p.truth);
    assert!((truth - 5.0).abs() < 0.5, "the simulator gave NCCL 5 GB/s: {truth}");
    let got = num(e, "busbw_gbps");
    assert!((got - truth).abs() <= 0.02 * truth, "busbw {got} vs {truth}");
    let ranks: Vec<u64> = v["ranks"].as_array().unwrap().iter().map(|r| r.as_u64().unwrap()).collect();
    assert!(!ranks.is_empty() && ranks.iter().all(|&r| r >= 4), "node 1's ranks: {ranks:?}");
}

#[test]
fn a_slow_link_with_idle_counters_is_a_degraded_link() {
    let p = profile("nccl-nic-degraded", "60", &[("SIMGPU_NIC_GBPS_NODE1", "5")]);
    let table = verdict_table(&p.diagnosis);
    assert!(fired(&p, "network_bound").is_none(), "an idle NIC is not network-bound:\n{table}");
    let v = fired(&p, "topology").unwrap_or_else(|| panic!("no topology:\n{table}\n{:#}", p.plugin));
    let e = &v["evidence"];
    assert_eq!(e["cause"], "degraded_link", "{e}");
    assert_eq!(e["degraded_hosts"], serde_json::json!(["simnode1"]), "{e}");
    let busy = num(e, "nic_busy_share");
    assert!((busy - 0.2).abs() <= 0.05, "5 of 25 GB/s in use: {e}");
}

#[test]
fn nccl_at_the_line_rate_shows_in_the_counters() {
    let p = profile("nccl-nic-line", "250", &[]);
    let table = verdict_table(&p.diagnosis);
    assert!(fired(&p, "topology").is_none(), "{table}");
    let v = fired(&p, "network_bound").unwrap_or_else(|| panic!("no network_bound:\n{table}\n{:#}", p.plugin));
    let e = &v["evidence"];
    assert_eq!(e["cause"], "line_rate", "{e}");
    let busy = num(e, "nic_busy_share");
    let truth = truth_busbw(&p.truth) / 25.0;
    assert!((busy - truth).abs() <= 0.1, "the counters carry NCCL's {truth} of the line rate: {e}");
    assert_eq!(e["other_traffic_gbps"], Value::Null, "{e}");
}
