//! NCCL collectives inside CUDA graphs, under the simulated NCCL on 2 nodes x 2 ranks: each rank
//! captures K all-reduces into a graph, launches it N times, then runs one all-reduce outside it
//! (nccl_nodes --graph N). Checked against the simulator's truth: every replay's kernel ran and is
//! counted (K x N + 1 per rank); with libtprof as the profiler plugin the decoded tasks count
//! K x N + 1 per rank, the K x N replayed ones flagged graph-captured and the eager one not (each
//! replay's task is started from the graph's host node with the capture-time API handle as parent),
//! and each task's proxy operations cross the ring's node boundary; with the plugin off
//! (NCCL_PROFILER_PLUGIN=none) the intercept layer still counts every kernel run. Either way the
//! capture-time calls keep only their host time: no replay's kernel is paired with one.
//!
//! Prerequisites: `cargo build --release --workspace`, `make -C tests/simgpu`, `make -C tests/programs`.

use serde_json::Value;
use tprof_e2e::diagnose::summary_json;
use tprof_e2e::programs::programs_dir;
use tprof_e2e::shim::*;

const RANKS: u64 = 4;
const K: u64 = 3;
const N: u64 = 5;

fn profile(name: &str, extra_env: &[(&str, &str)]) -> (Value, Vec<Value>, RunResult) {
    let prog = programs_dir().join("rt12_nccl_nodes");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let (r, k, n) = (RANKS.to_string(), K.to_string(), N.to_string());
    let args = ["--ranks", &r, "--iters", &k, "--graph", &n, "--bytes", "1048576"];
    let mut spec = RunSpec::new(&prog, &args, simgpu_dir()).env("SIMGPU_NODES", "2").env("TPROF_RING_MB", "4");
    for (key, v) in extra_env {
        spec = spec.env(key, v);
    }
    let run = spec.run(name);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let summary = summary_json(&run.out_dir);
    (summary, read_truth(&run.truth_dir), run)
}

/// The truth's all-reduce kernels: (all, run from a graph).
fn truth_kernels(truth: &[Value]) -> (u64, u64) {
    let ks: Vec<&Value> =
        truth.iter().filter(|t| t["type"] == "kernel" && t["name"].as_str().unwrap().contains("AllReduce")).collect();
    let graphed = ks.iter().filter(|k| k["graph_id"].as_u64().unwrap_or(0) > 0).count() as u64;
    (ks.len() as u64, graphed)
}

/// The summary's kernel count for the NCCL all-reduce kernel.
fn summary_kernels(s: &Value) -> u64 {
    s["kernels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|k| k["name"].as_str().unwrap_or("").contains("AllReduce"))
        .map(|k| k["count"].as_u64().unwrap())
        .sum()
}

/// The intercept layer's collectives: the K capture-time calls per rank keep their host time and no
/// kernel (the capture ran nothing), the eager call pairs with its own kernel, and each replay's
/// kernel is a collective of its own; none of the replays' kernels goes to a capture-time call.
fn intercept_rows(s: &Value) {
    let rows: Vec<&Value> = s["collectives"].as_array().unwrap().iter().filter(|r| r["op"] == "AllReduce").collect();
    let calls: Vec<&&Value> = rows.iter().filter(|r| r["bytes"].as_u64().unwrap() > 0).collect();
    let count: u64 = calls.iter().map(|r| r["count"].as_u64().unwrap()).sum();
    let timed: u64 = calls.iter().map(|r| r["gpu_timed"].as_u64().unwrap()).sum();
    assert_eq!((count, timed), (RANKS * (K + 1), RANKS), "capture-time calls are host-only: {rows:#?}");
    let replays: u64 = rows.iter().filter(|r| r["bytes"] == 0).map(|r| r["gpu_timed"].as_u64().unwrap()).sum();
    assert_eq!(replays, RANKS * K * N, "each replay's kernel stands alone: {rows:#?}");
}

#[test]
fn graph_replays_are_tasks_flagged_captured_and_kernels_all_counted() {
    let (s, truth, _run) = profile("nccl-graph-plugin", &[]);
    let (kernels, graphed) = truth_kernels(&truth);
    assert_eq!((kernels, graphed), (RANKS * (K * N + 1), RANKS * K * N), "the simulator ran every replay");
    assert_eq!(summary_kernels(&s), kernels, "every all-reduce kernel the GPUs ran is counted");
    let p = &s["nccl_plugin"];
    let ops: Vec<&Value> = p["ops"].as_array().unwrap().iter().filter(|o| o["op"] == "AllReduce").collect();
    assert_eq!(ops.len(), 1, "{ops:#?}");
    let o = ops[0];
    assert_eq!(o["calls"].as_u64(), Some(RANKS * (K * N + 1)), "a task per rank and replayed or eager call: {o}");
    assert_eq!(o["graph_captured"].as_u64(), Some(RANKS * K * N), "replays flagged captured, the eager one not: {o}");
    assert_eq!(o["undescribed"], 0, "{o}");
    // The ring crosses the node boundary twice (ranks 1->2 and 3->0): one operation per channel and task.
    intercept_rows(&s);
    let nch = o["nchannels"].as_u64().unwrap();
    let links = p["links"].as_array().unwrap();
    let sends: u64 = links.iter().filter(|l| l["direction"] == "send").map(|l| l["ops"].as_u64().unwrap()).sum();
    assert_eq!(sends, 2 * nch * (K * N + 1), "proxy operations per replay and per eager call: {links:#?}");
}

#[test]
fn graph_replays_counted_without_the_plugin() {
    let (s, truth, _run) = profile("nccl-graph-noplugin", &[("NCCL_PROFILER_PLUGIN", "none")]);
    let (kernels, graphed) = truth_kernels(&truth);
    assert_eq!((kernels, graphed), (RANKS * (K * N + 1), RANKS * K * N));
    assert_eq!(summary_kernels(&s), kernels, "every all-reduce kernel the GPUs ran is counted");
    intercept_rows(&s);
    let p = &s["nccl_plugin"];
    let tasks: u64 = p["ops"].as_array().map_or(0, |a| a.iter().map(|o| o["calls"].as_u64().unwrap_or(0)).sum());
    assert_eq!(tasks, 0, "no plugin, no tasks: {p}");
}
