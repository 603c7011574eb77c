//! NVIDIA's real libraries as judges (the conformance stage): programs built against NVIDIA's real
//! CUDA 12 and 13 runtimes, NVTX3 and NCCL, run on this machine without a driver next to every real
//! CUPTI version `scripts/setup-conformance.sh` installs, bare and under tprof (`LD_PRELOAD`,
//! `CUDA_INJECTION64_PATH`, both). Under tprof, stdout and the exit code are unchanged, stderr gains
//! at most one `tprof:` line, and no CUPTI is loaded (CUPTI 13.2 without a driver recurses until the
//! stack overflows; CUPTI starts only once the driver has been shown to work).
//!
//! Prerequisites: `bash scripts/setup-python.sh`, `bash scripts/setup-conformance.sh`,
//! `make -C tests/programs` (the nvcc-built CUDA 13 programs), `cargo build --release -p tprof-shim`.
//! A missing prerequisite fails the test naming it; `TPROF_CONFORMANCE=0` skips this file.

use std::path::{Path, PathBuf};
use std::process::Command;

use tprof_e2e::programs::{nvidia_wheels_dir, programs_dir};
use tprof_e2e::shim::*;

fn skipped() -> bool {
    if std::env::var("TPROF_CONFORMANCE").is_ok_and(|v| v == "0") {
        eprintln!("TPROF_CONFORMANCE=0: conformance against NVIDIA's real libraries skipped");
        return true;
    }
    false
}

fn conformance_dir() -> PathBuf {
    let d = repo_root().join(".venv/conformance");
    assert!(d.is_dir(), "missing NVIDIA's real wheels: run bash scripts/setup-conformance.sh ({})", d.display());
    d
}

/// Every file named `name` under `dir` (the wheels' `nvidia/<pkg>/lib` layout differs per package).
fn find_files(dir: &Path, name: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() && !p.is_symlink() {
            find_files(&p, name, out);
        } else if p.file_name().is_some_and(|f| f == name) {
            out.push(p);
        }
    }
}

/// (label, path) of every installed real libcupti of `major`.
fn cuptis(major: u32) -> Vec<(String, PathBuf)> {
    let root = conformance_dir();
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(&root) else { return out };
    let mut dirs: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
    dirs.sort();
    for d in dirs {
        let label = d.file_name().unwrap().to_string_lossy().into_owned();
        if !label.starts_with("nvidia-cuda-cupti") {
            continue;
        }
        let mut found = Vec::new();
        find_files(&d, &format!("libcupti.so.{major}"), &mut found);
        if let Some(p) = found.into_iter().next() {
            out.push((label, p));
        }
    }
    out
}

fn runtime(major: u32) -> PathBuf {
    let p = match major {
        12 => nvidia_wheels_dir().join("cuda_runtime/lib/libcudart.so.12"),
        _ => nvidia_wheels_dir().join("cu13/lib/libcudart.so.13"),
    };
    assert!(p.exists(), "missing NVIDIA's libcudart.so.{major}: bash scripts/setup-python.sh ({})", p.display());
    p
}

/// A library folder laid out as a pip install is (runtime and CUPTI side by side), with symlinks.
fn lib_dir(tag: &str, libs: &[(&str, &Path)]) -> PathBuf {
    let d = temp_dir(tag);
    for (name, target) in libs {
        std::os::unix::fs::symlink(target, d.join(name)).unwrap();
    }
    d
}

fn cc(src: &str, out: &Path, extra: &[&str]) {
    let src = repo_root().join("tests/e2e/cprog").join(src);
    let nvtx = nvidia_wheels_dir().join("nvtx/include");
    assert!(nvtx.join("nvtx3/nvToolsExt.h").exists(), "missing NVTX headers: bash scripts/setup-python.sh");
    let o = Command::new("cc")
        .args(["-O2", "-Wall", "-o"])
        .arg(out)
        .arg(&src)
        .arg("-I")
        .arg(&nvtx)
        .args(extra)
        .args(["-ldl", "-lpthread"])
        .output()
        .expect("missing prerequisite: a C compiler `cc` on PATH");
    assert!(o.status.success(), "cc {} failed:\n{}", src.display(), String::from_utf8_lossy(&o.stderr));
}

/// Runs `program` bare and under tprof in every attach mode; asserts the program cannot tell.
/// Returns the stderr `tprof:` lines of the preloaded run.
fn judge(what: &str, program: &Path, args: &[&str], libs: &Path, env: &[(&str, &str)]) -> Vec<String> {
    let spec = |preload: bool, inject: bool| {
        let mut s = RunSpec::new(program, args, libs.to_path_buf());
        s.preload = preload;
        s.inject = inject;
        for (k, v) in env {
            s = s.env(k, v);
        }
        s
    };
    let bare = spec(false, false).run("real-bare");
    let mut preload_lines = Vec::new();
    for (mode, preload, inject) in
        [("LD_PRELOAD", true, false), ("CUDA_INJECTION64_PATH", false, true), ("both", true, true)]
    {
        let run = spec(preload, inject).run("real-shim");
        let ctx = format!("{what} under {mode}");
        assert_eq!(run.code(), bare.code(), "{ctx}: exit code changed; stderr:\n{}", run.stderr());
        assert_eq!(run.stdout(), bare.stdout(), "{ctx}: stdout changed");
        let stderr = run.stderr();
        let (ours, rest): (Vec<&str>, Vec<&str>) =
            stderr.lines().filter(|l| !l.is_empty()).partition(|l| l.starts_with("tprof:"));
        let bare_err = bare.stderr();
        let bare_rest: Vec<&str> = bare_err.lines().filter(|l| !l.is_empty()).collect();
        assert_eq!(rest, bare_rest, "{ctx}: the program's own stderr changed");
        assert!(ours.len() <= 1, "{ctx}: more than one tprof line:\n{stderr}");
        assert!(!stderr.contains("libcupti loaded: yes"), "{ctx}: CUPTI was loaded without a driver:\n{stderr}");
        if mode == "LD_PRELOAD" {
            preload_lines = ours.iter().map(|l| l.to_string()).collect();
        }
        let _ = std::fs::remove_dir_all(run.out_dir.parent().unwrap());
    }
    let _ = std::fs::remove_dir_all(bare.out_dir.parent().unwrap());
    preload_lines
}

