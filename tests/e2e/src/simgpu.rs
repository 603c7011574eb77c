//! Running the simulated GPU stack's own selftests (`tests/simgpu/selftest`, built by
//! `make -C tests/simgpu`) and reading the one-line figures each prints
//! (`name: key=value key=value ...`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The longest a selftest may run (the slowest takes a few seconds on a loaded 2-core machine).
pub const SELFTEST_TIMEOUT: Duration = Duration::from_secs(180);

/// `SIMGPU_LIB_DIR`, default `tests/simgpu/build` (the mock libraries; selftests in `selftest/`).
pub fn lib_dir() -> PathBuf {
    std::env::var_os("SIMGPU_LIB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/simgpu/build"))
}

/// What one selftest run left: its exit status, stdout/stderr, its summary figures and the
/// ground truth lines of every process it ran (`SIMGPU_TRUTH`).
pub struct SelftestRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub figures: BTreeMap<String, String>,
    pub truth: Vec<serde_json::Value>,
}

impl SelftestRun {
    /// The integer at the start of figure `key` (`"18/18"` gives 18); panics naming it if absent.
    pub fn num(&self, key: &str) -> i64 {
        let v = self.figures.get(key).unwrap_or_else(|| panic!("figure {key} missing in: {}", self.stdout));
        let digits: String = v.chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        digits.parse().unwrap_or_else(|_| panic!("figure {key}={v} is not a number"))
    }
}

/// Parses `name: k=v k=v` lines; the last line starting with `name:` wins.
pub fn parse_figures(stdout: &str, name: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let prefix = format!("{name}:");
    for line in stdout.lines().filter(|l| l.starts_with(&prefix)) {
        out.clear();
        for tok in line[prefix.len()..].split_whitespace() {
            if let Some((k, v)) = tok.split_once('=') {
                out.insert(k.to_string(), v.to_string());
            }
        }
    }
    out
}

/// Runs `selftest/<name>` with the mocks first in the library path and a fresh truth directory
/// (passed as argv[1] too). Panics, naming the binary and how to build it, if it is missing.
pub fn run_selftest(name: &str, env: &[(&str, &str)]) -> SelftestRun {
    let bin = lib_dir().join("selftest").join(name);
    assert!(
        bin.exists(),
        "simgpu selftest {} not built (run `make -C tests/simgpu`, or set SIMGPU_LIB_DIR)",
        bin.display()
    );
    let truth_dir = std::env::temp_dir().join(format!("simgpu-e2e-{}-{}", name, std::process::id()));
    let _ = std::fs::remove_dir_all(&truth_dir);
    std::fs::create_dir_all(&truth_dir).expect("truth dir");
    let ld = match std::env::var("LD_LIBRARY_PATH") {
        Ok(old) if !old.is_empty() => format!("{}:{}", lib_dir().display(), old),
        _ => lib_dir().display().to_string(),
    };
    let mut cmd = Command::new(&bin);
    cmd.arg(&truth_dir)
        .env("LD_LIBRARY_PATH", ld)
        .env("SIMGPU_TRUTH", &truth_dir)
        .env("SIMGPU_SESSION", format!("e2e-{}-{}", name, std::process::id()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    // A selftest that hangs (a deadlock in the mocks) fails here, named, instead of stalling CI.
    let out = crate::programs::run(cmd, SELFTEST_TIMEOUT);
    let stdout = out.stdout.clone();
    let mut truth = Vec::new();
    if let Ok(rd) = std::fs::read_dir(&truth_dir) {
        for entry in rd.flatten() {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                truth.push(serde_json::from_str(line).unwrap_or_else(|e| panic!("bad truth line {line:?}: {e}")));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&truth_dir);
    SelftestRun {
        success: out.code == 0 && !out.terminated,
        figures: parse_figures(&stdout, name),
        stdout,
        stderr: if out.terminated {
            format!("{}\n(selftest {name} killed after {SELFTEST_TIMEOUT:?})", out.stderr)
        } else {
            out.stderr
        },
        truth,
    }
}
