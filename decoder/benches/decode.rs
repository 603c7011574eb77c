//! Decoder benchmark (issue 5, "Performance"): generated jobs of N events, timed side by side.
//!
//! ```text
//! cargo bench -p tprof-decoder --bench decode -- [--events 10M,100M] [--ranks 8] [--dir DIR]
//!     [--exports chrome,perfetto,kineto,parquet,folded] [--no-exports] [--hta-events 1M] [--no-hta] [--keep]
//! ```
//!
//! For each size it writes a realistic multi-rank job of ring files (8 ranks on 2 hosts, ~200
//! distinct kernel names on two compute streams, launch API calls, H2D/D2H copies, memsets,
//! NCCL AllReduce/AllGather calls with their kernels on a communication stream, stream syncs, NVTX
//! step / forward / backward / layer ranges; GPU records arrive in CUPTI-like batches after the
//! launches), then runs the `tprof` binary on it as a child process and measures wall time and peak
//! RSS (`/usr/bin/time -v` when present, else by polling the child's VmHWM):
//!
//! - `tprof summary --threads 1` (goal: >= 20 M events/s on one core, peak RSS < 500 MB at 100 M),
//! - `tprof summary` (all cores),
//! - `tprof diagnose` and `tprof report -o PAGE` (all cores; goal for report: a 100 M-event job in
//!   under a minute),
//! - `tprof export --format F` for each format the CLI has (output to a scratch directory that
//!   is deleted right after; at sizes where the output would not fit `--max-export-bytes`, the
//!   JSON formats are skipped and said so).
//!
//! Then, on one Kineto trace (the generated job of `--hta-events`, exported with `--format
//! kineto`), `tprof summary --threads 1` vs Holistic Trace Analysis' `TraceAnalysis(trace_dir)` +
//! `get_temporal_breakdown()` in the same run (python from `.venv/bin/python` or `$PYTHON`), and
//! the same on the real traces in `../shared/data/kineto/` when present. The ratio is
//! HTA time / tprof time (goal: >= 10).
//!
//! "Events" are the ring records written (API calls, kernels, copies, memsets, syncs, collectives,
//! NVTX push/pop/marks, markers), excluding clock pairs and string definitions.
//! Everything generated lives under `--dir` (default `$CARGO_TARGET_DIR/bench-decode` or
//! `target/bench-decode`) and is deleted at the end unless `--keep`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tprof_format::{
    ApiDomain, ClockSource, CollOp, CopyKind, FileHeader, MemoryKind, Record, RingGeometry, RingWriter, StrId, SyncKind,
};

const T0: u64 = 1_700_000_000_000_000_000;
const DISTINCT_KERNELS: u32 = 200;

// ---------------------------------------------------------------------------------------------
// Generator

/// Deterministic xorshift.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

// String ids.
const S_STEP: u32 = 1;
const S_FWD: u32 = 2;
const S_BWD: u32 = 3;
const S_OPT: u32 = 4;
const S_LAYER: u32 = 5;
const S_DOMAIN: u32 = 6;
const S_LAUNCH: u32 = 7;
const S_MEMCPY: u32 = 8;
const S_MEMSET: u32 = 9;
const S_SYNC: u32 = 10;
const S_AR_KERNEL: u32 = 11;
const S_AG_KERNEL: u32 = 12;
const S_THREAD: u32 = 13;
const S_KERNEL0: u32 = 100;

/// Per-rank generation state.
struct Gen<'w> {
    w: &'w mut RingWriter,
    rng: Rng,
    mono0: u64,
    /// Host time (true ns).
    host: u64,
    /// Compute streams' GPU cursors, comm stream cursor.
    gpu: [u64; 2],
    comm: u64,
    corr: u32,
    pending: Vec<Record>,
    events: u64,
    last_sync: u64,
    kernel_ns: Vec<u64>,
    seq: [u64; 2],
    rank: u32,
    ranks: u32,
}

