//! Helpers for the fault tests of the shim (signals, the control socket, the output directory):
//! `tests/e2e/cprog/signal_fates.c` run bare or under libtprof on the simulated runtime, and the
//! signals sent to it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::programs::{RunOutput, Running};
use crate::shim::{compile, simgpu_dir, tprof_lib, Link};

/// The compiled `signal_fates` program in `dir`.
pub fn build(dir: &Path) -> PathBuf {
    compile("signal_fates", dir, Link::SimCudart)
}

/// `signal_fates MODE` with its ring (if `out` is Some) in `out`; `env`: extra variables (TPROF_*).
/// `core`: run it with an unlimited core size in `cwd` (else no core is written).
pub fn command(
    program: &Path,
    mode: &str,
    out: Option<&Path>,
    env: &[(&str, &str)],
    cwd: &Path,
    core: bool,
) -> Command {
    let limit = if core { "unlimited" } else { "0" };
    let mut cmd = Command::new("sh");
    cmd.arg("-c").arg(format!("ulimit -c {limit}; exec \"$0\" \"$@\"")).arg(program).arg(mode).current_dir(cwd);
    cmd.env("LD_LIBRARY_PATH", simgpu_dir()).env_remove("LD_PRELOAD").env_remove("CUDA_INJECTION64_PATH");
    cmd.env("SIMGPU_SESSION", format!("fates-{}-{mode}", std::process::id()));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("TPROF_") && k != "TPROF_LIB" && k != "TPROF_BIN") {
        cmd.env_remove(k);
    }
    if let Some(out) = out {
        cmd.env("LD_PRELOAD", tprof_lib()).env("TPROF_OUT", out).env("TPROF_RING_MB", "4").env("TPROF_CUPTI", "0");
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Starts `cmd` and waits for its "ready" line (panics naming the output when it does not come).
pub fn start_ready(cmd: Command) -> Running {
    let mut run = Running::spawn(cmd);
    if !run.wait_for_stderr("ready", Duration::from_secs(30)) {
        let out = run.finish(Duration::from_secs(1));
        panic!("signal_fates never became ready: {}", out.describe());
    }
    run
}

/// Sends signal `sig` (a `kill -s` name such as USR2) to `pid`.
pub fn send(pid: u32, sig: &str) {
    let ok = Command::new("kill").args(["-s", sig]).arg(pid.to_string()).status().is_ok_and(|s| s.success());
    assert!(ok, "kill -s {sig} {pid} failed");
}

/// The signal that ended a run, and whether it dumped core.
pub fn death(out: &RunOutput) -> (Option<i32>, bool) {
    use std::os::unix::process::ExitStatusExt;
    match out.status {
        Some(st) => (st.signal(), st.core_dumped()),
        None => (None, false),
    }
}

/// The `tprof-*.sock` files in `out`.
pub fn socket_files(out: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(out)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| n.starts_with("tprof-") && n.ends_with(".sock"));
    v.sort();
    v
}

/// The ring files (`*.tprof`) in `out`.
pub fn ring_files(out: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> =
        std::fs::read_dir(out).map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.path()).collect()).unwrap_or_default();
    v.retain(|p| p.extension().is_some_and(|e| e == "tprof"));
    v.sort();
    v
}
