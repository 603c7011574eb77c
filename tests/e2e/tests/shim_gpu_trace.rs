//! libtprof's GPU side under the simulated stack: CUPTI activity records against the ground truth,
//! correlation to host calls, NCCL calls across ranks, NVTX nesting and step markers, and the
//! degraded paths (CUPTI off, another CUPTI subscriber, CUPTI dropping records, injection).
//!
//! Prerequisites (each test fails naming what is missing): `cargo build --release -p tprof-shim`,
//! `make -C tests/simgpu`, `make -C tests/programs`.

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use tprof_e2e::gpu_trace::{gpu_ops, host_correlations, load_rings, nvtx_nesting, traced_command, Attach, Ring};
use tprof_e2e::programs::{
    exclusive, require_mock_libs, require_program, run, simtrain_libs, RunOutput, TempDir, Truth,
};
use tprof_format::{CollOp, MarkerKind, Record};

const STEPS: usize = 4;
/// Duration tolerance (ns) between the ground truth and the ring.
const DURATION_TOL_NS: u64 = 1_000;
/// Start-time tolerance (ns), only to confirm the pairing: the mock CUPTI maps its monotonic times
/// into our timestamp callback by a linear fit that is off by up to ~20 us when the CPUs are busy.
const START_TOL_NS: u64 = 100_000;

struct Run {
    out: RunOutput,
    truth: Truth,
    rings: Vec<Ring>,
    _dirs: (TempDir, TempDir),
}

fn simtrain(ranks: usize, env: &[(&str, &str)], attach: Attach) -> Run {
    require_mock_libs(&simtrain_libs(ranks));
    let program = require_program("simtrain");
    let truth_dir = TempDir::new("gt-truth");
    let out_dir = TempDir::new("gt-out");
    let steps = STEPS.to_string();
    let ranks_s = ranks.to_string();
    let mut cmd = traced_command(
        &program,
        &["--ranks", &ranks_s, "--steps", &steps, "--quiet"],
        truth_dir.path(),
        out_dir.path(),
        attach,
    );
    for (k, v) in env {
        cmd.env(k, v);
    }
    let _one_at_a_time = exclusive();
    let out = run(cmd, Duration::from_secs(120));
    let truth = Truth::load(truth_dir.path());
    let rings = load_rings(out_dir.path());
    Run { out, truth, rings, _dirs: (truth_dir, out_dir) }
}

fn ring_of_pid(run: &Run, pid: i64) -> &Ring {
    run.rings.iter().find(|r| r.pid as i64 == pid).unwrap_or_else(|| {
        panic!(
            "no ring for pid {pid}; rings: {:?}\n{}",
            run.rings.iter().map(|r| r.path.display().to_string()).collect::<Vec<_>>(),
            run.out.describe()
        )
    })
}

