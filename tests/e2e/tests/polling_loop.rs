//! A program that polls for completion (`cudaStreamQuery` / `cudaEventQuery` until the kernel is
//! done, hundreds of thousands of calls) under the shim with the default per-thread buffer: every
//! kernel reaches the ring and the summary, nothing is dropped, and the polls keep their true call
//! count (identical repeats recorded as `ApiRepeat` records). Needs: `cargo build --release`,
//! `make -C tests/simgpu`, `cc`.

use std::process::Command;

use tprof_e2e::shim::*;
use tprof_format::{Record, RingReader};

const KERNELS: usize = 364;

fn polling_loop_keeps_every_kernel(mode: &str, query: &str) {
    let dir = temp_dir(&format!("poll-{mode}"));
    let prog = compile("poll_loop", &dir, Link::SimCudart);
    let kernels = KERNELS.to_string();
    // 300 us kernels: thousands of polls per kernel, far more calls than the buffer holds.
    let r = RunSpec::new(&prog, &[&kernels, mode], simgpu_dir())
        .env("TPROF_RING_MB", "4")
        .env("SIMGPU_LAUNCH_NS", "0")
        .env("SIMGPU_KERNEL_NS", "poll_kernel=300000")
        .run(&format!("poll-{mode}"));
    assert_eq!(r.code(), Some(0), "poll_loop {mode} failed: {}", r.stderr());
    let polls: u64 = r
        .stdout()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("polls="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("poll_loop printed no poll count: {}", r.stdout()));
    assert!(polls > 20_000, "{mode}: only {polls} polls: the loop does not outrun the 16384-record buffer");

    let rings = read_rings(&r.out_dir);
    assert_eq!(rings.len(), 1, "{mode}: one ring expected");
    let ring = &rings[0];
    let stats = RingReader::open(&ring.path).expect("ring").stats();
    assert_eq!(stats.dropped_events, 0, "{mode}: the shim dropped events");

    let kernels: Vec<_> =
        ring.records.iter().filter(|r| matches!(r, Record::Kernel { start, end, .. } if end > start)).collect();
    assert_eq!(kernels.len(), KERNELS, "{mode}: kernels with GPU times in the ring");

    // Every poll is in the ring: one Api record per run's first call, the repeats counted.
    let mut recorded = 0u64;
    for rec in &ring.records {
        match *rec {
            Record::Api { name, .. } if ring.name(name) == query => recorded += 1,
            Record::ApiRepeat { name, calls, start, end, busy, .. } => {
                assert!(end >= start && busy <= end - start, "{mode}: repeat run busy {busy} outside {start}..{end}");
                if ring.name(name) == query {
                    recorded += calls;
                } else {
                    panic!("{mode}: unexpected repeated call {}", ring.name(name));
                }
            }
            _ => {}
        }
    }
    assert_eq!(recorded, polls, "{mode}: {query} calls in the ring");

    let out = Command::new(tprof_e2e::diagnose::tprof_bin())
        .arg("summary")
        .arg(&r.out_dir)
        .arg("--json")
        .output()
        .expect("run tprof summary");
    assert!(out.status.success(), "tprof summary failed: {}", String::from_utf8_lossy(&out.stderr));
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).expect("summary JSON");
    let kernel_count: u64 = s["kernels"].as_array().unwrap().iter().map(|k| k["count"].as_u64().unwrap()).sum();
    assert_eq!(kernel_count, KERNELS as u64, "{mode}: kernels in the summary");
    let api = s["api"].as_array().unwrap().iter().find(|a| a["name"] == query).expect("query row in the summary");
    assert_eq!(api["count"].as_u64(), Some(polls), "{mode}: {query} count in the summary");
    assert!(api["total_ns"].as_u64().unwrap() > 0, "{mode}: {query} time in the summary");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(r.out_dir.parent().unwrap());
}

#[test]
fn stream_query_loop_keeps_every_kernel_and_counts_every_poll() {
    polling_loop_keeps_every_kernel("stream", "cudaStreamQuery");
}

#[test]
fn event_query_loop_keeps_every_kernel_and_counts_every_poll() {
    polling_loop_keeps_every_kernel("event", "cudaEventQuery");
}
