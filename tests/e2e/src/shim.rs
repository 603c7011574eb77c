//! Helpers for the shim's CUDA interposition tests: artifact paths (failing with a message naming
//! what is missing), compiling the C programs in `tests/e2e/cprog/`, running a program under the
//! shim, and reading its ring files and simgpu ground truth.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Mutex, Once};

use tprof_format::{Decoded, Record, RingReader};

/// The repository root.
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().expect("repository root")
}

/// Panics with a message naming the missing prerequisite.
pub fn require(path: &Path, what: &str) -> PathBuf {
    assert!(path.exists(), "missing prerequisite: {what} ({}) — build it first", path.display());
    path.to_path_buf()
}

/// libtprof.so: `TPROF_LIB`, else `$CARGO_TARGET_DIR/release/libtprof.so`, else `target/release`.
pub fn tprof_lib() -> PathBuf {
    let p = match std::env::var_os("TPROF_LIB") {
        Some(p) => PathBuf::from(p),
        None => {
            let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or(repo_root().join("target"));
            target.join("release/libtprof.so")
        }
    };
    require(&p, "libtprof.so (cargo build --release -p tprof-shim, or set TPROF_LIB)")
}

/// The simulated GPU stack (`SIMGPU_LIB_DIR`, default `tests/simgpu/build`).
pub fn simgpu_dir() -> PathBuf {
    let d = std::env::var_os("SIMGPU_LIB_DIR").map(PathBuf::from).unwrap_or(repo_root().join("tests/simgpu/build"));
    require(&d.join("libcudart.so.12"), "simulated libcudart.so.12 (make -C tests/simgpu)");
    require(&d.join("libcuda.so.1"), "simulated libcuda.so.1 (make -C tests/simgpu)");
    d
}

/// The programs of `tests/programs` (`SIMGPU_PROGRAMS_DIR`, default `tests/programs/build`).
pub fn programs_dir() -> PathBuf {
    std::env::var_os("SIMGPU_PROGRAMS_DIR").map(PathBuf::from).unwrap_or(repo_root().join("tests/programs/build"))
}

/// NVIDIA's real CUDA 12 runtime from the pip wheel.
pub fn real_cudart_dir() -> PathBuf {
    let d = repo_root().join(".venv/lib/python3.11/site-packages/nvidia/cuda_runtime/lib");
    require(&d.join("libcudart.so.12"), "NVIDIA libcudart.so.12 from the pip wheel (bash scripts/setup-python.sh)");
    d
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// The directories `temp_dir` made in this test process, removed when it exits.
static CREATED: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
/// Set by the panic hook: a test failed, so its directories are kept for inspection.
static FAILED: AtomicBool = AtomicBool::new(false);
static CLEANUP: Once = Once::new();

/// Runs at process exit: removes every directory `temp_dir` made, unless a test failed or
/// `TPROF_KEEP_TRUTH` is set (then it names them).
extern "C" fn remove_temp_dirs() {
    let dirs = std::mem::take(&mut *CREATED.lock().unwrap_or_else(|e| e.into_inner()));
    let keep = FAILED.load(Ordering::Relaxed) || std::env::var_os("TPROF_KEEP_TRUTH").is_some();
    for d in dirs {
        if keep {
            eprintln!("kept {}", d.display());
        } else {
            let _ = std::fs::remove_dir_all(&d);
        }
    }
}

/// A fresh empty directory under the system temp dir, removed when the test process exits (kept
/// when a test failed, for inspection).
pub fn temp_dir(tag: &str) -> PathBuf {
    CLEANUP.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            FAILED.store(true, Ordering::Relaxed);
            previous(info)
        }));
        // SAFETY: atexit only stores the pointer; `remove_temp_dirs` is a plain `extern "C" fn()`
        // that lives for the whole process (a poisoned lock is recovered, errors are ignored).
        unsafe { libc::atexit(remove_temp_dirs) };
    });
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("tprof-e2e-{tag}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    CREATED.lock().unwrap_or_else(|e| e.into_inner()).push(d.clone());
    d
}

/// Which CUDA runtime a C program links against.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Link {
    /// No CUDA library at link time.
    None,
    /// The simulated libcudart.so.12.
    SimCudart,
    /// The simulated libcuda.so.1.
    SimDriver,
    /// The simulated libcudart.so.12 and libcupti.so.12 (a program with its own CUPTI client).
    SimCudartCupti,
    /// NVIDIA's libcudart.so.12.
    RealCudart,
}

/// Compiles `tests/e2e/cprog/<name>.c` into `dir/<name>` with `cc`.
pub fn compile(name: &str, dir: &Path, link: Link) -> PathBuf {
    let src = repo_root().join("tests/e2e/cprog").join(format!("{name}.c"));
    let out = dir.join(name);
    let mut cmd = Command::new("cc");
    cmd.args(["-O2", "-Wall", "-Wextra", "-o"]).arg(&out).arg(&src);
    match link {
        Link::None => {}
        Link::SimCudart => {
            cmd.arg("-L").arg(simgpu_dir()).arg("-l:libcudart.so.12");
        }
        Link::SimDriver => {
            cmd.arg("-L").arg(simgpu_dir()).arg("-l:libcuda.so.1");
        }
        Link::SimCudartCupti => {
            cmd.arg("-L").arg(simgpu_dir()).arg("-l:libcudart.so.12").arg("-l:libcupti.so.12");
        }
        Link::RealCudart => {
            cmd.arg("-L").arg(real_cudart_dir()).arg("-l:libcudart.so.12");
        }
    }
    cmd.args(["-ldl", "-lpthread"]);
    let o = cmd.output().expect("missing prerequisite: a C compiler `cc` on PATH");
    assert!(o.status.success(), "cc {name}.c failed:\n{}", String::from_utf8_lossy(&o.stderr));
    out
}

