//! Runs of `rt12_nccl_nodes` on 2 simulated nodes x 4 ranks with a fake sysfs per node
//! ([`crate::fake_sysfs`]): the job's `diagnose --json`, `summary --json`'s `nccl_plugin` section
//! and the simulator's ground truth, for the network verdict tests.

use serde_json::Value;

use crate::diagnose::{diagnose_json, summary_json};
use crate::fake_sysfs;
use crate::programs::programs_dir;
use crate::shim::{read_truth, simgpu_dir, temp_dir, RunSpec};

pub struct Profiled {
    pub diagnosis: Value,
    pub plugin: Value,
    pub truth: Vec<Value>,
}

impl Profiled {
    /// The verdict of `kind`, if it fired.
    pub fn fired(&self, kind: &str) -> Option<&Value> {
        self.diagnosis["verdicts"].as_array().unwrap().iter().find(|v| v["kind"] == kind)
    }
}

/// Truth busbw of the all-reduces (of communicator `comm`, or all): nccl-tests bus bytes over the
/// kernel times, summed over ranks.
pub fn truth_busbw(truth: &[Value], comm: Option<&str>) -> f64 {
    let (mut bus, mut dur) = (0.0, 0.0);
    let of_comm = |t: &&Value| comm.is_none_or(|c| t["comm"] == c);
    for t in truth.iter().filter(|t| t["type"] == "collective" && t["op"] == "AllReduce").filter(of_comm) {
        let n = t["nranks"].as_u64().unwrap() as f64;
        bus += 2.0 * (n - 1.0) / n * t["bytes"].as_u64().unwrap() as f64;
        dur += (t["end_ns"].as_u64().unwrap() - t["start_ns"].as_u64().unwrap()) as f64;
    }
    bus / dur
}

/// Runs 8 ranks with `args` on 2 simulated nodes and `extra_env`; with NIC counters, each node's
/// local rank 0 samples its machine (`NCCL_NODES_LOCAL_RANKS=4`) at 50 Hz.
pub fn profile(name: &str, args: &[&str], extra_env: &[(&str, &str)], opts: fake_sysfs::Options) -> Profiled {
    let prog = programs_dir().join("rt12_nccl_nodes");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let sys = temp_dir(&format!("{name}-sys"));
    let root = fake_sysfs::build(&sys, 2, 4, opts);
    let mut all = vec!["--ranks", "8"];
    all.extend_from_slice(args);
    let mut spec = RunSpec::new(&prog, &all, simgpu_dir())
        .env("SIMGPU_NODES", "2")
        .env("TPROF_RING_MB", "8")
        .env("TPROF_SYSROOT", &root)
        // No user ~/.nccl.conf in the recorded settings (the fake sysroot has no etc/nccl.conf).
        .env("NCCL_CONF_FILE", "/dev/null");
    if opts.counters {
        spec = spec
            .env("NCCL_NODES_LOCAL_RANKS", "4")
            .env("SIMGPU_NIC_COUNTERS", &fake_sysfs::counters_pattern(&sys))
            .env("TPROF_HOST_HZ", "50");
    }
    for (k, v) in extra_env {
        spec = spec.env(k, v);
    }
    let run = spec.run(name);
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let summary = summary_json(&run.out_dir);
    let diagnosis = diagnose_json(&run.out_dir, &["--all"]);
    let truth = read_truth(&run.truth_dir);
    let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
    let _ = std::fs::remove_dir_all(&sys);
    Profiled { diagnosis, plugin: summary["nccl_plugin"].clone(), truth }
}
