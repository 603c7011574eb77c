//! Recording-core benchmark: measured side by side in one run, printed as ratios.
//!   1. ns to record one API event on the hot path vs a bare clock read (the physical floor);
//!   2. aggregate events/s through the whole pipeline (threads -> writer -> ring) with 1, 2, 4, 8 threads,
//!      and the writer thread's CPU time per event written (steadier than events/s on a busy machine);
//!   3. bytes per event on disk for API and kernel records.
//!
//! Numbers are only meaningful on an otherwise idle machine.
//! Run: `cargo bench -p tprof-shim --bench recording_pipeline`.

use std::hint::black_box;
use std::time::Instant;

use tprof_format::{ApiDomain, Decoded, Record, RingReader, StrId};

fn api(name: StrId, start: u64, end: u64, i: u64) -> Record {
    Record::Api {
        tid: 1,
        domain: ApiDomain::Runtime,
        name,
        start,
        end,
        result: 0,
        correlation: i as u32,
        detail: StrId::NONE,
        stream: 0,
        arg: 0,
    }
}

fn kernel(name: StrId, start: u64, i: u64) -> Record {
    Record::Kernel {
        device: 0,
        context: 1,
        stream: 13,
        start,
        end: start + 180_000 + (i % 5000),
        grid: [388, 1, 1],
        block: [256, 1, 1],
        registers: 128,
        shared_mem: 49152,
        correlation: 0x8000_0000 | i as u32,
        name,
        graph_id: 0,
    }
}

/// Best of several runs of `iters` calls of `f`, in ns per call.
fn ns_per_call(iters: u64, mut f: impl FnMut(u64)) -> f64 {
    let mut best = f64::MAX;
    for _ in 0..7 {
        let t = Instant::now();
        for i in 0..iters {
            f(i);
        }
        best = best.min(t.elapsed().as_nanos() as f64 / iters as f64);
    }
    best
}

/// CPU time (user + system) the writer thread has used so far, in ns (10 ms resolution): a figure that
/// holds on a busy machine, where the events/s end to end depend on what else runs.
fn writer_cpu_ns() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else { return 0 };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim() != "tprof-writer" {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised command: state is field 3, utime and stime fields 14 and 15.
        let fields: Vec<&str> = stat.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
        let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        return (ticks(11) + ticks(12)) * 10_000_000;
    }
    0
}

