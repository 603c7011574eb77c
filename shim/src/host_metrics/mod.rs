//! Host resources beside the GPU: a background thread samples /proc and sysfs and emits
//! `Record::HostSample` / `Record::HostEntity` (format crate, `record/host.rs`).
//!
//! - Every process samples its own tree: itself (totals, and every thread with its name: CPU
//!   user/sys, run-queue delay, voluntary/involuntary switches), and its descendants, DataLoader
//!   workers that never call CUDA included (CPU, switches, RSS, faults, I/O bytes).
//! - One process per host samples the machine ([`samples_machine`], as the NVML sampler elects one
//!   process per device): cores (with NUMA node), run queue, memory, swap, PSI, disks, NICs and
//!   InfiniBand ports.
//! - `TPROF_HOST_HZ` (0-100; default 10 in full mode, 1 in metrics mode; 0 disables).
//! - Files are opened once and read with `pread` into one reused buffer; the program's threads
//!   pay nothing (the sampler is its own thread; nothing is added to an intercepted call). Each
//!   round records its own cost (`sampler_rounds`, `sampler_ns`).
//! - The thread is detached, runs inside the reentrancy guard and `ffi_guard`, and stops when the
//!   ring writer stops. A fork child never samples (its parent's sampler covers it).

pub mod cgroup;
pub mod emit;
pub mod machine;
pub mod procfs;
pub mod tree;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tprof_format::settings::{vars, Mode};
use tprof_format::{HostMetric, HostScope};

use crate::base::{config, messages, panic_fence, switch, ticks};
use crate::gpu_metrics::Identity;
use crate::lifecycle;
use crate::record::reentrancy;
use crate::service::writer_thread;
use emit::{Emitter, HostOut, RecorderOut};

/// Full rounds (every value written) at least this often.
const FULL_ROUND_EVERY: Duration = Duration::from_secs(10);

/// The sampling rate for `mode` and `TPROF_HOST_HZ`, and the warning for a bad value.
pub fn sample_rate(value: Option<&str>, mode: Mode) -> (u32, Option<String>) {
    let default = if mode == Mode::Metrics { 1 } else { 10 };
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else { return (default, None) };
    match v.parse::<u32>() {
        Ok(n) if n <= 100 => (n, None),
        _ => (
            default,
            Some(format!("{}={v:?} is not a rate between 1 and 100 (0 disables); using {default}", vars::HOST_HZ)),
        ),
    }
}

/// Whether this process samples the machine-wide counters: local rank 0; without a local rank,
/// rank 0 or a process without a rank in a one-process job.
pub fn samples_machine(id: &Identity) -> bool {
    match (id.local_rank, id.rank) {
        (Some(l), _) => l == 0,
        (None, Some(r)) => r == 0,
        (None, None) => id.world_size.unwrap_or(1) <= 1,
    }
}

/// Everything one round reads.
pub struct HostSampler {
    tree: tree::TreeSampler,
    machine: Option<machine::MachineSampler>,
    buf: Vec<u8>,
    rounds: u64,
    spent_ns: u64,
}

impl HostSampler {
    /// `machine`: the root the NIC counters are read under (`TPROF_SYSROOT`, as the topology
    /// probe's ports), when this process samples the machine.
    pub fn new(machine: Option<&Path>) -> HostSampler {
        HostSampler {
            tree: tree::TreeSampler::new(),
            machine: machine.map(machine::MachineSampler::new),
            buf: Vec::with_capacity(16 * 1024),
            rounds: 0,
            spent_ns: 0,
        }
    }

    /// One round at `ts` (ticks).
    pub fn round<O: HostOut>(&mut self, e: &mut Emitter<O>, ts: u64) {
        let t0 = Instant::now();
        e.begin(ts);
        self.tree.sample(e, &mut self.buf);
        if let Some(m) = &mut self.machine {
            m.sample(e, &mut self.buf);
        }
        self.rounds += 1;
        self.spent_ns += t0.elapsed().as_nanos() as u64;
        let pid = std::process::id();
        e.sample(HostScope::Process, pid, HostMetric::SamplerRounds, self.rounds);
        e.sample(HostScope::Process, pid, HostMetric::SamplerNs, self.spent_ns);
        e.end();
    }
}

/// The process that started the sampler (a fork child of it never samples).
static STARTED_PID: AtomicU32 = AtomicU32::new(0);

/// Starts the sampler thread (the init hook; idempotent; never blocks or panics).
pub fn start() {
    panic_fence::ffi_guard((), || {
        let pid = std::process::id();
        if STARTED_PID.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        let cfg = config::config();
        let (hz, warning) = sample_rate(cfg.host_hz.as_deref(), cfg.mode);
        if let Some(w) = warning {
            messages::warn_line(&w);
        }
        if hz == 0 {
            return;
        }
        let period = Duration::from_secs(1) / hz;
        let full_every = (FULL_ROUND_EVERY.as_nanos() / period.as_nanos()).max(1) as u64;
        let identity = Identity::from_env();
        let machine = samples_machine(&identity).then(|| cfg.sysroot_of(identity.rank));
        let spawned = std::thread::Builder::new().name("tprof-host".into()).spawn(move || {
            let Some(_inside) = reentrancy::Reentrancy::enter() else { return };
            panic_fence::ffi_guard((), || run(period, full_every, machine));
        });
        if let Err(e) = spawned {
            messages::warn_line(&format!("cannot start the host sampler thread ({e}); no host counters"));
        }
    })
}

