//! Helpers for the `tprof diff` / `tprof top` / `slowdown` end-to-end tests: a profiled simtrain
//! run that keeps its ground truth and takes extra environment (metrics file), started in the
//! background when a test watches it live, and `tprof ... --json` parsed.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::diagnose::{tprof_bin, tprof_lib};
use crate::programs::{require_mock_libs, require_program, sim_command, simtrain_libs, RunOutput, Running, TempDir};

/// A short simtrain step: 2 layers, 2 buckets of 4 MiB, a 1 MiB batch; with [`FLASH_NS`] about
/// 25 ms of GPU time and ~70 launches, so the GPU is the bottleneck even on a loaded machine and
/// step times hardly depend on how the host is scheduled.
pub const FAST: [&str; 11] =
    ["--quiet", "--layers", "2", "--buckets", "2", "--bucket-mb", "4", "--batch-mb", "1", "--batch-ms", "0.5"];

/// `SIMGPU_KERNEL_NS`: the 6 flash-attention kernels of a step take 3 ms each.
pub const FLASH_NS: &str = "flash=3000000";

/// A simtrain run profiled by the shim, its ring files and its ground truth.
pub struct Profiled {
    pub out: RunOutput,
    pub rings: TempDir,
    pub truth: TempDir,
}

fn command(ranks: u32, steps: u32, extra: &[&str], env: &[(&str, &str)], rings: &Path, truth: &Path) -> Command {
    require_mock_libs(&simtrain_libs(ranks as usize));
    let exe = require_program("simtrain");
    let (r, s) = (ranks.to_string(), steps.to_string());
    let mut args = vec!["--ranks", r.as_str(), "--steps", s.as_str()];
    args.extend_from_slice(&FAST);
    args.extend_from_slice(extra);
    let mut cmd = sim_command(&exe, &args, truth);
    cmd.env("SIMGPU_KERNEL_NS", FLASH_NS);
    cmd.env("LD_PRELOAD", tprof_lib()).env("TPROF_OUT", rings).env("TPROF_RING_MB", "16").env("TPROF_QUIET", "1");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Runs `simtrain --ranks R --steps S FAST... extra...` to completion (at most 2 minutes).
pub fn profile(ranks: u32, steps: u32, extra: &[&str], env: &[(&str, &str)]) -> Profiled {
    let rings = TempDir::new("runs-rings");
    let truth = TempDir::new("runs-truth");
    let cmd = command(ranks, steps, extra, env, rings.path(), truth.path());
    let _guard = crate::programs::exclusive();
    let out = Running::spawn(cmd).finish(Duration::from_secs(120));
    assert_eq!(out.code, 0, "simtrain {extra:?}: {}", out.describe());
    Profiled { out, rings, truth }
}

/// The same run started in the background (the caller watches it, then finishes or kills it).
pub fn start(ranks: u32, steps: u32, extra: &[&str]) -> (Running, TempDir, TempDir) {
    let rings = TempDir::new("runs-live-rings");
    let truth = TempDir::new("runs-live-truth");
    let cmd = command(ranks, steps, extra, &[], rings.path(), truth.path());
    (Running::spawn(cmd), rings, truth)
}

/// `tprof ARGS...` that must succeed; its stdout parsed as JSON.
pub fn tprof_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(tprof_bin()).args(args).output().expect("run tprof");
    assert!(out.status.success(), "tprof {args:?} failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("tprof {args:?}: bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// `tprof ARGS...` that must succeed; its stdout.
pub fn tprof_text(args: &[&str]) -> String {
    let out = Command::new(tprof_bin()).args(args).output().expect("run tprof");
    assert!(out.status.success(), "tprof {args:?} failed:\n{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Mean over ranks of simtrain's own `wall_s / steps`: the true mean step time, seconds.
pub fn true_step_s(out: &RunOutput) -> f64 {
    let s = out.simtrain_summaries();
    assert!(!s.is_empty(), "no simtrain summary line: {}", out.describe());
    let per: Vec<f64> =
        s.values().map(|f| f["wall_s"].parse::<f64>().unwrap() / f["steps"].parse::<f64>().unwrap().max(1.0)).collect();
    per.iter().sum::<f64>() / per.len() as f64
}
