//! libtprof as NCCL's profiler plugin, under the simulated NCCL on 2 nodes x 4 ranks
//! (SIMGPU_NODES=2): NCCL_PROFILER_PLUGIN is set by the preloaded shim, the plugin is found
//! (v6, and v4 when the newer tables are hidden), every task carries NCCL's algorithm, protocol and
//! channels, each communicator's intra-/inter-node scope is the truth's, the busbw from the
//! kernel-channel GPU timers is within 2% of the ground truth's per communicator, and the proxy
//! operations name exactly the ring's cross-node links with the bytes the ring moves over them.
//!
//! Prerequisites: `cargo build --release --workspace`, `make -C tests/simgpu`, `make -C tests/programs`.

use std::collections::BTreeMap;

use serde_json::Value;
use tprof_e2e::diagnose::summary_json;
use tprof_e2e::programs::programs_dir;
use tprof_e2e::shim::*;

const BYTES: u64 = 16 << 20;
const ITERS: u64 = 6;

struct Layout {
    args: Vec<String>,
    /// Ranks of the communicator the loop runs on, per group.
    groups: Vec<Vec<u64>>,
}

fn layout(group: Option<(usize, bool)>) -> Layout {
    let mut args = vec!["--ranks".into(), "8".into(), "--iters".into(), ITERS.to_string(), "--bytes".into()];
    args.push(BYTES.to_string());
    let groups = match group {
        None => vec![(0..8).collect()],
        Some((g, interleaved)) => {
            args.push("--group".into());
            args.push(g.to_string());
            if interleaved {
                args.push("--interleaved".into());
            }
            let n = 8 / g as u64;
            (0..n)
                .map(|c| {
                    if interleaved {
                        (0..8).filter(|r| r % n == c).collect()
                    } else {
                        (c * g as u64..(c + 1) * g as u64).collect()
                    }
                })
                .collect()
        }
    };
    Layout { args, groups }
}

/// Runs nccl_nodes on 2 simulated nodes; returns the summary's `nccl_plugin` and the truth.
fn profile(name: &str, l: &Layout, extra_env: &[(&str, &str)]) -> (Value, Vec<Value>, RunResult) {
    let prog = programs_dir().join("rt12_nccl_nodes");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let args: Vec<&str> = l.args.iter().map(String::as_str).collect();
    let mut spec = RunSpec::new(&prog, &args, simgpu_dir()).env("SIMGPU_NODES", "2").env("TPROF_RING_MB", "4");
    for (k, v) in extra_env {
        spec = spec.env(k, v);
    }
    let run = spec.run(name);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let summary = summary_json(&run.out_dir);
    let truth = read_truth(&run.truth_dir);
    (summary["nccl_plugin"].clone(), truth, run)
}

/// Truth busbw per communicator (hex id): nccl-tests bus bytes over the mean kernel time.
fn truth_busbw(truth: &[Value]) -> BTreeMap<String, f64> {
    let mut acc: BTreeMap<String, (f64, f64, u64)> = BTreeMap::new();
    for t in truth.iter().filter(|t| t["type"] == "collective" && t["op"] == "AllReduce") {
        let n = t["nranks"].as_u64().unwrap() as f64;
        let bus = 2.0 * (n - 1.0) / n * t["bytes"].as_u64().unwrap() as f64;
        let dur = (t["end_ns"].as_u64().unwrap() - t["start_ns"].as_u64().unwrap()) as f64;
        let e = acc.entry(t["comm"].as_str().unwrap().to_string()).or_default();
        e.0 += bus;
        e.1 += dur;
        e.2 += 1;
    }
    acc.into_iter().map(|(k, (bus, dur, _))| (k, bus / dur)).collect()
}

fn node(rank: u64) -> u64 {
    rank / 4
}

