//! Cost of libtprof as NCCL profiler plugin per collective: `cargo bench -p tprof-shim --bench nccl_plugin`.
//!
//! A C driver (`benches/driver/plugin_loop.c`) calls the `ncclProfiler_v6` table as NCCL does for
//! one 8-channel all-reduce (API, group and task events, 8 kernel channels; with proxy operations:
//! 16 operations of 4 steps) and prints the calling thread's CPU ns per collective, per mode; the median of the rounds is
//! reported, with the share of a 1 MiB all-reduce of 20 us (8 GPUs on one NVLink node, ~90 GB/s
//! busbw) and of 100 us (across nodes). The driver fills the proxy operations' `pid` from one
//! `getpid` as NCCL does (it reads it once, when it loads the plugin): a `getpid` per operation cost
//! ~2 us of driver time per collective on the reference VM. Environment: `TPROF_LIB` (run `main`'s
//! library against this one alternately to compare), `BENCH_CALLS` (default 200000), `BENCH_ROUNDS`
//! (default 5).

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

fn env_num(k: &str, default: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"));
    let lib = std::env::var_os("TPROF_LIB").map(PathBuf::from).unwrap_or_else(|| target.join("release/libtprof.so"));
    assert!(lib.exists(), "{} missing: run `cargo build --release -p tprof-shim`", lib.display());
    let work = target.join("tprof-bench-nccl-plugin");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).expect("bench dir");
    let driver = work.join("plugin_loop");
    let cc = Command::new(std::env::var("CC").unwrap_or_else(|_| "cc".into()))
        .args(["-O2", "-std=gnu11"])
        .arg(repo().join("shim/benches/driver/plugin_loop.c"))
        .arg("-ldl")
        .arg("-o")
        .arg(&driver)
        .status()
        .expect("cc");
    assert!(cc.success(), "building the driver failed");
    let calls = env_num("BENCH_CALLS", 200_000).to_string();
    let rounds = env_num("BENCH_ROUNDS", 5);
    let configs: [(&str, &str, &str); 4] = [
        ("full, with proxy ops", "full", "1"),
        ("full, no proxy ops", "full", "0"),
        ("flight", "flight", "1"),
        ("metrics", "metrics", "1"),
    ];
    println!("{:<24} {:>14} {:>12} {:>12}", "mode", "CPU ns/coll", "% of 20 us", "% of 100 us");
    for (label, mode, proxy) in configs {
        let mut v: Vec<f64> = (0..rounds)
            .map(|_| {
                let out = Command::new(&driver)
                    .arg(&lib)
                    .arg(&calls)
                    .arg(proxy)
                    .env("TPROF_MODE", mode)
                    .env("TPROF_OUT", work.join("out"))
                    .env("TPROF_RING_MB", "16")
                    .env("TPROF_QUIET", "1")
                    .output()
                    .expect("driver");
                assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
                String::from_utf8_lossy(&out.stdout)
                    .split_whitespace()
                    .next()
                    .and_then(|v| v.parse::<f64>().ok())
                    .expect("ns")
            })
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        let ns = v[v.len() / 2];
        println!("{label:<24} {ns:>14.1} {:>11.3}% {:>11.3}%", ns / 20_000.0 * 100.0, ns / 100_000.0 * 100.0);
    }
    let _ = std::fs::remove_dir_all(&work);
}
