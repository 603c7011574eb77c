//! The network verdicts and the topology records under the simulated NCCL on 2 simulated nodes x 4
//! ranks. Each rank reads a fake sysfs (`TPROF_SYSROOT=<dir>/r%r`): its node's host name, one
//! 200 Gb/s InfiniBand port per node (25 GB/s, the simulated NIC's default rate), GPUs on PCI bus
//! 0x10 + device. The simulated NVML reports 4 NVLink 4.0 links a GPU (100 GB/s, the simulated
//! intra-node link rate) within a node. Each verdict fires on its pathology and on nothing else:
//!
//! - contiguous groups of 4 (each inside a node): none of the three;
//! - the world communicator (2 nodes) at the NIC rate: `network_bound`;
//! - node 1's NIC at 5 GB/s on a 25 GB/s line rate: `topology` (`degraded_link`, naming simnode1);
//! - groups of 4 interleaved across the nodes: `topology` (`spread_over_nodes`);
//! - 4 KiB all-reduces across the nodes: `cross_node_latency`;
//! - groups of 4 with `NCCL_P2P_DISABLE=1` (SHM at the simulated 12 GB/s): `topology` (`p2p_disabled`);
//! - groups of 4 with `NCCL_MAX_NCHANNELS=2` (20 GB/s a channel): `topology` (`too_few_channels`);
//! - groups of 4 with `NCCL_PROTO=LL` (a quarter of the link): `topology` (`protocol_mismatch`);
//! - node 1's NIC on the other socket (NUMA node 1, path SYS; 10 GB/s through host memory):
//!   `topology` (`gpu_nic_cross_socket`, naming simnode1).
//!
//! The summary's topology (hosts, ranks per node, NIC line rate, NVLink) is checked against the fake
//! sysfs and the simulated NVML, and the busbw against what the links allow against the truth.
//!
//! Prerequisites: `cargo build --release --workspace`, `make -C tests/simgpu`, `make -C tests/programs`.

use serde_json::Value;
use tprof_e2e::diagnose::verdict_table;
use tprof_e2e::fake_sysfs;
use tprof_e2e::nccl_nodes::{self, truth_busbw, Profiled};

const KINDS: [&str; 3] = ["network_bound", "topology", "cross_node_latency"];

/// The run, with node 1's NIC across sockets when the simulator is told so.
fn profile(name: &str, args: &[&str], extra_env: &[(&str, &str)]) -> Profiled {
    let cross = extra_env.iter().any(|(k, _)| *k == "SIMGPU_NIC_NUMA_NODE1");
    let opts = fake_sysfs::Options { cross_socket_node: cross.then_some(1), ..Default::default() };
    nccl_nodes::profile(name, args, extra_env, opts)
}

fn fired<'a>(p: &'a Profiled, kind: &str) -> Option<&'a Value> {
    p.fired(kind)
}

/// `kind` fired (its severity is the exposed communication's share of the run's whole span, init of
/// 8 processes on 2 shared cores included, so it is kept above 1% rather than the clean 5%) and the
/// other two network verdicts did not fire.
fn only<'a>(p: &'a Profiled, kind: &str) -> &'a Value {
    let table = verdict_table(&p.diagnosis);
    for other in KINDS.iter().filter(|k| **k != kind) {
        assert!(fired(p, other).is_none(), "{other} fired besides {kind}:\n{table}");
    }
    let v = fired(p, kind).unwrap_or_else(|| panic!("no {kind}:\n{table}\n{:#}", p.plugin["analysis"]));
    assert!(v["severity"].as_f64().unwrap() > 0.01, "{kind} too weak:\n{table}");
    v
}

