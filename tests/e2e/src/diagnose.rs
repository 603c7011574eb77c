//! Helpers for the `tprof diagnose` end-to-end tests: run simtrain on the simulated GPU stack
//! under the shim (`LD_PRELOAD=libtprof.so`, `TPROF_OUT`, `TPROF_RING_MB=16`), then
//! `tprof diagnose --json` on the rings it left.
//!
//! Artifacts: `TPROF_LIB` (default `$CARGO_TARGET_DIR or target`/release/libtprof.so),
//! `TPROF_BIN` (the `tprof` CLI, same directory), the mocks and simtrain through
//! [`crate::programs`]. A missing one fails the test with a message naming it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::programs::{
    exclusive, require_mock_libs, require_program, sim_command, simtrain_libs, RunOutput, Running, TempDir,
};

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| crate::programs::repo_root().join("target"))
}

fn require(p: PathBuf, what: &str, build: &str) -> PathBuf {
    assert!(p.exists(), "{what} not found at {} ({build})", p.display());
    p
}

/// libtprof.so.
pub fn tprof_lib() -> PathBuf {
    let p =
        std::env::var_os("TPROF_LIB").map(PathBuf::from).unwrap_or_else(|| target_dir().join("release/libtprof.so"));
    require(p, "the shim libtprof.so", "cargo build --release -p tprof-shim, or set TPROF_LIB")
}

/// The tprof CLI.
pub fn tprof_bin() -> PathBuf {
    let p = std::env::var_os("TPROF_BIN").map(PathBuf::from).unwrap_or_else(|| target_dir().join("release/tprof"));
    require(p, "the tprof CLI", "cargo build --release -p tprof-decoder, or set TPROF_BIN")
}

/// A profiled simtrain run: its output and the directory of ring files.
pub struct ProfiledRun {
    pub out: RunOutput,
    pub rings: TempDir,
}

impl ProfiledRun {
    /// The ring files written (`*.tprof`).
    pub fn ring_files(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.rings.path())
            .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.retain(|p| p.extension().is_some_and(|e| e == "tprof"));
        v.sort();
        v
    }
}

/// Runs `simtrain args` profiled; `stop_after` sends SIGTERM after that long (hangs), else the run
/// must finish within `timeout`.
pub fn profile_simtrain(args: &[&str], stop_after: Option<Duration>, timeout: Duration) -> ProfiledRun {
    profile_simtrain_under(&[], args, stop_after, timeout)
}

/// [`profile_simtrain`] with simtrain started by a wrapper: `wrapper[0] wrapper[1..] simtrain args`
/// (`taskset -c 0`, a shell that joins a cgroup and `exec`s `"$0" "$@"`).
pub fn profile_simtrain_under(
    wrapper: &[&str],
    args: &[&str],
    stop_after: Option<Duration>,
    timeout: Duration,
) -> ProfiledRun {
    let ranks = args
        .iter()
        .position(|a| *a == "--ranks")
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    require_mock_libs(&simtrain_libs(ranks));
    let exe = require_program("simtrain");
    let lib = tprof_lib();
    let rings = TempDir::new("diagnose-rings");
    let truth = TempDir::new("diagnose-truth");
    let mut cmd = match wrapper.split_first() {
        None => sim_command(&exe, args, truth.path()),
        Some((program, rest)) => {
            let exe = exe.to_string_lossy().into_owned();
            let all: Vec<&str> = rest.iter().copied().chain([exe.as_str()]).chain(args.iter().copied()).collect();
            sim_command(Path::new(program), &all, truth.path())
        }
    };
    cmd.env("LD_PRELOAD", &lib)
        .env("TPROF_OUT", rings.path())
        .env("TPROF_RING_MB", "16")
        .env("TPROF_HANG_TIMEOUT", "1");
    let _guard = exclusive();
    let mut running = Running::spawn(cmd);
    if let Some(after) = stop_after {
        std::thread::sleep(after);
        running.terminate();
    }
    let out = running.finish(timeout);
    ProfiledRun { out, rings }
}

/// `tprof summary DIR --json`, parsed.
pub fn summary_json(dir: &Path) -> serde_json::Value {
    let out = Command::new(tprof_bin()).arg("summary").arg(dir).arg("--json").output().expect("run tprof");
    assert!(out.status.success(), "tprof summary failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("tprof summary --json: bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// `tprof diagnose --json DIR extra...`, parsed.
pub fn diagnose_json(dir: &Path, extra: &[&str]) -> serde_json::Value {
    let bin = tprof_bin();
    let out = Command::new(&bin).arg("diagnose").arg(dir).arg("--json").args(extra).output().expect("run tprof");
    assert!(out.status.success(), "tprof diagnose failed ({}):\n{}", out.status, String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("tprof diagnose --json: bad JSON ({e}):\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// One line per verdict, for assertion messages.
pub fn verdict_table(d: &serde_json::Value) -> String {
    let mut s = format!("useful {}\n", d["efficiency"]["overall"]["useful"]);
    for v in d["verdicts"].as_array().into_iter().flatten() {
        s.push_str(&format!(
            "{:>22} {:.4} ranks {} steps {}: {}\n",
            v["kind"].as_str().unwrap_or("?"),
            v["severity"].as_f64().unwrap_or(0.0),
            v["ranks"],
            v["steps"],
            v["evidence"]["text"].as_str().unwrap_or("")
        ));
    }
    for n in d["notes"].as_array().into_iter().flatten() {
        s.push_str(&format!("note: {}\n", n.as_str().unwrap_or("")));
    }
    s
}

static NO_VERDICT: serde_json::Value = serde_json::Value::Null;

/// The top verdict, asserted to be of `kind`. A `host_cpu_contention` verdict ranked above it is
/// passed over: four simulated ranks share this machine's two cores, so their host threads really
/// do wait for a CPU (that verdict has its own tests, `host_verdicts.rs`). GPU idle time is
/// attributed once (contention takes the share of the launch idle its wait explains, off
/// `launch_bound`), but four launch-bound ranks on two cores wait about half the time they want a
/// CPU, so the two verdicts are close to a tie that machine load decides.
pub fn assert_top<'a>(d: &'a serde_json::Value, kind: &str, what: &str) -> &'a serde_json::Value {
    let verdicts = d["verdicts"].as_array().map(Vec::as_slice).unwrap_or_default();
    let top = verdicts
        .iter()
        .find(|v| kind == "host_cpu_contention" || v["kind"].as_str() != Some("host_cpu_contention"))
        .unwrap_or(&NO_VERDICT);
    assert_eq!(top["kind"].as_str(), Some(kind), "{what}: top verdict\n{}", verdict_table(d));
    top
}

/// Ranks of a verdict.
pub fn ranks(v: &serde_json::Value) -> Vec<u64> {
    v["ranks"].as_array().into_iter().flatten().filter_map(|x| x.as_u64()).collect()
}

/// Steps of a verdict.
pub fn steps(v: &serde_json::Value) -> Vec<u64> {
    v["steps"].as_array().into_iter().flatten().filter_map(|x| x.as_u64()).collect()
}
