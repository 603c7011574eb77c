//! The NCCL interposers on the calls beyond `ncclCommInitRank` + collectives, under the simulated
//! GPU stack, against its ground truth (`collective`, `nccl_comm`, `nccl_mem` lines):
//! - communicators made by `ncclCommInitRankScalable` (simtrain `--scalable-init 2`) carry one id on
//!   every rank, so `tprof diagnose` finds a straggler / desync across ranks;
//! - `ncclCommSplit` / `ncclCommShrink` children (tests/programs/cuda/nccl_calls.c) carry one id per
//!   child, the same on all its ranks, different between children;
//! - `ncclPutSignal` / `ncclSignal` / `ncclWaitSignal`, `ncclMemAlloc` / `ncclMemFree` and the
//!   registration calls are recorded with their bytes, peers and addresses;
//! - NCCL's own NVTX ranges (domain "NCCL") are dropped while the interposers see the calls and kept
//!   when they do not (`nccl_calls --direct` calls the `pnccl*` entry points, as a library with NCCL
//!   linked in statically does).
//!
//! Run: `make -C tests/simgpu && make -C tests/programs && cargo build --release -p tprof-shim -p
//! tprof-decoder && cargo test --release -p tprof-e2e --test nccl_scalable`

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use tprof_e2e::diagnose::{assert_top, diagnose_json, profile_simtrain, ranks, steps, tprof_lib, verdict_table};
use tprof_e2e::programs::{exclusive, require_mock_libs, require_program, run, sim_command, RunOutput, TempDir};
use tprof_format::{ApiDomain, CollOp, Decoded, MemOp, Record, RingReader, StrId};

/// One process's ring: its pid and records, names resolved.
struct ProcRing {
    pid: u32,
    records: Vec<Record>,
    names: HashMap<u32, String>,
}

impl ProcRing {
    fn name(&self, id: StrId) -> &str {
        self.names.get(&id.0).map(String::as_str).unwrap_or("")
    }
    fn collectives(&self, op: CollOp) -> Vec<&Record> {
        self.records.iter().filter(|r| matches!(r, Record::Collective { op: o, .. } if *o == op)).collect()
    }
    /// Names of the NVTX pushes in domain `domain`.
    fn pushes_in(&self, domain: &str) -> Vec<String> {
        self.records
            .iter()
            .filter_map(|r| match *r {
                Record::NvtxPush { domain: d, name, .. } if self.name(d) == domain => Some(self.name(name).to_string()),
                _ => None,
            })
            .collect()
    }
}

fn read_proc_rings(dir: &Path) -> Vec<ProcRing> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "tprof")).collect())
        .unwrap_or_default();
    paths.sort();
    paths
        .iter()
        .map(|p| {
            let reader = RingReader::open(p).unwrap_or_else(|e| panic!("open {}: {e}", p.display()));
            let table = reader.all_strings();
            let mut records = Vec::new();
            let mut names = HashMap::new();
            for item in reader.records().flatten() {
                match item {
                    Decoded::Record(r) => records.push(r),
                    Decoded::String { id, bytes } => {
                        names.insert(id.0, String::from_utf8_lossy(bytes).into_owned());
                    }
                    Decoded::Unknown { .. } => {}
                }
            }
            let mut ids = Vec::new();
            for r in &records {
                match *r {
                    Record::Api { name, .. } => ids.push(name),
                    Record::NvtxPush { domain, name, .. } => ids.extend([domain, name]),
                    _ => {}
                }
            }
            for id in ids {
                names.entry(id.0).or_insert_with(|| table.name(id).into_owned());
            }
            ProcRing { pid: reader.header().pid, records, names }
        })
        .collect()
}

/// Every ground-truth line of a run.
fn truth_lines(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        out.extend(text.lines().filter_map(|l| serde_json::from_str::<Value>(l).ok()));
    }
    out
}

fn of_type<'a>(t: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    t.iter().filter(move |v| v["type"] == kind)
}

/// A run of a program under the shim on the simulated stack: output, rings, ground truth.
struct ShimRun {
    out: RunOutput,
    rings: Vec<ProcRing>,
    truth: Vec<Value>,
}

fn run_under_shim(program: &str, args: &[&str]) -> ShimRun {
    require_mock_libs(&["libcudart.so.12", "libnccl.so.2"]);
    let exe = require_program(program);
    let rings_dir = TempDir::new("nccl-rings");
    let truth_dir = TempDir::new("nccl-truth");
    let mut cmd = sim_command(&exe, args, truth_dir.path());
    cmd.env("LD_PRELOAD", tprof_lib()).env("TPROF_OUT", rings_dir.path()).env("TPROF_RING_MB", "4");
    let _g = exclusive();
    let out = run(cmd, Duration::from_secs(120));
    let rings = read_proc_rings(rings_dir.path());
    let truth = truth_lines(truth_dir.path());
    if let Some(name) = truth_dir.path().file_name() {
        let _ = std::fs::remove_file(format!("/dev/shm/simgpu-{}", name.to_string_lossy()));
    }
    ShimRun { out, rings, truth }
}

