//! Running the programs of `tests/programs` on the simulated GPU stack and reading the ground
//! truth they leave (`SIMGPU_TRUTH`, format in docs/DESIGN.md).
//!
//! Artifacts are found through `SIMGPU_LIB_DIR` (default `tests/simgpu/build`) and
//! `SIMGPU_PROGRAMS_DIR` (default `tests/programs/build`). A missing artifact is a test failure
//! whose message names it and the command that builds it: nothing passes silently.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::Deserialize;

// ------------------------------------------------------------------------------------ paths

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

/// `SIMGPU_LIB_DIR`, default `tests/simgpu/build`.
pub fn simgpu_lib_dir() -> PathBuf {
    std::env::var_os("SIMGPU_LIB_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("tests/simgpu/build"))
}

/// `SIMGPU_PROGRAMS_DIR`, default `tests/programs/build`.
pub fn programs_dir() -> PathBuf {
    std::env::var_os("SIMGPU_PROGRAMS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("tests/programs/build"))
}

/// `site-packages/nvidia` of the repository's `.venv` (scripts/setup-python.sh).
pub fn nvidia_wheels_dir() -> PathBuf {
    repo_root().join(".venv/lib/python3.11/site-packages/nvidia")
}

/// Panics, naming the library and how to build it, unless every `libs` (sonames such as
/// `libnccl.so.2`) is in the simulated stack's build directory.
pub fn require_mock_libs(libs: &[&str]) -> PathBuf {
    let dir = simgpu_lib_dir();
    let missing: Vec<&str> = libs.iter().copied().filter(|l| !dir.join(l).exists()).collect();
    assert!(
        missing.is_empty(),
        "mock librar{} {} not built in {} (run `make -C tests/simgpu`, or set SIMGPU_LIB_DIR)",
        if missing.len() == 1 { "y" } else { "ies" },
        missing.join(", "),
        dir.display()
    );
    dir
}

/// Path of a program in the programs build directory; panics naming it when it is missing.
pub fn require_program(name: &str) -> PathBuf {
    let p = programs_dir().join(name);
    assert!(p.exists(), "program {} not built (run `make -C tests/programs`, or set SIMGPU_PROGRAMS_DIR)", p.display());
    p
}

/// The mock libraries simtrain needs: the CUDA runtime and, for more than one rank, NCCL.
pub fn simtrain_libs(ranks: usize) -> Vec<&'static str> {
    let mut v = vec!["libcudart.so.12"];
    if ranks > 1 {
        v.push("libnccl.so.2");
    }
    v
}

// ------------------------------------------------------------------------------------ temp dirs

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system temp dir, removed on drop unless `TPROF_KEEP_TRUTH` is set.
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let path = std::env::temp_dir().join(format!("tprof-{tag}-{}-{n}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os("TPROF_KEEP_TRUTH").is_some() {
            eprintln!("kept {}", self.path.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

// ------------------------------------------------------------------------------------ running

static RUN_LOCK: Mutex<()> = Mutex::new(());

/// Serialises runs: the simulated devices run in real time, so runs sharing the few CPU cores
/// would distort each other's timelines.
pub fn exclusive() -> MutexGuard<'static, ()> {
    RUN_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// A command with `lib_dirs` first in `LD_LIBRARY_PATH` (nothing else of the caller's).
pub fn command_with_libs(program: &Path, args: &[&str], lib_dirs: &[&Path]) -> Command {
    let mut cmd = Command::new(program);
    cmd.args(args);
    let joined = std::env::join_paths(lib_dirs.iter()).expect("library path");
    cmd.env("LD_LIBRARY_PATH", joined);
    cmd.env_remove("LD_PRELOAD");
    cmd
}

/// A command on the simulated stack, writing ground truth to `truth` and using a private
/// counters segment (`SIMGPU_SESSION`).
pub fn sim_command(program: &Path, args: &[&str], truth: &Path) -> Command {
    let lib = simgpu_lib_dir();
    let mut cmd = command_with_libs(program, args, &[lib.as_path()]);
    cmd.env("SIMGPU_TRUTH", truth);
    let session = truth.file_name().and_then(OsStr::to_str).unwrap_or("tprof-e2e").to_string();
    cmd.env("SIMGPU_SESSION", session);
    for var in ["SIMGPU_KERNEL_NS", "SIMGPU_LINK_GBPS", "SIMGPU_LINK_LATENCY_US", "SIMTRAIN_SLOW_LINK"] {
        cmd.env_remove(var);
    }
    cmd
}

/// The outcome of a finished run.
#[derive(Debug)]
pub struct RunOutput {
    pub status: Option<ExitStatus>,
    /// Exit code, or 128 + signal.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub wall: Duration,
    /// The run was stopped by [`Running::terminate`] or a timeout.
    pub terminated: bool,
}

impl RunOutput {
    pub fn describe(&self) -> String {
        format!(
            "exit code {} after {:.2?}{}\n--- stdout\n{}--- stderr\n{}",
            self.code,
            self.wall,
            if self.terminated { " (terminated)" } else { "" },
            self.stdout,
            self.stderr
        )
    }
    /// Panics with the output unless the run exited 0.
    pub fn assert_ok(&self) -> &Self {
        assert!(self.code == 0, "run failed: {}", self.describe());
        self
    }
    /// The `key=value` fields of simtrain's final line of each rank, by rank.
    pub fn simtrain_summaries(&self) -> BTreeMap<i64, BTreeMap<String, String>> {
        let mut out = BTreeMap::new();
        for line in self.stdout.lines().filter(|l| l.starts_with("simtrain rank=")) {
            let fields: BTreeMap<String, String> = line
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let rank = fields.get("rank").and_then(|r| r.parse().ok()).unwrap_or(-1);
            out.insert(rank, fields);
        }
        out
    }
}

fn exit_code(st: &ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().unwrap_or_else(|| 128 + st.signal().unwrap_or(0))
}

/// A process being run, its stderr lines streamed so a test can wait for one.
pub struct Running {
    child: Child,
    started: Instant,
    stderr_rx: Receiver<String>,
    stderr_seen: Vec<String>,
    stdout_thread: Option<JoinHandle<String>>,
    terminated: bool,
}

impl Running {
    pub fn spawn(mut cmd: Command) -> Running {
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let started = Instant::now();
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
        let mut out = child.stdout.take().expect("stdout");
        let err = child.stderr.take().expect("stderr");
        let stdout_thread = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = out.read_to_string(&mut s);
            s
        });
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines() {
                match line {
                    Ok(l) => {
                        if tx.send(l).is_err() {
                            break;
                        }
                    }
                    Err(_) => break,
                }
            }
        });
        Running {
            child,
            started,
            stderr_rx: rx,
            stderr_seen: Vec::new(),
            stdout_thread: Some(stdout_thread),
            terminated: false,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until a stderr line contains `needle`; false on timeout or when stderr closes.
    pub fn wait_for_stderr(&mut self, needle: &str, timeout: Duration) -> bool {
        if self.stderr_seen.iter().any(|l| l.contains(needle)) {
            return true;
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            match self.stderr_rx.recv_timeout(left) {
                Ok(l) => {
                    let hit = l.contains(needle);
                    self.stderr_seen.push(l);
                    if hit {
                        return true;
                    }
                }
                Err(_) => return false,
            }
        }
    }

    /// Sends SIGTERM (as a job scheduler or `timeout` would).
    pub fn terminate(&mut self) {
        self.terminated = true;
        let _ = Command::new("kill").arg("-TERM").arg(self.child.id().to_string()).status();
    }

    /// Waits up to `timeout`; then SIGTERM, and SIGKILL after 10 more seconds.
    pub fn finish(mut self, timeout: Duration) -> RunOutput {
        let deadline = self.started + timeout;
        let mut status = None;
        let mut killed_at: Option<Instant> = None;
        loop {
            match self.child.try_wait() {
                Ok(Some(st)) => {
                    status = Some(st);
                    break;
                }
                Ok(None) => {}
                Err(_) => break,
            }
            let now = Instant::now();
            if now > deadline && !self.terminated {
                self.terminate();
                killed_at = Some(now);
            }
            if let Some(t) = killed_at {
                if now > t + Duration::from_secs(10) {
                    let _ = self.child.kill();
                }
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let wall = self.started.elapsed();
        let stdout = self.stdout_thread.take().map(|h| h.join().unwrap_or_default()).unwrap_or_default();
        while let Ok(l) = self.stderr_rx.recv_timeout(Duration::from_secs(2)) {
            self.stderr_seen.push(l);
        }
        let mut stderr = self.stderr_seen.join("\n");
        stderr.push('\n');
        RunOutput {
            code: status.as_ref().map(exit_code).unwrap_or(-1),
            status,
            stdout,
            stderr,
            wall,
            terminated: self.terminated,
        }
    }
}

/// Runs to completion (SIGTERM after `timeout`).
pub fn run(cmd: Command, timeout: Duration) -> RunOutput {
    Running::spawn(cmd).finish(timeout)
}

// ------------------------------------------------------------------------------------ ground truth

/// One ground-truth line. Fields absent for a type are `None`.
#[derive(Debug, Clone, Deserialize)]
pub struct TruthRecord {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub pid: i64,
    #[serde(default = "minus_one")]
    pub rank: i64,
    /// The device ordinal; None where the line has none (`process` lines carry `"device":-1`).
    #[serde(default, deserialize_with = "negative_is_none")]
    pub device: Option<i64>,
    /// The CUPTI stream id; None where the line has none (`process` lines carry `"stream":-1`).
    #[serde(default, deserialize_with = "negative_is_none")]
    pub stream: Option<u64>,
    #[serde(default)]
    pub start_ns: Option<u64>,
    #[serde(default)]
    pub end_ns: Option<u64>,
    #[serde(default)]
    pub correlation: Option<u64>,
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub grid: Option<[u64; 3]>,
    #[serde(default)]
    pub block: Option<[u64; 3]>,
    #[serde(default)]
    pub bytes: Option<u64>,
    #[serde(default)]
    pub copy_kind: Option<String>,
    #[serde(default)]
    pub host_pinned: Option<bool>,
    #[serde(default)]
    pub op: Option<String>,
    #[serde(default)]
    pub comm: Option<String>,
    #[serde(default)]
    pub seq: Option<u64>,
    #[serde(default)]
    pub nranks: Option<u64>,
    #[serde(default)]
    pub kernel: Option<String>,
    /// Work queued by a graph launch: the graph's and the node's ids, as CUPTI reports them.
    #[serde(default)]
    pub graph_id: Option<u64>,
    #[serde(default)]
    pub graph_node_id: Option<u64>,
    #[serde(default)]
    pub unfinished: bool,
    #[serde(default)]
    pub device_capacity_bytes: Option<u64>,
    #[serde(default)]
    pub link_gbps: Option<f64>,
    #[serde(default)]
    pub link_latency_us: Option<f64>,
    #[serde(default)]
    pub argv: Option<serde_json::Value>,
    /// `cupti_dropped`: the activity records the simulated CUPTI dropped in this process.
    #[serde(default)]
    pub records: Option<u64>,
}

fn minus_one() -> i64 {
    -1
}

/// Truth ids that use -1 for "none" (the `process` line's `device` and `stream`): negative or
/// null -> None.
fn negative_is_none<'de, D: serde::Deserializer<'de>, T: TryFrom<i64>>(d: D) -> Result<Option<T>, D::Error> {
    let v: Option<i64> = serde::Deserialize::deserialize(d)?;
    Ok(v.filter(|v| *v >= 0).and_then(|v| T::try_from(v).ok()))
}

impl TruthRecord {
    pub fn is(&self, kind: &str) -> bool {
        self.kind == kind
    }
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or("")
    }
    pub fn start(&self) -> u64 {
        self.start_ns.unwrap_or(0)
    }
    /// End, or u64::MAX for an unfinished op.
    pub fn end(&self) -> u64 {
        self.end_ns.unwrap_or(u64::MAX)
    }
    pub fn duration_ns(&self) -> Option<u64> {
        Some(self.end_ns?.saturating_sub(self.start_ns?))
    }
    /// A kernel NCCL launched (its GPU side of a collective).
    pub fn is_nccl_kernel(&self) -> bool {
        self.is("kernel") && self.name().to_ascii_lowercase().contains("nccl")
    }
    pub fn overlaps(&self, other: &TruthRecord) -> bool {
        self.start() < other.end() && other.start() < self.end()
    }
}

/// Every ground-truth line of a run, in file order per process.
#[derive(Debug, Default)]
pub struct Truth {
    pub records: Vec<TruthRecord>,
    /// Lines that did not parse (e.g. the last line of a killed process), with their file.
    pub bad_lines: Vec<String>,
    pub files: usize,
}

impl Truth {
    /// Reads `dir/truth-*.jsonl`.
    pub fn load(dir: &Path) -> Truth {
        let mut t = Truth::default();
        let mut entries: Vec<PathBuf> =
            std::fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
        entries.sort();
        for path in entries {
            let fname = path.file_name().and_then(OsStr::to_str).unwrap_or("");
            if !(fname.starts_with("truth-") && fname.ends_with(".jsonl")) {
                continue;
            }
            t.files += 1;
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<TruthRecord>(line) {
                    Ok(r) => t.records.push(r),
                    Err(e) => t.bad_lines.push(format!("{}: {e}: {line}", path.display())),
                }
            }
        }
        t
    }

    pub fn of_kind<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a TruthRecord> + 'a {
        self.records.iter().filter(move |r| r.kind == kind)
    }

    /// Pids that executed GPU work (kernels, copies, memsets or collectives).
    pub fn working_pids(&self) -> BTreeSet<i64> {
        self.records.iter().filter(|r| r.kind != "process").map(|r| r.pid).collect()
    }

    /// Pids that executed GPU work, by rank (rank from the records; -1 when RANK was unset).
    pub fn pid_by_rank(&self) -> BTreeMap<i64, i64> {
        let mut m = BTreeMap::new();
        for r in self.records.iter().filter(|r| r.kind != "process") {
            m.insert(r.rank, r.pid);
        }
        m
    }

    /// The records of one pid, sorted by start time.
    pub fn of_pid(&self, pid: i64) -> Vec<&TruthRecord> {
        let mut v: Vec<&TruthRecord> = self.records.iter().filter(|r| r.pid == pid).collect();
        v.sort_by_key(|r| r.start());
        v
    }

    /// Records of one rank of the given type, sorted by start time.
    pub fn of_rank_kind(&self, rank: i64, kind: &str) -> Vec<&TruthRecord> {
        let mut v: Vec<&TruthRecord> = self.records.iter().filter(|r| r.rank == rank && r.kind == kind).collect();
        v.sort_by_key(|r| r.start());
        v
    }

    /// The `process` line of a pid.
    pub fn process(&self, pid: i64) -> Option<&TruthRecord> {
        self.records.iter().find(|r| r.kind == "process" && r.pid == pid)
    }

    /// A one-line census for assertion messages.
    pub fn summary(&self) -> String {
        let mut by: BTreeMap<(i64, String), usize> = BTreeMap::new();
        for r in &self.records {
            *by.entry((r.pid, r.kind.clone())).or_default() += 1;
        }
        let parts: Vec<String> = by.iter().map(|((p, k), n)| format!("{p}:{k}={n}")).collect();
        format!("{} files, {} bad lines, [{}]", self.files, self.bad_lines.len(), parts.join(" "))
    }
}

/// The median of a list (0 for an empty list).
pub fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Kernel names of simtrain's model (tests/programs/simtrain/model.c), by role.
pub mod simtrain_kernels {
    pub const FLASH_FWD: &str = "_ZN5flash16flash_fwd_kernel";
    pub const FLASH_BWD: &str = "_ZN5flash44flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel";
    pub const AMP_CHECK: &str = "_amp_foreach_non_finite_check_and_unscale_";
    pub const ADAMW: &str = "multi_tensor_apply_kernel";
    pub const TINY_MUL: &str = "BUnaryFunctorIfffNS0_15binary_internal10MulFunctor";
    pub const TINY_FILL: &str = "FillFunctorIfE";
}

#[cfg(test)]
mod tests {
    use super::TruthRecord;

    #[test]
    fn process_truth_line_with_stream_minus_one_parses() {
        let line = r#"{"type":"process","pid":42,"rank":-1,"device":-1,"stream":-1,"start_ns":5,"end_ns":5,"correlation":0,"device_capacity_bytes":85899345920,"link_gbps":100,"link_latency_us":5,"argv":["simtrain"]}"#;
        let r: TruthRecord = serde_json::from_str(line).expect("process line parses");
        assert!(r.is("process"));
        assert_eq!(r.stream, None);
        assert_eq!(r.device, None);
        assert_eq!(r.link_gbps, Some(100.0));
        let k: TruthRecord = serde_json::from_str(
            r#"{"type":"kernel","pid":42,"rank":0,"device":0,"stream":13,"start_ns":1,"end_ns":2,"correlation":7,"name":"k","grid":[1,1,1],"block":[32,1,1]}"#,
        )
        .unwrap();
        assert_eq!(k.stream, Some(13));
        let n: TruthRecord = serde_json::from_str(r#"{"type":"kernel","stream":null}"#).unwrap();
        assert_eq!(n.stream, None);
    }
}
