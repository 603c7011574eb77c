//! The GPU counter sampler against the simulated NVML (`tests/simgpu/build/libnvidia-ml.so.1`):
//! this test binary re-executes itself as a child that initialises tprof, starts the sampler and
//! exits after a while; the parent reads the child's ring.
//!
//! Prerequisite: `make -C tests/simgpu` (or `SIMGPU_LIB_DIR`). Missing -> the tests fail naming it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use tprof_format::{Decoded, Record, RingReader};

fn simgpu_lib_dir() -> PathBuf {
    let dir = std::env::var_os("SIMGPU_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/simgpu/build"));
    let lib = dir.join("libnvidia-ml.so.1");
    assert!(
        lib.exists(),
        "prerequisite missing: {} (build it with `make -C tests/simgpu`, or set SIMGPU_LIB_DIR)",
        lib.display()
    );
    dir
}

/// The child program (`shim/src/bin/tprof-recording-child.rs`, built by Cargo for these tests).
fn child_program() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tprof-recording-child"))
}

struct Run {
    out: Output,
    /// (counter name, device) -> samples
    counters: BTreeMap<(String, u32), Vec<f64>>,
    records: usize,
}

fn run_child(tag: &str, lib_dir: Option<&Path>, env: &[(&str, &str)]) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(child_program());
    cmd.arg("gpu_metrics")
        .env("TPROF_OUT", dir.path())
        .env("TPROF_RING_MB", "8")
        .env("TPROF_CUPTI", "0")
        .env("SIMGPU_SESSION", format!("tprof-gpumetrics-{tag}-{}", std::process::id()))
        .env("SIMGPU_DEVICES", "2")
        .env_remove("RANK")
        .env_remove("LOCAL_RANK")
        .env_remove("WORLD_SIZE")
        .env_remove("LOCAL_WORLD_SIZE")
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("TPROF_GPU_METRICS_HZ");
    match lib_dir {
        Some(d) => cmd.env("LD_LIBRARY_PATH", d),
        None => cmd.env("LD_LIBRARY_PATH", "/nonexistent"),
    };
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "child failed: {}", String::from_utf8_lossy(&out.stderr));
    let rings: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tprof"))
        .collect();
    assert_eq!(rings.len(), 1, "one ring expected in {}", dir.path().display());
    let r = RingReader::open(&rings[0]).unwrap();
    let names = r.all_strings();
    let mut counters: BTreeMap<(String, u32), Vec<f64>> = BTreeMap::new();
    let mut records = 0;
    for x in r.records() {
        if let Ok(Decoded::Record(rec)) = x {
            records += 1;
            if let Record::Counter { name, device, value, .. } = rec {
                counters.entry((names.name(name).to_string(), device)).or_default().push(value);
            }
        }
    }
    Run { out, counters, records }
}

fn names_of(run: &Run) -> BTreeSet<String> {
    run.counters.keys().map(|(n, _)| n.clone()).collect()
}

const BASIC: [&str; 6] =
    ["gpu.util_pct", "gpu.mem_util_pct", "gpu.mem_used_bytes", "gpu.sm_clock_mhz", "gpu.power_w", "gpu.temp_c"];
const GPM: [&str; 8] = [
    "gpu.sm_active_pct",
    "gpu.sm_occupancy_pct",
    "gpu.tensor_active_pct",
    "gpu.dram_bw_pct",
    "gpu.pcie_tx_MBps",
    "gpu.pcie_rx_MBps",
    "gpu.nvlink_rx_MBps",
    "gpu.nvlink_tx_MBps",
];