impl Gen<'_> {
    fn mono(&self, t: u64) -> u64 {
        t - T0 + self.mono0
    }
    fn emit(&mut self, r: Record) {
        self.w.append(&r);
        self.events += 1;
    }
    fn clock(&mut self) {
        if self.host - self.last_sync >= 100_000_000 {
            let m = self.mono(self.host);
            self.w.append(&Record::ClockSync { ticks: m, mono_ns: m, wall_ns: self.host });
            self.last_sync = self.host;
        }
    }
    fn push(&mut self, name: u32) {
        let ts = self.mono(self.host);
        self.emit(Record::NvtxPush { tid: 1, domain: StrId(S_DOMAIN), name: StrId(name), ts });
        self.host += 300;
    }
    fn pop(&mut self) {
        let ts = self.mono(self.host);
        self.emit(Record::NvtxPop { tid: 1, domain: StrId(S_DOMAIN), ts });
        self.host += 300;
    }
    /// Flush GPU records as a CUPTI buffer would (batches, after the launches).
    fn flush_gpu(&mut self, force: bool) {
        if force || self.pending.len() >= 256 {
            for r in std::mem::take(&mut self.pending) {
                self.emit(r);
            }
            self.clock();
        }
    }
    fn launch(&mut self, kernel: u32, stream: usize) {
        let api_ns = 3_000 + self.rng.below(3_000);
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let (s, e) = (self.mono(self.host), self.mono(self.host + api_ns));
        let name = StrId(S_KERNEL0 + kernel);
        self.emit(Record::Api {
            tid: 1,
            domain: ApiDomain::Runtime,
            name: StrId(S_LAUNCH),
            start: s,
            end: e,
            result: 0,
            correlation: corr,
            detail: name,
            stream: 7 + stream as u64,
            arg: 0,
        });
        let base = self.kernel_ns[kernel as usize];
        let dur = base + self.rng.below(base / 8 + 1);
        let start = self.gpu[stream].max(self.host + api_ns / 2) + 1_000;
        self.gpu[stream] = start + dur;
        let (ks, ke) = (self.mono(start), self.mono(start + dur));
        self.pending.push(Record::Kernel {
            device: self.rank % 8,
            context: 1,
            stream: 7 + stream as u32,
            start: ks,
            end: ke,
            grid: [128 + kernel, 1, 1],
            block: [256, 1, 1],
            registers: 64,
            shared_mem: 4096,
            correlation: corr,
            name,
            graph_id: 0,
        });
        self.host += api_ns + 500 + self.rng.below(2_000);
        self.flush_gpu(false);
    }
    fn memcpy(&mut self, kind: CopyKind, bytes: u64) {
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let api_ns = 5_000;
        let (s, e) = (self.mono(self.host), self.mono(self.host + api_ns));
        self.emit(Record::Api {
            tid: 1,
            domain: ApiDomain::Runtime,
            name: StrId(S_MEMCPY),
            start: s,
            end: e,
            result: 0,
            correlation: corr,
            detail: StrId(0),
            stream: 7,
            arg: bytes,
        });
        let dur = bytes / 20 + 2_000; // ~20 GB/s
        let start = self.gpu[0].max(self.host) + 1_000;
        self.gpu[0] = start + dur;
        let (gs, ge) = (self.mono(start), self.mono(start + dur));
        self.pending.push(Record::Memcpy {
            device: self.rank % 8,
            context: 1,
            stream: 7,
            start: gs,
            end: ge,
            bytes,
            kind,
            src_kind: if kind == CopyKind::HtoD { MemoryKind::Pinned } else { MemoryKind::Device },
            dst_kind: if kind == CopyKind::HtoD { MemoryKind::Device } else { MemoryKind::Pinned },
            correlation: corr,
        });
        self.host += api_ns + 1_000;
    }
    fn memset(&mut self, bytes: u64) {
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let (s, e) = (self.mono(self.host), self.mono(self.host + 2_000));
        self.emit(Record::Api {
            tid: 1,
            domain: ApiDomain::Runtime,
            name: StrId(S_MEMSET),
            start: s,
            end: e,
            result: 0,
            correlation: corr,
            detail: StrId(0),
            stream: 8,
            arg: bytes,
        });
        let start = self.gpu[1].max(self.host) + 1_000;
        let dur = bytes / 200 + 1_000;
        self.gpu[1] = start + dur;
        let (gs, ge) = (self.mono(start), self.mono(start + dur));
        self.pending.push(Record::Memset {
            device: self.rank % 8,
            context: 1,
            stream: 8,
            start: gs,
            end: ge,
            bytes,
            value: 0,
            dst_kind: MemoryKind::Device,
            correlation: corr,
        });
        self.host += 3_000;
    }
    fn collective(&mut self, op: CollOp, bytes: u64) {
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let which = (op == CollOp::AllGather) as usize;
        let seq = self.seq[which];
        self.seq[which] += 1;
        let (s, e) = (self.mono(self.host), self.mono(self.host + 8_000));
        self.emit(Record::Collective {
            tid: 1,
            op,
            start: s,
            end: e,
            comm: 0xC0FFEE + which as u64,
            rank: self.rank,
            nranks: self.ranks,
            count: bytes / 2,
            datatype: 6,
            bytes,
            peer: -1,
            stream: 9,
            seq,
            result: 0,
            correlation: corr,
            device: self.rank % 8,
        });
        // Waits for the compute stream that produced the gradients, then moves the bytes at ~100 GB/s.
        let dur = bytes / 100 + 10_000;
        let start = self.comm.max(self.gpu[0]).max(self.host + 4_000);
        self.comm = start + dur;
        let (gs, ge) = (self.mono(start), self.mono(start + dur));
        let name = if op == CollOp::AllGather { S_AG_KERNEL } else { S_AR_KERNEL };
        self.pending.push(Record::Kernel {
            device: self.rank % 8,
            context: 1,
            stream: 9,
            start: gs,
            end: ge,
            grid: [16, 1, 1],
            block: [512, 1, 1],
            registers: 96,
            shared_mem: 0,
            correlation: corr,
            name: StrId(name),
            graph_id: 0,
        });
        self.host += 9_000;
    }
    fn sync(&mut self) {
        let end = self.gpu[0].max(self.gpu[1]).max(self.comm).max(self.host + 2_000);
        let (s, e) = (self.mono(self.host), self.mono(end));
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        self.emit(Record::Sync {
            kind: SyncKind::StreamSynchronize,
            tid: 1,
            context: 1,
            stream: 7,
            event: 0,
            start: s,
            end: e,
            correlation: corr,
            result: 0,
        });
        self.host = end + 1_000;
        let _ = S_SYNC;
    }

    /// One training step: ~1,300 events.
    fn step(&mut self) {
        const LAYERS: u32 = 12;
        const PER_LAYER: u32 = 8;
        self.clock();
        self.push(S_STEP);
        self.memcpy(CopyKind::HtoD, 8 << 20);
        self.push(S_FWD);
        for l in 0..LAYERS {
            self.push(S_LAYER);
            for k in 0..PER_LAYER {
                let kernel = (l * PER_LAYER + k) % 96;
                self.launch(kernel, 0);
            }
            self.pop();
        }
        self.pop();
        self.push(S_BWD);
        for l in (0..LAYERS).rev() {
            self.push(S_LAYER);
            for k in 0..2 * PER_LAYER {
                let kernel = 96 + (l * 2 * PER_LAYER + k) % 96;
                self.launch(kernel, (k % 4 == 3) as usize);
            }
            self.pop();
            if l % 3 == 0 {
                self.collective(CollOp::AllReduce, 32 << 20);
            }
        }
        self.pop();
        self.push(S_OPT);
        for k in 0..8 {
            self.launch(192 + k, 0);
        }
        self.memset(1 << 20);
        self.collective(CollOp::AllGather, 4 << 20);
        self.pop();
        self.memcpy(CopyKind::DtoH, 4096);
        self.flush_gpu(true);
        self.sync();
        self.pop();
        let m = self.mono(self.host);
        self.w.commit(m);
    }
}