/// Checks one run against its layout; returns the loop communicators' scopes.
fn check(p: &Value, truth: &[Value], l: &Layout, version: u64) -> Vec<String> {
    assert!(p.is_object(), "no plugin records in the summary");
    let comms = p["comms"].as_array().unwrap();
    for c in comms {
        assert_eq!(c["plugin_version"], version, "{c}");
        assert_eq!(c["ranks_seen"], c["nranks"], "every rank initialised the plugin: {c}");
    }
    let ops: Vec<&Value> = p["ops"].as_array().unwrap().iter().filter(|o| o["op"] == "AllReduce").collect();
    assert_eq!(ops.len(), l.groups.len(), "one row per loop communicator: {ops:#?}");
    let busbw = truth_busbw(truth);
    let mut scopes = Vec::new();
    for o in &ops {
        assert_eq!(o["calls"].as_u64().unwrap(), ITERS * (8 / l.groups.len() as u64), "a task per rank and call: {o}");
        assert_eq!(o["undescribed"], 0, "every task has algorithm, protocol and channels: {o}");
        assert_eq!(
            (o["algo"].as_str(), o["proto"].as_str(), o["nchannels"].as_u64()),
            (Some("RING"), Some("SIMPLE"), Some(8))
        );
        assert_eq!(o["gpu_timed"], o["calls"], "kernel-channel timers on every task: {o}");
        let comm = o["comm"].as_str().unwrap();
        let truth = busbw[comm];
        let got = o["busbw_gbps"].as_f64().unwrap();
        assert!((got - truth).abs() <= 0.02 * truth, "{comm}: busbw {got:.3} GB/s, truth {truth:.3} GB/s");
        let c = comms.iter().find(|c| c["comm"] == comm).unwrap();
        scopes.push(c["scope"].as_str().unwrap().to_string());
        assert_eq!(o["scope"], c["scope"]);
    }
    // The proxy operations: exactly the cross-node neighbours of each ring, with the ring's bytes.
    let mut want: BTreeMap<(u64, i64, &str), u64> = BTreeMap::new();
    for g in &l.groups {
        let n = g.len();
        let bus = 2.0 * (n as f64 - 1.0) / n as f64 * BYTES as f64;
        let per_task = 8 * (bus / 8.0) as u64;
        for (i, &r) in g.iter().enumerate() {
            let next = g[(i + 1) % n];
            if node(next) != node(r) {
                *want.entry((i as u64, ((i + 1) % n) as i64, "send")).or_default() += per_task * ITERS;
                *want.entry((((i + 1) % n) as u64, i as i64, "recv")).or_default() += per_task * ITERS;
            }
        }
    }
    let mut got: BTreeMap<(u64, i64, &str), u64> = BTreeMap::new();
    for link in p["links"].as_array().unwrap() {
        let key = (link["rank"].as_u64().unwrap(), link["peer"].as_i64().unwrap(), link["direction"].as_str().unwrap());
        *got.entry(key).or_default() += link["bytes"].as_u64().unwrap();
        assert_eq!(link["ops"].as_u64().unwrap(), 8 * ITERS, "one operation per channel and task: {link}");
        assert!(link["wire_ns"].as_u64().unwrap() > 0, "{link}");
    }
    assert_eq!(got, want, "links (comm rank, peer, direction) -> bytes");
    scopes
}

#[test]
fn world_communicator_over_two_nodes_is_inter_node_with_its_cross_node_links() {
    let l = layout(None);
    let (p, truth, run) = profile("nccl-plugin-world", &l, &[]);
    assert_eq!(check(&p, &truth, &l, 6), ["inter-node"]);
    assert!((p["inter_node_share"].as_f64().unwrap() - 1.0).abs() < 1e-9);
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
}

#[test]
fn contiguous_groups_stay_on_their_node_and_interleaved_ones_span_both() {
    let l = layout(Some((4, false)));
    let (p, truth, run) = profile("nccl-plugin-contiguous", &l, &[]);
    assert_eq!(check(&p, &truth, &l, 6), ["intra-node", "intra-node"]);
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());

    // The same groups, interleaved across the nodes, through the v4 table (NCCL 2.25-2.26).
    let l = layout(Some((4, true)));
    let (p, truth, run) = profile("nccl-plugin-interleaved", &l, &[("SIMGPU_NCCL_PROFILER_MAX_VERSION", "4")]);
    assert_eq!(check(&p, &truth, &l, 4), ["inter-node", "inter-node"]);
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
}

