//! `tprof report` on synthetic ring files: the page is self-contained, shows every section, and
//! stays small and fast on a large run (aggregated before drawing).
//!
//! The 100 M-event figure is a manual run: `TPROF_REPORT_BENCH_EVENTS=100000000 cargo test
//! --release -p tprof-decoder --test report_synth -- --ignored --nocapture`.

use std::time::Instant;

use regex_lite::Regex;
use tprof_decoder::convert::ConvertOptions;
use tprof_decoder::input::{discover, Notes};
use tprof_decoder::report::{gather, write};
use tprof_decoder::steps::DEFAULT_STEP_PATTERN;
use tprof_decoder::testkit::SynthJob;

fn render(job: &SynthJob) -> (String, f64, u64) {
    let dir = tempfile::tempdir().unwrap();
    job.write(dir.path()).unwrap();
    let t0 = Instant::now();
    let mut notes = Notes::default();
    let sources = discover(&[dir.path().display().to_string()], &mut notes).unwrap();
    let opts = ConvertOptions { threads: 0, progress: false, align_clocks: true };
    let data = gather(&sources, &Regex::new(DEFAULT_STEP_PATTERN).unwrap(), None, &opts);
    let out = dir.path().join("report.html");
    let w = write(&data, &out).unwrap();
    let secs = t0.elapsed().as_secs_f64();
    (std::fs::read_to_string(&out).unwrap(), secs, w.events)
}

fn assert_self_contained(page: &str) {
    // Anything the browser would fetch: scripts, styles, images, fonts, frames.
    for bad in
        ["src=\"http", "href=\"http", "src=\"//", "href=\"//", "<link", "@import", "url(http", "url(//", "<iframe"]
    {
        assert!(!page.contains(bad), "page refers to something outside itself ({bad})");
    }
}

#[test]
fn small_job_has_every_section() {
    let job = SynthJob { ranks: 4, steps: 20, ..SynthJob::default() };
    let (page, _, events) = render(&job);
    assert!(events > 0);
    assert_self_contained(&page);
    for id in ["verdicts", "efficiency", "steps", "kernels", "nccl", "memory", "counters", "flame", "report-data"] {
        assert!(page.contains(&format!("id=\"{id}\"")), "section {id} missing");
    }
    // The diagnosis ran (headline) and the flame graph has the NVTX step frame over the kernel.
    assert!(page.contains("Useful GPU compute"), "no efficiency headline");
    assert!(page.contains("<svg") && page.contains("step"), "no flame graph");
    assert!(page.contains("AllReduce"), "no NCCL row");
    // One step-timeline lane per rank.
    for r in 0..4 {
        assert!(page.contains(&format!(">r{r}</text>")), "rank r{r} not drawn");
    }
}

#[test]
fn large_job_stays_small_and_fast() {
    // 8 ranks x 2000 steps x (2 x 200 kernel/launch + 4) events = about 6.5 M events.
    let job = SynthJob {
        ranks: 8,
        steps: 2000,
        kernels_per_step: 200,
        kernel_ns: 20_000,
        gap_ns: 2_000,
        file_bytes: 128 << 20,
        ..SynthJob::default()
    };
    let expected = job.events_per_rank() * job.ranks as u64;
    let (page, secs, events) = render(&job);
    eprintln!("report of {events} events: {:.2} MB in {secs:.2} s", page.len() as f64 / 1e6);
    // The summary counts decoded events (its count and synth's differ by one record per step).
    assert!(events * 100 >= expected * 99, "{events} events decoded, {expected} written");
    assert!(page.len() < 10 << 20, "page is {} bytes", page.len());
    // Binned: at most 150 step columns per rank whatever the step count.
    assert!(page.matches("<g><title>r0 step").count() <= 150);
    // Generous bound for a debug build on a shared 2-core machine.
    assert!(secs < 240.0, "took {secs:.1} s");
}

#[test]
#[ignore = "benchmark: set TPROF_REPORT_BENCH_EVENTS (e.g. 100000000) and run with --ignored in release"]
fn bench_report_of_many_events() {
    let target: u64 =
        std::env::var("TPROF_REPORT_BENCH_EVENTS").ok().and_then(|v| v.parse().ok()).unwrap_or(100_000_000);
    let ranks = 8u32;
    let kernels_per_step = 500u32;
    let mut job = SynthJob { ranks, kernels_per_step, kernel_ns: 20_000, gap_ns: 2_000, ..SynthJob::default() };
    job.steps = (target / ranks as u64 / job.events_per_rank().max(1) * job.steps as u64).max(1) as u32;
    job.file_bytes = (job.events_per_rank() * 16).max(64 << 20);
    let (page, secs, events) = render(&job);
    println!("report of {events} events: {:.2} MB in {secs:.1} s", page.len() as f64 / 1e6);
    assert!(page.len() < 10 << 20);
}