impl ShimRun {
    /// The rings of the processes that made NCCL communicators (the ranks), by pid.
    fn rank_rings(&self) -> BTreeMap<u32, &ProcRing> {
        let pids: BTreeSet<u64> = of_type(&self.truth, "nccl_comm").filter_map(|c| c["pid"].as_u64()).collect();
        self.rings.iter().filter(|r| pids.contains(&(r.pid as u64))).map(|r| (r.pid, r)).collect()
    }
    /// Ground-truth collective lines of `op` per pid.
    fn truth_ops(&self, op: &str) -> BTreeMap<u64, Vec<&Value>> {
        let mut m: BTreeMap<u64, Vec<&Value>> = BTreeMap::new();
        for c in of_type(&self.truth, "collective").filter(|c| c["op"] == op) {
            m.entry(c["pid"].as_u64().unwrap()).or_default().push(c);
        }
        m
    }
}

/// (comm, rank, nranks, seq, bytes, peer, count) of a collective record.
fn coll(r: &Record) -> (u64, u32, u32, u64, u64, i32, u64) {
    match *r {
        Record::Collective { comm, rank, nranks, seq, bytes, peer, count, .. } => {
            (comm, rank, nranks, seq, bytes, peer, count)
        }
        _ => unreachable!(),
    }
}

#[test]
fn scalable_init_gives_every_rank_the_same_communicator_id() {
    let r = run_under_shim("simtrain", &["--ranks", "4", "--steps", "6", "--quiet", "--scalable-init", "2"]);
    assert_eq!(r.out.code, 0, "simtrain --scalable-init 2: {}", r.out.describe());
    let truth = r.truth_ops("AllReduce");
    let truth_comms: BTreeSet<&str> = truth.values().flatten().filter_map(|c| c["comm"].as_str()).collect();
    assert_eq!(truth_comms.len(), 1, "ground truth: one communicator: {truth_comms:?}");
    let rings = r.rank_rings();
    assert_eq!(rings.len(), 4, "one ring per rank");
    let mut ids = BTreeSet::new();
    let mut comm_ranks = BTreeSet::new();
    for (pid, ring) in &rings {
        let ars = ring.collectives(CollOp::AllReduce);
        assert_eq!(
            ars.len(),
            truth[&(*pid as u64)].len(),
            "pid {pid}: every all-reduce recorded (6 steps x 4 buckets)"
        );
        assert_eq!(ars.len(), 24);
        for (i, a) in ars.iter().enumerate() {
            let (comm, rank, nranks, seq, ..) = coll(a);
            ids.insert(comm);
            comm_ranks.insert(rank);
            assert_eq!((nranks, seq), (4, i as u64), "pid {pid}: all-reduce {i}");
        }
        let inits = ring.collectives(CollOp::CommInit);
        assert_eq!(inits.len(), 1, "pid {pid}: the CommInit of ncclCommInitRankScalable");
        assert_eq!(Some(coll(inits[0]).0), ids.first().copied(), "pid {pid}: CommInit carries the same id");
    }
    assert_eq!(ids.len(), 1, "one communicator id on every rank, got {ids:x?}");
    assert_eq!(comm_ranks, (0..4).collect(), "ranks 0..3 of it");
}

#[test]
fn scalable_init_straggler_and_desync_are_found_across_ranks() {
    let base = ["--ranks", "4", "--steps", "16", "--quiet", "--scalable-init", "2"];
    let cases: [(&[&str], &str); 2] = [
        (&["--straggler", "1", "--straggler-ms", "60"], "straggler"),
        (&["--desync-at", "3", "--desync-rank", "1"], "desync"),
    ];
    for (extra, kind) in cases {
        let args: Vec<&str> = base.iter().chain(extra.iter()).copied().collect();
        let run = profile_simtrain(&args, None, Duration::from_secs(120));
        assert_eq!(run.out.code, 0, "simtrain {args:?}: {}", run.out.describe());
        let d = diagnose_json(run.rings.path(), &[]);
        let v = assert_top(&d, kind, &format!("{args:?}"));
        assert_eq!(ranks(v), vec![1], "{}", verdict_table(&d));
        if kind == "desync" {
            assert_eq!(steps(v), vec![3], "{}", verdict_table(&d));
        }
    }
}

