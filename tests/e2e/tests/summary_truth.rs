//! `tprof summary` of a profiled simtrain run against the simulator's ground truth: kernel
//! totals per name, GPU busy per rank, collective bytes, and busbw from the configured link speed,
//! each within 1%.

use std::time::Duration;

use tprof_e2e::diagnose::{tprof_bin, tprof_lib};
use tprof_e2e::programs::{exclusive, require_mock_libs, require_program, sim_command, simtrain_libs, TempDir, Truth};

fn within(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-9)
}

/// Union of [start, end) intervals.
fn union_ns(mut v: Vec<(u64, u64)>) -> u64 {
    v.sort_unstable();
    let mut total = 0;
    let mut cur: Option<(u64, u64)> = None;
    for (s, e) in v {
        match cur {
            Some((cs, ce)) if s <= ce => cur = Some((cs, ce.max(e))),
            Some((cs, ce)) => {
                total += ce - cs;
                cur = Some((s, e));
            }
            None => cur = Some((s, e)),
        }
    }
    total + cur.map(|(s, e)| e - s).unwrap_or(0)
}

#[test]
fn summary_matches_ground_truth_within_one_percent() {
    let ranks = 2;
    require_mock_libs(&simtrain_libs(ranks));
    let exe = require_program("simtrain");
    let rings = TempDir::new("summary-rings");
    let truth_dir = TempDir::new("summary-truth");
    let link_gbps = 50.0;
    let mut cmd = sim_command(&exe, &["--ranks", "2", "--steps", "12", "--quiet"], truth_dir.path());
    cmd.env("LD_PRELOAD", tprof_lib())
        .env("TPROF_OUT", rings.path())
        .env("TPROF_RING_MB", "16")
        .env("SIMGPU_LINK_GBPS", link_gbps.to_string());
    let _guard = exclusive();
    let out = tprof_e2e::programs::run(cmd, Duration::from_secs(120));
    out.assert_ok();
    let summary = std::process::Command::new(tprof_bin())
        .args(["summary", "--json"])
        .arg(rings.path())
        .output()
        .expect("run tprof summary");
    assert!(summary.status.success(), "{}", String::from_utf8_lossy(&summary.stderr));
    let s: serde_json::Value = serde_json::from_slice(&summary.stdout).expect("summary JSON");
    let truth = Truth::load(truth_dir.path());

    // Kernel totals per (mangled) name: the summary shows demangled names, so compare the sums over
    // all kernels and the per-name counts' total.
    let truth_kernels: Vec<_> = truth.of_kind("kernel").filter(|k| !k.unfinished).collect();
    let truth_total: u64 = truth_kernels.iter().filter_map(|k| k.duration_ns()).sum();
    let sum_total: u64 = s["kernels"].as_array().unwrap().iter().map(|k| k["total_ns"].as_u64().unwrap()).sum();
    let sum_count: u64 = s["kernels"].as_array().unwrap().iter().map(|k| k["count"].as_u64().unwrap()).sum();
    assert_eq!(sum_count, truth_kernels.len() as u64, "every kernel the simulated GPUs ran is counted");
    assert!(within(sum_total as f64, truth_total as f64, 0.01), "kernel total {sum_total} vs truth {truth_total}");

    // GPU busy per rank: union over streams of kernels, copies and memsets.
    let by_rank = truth.pid_by_rank();
    for r in s["ranks"].as_array().unwrap() {
        let rank = r["rank"].as_i64().expect("rank in summary");
        let pid = by_rank[&rank];
        let intervals: Vec<(u64, u64)> = truth
            .of_pid(pid)
            .into_iter()
            .filter(|t| (t.is("kernel") || t.is("memcpy") || t.is("memset")) && !t.unfinished)
            .map(|t| (t.start(), t.end()))
            .collect();
        let busy_truth = union_ns(intervals);
        let busy = r["gpu_busy_ns"].as_u64().expect("gpu_busy_ns");
        assert!(within(busy as f64, busy_truth as f64, 0.01), "rank {rank}: GPU busy {busy} vs truth {busy_truth}");
    }

    // Collectives: bytes, and busbw from the configured link speed (less the 5 us latency per call).
    let colls: Vec<_> = truth.of_kind("collective").filter(|c| !c.unfinished).collect();
    let truth_bytes: u64 = colls.iter().filter_map(|c| c.bytes).sum();
    let rows = s["collectives"].as_array().unwrap();
    let bytes: u64 = rows.iter().map(|c| c["bytes"].as_u64().unwrap()).sum();
    assert_eq!(bytes, truth_bytes, "collective bytes");
    for c in rows {
        let msg = c["msg_bytes"].as_u64().unwrap() as f64;
        let latency_ns = 5_000.0;
        // nccl-tests allreduce factor 2(n-1)/n, n = 2: bus bytes = message bytes.
        let transfer_ns = msg * 1.0 / link_gbps; // GB/s = bytes per ns
        let expected = msg * 1.0 / (transfer_ns + latency_ns);
        let busbw = c["busbw_gbps"].as_f64().unwrap();
        assert!(
            within(busbw, expected, 0.01),
            "busbw {busbw:.2} GB/s vs {expected:.2} expected from a {link_gbps} GB/s link"
        );
    }
}