/// Every kernel / memcpy / memset of the truth appears with the same device, stream and duration, and
/// is linked to a host call of its ring. Returns (matched ops, linked to the shim's own ids).
fn check_gpu_ops_against_truth(run: &Run) -> (usize, usize) {
    let mut matched = 0;
    let mut shim_linked = 0;
    let (mut worst_duration, mut worst_start) = (0u64, 0u64);
    for (rank, pid) in run.truth.pid_by_rank() {
        let ring = ring_of_pid(run, pid);
        assert!(ring.damage.is_empty(), "ring {} damaged: {:?}", ring.path.display(), ring.damage);
        let ops = gpu_ops(ring);
        let hosts = host_correlations(ring);
        let mut by_stream: BTreeMap<(u32, u32, &str), Vec<_>> = BTreeMap::new();
        for o in &ops {
            by_stream.entry((o.device, o.stream, o.kind)).or_default().push(o);
        }
        let mut truth_by_stream: BTreeMap<(u32, u32, &str), Vec<_>> = BTreeMap::new();
        for t in run.truth.of_pid(pid) {
            let kind = match t.kind.as_str() {
                "kernel" => "kernel",
                "memcpy" => "memcpy",
                "memset" => "memset",
                _ => continue,
            };
            if t.unfinished {
                continue;
            }
            let key = (t.device.unwrap_or(-1) as u32, t.stream.unwrap_or(0) as u32, kind);
            truth_by_stream.entry(key).or_default().push(t);
        }
        for (key, truths) in &truth_by_stream {
            let got = by_stream.get(key).cloned().unwrap_or_default();
            assert_eq!(
                got.len(),
                truths.len(),
                "rank {rank}: {} {}s on device {} stream {} in the truth, {} in the ring",
                truths.len(),
                key.2,
                key.0,
                key.1,
                got.len()
            );
            // Pair in start order, allowing local swaps: the mock CUPTI maps each delivered batch
            // into our clock separately, so neighbours on a stream may trade places by a few us.
            let mut used = vec![false; got.len()];
            for (i, t) in truths.iter().enumerate() {
                let td = t.duration_ns().unwrap_or(0);
                let lo = i.saturating_sub(4);
                let hi = (i + 5).min(got.len());
                let pick = (lo..hi)
                    .filter(|&j| !used[j])
                    .filter(|&j| key.2 != "kernel" || got[j].name == t.name())
                    .min_by_key(|&j| {
                        (td.abs_diff(got[j].duration()) > DURATION_TOL_NS, t.start().abs_diff(got[j].start))
                    })
                    .unwrap_or_else(|| {
                        panic!("rank {rank}: no ring {} near truth #{i} {:?} on stream {}", key.2, t.name(), key.1)
                    });
                used[pick] = true;
                let o = got[pick];
                worst_duration = worst_duration.max(td.abs_diff(o.duration()));
                if t.start().abs_diff(o.start) > worst_start {
                    worst_start = t.start().abs_diff(o.start);
                    if std::env::var_os("GT_DEBUG").is_some() {
                        let pairs = ring.conv.pairs();
                        eprintln!(
                            "worst so far: rank {rank} {} truth {} ring {} syncs mono {:?}",
                            key.2,
                            t.start(),
                            o.start,
                            pairs.iter().map(|p| p.1).collect::<Vec<_>>()
                        );
                    }
                }
                assert!(
                    td.abs_diff(o.duration()) <= DURATION_TOL_NS,
                    "rank {rank}: {} {:?} lasts {td} ns in the truth ({}..{}), {} ns in the ring ({}..{})",
                    key.2,
                    t.name(),
                    t.start(),
                    t.end(),
                    o.duration(),
                    o.start,
                    o.end
                );
                assert!(
                    t.start().abs_diff(o.start) <= START_TOL_NS,
                    "rank {rank}: {} {:?} starts at {} (truth) vs {} (ring)",
                    key.2,
                    t.name(),
                    t.start(),
                    o.start
                );
                if key.2 == "kernel" {
                    assert_eq!(o.name, t.name(), "rank {rank}: kernel name");
                }
                if key.2 != "kernel" {
                    assert_eq!(Some(o.bytes), t.bytes, "rank {rank}: {} bytes", key.2);
                }
                assert!(
                    hosts.contains(&o.correlation),
                    "rank {rank}: {} {:?} (correlation {:#x}) is linked to no host call",
                    key.2,
                    t.name(),
                    o.correlation
                );
                if o.correlation & 0x8000_0000 != 0 {
                    shim_linked += 1;
                }
                matched += 1;
            }
        }
        let extra: usize =
            by_stream.iter().filter(|(k, _)| !truth_by_stream.contains_key(*k)).map(|(_, v)| v.len()).sum();
        assert_eq!(extra, 0, "rank {rank}: GPU records on streams the truth does not have");
    }
    eprintln!("worst |duration error| {worst_duration} ns, worst |start error| {worst_start} ns over {matched} ops");
    (matched, shim_linked)
}