/// Versions 1-3 (NCCL 2.23-2.24) and 5 (2.27-2.28), each driven by the simulated NCCL with the newer
/// tables hidden: v5 as v6; v1-v3 give what their structs carry (the task's algorithm, protocol and
/// channels, v1's numeric ones included; the operations' bytes, cumulative on their own states) and
/// leave absent what they do not (init's ranks and nodes, hence scope and the rank of a link; GPU
/// timers, hence bandwidth): null in the JSON, never zero.
#[test]
fn older_plugin_versions_record_what_their_structs_carry_and_nothing_else() {
    let l = layout(None);
    let (p, truth, run) = profile("nccl-plugin-v5", &l, &[("SIMGPU_NCCL_PROFILER_MAX_VERSION", "5")]);
    assert_eq!(check(&p, &truth, &l, 5), ["inter-node"]);
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());

    // The ring's cross-node bytes per (peer, direction): links carry no rank in versions 1-3.
    let n = 8usize;
    let per_task = 8 * ((2.0 * (n as f64 - 1.0) / n as f64 * BYTES as f64) / 8.0) as u64;
    let mut want: BTreeMap<(i64, &str), u64> = BTreeMap::new();
    for i in 0..n {
        let next = (i + 1) % n;
        if node(next as u64) != node(i as u64) {
            *want.entry((next as i64, "send")).or_default() += per_task * ITERS;
            *want.entry((i as i64, "recv")).or_default() += per_task * ITERS;
        }
    }
    for version in ["1", "2", "3"] {
        let name = format!("nccl-plugin-v{version}");
        let (p, _, run) = profile(&name, &l, &[("SIMGPU_NCCL_PROFILER_MAX_VERSION", version)]);
        let v: u64 = version.parse().unwrap();
        for c in p["comms"].as_array().unwrap() {
            assert_eq!(c["plugin_version"], v, "{c}");
            assert!(c["nranks"].is_null() && c["nnodes"].is_null(), "init says nothing in v{v}: {c}");
            assert_eq!(c["scope"], "unknown", "{c}");
        }
        let ops: Vec<&Value> = p["ops"].as_array().unwrap().iter().filter(|o| o["op"] == "AllReduce").collect();
        assert_eq!(ops.len(), 1, "one row for the world communicator (its hash from the tasks): {ops:#?}");
        let o = ops[0];
        assert_eq!(o["calls"].as_u64(), Some(ITERS * 8), "a task per rank and call: {o}");
        assert_eq!(o["undescribed"], 0, "{o}");
        assert_eq!(
            (o["algo"].as_str(), o["proto"].as_str(), o["nchannels"].as_u64()),
            (Some("RING"), Some("SIMPLE"), Some(8)),
            "v{v}"
        );
        assert_eq!((o["gpu_timed"].as_u64(), o["graph_captured"].as_u64()), (Some(0), Some(0)), "{o}");
        assert!(o["busbw_gbps"].is_null() && o["algbw_gbps"].is_null() && o["nranks"].is_null(), "{o}");
        assert_eq!(o["scope"], "unknown");
        let mut got: BTreeMap<(i64, &str), u64> = BTreeMap::new();
        for link in p["links"].as_array().unwrap() {
            assert!(link["rank"].is_null(), "{link}");
            assert_eq!(link["ops"].as_u64().unwrap(), 8 * ITERS, "one operation per channel and task: {link}");
            assert!(link["wire_ns"].as_u64().unwrap() > 0, "{link}");
            let key = (link["peer"].as_i64().unwrap(), link["direction"].as_str().unwrap());
            *got.entry(key).or_default() += link["bytes"].as_u64().unwrap();
        }
        assert_eq!(got, want, "v{v}: links (peer, direction) -> bytes");
        let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
    }
}
