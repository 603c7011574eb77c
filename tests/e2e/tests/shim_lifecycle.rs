//! The shim's process life cycle under the simulated GPU: processes that end without exit handlers
//! (`_exit`, `_Exit`, a forked child's `_exit`), `exec` (successful and failed), and threads that
//! make the process's first CUDA calls while tprof initialises. Each run's ring files are compared
//! with the simulated GPU's ground truth, kernel by kernel, per process. Needs:
//! `cargo build --release -p tprof-shim`, `make -C tests/simgpu`, `cc`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tprof_e2e::shim::*;
use tprof_format::{Record, RingReader};

const WORK: &str = "_Z11ending_workPfi";
const THREAD_WORK: &str = "_Z12thread_work_Pfi";

fn program() -> PathBuf {
    let dir = temp_dir("process-ends-bin");
    compile("process_ends", &dir, Link::SimCudart)
}

fn run(prog: &Path, args: &[&str], tag: &str) -> RunResult {
    let r = RunSpec::new(prog, args, simgpu_dir()).env("TPROF_RING_MB", "4").run(tag);
    assert_eq!(r.code(), Some(0), "{tag}: exit code; stderr:\n{}", r.stderr());
    r
}

/// Truth kernels named `name`, per pid.
fn truth_kernels(r: &RunResult, name: &str) -> HashMap<u64, usize> {
    let mut per_pid = HashMap::new();
    for t in read_truth(&r.truth_dir).iter().filter(|t| t["type"] == "kernel" && t["name"] == name) {
        *per_pid.entry(t["pid"].as_u64().unwrap()).or_insert(0) += 1;
    }
    per_pid
}

/// One ring file: its process, whether it was closed cleanly, and its kernels named `name`.
struct RingKernels {
    path: PathBuf,
    pid: u64,
    closed: bool,
    kernels: usize,
}

fn ring_kernels(r: &RunResult, name: &str) -> Vec<RingKernels> {
    read_rings(&r.out_dir)
        .into_iter()
        .map(|ring| {
            let reader = RingReader::open(&ring.path).expect("ring opens");
            let kernels = ring
                .records
                .iter()
                .filter(|rec| matches!(rec, Record::Kernel { name: n, .. } if ring.name(*n) == name))
                .count();
            RingKernels {
                pid: reader.header().pid as u64,
                closed: reader.stats().clean_close(),
                path: ring.path.clone(),
                kernels,
            }
        })
        .collect()
}

/// Every truth kernel named `name` is in its process's rings, and every ring is closed cleanly.
fn assert_all_kept(what: &str, r: &RunResult, name: &str) -> usize {
    let truth = truth_kernels(r, name);
    let rings = ring_kernels(r, name);
    assert!(!truth.is_empty(), "{what}: the ground truth has no {name} kernel");
    let mut total = 0;
    for (pid, want) in &truth {
        let got: usize = rings.iter().filter(|k| k.pid == *pid).map(|k| k.kernels).sum();
        assert_eq!(got, *want, "{what}: pid {pid} kept {got} of {want} kernels");
        total += want;
    }
    for ring in &rings {
        assert!(ring.closed, "{what}: {} (pid {}) was not closed", ring.path.display(), ring.pid);
    }
    let _ = std::fs::remove_dir_all(r.out_dir.parent().unwrap());
    total
}

#[test]
fn a_process_ending_with_exit_keeps_every_kernel() {
    let prog = program();
    for mode in ["_exit", "_Exit", "signal_exit"] {
        let r = run(&prog, &[mode, "300"], mode);
        assert_eq!(assert_all_kept(mode, &r, WORK), 300, "{mode}: truth kernels");
    }
}

