//! simtrain and the real CUDA programs on the simulated GPU stack, checked against the ground
//! truth the mocks write (SIMGPU_TRUTH): the workload itself is what every other end-to-end test
//! profiles, so each of its pathology switches must visibly do what it claims.
//!
//! Run: `make -C tests/simgpu && make -C tests/programs &&
//!       CARGO_TARGET_DIR=/work/targets/programs cargo test -p tprof-e2e --release --test simtrain_truth`

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::time::Duration;

use tprof_e2e::programs::simtrain_kernels as K;
use tprof_e2e::programs::*;

const BATCH_BYTES: u64 = 4 << 20; // simtrain --batch-mb default
const BUCKETS: usize = 4; // simtrain --buckets default
const LAYERS: usize = 8; // simtrain --layers default

/// Runs simtrain with `args` under SIMGPU_TRUTH; returns its output and the truth.
fn simtrain(args: &[&str], timeout_s: u64) -> (RunOutput, Truth) {
    let ranks = ranks_of(args);
    require_mock_libs(&simtrain_libs(ranks));
    let exe = require_program("simtrain");
    let dir = TempDir::new("simtrain");
    let _guard = exclusive();
    let out = run(sim_command(&exe, args, dir.path()), Duration::from_secs(timeout_s));
    let truth = Truth::load(dir.path());
    (out, truth)
}

fn ranks_of(args: &[&str]) -> usize {
    args.iter().position(|a| *a == "--ranks").and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(1)
}

/// The only pid that did GPU work (single-rank runs).
fn single_pid(truth: &Truth) -> i64 {
    let pids = truth.working_pids();
    assert_eq!(pids.len(), 1, "expected one working process: {}", truth.summary());
    *pids.iter().next().unwrap()
}

fn batch_copies<'a>(recs: &[&'a TruthRecord]) -> Vec<&'a TruthRecord> {
    recs.iter()
        .copied()
        .filter(|r| r.is("memcpy") && r.copy_kind.as_deref() == Some("HtoD") && r.bytes == Some(BATCH_BYTES))
        .collect()
}

fn kernels_named<'a>(recs: &[&'a TruthRecord], sub: &str) -> Vec<&'a TruthRecord> {
    recs.iter().copied().filter(|r| r.is("kernel") && r.name().contains(sub)).collect()
}

fn dtoh4<'a>(recs: &[&'a TruthRecord]) -> Vec<&'a TruthRecord> {
    recs.iter()
        .copied()
        .filter(|r| r.is("memcpy") && r.copy_kind.as_deref() == Some("DtoH") && r.bytes == Some(4))
        .collect()
}

/// Idle time of the device before each step's input copy: copy start minus the latest end of
/// anything the process ran before it. The first two steps (start-up) are left out.
fn step_start_gaps(recs: &[&TruthRecord]) -> Vec<u64> {
    let copies = batch_copies(recs);
    copies
        .iter()
        .skip(2)
        .map(|c| {
            let prev_end = recs
                .iter()
                .filter(|r| r.start() < c.start() && r.end_ns.is_some() && !std::ptr::eq::<TruthRecord>(**r, *c))
                .map(|r| r.end())
                .max()
                .unwrap_or(c.start());
            c.start().saturating_sub(prev_end)
        })
        .collect()
}

fn collectives_by_seq(truth: &Truth) -> BTreeMap<u64, Vec<&TruthRecord>> {
    let mut m: BTreeMap<u64, Vec<&TruthRecord>> = BTreeMap::new();
    for c in truth.of_kind("collective") {
        m.entry(c.seq.unwrap_or(u64::MAX)).or_default().push(c);
    }
    m
}

// ------------------------------------------------------------------------------- the job

