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

use serde_json::Value;
use tprof_e2e::diagnose::verdict_table;
use tprof_e2e::fake_sysfs;
use tprof_e2e::nccl_nodes::{self, truth_busbw, Profiled};

fn profile(name: &str, iters: &str, extra_env: &[(&str, &str)]) -> Profiled {
    let opts = fake_sysfs::Options { counters: true, ..Default::default() };
    nccl_nodes::profile(name, &["--iters", iters, "--bytes", "67108864"], extra_env, opts)
}

fn fired<'a>(p: &'a Profiled, kind: &str) -> Option<&'a Value> {
    p.fired(kind)
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
    let truth = truth_busbw(&p.truth, None);
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
    let truth = truth_busbw(&p.truth, None) / 25.0;
    assert!((busy - truth).abs() <= 0.1, "the counters carry NCCL's {truth} of the line rate: {e}");
    assert_eq!(e["other_traffic_gbps"], Value::Null, "{e}");
}