/// Writes `ranks` ring files holding about `events` events in all; returns (paths, events, bytes).
fn generate(dir: &Path, events: u64, ranks: u32, threads: usize) -> (Vec<PathBuf>, u64, u64) {
    std::fs::create_dir_all(dir).expect("create the bench directory");
    let per_rank = events / ranks as u64;
    let work: Vec<u32> = (0..ranks).collect();
    let results: Vec<(PathBuf, u64, u64)> = std::thread::scope(|s| {
        let chunks: Vec<Vec<u32>> =
            (0..threads).map(|t| work.iter().copied().skip(t).step_by(threads).collect()).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|mine| {
                s.spawn(move || mine.into_iter().map(|r| write_rank(dir, r, ranks, per_rank)).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("generator thread")).collect()
    });
    let mut out = results;
    out.sort();
    let total = out.iter().map(|r| r.1).sum();
    let bytes = out.iter().map(|r| r.2).sum();
    (out.into_iter().map(|r| r.0).collect(), total, bytes)
}

fn write_rank(dir: &Path, rank: u32, ranks: u32, events: u64) -> (PathBuf, u64, u64) {
    let host = rank / 4;
    let mono0 = 1_000_000_000_000u64 * (host as u64 + 1);
    let header = FileHeader {
        pid: 2000 + rank,
        ppid: 1,
        hostname: format!("node{host}"),
        cmdline: vec!["train.py".into(), format!("--rank={rank}")],
        rank: Some(rank),
        local_rank: Some(rank % 4),
        world_size: Some(ranks),
        job_id: Some("bench-job".into()),
        start_wall_ns: T0,
        start_mono_ns: mono0,
        start_ticks: mono0,
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        mode: "full".into(),
        writer: "bench".into(),
        ..FileHeader::default()
    };
    let path = dir.join(tprof_format::ring_file_name(&header.hostname, Some(rank), header.pid));
    // ~14.5 B/event measured; room so the ring never wraps.
    let geom = RingGeometry::for_total_bytes(events * 17 + (4 << 20));
    let mut w = RingWriter::create(&path, header, geom).expect("create ring file");
    for (id, s) in [
        (S_STEP, "step"),
        (S_FWD, "forward"),
        (S_BWD, "backward"),
        (S_OPT, "optimizer"),
        (S_LAYER, "transformer_layer"),
        (S_DOMAIN, "app"),
        (S_LAUNCH, "cudaLaunchKernel"),
        (S_MEMCPY, "cudaMemcpyAsync"),
        (S_MEMSET, "cudaMemsetAsync"),
        (S_SYNC, "cudaStreamSynchronize"),
        (S_AR_KERNEL, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"),
        (S_AG_KERNEL, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"),
        (S_THREAD, "pt_main_thread"),
    ] {
        w.define_string(StrId(id), s);
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ (rank as u64 + 1));
    let families =
        ["gemm_bf16_tn", "flash_fwd", "flash_bwd", "layer_norm", "softmax", "gelu", "adam_step", "elementwise"];
    let mut kernel_ns = Vec::new();
    for k in 0..DISTINCT_KERNELS {
        let f = families[(k % families.len() as u32) as usize];
        let name = format!("_ZN7cutlass6KernelI{}{}_{}_kernelEEvNT_6ParamsE", 12 + f.len() + 5, f, k);
        w.define_string(StrId(S_KERNEL0 + k), &name);
        kernel_ns.push(2_000 + rng.below(60_000));
    }
    w.append(&Record::ThreadName { tid: 1, name: StrId(S_THREAD) });
    let m0 = mono0;
    w.append(&Record::ClockSync { ticks: m0, mono_ns: m0, wall_ns: T0 });
    let start = T0 + 1_000_000 + rank as u64 * 700;
    let mut g = Gen {
        w: &mut w,
        rng,
        mono0,
        host: start,
        gpu: [start; 2],
        comm: start,
        corr: 1,
        pending: Vec::with_capacity(512),
        events: 1,
        last_sync: start,
        kernel_ns,
        seq: [0; 2],
        rank,
        ranks,
    };
    while g.events < events {
        g.step();
    }
    let (written, end) = (g.events, g.host);
    let m = end - T0 + mono0;
    w.append(&Record::ClockSync { ticks: m, mono_ns: m, wall_ns: end });
    w.close(m).expect("close ring file");
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    (path, written, bytes)
}

// ---------------------------------------------------------------------------------------------
// Measuring child processes

struct Run {
    secs: f64,
    /// User + system CPU seconds (from `/usr/bin/time -v`), when known.
    cpu: Option<f64>,
    peak_rss_kb: Option<u64>,
    ok: bool,
    stderr: String,
}

fn time_v() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/bin/time");
    let ok = Command::new(&p)
        .args(["-v", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(p)
}

fn vm_hwm_kb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `prog args`, stdout discarded; wall time and peak RSS.
fn measure(prog: &Path, args: &[String], env: &[(&str, &str)]) -> Run {
    let tv = time_v();
    let mut cmd = match &tv {
        Some(t) => {
            let mut c = Command::new(t);
            c.arg("-v").arg(prog);
            c
        }
        None => Command::new(prog),
    };
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t0 = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Run { secs: 0.0, cpu: None, peak_rss_kb: None, ok: false, stderr: e.to_string() },
    };
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut polled: Option<u64> = None;
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st;
        }
        if tv.is_none() {
            if let Some(kb) = vm_hwm_kb(child.id()) {
                polled = Some(polled.unwrap_or(0).max(kb));
            }
        }
        std::thread::sleep(Duration::from_millis(if tv.is_some() { 2 } else { 5 }));
    };
    let secs = t0.elapsed().as_secs_f64();
    let err = reader.join().unwrap_or_default();
    let peak = match tv {
        Some(_) => err
            .lines()
            .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
            .and_then(|v| v.trim().parse().ok()),
        None => polled,
    };
    let ok = status.success() && !err.contains("Command exited with non-zero status");
    let field = |name: &str| -> Option<f64> {
        err.lines().find_map(|l| l.trim().strip_prefix(name)).and_then(|v| v.trim().parse().ok())
    };
    let cpu = match (field("User time (seconds):"), field("System time (seconds):")) {
        (Some(u), Some(s)) => Some(u + s),
        _ => None,
    };
    Run { secs, cpu, peak_rss_kb: peak, ok, stderr: err }
}

// ---------------------------------------------------------------------------------------------
// Options and main

struct Opts {
    sizes: Vec<u64>,
    ranks: u32,
    dir: PathBuf,
    exports: Option<Vec<String>>,
    hta_events: u64,
    hta: bool,
    keep: bool,
    max_export_bytes: u64,
}

fn parse_count(s: &str) -> u64 {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1e3),
        Some('m' | 'M') => (&s[..s.len() - 1], 1e6),
        Some('g' | 'G') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    (num.parse::<f64>().unwrap_or_else(|_| panic!("bad count '{s}'")) * mul) as u64
}