#[test]
fn four_ranks_fifty_steps_overlap_allreduce_with_backward() {
    let (out, truth) = simtrain(&["--ranks", "4", "--steps", "50", "--quiet"], 120);
    out.assert_ok();
    eprintln!("simtrain --ranks 4 --steps 50: {:.2?} wall", out.wall);
    let sums = out.simtrain_summaries();
    assert_eq!(sums.len(), 4, "one final line per rank: {}", out.describe());
    for (rank, f) in &sums {
        assert_eq!(f.get("steps").map(String::as_str), Some("50"), "rank {rank}: {f:?}");
        eprintln!("  rank {rank}: wall_s={} steps_per_s={}", f["wall_s"], f["steps_per_s"]);
    }
    assert!(out.wall < Duration::from_secs(20), "4x50 steps should take a few seconds, took {:.2?}", out.wall);
    assert!(truth.bad_lines.is_empty(), "unparsable truth: {:?}", &truth.bad_lines[..truth.bad_lines.len().min(3)]);

    let by_rank = truth.pid_by_rank();
    assert_eq!(by_rank.keys().copied().collect::<Vec<_>>(), vec![0, 1, 2, 3], "{}", truth.summary());
    let mut comms = BTreeSet::new();
    for rank in 0..4 {
        let pid = by_rank[&rank];
        let recs = truth.of_pid(pid);
        let devices: BTreeSet<i64> = recs.iter().filter_map(|r| r.device).collect();
        assert_eq!(devices, BTreeSet::from([rank]), "rank {rank} must use device LOCAL_RANK");
        assert_eq!(batch_copies(&recs).len(), 50, "rank {rank}: one input copy per step");
        let colls: Vec<&TruthRecord> = recs.iter().copied().filter(|r| r.is("collective")).collect();
        assert_eq!(colls.len(), 50 * BUCKETS, "rank {rank}: {} buckets per step", BUCKETS);
        for c in &colls {
            assert!(!c.unfinished && c.end_ns.is_some(), "rank {rank}: unfinished {c:?}");
            assert_eq!(c.op.as_deref(), Some("AllReduce"));
            assert_eq!(c.nranks, Some(4));
            assert_eq!(c.bytes, Some(25 << 20));
            comms.insert(c.comm.clone());
        }
        let compute: Vec<&TruthRecord> =
            recs.iter().copied().filter(|r| r.is("kernel") && !r.is_nccl_kernel()).collect();
        let overlapping = colls.iter().filter(|c| compute.iter().any(|k| k.overlaps(c))).count();
        // 3 of the 4 buckets are reduced while backward still runs; the last one cannot be.
        assert!(
            overlapping * 2 >= colls.len(),
            "rank {rank}: only {overlapping} of {} all-reduces overlap compute kernels",
            colls.len()
        );
    }
    assert_eq!(comms.len(), 1, "one communicator id on every rank: {comms:?}");
}

#[test]
fn no_overlap_allreduce_never_overlaps_compute() {
    let (out, truth) = simtrain(&["--ranks", "2", "--steps", "10", "--quiet", "--no-overlap"], 60);
    out.assert_ok();
    for (rank, pid) in truth.pid_by_rank() {
        let recs = truth.of_pid(pid);
        let colls: Vec<&TruthRecord> = recs.iter().copied().filter(|r| r.is("collective")).collect();
        assert_eq!(colls.len(), 10 * BUCKETS, "rank {rank}: {}", truth.summary());
        for c in &colls {
            let hit = recs.iter().find(|k| k.is("kernel") && !k.is_nccl_kernel() && k.overlaps(c));
            assert!(hit.is_none(), "rank {rank}: all-reduce seq {:?} overlaps {:?}", c.seq, hit.map(|k| k.name()));
        }
    }
}

// ------------------------------------------------------------------------------- pathologies