fn wait_drained() {
    while tprof::record::recorder::pending() > 0 {
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    std::env::set_var("TPROF_OUT", dir.path());
    std::env::set_var("TPROF_RING_MB", "1024");
    std::env::set_var("TPROF_BUFFER_EVENTS", "1048576");
    tprof::lifecycle::ensure_init();
    assert_eq!(tprof::base::switch::state(), tprof::base::switch::ENABLED, "tprof failed to initialise");
    let name = tprof::record::interning::intern("cudaLaunchKernel");
    println!("clock source: {}", tprof::base::ticks::source().name());

    // Touch every buffer page once, so the figures below are steady state, not page faults.
    for i in 0..2_000_000u64 {
        tprof::record::recorder::emit(api(name, i, i + 1, i));
    }
    wait_drained();

    // 1. Hot path vs the bare clock read.
    let iters = 200_000;
    let clock = ns_per_call(iters, |_| {
        black_box(tprof::base::ticks::now());
    });
    let store_only = ns_per_call(iters, |i| tprof::record::recorder::emit(api(name, i, i + 1, i)));
    wait_drained();
    let with_clock = ns_per_call(iters, |i| {
        let t = tprof::base::ticks::now();
        tprof::record::recorder::emit(api(name, t, t + 1, i));
    });
    wait_drained();
    let intercept_like = ns_per_call(iters, |i| {
        let t0 = tprof::base::ticks::now();
        let id = tprof::record::correlation::next_id();
        let t1 = tprof::base::ticks::now();
        tprof::record::recorder::emit(api(name, t0, t1, u64::from(id) + i));
    });
    wait_drained();
    println!("\n== hot path (best of 7 x {iters}) ==");
    println!("bare clock read                         {clock:6.1} ns   (floor)");
    println!("record one event (store only)           {store_only:6.1} ns");
    println!(
        "record one event (clock + store)        {with_clock:6.1} ns   = {:.2}x the bare clock read (goal <= 2x)",
        with_clock / clock
    );
    println!("interposer bookkeeping (2 clocks+id+store) {intercept_like:6.1} ns   (goal <= 30 ns added per call)");

    // 2. Aggregate throughput through the whole pipeline.
    println!("\n== aggregate throughput: threads -> writer thread -> ring (events/s until drained) ==");
    let per_thread_total: u64 = 8_000_000;
    for threads in [1u64, 2, 4, 8] {
        let n = per_thread_total / threads;
        let dropped_before = tprof::record::recorder::total_dropped();
        let cpu_before = writer_cpu_ns();
        let t = Instant::now();
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::spawn(move || {
                    for i in 0..n {
                        let ts = tprof::base::ticks::now();
                        tprof::record::recorder::emit(api(name, ts, ts + 500, i));
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        wait_drained();
        let secs = t.elapsed().as_secs_f64();
        let total = n * threads;
        let dropped = tprof::record::recorder::total_dropped() - dropped_before;
        let written = (total - dropped).max(1);
        println!(
            "{threads} thread(s): {:6.1} M events/s recorded end to end, {dropped} dropped ({:.3}%) (goal >= 20 M/s without drops); writer thread CPU {:5.1} ns/event",
            (total - dropped) as f64 / secs / 1e6,
            dropped as f64 * 100.0 / total as f64,
            (writer_cpu_ns() - cpu_before) as f64 / written as f64
        );
    }

    // 3. Bytes per event on disk.
    let kname = tprof::record::interning::intern("_Z17ampere_bf16_gemm_ntILi128EEvPKT_S2_PS0_");
    let base = tprof::base::ticks::now();
    for i in 0..100_000u64 {
        tprof::record::recorder::emit(kernel(kname, base + i * 200_000, i));
    }
    wait_drained();
    tprof::lifecycle::shutdown_for_tests();
    let path = tprof::base::process::ring_path().unwrap().clone();
    let r = RingReader::open(&path).unwrap();
    let mut api_bytes = 0u64;
    let mut api_n = 0u64;
    let mut k_bytes = 0u64;
    let mut k_n = 0u64;
    let data = std::fs::read(&path).unwrap();
    for c in r.chunks() {
        let mut st = tprof_format::codec::DeltaState::at_chunk_start(c.base_ticks);
        let payload_start = c.offset as usize + tprof_format::chunk::CHUNK_HEADER_BYTES;
        let payload = &data[payload_start..payload_start + c.len as usize];
        let mut pos = 0;
        while pos < payload.len() {
            let (d, size) = tprof_format::codec::decode_one(&payload[pos..], &mut st).unwrap();
            match d {
                Decoded::Record(Record::Api { .. }) => {
                    api_bytes += size as u64;
                    api_n += 1;
                }
                Decoded::Record(Record::Kernel { .. }) => {
                    k_bytes += size as u64;
                    k_n += 1;
                }
                _ => {}
            }
            pos += size;
        }
    }
    let file_bytes: u64 = r.chunks().iter().map(|c| u64::from(c.len) + 32).sum();
    println!("\n== bytes per event on disk ==");
    println!("API record:    {:5.1} B/event", api_bytes as f64 / api_n.max(1) as f64);
    println!("kernel record: {:5.1} B/event", k_bytes as f64 / k_n.max(1) as f64);
    println!(
        "all chunks incl. framing and clock pairs: {:5.1} B/event over {} events (goal <= 24)",
        file_bytes as f64 / r.stats().events_written.max(1) as f64,
        r.stats().events_written
    );
    println!("reference: LTTng-UST ~21 B/event, Kineto JSON 224-362 B/event (shared/PERF_ANCHORS.md)");
}