fn parse_opts() -> Opts {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target"));
    let mut o = Opts {
        sizes: vec![10_000_000],
        ranks: 8,
        dir: target.join("bench-decode"),
        exports: None,
        hta_events: 1_000_000,
        hta: true,
        keep: false,
        max_export_bytes: 4 << 30,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--events" => o.sizes = val().split(',').map(parse_count).collect(),
            "--ranks" => o.ranks = val().parse().expect("--ranks N"),
            "--dir" => o.dir = PathBuf::from(val()),
            "--exports" => o.exports = Some(val().split(',').map(str::to_string).collect()),
            "--no-exports" => o.exports = Some(Vec::new()),
            "--hta-events" => o.hta_events = parse_count(&val()),
            "--no-hta" => o.hta = false,
            "--keep" => o.keep = true,
            "--max-export-bytes" => o.max_export_bytes = parse_count(&val()),
            "--bench" => {}
            other => panic!("unknown argument {other} (see the header of decoder/benches/decode.rs)"),
        }
    }
    o
}

fn tprof_bin() -> PathBuf {
    std::env::var_os("TPROF_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tprof")))
}

/// Export formats the CLI knows (from `tprof export --help`).
fn cli_formats(bin: &Path) -> Vec<String> {
    let out = Command::new(bin).args(["export", "--help"]).output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
    ["chrome", "perfetto", "kineto", "parquet", "folded"]
        .iter()
        .filter(|f| text.contains(*f))
        .map(|f| f.to_string())
        .collect()
}