#[test]
fn split_and_shrink_children_carry_one_id_per_child_on_all_its_ranks() {
    let r = run_under_shim("rt12_nccl_calls", &["--ranks", "4"]);
    assert_eq!(r.out.code, 0, "nccl_calls: {}", r.out.describe());
    let rings = r.rank_rings();
    assert_eq!(rings.len(), 4, "one ring per rank");
    // Per rank, the communicators in creation order: ground truth (hex) and the shim's CommInit ids.
    let mut hex_to_id: BTreeMap<String, BTreeSet<u64>> = BTreeMap::new();
    for (pid, ring) in &rings {
        let made: Vec<&str> = of_type(&r.truth, "nccl_comm")
            .filter(|c| c["pid"].as_u64() == Some(*pid as u64))
            .filter_map(|c| c["comm"].as_str())
            .collect();
        let mut inits = ring.collectives(CollOp::CommInit);
        inits.sort_by_key(|i| i.timestamp());
        assert_eq!(made.len(), inits.len(), "pid {pid}: one CommInit per communicator made ({made:?})");
        assert_eq!(made.len(), if made.len() == 2 { 2 } else { 3 }, "init, split (and shrink but on the last rank)");
        for (hex, init) in made.iter().zip(&inits) {
            hex_to_id.entry(hex.to_string()).or_default().insert(coll(init).0);
        }
    }
    assert_eq!(hex_to_id.len(), 4, "world, 2 split children, 1 shrunk: {hex_to_id:x?}");
    for (hex, ids) in &hex_to_id {
        assert_eq!(ids.len(), 1, "communicator {hex}: one id on all its ranks, got {ids:x?}");
    }
    let distinct: BTreeSet<u64> = hex_to_id.values().flatten().copied().collect();
    assert_eq!(distinct.len(), 4, "different communicators, different ids");
    // Every all-reduce is on the id of the communicator the ground truth ran it on.
    let id_of: HashMap<u64, &str> = hex_to_id.iter().map(|(h, ids)| (*ids.first().unwrap(), h.as_str())).collect();
    let truth = r.truth_ops("AllReduce");
    for (pid, ring) in &rings {
        let mut shim: Vec<(String, u64)> = ring
            .collectives(CollOp::AllReduce)
            .iter()
            .map(|a| (id_of.get(&coll(a).0).copied().unwrap_or("?").to_string(), coll(a).3))
            .collect();
        let mut want: Vec<(String, u64)> = truth[&(*pid as u64)]
            .iter()
            .map(|c| (c["comm"].as_str().unwrap().to_string(), c["seq"].as_u64().unwrap()))
            .collect();
        shim.sort();
        want.sort();
        assert_eq!(shim, want, "pid {pid}: (communicator, seq) of every all-reduce");
    }
}

