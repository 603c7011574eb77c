//! Summaries with numbers checked: real Kineto traces (recomputed from the JSON here) and
//! synthetic ring-file jobs (known truth, injected clock skew).

use std::collections::HashMap;
use std::io::Read;
use std::path::PathBuf;

use regex_lite::Regex;
use tprof_decoder::convert::ConvertOptions;
use tprof_decoder::input::{discover, Notes};
use tprof_decoder::steps::{StepSource, DEFAULT_STEP_PATTERN};
use tprof_decoder::summary::{demangle, summarize};
use tprof_decoder::testkit::SynthJob;

fn kineto_dir() -> PathBuf {
    tprof_decoder::testkit::kineto_traces_dir()
}

fn opts() -> ConvertOptions {
    ConvertOptions { threads: 2, progress: false, align_clocks: false }
}

/// Kernel totals per name, recomputed straight from the JSON (ns, rounded as the importer does).
fn kernel_totals(path: &std::path::Path) -> HashMap<String, (u64, u64)> {
    let raw = std::fs::read(path).unwrap();
    let mut s = Vec::new();
    flate2::read::GzDecoder::new(&raw[..]).read_to_end(&mut s).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&s).unwrap();
    let mut out: HashMap<String, (u64, u64)> = HashMap::new();
    for e in v["traceEvents"].as_array().unwrap() {
        if e["cat"] == "kernel" && e["ph"] == "X" {
            let ts = e["ts"].as_f64().unwrap();
            let dur = e["dur"].as_f64().unwrap();
            let ns = ((ts + dur) * 1000.0).round() as u64 - (ts * 1000.0).round() as u64;
            let x = out.entry(e["name"].as_str().unwrap().to_string()).or_default();
            x.0 += 1;
            x.1 += ns;
        }
    }
    out
}

#[test]
fn kineto_traces_summarize_with_their_own_numbers() {
    let dir = kineto_dir();
    let pat = Regex::new(DEFAULT_STEP_PATTERN).unwrap();
    for name in ["trace_filter_sampled_rank-0.json.gz", "nccl_parser_config_nccl_data.json.gz"] {
        let path = dir.join(name);
        let mut notes = Notes::default();
        let sources = discover(&[path.to_str().unwrap()], &mut notes).unwrap();
        let (s, errors) = summarize(&sources, &pat, &opts());
        assert!(errors.is_empty(), "{errors:?}");
        let truth = kernel_totals(&path);
        assert_eq!(s.kernels.len(), truth.len(), "{name}: distinct kernel names");
        for (n, (count, total)) in &truth {
            let row = s.kernels.iter().find(|k| k.name == demangle(n)).unwrap_or_else(|| panic!("{n} missing"));
            assert_eq!(row.count, *count, "{name}: {n}");
            assert_eq!(row.total_ns, *total, "{name}: {n}");
        }
        let r = &s.ranks[0];
        assert!(r.gpu_busy_ns > 0 && r.gpu_busy_ns <= r.span_ns);
        assert_eq!(r.compute_ns + r.communication_ns + r.memory_ns + r.idle_ns, r.span_ns);
        assert!(r.gpu_busy_ns <= s.totals.kernel_ns + 1_000_000_000);
        assert_eq!(r.step_source, Some(StepSource::Nvtx), "{name}: ProfilerStep#N ranges");
        assert!(!s.steps.is_empty());
        assert!(!s.collectives.is_empty(), "{name}: NCCL kernels");
    }
    // The NCCL trace carries collective sizes: 15 allreduces, 6 broadcasts on 2 ranks.
    let path = dir.join("nccl_parser_config_nccl_data.json.gz");
    let sources = discover(&[path.to_str().unwrap()], &mut Notes::default()).unwrap();
    let (s, _) = summarize(&sources, &pat, &opts());
    let ar: u64 = s.collectives.iter().filter(|c| c.op == "AllReduce").map(|c| c.count).sum();
    let bc: u64 = s.collectives.iter().filter(|c| c.op == "Broadcast").map(|c| c.count).sum();
    assert_eq!((ar, bc), (15, 6));
    for c in &s.collectives {
        assert_eq!(c.nranks, 2);
        assert_eq!(c.gpu_timed, c.count);
        let algbw = c.bytes as f64 / c.time_ns as f64;
        assert!((c.busbw_gbps - algbw).abs() < 1e-9, "2 ranks: busbw = algbw for allreduce and broadcast");
    }
}

