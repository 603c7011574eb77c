//! Helpers for the production-mode tests (capture windows, `tprof ctl`, flight recorder, metrics):
//! running simtrain through `tprof run`, reading rings back with their capture markers.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use tprof_format::{Decoded, MarkerKind, Record, RingReader, StringTable, TickConverter};

use crate::programs::{repo_root, require_mock_libs, require_program, sim_command, simtrain_libs};

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"))
}

/// `TPROF_BIN`, else `$CARGO_TARGET_DIR/release/tprof`; panics naming the build command when missing.
pub fn tprof_bin() -> PathBuf {
    let p = std::env::var_os("TPROF_BIN").map(PathBuf::from).unwrap_or_else(|| target_dir().join("release/tprof"));
    assert!(
        p.exists(),
        "tprof not found at {} (run `cargo build --release -p tprof-decoder`, or set TPROF_BIN)",
        p.display()
    );
    p
}

/// `TPROF_LIB`, else `$CARGO_TARGET_DIR/release/libtprof.so`; panics naming the build command when missing.
pub fn tprof_lib() -> PathBuf {
    let p =
        std::env::var_os("TPROF_LIB").map(PathBuf::from).unwrap_or_else(|| target_dir().join("release/libtprof.so"));
    assert!(
        p.exists(),
        "libtprof.so not found at {} (run `cargo build --release -p tprof-shim`, or set TPROF_LIB)",
        p.display()
    );
    p
}

/// `tprof run <run_args> -- simtrain <simtrain_args>` on the simulated stack, rings in `out`, ground
/// truth in `truth`. No TPROF_* variable of the caller leaks in.
pub fn simtrain_under_tprof(run_args: &[&str], simtrain_args: &[&str], out: &Path, truth: &Path) -> Command {
    let ranks =
        simtrain_args.windows(2).find(|w| w[0] == "--ranks").and_then(|w| w[1].parse::<usize>().ok()).unwrap_or(1);
    require_mock_libs(&simtrain_libs(ranks));
    let simtrain = require_program("simtrain");
    let lib = tprof_lib();
    let out_s = out.display().to_string();
    let lib_s = lib.display().to_string();
    let sim_s = simtrain.display().to_string();
    let mut args: Vec<&str> = vec!["run", "--out", &out_s, "--lib", &lib_s];
    args.extend_from_slice(run_args);
    args.push("--");
    args.push(&sim_s);
    args.extend_from_slice(simtrain_args);
    let mut cmd = sim_command(&tprof_bin(), &args, truth);
    let vars: Vec<String> = std::env::vars().map(|(k, _)| k).filter(|k| k.starts_with("TPROF_")).collect();
    for k in vars {
        cmd.env_remove(k);
    }
    cmd.env_remove("NVTX_INJECTION64_PATH");
    cmd.env("TPROF_QUIET", "1");
    cmd
}

/// `tprof ctl --out <out> <args>`; returns (exit code, stdout + stderr).
pub fn ctl(out: &Path, args: &[&str]) -> (i32, String) {
    let o = Command::new(tprof_bin())
        .arg("ctl")
        .arg("--out")
        .arg(out)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run tprof ctl: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    (o.status.code().unwrap_or(-1), text)
}