fn check_topology(p: &Value) {
    let t = &p["topology"];
    assert_eq!(t["nccl_settings"], serde_json::json!([]), "no NCCL_* setting in the environment");
    let nodes = t["nodes"].as_array().expect("topology nodes");
    let hosts: Vec<&str> = nodes.iter().map(|n| n["host"].as_str().unwrap()).collect();
    assert_eq!(hosts, ["simnode0", "simnode1"]);
    for (i, n) in nodes.iter().enumerate() {
        let want: Vec<u64> = (i as u64 * 4..i as u64 * 4 + 4).collect();
        assert_eq!(n["ranks"], serde_json::json!(want), "{n}");
        assert_eq!(n["nic_gbps"].as_f64().unwrap(), 25.0, "{n}");
        assert_eq!(n["nvlink_gbps"].as_f64().unwrap(), 100.0, "{n}");
    }
    let gpus = t["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 8);
    for g in gpus {
        let r = g["rank"].as_u64().unwrap();
        assert_eq!(g["device"].as_u64().unwrap(), r, "{g}");
        assert_eq!(g["bus_id"].as_str().unwrap(), format!("00000000:{:02X}:00.0", 0x10 + r));
        assert_eq!((g["numa_node"].as_i64(), g["nvlinks"].as_u64()), (Some(0), Some(4)), "{g}");
        assert_eq!(g["nvlink_peers"].as_u64().unwrap(), 3, "the other GPUs of its node: {g}");
        assert_eq!((g["nearest_nic"].as_str(), g["nic_path"].as_str()), (Some("mlx5_0"), Some("PXB")), "{g}");
    }
}

#[test]
fn clean_intra_node_groups_raise_no_network_verdict() {
    let p = profile("nccl-v-clean", &["--iters", "60", "--bytes", "16777216", "--group", "4"], &[]);
    check_topology(&p.plugin);
    for k in KINDS {
        assert!(fired(&p, k).is_none(), "{k} on a clean run:\n{}", verdict_table(&p.diagnosis));
    }
    for b in p.plugin["analysis"].as_array().unwrap().iter().filter(|b| b["op"] == "AllReduce") {
        let truth = truth_busbw(&p.truth, b["comm"].as_str());
        assert_eq!((b["nodes"].as_u64(), b["limit"].as_str()), (Some(1), Some("nvlink")), "{b}");
        let share = b["link_share"].as_f64().unwrap();
        assert!((share - truth / 100.0).abs() <= 0.02 * share, "busbw / NVLink's 100 GB/s, truth {truth}: {b}");
    }
}

#[test]
fn world_communicator_at_the_nic_line_rate_is_network_bound() {
    let p = profile("nccl-v-netbound", &["--iters", "60", "--bytes", "16777216"], &[]);
    check_topology(&p.plugin);
    let v = only(&p, "network_bound");
    let e = &v["evidence"];
    assert_eq!((e["nodes"].as_u64(), e["line_rate_gbps"].as_f64()), (Some(2), Some(25.0)), "{e}");
    let truth = truth_busbw(&p.truth, None);
    let got = e["busbw_gbps"].as_f64().unwrap();
    assert!((got - truth).abs() <= 0.02 * truth, "busbw {got} vs {truth}");
}

#[test]
fn slow_nic_on_one_node_is_a_degraded_link_naming_it() {
    let p = profile("nccl-v-degraded", &["--iters", "30", "--bytes", "16777216"], &[("SIMGPU_NIC_GBPS_NODE1", "5")]);
    let v = only(&p, "topology");
    let e = &v["evidence"];
    assert_eq!(e["cause"], "degraded_link", "{e}");
    assert_eq!(e["degraded_hosts"], serde_json::json!(["simnode1"]), "{e}");
    let link = e["link_gbps"].as_f64().unwrap();
    // The simulated proxy thread wakes late on a loaded machine: its wire times carry some jitter.
    assert!((link - 5.0).abs() < 1.0, "node 1 sends at its 5 GB/s NIC: {e}");
    assert!(v["ranks"].as_array().unwrap().iter().all(|r| r.as_u64().unwrap() >= 4), "{v}");
    // nccl_nodes marks no steps: they are cut from the kernel stream (GPU time), one all-reduce
    // each, and each step's GPU work is its own (not all in the first, where the host issued it).
    let x = fired(&p, "exposed_communication").unwrap_or_else(|| panic!("{}", verdict_table(&p.diagnosis)));
    let text = x["evidence"]["text"].as_str().unwrap();
    assert!(text.contains(": AllReduce x1 16 MiB"), "one all-reduce per step: {text}");
    let steps = x["steps"].as_array().unwrap().len();
    assert!(steps >= 25, "the exposed steps are most of the 30 iterations ({steps}): {text}");
}

#[test]
fn groups_interleaved_across_nodes_are_spread_over_nodes() {
    let p = profile("nccl-v-spread", &["--iters", "150", "--bytes", "16777216", "--group", "4", "--interleaved"], &[]);
    let v = only(&p, "topology");
    let e = &v["evidence"];
    assert_eq!(e["cause"], "spread_over_nodes", "{e}");
    assert_eq!((e["nodes"].as_u64(), e["nodes_needed"].as_u64()), (Some(2), Some(1)), "{e}");
    assert_eq!(e["link_gbps"].as_f64().unwrap(), 100.0, "what NVLink would allow: {e}");
}

#[test]
fn small_all_reduces_across_nodes_are_cross_node_latency() {
    let p = profile("nccl-v-latency", &["--iters", "2000", "--bytes", "4096"], &[]);
    let v = only(&p, "cross_node_latency");
    let e = &v["evidence"];
    assert_eq!(e["size_bucket"].as_u64().unwrap(), 4096, "{e}");
    assert!(e["bandwidth_time_share"].as_f64().unwrap() < 0.05, "4 KiB at 25 GB/s is nothing of 15 us: {e}");
}

/// The all-reduces' busbw from each instance's shortest kernel (the last rank to arrive: the transfer
/// without waiting), over the instances (comm, seq) of `comm`.
fn transfer_busbw(truth: &[Value], comm: &str) -> f64 {
    let mut inst: std::collections::BTreeMap<u64, (f64, u64)> = Default::default();
    for t in truth.iter().filter(|t| t["type"] == "collective" && t["op"] == "AllReduce" && t["comm"] == comm) {
        let n = t["nranks"].as_u64().unwrap() as f64;
        let bus = 2.0 * (n - 1.0) / n * t["bytes"].as_u64().unwrap() as f64;
        let dur = t["end_ns"].as_u64().unwrap() - t["start_ns"].as_u64().unwrap();
        let e = inst.entry(t["seq"].as_u64().unwrap()).or_insert((bus, dur));
        e.1 = e.1.min(dur);
    }
    let (bus, dur) = inst.values().fold((0.0, 0u64), |(b, d), (x, y)| (b + x, d + y));
    bus / dur as f64
}

/// Within 2% of the truth.
fn near(got: f64, truth: f64) -> bool {
    (got - truth).abs() <= 0.02 * truth
}

/// A `topology` verdict with `cause` on groups of 4 inside the nodes under `env`: its busbw is the
/// truth's, the truth's transfers run at what the simulated NCCL's model gives (`want_gbps`, less
/// the 5 us latency), the links allow NVLink's 100 GB/s.
fn intra_group_cause(name: &str, env: &[(&str, &str)], cause: &str, want_gbps: f64) -> (Value, f64) {
    let p = profile(name, &["--iters", "30", "--bytes", "16777216", "--group", "4"], env);
    let v = only(&p, "topology");
    let e = v["evidence"].clone();
    assert_eq!(e["cause"], cause, "{e}");
    let truth = truth_busbw(&p.truth, e["comm"].as_str());
    let got = e["busbw_gbps"].as_f64().unwrap();
    assert!(near(got, truth), "busbw {got} vs truth {truth}: {e}");
    let transfer = transfer_busbw(&p.truth, e["comm"].as_str().unwrap());
    assert!(near(transfer, want_gbps), "truth's transfers at {transfer} GB/s vs the model's {want_gbps}");
    assert_eq!(e["allowed_gbps"].as_f64(), Some(100.0), "{e}");
    let set: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(e["settings"], serde_json::json!(set), "the setting named: {e}");
    let rows = p.plugin["topology"]["nccl_settings"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0]["name"].as_str(), rows[0]["ranks"].as_array().unwrap().len()), (Some(env[0].0), 8));
    assert!(!v["advice"].as_array().unwrap().is_empty(), "{v}");
    (e, truth)
}

