//! The mock NCCL and NVML of the simulated GPU stack (tests/simgpu/src/nccl.c, nvml.c), checked
//! against their ground truth with the selftest programs `nccl_ranks` and `nvml_util`
//! (tests/simgpu/build/selftest, built by `make -C tests/simgpu`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use tprof_e2e::programs::{exclusive, require_mock_libs, run, sim_command, Running, TempDir, Truth, TruthRecord};

/// A selftest binary of the simulated stack; panics naming it and how to build it when missing.
fn selftest(name: &str) -> PathBuf {
    let dir = require_mock_libs(&["libnccl.so.2", "libnvidia-ml.so.1", "libcudart.so.12"]);
    let p = dir.join("selftest").join(name);
    assert!(
        p.exists(),
        "selftest program {} not built (run `make -C tests/simgpu`, or set SIMGPU_LIB_DIR)",
        p.display()
    );
    p
}

/// Removes the core's device-counters segment of a run (`SIMGPU_SESSION` = the truth dir's name).
fn rm_counters(dir: &TempDir) {
    if let Some(name) = dir.path().file_name() {
        let _ = std::fs::remove_file(format!("/dev/shm/simgpu-{}", name.to_string_lossy()));
    }
}

fn nccl_ranks(args: &[&str], truth: &TempDir) -> Command {
    sim_command(&selftest("nccl_ranks"), args, truth.path())
}

/// Collective lines by seq (every rank's line of one seq together).
fn by_seq(t: &Truth) -> BTreeMap<u64, Vec<&TruthRecord>> {
    let mut m: BTreeMap<u64, Vec<&TruthRecord>> = BTreeMap::new();
    for c in t.of_kind("collective") {
        m.entry(c.seq.expect("collective has a seq")).or_default().push(c);
    }
    m
}