#[test]
fn data_stall_leaves_the_gpu_idle_at_step_starts() {
    let (base, tb) = simtrain(&["--steps", "12", "--quiet"], 60);
    base.assert_ok();
    let (out, t) = simtrain(&["--steps", "12", "--quiet", "--data-stall", "60"], 60);
    out.assert_ok();
    let g0 = median(step_start_gaps(&tb.of_pid(single_pid(&tb))));
    let g1 = median(step_start_gaps(&t.of_pid(single_pid(&t))));
    eprintln!(
        "median idle before a step: {:.2} ms normally, {:.2} ms with --data-stall 60",
        g0 as f64 / 1e6,
        g1 as f64 / 1e6
    );
    assert!(g0 < 5_000_000, "without a stall the host keeps the GPU fed: {g0} ns");
    // A 60 ms stall against ~31 ms of GPU work per step leaves ~30 ms idle.
    assert!(g1 > 15_000_000, "a 60 ms stall must idle the GPU at step starts: {g1} ns");
}

#[test]
fn launch_bound_runs_thousands_of_tiny_kernels() {
    let (out, t) = simtrain(&["--steps", "4", "--quiet", "--launch-bound"], 90);
    out.assert_ok();
    let recs = t.of_pid(single_pid(&t));
    let tiny: Vec<&TruthRecord> = recs
        .iter()
        .copied()
        .filter(|r| r.is("kernel") && (r.name().contains(K::TINY_MUL) || r.name().contains(K::TINY_FILL)))
        .collect();
    assert!(tiny.len() >= 4 * 1000, "thousands of tiny kernels per step, got {}", tiny.len());
    let durs = median(tiny.iter().filter_map(|k| k.duration_ns()).collect());
    assert!(durs < 5_000, "tiny kernels: median {durs} ns");
    // In the optimizer (after the AMP check) the GPU waits for the host between kernels.
    let checks = kernels_named(&recs, K::AMP_CHECK);
    let mut gaps = Vec::new();
    for c in &checks {
        let opt: Vec<&&TruthRecord> = tiny.iter().filter(|k| k.start() > c.end()).take(1000).collect();
        for w in opt.windows(2) {
            gaps.push(w[1].start().saturating_sub(w[0].end()));
        }
    }
    let gap = median(gaps);
    eprintln!("launch-bound: {} tiny kernels, median {durs} ns each, median idle {gap} ns between", tiny.len());
    assert!(gap > durs, "launch-bound: the GPU should idle between tiny kernels (gap {gap} ns, kernel {durs} ns)");

    let (base, tb) = simtrain(&["--steps", "4", "--quiet"], 60);
    base.assert_ok();
    let short = tb.of_kind("kernel").filter(|k| k.duration_ns().unwrap_or(0) < 5_000).count();
    assert!(short <= 4 * 4, "without --launch-bound few short kernels: {short}");
}

#[test]
fn sync_every_step_copies_a_scalar_to_the_host_inside_forward() {
    let (out, t) = simtrain(&["--steps", "10", "--quiet", "--sync-every-step"], 60);
    out.assert_ok();
    let recs = t.of_pid(single_pid(&t));
    let d2h = dtoh4(&recs);
    assert_eq!(d2h.len(), 10, "one .item() per step: {}", t.summary());
    let fwd_bwd: Vec<&TruthRecord> = recs
        .iter()
        .copied()
        .filter(|r| r.is("kernel") && (r.name().contains(K::FLASH_FWD) || r.name().contains(K::FLASH_BWD)))
        .collect();
    for d in &d2h {
        let before = fwd_bwd.iter().rfind(|k| k.end() <= d.start());
        let after = fwd_bwd.iter().find(|k| k.start() >= d.end());
        assert!(
            before.is_some_and(|k| k.name().contains(K::FLASH_FWD))
                && after.is_some_and(|k| k.name().contains(K::FLASH_FWD)),
            "the D2H copy at {} must sit inside forward",
            d.start()
        );
    }
    let (base, tb) = simtrain(&["--steps", "10", "--quiet"], 60);
    base.assert_ok();
    assert_eq!(dtoh4(&tb.of_pid(single_pid(&tb))).len(), 0, "no read-backs without the switch");
}