#[test]
fn conformance_cuda_12_and_13_programs_with_every_real_cupti() {
    if skipped() {
        return;
    }
    let bin = temp_dir("real-bin");
    let mut judged = 0;
    for major in [12u32, 13] {
        let rt = runtime(major);
        let rt_name = format!("libcudart.so.{major}");
        let probe = bin.join(format!("real_probe{major}"));
        cc("real_probe.c", &probe, &["-L", rt.parent().unwrap().to_str().unwrap(), &format!("-l:{rt_name}")]);
        let list = cuptis(major);
        assert!(!list.is_empty(), "no real libcupti.so.{major} installed: bash scripts/setup-conformance.sh");
        for (label, cupti) in list {
            let libs = lib_dir("real-libs", &[(&rt_name, &rt), (&format!("libcupti.so.{major}"), &cupti)]);
            let what = format!("real_probe (CUDA {major} runtime, {label})");
            let lines = judge(&what, &probe, &[], &libs, &[]);
            assert_eq!(lines.len(), 1, "{what}: one line about the missing driver");
            assert!(lines[0].contains("no usable CUDA driver") && lines[0].contains("returned 35"), "{}", lines[0]);
            judged += 1;
            if major == 13 {
                // Programs compiled by NVIDIA's nvcc (<<<>>> launches through __cudaLaunchKernel).
                for prog in ["cu13_vector_add", "cu13_streams", "cu13_templated"] {
                    let p = programs_dir().join(prog);
                    assert!(p.exists(), "missing {}: make -C tests/programs", p.display());
                    judge(&format!("{prog} ({label})"), &p, &[], &libs, &[]);
                    judged += 1;
                }
            }
            let _ = std::fs::remove_dir_all(&libs);
        }
    }
    let _ = std::fs::remove_dir_all(&bin);
    eprintln!("{judged} program/library combinations judged");
}

#[test]
fn conformance_nvtx_cpu_loop_with_every_real_cupti_beside_it() {
    if skipped() {
        return;
    }
    // The PyTorch CPU loop that segfaulted: NVTX ranges only, CUPTI 13.2 beside the runtime.
    let bin = temp_dir("real-bin");
    let prog = bin.join("nvtx_only");
    cc("nvtx_only.c", &prog, &[]);
    for major in [12u32, 13] {
        for (label, cupti) in cuptis(major) {
            let rt = runtime(major);
            let libs = lib_dir(
                "real-libs",
                &[(&format!("libcudart.so.{major}"), &rt), (&format!("libcupti.so.{major}"), &cupti)],
            );
            let lines = judge(&format!("nvtx_only ({label})"), &prog, &[], &libs, &[("TPROF_CUPTI_PATH", "")]);
            assert!(lines.is_empty(), "nvtx_only ({label}): nothing to say for NVTX alone: {lines:?}");
            // Pointed at that CUPTI explicitly, tprof still must not load it for NVTX alone.
            let explicit = cupti.to_str().unwrap();
            judge(
                &format!("nvtx_only ({label}, TPROF_CUPTI_PATH)"),
                &prog,
                &[],
                &libs,
                &[("TPROF_CUPTI_PATH", explicit)],
            );
            let _ = std::fs::remove_dir_all(&libs);
        }
    }
    let _ = std::fs::remove_dir_all(&bin);
}

#[test]
fn conformance_nccl_first_calls_are_unchanged() {
    if skipped() {
        return;
    }
    let root = conformance_dir();
    let bin = temp_dir("real-bin");
    let mut judged = 0;
    for flavour in ["nvidia-nccl-cu12", "nvidia-nccl-cu13"] {
        let mut found = Vec::new();
        if let Ok(entries) = std::fs::read_dir(&root) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&format!("{flavour}-")) {
                    find_files(&e.path(), "libnccl.so.2", &mut found);
                }
            }
        }
        let nccl = found.into_iter().next().unwrap_or_else(|| {
            panic!("no real {flavour} installed: bash scripts/setup-conformance.sh");
        });
        let major = if flavour.ends_with("cu12") { 12 } else { 13 };
        let rt = runtime(major);
        let libs = lib_dir("real-libs", &[("libnccl.so.2", &nccl), (&format!("libcudart.so.{major}"), &rt)]);
        let prog = bin.join(format!("nccl_probe_{major}"));
        cc("nccl_probe.c", &prog, &["-L", libs.to_str().unwrap(), "-l:libnccl.so.2"]);
        // Loopback only: NCCL's bootstrap binds a socket for the unique id and sends nothing.
        judge(&format!("nccl_probe ({flavour})"), &prog, &[], &libs, &[("NCCL_SOCKET_IFNAME", "lo")]);
        judged += 1;
        let _ = std::fs::remove_dir_all(&libs);
    }
    let _ = std::fs::remove_dir_all(&bin);
    assert_eq!(judged, 2);
}