/// `machine`: the root the NIC counters are read under, when this process samples the machine.
fn run(period: Duration, full_every: u64, machine: Option<PathBuf>) {
    let mut sampler = HostSampler::new(machine.as_deref());
    let mut emitter = Emitter::new(RecorderOut, full_every);
    let mut next = Instant::now();
    loop {
        if switch::state() != switch::ENABLED || !writer_thread::running() {
            break;
        }
        sampler.round(&mut emitter, ticks::now());
        next += period;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
    }
}

extern "C" fn constructor() {
    // Only in libtprof.so itself: test executables linking the rlib start the sampler explicitly.
    panic_fence::ffi_guard((), || {
        if crate::base::dynamic_loader::own_library_path().is_some() {
            lifecycle::register_init_hook(start_when_enabled);
        }
    })
}

fn start_when_enabled() {
    if switch::state() == switch::ENABLED {
        start();
    }
}

/// Starts the sampler once tprof is enabled (it needs no driver).
#[used]
#[link_section = ".init_array"]
static REGISTER_START: extern "C" fn() = constructor;

#[cfg(test)]
mod tests {
    use super::*;

    fn id(rank: Option<u32>, local: Option<u32>, world: Option<u32>) -> Identity {
        Identity { rank, local_rank: local, world_size: world, visible: None }
    }

    #[test]
    fn one_machine_sampler_per_host() {
        assert!(samples_machine(&id(Some(8), Some(0), Some(16))));
        assert!(!samples_machine(&id(Some(9), Some(1), Some(16))));
        assert!(samples_machine(&id(Some(0), None, Some(2))));
        assert!(!samples_machine(&id(Some(1), None, Some(2))));
        assert!(samples_machine(&id(None, None, None)));
        assert!(!samples_machine(&id(None, None, Some(4))), "a launcher");
    }

    #[test]
    fn rates() {
        assert_eq!(sample_rate(None, Mode::Full), (10, None));
        assert_eq!(sample_rate(None, Mode::Metrics), (1, None));
        assert_eq!(sample_rate(Some("0"), Mode::Full), (0, None));
        assert_eq!(sample_rate(Some(" 50 "), Mode::Full), (50, None));
        let (hz, w) = sample_rate(Some("fast"), Mode::Full);
        assert_eq!(hz, 10);
        assert!(w.unwrap().contains("TPROF_HOST_HZ=\"fast\""));
    }

    /// Counts what a round writes.
    #[derive(Default)]
    struct Count(Vec<(HostScope, u32, HostMetric, u64)>, Vec<(HostScope, u32, Vec<u8>)>);
    impl HostOut for Count {
        fn sample(&mut self, scope: HostScope, id: u32, metric: HostMetric, _ts: u64, value: u64) {
            self.0.push((scope, id, metric, value));
        }
        fn entity(&mut self, scope: HostScope, id: u32, _parent: u32, _ts: u64, name: &[u8]) {
            self.1.push((scope, id, name.to_vec()));
        }
    }

    #[test]
    fn a_round_sees_this_process_its_threads_a_child_and_the_machine() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        let (started_tx, started) = std::sync::mpsc::channel();
        let worker = std::thread::Builder::new()
            .name("hs-busy".into())
            .spawn(move || {
                // Named and running before the first round looks (the round raced the start).
                started_tx.send(()).unwrap();
                let t = Instant::now();
                let mut x = 0u64;
                while t.elapsed() < Duration::from_millis(300) {
                    x = x.wrapping_mul(31).wrapping_add(1);
                }
                std::hint::black_box(x)
            })
            .unwrap();
        started.recv().unwrap();
        let mut s = HostSampler::new(Some(Path::new("/")));
        let mut e = Emitter::new(Count::default(), 100);
        s.round(&mut e, 1);
        worker.join().unwrap();
        s.round(&mut e, 2);
        child.kill().ok();
        child.wait().ok();
        let pid = std::process::id();
        let out = &e.out;
        let has = |scope, id, m| out.0.iter().any(|r| r.0 == scope && r.1 == id && r.2 == m);
        assert!(has(HostScope::Process, pid, HostMetric::CpuUserNs));
        assert!(has(HostScope::Process, pid, HostMetric::RssBytes));
        assert!(has(HostScope::Process, child.id(), HostMetric::CpuUserNs), "the child process is sampled");
        assert!(out.1.iter().any(|n| n.0 == HostScope::Thread && n.2 == b"hs-busy"), "threads are named");
        assert!(out.1.iter().any(|n| n.0 == HostScope::Process && n.1 == child.id() && n.2 == b"sleep"));
        assert!(has(HostScope::Core, 0, HostMetric::CoreBusyNs));
        assert!(has(HostScope::Machine, 0, HostMetric::MemAvailableBytes));
        // The busy thread's CPU time grew by most of its 300 ms between the rounds.
        let busy_tid = out.1.iter().find(|n| n.2 == b"hs-busy").unwrap().1;
        let cpu: Vec<u64> = out
            .0
            .iter()
            .filter(|r| r.0 == HostScope::Thread && r.1 == busy_tid && r.2 == HostMetric::CpuUserNs)
            .map(|r| r.3)
            .collect();
        assert!(!cpu.is_empty());
        let rss = out.0.iter().find(|r| r.1 == pid && r.2 == HostMetric::RssBytes).unwrap().3;
        assert!(rss > 1 << 20, "RSS {rss}");
    }
}