fn dir_bytes(p: &Path) -> u64 {
    if p.is_file() {
        return std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    }
    std::fs::read_dir(p).map(|rd| rd.flatten().map(|e| dir_bytes(&e.path())).sum()).unwrap_or(0)
}

fn mb(kb: Option<u64>) -> String {
    kb.map(|k| format!("{:.0} MB", k as f64 / 1024.0)).unwrap_or_else(|| "?".into())
}

struct Row {
    what: String,
    events: u64,
    run: Run,
    note: String,
}

fn print_row(r: &Row) {
    let rate = |t: f64| if r.run.ok && t > 0.0 { format!("{:.1}", r.events as f64 / t / 1e6) } else { "-".into() };
    println!(
        "| {:<38} | {:>9.1} M | {:>8.2} s | {:>8} | {:>9} | {:>12} | {:>9} | {}",
        r.what,
        r.events as f64 / 1e6,
        r.run.secs,
        r.run.cpu.map(|c| format!("{c:.2} s")).unwrap_or_else(|| "?".into()),
        rate(r.run.secs),
        rate(r.run.cpu.unwrap_or(0.0)),
        mb(r.run.peak_rss_kb),
        if r.run.ok { r.note.clone() } else { format!("FAILED: {}", last_line(&r.run.stderr)) }
    );
}