/// Control sockets in `out`, by pid.
pub fn sockets(out: &Path) -> Vec<u32> {
    let mut v: Vec<u32> = std::fs::read_dir(out)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let n = e.file_name().to_string_lossy().into_owned();
                    n.strip_prefix("tprof-")?.strip_suffix(".sock")?.parse().ok()
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Waits until `out` holds at least `n` control sockets whose status answers `ok`.
pub fn wait_for_sockets(out: &Path, n: usize, timeout: Duration) -> Vec<u32> {
    let deadline = Instant::now() + timeout;
    loop {
        let s = sockets(out);
        if s.len() >= n && ctl(out, &["--all", "status"]).0 == 0 {
            return s;
        }
        assert!(Instant::now() < deadline, "only {} control socket(s) in {} after {timeout:?}", s.len(), out.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A capture marker (edge or dump) in monotonic ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Edge {
    pub kind: MarkerKind,
    pub ns: u64,
    pub reason: u64,
}

/// One ring read back, with times in CLOCK_MONOTONIC ns.
pub struct ProdRing {
    pub path: PathBuf,
    pub pid: u32,
    pub rank: Option<u32>,
    pub mode: String,
    pub wrapped: bool,
    pub records: Vec<Record>,
    pub strings: StringTable,
    pub conv: TickConverter,
    pub damage: Vec<String>,
}

impl ProdRing {
    pub fn open(path: &Path) -> ProdRing {
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
        let h = reader.header();
        ProdRing {
            path: path.to_path_buf(),
            pid: h.pid,
            rank: h.rank,
            mode: h.mode.clone(),
            wrapped: reader.stats().flags & tprof_format::header::flags::WRAPPED != 0,
            strings: reader.all_strings(),
            conv: reader.tick_converter(),
            records,
            damage,
        }
    }

    pub fn ns(&self, ticks: u64) -> u64 {
        self.conv.to_mono_ns(ticks)
    }

    /// Capture and dump markers, in ring order.
    pub fn edges(&self) -> Vec<Edge> {
        self.records
            .iter()
            .filter_map(|r| match *r {
                Record::Marker { kind, ts, value, .. }
                    if matches!(kind, MarkerKind::CaptureStart | MarkerKind::CaptureStop | MarkerKind::FlightDump) =>
                {
                    Some(Edge { kind, ns: self.ns(ts), reason: value })
                }
                _ => None,
            })
            .collect()
    }

    /// Closed windows [start, stop] in ns (an unclosed last window ends at `u64::MAX`).
    pub fn windows(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        let mut open: Option<u64> = None;
        for e in self.edges() {
            match e.kind {
                MarkerKind::CaptureStart => open = Some(e.ns),
                MarkerKind::CaptureStop => {
                    if let Some(s) = open.take() {
                        v.push((s, e.ns));
                    }
                }
                _ => {}
            }
        }
        if let Some(s) = open {
            v.push((s, u64::MAX));
        }
        v
    }

    /// Host-side records (API calls, NCCL calls, NVTX) with their times in ns.
    pub fn host_times(&self) -> Vec<(u64, u64)> {
        self.records
            .iter()
            .filter_map(|r| match *r {
                Record::Api { start, end, .. } | Record::Collective { start, end, .. } => {
                    Some((self.ns(start), self.ns(end)))
                }
                Record::NvtxPush { ts, .. } | Record::NvtxPop { ts, .. } => Some((self.ns(ts), self.ns(ts))),
                _ => None,
            })
            .collect()
    }

    /// StepBegin marker values in order.
    pub fn step_numbers(&self) -> Vec<u64> {
        self.records
            .iter()
            .filter_map(|r| match *r {
                Record::Marker { kind: MarkerKind::StepBegin, value, .. } => Some(value),
                _ => None,
            })
            .collect()
    }

    /// Latest timestamp of any timed record (ns).
    pub fn last_ns(&self) -> u64 {
        self.records.iter().filter_map(|r| r.timestamp()).filter(|&t| t != 0).map(|t| self.ns(t)).max().unwrap_or(0)
    }

    /// Earliest timestamp of any timed record (ns).
    pub fn first_ns(&self) -> u64 {
        self.records.iter().filter_map(|r| r.timestamp()).filter(|&t| t != 0).map(|t| self.ns(t)).min().unwrap_or(0)
    }
}

/// Every ring in `dir` of a process that did GPU work (has kernels), sorted by rank.
pub fn working_rings(dir: &Path) -> Vec<ProdRing> {
    let mut paths: Vec<PathBuf> =
        std::fs::read_dir(dir).map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect()).unwrap_or_default();
    paths.retain(|p| p.extension().is_some_and(|e| e == "tprof"));
    let mut rings: Vec<ProdRing> = paths.iter().map(|p| ProdRing::open(p)).collect();
    rings.retain(|r| r.rank.is_some());
    rings.sort_by_key(|r| (r.rank, r.pid));
    rings
}

/// Wall-clock now in ns since the epoch (compare with `TickConverter::to_wall_ns`).
pub fn wall_now_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}