#[test]
fn p2p_disabled_inside_nodes_falls_back_to_shm() {
    // SHM moves 12 GB/s (the simulator's host-memory rate) where NVLink allows 100.
    let (e, _) = intra_group_cause("nccl-v-p2p", &[("NCCL_P2P_DISABLE", "1")], "p2p_disabled", 12.0);
    assert_eq!(e["link_gbps"].as_f64(), Some(100.0), "the NVLink P2P rate: {e}");
}

#[test]
fn max_nchannels_two_is_too_few_channels() {
    // 2 channels x 20 GB/s = 40 GB/s of transfer; the 100 GB/s links need 5 channels at that rate,
    // more at the rate the kernels reach with the ranks' arrival skew of a loaded machine.
    let (e, truth) = intra_group_cause("nccl-v-channels", &[("NCCL_MAX_NCHANNELS", "2")], "too_few_channels", 40.0);
    assert_eq!(e["nchannels"].as_u64(), Some(2), "{e}");
    let needed = e["channels_needed"].as_f64().unwrap();
    assert!(
        needed >= 5.0 && (needed - 100.0 / (truth / 2.0)).abs() <= 0.6,
        "100 GB/s over the truth's {truth} / 2: {e}"
    );
    assert!(near(e["per_channel_gbps"].as_f64().unwrap(), truth / 2.0), "the truth's busbw over 2 channels: {e}");
}

