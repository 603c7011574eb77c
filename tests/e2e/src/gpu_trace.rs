//! Helpers for the gpu-trace end-to-end tests (CUPTI, NCCL, NVTX under the simulated stack):
//! finding libtprof, running a program under it, and reading every ring of a run with times
//! converted to CLOCK_MONOTONIC ns (the ground truth's clock).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use tprof_format::{Decoded, Record, RingReader, StrId, StringTable, TickConverter};

use crate::programs::{repo_root, sim_command};

/// `TPROF_LIB`, else `$CARGO_TARGET_DIR/release/libtprof.so`, else `target/release/libtprof.so`.
/// Panics naming the file and the build command when it is missing.
pub fn tprof_lib() -> PathBuf {
    let p = std::env::var_os("TPROF_LIB").map(PathBuf::from).unwrap_or_else(|| {
        let target =
            std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"));
        target.join("release/libtprof.so")
    });
    assert!(
        p.exists(),
        "libtprof.so not found at {} (run `cargo build --release -p tprof-shim`, or set TPROF_LIB)",
        p.display()
    );
    p
}

/// How libtprof gets into the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Attach {
    Preload,
    Injection,
}

/// A simulated-stack command with libtprof attached, rings written to `out`.
pub fn traced_command(program: &Path, args: &[&str], truth: &Path, out: &Path, attach: Attach) -> Command {
    let mut cmd = sim_command(program, args, truth);
    let lib = tprof_lib();
    match attach {
        Attach::Preload => cmd.env("LD_PRELOAD", &lib),
        Attach::Injection => cmd.env("CUDA_INJECTION64_PATH", &lib),
    };
    cmd.env("TPROF_OUT", out).env("TPROF_RING_MB", "16");
    for var in
        ["TPROF_DISABLE", "TPROF_CUPTI", "TPROF_MODE", "TPROF_STEP_MARKER", "NVTX_INJECTION64_PATH", "TPROF_CUPTI_PATH"]
    {
        cmd.env_remove(var);
    }
    for var in
        ["SIMGPU_CUPTI", "SIMGPU_CUPTI_BUSY", "SIMGPU_CUPTI_DROP_EVERY", "SIMGPU_CUPTI_REFUSE_KIND", "SIMGPU_NO_DRIVER"]
    {
        cmd.env_remove(var);
    }
    cmd
}

/// One process's ring, decoded.
pub struct Ring {
    pub path: PathBuf,
    pub pid: u32,
    pub rank: Option<u32>,
    pub records: Vec<Record>,
    pub strings: StringTable,
    pub conv: TickConverter,
    pub damage: Vec<String>,
}

impl Ring {
    pub fn open(path: &Path) -> Ring {
        let reader = RingReader::open(path).unwrap_or_else(|e| panic!("cannot open ring {}: {e}", path.display()));
        let mut records = Vec::new();
        let mut damage: Vec<String> = reader.damage().iter().map(|d| d.to_string()).collect();
        for item in reader.records() {
            match item {
                Ok(Decoded::Record(r)) => records.push(r),
                Ok(_) => {}
                Err(d) => damage.push(d.to_string()),
            }
        }
        Ring {
            path: path.to_path_buf(),
            pid: reader.header().pid,
            rank: reader.header().rank,
            strings: reader.all_strings(),
            conv: reader.tick_converter(),
            records,
            damage,
        }
    }

    /// Ticks -> CLOCK_MONOTONIC ns.
    pub fn ns(&self, ticks: u64) -> u64 {
        self.conv.to_mono_ns(ticks)
    }

    pub fn name(&self, id: StrId) -> String {
        self.strings.name(id).into_owned()
    }

    pub fn count(&self, pred: impl Fn(&Record) -> bool) -> usize {
        self.records.iter().filter(|r| pred(r)).count()
    }
}

/// Every `*.tprof` ring in `dir`, sorted by rank then pid.
pub fn load_rings(dir: &Path) -> Vec<Ring> {
    let mut paths: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    paths.retain(|p| p.extension().is_some_and(|e| e == "tprof"));
    let mut rings: Vec<Ring> = paths.iter().map(|p| Ring::open(p)).collect();
    rings.sort_by_key(|r| (r.rank, r.pid));
    rings
}

/// A GPU activity from a ring, in monotonic ns.
#[derive(Debug, Clone)]
pub struct GpuOp {
    pub kind: &'static str,
    pub device: u32,
    pub stream: u32,
    pub start: u64,
    pub end: u64,
    pub correlation: u32,
    pub name: String,
    pub bytes: u64,
}

impl GpuOp {
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// Kernel / memcpy / memset records with GPU times (start != 0), in monotonic ns.
pub fn gpu_ops(ring: &Ring) -> Vec<GpuOp> {
    let mut v = Vec::new();
    for r in &ring.records {
        let op = match *r {
            Record::Kernel { device, stream, start, end, correlation, name, .. } if start != 0 => GpuOp {
                kind: "kernel",
                device,
                stream,
                start: ring.ns(start),
                end: ring.ns(end),
                correlation,
                name: ring.name(name),
                bytes: 0,
            },
            Record::Memcpy { device, stream, start, end, correlation, bytes, .. } if start != 0 => GpuOp {
                kind: "memcpy",
                device,
                stream,
                start: ring.ns(start),
                end: ring.ns(end),
                correlation,
                name: String::new(),
                bytes,
            },
            Record::Memset { device, stream, start, end, correlation, bytes, .. } if start != 0 => GpuOp {
                kind: "memset",
                device,
                stream,
                start: ring.ns(start),
                end: ring.ns(end),
                correlation,
                name: String::new(),
                bytes,
            },
            _ => continue,
        };
        v.push(op);
    }
    v.sort_by_key(|o| (o.device, o.stream, o.start));
    v
}

/// Correlation ids of host calls in a ring (API records and NCCL calls).
pub fn host_correlations(ring: &Ring) -> std::collections::HashSet<u32> {
    ring.records
        .iter()
        .filter_map(|r| match *r {
            Record::Api { correlation, .. } | Record::Collective { correlation, .. } => Some(correlation),
            _ => None,
        })
        .collect()
}

/// Checks NVTX push/pop nesting per (thread, domain): returns (pushes, problems).
pub fn nvtx_nesting(ring: &Ring) -> (usize, Vec<String>) {
    let mut depth: BTreeMap<(u32, StrId), i64> = BTreeMap::new();
    let mut last_ts: BTreeMap<u32, u64> = BTreeMap::new();
    let mut problems = Vec::new();
    let mut pushes = 0;
    for r in &ring.records {
        let (tid, key, delta, ts) = match *r {
            Record::NvtxPush { tid, domain, ts, .. } => (tid, (tid, domain), 1, ts),
            Record::NvtxPop { tid, domain, ts } => (tid, (tid, domain), -1, ts),
            _ => continue,
        };
        if delta > 0 {
            pushes += 1;
        }
        let d = depth.entry(key).or_default();
        *d += delta;
        if *d < 0 {
            problems.push(format!("pop without push on thread {tid}"));
            *d = 0;
        }
        let prev = last_ts.entry(tid).or_default();
        if ts < *prev {
            problems.push(format!("NVTX time went backwards on thread {tid}"));
        }
        *prev = ts;
    }
    for ((tid, dom), d) in depth {
        if d != 0 {
            problems.push(format!("thread {tid} domain {} ends at depth {d}", dom.0));
        }
    }
    (pushes, problems)
}
