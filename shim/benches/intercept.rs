//! Per-call cost of the shim on `cudaLaunchKernel` (simulated runtime, `SIMGPU_LAUNCH_NS=0`):
//! `cargo bench -p tprof-shim --bench intercept`.
//!
//! A small C driver (`benches/driver/launch_loop.c`) launches N kernels with `cudaLaunchKernel`, and
//! `benches/driver/launch_loop_nvcc.cu` (built by the CUDA 13 nvcc in `.venv`) with `<<<>>>`, in
//! batches with syncs and back to back; each prints ns per call. It runs
//! bare and under libtprof in each mode, the configurations interleaved round by round so machine
//! noise hits them alike; the median of the rounds is reported with the difference to bare.
//! "CUPTI off" rows (`TPROF_CUPTI=0`) isolate the shim's own cost: with CUPTI on, the simulated
//! CUPTI's activity recording per launch is counted too (as a real CUPTI's would be).
//!
//! Environment: `TPROF_LIB` (default `$CARGO_TARGET_DIR/release/libtprof.so`; build it first with
//! `cargo build --release -p tprof-shim`), `SIMGPU_LIB_DIR` (default `tests/simgpu/build`),
//! `BENCH_CALLS` (default 200000), `BENCH_ROUNDS` (default 7), `TPROF_LIB_OLD` (a previous
//! libtprof.so: its CUPTI-off rows run interleaved beside the new one).
//!
//! Instructions: when `valgrind` is installed (and `BENCH_CALLGRIND` is not 0), each launch path also
//! runs once per CUPTI-off configuration under callgrind with collection toggled at the launch
//! function (the wrapper and the real function have the same name, so tprof's part of the call is
//! collected and the real call is not) and at the writer thread's loop: instructions per launch on
//! the launching thread and on the writer thread, independent of the machine's load
//! (`BENCH_CALLGRIND_CALLS`, default 20000).

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

