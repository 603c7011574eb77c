//! Chrome trace JSON: every kernel once with its duration, flows from each launch to its GPU work,
//! filters keep exactly the selected ranks / window / steps.
mod export_support;

use std::collections::{HashMap, HashSet};

use export_support::*;
use serde_json::Value;
use tprof_decoder::export::select::{IdSet, Selection};
use tprof_decoder::export::ExportFormat;

/// (start, end) of the exported slices of category `cat`, on the global timebase.
fn exported(events: &[Value], origin: i64, cat: &str) -> Vec<(i64, i64)> {
    let mut v: Vec<(i64, i64)> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] == cat)
        .map(|e| {
            let s = origin + us_ns(&e["ts"]);
            (s, s + us_ns(&e["dur"]))
        })
        .collect();
    v.sort_unstable();
    v
}

fn flows(events: &[Value]) -> usize {
    let starts: HashSet<u64> = events.iter().filter(|e| e["ph"] == "s").map(|e| e["id"].as_u64().unwrap()).collect();
    let ends: HashSet<u64> = events.iter().filter(|e| e["ph"] == "f").map(|e| e["id"].as_u64().unwrap()).collect();
    starts.intersection(&ends).count()
}

#[test]
fn synthetic_job_every_kernel_once_with_flows() {
    let d = tempfile::tempdir().unwrap();
    let (job, files) = synth_job(d.path());
    let t = truth(&files);
    let out = d.path().join("out/trace.json.gz");
    let report = run_export(&files, ExportFormat::Chrome, &out, Selection::default());
    assert_eq!(report.decode.processes.len(), 4);
    let (events, top) = json_events(&out);
    let origin = top["otherData"]["tprof_origin_ns"].as_i64().unwrap();
    assert_eq!(exported(&events, origin, "kernel"), spans(&t, "kernel", |_| true));
    let n_kernels = (job.ranks * job.steps * (job.kernels_per_step + 1)) as usize;
    assert_eq!(t.kernels().count(), n_kernels);
    // One flow per launch (API launches and NCCL calls), each ending on a kernel.
    assert_eq!(flows(&events), t.linked_launches());
    assert_eq!(t.linked_launches(), n_kernels);
    // Processes named per rank with host; streams named.
    let names: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "process_name")
        .map(|e| e["args"]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"rank 2 · host1 · pid 1002"), "{names:?}");
    assert!(events.iter().any(|e| e["name"] == "thread_name" && e["args"]["name"] == "GPU 0 stream 9"));
    assert!(events.iter().any(|e| e["ph"] == "X" && e["name"] == "gemm(float*, float*, float*, int)"));
    assert_eq!(
        report.written.events as usize,
        events.iter().filter(|e| matches!(e["ph"].as_str(), Some("X" | "C" | "i" | "b"))).count()
    );
}

#[test]
fn real_kineto_trace_round_trips_its_kernels() {
    let path = kineto_dir().join("nccl_parser_config_nccl_data.json.gz");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("k.json");
    run_export(std::slice::from_ref(&path), ExportFormat::Chrome, &out, Selection::default());
    let t = truth(&[path]);
    let (events, top) = json_events(&out);
    let origin = top["otherData"]["tprof_origin_ns"].as_i64().unwrap();
    // Imported times stay on the trace's own timebase (~4.5e12 us here), where a double holds
    // the microseconds to about a nanosecond: compare within 1 ns.
    for (cat, kind) in [("kernel", "kernel"), ("gpu_memcpy", "memcpy"), ("gpu_memset", "memset")] {
        let got = exported(&events, origin, cat);
        let want = spans(&t, kind, |_| true);
        assert_eq!(got.len(), want.len(), "{cat}");
        for (g, w) in got.iter().zip(&want) {
            assert!((g.0 - w.0).abs() <= 1 && (g.1 - w.1).abs() <= 1, "{cat}: {g:?} vs {w:?}");
        }
    }
    assert_eq!(t.kernels().count(), 2700);
    assert_eq!(flows(&events), t.linked_launches());
    assert!(t.linked_launches() > 3000);
}

#[test]
fn filters_keep_exactly_the_selection() {
    let d = tempfile::tempdir().unwrap();
    let (job, files) = synth_job(d.path());
    let t = truth(&files);
    let rank_of_pid = |events: &[Value]| -> HashMap<u64, u64> {
        events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| {
                let label = e["args"]["name"].as_str().unwrap();
                let r = label.trim_start_matches("rank ").split(' ').next().unwrap().parse().unwrap();
                (e["pid"].as_u64().unwrap(), r)
            })
            .collect()
    };

    // Ranks.
    let out = d.path().join("ranks.json");
    let sel = Selection { ranks: Some(IdSet::parse("1,3").unwrap()), ..Selection::default() };
    run_export(&files, ExportFormat::Chrome, &out, sel);
    let (events, top) = json_events(&out);
    let origin = top["otherData"]["tprof_origin_ns"].as_i64().unwrap();
    let ranks: HashSet<u64> = rank_of_pid(&events).values().copied().collect();
    assert_eq!(ranks, HashSet::from([1, 3]));
    let keep = |g: &Gpu| matches!(g.rank, Some(1 | 3));
    assert_eq!(exported(&events, origin, "kernel"), spans(&t, "kernel", keep));

    // Time window, relative to the first event of the job.
    let first = t
        .gpu
        .iter()
        .map(|g| g.start)
        .chain(t.apis.iter().map(|a| a.start))
        .chain(t.ranges.iter().map(|r| r.start))
        .min()
        .unwrap();
    let (from, to) = (2_000_000u64, 4_500_000u64);
    let out = d.path().join("window.json");
    let sel = Selection { from: Some(from), to: Some(to), ..Selection::default() };
    let report = run_export(&files, ExportFormat::Chrome, &out, sel);
    assert!(report.filtered_out > 0);
    let (events, top) = json_events(&out);
    let origin = top["otherData"]["tprof_origin_ns"].as_i64().unwrap();
    let (lo, hi) = (first + from, first + to);
    let want = spans(&t, "kernel", |g| g.start <= hi && g.end >= lo);
    assert!(!want.is_empty() && want.len() < t.kernels().count());
    assert_eq!(exported(&events, origin, "kernel"), want);

    // Steps 2-3 of every rank (NVTX `step` ranges, numbered 0.. per rank).
    let out = d.path().join("steps.json");
    let sel = Selection { steps: Some(IdSet::parse("2-3").unwrap()), ..Selection::default() };
    run_export(&files, ExportFormat::Chrome, &out, sel);
    let (events, top) = json_events(&out);
    let origin = top["otherData"]["tprof_origin_ns"].as_i64().unwrap();
    let mut steps: HashMap<Option<u32>, Vec<(u64, u64)>> = HashMap::new();
    let proc_rank: HashMap<_, _> = t.procs.iter().map(|p| (p.id, p.rank)).collect();
    for r in t.ranges.iter().filter(|r| &*r.name == "step") {
        steps.entry(proc_rank[&r.proc]).or_default().push((r.start, r.end));
    }
    let window = |rank: Option<u32>| {
        let mut v = steps[&rank].clone();
        v.sort_unstable();
        (v[2].0, v[3].1)
    };
    let want = spans(&t, "kernel", |g| {
        let (lo, hi) = window(g.rank);
        g.start <= hi && g.end >= lo
    });
    assert_eq!(want.len() as u32, job.ranks * 2 * (job.kernels_per_step + 1));
    assert_eq!(exported(&events, origin, "kernel"), want);
}