#[test]
fn a_forked_child_ending_with_exit_keeps_its_kernels() {
    let prog = program();
    let r = run(&prog, &["fork_exit", "120"], "fork-exit");
    let truth = truth_kernels(&r, WORK);
    assert_eq!(truth.len(), 2, "parent and child both launched: {truth:?}");
    assert_eq!(ring_kernels(&r, WORK).len(), 2, "one ring per process");
    assert_eq!(assert_all_kept("fork_exit", &r, WORK), 240);
}

#[test]
fn exec_closes_the_ring_before_the_image_is_replaced() {
    let prog = program();
    // A long stretch of work and one well under a commit interval (100 ms).
    let modes =
        [("exec", "2000"), ("exec", "20"), ("execvp", "20"), ("execl", "20"), ("execlp", "20"), ("execle", "20")];
    for (mode, n) in modes {
        let tag = format!("{mode}-{n}");
        let r = run(&prog, &[mode, n], &tag);
        assert_eq!(ring_kernels(&r, WORK).len(), 1, "{tag}: one ring (the new image makes no CUDA call)");
        assert_eq!(assert_all_kept(&tag, &r, WORK), n.parse::<usize>().unwrap(), "{tag}: truth kernels");
    }
}

#[test]
fn a_failed_exec_lets_tprof_record_on() {
    let prog = program();
    for mode in ["exec_fail", "execlp_fail"] {
        let r = run(&prog, &[mode, "150"], mode);
        let rings = ring_kernels(&r, WORK);
        assert_eq!(rings.len(), 2, "{mode}: the ring closed before the exec and a new one after it");
        assert!(rings.iter().all(|k| k.kernels == 150), "{mode}: 150 kernels on each side of the exec");
        assert_eq!(assert_all_kept(mode, &r, WORK), 300, "{mode}: truth kernels");
    }
}

#[test]
fn a_vfork_child_exec_leaves_the_parents_ring_alone() {
    let prog = program();
    let r = run(&prog, &["vfork_exec", "100"], "vfork-exec");
    assert_eq!(ring_kernels(&r, WORK).len(), 1, "one ring, the parent's");
    assert_eq!(assert_all_kept("vfork_exec", &r, WORK), 200);
}

#[test]
fn threads_starting_together_are_all_recorded() {
    let prog = program();
    for attempt in 0..3 {
        let r = run(&prog, &["threads", "50", "16"], &format!("threads-{attempt}"));
        assert_eq!(assert_all_kept("16 threads", &r, THREAD_WORK), 800, "attempt {attempt}: truth kernels");
    }
}

#[test]
fn one_thread_per_device_is_all_recorded() {
    let prog = program();
    for attempt in 0..3 {
        let r = run(&prog, &["devices", "1", "8"], &format!("devices-{attempt}"));
        assert_eq!(assert_all_kept("8 devices", &r, THREAD_WORK), 8, "attempt {attempt}: truth kernels");
    }
}

/// A process that ends while the topology probe still waits on a slow first `nvmlInit` (300 ms
/// here; real NVML's first init on a many-GPU node takes hundreds of ms) keeps its topology: the
/// exit path waits for the probe (at most 500 ms) before the ring closes.
#[test]
fn a_short_process_keeps_its_topology_while_nvml_is_slow() {
    let prog = tprof_e2e::programs::programs_dir().join("rt12_launch");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let r = RunSpec::new(&prog, &[], simgpu_dir())
        .env("TPROF_RING_MB", "4")
        .env("SIMGPU_NVML_INIT_MS", "300")
        .run("short-topology");
    assert_eq!(r.code(), Some(0), "stderr:\n{}", r.stderr());
    let rings = read_rings(&r.out_dir);
    assert_eq!(rings.len(), 1);
    let gpus = rings[0].records.iter().filter(|rec| matches!(rec, Record::TopoGpu { .. })).count();
    assert_eq!(gpus, 1, "the topology probe's GPU record");
    assert!(RingReader::open(&rings[0].path).unwrap().stats().clean_close());
    let _ = std::fs::remove_dir_all(r.out_dir.parent().unwrap());
}