#[test]
fn synthetic_job_with_skew() {
    let d = tempfile::tempdir().unwrap();
    let job = SynthJob {
        ranks: 4,
        ranks_per_host: 2,
        steps: 6,
        kernels_per_step: 8,
        host_skew_ns: vec![0, 2_345_678],
        ..SynthJob::default()
    };
    job.write(d.path()).unwrap();
    let mut notes = Notes::default();
    let sources = discover(&[d.path().to_str().unwrap()], &mut notes).unwrap();
    assert_eq!(sources.len(), 4);
    let pat = Regex::new(DEFAULT_STEP_PATTERN).unwrap();
    let (s, errors) = summarize(&sources, &pat, &opts());
    assert!(errors.is_empty(), "{errors:?}");
    assert!(s.notes.is_empty(), "{:?}", s.notes);
    assert_eq!(s.totals.ranks, 4);
    // One model event per NVTX range (push + pop records).
    assert_eq!(s.totals.events, 4 * (job.events_per_rank() - 6));
    let gemm = s.kernels.iter().find(|k| k.name.starts_with("gemm(")).unwrap();
    assert_eq!(gemm.count, 4 * 6 * 8);
    assert_eq!(gemm.total_ns, 4 * 6 * 8 * job.kernel_ns);
    // Collectives: 24 allreduces of 64 MiB; time = kernel time; busbw = algbw * 2(n-1)/n.
    assert_eq!(s.collectives.len(), 1);
    let c = &s.collectives[0];
    assert_eq!((c.op.as_str(), c.count, c.bytes, c.nranks), ("AllReduce", 24, 24 * job.allreduce_bytes, 4));
    assert_eq!(c.gpu_timed, 24);
    // Bandwidths come from each allreduce's transfer time (its shortest kernel over the ranks: the
    // others include waiting), so they are at least the all-ranks average.
    assert!((c.busbw_gbps - c.algbw_gbps * 1.5).abs() < 1e-9);
    assert!(c.algbw_gbps >= c.bytes as f64 / c.time_ns as f64 - 1e-9);
    // Steps: 6 NVTX steps per rank; exposed communication = the allreduce (nothing overlaps it).
    assert_eq!(s.steps.len(), 6);
    for r in &s.ranks {
        assert_eq!(r.step_source, Some(StepSource::Nvtx));
        assert_eq!(r.steps.len(), 6);
        for st in &r.steps {
            assert_eq!(st.compute_ns, 8 * job.kernel_ns);
            assert!(st.exposed_comm_ns > 0 && st.exposed_comm_ns == st.communication_ns);
        }
        assert_eq!(r.compute_ns, 6 * 8 * job.kernel_ns);
    }
    // Clock alignment recovers the injected host skew within 1 us.
    let clock = s.clock.as_ref().expect("clock plan");
    let h1 = clock.hosts.iter().find(|h| h.host == "host1").unwrap();
    assert!((h1.offset_ns + 2_345_678).abs() < 1_000, "{clock:?}");
    assert!(clock.residual_max_ns < 1_000, "{clock:?}");
    assert_eq!(clock.matched_collectives, 6);
    // NVTX projection: all GPU work was launched inside `step`.
    let step = s.nvtx.iter().find(|n| n.name == "step").unwrap();
    assert_eq!(step.gpu_ns, s.totals.kernel_ns);
}

#[test]
fn markers_and_missing_ranks() {
    let d = tempfile::tempdir().unwrap();
    let job = SynthJob { ranks: 4, steps: 3, nvtx_steps: false, ..SynthJob::default() };
    let paths = job.write(d.path()).unwrap();
    std::fs::remove_file(&paths[2]).unwrap();
    std::fs::write(d.path().join("README.txt"), "not a trace").unwrap();
    let mut notes = Notes::default();
    let sources = discover(&[d.path().to_str().unwrap()], &mut notes).unwrap();
    assert!(notes.iter().any(|n| n.message.contains("skipped")));
    let (s, _) = summarize(&sources, &Regex::new(DEFAULT_STEP_PATTERN).unwrap(), &opts());
    assert!(s.notes.iter().any(|n| n.contains("missing ranks (1 of 4): 2")), "{:?}", s.notes);
    assert_eq!(s.ranks[0].step_source, Some(StepSource::Markers));
    assert_eq!(s.steps.len(), 3);
}
