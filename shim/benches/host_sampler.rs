//! Cost of the host sampler (`shim/src/host_metrics/`): `cargo bench -p tprof-shim --bench host_sampler`.
//!
//! 1. CPU time (the sampler thread's own clock, `CLOCK_THREAD_CPUTIME_ID`) per round and per value
//!    for this process with 16 extra threads and N = 0 / 4 / 16 / 64 child processes, split into
//!    the parts of a round: the process tree walk (own threads, descendants: /proc stat, schedstat,
//!    status, io, children), the machine-wide /proc files (stat, meminfo, vmstat, PSI, diskstats)
//!    and the sysfs NIC / InfiniBand counters.
//! 2. simtrain (`--workers 2`, the simulated GPU stack) under libtprof with `TPROF_HOST_HZ` = 0, 10
//!    and 100, interleaved round by round: CPU time of the whole process tree per step (user + sys
//!    of the waited-for children, so machine load does not enter) and steps/s, each against 0 Hz.
//!
//! Environment: `TPROF_LIB` (default `$CARGO_TARGET_DIR/release/libtprof.so`), `SIMGPU_LIB_DIR`
//! (default `tests/simgpu/build`), `SIMGPU_PROGRAMS_DIR` (default `tests/programs/build`),
//! `BENCH_ROUNDS` (default 5), `BENCH_STEPS` (simtrain steps per run, default 100). Part 2 is
//! skipped, with a line saying why, when libtprof or simtrain is missing.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tprof::host_metrics::emit::{Emitter, HostOut};
use tprof::host_metrics::machine::MachineSampler;
use tprof::host_metrics::tree::TreeSampler;
use tprof_format::{HostMetric, HostScope};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize().expect("repository root")
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("target"))
}