#[test]
fn pageable_batches_are_not_pinned() {
    let (out, t) = simtrain(&["--steps", "6", "--quiet", "--pageable"], 60);
    out.assert_ok();
    let copies = batch_copies(&t.of_pid(single_pid(&t)));
    assert_eq!(copies.len(), 6);
    assert!(copies.iter().all(|c| c.host_pinned == Some(false)), "{copies:?}");
    let (base, tb) = simtrain(&["--steps", "6", "--quiet"], 60);
    base.assert_ok();
    let copies = batch_copies(&tb.of_pid(single_pid(&tb)));
    assert_eq!(copies.len(), 6);
    assert!(copies.iter().all(|c| c.host_pinned == Some(true)), "{copies:?}");
}

#[test]
fn slow_link_makes_collectives_ten_times_longer() {
    let args = ["--ranks", "2", "--steps", "6", "--quiet"];
    let (base, tb) = simtrain(&args, 60);
    base.assert_ok();
    let mut slow_args = args.to_vec();
    slow_args.push("--slow-link");
    let (out, ts) = simtrain(&slow_args, 60);
    out.assert_ok();
    let link = |t: &Truth| {
        t.working_pids().iter().filter_map(|p| t.process(*p).and_then(|r| r.link_gbps)).collect::<Vec<f64>>()
    };
    let (lb, ls) = (link(&tb), link(&ts));
    assert!(!lb.is_empty() && !ls.is_empty(), "process lines carry link_gbps: {lb:?} {ls:?}");
    assert!(ls.iter().all(|s| (s * 10.0 - lb[0]).abs() < 1e-6 * lb[0]), "link {lb:?} -> {ls:?}");
    // The rank that arrives last waits for nobody: its duration is the transfer itself.
    let transfer = |t: &Truth| {
        median(
            collectives_by_seq(t).values().filter_map(|cs| cs.iter().filter_map(|c| c.duration_ns()).min()).collect(),
        )
    };
    let (db, ds) = (transfer(&tb), transfer(&ts));
    eprintln!("all-reduce of 25 MiB: {db} ns at {} GB/s, {ds} ns at {} GB/s", lb[0], ls[0]);
    assert!(ds as f64 > 5.0 * db as f64, "slow link: {ds} ns vs {db} ns");
}

#[test]
fn straggler_arrives_last() {
    let (out, t) =
        simtrain(&["--ranks", "3", "--steps", "8", "--quiet", "--straggler", "1", "--straggler-ms", "80"], 90);
    out.assert_ok();
    let seqs = collectives_by_seq(&t);
    let mut last = BTreeMap::<i64, usize>::new();
    for cs in seqs.values().skip(BUCKETS) {
        assert_eq!(cs.len(), 3);
        let latest = cs.iter().max_by_key(|c| c.start()).unwrap();
        *last.entry(latest.rank).or_default() += 1;
    }
    let total: usize = last.values().sum();
    eprintln!("last to arrive, by rank: {last:?}");
    assert!(last.get(&1).copied().unwrap_or(0) * 10 >= total * 8, "rank 1 should arrive last: {last:?}");
}