#[test]
fn one_sided_and_memory_calls_are_recorded_with_bytes_peers_and_addresses() {
    let r = run_under_shim("rt12_nccl_calls", &["--ranks", "4"]);
    assert_eq!(r.out.code, 0, "nccl_calls: {}", r.out.describe());
    let rings = r.rank_rings();
    assert_eq!(rings.len(), 4);
    let comm_rank: HashMap<u64, i64> = of_type(&r.truth, "nccl_comm")
        .filter(|c| c["how"] == "init")
        .map(|c| (c["pid"].as_u64().unwrap(), c["comm_rank"].as_i64().unwrap()))
        .collect();
    for (pid, ring) in &rings {
        let me = comm_rank[&(*pid as u64)] as i32;
        let (next, prev) = ((me + 1) % 4, (me + 3) % 4);
        for (op, truth_op, bytes, peer, count) in [
            (CollOp::PutSignal, "PutSignal", 1u64 << 20, next, 1u64 << 18),
            (CollOp::Signal, "Signal", 0, next, 0),
            (CollOp::WaitSignal, "WaitSignal", 0, prev, 2),
        ] {
            let recs = ring.collectives(op);
            let truth = r.truth_ops(truth_op);
            assert_eq!(recs.len(), 1, "pid {pid}: one {op:?}");
            assert_eq!(truth[&(*pid as u64)].len(), 1, "ground truth: one {truth_op}");
            let (_, rank, nranks, seq, b, p, c) = coll(recs[0]);
            assert_eq!((rank as i32, nranks, b, p, c), (me, 4, bytes, peer, count), "pid {pid}: {op:?}");
            assert_eq!(b, truth[&(*pid as u64)][0]["bytes"].as_u64().unwrap(), "pid {pid}: {op:?} bytes = truth");
            assert_eq!(seq, 0, "one-sided calls have no collective seq");
        }
        // ncclMemAlloc / ncclMemFree: Memory records at the ground truth's address, the bytes asked for.
        let nccl_calls: BTreeSet<u32> = ring
            .records
            .iter()
            .filter_map(|x| match *x {
                Record::Api { domain: ApiDomain::Nccl, correlation, .. } => Some(correlation),
                _ => None,
            })
            .collect();
        let mem: Vec<(MemOp, u64, u64)> = ring
            .records
            .iter()
            .filter_map(|x| match *x {
                Record::Memory { op, address, bytes, correlation, .. } if nccl_calls.contains(&correlation) => {
                    Some((op, address, bytes))
                }
                _ => None,
            })
            .collect();
        let alloc = of_type(&r.truth, "nccl_mem")
            .find(|m| m["pid"].as_u64() == Some(*pid as u64) && m["op"] == "alloc")
            .unwrap();
        let addr = alloc["address"].as_u64().unwrap();
        assert_eq!(alloc["bytes"].as_u64(), Some(3 << 20));
        assert_eq!(
            mem,
            vec![(MemOp::Alloc, addr, 3 << 20), (MemOp::Free, addr, 3 << 20)],
            "pid {pid}: NCCL memory records"
        );
        let apis: Vec<(String, u64)> = ring
            .records
            .iter()
            .filter_map(|x| match *x {
                Record::Api { domain: ApiDomain::Nccl, name, arg, .. } => Some((ring.name(name).to_string(), arg)),
                _ => None,
            })
            .collect();
        let want: Vec<(String, u64)> = [
            ("ncclMemAlloc", 3u64 << 20),
            ("ncclCommRegister", 1 << 20),
            ("ncclCommWindowRegister", 3 << 20),
            ("ncclCommWindowDeregister", 0),
            ("ncclCommDeregister", 0),
            ("ncclMemFree", 0),
        ]
        .iter()
        .map(|(n, a)| (n.to_string(), *a))
        .collect();
        assert_eq!(apis, want, "pid {pid}: NCCL memory / registration calls in order");
    }
}

#[test]
fn nccl_nvtx_ranges_are_dropped_when_interposed_and_kept_when_not() {
    // Interposed: the collective records are there, NCCL's own ranges are not.
    let r = run_under_shim("rt12_nccl_calls", &["--ranks", "4"]);
    assert_eq!(r.out.code, 0, "nccl_calls: {}", r.out.describe());
    let rings = r.rank_rings();
    assert_eq!(rings.len(), 4);
    for (pid, ring) in &rings {
        assert!(!ring.collectives(CollOp::AllReduce).is_empty(), "pid {pid}: all-reduces recorded");
        let nccl = ring.pushes_in("NCCL");
        assert!(
            nccl.is_empty(),
            "pid {pid}: {} NCCL NVTX ranges stored beside the collective records: {nccl:?}",
            nccl.len()
        );
    }
    let all: usize = r.rings.iter().map(|g| g.pushes_in("NCCL").len()).sum();
    assert_eq!(all, 0, "no NCCL NVTX range in any ring (launcher included)");

    // Not interposed (pnccl* entry points): NCCL's ranges are the only trace, one per instrumented call.
    let d = run_under_shim("rt12_nccl_calls", &["--ranks", "4", "--direct"]);
    assert_eq!(d.out.code, 0, "nccl_calls --direct: {}", d.out.describe());
    let rings = d.rank_rings();
    assert_eq!(rings.len(), 4);
    let truth = d.truth_ops("AllReduce");
    for (pid, ring) in &rings {
        assert!(
            ring.records.iter().all(|x| !matches!(x, Record::Collective { .. })),
            "pid {pid}: the interposers saw none of the pnccl* calls"
        );
        let names = ring.pushes_in("NCCL");
        let count = |n: &str| names.iter().filter(|x| *x == n).count();
        assert_eq!(
            count("ncclAllReduce"),
            truth[&(*pid as u64)].len(),
            "pid {pid}: one range per all-reduce: {names:?}"
        );
        for once in [
            "ncclCommInitRankScalable",
            "ncclCommSplit",
            "ncclMemAlloc",
            "ncclMemFree",
            "ncclPutSignal",
            "ncclSignal",
            "ncclWaitSignal",
        ] {
            assert_eq!(count(once), 1, "pid {pid}: {once}: {names:?}");
        }
        assert_eq!(count("ncclCommDestroy"), 2 + (count("ncclCommShrink") > 0) as usize, "pid {pid}: {names:?}");
    }
}