/// One measured case: (launch path, configuration, library: None = bare, else ("new" | "old", path)).
type Case = (usize, usize, Option<(&'static str, PathBuf)>);

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
    let old_lib = std::env::var_os("TPROF_LIB_OLD").map(PathBuf::from);
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
    // The launch paths: the C driver's cudaLaunchKernel, and nvcc's `<<<>>>` (CUDA 13:
    // __cudaLaunchKernel) in batches with syncs and back to back. The nvcc paths run the bare and
    // CUPTI-off configurations (the shim's own cost).
    let mut paths: Vec<(&str, Vec<String>)> =
        vec![("cudaLaunchKernel, batches of 250 + sync", vec![driver.display().to_string()])];
    match build_nvcc_driver(&work) {
        Some(nv) => {
            let nv = nv.display().to_string();
            paths.push(("nvcc <<<>>> (__cudaLaunchKernel), batches of 250 + sync", vec![nv.clone(), "batches".into()]));
            paths.push(("nvcc <<<>>> (__cudaLaunchKernel), back to back, no sync", vec![nv, "b2b".into()]));
        }
        None => println!("nvcc (CUDA 13 wheel) not found: the <<<>>> paths are skipped (run scripts/setup-python.sh)"),
    }
    // One case = (path, config, library); a round runs every case once, interleaved.
    let mut cases: Vec<Case> = Vec::new();
    for (p, _) in paths.iter().enumerate() {
        for (c, (label, tprof)) in configs.iter().enumerate() {
            let shim_only = p == 0
                || tprof.is_none()
                || label.contains("CUPTI off") && !label.starts_with("flight") && !label.starts_with("sample");
            if !shim_only {
                continue;
            }
            if tprof.is_none() {
                cases.push((p, c, None));
                continue;
            }
            cases.push((p, c, Some(("new", lib.clone()))));
            if let Some(old) = old_lib.as_ref().filter(|_| label.contains("CUPTI off")) {
                cases.push((p, c, Some(("old", old.clone()))));
            }
        }
    }
    let mut best_of: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    let mut mean_of: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        for (i, (p, c, which)) in cases.iter().enumerate() {
            let (label, tprof) = &configs[*c];
            let out = work.join(format!("out-{round}-{i}"));
            let argv = &paths[*p].1;
            let mut cmd = Command::new(&argv[0]);
            cmd.arg(calls.to_string())
                .args(&argv[1..])
                .env("LD_LIBRARY_PATH", &simgpu)
                .env("SIMGPU_LAUNCH_NS", "0")
                .env("SIMGPU_KERNEL_NS", "bench=1")
                .env("SIMGPU_SESSION", format!("bench-intercept-{}", std::process::id()))
                .env_remove("LD_PRELOAD");
            for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TPROF_") && !k.starts_with("TPROF_LIB")) {
                cmd.env_remove(k);
            }
            if let (Some(vars), Some((_, so))) = (tprof, which) {
                cmd.env("LD_PRELOAD", so).env("TPROF_OUT", &out).env("TPROF_RING_MB", "64").env("TPROF_QUIET", "1");
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
            best_of[i].push(get("best_batch_ns_per_call "));
            mean_of[i].push(get("ns_per_call "));
            let _ = std::fs::remove_dir_all(&out);
        }
    }
    println!(
        "simulated runtime (SIMGPU_LAUNCH_NS=0), {calls} calls x {rounds} rounds, cases interleaved round by round"
    );
    println!("best = median over rounds of the fastest batch (250 calls; back to back: 1000); mean = median of the mean per call");
    println!("added = the median of per-round differences to bare of the same path and round");
    for (p, (path_label, _)) in paths.iter().enumerate() {
        println!("\n{path_label}");
        println!("{:<40} {:>9} {:>9} {:>10} {:>9}", "configuration", "best ns", "added", "mean ns", "added");
        let Some(bare) = cases.iter().position(|&(cp, _, ref w)| cp == p && w.is_none()) else { continue };
        for (i, (cp, c, which)) in cases.iter().enumerate().filter(|(_, (cp, _, _))| *cp == p) {
            let _ = cp;
            let lib_tag = match which {
                Some(("old", _)) => " [previous lib]",
                _ => "",
            };
            let label = format!("{}{lib_tag}", configs[*c].0);
            let diffs = |v: &[Vec<f64>]| median(v[i].iter().zip(&v[bare]).map(|(a, b)| a - b).collect());
            println!(
                "{label:<40} {:>9.1} {:>+9.1} {:>10.1} {:>+9.1}",
                median(best_of[i].clone()),
                diffs(&best_of),
                median(mean_of[i].clone()),
                diffs(&mean_of)
            );
        }
    }
    println!("\ngoals: full <= +30 ns per call; closed window / metrics <= +5 ns per call");
    if env_num("BENCH_CALLGRIND", 1) != 0 {
        instructions_per_launch(&work, &simgpu, &lib, old_lib.as_deref(), &paths, &configs);
    }
}

