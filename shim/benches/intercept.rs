//! Per-call cost of the shim on `cudaLaunchKernel` (simulated runtime, `SIMGPU_LAUNCH_NS=0`):
//! `cargo bench -p tprof-shim --bench intercept`.
//!
//! A small C driver (`benches/driver/launch_loop.c`) launches N kernels and prints ns per call. It runs
//! bare and under libtprof in each mode, the configurations interleaved round by round so machine
//! noise hits them alike; the median of the rounds is reported with the difference to bare.
//! "CUPTI off" rows (`TPROF_CUPTI=0`) isolate the shim's own cost: with CUPTI on, the simulated
//! CUPTI's activity recording per launch is counted too (as a real CUPTI's would be).
//!
//! Environment: `TPROF_LIB` (default `$CARGO_TARGET_DIR/release/libtprof.so`; build it first with
//! `cargo build --release -p tprof-shim`), `SIMGPU_LIB_DIR` (default `tests/simgpu/build`),
//! `BENCH_CALLS` (default 200000), `BENCH_ROUNDS` (default 7).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"))
}

fn env_num(k: &str, default: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// TPROF_* settings of one configuration.
type Settings = Vec<(&'static str, &'static str)>;

fn main() {
    let lib =
        std::env::var_os("TPROF_LIB").map(PathBuf::from).unwrap_or_else(|| target_dir().join("release/libtprof.so"));
    let simgpu =
        std::env::var_os("SIMGPU_LIB_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("tests/simgpu/build"));
    assert!(lib.exists(), "{} missing: run `cargo build --release -p tprof-shim` (or set TPROF_LIB)", lib.display());
    assert!(
        simgpu.join("libcudart.so.12").exists(),
        "simulated runtime missing in {}: run `make -C tests/simgpu`",
        simgpu.display()
    );
    let work = target_dir().join("tprof-bench-intercept");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("bench dir");
    let driver = work.join("launch_loop");
    let cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-I"])
        .arg(repo().join("tests/e2e/cprog"))
        .arg(repo().join("shim/benches/driver/launch_loop.c"))
        .arg("-L")
        .arg(&simgpu)
        .arg("-l:libcudart.so.12")
        .arg("-o")
        .arg(&driver)
        .status()
        .expect("cc");
    assert!(cc.success(), "cannot build the launch driver");
    let calls = env_num("BENCH_CALLS", 200_000);
    let rounds = env_num("BENCH_ROUNDS", 7);
    // (label, TPROF_* settings; None = bare)
    let configs: Vec<(&str, Option<Settings>)> = vec![
        ("bare (no shim)", None),
        ("full, CUPTI off", Some(vec![("TPROF_MODE", "full"), ("TPROF_CUPTI", "0")])),
        (
            "closed window, CUPTI off",
            Some(vec![("TPROF_MODE", "steps"), ("TPROF_STEPS", "1000000000"), ("TPROF_CUPTI", "0")]),
        ),
        ("metrics, CUPTI off", Some(vec![("TPROF_MODE", "metrics"), ("TPROF_CUPTI", "0")])),
        ("flight, CUPTI off", Some(vec![("TPROF_MODE", "flight"), ("TPROF_CUPTI", "0")])),
        (
            "sample (open), CUPTI off",
            Some(vec![("TPROF_MODE", "sample"), ("TPROF_SAMPLE", "60s/60s"), ("TPROF_CUPTI", "0")]),
        ),
        ("full, CUPTI on", Some(vec![("TPROF_MODE", "full")])),
        ("closed window, CUPTI on", Some(vec![("TPROF_MODE", "steps"), ("TPROF_STEPS", "1000000000")])),
        ("metrics, CUPTI on", Some(vec![("TPROF_MODE", "metrics")])),
    ];
    // Per round: the fastest batch of 250 calls (ns per call), and the mean over all calls.
    let mut results: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    let mut means: Vec<Vec<f64>> = vec![Vec::new(); configs.len()];
    for round in 0..rounds {
        for (i, (label, tprof)) in configs.iter().enumerate() {
            let out = work.join(format!("out-{round}-{i}"));
            let mut cmd = Command::new(&driver);
            cmd.arg(calls.to_string())
                .env("LD_LIBRARY_PATH", &simgpu)
                .env("SIMGPU_LAUNCH_NS", "0")
                .env("SIMGPU_KERNEL_NS", "bench=1")
                .env("SIMGPU_SESSION", format!("bench-intercept-{}", std::process::id()))
                .env_remove("LD_PRELOAD");
            for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TPROF_") && k != "TPROF_LIB") {
                cmd.env_remove(k);
            }
            if let Some(vars) = tprof {
                cmd.env("LD_PRELOAD", &lib).env("TPROF_OUT", &out).env("TPROF_RING_MB", "64").env("TPROF_QUIET", "1");
                for (k, v) in vars {
                    cmd.env(k, v);
                }
            }
            let o = cmd.output().expect("run driver");
            let text = String::from_utf8_lossy(&o.stdout);
            let get = |key: &str| {
                text.lines()
                    .find_map(|l| l.strip_prefix(key).and_then(|v| v.trim().parse::<f64>().ok()))
                    .unwrap_or_else(|| panic!("{label}: no {key} ({})", String::from_utf8_lossy(&o.stderr)))
            };
            results[i].push(get("best_batch_ns_per_call "));
            means[i].push(get("ns_per_call "));
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    let best = |v: &[f64]| v.iter().copied().fold(f64::INFINITY, f64::min);
    let bare = best(&results[0]);
    let bare_mean = median(means[0].clone());
    println!("cudaLaunchKernel on the simulated runtime (SIMGPU_LAUNCH_NS=0), {calls} calls x {rounds} rounds");
    println!("best = fastest batch of 250 calls over all rounds; mean = median over rounds of the mean per call");
    println!("{:<28} {:>9} {:>9} {:>7} {:>10} {:>9}", "configuration", "best ns", "added", "ratio", "mean ns", "added");
    for (i, (label, _)) in configs.iter().enumerate() {
        let b = best(&results[i]);
        let m = median(means[i].clone());
        println!("{label:<28} {b:>9.1} {:>+9.1} {:>7.3} {m:>10.1} {:>+9.1}", b - bare, b / bare, m - bare_mean);
    }
    println!("goals: full <= +30 ns per call; closed window / metrics <= +5 ns per call");
}