#[test]
fn four_rank_allreduce_ends_together_and_last_arriver_sees_the_link_bandwidth() {
    let dir = TempDir::new("nccl4");
    let _g = exclusive();
    let gbps = 50.0;
    let bytes: u64 = 256 << 20;
    let mut cmd =
        nccl_ranks(&["--ranks", "4", "--bytes", &bytes.to_string(), "--iters", "4", "--stagger-us", "1500"], &dir);
    cmd.env("SIMGPU_LINK_GBPS", gbps.to_string()).env("SIMGPU_LINK_LATENCY_US", "5");
    let out = run(cmd, Duration::from_secs(60));
    out.assert_ok();
    let t = Truth::load(dir.path());
    rm_counters(&dir);
    // (`process` lines carry "stream":-1, which TruthRecord's u64 stream does not take: not ours)
    let bad: Vec<&String> = t.bad_lines.iter().filter(|l| !l.contains("\"type\":\"process\"")).collect();
    assert!(bad.is_empty(), "bad truth lines: {bad:?}");
    let seqs = by_seq(&t);
    assert_eq!(seqs.len(), 4, "4 all-reduces: {}", t.summary());
    for (seq, cs) in &seqs {
        assert_eq!(cs.len(), 4, "seq {seq} on every rank: {cs:?}");
        let ranks: std::collections::BTreeSet<i64> = cs.iter().map(|c| c.rank).collect();
        assert_eq!(ranks.len(), 4, "seq {seq}: one line per rank {ranks:?}");
        let end = cs[0].end_ns.expect("finished");
        for c in cs {
            assert!(!c.unfinished, "seq {seq} rank {} unfinished", c.rank);
            assert_eq!(c.end_ns, Some(end), "seq {seq}: every rank's kernel ends together: {cs:?}");
            assert_eq!(c.comm, cs[0].comm, "seq {seq}: comm agrees");
            assert_eq!(c.bytes, Some(bytes), "seq {seq}: bytes = count x 4");
            assert_eq!(c.op.as_deref(), Some("AllReduce"));
            assert_eq!(c.nranks, Some(4));
            assert_eq!(c.kernel.as_deref(), Some("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
            // the kernel line of the same pid and correlation has the same times
            let k = t
                .records
                .iter()
                .find(|k| k.is("kernel") && k.pid == c.pid && k.correlation == c.correlation)
                .unwrap_or_else(|| panic!("kernel of {c:?}"));
            assert_eq!((k.start_ns, k.end_ns), (c.start_ns, c.end_ns), "kernel and collective agree");
        }
        let last = cs.iter().max_by_key(|c| c.start()).unwrap();
        let first = cs.iter().min_by_key(|c| c.start()).unwrap();
        let dur = last.duration_ns().unwrap() as f64;
        let bus = 2.0 * 3.0 / 4.0 * bytes as f64;
        let busbw = bus / dur; // bytes per ns = GB/s
        eprintln!(
            "seq {seq}: last arriver rank {} {:.3} ms -> busbw {busbw:.2} GB/s (configured {gbps}); first arriver rank {} waited {:.3} ms",
            last.rank,
            dur / 1e6,
            first.rank,
            first.duration_ns().unwrap() as f64 / 1e6
        );
        assert!((busbw - gbps).abs() / gbps < 0.02, "seq {seq}: busbw {busbw:.2} GB/s vs {gbps}");
        assert!(first.duration_ns() >= last.duration_ns(), "early arrivers wait for the last");
    }
    // seqs 0..4 per communicator, one comm
    assert_eq!(seqs.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3]);
    let comms: std::collections::BTreeSet<_> = t.of_kind("collective").map(|c| c.comm.clone()).collect();
    assert_eq!(comms.len(), 1, "one communicator: {comms:?}");
}

#[test]
fn a_rank_that_skips_leaves_the_others_unfinished_after_sigterm() {
    let dir = TempDir::new("ncclhang");
    let _g = exclusive();
    let args = ["--ranks", "4", "--bytes", "1048576", "--iters", "6", "--hang-rank", "3", "--hang-at", "2"];
    let mut r = Running::spawn(nccl_ranks(&args, &dir));
    let hung = r.wait_for_stderr("rank 3 hangs at iteration 2", Duration::from_secs(30));
    // The others reach seq 2 once seqs 0 and 1 are done on each (written to the truth as they end):
    // waited for, not assumed after a fixed sleep (a loaded machine takes longer), then a moment
    // more for them to enter it.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let two_done = |t: &Truth, rank| t.of_rank_kind(rank, "collective").iter().filter(|c| !c.unfinished).count() >= 2;
    while std::time::Instant::now() < deadline {
        let t = Truth::load(dir.path());
        if (0..3).all(|rank| two_done(&t, rank)) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(800));
    r.terminate();
    let out = r.finish(Duration::from_secs(30));
    assert!(hung, "rank 3 never reported its hang: {}", out.describe());
    assert_ne!(out.code, 0, "a hung job stopped by SIGTERM must not succeed");
    let t = Truth::load(dir.path());
    rm_counters(&dir);
    for rank in 0..3 {
        let cs = t.of_rank_kind(rank, "collective");
        let unfinished: Vec<u64> = cs.iter().filter(|c| c.unfinished).filter_map(|c| c.seq).collect();
        assert_eq!(unfinished, vec![2], "rank {rank} waits in seq 2 forever: {}", t.summary());
        assert!(cs.iter().filter(|c| c.unfinished).all(|c| c.end_ns.is_none()), "unfinished: end_ns null");
        let done: Vec<u64> = cs.iter().filter(|c| !c.unfinished).filter_map(|c| c.seq).collect();
        assert_eq!(done, vec![0, 1], "rank {rank}: seqs before the hang completed");
    }
    // killed ranks never leave: remove their rendezvous segment (named after the comm key)
    if let (Some(comm), Ok(rd)) = (t.of_kind("collective").find_map(|c| c.comm.clone()), std::fs::read_dir("/dev/shm"))
    {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.starts_with("simgpu-nccl-") && name.ends_with(&comm) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    let r3 = t.of_rank_kind(3, "collective");
    assert!(r3.iter().all(|c| !c.unfinished && c.seq.unwrap() < 2), "the skipping rank waits in nothing: {r3:?}");
    assert_eq!(r3.len(), 2);
}

#[test]
fn a_desync_resolves_with_the_larger_size_and_is_recorded() {
    let dir = TempDir::new("nccldesync");
    let _g = exclusive();
    let args = ["--ranks", "2", "--bytes", "4194304", "--iters", "4", "--desync-rank", "1", "--desync-at", "2"];
    let out = run(nccl_ranks(&args, &dir), Duration::from_secs(30));
    out.assert_ok();
    let t = Truth::load(dir.path());
    rm_counters(&dir);
    let seqs = by_seq(&t);
    assert_eq!(seqs.len(), 4, "{}", t.summary());
    let s2 = &seqs[&2];
    let b = |rank: i64| s2.iter().find(|c| c.rank == rank).and_then(|c| c.bytes).unwrap();
    assert_eq!(b(1) * 2, b(0), "rank 1 passed half the count at seq 2");
    assert!(s2.iter().all(|c| !c.unfinished) && s2[0].end_ns == s2[1].end_ns, "resolved together: {s2:?}");
    // duration of the last arriver follows the larger message
    let last = s2.iter().max_by_key(|c| c.start()).unwrap();
    let want = 5_000.0 + 4194304.0 / 100.0; // 2 ranks: bus = 1 x bytes, 100 GB/s, 5 us
    let dur = last.duration_ns().unwrap() as f64;
    assert!((dur - want).abs() / want < 0.02, "desync resolved with the max: {dur} ns vs {want} ns");
    let mm: Vec<&TruthRecord> = t.of_kind("nccl_mismatch").collect();
    assert_eq!(mm.len(), 2, "each rank records the mismatch: {}", t.summary());
    assert!(mm.iter().all(|m| m.seq == Some(2) && m.comm == s2[0].comm), "{mm:?}");
}

#[test]
fn async_error_switch_reports_a_remote_error() {
    let dir = TempDir::new("ncclasync");
    let _g = exclusive();
    let mut cmd = nccl_ranks(&["--ranks", "2", "--bytes", "4096", "--iters", "3", "--async-check"], &dir);
    cmd.env("SIMGPU_NCCL_ASYNC_ERROR_AT", "1");
    let out = run(cmd, Duration::from_secs(30));
    rm_counters(&dir);
    out.assert_ok();
    let n = out.stdout.lines().filter(|l| l.contains("async_error=6")).count();
    assert_eq!(n, 2, "both ranks see ncclRemoteError (6): {}", out.describe());
}

fn fields(line: &str) -> BTreeMap<String, f64> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// A burner process runs kernels, a probe process reads NVML (same SIMGPU_SESSION).
fn burn_and_probe(gpm_off: bool) -> BTreeMap<String, f64> {
    let exe = selftest("nvml_util");
    let dir = TempDir::new(if gpm_off { "nvmloff" } else { "nvml" });
    let mut burner = sim_command(&exe, &["--burn", "1500"], dir.path());
    let mut probe = sim_command(&exe, &["--probe", "600"], dir.path());
    if gpm_off {
        burner.env("SIMGPU_GPM", "0");
        probe.env("SIMGPU_GPM", "0");
    }
    let b = Running::spawn(burner);
    std::thread::sleep(Duration::from_millis(250));
    let p = run(probe, Duration::from_secs(30));
    let bo = b.finish(Duration::from_secs(30));
    bo.assert_ok();
    p.assert_ok();
    let line = p.stdout.lines().find(|l| l.starts_with("nvml_util ")).unwrap_or_else(|| panic!("{}", p.describe()));
    eprintln!("{line}");
    rm_counters(&dir);
    fields(line)
}

#[test]
fn nvml_sees_kernels_of_another_process_and_gpm_metrics_are_in_range() {
    let _g = exclusive();
    let f = burn_and_probe(false);
    assert!(f["gpu_util"] > 0.0 && f["gpu_util"] <= 100.0, "{f:?}");
    assert_eq!(f["gpm"], 1.0);
    for k in ["SM_UTIL", "SM_OCCUP", "TENSOR_UTIL", "DRAM_BW_UTIL"] {
        assert!(f[k] > 0.0 && f[k] <= 100.0, "{k} = {} out of (0, 100]: {f:?}", f[k]);
    }
    assert!(f["SM_OCCUP"] <= f["SM_UTIL"], "{f:?}");
    assert!(f["TENSOR_UTIL"] <= f["SM_UTIL"] + 1e-9, "{f:?}");
    for k in ["PCIE_TX", "PCIE_RX", "NVLINK_TOTAL_RX", "NVLINK_TOTAL_TX"] {
        assert!(f[k] > 0.0, "{k}: {f:?}");
    }
}

#[test]
fn simgpu_gpm_0_makes_gpm_unsupported_and_keeps_basic_metrics() {
    let _g = exclusive();
    let f = burn_and_probe(true);
    assert_eq!(f["gpm"], 0.0, "{f:?}");
    assert!(f["gpu_util"] > 0.0, "{f:?}");
    assert!(!f.contains_key("SM_UTIL"), "no GPM metrics: {f:?}");
}