#[test]
fn hang_leaves_the_collective_unfinished_on_the_waiting_ranks() {
    require_mock_libs(&simtrain_libs(3));
    let exe = require_program("simtrain");
    let dir = TempDir::new("hang");
    let _guard = exclusive();
    let args = ["--ranks", "3", "--steps", "30", "--quiet", "--hang-at", "5", "--hang-rank", "2"];
    let mut r = Running::spawn(sim_command(&exe, &args, dir.path()));
    let hung = r.wait_for_stderr("hangs at step 5", Duration::from_secs(60));
    std::thread::sleep(Duration::from_millis(1500)); // the others reach the collective
    r.terminate();
    let out = r.finish(Duration::from_secs(60));
    assert!(hung, "rank 2 never reported its hang: {}", out.describe());
    assert_ne!(out.code, 0, "a hung job stopped by SIGTERM must not succeed");
    let t = Truth::load(dir.path());
    let unfinished = |rank: i64| -> Vec<u64> {
        t.of_rank_kind(rank, "collective").iter().filter(|c| c.unfinished).map(|c| c.seq.unwrap_or(0)).collect()
    };
    for rank in [0, 1] {
        let u = unfinished(rank);
        assert!(!u.is_empty(), "rank {rank} must have an unfinished collective: {}", t.summary());
        assert!(
            t.of_rank_kind(rank, "collective").iter().filter(|c| c.unfinished).all(|c| c.end_ns.is_none()),
            "unfinished collectives have end_ns null"
        );
    }
    assert!(unfinished(2).is_empty(), "the skipping rank waits in no collective");
    let first_stuck = unfinished(0).into_iter().min().unwrap();
    let r2: Vec<u64> = t.of_rank_kind(2, "collective").iter().filter_map(|c| c.seq).collect();
    assert!(r2.iter().all(|s| *s < first_stuck), "rank 2 never called seq {first_stuck}: {r2:?}");
    assert_eq!(r2.len(), 5 * BUCKETS, "rank 2 reduced the 5 steps before the hang");
}

#[test]
fn desync_calls_different_sizes_at_the_same_seq() {
    let (out, t) = simtrain(&["--ranks", "2", "--steps", "8", "--quiet", "--desync-at", "3", "--desync-rank", "1"], 30);
    eprintln!("desync run: exit {} after {:.2?}", out.code, out.wall);
    let seqs = collectives_by_seq(&t);
    let differing: Vec<(&u64, &Vec<&TruthRecord>)> =
        seqs.iter().filter(|(_, cs)| cs.iter().map(|c| c.bytes).collect::<BTreeSet<_>>().len() > 1).collect();
    assert!(!differing.is_empty(), "no seq with different bytes: {}", t.summary());
    let (seq, cs) = differing[0];
    let idx = seqs.keys().position(|s| s == seq).unwrap();
    assert_eq!(idx, 3 * BUCKETS, "the desync is bucket 0 of step 3");
    let b0 = cs.iter().find(|c| c.rank == 0).and_then(|c| c.bytes).unwrap();
    let b1 = cs.iter().find(|c| c.rank == 1).and_then(|c| c.bytes).unwrap();
    assert_eq!(b1 * 2, b0, "rank 1 all-reduces half the count");
}

#[test]
fn oom_exits_1_with_an_error_line() {
    let (out, t) = simtrain(&["--steps", "50", "--quiet", "--oom-at", "5"], 60);
    assert_eq!(out.code, 1, "{}", out.describe());
    assert!(out.stderr.contains("CUDA out of memory"), "{}", out.stderr);
    let steps = batch_copies(&t.of_pid(single_pid(&t))).len();
    assert!((4..=6).contains(&steps), "OOM at about step 5, ran {steps} steps");
}

#[test]
fn amp_overflow_skips_the_optimizer() {
    let (out, t) = simtrain(&["--steps", "20", "--quiet", "--amp-overflow-every", "5"], 60);
    out.assert_ok();
    let sums = out.simtrain_summaries();
    assert_eq!(sums.values().next().and_then(|f| f.get("optimizer_skipped")).map(String::as_str), Some("4"));
    let recs = t.of_pid(single_pid(&t));
    let checks = kernels_named(&recs, K::AMP_CHECK);
    assert_eq!(checks.len(), 20);
    assert_eq!(dtoh4(&recs).len(), 20, "found_inf read back every step");
    let adam = kernels_named(&recs, K::ADAMW);
    for (step, c) in checks.iter().enumerate() {
        let next = checks.get(step + 1).map(|n| n.start()).unwrap_or(u64::MAX);
        let n = adam.iter().filter(|k| k.start() > c.start() && k.start() < next).count();
        let expect = if (step + 1) % 5 == 0 { 0 } else { 4 };
        assert_eq!(n, expect, "step {step}: {n} optimizer kernels");
    }
}