/// Instructions per launch added by tprof (callgrind, load-independent): on the launching thread
/// (tprof's part of the launch call, the real call excluded) and on the writer thread.
fn instructions_per_launch(
    work: &Path,
    simgpu: &Path,
    lib: &Path,
    old_lib: Option<&Path>,
    paths: &[(&str, Vec<String>)],
    configs: &[(&str, Option<Settings>)],
) {
    if !Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success()) {
        println!("\nvalgrind not installed: no instruction counts");
        return;
    }
    let calls = env_num("BENCH_CALLGRIND_CALLS", 20_000);
    // The drivers launch 2000 times before the timed loop.
    let launches = (calls + 2000) as f64;
    println!("\ninstructions per launch added (callgrind, {calls} + 2000 launches; launching thread / writer thread)");
    let mut libs = vec![("", lib)];
    if let Some(old) = old_lib {
        libs.push((" [previous lib]", old));
    }
    for (p, (path_label, argv)) in paths.iter().enumerate() {
        // The C driver calls cudaLaunchKernel; nvcc's <<<>>> reaches __cudaLaunchKernel.
        let function = if p == 0 { "cudaLaunchKernel" } else { "__cudaLaunchKernel" };
        println!("\n{path_label}");
        println!("{:<40} {:>10} {:>10}", "configuration", "launching", "writer");
        for (label, tprof) in configs.iter().filter(|(l, t)| t.is_some() && l.contains("CUPTI off")) {
            if label.starts_with("flight") || label.starts_with("sample") {
                continue;
            }
            for (tag, so) in &libs {
                let out = work.join("callgrind");
                let _ = std::fs::remove_dir_all(&out);
                std::fs::create_dir_all(&out).expect("callgrind dir");
                let mut cmd = Command::new("valgrind");
                cmd.args(["--tool=callgrind", "--separate-threads=yes", "--collect-atstart=no"])
                    .arg(format!("--toggle-collect={function}"))
                    .arg("--toggle-collect=tprof::service::writer_thread::run")
                    .arg(format!("--callgrind-out-file={}", out.join("cg.out").display()))
                    .arg(&argv[0])
                    .arg(calls.to_string())
                    .args(&argv[1..])
                    .env("LD_LIBRARY_PATH", simgpu)
                    .env("SIMGPU_LAUNCH_NS", "0")
                    .env("SIMGPU_KERNEL_NS", "bench=1")
                    .env("SIMGPU_SESSION", format!("bench-intercept-cg-{}", std::process::id()))
                    .env("LD_PRELOAD", so)
                    .env("TPROF_OUT", out.join("ring"))
                    .env("TPROF_RING_MB", "16")
                    .env("TPROF_QUIET", "1");
                for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TPROF_") && !k.starts_with("TPROF_LIB")) {
                    cmd.env_remove(k);
                }
                for (k, v) in tprof.as_ref().expect("a tprof configuration") {
                    cmd.env(k, v);
                }
                let o = cmd.output().expect("run valgrind");
                assert!(o.status.success(), "callgrind run failed: {}", String::from_utf8_lossy(&o.stderr));
                // Thread 1 launches; the writer thread is the other one with anything collected.
                let (mut launching, mut writer) = (0u64, 0u64);
                for e in std::fs::read_dir(&out).expect("callgrind output").flatten() {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let Some(thread) = name.strip_prefix("cg.out-") else { continue };
                    let text = std::fs::read_to_string(e.path()).unwrap_or_default();
                    let total = text
                        .lines()
                        .find_map(|l| l.strip_prefix("totals:").and_then(|v| v.trim().parse::<u64>().ok()))
                        .unwrap_or(0);
                    if thread == "01" {
                        launching = total;
                    } else {
                        writer += total;
                    }
                }
                let _ = std::fs::remove_dir_all(&out);
                println!(
                    "{:<40} {:>+10.1} {:>+10.1}",
                    format!("{label}{tag}"),
                    launching as f64 / launches,
                    writer as f64 / launches
                );
            }
        }
    }
}

/// Builds `driver/launch_loop_nvcc.cu` with the CUDA 13 nvcc of the repository's `.venv` (None when
/// it is not installed).
fn build_nvcc_driver(work: &Path) -> Option<PathBuf> {
    let venv = repo().join(".venv/lib");
    let site = std::fs::read_dir(&venv)
        .ok()?
        .filter_map(|e| e.ok())
        .find(|e| e.file_name().to_string_lossy().starts_with("python3"))?;
    let cu13 = site.path().join("site-packages/nvidia/cu13");
    let nvcc = cu13.join("bin/nvcc");
    if !nvcc.exists() {
        return None;
    }
    let out = work.join("launch_loop_nvcc");
    let ok = Command::new(&nvcc)
        .args(["-cudart", "shared", "-arch=sm_90", "-O2", "-std=c++17", "-o"])
        .arg(&out)
        .arg(repo().join("shim/benches/driver/launch_loop_nvcc.cu"))
        .arg("-L")
        .arg(cu13.join("lib"))
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "nvcc could not build the <<<>>> launch driver");
    Some(out)
}