#[test]
fn forced_ll_on_large_messages_is_a_protocol_mismatch() {
    // NCCL's model: LL reaches a quarter of Simple's bandwidth on an all-reduce.
    let (e, _) = intra_group_cause("nccl-v-proto", &[("NCCL_PROTO", "LL")], "protocol_mismatch", 25.0);
    assert_eq!((e["proto"].as_str(), e["algo"].as_str()), (Some("LL"), Some("RING")), "{e}");
}

#[test]
fn nic_across_sockets_on_one_node_is_named() {
    let p = profile("nccl-v-xsocket", &["--iters", "30", "--bytes", "16777216"], &[("SIMGPU_NIC_NUMA_NODE1", "1")]);
    let gpus = p.plugin["topology"]["gpus"].as_array().unwrap();
    for g in gpus {
        let want = if g["host"] == "simnode1" { "SYS" } else { "PXB" };
        assert_eq!(g["nic_path"].as_str(), Some(want), "{g}");
    }
    let v = only(&p, "topology");
    let e = &v["evidence"];
    assert_eq!(e["cause"], "gpu_nic_cross_socket", "{e}");
    assert_eq!(
        (e["degraded_hosts"].clone(), e["nic_path"].as_str()),
        (serde_json::json!(["simnode1"]), Some("SYS")),
        "{e}"
    );
    let link = e["link_gbps"].as_f64().unwrap();
    // 10 GB/s across the sockets; the proxy thread's wire times carry some jitter (see degraded_link).
    assert!((link - 10.0).abs() < 1.5, "node 1 sends at the 10 GB/s cross-socket rate: {e}");
    assert_eq!(e["line_rate_gbps"].as_f64(), Some(25.0), "{e}");
    let truth = truth_busbw(&p.truth, None);
    assert!(near(e["busbw_gbps"].as_f64().unwrap(), truth), "busbw vs truth {truth}: {e}");
    assert!(v["ranks"].as_array().unwrap().iter().all(|r| r.as_u64().unwrap() >= 4), "{v}");
}
