//! Helpers for the report end-to-end tests: the tprof CLI, a traced simtrain run, headless Chromium.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::programs::repo_root;

/// The build's target dir (`CARGO_TARGET_DIR`, else `target`).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"))
}

fn artifact(var: &str, name: &str) -> PathBuf {
    let p = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| target_dir().join("release").join(name));
    assert!(p.exists(), "prerequisite missing: {} ({var}; build it with `cargo build --release`)", p.display());
    p
}

/// libtprof.so (`TPROF_LIB`).
pub fn tprof_lib() -> PathBuf {
    artifact("TPROF_LIB", "libtprof.so")
}

/// The tprof CLI (`TPROF_BIN`).
pub fn tprof_bin() -> PathBuf {
    artifact("TPROF_BIN", "tprof")
}

/// Headless Chromium (`CHROMIUM`, else /usr/bin/chromium).
pub fn chromium() -> PathBuf {
    let p = std::env::var_os("CHROMIUM").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    assert!(
        p.exists(),
        "prerequisite missing: {} (install Debian's chromium: apt-get update && apt-get install -y chromium, or set CHROMIUM)",
        p.display()
    );
    p
}

/// Runs `simtrain ARGS` on the simulated GPU stack (scripts/simgpu.sh) under libtprof, rings in `out`.
pub fn traced_simtrain(args: &[&str], out: &Path, env: &[(&str, &str)]) -> Output {
    let simtrain = crate::programs::require_program("simtrain");
    let mut cmd = Command::new(repo_root().join("scripts/simgpu.sh"));
    cmd.arg(&simtrain)
        .args(args)
        .env("LD_PRELOAD", tprof_lib())
        .env("TPROF_OUT", out)
        .env("TPROF_RING_MB", "16")
        .env("SIMGPU_NO_BUILD", "1")
        .env("SIMGPU_SESSION", format!("tprof-report-{}", std::process::id()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    let o = cmd.output().expect("run scripts/simgpu.sh");
    assert!(
        o.status.success(),
        "simtrain failed ({}): {}",
        o.status,
        String::from_utf8_lossy(&o.stderr).lines().rev().take(20).collect::<Vec<_>>().join("\n")
    );
    o
}

/// Runs Chromium headless on `page` with the given extra flags; returns its output.
pub fn chromium_run(page: &Path, profile: &Path, extra: &[&str]) -> Output {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium")
}