fn last_line(s: &str) -> String {
    s.lines()
        .rfind(|l| l.starts_with("tprof") || l.contains("error") || l.contains("panicked"))
        .unwrap_or("")
        .to_string()
}

/// Estimated output bytes per event of each format (to skip exports that would not fit on disk).
fn export_bytes_per_event(f: &str) -> u64 {
    match f {
        "chrome" | "kineto" => 260,
        "perfetto" => 40,
        "parquet" => 12,
        _ => 0,
    }
}

fn hta_python() -> Option<PathBuf> {
    let cands: Vec<PathBuf> = std::env::var_os("PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python")), PathBuf::from("python3")])
        .collect();
    cands.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import hta"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
}

const HTA_SCRIPT: &str = r#"
import sys, time, logging, json
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
t1 = time.perf_counter()
df = a.get_temporal_breakdown(visualize=False)
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "breakdown": t2 - t1, "ranks": len(df)}))
"#;

/// HTA load + temporal breakdown (seconds, measured inside python, import time excluded) and the
/// whole process (wall, peak RSS).
fn run_hta(py: &Path, dir: &Path) -> Option<(f64, Run)> {
    let script = std::env::temp_dir().join(format!("tprof-bench-hta-{}.py", std::process::id()));
    std::fs::write(&script, HTA_SCRIPT).ok()?;
    let mut r = measure(py, &[script.display().to_string(), dir.display().to_string()], &[]);
    let out = Command::new(py).arg(&script).arg(dir).output().ok()?;
    let _ = std::fs::remove_file(&script);
    let text = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(text.lines().last()?).ok()?;
    let inner = v["load"].as_f64()? + v["breakdown"].as_f64()?;
    r.ok &= out.status.success();
    Some((inner, r))
}