#[test]
fn workers_are_forked_and_feed_every_step() {
    let (out, t) = simtrain(&["--steps", "12", "--quiet", "--workers", "2"], 60);
    out.assert_ok();
    let worker_pids: Vec<i64> = out
        .stderr
        .lines()
        .filter(|l| l.contains("dataloader worker"))
        .filter_map(|l| l.rsplit(' ').next().and_then(|p| p.parse().ok()))
        .collect();
    assert_eq!(worker_pids.len(), 2, "{}", out.stderr);
    let sums = out.simtrain_summaries();
    assert_eq!(sums.values().next().and_then(|f| f.get("worker_batches")).map(String::as_str), Some("12"));
    let pid = single_pid(&t);
    assert!(!worker_pids.contains(&pid));
    assert_eq!(batch_copies(&t.of_pid(pid)).len(), 12);
    for w in worker_pids {
        assert!(!t.working_pids().contains(&w), "worker {w} must not use the GPU");
    }
}

#[test]
fn graphs_replay_forward() {
    let (out, t) = simtrain(&["--steps", "5", "--quiet", "--graphs"], 60);
    out.assert_ok();
    let recs = t.of_pid(single_pid(&t));
    assert_eq!(kernels_named(&recs, K::FLASH_FWD).len(), 5 * LAYERS, "{}", t.summary());
    assert_eq!(kernels_named(&recs, K::FLASH_BWD).len(), 5 * LAYERS);
}

// ------------------------------------------------------------------------------- real binaries

fn run_program_on_mock(name: &str, libs: &[&str]) -> (RunOutput, Truth) {
    require_mock_libs(libs);
    let exe = require_program(name);
    let dir = TempDir::new(name);
    let _guard = exclusive();
    let out = run(sim_command(&exe, &[], dir.path()), Duration::from_secs(60));
    out.assert_ok();
    (out, Truth::load(dir.path()))
}

fn assert_kernels(t: &Truth, expected: &[(&str, usize)]) {
    for (name, n) in expected {
        let got = t.of_kind("kernel").filter(|k| k.name() == *name).count();
        assert_eq!(got, *n, "kernel {name}: {got} launches in the truth, expected {n}: {}", t.summary());
    }
}

#[test]
fn nvcc_programs_run_on_the_mock_with_their_mangled_names() {
    let libs = ["libcudart.so.13", "libcuda.so.1"];
    let (_, t) = run_program_on_mock("cu13_vector_add", &libs);
    assert_kernels(&t, &[("_Z10vector_addPKfS0_Pfi", 3)]);
    let (_, t) = run_program_on_mock("cu13_templated", &libs);
    assert_kernels(
        &t,
        &[
            ("_ZN10tprof_test5scaleIfLi4EEEvPT_S1_i", 2),
            ("_ZN10tprof_test5scaleIdLi2EEEvPT_S1_i", 1),
            ("_ZN10tprof_test5applyINS_6SquareEEEvPfiT_", 1),
        ],
    );
    let (_, t) = run_program_on_mock("cu13_streams", &libs);
    assert_kernels(&t, &[("_Z13stage_computePfii", 3), ("_Z12stage_reducePKfPfi", 3)]);
    let kinds: BTreeSet<(String, Option<bool>)> = t
        .of_kind("memcpy")
        .map(|c| {
            (
                c.copy_kind.clone().unwrap_or_default(),
                if c.copy_kind.as_deref() == Some("DtoD") { None } else { c.host_pinned },
            )
        })
        .collect();
    for want in [("HtoD", Some(true)), ("HtoD", Some(false)), ("DtoH", Some(true)), ("DtoD", None)] {
        assert!(kinds.contains(&(want.0.to_string(), want.1)), "streams: no {want:?} copy in {kinds:?}");
    }
    assert!(t.of_kind("memset").count() >= 2, "streams: memsets");
    let streams: BTreeSet<u64> = t.of_kind("kernel").filter_map(|k| k.stream).collect();
    assert!(streams.len() >= 3, "streams: kernels on 3 streams, got {streams:?}");
}