/// NCCL: every rank has the truth's collectives with the same seq and bytes; ranks agree on
/// (comm, seq) -> (op, bytes); each data-moving call is linked to its kernel.
fn check_nccl(run: &Run, ranks: usize) {
    type SeenOn = Vec<(CollOp, u64, u32)>;
    let mut by_comm_seq: BTreeMap<(u64, u64), SeenOn> = BTreeMap::new();
    for (rank, pid) in run.truth.pid_by_rank() {
        let ring = ring_of_pid(run, pid);
        let kernels: HashSet<u32> = ring
            .records
            .iter()
            .filter_map(|r| match *r {
                Record::Kernel { correlation, start, .. } if start != 0 => Some(correlation),
                _ => None,
            })
            .collect();
        let colls: Vec<_> = ring
            .records
            .iter()
            .filter_map(|r| match *r {
                Record::Collective { op, comm, seq, bytes, correlation, rank, nranks, .. } if op.moves_data() => {
                    Some((op, comm, seq, bytes, correlation, rank, nranks))
                }
                _ => None,
            })
            .collect();
        let truth = run.truth.of_rank_kind(rank, "collective");
        assert_eq!(colls.len(), truth.len(), "rank {rank}: NCCL calls in the ring vs collectives in the truth");
        for (c, t) in colls.iter().zip(&truth) {
            assert_eq!(c.0.name(), t.op.as_deref().unwrap_or(""), "rank {rank}: op");
            assert_eq!(Some(c.2), t.seq, "rank {rank}: seq");
            assert_eq!(Some(c.3), t.bytes, "rank {rank}: bytes of {} seq {}", c.0.name(), c.2);
            assert_eq!(c.5 as i64, rank, "rank in the Collective record");
            assert_eq!(c.6 as usize, ranks, "nranks in the Collective record");
            assert!(kernels.contains(&c.4), "rank {rank}: {} seq {} is linked to no kernel", c.0.name(), c.2);
            by_comm_seq.entry((c.1, c.2)).or_default().push((c.0, c.3, c.5));
        }
    }
    assert!(!by_comm_seq.is_empty(), "no NCCL calls recorded");
    for ((comm, seq), v) in &by_comm_seq {
        assert_eq!(v.len(), ranks, "comm {comm:x} seq {seq}: seen on {} ranks", v.len());
        assert!(v.iter().all(|x| x.0 == v[0].0 && x.1 == v[0].1), "comm {comm:x} seq {seq}: ranks disagree: {v:?}");
    }
}

/// NVTX ranges nest per thread, simtrain's "step" ranges give one StepBegin/StepEnd each.
fn check_nvtx(run: &Run) {
    for (rank, pid) in run.truth.pid_by_rank() {
        let ring = ring_of_pid(run, pid);
        let (pushes, problems) = nvtx_nesting(ring);
        assert!(problems.is_empty(), "rank {rank}: NVTX nesting: {problems:?}");
        let steps = ring.count(|r| matches!(r, Record::NvtxPush { name, .. } if ring.name(*name) == "step"));
        assert_eq!(steps, STEPS, "rank {rank}: 'step' pushes");
        assert!(pushes > STEPS, "rank {rank}: only {pushes} NVTX pushes (the simtrain domain ranges are missing)");
        let begins = ring.count(|r| matches!(r, Record::Marker { kind: MarkerKind::StepBegin, .. }));
        let ends = ring.count(|r| matches!(r, Record::Marker { kind: MarkerKind::StepEnd, .. }));
        assert_eq!((begins, ends), (STEPS, STEPS), "rank {rank}: step markers");
    }
}

fn markers(ring: &Ring, kind: MarkerKind) -> Vec<(u64, String)> {
    ring.records
        .iter()
        .filter_map(|r| match *r {
            Record::Marker { kind: k, value, name, .. } if k == kind => Some((value, ring.name(name))),
            _ => None,
        })
        .collect()
}

fn full_check(ranks: usize) {
    let run = simtrain(ranks, &[], Attach::Preload);
    run.out.assert_ok();
    assert_eq!(run.truth.pid_by_rank().len(), ranks, "truth: {}", run.truth.summary());
    let (matched, shim_linked) = check_gpu_ops_against_truth(&run);
    assert!(matched > 100 * ranks, "only {matched} GPU ops matched");
    assert_eq!(shim_linked, matched, "every GPU op is linked to the interposer's own id under LD_PRELOAD");
    check_nccl(&run, ranks);
    check_nvtx(&run);
    assert!(!run.out.stderr.contains("CUPTI unavailable"), "{}", run.out.stderr);
    eprintln!("{ranks} ranks: {matched} GPU ops matched the truth and linked; {}", run.truth.summary());
}

#[test]
fn simtrain_2_ranks_gpu_records_match_truth() {
    full_check(2);
}

#[test]
fn simtrain_4_ranks_gpu_records_match_truth() {
    full_check(4);
}

