//! The simulated CUPTI and runtime without a driver (`SIMGPU_NO_DRIVER=1`) against NVIDIA's real
//! libraries on this machine, which has no driver: the probes in `tests/conformance/` call each
//! entry point in a fresh child process and print what it returned or how the child died; the mock's
//! lines must equal the real library's, run live here, for every installed version
//! (`scripts/setup-conformance.sh`; the CUDA 12 wheels of `scripts/setup-python.sh` count too).
//! The mock CUPTI plays each CUPTI version through `SIMGPU_CUPTI_VERSION` (read from that version's
//! `cupti_version.h`). No real library found is a failure unless `TPROF_CONFORMANCE=0`.
//!
//! Prerequisite: `make -C tests/simgpu`.

use std::path::{Path, PathBuf};
use std::process::Command;

use tprof_e2e::programs::{repo_root, require_mock_libs};
use tprof_e2e::shim::temp_dir;

fn skip_requested() -> bool {
    std::env::var("TPROF_CONFORMANCE").is_ok_and(|v| v == "0")
}

fn sorted_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).filter(|p| p.is_dir()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// A real library: a label for messages, the `.so` and the `nvidia/<pkg>` folder it came in.
struct RealLib {
    label: String,
    so: PathBuf,
    package: PathBuf,
}

/// Every `nvidia/<pkg>/lib/<soname_prefix>*` in `.venv/conformance/<dist>-<version>/` and in the
/// main venv's site-packages.
fn real_libs(dists: &[&str], soname_prefix: &str) -> Vec<RealLib> {
    let root = repo_root();
    let mut roots: Vec<(String, PathBuf)> = Vec::new();
    for d in sorted_dirs(&root.join(".venv/conformance")) {
        let name = d.file_name().unwrap().to_string_lossy().into_owned();
        let version_follows = |dist: &&str| {
            name.strip_prefix(*dist)
                .and_then(|r| r.strip_prefix('-'))
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
        };
        if dists.iter().any(version_follows) {
            roots.push((name, d));
        }
    }
    for lib in sorted_dirs(&root.join(".venv/lib")) {
        let sp = lib.join("site-packages");
        if sp.is_dir() {
            roots.push((format!("venv {}", lib.file_name().unwrap().to_string_lossy()), sp));
        }
    }
    let mut libs = Vec::new();
    for (label, r) in roots {
        for package in sorted_dirs(&r.join("nvidia")) {
            for f in std::fs::read_dir(package.join("lib")).into_iter().flatten().flatten() {
                let n = f.file_name().to_string_lossy().into_owned();
                let versioned =
                    n.strip_prefix(soname_prefix).is_some_and(|rest| rest.starts_with(".so.") && !rest.contains('-'));
                if versioned {
                    libs.push(RealLib { label: format!("{label} {n}"), so: f.path(), package: package.clone() });
                }
            }
        }
    }
    libs
}

/// Builds a probe from `tests/conformance/<name>.c` into `dir`.
fn build_probe(name: &str, dir: &Path) -> PathBuf {
    let src = repo_root().join("tests/conformance").join(format!("{name}.c"));
    let exe = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .arg("-ldl")
        .output()
        .unwrap_or_else(|e| panic!("run {cc}: {e}"));
    assert!(out.status.success(), "{} does not build:\n{}", src.display(), String::from_utf8_lossy(&out.stderr));
    exe
}

/// The probe's lines for `lib`, run with only `env` set (no LD_LIBRARY_PATH: a real CUPTI must not
/// find the simulated libcuda.so.1).
fn probe(exe: &Path, lib: &Path, env: &[(&str, String)]) -> Vec<String> {
    let mut cmd = Command::new(exe);
    cmd.arg(lib).env_clear();
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("run {}: {e}", exe.display()));
    assert!(
        out.status.success(),
        "{} {} failed: {}",
        exe.display(),
        lib.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

/// The mock's environment: no driver, its own counters segment, the CUPTI API version it plays.
fn mock_env(cupti_version: Option<u32>) -> Vec<(&'static str, String)> {
    let mut env =
        vec![("SIMGPU_NO_DRIVER", "1".to_string()), ("SIMGPU_SESSION", format!("nodriver-{}", std::process::id()))];
    if let Some(v) = cupti_version {
        env.push(("SIMGPU_CUPTI_VERSION", v.to_string()));
    }
    env
}

fn remove_counters_segment() {
    let _ = std::fs::remove_file(format!("/dev/shm/simgpu-nodriver-{}", std::process::id()));
}

/// The step name of a probe line (up to the first " returned", " killed", ...).
fn step(line: &str) -> &str {
    ["returned", "killed by", "timed out", "exited", "symbol", "dlopen failed"]
        .iter()
        .filter_map(|w| line.find(&format!(" {w}")))
        .min()
        .map_or(line, |i| &line[..i])
}

/// Compares probe outputs line by line; `mask` turns a line into the part that must agree.
/// Returns (lines compared, steps the mock does not export).
fn compare(
    label: &str,
    real: &[String],
    mock: &[String],
    mask: impl Fn(&str) -> String,
    diffs: &mut Vec<String>,
) -> (usize, Vec<String>) {
    assert_eq!(
        real.len(),
        mock.len(),
        "{label}: probe printed {} lines for the real library, {} for the mock",
        real.len(),
        mock.len()
    );
    let mut compared = 0;
    let mut absent = Vec::new();
    for (r, m) in real.iter().zip(mock) {
        assert_eq!(step(r), step(m), "{label}: probe steps out of order");
        if m.contains(" symbol ") && m.ends_with(" missing") {
            absent.push(step(m).to_string());
            continue;
        }
        compared += 1;
        if mask(r) != mask(m) {
            diffs.push(format!("{label}: real `{r}`, mock `{m}`"));
        }
    }
    (compared, absent)
}

/// `#define CUPTI_API_VERSION N` of the CUPTI a library came with.
fn cupti_api_version(package: &Path) -> u32 {
    let h = package.join("include/cupti_version.h");
    let text = std::fs::read_to_string(&h).unwrap_or_else(|e| panic!("read {}: {e}", h.display()));
    text.lines()
        .find_map(|l| l.trim().strip_prefix("#define CUPTI_API_VERSION ").and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no CUPTI_API_VERSION in {}", h.display()))
}

#[test]
fn simulated_cupti_without_driver_answers_like_every_real_cupti() {
    if skip_requested() {
        eprintln!("skipped: TPROF_CONFORMANCE=0");
        return;
    }
    let mock_dir = require_mock_libs(&["libcupti.so.12", "libsimgpu.so"]);
    let reals = real_libs(&["nvidia-cuda-cupti", "nvidia-cuda-cupti-cu12"], "libcupti");
    assert!(!reals.is_empty(), "no real libcupti found: run scripts/setup-conformance.sh, or set TPROF_CONFORMANCE=0");
    let dir = temp_dir("cupti-nodriver");
    let exe = build_probe("cupti_nodriver", &dir);
    let mut diffs = Vec::new();
    let mut compared = 0;
    for real in &reals {
        let version = cupti_api_version(&real.package);
        let real_lines = probe(&exe, &real.so, &[]);
        let mock_lines = probe(&exe, &mock_dir.join("libcupti.so.12"), &mock_env(Some(version)));
        let (n, absent) =
            compare(&format!("{} (API {version})", real.label), &real_lines, &mock_lines, str::to_string, &mut diffs);
        compared += n;
        eprintln!("{} (API {version}): {n} calls compared; not in the mock: {absent:?}", real.label);
    }
    remove_counters_segment();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(diffs.is_empty(), "{} of {compared} calls differ:\n{}", diffs.len(), diffs.join("\n"));
    eprintln!("{} real CUPTIs, {compared} calls, mock equal on all", reals.len());
}

#[test]
fn simulated_runtime_without_driver_answers_like_every_real_runtime() {
    if skip_requested() {
        eprintln!("skipped: TPROF_CONFORMANCE=0");
        return;
    }
    let mock_dir = require_mock_libs(&["libcudart.so.12", "libcudart.so.13", "libsimgpu.so"]);
    let reals = real_libs(&["nvidia-cuda-runtime", "nvidia-cuda-runtime-cu12"], "libcudart");
    assert!(!reals.is_empty(), "no real libcudart found: run scripts/setup-conformance.sh, or set TPROF_CONFORMANCE=0");
    let dir = temp_dir("cudart-nodriver");
    let exe = build_probe("cudart_nodriver", &dir);
    // The runtime's own version is not a no-driver behaviour: compare only its return code.
    let mask = |l: &str| {
        if step(l) == "cudaRuntimeGetVersion" {
            l.split(" version=").next().unwrap().to_string()
        } else {
            l.to_string()
        }
    };
    let mut diffs = Vec::new();
    let mut compared = 0;
    for real in &reals {
        let soname = real.so.file_name().unwrap().to_string_lossy().into_owned();
        let mock = mock_dir.join(&soname);
        assert!(mock.exists(), "no simulated {soname} in {}", mock_dir.display());
        let real_lines = probe(&exe, &real.so, &[]);
        let mock_lines = probe(&exe, &mock, &mock_env(None));
        let (n, absent) = compare(&real.label, &real_lines, &mock_lines, mask, &mut diffs);
        assert!(absent.is_empty(), "{}: the mock lacks {absent:?}", real.label);
        compared += n;
        // The comparison has teeth: with a driver the mock answers differently.
        let with_driver = probe(&exe, &mock, &[("SIMGPU_SESSION", format!("nodriver-{}", std::process::id()))]);
        assert_ne!(
            with_driver.iter().map(|l| mask(l)).collect::<Vec<_>>(),
            real_lines.iter().map(|l| mask(l)).collect::<Vec<_>>(),
            "{}: the mock with a driver answers like no driver",
            real.label
        );
    }
    remove_counters_segment();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(diffs.is_empty(), "{} of {compared} calls differ:\n{}", diffs.len(), diffs.join("\n"));
    eprintln!("{} real runtimes, {compared} calls, mock equal on all", reals.len());
}