#[test]
fn gpm_and_basic_counters_per_device() {
    let lib = simgpu_lib_dir();
    let run = run_child("gpm", Some(&lib), &[("TPROF_GPU_METRICS_HZ", "10")]);
    let names = names_of(&run);
    for n in BASIC.iter().chain(GPM.iter()) {
        assert!(names.contains(*n), "counter {n} missing; have {names:?}");
    }
    // A plain (rank-less) process samples every device it can see.
    let devices: BTreeSet<u32> = run.counters.keys().map(|(_, d)| *d).collect();
    assert_eq!(devices, BTreeSet::from([0, 1]));
    // 10 Hz for 0.8 s: about 8 basic samples per device (at least 4 under load).
    let utils = &run.counters[&("gpu.util_pct".to_string(), 0)];
    assert!((4..=10).contains(&utils.len()), "{} util samples", utils.len());
    // GPM needs two samples 100 ms apart: fewer, but present.
    assert!(!run.counters[&("gpu.sm_active_pct".to_string(), 1)].is_empty());
    // Sane values: percentages in 0..=100, clocks from the mock (1980 MHz), power in watts.
    for ((n, _), v) in &run.counters {
        if n.ends_with("_pct") {
            assert!(v.iter().all(|x| (0.0..=100.0).contains(x)), "{n}: {v:?}");
        }
    }
    assert!(run.counters[&("gpu.sm_clock_mhz".to_string(), 0)].iter().all(|&c| c == 1980.0));
    assert!(run.counters[&("gpu.power_w".to_string(), 0)].iter().all(|&w| (50.0..=800.0).contains(&w)));
    // No line about NVML when it works.
    let err = String::from_utf8_lossy(&run.out.stderr);
    assert!(!err.contains("NVML"), "{err}");
}

#[test]
fn gpm_less_devices_fall_back_to_basic_counters() {
    let lib = simgpu_lib_dir();
    let run = run_child("nogpm", Some(&lib), &[("SIMGPU_GPM", "0"), ("TPROF_GPU_METRICS_HZ", "10")]);
    let names = names_of(&run);
    for n in BASIC {
        assert!(names.contains(n), "counter {n} missing; have {names:?}");
    }
    for n in GPM {
        assert!(!names.contains(n), "GPM counter {n} on a GPM-less device");
    }
}

#[test]
fn nvml_absent_is_one_line_and_nothing_else() {
    let run = run_child("absent", None, &[]);
    assert!(run.counters.is_empty());
    let err = String::from_utf8_lossy(&run.out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("tprof:")).collect();
    assert_eq!(lines.len(), 1, "stderr: {err}");
    assert!(lines[0].contains("libnvidia-ml.so.1"), "{}", lines[0]);
    // The ring is still there with its own records (clock syncs, exit marker).
    assert!(run.records > 0);
}

#[test]
fn rate_zero_disables_and_bad_rate_warns_once() {
    let lib = simgpu_lib_dir();
    let off = run_child("off", Some(&lib), &[("TPROF_GPU_METRICS_HZ", "0")]);
    assert!(off.counters.is_empty());
    let bad = run_child("bad", Some(&lib), &[("TPROF_GPU_METRICS_HZ", "50")]);
    let err = String::from_utf8_lossy(&bad.out.stderr);
    assert_eq!(err.matches("TPROF_GPU_METRICS_HZ").count(), 1, "{err}");
    // Default 5 Hz over 0.8 s: 2..=5 samples per device.
    let n = bad.counters[&("gpu.util_pct".to_string(), 0)].len();
    assert!((2..=5).contains(&n), "{n} samples at the default rate");
}

#[test]
fn launcher_and_other_local_ranks_do_not_sample_the_same_device() {
    let lib = simgpu_lib_dir();
    // Local rank 1 of 2 samples device 1 only.
    let r1 = run_child("r1", Some(&lib), &[("RANK", "1"), ("LOCAL_RANK", "1"), ("WORLD_SIZE", "2")]);
    let devices: BTreeSet<u32> = r1.counters.keys().map(|(_, d)| *d).collect();
    assert_eq!(devices, BTreeSet::from([1]));
    // A launcher (WORLD_SIZE set, no rank) samples nothing.
    let launcher = run_child("launcher", Some(&lib), &[("WORLD_SIZE", "2")]);
    assert!(launcher.counters.is_empty());
}