#[test]
fn without_cupti_the_interposers_still_give_the_kernels() {
    let run = simtrain(2, &[("SIMGPU_CUPTI", "0")], Attach::Preload);
    run.out.assert_ok();
    let warnings = run.out.stderr.lines().filter(|l| l.contains("CUPTI unavailable")).count();
    assert_eq!(warnings, 2, "one warning line per rank process:\n{}", run.out.stderr);
    for (rank, pid) in run.truth.pid_by_rank() {
        let ring = ring_of_pid(&run, pid);
        let why = markers(ring, MarkerKind::CuptiUnavailable);
        assert_eq!(why.len(), 1, "rank {rank}: CuptiUnavailable markers");
        assert!(why[0].1.contains("NOT_INITIALIZED"), "rank {rank}: reason {:?}", why[0].1);
        assert_eq!(gpu_ops(ring).len(), 0, "rank {rank}: GPU times without CUPTI?");
        let hosts = host_correlations(ring);
        let estimated: Vec<(String, u32)> = ring
            .records
            .iter()
            .filter_map(|r| match *r {
                Record::Kernel { start: 0, end: 0, name, correlation, .. } => Some((ring.name(name), correlation)),
                _ => None,
            })
            .collect();
        let launched: Vec<String> = run
            .truth
            .of_rank_kind(rank, "kernel")
            .iter()
            .filter(|k| !k.is_nccl_kernel())
            .map(|k| k.name().to_string())
            .collect();
        assert_eq!(
            estimated.len(),
            launched.len(),
            "rank {rank}: kernels from the interposers vs runtime-launched kernels"
        );
        let mut a: Vec<&str> = estimated.iter().map(|e| e.0.as_str()).collect();
        let mut b: Vec<&str> = launched.iter().map(String::as_str).collect();
        a.sort_unstable();
        b.sort_unstable();
        assert_eq!(a, b, "rank {rank}: kernel names from registration");
        assert!(estimated.iter().all(|e| hosts.contains(&e.1)), "rank {rank}: estimated kernels linked to launches");
    }
    check_nccl_calls_only(&run);
}

/// Without CUPTI: NCCL calls are still there with agreeing seq/bytes.
fn check_nccl_calls_only(run: &Run) {
    let mut per_rank: Vec<Vec<(u64, u64)>> = Vec::new();
    for ring in &run.rings {
        let v: Vec<(u64, u64)> = ring
            .records
            .iter()
            .filter_map(|r| match *r {
                Record::Collective { op, seq, bytes, .. } if op.moves_data() => Some((seq, bytes)),
                _ => None,
            })
            .collect();
        if !v.is_empty() {
            per_rank.push(v);
        }
    }
    assert_eq!(per_rank.len(), 2, "NCCL calls on both ranks");
    assert_eq!(per_rank[0], per_rank[1], "ranks agree on (seq, bytes)");
}

#[test]
fn cupti_owned_by_another_tool_warns_once_and_runs_on() {
    let run = simtrain(1, &[("SIMGPU_CUPTI_BUSY", "1")], Attach::Preload);
    run.out.assert_ok();
    let lines: Vec<&str> = run.out.stderr.lines().filter(|l| l.contains("tprof")).collect();
    assert_eq!(lines.len(), 1, "exactly one tprof line:\n{}", run.out.stderr);
    assert!(lines[0].contains("CUPTI unavailable") && lines[0].contains("another tool"), "{}", lines[0]);
    let ring = run.rings.first().expect("a ring");
    let why = markers(ring, MarkerKind::CuptiUnavailable);
    assert!(why.len() == 1 && why[0].1.contains("MULTIPLE_SUBSCRIBERS"), "{why:?}");
    assert!(ring.count(|r| matches!(r, Record::Kernel { start: 0, .. })) > 100, "interposed kernels recorded");
}

#[test]
fn cupti_dropped_records_are_counted() {
    let run = simtrain(1, &[("SIMGPU_CUPTI_DROP_EVERY", "97")], Attach::Preload);
    run.out.assert_ok();
    let ring = run.rings.first().expect("a ring");
    let dropped: u64 = markers(ring, MarkerKind::CuptiDropped).iter().map(|m| m.0).sum();
    let truth_kernels = run.truth.of_kind("kernel").count() as u64;
    let ring_kernels = gpu_ops(ring).iter().filter(|o| o.kind == "kernel").count() as u64;
    assert!(dropped > 0, "no CuptiDropped markers");
    assert!(ring_kernels < truth_kernels, "{ring_kernels} kernels recorded of {truth_kernels}: nothing was dropped?");
    assert!(
        truth_kernels - ring_kernels <= dropped,
        "{} kernels missing but only {dropped} records reported dropped",
        truth_kernels - ring_kernels
    );
    // Every 97th record of all kinds: about 1/97 of the records CUPTI delivered.
    let delivered = ring.records.len() as u64;
    assert!(dropped * 97 >= delivered / 4, "{dropped} dropped of ~{delivered} records");
}