fn main() {
    let o = parse_opts();
    let bin = tprof_bin();
    assert!(bin.is_file(), "tprof binary not found at {} (set TPROF_BIN)", bin.display());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let formats = match &o.exports {
        Some(v) => v.clone(),
        None => cli_formats(&bin),
    };
    println!(
        "tprof decoder bench: {} ({} cores), {} ranks per job, dir {}",
        bin.display(),
        cores,
        o.ranks,
        o.dir.display()
    );
    println!("peak RSS: {}", if time_v().is_some() { "/usr/bin/time -v" } else { "VmHWM polling" });
    println!();
    println!(
        "| {:<38} | {:>11} | {:>10} | {:>8} | {:>9} | {:>12} | {:>9} | note",
        "command", "events", "wall", "cpu", "M ev/s", "M ev/cpu-s", "peak RSS"
    );
    println!("|{:-<40}|{:-<13}|{:-<12}|{:-<10}|{:-<11}|{:-<14}|{:-<11}|------", "", "", "", "", "", "", "");
    println!("(M ev/s = events / wall seconds; M ev/cpu-s = events / (user + sys) seconds, the one-core rate on a shared machine)");
    let mut rows = Vec::new();
    for &n in &o.sizes {
        let job = o.dir.join(format!("job-{}", n));
        let _ = std::fs::remove_dir_all(&job);
        let t0 = Instant::now();
        let (_paths, events, bytes) = generate(&job, n, o.ranks, cores.min(o.ranks as usize));
        let gen_secs = t0.elapsed().as_secs_f64();
        println!(
            "| {:<38} | {:>9.1} M | {:>8.2} s | {:>8} | {:>9.1} | {:>12} | {:>9} | {:.0} MB of rings, {:.1} B/event",
            format!("generate ({} ranks)", o.ranks),
            events as f64 / 1e6,
            gen_secs,
            "",
            events as f64 / gen_secs / 1e6,
            "",
            "",
            bytes as f64 / 1e6,
            bytes as f64 / events as f64
        );
        let jobs = job.display().to_string();
        // Drop the page cache's advantage of the freshly written files? No: a user summarizes files
        // that were just written too; both runs see warm files.
        let r = measure(&bin, &["summary".into(), jobs.clone(), "--threads".into(), "1".into()], &[]);
        let row = Row { what: "summary --threads 1".into(), events, run: r, note: String::new() };
        print_row(&row);
        rows.push((n, row));
        let r = measure(&bin, &["summary".into(), jobs.clone()], &[]);
        let row = Row { what: format!("summary (--threads 0 = {cores})"), events, run: r, note: String::new() };
        print_row(&row);
        rows.push((n, row));
        let r = measure(&bin, &["diagnose".into(), jobs.clone()], &[]);
        let row = Row { what: format!("diagnose (--threads 0 = {cores})"), events, run: r, note: String::new() };
        print_row(&row);
        rows.push((n, row));
        let page = o.dir.join("report.html");
        let r = measure(&bin, &["report".into(), jobs.clone(), "-o".into(), page.display().to_string()], &[]);
        let size = dir_bytes(&page);
        let _ = std::fs::remove_file(&page);
        let note = format!("{:.1} MB page", size as f64 / 1e6);
        let row = Row { what: format!("report (--threads 0 = {cores})"), events, run: r, note };
        print_row(&row);
        rows.push((n, row));
        for f in &formats {
            let est = export_bytes_per_event(f) * events;
            if est > o.max_export_bytes {
                println!(
                    "| {:<38} | {:>9.1} M | {:>10} | {:>8} | {:>9} | {:>12} | {:>9} | skipped: ~{:.1} GB of output > --max-export-bytes",
                    format!("export --format {f}"),
                    events as f64 / 1e6,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    est as f64 / 1e9
                );
                continue;
            }
            let out = o.dir.join(format!("out-{f}"));
            let _ = std::fs::remove_dir_all(&out);
            let _ = std::fs::remove_file(&out);
            let out_arg = match f.as_str() {
                "kineto" | "parquet" => out.clone(),
                "chrome" => out.with_extension("json"),
                _ => out.clone(),
            };
            let r = measure(
                &bin,
                &[
                    "export".into(),
                    jobs.clone(),
                    "--format".into(),
                    f.clone(),
                    "-o".into(),
                    out_arg.display().to_string(),
                ],
                &[],
            );
            let size = dir_bytes(&out_arg);
            let _ = std::fs::remove_dir_all(&out_arg);
            let _ = std::fs::remove_file(&out_arg);
            let row = Row {
                what: format!("export --format {f}"),
                events,
                run: r,
                note: format!("{:.0} MB written", size as f64 / 1e6),
            };
            print_row(&row);
            rows.push((n, row));
        }
        if !o.keep {
            let _ = std::fs::remove_dir_all(&job);
        }
    }

    if o.hta {
        println!();
        match hta_python() {
            None => println!("HTA: not installed (pip install HolisticTraceAnalysis into .venv); comparison skipped"),
            Some(py) => hta_compare(&o, &bin, &py, cores),
        }
    }
    if !o.keep {
        let _ = std::fs::remove_dir_all(&o.dir);
    }
}