/// How to run a program.
pub struct RunSpec<'a> {
    pub program: &'a Path,
    pub args: &'a [&'a str],
    /// LD_LIBRARY_PATH.
    pub lib_dir: PathBuf,
    pub preload: bool,
    pub inject: bool,
    pub env: Vec<(String, String)>,
    /// Wrap in `sh -c 'ulimit -f N; exec ...'` (N in 512-byte blocks).
    pub ulimit_f: Option<u64>,
}

/// What a run left behind.
pub struct RunResult {
    pub output: Output,
    pub out_dir: PathBuf,
    pub truth_dir: PathBuf,
}

impl RunResult {
    pub fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.output.stdout).into_owned()
    }
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.output.stderr).into_owned()
    }
    pub fn code(&self) -> Option<i32> {
        self.output.status.code()
    }
}

impl<'a> RunSpec<'a> {
    pub fn new(program: &'a Path, args: &'a [&'a str], lib_dir: PathBuf) -> RunSpec<'a> {
        RunSpec { program, args, lib_dir, preload: true, inject: false, env: Vec::new(), ulimit_f: None }
    }

    pub fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    pub fn run(&self, tag: &str) -> RunResult {
        let base = temp_dir(tag);
        let out_dir = base.join("out");
        let truth_dir = base.join("truth");
        std::fs::create_dir_all(&truth_dir).unwrap();
        let mut cmd = match self.ulimit_f {
            Some(n) => {
                let mut c = Command::new("sh");
                c.arg("-c").arg(format!("ulimit -f {n}; exec \"$0\" \"$@\"")).arg(self.program).args(self.args);
                c
            }
            None => {
                let mut c = Command::new(self.program);
                c.args(self.args);
                c
            }
        };
        cmd.env("LD_LIBRARY_PATH", &self.lib_dir)
            .env("TPROF_OUT", &out_dir)
            .env("TPROF_RING_MB", "16")
            .env("SIMGPU_TRUTH", &truth_dir)
            .env_remove("LD_PRELOAD")
            .env_remove("CUDA_INJECTION64_PATH");
        if self.preload {
            cmd.env("LD_PRELOAD", tprof_lib());
        }
        if self.inject {
            cmd.env("CUDA_INJECTION64_PATH", tprof_lib()).env("TPROF_TEST_INJECT", "1");
        }
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        // A hang (the shim or a mock deadlocking) fails the test, named, instead of stalling CI.
        let run = crate::programs::run(cmd, std::time::Duration::from_secs(180));
        if run.terminated {
            eprintln!("{} killed after 180 s: {}", self.program.display(), run.describe());
        }
        let status = run.status.unwrap_or_else(|| std::os::unix::process::ExitStatusExt::from_raw(9));
        let output = std::process::Output { status, stdout: run.stdout.into_bytes(), stderr: run.stderr.into_bytes() };
        RunResult { output, out_dir, truth_dir }
    }
}

/// One ring file, decoded, names resolved.
pub struct Ring {
    pub path: PathBuf,
    pub records: Vec<Record>,
    pub names: HashMap<u32, String>,
}

impl Ring {
    pub fn name(&self, id: tprof_format::StrId) -> &str {
        self.names.get(&id.0).map(String::as_str).unwrap_or("")
    }

    /// (name, detail, correlation, result, arg) of every Api record.
    pub fn apis(&self) -> Vec<(String, String, u32, i32, u64)> {
        self.records
            .iter()
            .filter_map(|r| match *r {
                Record::Api { name, detail, correlation, result, arg, .. } => {
                    Some((self.name(name).to_string(), self.name(detail).to_string(), correlation, result, arg))
                }
                _ => None,
            })
            .collect()
    }
}

/// Every ring file in `dir`.
pub fn read_rings(dir: &Path) -> Vec<Ring> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    let mut paths: Vec<PathBuf> =
        entries.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "tprof")).collect();
    paths.sort();
    for path in paths {
        let reader = RingReader::open(&path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
        let table = reader.all_strings();
        let mut records = Vec::new();
        let mut names = HashMap::new();
        for item in reader.records().flatten() {
            match item {
                Decoded::Record(r) => records.push(r),
                Decoded::String { id, bytes } => {
                    names.insert(id.0, String::from_utf8_lossy(bytes).into_owned());
                }
                Decoded::Unknown { .. } => {}
            }
        }
        let mut ids: Vec<u32> = Vec::new();
        for r in &records {
            if let Record::Api { name, detail, .. } = r {
                ids.push(name.0);
                ids.push(detail.0);
            }
            if let Record::Kernel { name, .. } | Record::Marker { name, .. } | Record::ApiRepeat { name, .. } = r {
                ids.push(name.0);
            }
        }
        for id in ids {
            names.entry(id).or_insert_with(|| table.name(tprof_format::StrId(id)).into_owned());
        }
        out.push(Ring { path, records, names });
    }
    out
}

/// Every ground-truth line in `dir` (all processes).
pub fn read_truth(dir: &Path) -> Vec<serde_json::Value> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for e in entries.flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap_or_default();
        out.extend(text.lines().filter_map(|l| serde_json::from_str(l).ok()));
    }
    out
}