/// What CUPTI dropped is counted exactly and reported: per process, the ring header, the sum of the
/// `CuptiDropped` markers, `tprof info` and the `tprof summary` note all give the number of records
/// the simulated CUPTI dropped (its ground truth), for every rank.
#[test]
fn cupti_drops_are_stored_and_reported_exactly() {
    let run = simtrain(2, &[("SIMGPU_CUPTI_DROP_EVERY", "97")], Attach::Preload);
    run.out.assert_ok();
    let truth_dropped: BTreeMap<i64, u64> =
        run.truth.of_kind("cupti_dropped").map(|t| (t.pid, t.records.expect("records"))).collect();
    assert_eq!(truth_dropped.len(), 2, "one cupti_dropped truth line per rank process");
    let tprof = tprof_e2e::diagnose::tprof_bin();
    for (pid, &expected) in &truth_dropped {
        assert!(expected > 0, "pid {pid}: the simulated CUPTI dropped nothing");
        let ring = ring_of_pid(&run, *pid);
        let marked: u64 = markers(ring, MarkerKind::CuptiDropped).iter().map(|m| m.0).sum();
        assert_eq!(marked, expected, "pid {pid}: CuptiDropped markers vs the mock's count");
        let header = tprof_format::RingReader::open(&ring.path).expect("ring").stats().cupti_dropped;
        assert_eq!(header, expected, "pid {pid}: the ring header's CUPTI drop count");
        let info = std::process::Command::new(&tprof).arg("info").arg(&ring.path).output().expect("tprof info");
        let info = String::from_utf8_lossy(&info.stdout);
        let line =
            info.lines().find(|l| l.starts_with("dropped:")).unwrap_or_else(|| panic!("no dropped line:\n{info}"));
        assert_eq!(line, format!("dropped:     0 events (shim), {expected} records (CUPTI)"), "pid {pid}: tprof info");
        let summary =
            std::process::Command::new(&tprof).args(["summary", "--json"]).arg(&ring.path).output().expect("summary");
        let summary: serde_json::Value = serde_json::from_slice(&summary.stdout).expect("summary JSON");
        let note = format!("CUPTI dropped {expected} activity records");
        assert!(
            summary["notes"]
                .as_array()
                .is_some_and(|n| n.iter().any(|x| x.as_str().is_some_and(|x| x.contains(&note)))),
            "pid {pid}: no note {note:?} in {}",
            summary["notes"]
        );
    }
}

#[test]
fn injection_instead_of_preload_gives_the_same_gpu_records() {
    let lib_dir = require_mock_libs(&["libcuda.so.1"]);
    let libcuda = std::fs::read(lib_dir.join("libcuda.so.1")).expect("read libcuda.so.1");
    assert!(
        libcuda.windows(21).any(|w| w == b"CUDA_INJECTION64_PATH"),
        "prerequisite missing: the simulated libcuda.so.1 in {} does not load CUDA_INJECTION64_PATH at cuInit \
         (tests/simgpu), so injection cannot be tested",
        lib_dir.display()
    );
    let run = simtrain(2, &[], Attach::Injection);
    run.out.assert_ok();
    let (matched, _) = check_gpu_ops_against_truth(&run);
    assert!(matched > 200, "only {matched} GPU ops matched");
    check_nvtx(&run);
}

#[test]
fn tprof_cupti_0_turns_cupti_off_quietly() {
    let run = simtrain(1, &[("TPROF_CUPTI", "0")], Attach::Preload);
    run.out.assert_ok();
    assert!(!run.out.stderr.contains("tprof"), "no tprof line when CUPTI is off on purpose:\n{}", run.out.stderr);
    let ring = run.rings.first().expect("a ring");
    let why = markers(ring, MarkerKind::CuptiUnavailable);
    assert!(why.len() == 1 && why[0].1.contains("TPROF_CUPTI=0"), "{why:?}");
    assert_eq!(gpu_ops(ring).len(), 0, "no CUPTI records");
    let launched = run.truth.of_kind("kernel").filter(|k| !k.is_nccl_kernel()).count();
    let estimated = ring.count(|r| matches!(r, Record::Kernel { start: 0, .. }));
    assert_eq!(estimated, launched, "every runtime launch as a time-less kernel");
}