fn hta_compare(o: &Opts, bin: &Path, py: &Path, cores: usize) {
    println!(
        "tprof summary vs Holistic Trace Analysis (load + temporal breakdown) on the same Kineto traces, python {}",
        py.display()
    );
    println!(
        "| {:<44} | {:>9} | {:>12} | {:>10} | {:>14} | {:>9} | {:>9}",
        "trace", "events", "tprof wall", "tprof RSS", "HTA load+tb", "HTA RSS", "HTA/tprof (wall)"
    );
    println!("|{:-<46}|{:-<11}|{:-<14}|{:-<12}|{:-<16}|{:-<11}|{:-<11}", "", "", "", "", "", "", "");
    let mut traces: Vec<(String, PathBuf, u64)> = Vec::new();
    // The generated job, exported to Kineto JSON (one file per rank).
    let job = o.dir.join("hta-job");
    let _ = std::fs::remove_dir_all(&job);
    let (_, events, _) = generate(&job, o.hta_events, o.ranks, cores.min(o.ranks as usize));
    let kdir = o.dir.join("hta-kineto");
    let _ = std::fs::remove_dir_all(&kdir);
    let r = measure(
        bin,
        &[
            "export".into(),
            job.display().to_string(),
            "--format".into(),
            "kineto".into(),
            "-o".into(),
            kdir.display().to_string(),
        ],
        &[],
    );
    let _ = std::fs::remove_dir_all(&job);
    if r.ok {
        traces.push((format!("generated job exported to kineto ({} ranks)", o.ranks), kdir.clone(), events));
    } else {
        println!("kineto export failed: {}", last_line(&r.stderr));
    }
    // The real traces shipped with the project.
    let shared = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/kineto"));
    if shared.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&shared)
            .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(".json.gz")).collect())
            .unwrap_or_default();
        files.sort();
        for f in files {
            // HTA wants a directory: link the file into one of its own.
            let d = o.dir.join(format!("hta-{}", f.file_stem().unwrap_or_default().to_string_lossy()));
            let _ = std::fs::remove_dir_all(&d);
            if std::fs::create_dir_all(&d).is_ok()
                && std::fs::copy(&f, d.join(f.file_name().unwrap_or_default())).is_ok()
            {
                traces.push((format!("real: {}", f.file_name().unwrap_or_default().to_string_lossy()), d, 0));
            }
        }
    }
    for (name, dir, events) in traces {
        let t = measure(bin, &["summary".into(), dir.display().to_string(), "--threads".into(), "1".into()], &[]);
        let ev = if events > 0 { format!("{:.2} M", events as f64 / 1e6) } else { summary_events(bin, &dir) };
        match run_hta(py, &dir) {
            Some((inner, h)) => println!(
                "| {:<44} | {:>9} | {:>10.3} s | {:>10} | {:>6.2} s ({:.1}) | {:>9} | {:>8.1}x",
                name,
                ev,
                t.secs,
                mb(t.peak_rss_kb),
                inner,
                h.secs,
                mb(h.peak_rss_kb),
                inner / t.secs.max(1e-9)
            ),
            None => {
                println!("| {:<44} | {:>9} | {:>10.3} s | {:>10} | HTA failed", name, ev, t.secs, mb(t.peak_rss_kb))
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!(
        "(HTA time is measured inside python around TraceAnalysis() + get_temporal_breakdown(), imports excluded;"
    );
    println!(" the number in parentheses is the whole python process. tprof time is the whole process.)");
}

fn summary_events(bin: &Path, dir: &Path) -> String {
    let out = Command::new(bin).args(["summary", "--json", "--threads", "1"]).arg(dir).output();
    out.ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v["totals"]["events"].as_u64())
        .map(|e| format!("{:.3} M", e as f64 / 1e6))
        .unwrap_or_else(|| "?".into())
}
