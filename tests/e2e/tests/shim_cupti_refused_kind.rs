//! A CUPTI that refuses one optional activity kind (the kind does not exist in that CUPTI, or the
//! device cannot record it) must not switch GPU tracing off: libtprof skips that kind and every
//! kernel still gets its GPU times. The simulated CUPTI refuses the kind with the real result code
//! (`SIMGPU_CUPTI_REFUSE_KIND=<kind>:<result>`, values from cupti-sys, which
//! `cupti-sys/tests/real_headers.rs` checks against NVIDIA's headers).
//!
//! Prerequisites (each test fails naming what is missing): `cargo build --release -p tprof-shim`,
//! `make -C tests/simgpu`, `make -C tests/programs`.

use std::time::Duration;

use cupti_sys as sys;
use tprof_e2e::gpu_trace::{gpu_ops, load_rings, traced_command, Attach};
use tprof_e2e::programs::{exclusive, require_mock_libs, require_program, run, simtrain_libs, TempDir, Truth};
use tprof_format::{MarkerKind, Record};

/// Runs one simtrain rank under libtprof with `kind` refused by `result`, and checks that CUPTI
/// tracing stayed on: no warning, no `CuptiUnavailable` marker, and as many GPU-timed kernels as the
/// ground truth has. Returns (kernels in the truth, GPU-timed kernels in the ring).
fn kernels_timed_with_kind_refused(kind: sys::CUpti_ActivityKind, result: sys::CUptiResult) -> (usize, usize) {
    require_mock_libs(&simtrain_libs(1));
    let program = require_program("simtrain");
    let truth_dir = TempDir::new("refused-kind-truth");
    let out_dir = TempDir::new("refused-kind-out");
    let mut cmd = traced_command(
        &program,
        &["--ranks", "1", "--steps", "3", "--quiet"],
        truth_dir.path(),
        out_dir.path(),
        Attach::Preload,
    );
    cmd.env("TPROF_RING_MB", "4").env("SIMGPU_CUPTI_REFUSE_KIND", format!("{kind}:{result}"));
    let _one_at_a_time = exclusive();
    let out = run(cmd, Duration::from_secs(120));
    out.assert_ok();
    let refused = format!("{} ({result}) for kind {kind}", sys::result_name(result));
    assert!(!out.stderr.contains("CUPTI unavailable"), "{refused}: libtprof switched CUPTI off:\n{}", out.stderr);
    let rings = load_rings(out_dir.path());
    let ring = rings.first().unwrap_or_else(|| panic!("no ring written\n{}", out.describe()));
    let unavailable: Vec<String> = ring
        .records
        .iter()
        .filter_map(|r| match *r {
            Record::Marker { kind: MarkerKind::CuptiUnavailable, name, .. } => Some(ring.name(name)),
            _ => None,
        })
        .collect();
    assert!(unavailable.is_empty(), "{refused}: CuptiUnavailable marker {unavailable:?}");
    let truth = Truth::load(truth_dir.path());
    let truth_kernels = truth.of_kind("kernel").filter(|k| !k.unfinished).count();
    let timed = gpu_ops(ring).iter().filter(|o| o.kind == "kernel" && o.end > o.start).count();
    assert!(truth_kernels > 50, "simtrain ran only {truth_kernels} kernels: {}", truth.summary());
    assert_eq!(timed, truth_kernels, "{refused}: kernels with GPU times in the ring vs kernels run");
    (truth_kernels, timed)
}

#[test]
fn synchronization_refused_as_not_compatible_keeps_kernel_times() {
    let (run, timed) =
        kernels_timed_with_kind_refused(sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, sys::CUPTI_ERROR_NOT_COMPATIBLE);
    eprintln!("SYNCHRONIZATION refused (NOT_COMPATIBLE): {timed}/{run} kernels with GPU times");
}

#[test]
fn memory2_refused_as_not_supported_keeps_kernel_times() {
    let (run, timed) =
        kernels_timed_with_kind_refused(sys::CUPTI_ACTIVITY_KIND_MEMORY2, sys::CUPTI_ERROR_NOT_SUPPORTED);
    eprintln!("MEMORY2 refused (NOT_SUPPORTED): {timed}/{run} kernels with GPU times");
}

#[test]
fn a_refused_required_kind_still_switches_cupti_off_with_one_warning() {
    require_mock_libs(&simtrain_libs(1));
    let program = require_program("simtrain");
    let truth_dir = TempDir::new("refused-required-truth");
    let out_dir = TempDir::new("refused-required-out");
    let mut cmd = traced_command(
        &program,
        &["--ranks", "1", "--steps", "2", "--quiet"],
        truth_dir.path(),
        out_dir.path(),
        Attach::Preload,
    );
    let refusal = format!("{}:{}", sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, sys::CUPTI_ERROR_NOT_COMPATIBLE);
    cmd.env("TPROF_RING_MB", "4").env("SIMGPU_CUPTI_REFUSE_KIND", refusal);
    let _one_at_a_time = exclusive();
    let out = run(cmd, Duration::from_secs(120));
    out.assert_ok();
    let warnings: Vec<&str> = out.stderr.lines().filter(|l| l.contains("CUPTI unavailable")).collect();
    assert_eq!(warnings.len(), 1, "one warning line:\n{}", out.stderr);
    assert!(warnings[0].contains("CONCURRENT_KERNEL") && warnings[0].contains("NOT_COMPATIBLE"), "{}", warnings[0]);
    let rings = load_rings(out_dir.path());
    let ring = rings.first().unwrap_or_else(|| panic!("no ring written\n{}", out.describe()));
    assert_eq!(gpu_ops(ring).len(), 0, "no CUPTI GPU records once CONCURRENT_KERNEL is refused");
}
