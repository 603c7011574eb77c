//! No panic of tprof's escapes into the program: simtrain (2 ranks, CUDA runtime + NCCL + NVTX) runs
//! under libtprof with the test switch `TPROF_TEST_PANIC=<name>`, which makes tprof panic where it
//! first records that name. Each point below is another path through the panic fence: after the real
//! call (the interposer's finish), before it (its start), a hand-written allocation wrapper, an NVTX
//! hook, an NCCL wrapper and the CUPTI buffer callback. Each time the program must run as it runs
//! without the panic (exit 0, its own CUDA checks passing, the same GPU work in the ground truth),
//! and each rank process must say exactly one line: that tprof turned itself off.
//!
//! Prerequisites: `cargo build --release -p tprof-shim`, `make -C tests/simgpu`, `make -C tests/programs`.

use std::time::Duration;

use tprof_e2e::gpu_trace::{load_rings, traced_command, Attach};
use tprof_e2e::programs::{
    exclusive, require_mock_libs, require_program, run, simtrain_libs, RunOutput, TempDir, Truth,
};

const RANKS: usize = 2;

struct Outcome {
    out: RunOutput,
    truth: Truth,
    rings: usize,
}

fn simtrain(panic_at: Option<&str>) -> Outcome {
    require_mock_libs(&simtrain_libs(RANKS));
    let program = require_program("simtrain");
    let truth_dir = TempDir::new("fence-truth");
    let out_dir = TempDir::new("fence-out");
    let ranks = RANKS.to_string();
    let mut cmd = traced_command(
        &program,
        &["--ranks", &ranks, "--steps", "3", "--quiet"],
        truth_dir.path(),
        out_dir.path(),
        Attach::Preload,
    );
    cmd.env("TPROF_RING_MB", "4");
    match panic_at {
        Some(name) => cmd.env("TPROF_TEST_PANIC", name),
        None => cmd.env_remove("TPROF_TEST_PANIC"),
    };
    let _one_at_a_time = exclusive();
    let out = run(cmd, Duration::from_secs(120));
    let truth = Truth::load(truth_dir.path());
    let rings = load_rings(out_dir.path()).len();
    Outcome { out, truth, rings }
}

/// simtrain's final lines without their timing fields (`wall_s`, `steps_per_s`), sorted by rank.
fn program_results(out: &RunOutput) -> Vec<String> {
    let mut lines: Vec<String> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("simtrain rank="))
        .map(|l| l.split(' ').filter(|f| !f.starts_with("wall_s=") && !f.starts_with("steps_per_s=")).collect())
        .collect();
    lines.sort();
    lines
}

fn gpu_work(truth: &Truth) -> (usize, usize, usize) {
    (truth.of_kind("kernel").count(), truth.of_kind("memcpy").count(), truth.of_kind("collective").count())
}

fn check_panic_at(name: &str, baseline: &Outcome) {
    let run = simtrain(Some(name));
    assert_eq!(run.out.code, 0, "TPROF_TEST_PANIC={name}: the program must run on\n{}", run.out.describe());
    assert_eq!(program_results(&run.out), program_results(&baseline.out), "TPROF_TEST_PANIC={name}: program output");
    assert_eq!(gpu_work(&run.truth), gpu_work(&baseline.truth), "TPROF_TEST_PANIC={name}: GPU work (truth)");
    let tprof_lines: Vec<&str> = run.out.stderr.lines().filter(|l| l.contains("tprof")).collect();
    assert_eq!(tprof_lines.len(), RANKS, "TPROF_TEST_PANIC={name}: one tprof line per rank\n{}", run.out.stderr);
    for line in &tprof_lines {
        assert_eq!(
            *line,
            format!(
                "tprof: disabled: internal error (TPROF_TEST_PANIC={name}); the program continues without profiling"
            ),
            "TPROF_TEST_PANIC={name}"
        );
    }
    assert!(
        !run.out.stderr.contains("panicked"),
        "TPROF_TEST_PANIC={name}: the panic message leaked\n{}",
        run.out.stderr
    );
    assert_eq!(run.rings, RANKS, "TPROF_TEST_PANIC={name}: each rank still closes its ring");
}

#[test]
fn a_panic_inside_recording_leaves_the_program_running_with_one_line() {
    let baseline = simtrain(None);
    baseline.out.assert_ok();
    assert!(!baseline.out.stderr.contains("tprof"), "no tprof line without a panic:\n{}", baseline.out.stderr);
    assert_eq!(program_results(&baseline.out).len(), RANKS);
    let (kernels, _, collectives) = gpu_work(&baseline.truth);
    assert!(kernels > 100 && collectives > 0, "baseline GPU work: {kernels} kernels, {collectives} collectives");
    for name in [
        // interposer, after the real call (the Api record's name)
        "cudaLaunchKernel",
        // interposer, before the real call (the hang watchdog's name of a blocking call)
        "cudaDeviceSynchronize",
        // hand-written allocation wrapper, after the real call
        "cudaMalloc",
        // NVTX range push hook
        "forward",
        // NCCL wrapper, before the real call
        "AllReduce",
        // CUPTI buffer-completion callback (a kernel name only CUPTI reports)
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
    ] {
        check_panic_at(name, &baseline);
    }
}