fn env_num(k: &str, default: usize) -> usize {
    std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Counts values (what the ring would get).
#[derive(Default)]
struct Count(u64);
impl HostOut for Count {
    fn sample(&mut self, _: HostScope, _: u32, _: HostMetric, _: u64, _: u64) {
        self.0 += 1;
    }
    fn entity(&mut self, _: HostScope, _: u32, _: u32, _: u64, _: &[u8]) {
        self.0 += 1;
    }
}

/// CPU ns per call of `f` (median of 7 batches of `n`) and values read per call.
fn measure(n: usize, mut f: impl FnMut(&mut Emitter<Count>, &mut Vec<u8>)) -> (f64, f64) {
    // full_every 1: every value is passed on, so "values" counts what a round reads.
    let mut e = Emitter::new(Count::default(), 1);
    let mut buf = Vec::new();
    for i in 0..3 {
        e.begin(i);
        f(&mut e, &mut buf);
        e.end();
    }
    let mut per = Vec::new();
    let mut values = 0.0;
    for b in 0..7 {
        let before = e.out.0;
        let t0 = thread_cpu_ns();
        for i in 0..n {
            e.begin((b * n + i) as u64 + 10);
            f(&mut e, &mut buf);
            e.end();
        }
        per.push((thread_cpu_ns() - t0) as f64 / n as f64);
        values = (e.out.0 - before) as f64 / n as f64;
    }
    (median(per), values)
}

fn part1() {
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..16)
        .map(|i| {
            let stop = stop.clone();
            std::thread::Builder::new()
                .name(format!("bench-idle-{i}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                })
                .unwrap()
        })
        .collect();
    let mut machine = MachineSampler::new(std::path::Path::new("/"));
    let nics = machine.interfaces();
    let (m_ns, m_vals) = measure(200, |e, buf| machine.sample_proc(e, buf));
    let (n_ns, n_vals) = measure(200, |e, buf| machine.sample_interfaces(e, buf));
    println!("host sampler round, CPU time of the sampling thread (median of 7 batches); this process has 17 threads");
    println!("  machine /proc files (stat, meminfo, vmstat, PSI, diskstats): {m_ns:>9.0} ns/round, {m_vals:.0} values, {:.0} ns/value", m_ns / m_vals.max(1.0));
    println!("  sysfs NIC/IB counters ({nics} interfaces):                  {n_ns:>9.0} ns/round, {n_vals:.0} values, {:.0} ns/value", n_ns / n_vals.max(1.0));
    let mut children: Vec<Child> = Vec::new();
    for n in [0usize, 4, 16, 64] {
        while children.len() < n {
            children.push(Command::new("sleep").arg("120").stdin(Stdio::null()).spawn().expect("sleep"));
        }
        // Let them exec, so their names are settled.
        std::thread::sleep(Duration::from_millis(50));
        let mut tree = TreeSampler::new();
        let (t_ns, t_vals) = measure(if n >= 16 { 50 } else { 200 }, |e, buf| tree.sample(e, buf));
        let round = t_ns + m_ns + n_ns;
        println!(
            "  process tree, {n:>2} children: {t_ns:>9.0} ns/round, {t_vals:.0} values, {:.0} ns/value; whole round (machine sampler too) {:.1} us = {:.3}% of a core at 10 Hz, {:.2}% at 100 Hz",
            t_ns / t_vals.max(1.0),
            round / 1e3,
            round * 10.0 / 1e9 * 100.0,
            round * 100.0 / 1e9 * 100.0,
        );
    }
    for mut c in children {
        c.kill().ok();
        c.wait().ok();
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().ok();
    }
}

/// CPU ns (user + sys) of the children waited for since the last call.
fn children_cpu_ns() -> u64 {
    // SAFETY: getrusage fills one rusage struct through a valid pointer.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn part2() {
    let lib =
        std::env::var_os("TPROF_LIB").map(PathBuf::from).unwrap_or_else(|| target_dir().join("release/libtprof.so"));
    let simgpu =
        std::env::var_os("SIMGPU_LIB_DIR").map(PathBuf::from).unwrap_or_else(|| repo().join("tests/simgpu/build"));
    let programs = std::env::var_os("SIMGPU_PROGRAMS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("tests/programs/build"));
    let simtrain = programs.join("simtrain");
    for (what, p) in
        [("libtprof.so", &lib), ("simtrain", &simtrain), ("the simulated runtime", &simgpu.join("libcudart.so.12"))]
    {
        if !p.exists() {
            println!("simtrain part skipped: {what} missing at {} (cargo build --release -p tprof-shim; make -C tests/simgpu tests/programs)", p.display());
            return;
        }
    }
    let rounds = env_num("BENCH_ROUNDS", 5);
    let steps = env_num("BENCH_STEPS", 100);
    let work = tempfile::tempdir().expect("temp dir");
    let rates = ["0", "10", "100"];
    // [rate][round] = (CPU ns per step, steps/s)
    let mut got: Vec<Vec<(f64, f64)>> = vec![Vec::new(); rates.len()];
    println!(
        "\nsimtrain --workers 2 --steps {steps} under libtprof (full mode), TPROF_HOST_HZ 0 / 10 / 100 interleaved, {rounds} rounds; {} CPUs, load {}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        std::fs::read_to_string("/proc/loadavg").unwrap_or_default().split(' ').next().unwrap_or("?")
    );
    for round in 0..rounds {
        for (i, hz) in rates.iter().enumerate() {
            let out = work.path().join(format!("r{round}-hz{hz}"));
            let before = children_cpu_ns();
            let t0 = Instant::now();
            let o = Command::new(&simtrain)
                .args(["--steps", &steps.to_string(), "--workers", "2", "--quiet"])
                .env("LD_LIBRARY_PATH", &simgpu)
                .env("LD_PRELOAD", &lib)
                .env("TPROF_OUT", &out)
                .env("TPROF_RING_MB", "16")
                .env("TPROF_QUIET", "1")
                .env("TPROF_HOST_HZ", hz)
                .env_remove("TPROF_MODE")
                .output()
                .expect("simtrain");
            let wall = t0.elapsed().as_secs_f64();
            let cpu = children_cpu_ns() - before;
            assert!(o.status.success(), "simtrain: {}", String::from_utf8_lossy(&o.stderr));
            let _ = std::fs::remove_dir_all(&out);
            got[i].push((cpu as f64 / steps as f64, steps as f64 / wall));
        }
    }
    let base_cpu = median(got[0].iter().map(|g| g.0).collect());
    let base_sps = median(got[0].iter().map(|g| g.1).collect());
    for (i, hz) in rates.iter().enumerate() {
        let cpu = median(got[i].iter().map(|g| g.0).collect());
        let sps = median(got[i].iter().map(|g| g.1).collect());
        // Per round against that round's 0 Hz run, then the median: pairs share the machine's load.
        let d_cpu = median(got[i].iter().zip(&got[0]).map(|(g, b)| (g.0 / b.0 - 1.0) * 100.0).collect());
        println!(
            "  TPROF_HOST_HZ={hz:>3}: {:>7.1} us CPU per step ({:+.2}% vs 0 Hz, median of per-round ratios; medians {:+.2}%), {sps:.2} steps/s ({:+.2}%)",
            cpu / 1e3,
            d_cpu,
            (cpu / base_cpu - 1.0) * 100.0,
            (sps / base_sps - 1.0) * 100.0
        );
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list" || a == "--test") {
        return;
    }
    part1();
    part2();
}
