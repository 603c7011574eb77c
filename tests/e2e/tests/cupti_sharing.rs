//! CUPTI belongs to the program first: tprof takes it only once the CUDA driver has been shown to work
//! (never for NVTX alone), and hands it over to a program that runs its own CUPTI client (Kineto,
//! jax.profiler), before or after tprof started, without changing what that client receives.
//!
//! Prerequisites (each test fails naming what is missing): `cargo build --release -p tprof-shim`,
//! `make -C tests/simgpu`, `bash scripts/setup-python.sh` (NVIDIA's NVTX headers).

use std::path::{Path, PathBuf};
use std::process::Command;

use tprof_e2e::programs::nvidia_wheels_dir;
use tprof_e2e::shim::*;
use tprof_format::{MarkerKind, Record};

fn tprof_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("tprof:")).collect()
}

/// Kernel records in the ring: (with GPU times, without).
fn kernels(ring: &Ring) -> (usize, usize) {
    let timed = ring.records.iter().filter(|r| matches!(r, Record::Kernel { start, .. } if *start != 0)).count();
    let untimed = ring.records.iter().filter(|r| matches!(r, Record::Kernel { start: 0, .. })).count();
    (timed, untimed)
}

fn own_cupti(mode: &str) -> (RunResult, RunResult) {
    let dir = temp_dir("bin");
    let prog = compile("own_cupti", &dir, Link::SimCudartCupti);
    let args = [mode];
    let mut bare = RunSpec::new(&prog, &args, simgpu_dir());
    bare.preload = false;
    let bare = bare.run(&format!("own-cupti-{mode}-bare"));
    let shim = RunSpec::new(&prog, &args, simgpu_dir()).run(&format!("own-cupti-{mode}"));
    assert_eq!(bare.code(), Some(0), "the program's own CUPTI client fails even without tprof:\n{}", bare.stdout());
    (bare, shim)
}

#[test]
fn a_program_claiming_cupti_after_tprof_started_keeps_every_record() {
    let (bare, shim) = own_cupti("after");
    assert_eq!(shim.stdout(), bare.stdout(), "the program's CUPTI client saw something else under tprof");
    assert_eq!(shim.code(), Some(0), "stderr:\n{}", shim.stderr());
    let stderr = shim.stderr();
    let lines = tprof_lines(&stderr);
    assert_eq!(lines.len(), 1, "one line about the hand-over, got:\n{}", shim.stderr());
    assert!(lines[0].contains("uses CUPTI itself") && lines[0].contains("handed"), "{}", lines[0]);
    let rings = read_rings(&shim.out_dir);
    assert_eq!(rings.len(), 1);
    let (timed, untimed) = kernels(&rings[0]);
    assert_eq!((timed, untimed), (5, 7), "5 kernels from tprof's CUPTI before the hand-over, 7 interposed after");
    assert!(rings[0].records.iter().any(|r| matches!(r, Record::Marker { kind: MarkerKind::CuptiUnavailable, .. })));
}

#[test]
fn a_program_claiming_cupti_first_keeps_it_and_tprof_interposes() {
    let (bare, shim) = own_cupti("before");
    assert_eq!(shim.stdout(), bare.stdout(), "the program's CUPTI client saw something else under tprof");
    assert_eq!(shim.code(), Some(0), "stderr:\n{}", shim.stderr());
    let stderr = shim.stderr();
    let lines = tprof_lines(&stderr);
    assert_eq!(lines.len(), 1, "one line, got:\n{}", shim.stderr());
    assert!(lines[0].contains("uses CUPTI itself") && lines[0].contains("leaves"), "{}", lines[0]);
    let rings = read_rings(&shim.out_dir);
    assert_eq!(kernels(&rings[0]), (0, 12), "every kernel recorded by interposition");
}

/// Builds `nvtx_only.c` against NVIDIA's NVTX3 headers from the pip wheel.
fn nvtx_only(dir: &Path) -> PathBuf {
    let include = nvidia_wheels_dir().join("nvtx/include");
    assert!(include.join("nvtx3/nvToolsExt.h").exists(), "missing NVTX headers: bash scripts/setup-python.sh");
    let src = repo_root().join("tests/e2e/cprog/nvtx_only.c");
    let out = dir.join("nvtx_only");
    let o = Command::new("cc").args(["-O2", "-o"]).arg(&out).arg(&src).arg("-I").arg(&include).arg("-ldl").output();
    let o = o.expect("missing prerequisite: a C compiler `cc` on PATH");
    assert!(o.status.success(), "cc nvtx_only.c failed:\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

#[test]
fn nvtx_alone_never_loads_cupti() {
    let dir = temp_dir("bin");
    let prog = nvtx_only(&dir);
    // The simulated libcupti is on the library path, where tprof's search finds it.
    let mut bare = RunSpec::new(&prog, &[], simgpu_dir());
    bare.preload = false;
    let bare = bare.run("nvtx-only-bare");
    let shim = RunSpec::new(&prog, &[], simgpu_dir()).run("nvtx-only");
    assert_eq!(shim.stdout(), bare.stdout());
    assert_eq!(shim.code(), Some(0));
    assert!(shim.stderr().contains("libcupti loaded: no"), "CUPTI loaded for NVTX alone:\n{}", shim.stderr());
    assert!(tprof_lines(&shim.stderr()).is_empty(), "{}", shim.stderr());
    let rings = read_rings(&shim.out_dir);
    assert_eq!(rings.len(), 1, "the NVTX ranges are recorded");
    let pushes = rings[0].records.iter().filter(|r| matches!(r, Record::NvtxPush { .. })).count();
    assert_eq!(pushes, 400);
}

#[test]
fn cupti_of_the_runtimes_major_is_chosen() {
    // A pip-style folder holding libcudart.so.13 and both libcupti.so.12 and libcupti.so.13: a CUDA 13
    // program must be traced by CUPTI 13 (the mock's libcupti serves under both names).
    let sim = simgpu_dir();
    let prog = tprof_e2e::programs::programs_dir().join("cu13_vector_add");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let libs = temp_dir("cupti-major");
    for (name, target) in [
        ("libcudart.so.13", "libcudart.so.13"),
        ("libcuda.so.1", "libcuda.so.1"),
        ("libsimgpu.so", "libsimgpu.so"),
        ("libnvidia-ml.so.1", "libnvidia-ml.so.1"),
        ("libcupti.so.12", "libcupti.so.12"),
        ("libcupti.so.13", "libcupti.so.12"),
    ] {
        std::os::unix::fs::symlink(sim.join(target), libs.join(name)).unwrap();
    }
    let run = RunSpec::new(&prog, &[], libs.clone()).run("cupti-major");
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let rings = read_rings(&run.out_dir);
    let chosen: Vec<&str> = rings[0]
        .records
        .iter()
        .filter_map(|r| match r {
            Record::Marker { kind: MarkerKind::Note, name, .. } => Some(rings[0].name(*name)),
            _ => None,
        })
        .filter(|n| n.starts_with("cupti: "))
        .collect();
    assert_eq!(chosen.len(), 1, "one note naming the CUPTI in use: {chosen:?}");
    assert!(chosen[0].contains("/libcupti.so.13 "), "CUDA 13 runtime traced by {}", chosen[0]);
    let _ = std::fs::remove_dir_all(&libs);
}