#[test]
fn cuda12_c_programs_run_on_the_mock() {
    let libs = ["libcudart.so.12", "libcuda.so.1"];
    let (out, t) = run_program_on_mock("rt12_memory", &libs);
    assert!(out.stdout.contains("ok"), "{}", out.describe());
    assert!(t.of_kind("memset").count() >= 2 && t.of_kind("memcpy").count() >= 5, "{}", t.summary());
    let (_, t) = run_program_on_mock("rt12_launch", &libs);
    assert_kernels(
        &t,
        &[
            ("_Z16rt_launch_kernelPfi", 1),
            ("_Z20launch_ex_cfg_kernelPKfPfi", 1),
            ("_ZN3drv13driver_kernelIiEEvPT_i", 1),
        ],
    );
}

fn real_lib_dir(sub: &str, soname: &str) -> std::path::PathBuf {
    let d = nvidia_wheels_dir().join(sub).join("lib");
    assert!(d.join(soname).exists(), "NVIDIA's {soname} not found in {} (run scripts/setup-python.sh)", d.display());
    d
}

fn assert_fails_cleanly(exe: &Path, lib: &Path) {
    let cmd = command_with_libs(exe, &[], &[lib]);
    let out = run(cmd, Duration::from_secs(30));
    assert_eq!(out.code, 3, "{} on NVIDIA's libcudart without a driver: {}", exe.display(), out.describe());
    assert!(out.stderr.contains("CUDA error"), "{}", out.describe());
}

#[test]
fn programs_fail_cleanly_on_nvidia_libcudart_without_a_driver() {
    let cu12 = real_lib_dir("cuda_runtime", "libcudart.so.12");
    let cu13 = real_lib_dir("cu13", "libcudart.so.13");
    let mut checked = 0;
    for name in ["simtrain", "rt12_memory", "rt12_launch"] {
        assert_fails_cleanly(&require_program(name), &cu12);
        checked += 1;
    }
    for name in ["cu13_vector_add", "cu13_templated", "cu13_streams"] {
        assert_fails_cleanly(&require_program(name), &cu13);
        checked += 1;
    }
    assert_eq!(checked, 6);
}

// ------------------------------------------------------------------------------- scripts/simgpu.sh

#[test]
fn simgpu_sh_passes_the_exit_code_and_documents_the_knobs() {
    let lib = require_mock_libs(&["libcudart.so.12"]);
    let script = repo_root().join("scripts/simgpu.sh");
    let help = std::process::Command::new(&script).arg("-h").output().expect("run simgpu.sh -h");
    let text = String::from_utf8_lossy(&help.stdout);
    assert!(help.status.success());
    for var in ["SIMGPU_TRUTH", "SIMGPU_KERNEL_NS", "SIMGPU_LINK_GBPS", "SIMGPU_DEVICES", "SIMGPU_MEM_GB"] {
        assert!(text.contains(var), "simgpu.sh -h must document {var}");
    }
    let st = std::process::Command::new(&script)
        .args(["sh", "-c", "case \"$LD_LIBRARY_PATH\" in \"$0\"*) exit 7;; *) exit 1;; esac", lib.to_str().unwrap()])
        .env("SIMGPU_LIB_DIR", &lib)
        .status()
        .expect("run simgpu.sh");
    assert_eq!(st.code(), Some(7), "exit code passes through, mocks first in LD_LIBRARY_PATH");
}
