//! Shared by the export tests: synthetic jobs, the real Kineto traces, running an export, and the
//! numbers tprof itself computes (what every exported file must agree with).
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use regex_lite::Regex;
use tprof_decoder::convert::{feed_all, ConvertOptions};
use tprof_decoder::export::select::Selection;
use tprof_decoder::export::{self, ExportFormat, ExportOptions, ExportReport};
use tprof_decoder::input::{discover, Notes, Source};
use tprof_decoder::model::*;
use tprof_decoder::steps::DEFAULT_STEP_PATTERN;
use tprof_decoder::testkit::SynthJob;

pub fn kineto_dir() -> PathBuf {
    tprof_decoder::testkit::kineto_traces_dir()
}

/// A 4-rank job on 2 hosts with skewed clocks, NVTX steps.
pub fn synth_job(dir: &Path) -> (SynthJob, Vec<PathBuf>) {
    let job = SynthJob {
        ranks: 4,
        ranks_per_host: 2,
        steps: 6,
        kernels_per_step: 8,
        host_skew_ns: vec![0, 3_000_000],
        file_bytes: 4 << 20,
        ..SynthJob::default()
    };
    let files = job.write(dir).expect("synthetic job");
    (job, files)
}

pub fn sources(paths: &[PathBuf]) -> Vec<Source> {
    let args: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    discover(&args, &mut Notes::default()).expect("inputs")
}

pub fn convert_opts() -> ConvertOptions {
    ConvertOptions { threads: 2, progress: false, align_clocks: true }
}

pub fn run_export(inputs: &[PathBuf], format: ExportFormat, out: &Path, selection: Selection) -> ExportReport {
    let opts = ExportOptions {
        format,
        output: out.to_path_buf(),
        selection,
        step_pattern: Regex::new(DEFAULT_STEP_PATTERN).unwrap(),
        convert: convert_opts(),
    };
    export::run(&sources(inputs), &opts).expect("export")
}

/// One GPU activity as tprof decodes it (aligned clocks, as `feed_all` gives them).
#[derive(Debug, Clone, PartialEq)]
pub struct Gpu {
    pub rank: Option<u32>,
    pub kind: &'static str,
    pub name: String,
    pub start: Ns,
    pub end: Ns,
    pub correlation: u64,
    pub stream: u32,
}

/// Everything tprof decodes from the inputs, kept in memory (tests only).
#[derive(Default)]
pub struct Truth {
    pub procs: Vec<ProcessInfo>,
    rank_of: HashMap<ProcId, Option<u32>>,
    pub gpu: Vec<Gpu>,
    pub apis: Vec<Api>,
    pub ranges: Vec<NvtxRange>,
    pub collectives: Vec<Collective>,
    pub counters: Vec<CounterSample>,
}

impl TraceSink for Truth {
    fn handle_process(&mut self, i: &ProcessInfo) {
        self.rank_of.insert(i.id, i.rank);
        self.procs.push(i.clone());
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        let rank = self.rank_of[&k.proc];
        let name = k.name.to_string();
        self.gpu.push(Gpu {
            rank,
            kind: "kernel",
            name,
            start: k.start,
            end: k.end,
            correlation: k.correlation,
            stream: k.stream,
        });
    }
    fn handle_memcpy(&mut self, m: &Memcpy) {
        let rank = self.rank_of[&m.proc];
        self.gpu.push(Gpu {
            rank,
            kind: "memcpy",
            name: String::new(),
            start: m.start,
            end: m.end,
            correlation: m.correlation,
            stream: m.stream,
        });
    }
    fn handle_memset(&mut self, m: &Memset) {
        let rank = self.rank_of[&m.proc];
        self.gpu.push(Gpu {
            rank,
            kind: "memset",
            name: String::new(),
            start: m.start,
            end: m.end,
            correlation: m.correlation,
            stream: m.stream,
        });
    }
    fn handle_api(&mut self, a: &Api) {
        self.apis.push(a.clone());
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.ranges.push(r.clone());
    }
    fn handle_collective(&mut self, c: &Collective) {
        self.collectives.push(c.clone());
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.counters.push(c.clone());
    }
}

pub fn truth(inputs: &[PathBuf]) -> Truth {
    let mut t = Truth::default();
    feed_all(&sources(inputs), &mut t, &convert_opts()).expect("decode");
    t
}

impl Truth {
    pub fn kernels(&self) -> impl Iterator<Item = &Gpu> {
        self.gpu.iter().filter(|g| g.kind == "kernel")
    }
    pub fn kernel_total_ns(&self) -> u64 {
        self.kernels().map(|k| k.end - k.start).sum()
    }
    /// Distinct launches (API calls, NCCL calls; by rank and correlation) whose GPU work was decoded:
    /// what flows must link.
    pub fn linked_launches(&self) -> usize {
        use std::collections::HashSet;
        let gpu: HashSet<(Option<u32>, u64)> =
            self.gpu.iter().filter(|g| g.correlation != 0).map(|g| (g.rank, g.correlation)).collect();
        let mut launches: HashSet<(Option<u32>, u64)> = self
            .apis
            .iter()
            .filter(|a| tprof_decoder::export::display_names::launches_gpu_work(a))
            .map(|a| (self.rank_of[&a.proc], a.correlation))
            .collect();
        launches.extend(
            self.collectives.iter().filter(|c| c.correlation != 0).map(|c| (self.rank_of[&c.proc], c.correlation)),
        );
        launches.intersection(&gpu).count()
    }
}

#[test]
#[ignore = "writes a synthetic job to $TPROF_SYNTH_OUT (size: TPROF_SYNTH_STEPS / _RANKS / _KERNELS)"]
fn write_synthetic_job() {
    let dir = PathBuf::from(std::env::var("TPROF_SYNTH_OUT").unwrap_or_else(|_| "/tmp/tprof-synth".into()));
    std::fs::create_dir_all(&dir).unwrap();
    let env = |k: &str, d: u32| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let steps = env("TPROF_SYNTH_STEPS", 6);
    if steps == 6 {
        synth_job(&dir);
        return;
    }
    // A bigger job for throughput measurements.
    let job = SynthJob {
        ranks: env("TPROF_SYNTH_RANKS", 4),
        steps,
        kernels_per_step: env("TPROF_SYNTH_KERNELS", 100),
        file_bytes: 256 << 20,
        ..SynthJob::default()
    };
    job.write(&dir).unwrap();
}

/// The trace events of a Chrome / Kineto JSON file (gzipped or not), and its origin (ns).
pub fn json_events(path: &Path) -> (Vec<serde_json::Value>, serde_json::Value) {
    use std::io::Read;
    let raw = std::fs::read(path).unwrap();
    let text = if raw.starts_with(&[0x1f, 0x8b]) {
        let mut s = Vec::new();
        flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut s).unwrap();
        s
    } else {
        raw
    };
    let v: serde_json::Value = serde_json::from_slice(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (v["traceEvents"].as_array().unwrap().clone(), v)
}

/// Microseconds (as written) -> ns.
pub fn us_ns(v: &serde_json::Value) -> i64 {
    (v.as_f64().unwrap() * 1000.0).round() as i64
}

/// Sorted (start, end) of `kind` activities in the truth, optionally for some ranks only.
pub fn spans(t: &Truth, kind: &str, keep: impl Fn(&Gpu) -> bool) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> =
        t.gpu.iter().filter(|g| g.kind == kind && keep(g)).map(|g| (g.start as i64, g.end as i64)).collect();
    v.sort_unstable();
    v
}
