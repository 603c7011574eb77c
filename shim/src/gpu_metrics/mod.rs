//! GPU counters: a background thread samples NVML (GPM metrics where the device supports them,
//! basic utilization / memory / clock / power / temperature everywhere) and emits
//! `Record::Counter` samples with the device set.
//!
//! - `TPROF_GPU_METRICS_HZ` (default 5, 1-10; 0 disables; anything else: one warning, default).
//! - NVML is loaded at run time (`libnvidia-ml.so.1`); when absent, one line and nothing else.
//! - One process per device samples it (see [`devices_to_sample`]): the lowest local rank on the
//!   device, not every rank.
//! - GPM needs two samples at least 100 ms apart; the first GPM values come one interval late.
//! - The thread is detached (never joined: it never blocks exit), runs inside the reentrancy guard
//!   and `ffi_guard`, and stops when the ring writer stops.

pub mod nvml;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tprof_format::{counter_names as names, Record};

use crate::base::{config, messages, panic_fence, process, switch, ticks};
use crate::lifecycle;
use crate::record::interning::StaticName;
use crate::record::{recorder, reentrancy};
use crate::service::writer_thread;
use nvml::{Device, GpmSample, LoadError, Nvml};

/// GPM computes rates over at least this interval.
const GPM_MIN_INTERVAL: Duration = Duration::from_millis(100);

static N_UTIL: StaticName = StaticName::new(names::UTIL);
static N_MEM_UTIL: StaticName = StaticName::new(names::MEM_UTIL);
static N_MEM_USED: StaticName = StaticName::new(names::MEM_USED);
static N_SM_CLOCK: StaticName = StaticName::new(names::SM_CLOCK);
static N_POWER: StaticName = StaticName::new(names::POWER);
static N_TEMP: StaticName = StaticName::new(names::TEMP);

/// GPM metric ids (nvml.h) and the counter each becomes. PCIe / NVLink are MiB/s as NVML reports.
static GPM_METRICS: [(u32, StaticName); 8] = [
    (2, StaticName::new(names::SM_ACTIVE)),
    (3, StaticName::new(names::SM_OCCUPANCY)),
    (5, StaticName::new(names::TENSOR_ACTIVE)),
    (10, StaticName::new(names::DRAM_BW)),
    (20, StaticName::new(names::PCIE_TX)),
    (21, StaticName::new(names::PCIE_RX)),
    (60, StaticName::new(names::NVLINK_RX)),
    (61, StaticName::new(names::NVLINK_TX)),
];

/// Who this process is in its job (from the launchers' environment).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Identity {
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    /// WORLD_SIZE or LOCAL_WORLD_SIZE, the larger.
    pub world_size: Option<u32>,
    /// `CUDA_VISIBLE_DEVICES` when it is a list of device indices.
    pub visible: Option<Vec<u32>>,
}

impl Identity {
    pub fn from_env() -> Identity {
        let (rank, local_rank, world, _) = process::job_identity();
        let local_world = std::env::var("LOCAL_WORLD_SIZE").ok().and_then(|v| v.trim().parse::<u32>().ok());
        let world_size = match (world, local_world) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        Identity { rank, local_rank, world_size, visible: parse_visible(std::env::var("CUDA_VISIBLE_DEVICES").ok()) }
    }
}

/// `CUDA_VISIBLE_DEVICES` as indices; None when unset or not numeric (UUIDs, MIG names).
pub fn parse_visible(v: Option<String>) -> Option<Vec<u32>> {
    let v = v?;
    let mut out = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        out.push(part.parse::<u32>().ok()?);
    }
    Some(out)
}

/// The NVML device indices this process samples, out of `count`.
///
/// - With a local rank L: rank L uses device L of the visible ones (`CUDA_VISIBLE_DEVICES`, else
///   all) and samples it when it is the lowest local rank on it (L < number of visible devices;
///   ranks sharing devices round-robin). A process that sees exactly one device samples it.
/// - Without a local rank: rank 0 samples every visible device; other ranks none.
/// - Without any rank: a launcher of a multi-process job (`WORLD_SIZE` > 1) samples nothing; a
///   single-process program samples every visible device.
pub fn devices_to_sample(id: &Identity, count: u32) -> Vec<u32> {
    let visible: Vec<u32> = match &id.visible {
        Some(v) => v.iter().copied().filter(|&d| d < count).collect(),
        None => (0..count).collect(),
    };
    if visible.is_empty() {
        return Vec::new();
    }
    match (id.local_rank, id.rank) {
        (Some(_), _) if visible.len() == 1 => visible,
        (Some(l), _) => visible.get(l as usize).map(|&d| vec![d]).unwrap_or_default(),
        (None, Some(0)) => visible,
        (None, Some(_)) => Vec::new(),
        (None, None) if id.world_size.unwrap_or(1) > 1 => Vec::new(),
        (None, None) => visible,
    }
}

/// The process that started the sampler (a fork child of it never samples).
static STARTED_PID: AtomicU32 = AtomicU32::new(0);

/// Starts the sampler thread (the init hook; idempotent; never blocks or panics).
pub fn start() {
    panic_fence::ffi_guard((), || {
        let pid = std::process::id();
        match STARTED_PID.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {}
            // Already started here, or we are a fork child of a process that did: its sampler
            // covers the devices.
            Err(_) => return,
        }
        let (hz, warning) = config::parse_gpu_metrics_hz(config::config().gpu_metrics_hz.as_deref());
        if let Some(w) = warning {
            messages::warn_line(&w);
        }
        if hz == 0 {
            return;
        }
        let period = Duration::from_secs(1) / hz;
        let spawned = std::thread::Builder::new().name("tprof-gpumetrics".into()).spawn(move || {
            let Some(_inside) = reentrancy::Reentrancy::enter() else { return };
            panic_fence::ffi_guard((), || run(period));
        });
        if let Err(e) = spawned {
            messages::warn_line(&format!("cannot start the GPU metrics thread ({e}); no GPU counters"));
        }
    })
}

/// One sampled device.
struct Sampled {
    index: u32,
    handle: Device,
    /// Two GPM samples (previous, next) and when the previous one was taken.
    gpm: Option<(GpmSample, GpmSample, Option<Instant>)>,
}

fn info_line(msg: &str) {
    if !config::config().quiet {
        messages::stderr_line(&format!("tprof: {msg}"));
    }
}

/// True when this process samples no device whatever NVML reports (launchers, non-zero ranks
/// without a local rank): it does not even load NVML, and says nothing.
pub fn samples_nothing(id: &Identity) -> bool {
    match (id.local_rank, id.rank) {
        (Some(_), _) => false,
        (None, Some(r)) => r != 0,
        (None, None) => id.world_size.unwrap_or(1) > 1,
    }
}

fn run(period: Duration) {
    let identity = Identity::from_env();
    if samples_nothing(&identity) {
        return;
    }
    let nvml = match Nvml::load() {
        Ok(n) => n,
        Err(LoadError::Absent(why)) => {
            info_line(&format!("{why}: no GPU counters (NVML is part of the NVIDIA driver)"));
            return;
        }
        Err(LoadError::Failed(why)) => {
            info_line(&format!("NVML unusable ({why}): no GPU counters"));
            return;
        }
    };
    let ids = devices_to_sample(&identity, nvml.device_count());
    let mut devices: Vec<Sampled> = ids
        .into_iter()
        .filter_map(|index| {
            let handle = nvml.device(index)?;
            let gpm = if nvml.gpm_supported(handle) {
                match (nvml.gpm_alloc(), nvml.gpm_alloc()) {
                    (Some(a), Some(b)) => Some((a, b, None)),
                    (a, b) => {
                        a.into_iter().chain(b).for_each(|s| nvml.gpm_free(s));
                        None
                    }
                }
            } else {
                None
            };
            Some(Sampled { index, handle, gpm })
        })
        .collect();
    if devices.is_empty() {
        return;
    }
    let gpm_ids: Vec<u32> = GPM_METRICS.iter().map(|(id, _)| *id).collect();
    // Baseline for the rates (utilization is "since the previous call").
    for d in &devices {
        let _ = nvml.utilization(d.handle);
    }
    let mut next = Instant::now() + period;
    loop {
        sleep_until(next);
        next += period;
        if Instant::now() > next {
            next = Instant::now() + period;
        }
        if switch::state() != switch::ENABLED || !writer_thread::running() {
            break;
        }
        for d in &mut devices {
            sample_basic(&nvml, d);
            sample_gpm(&nvml, d, &gpm_ids);
        }
    }
    for d in devices {
        if let Some((a, b, _)) = d.gpm {
            nvml.gpm_free(a);
            nvml.gpm_free(b);
        }
    }
}

fn sleep_until(t: Instant) {
    let now = Instant::now();
    if t > now {
        std::thread::sleep(t - now);
    }
}

fn counter(name: &StaticName, device: u32, value: f64) {
    recorder::emit(Record::Counter { name: name.id(), device, ts: ticks::now(), value });
}

fn sample_basic(nvml: &Nvml, d: &Sampled) {
    if let Some(u) = nvml.utilization(d.handle) {
        counter(&N_UTIL, d.index, u.gpu as f64);
        counter(&N_MEM_UTIL, d.index, u.memory as f64);
    }
    if let Some(m) = nvml.memory(d.handle) {
        counter(&N_MEM_USED, d.index, m.used as f64);
    }
    if let Some(c) = nvml.sm_clock_mhz(d.handle) {
        counter(&N_SM_CLOCK, d.index, c as f64);
    }
    if let Some(p) = nvml.power_mw(d.handle) {
        counter(&N_POWER, d.index, p as f64 / 1000.0);
    }
    if let Some(t) = nvml.temperature_c(d.handle) {
        counter(&N_TEMP, d.index, t as f64);
    }
}

fn sample_gpm(nvml: &Nvml, d: &mut Sampled, ids: &[u32]) {
    let Some((prev, cur, taken)) = d.gpm.as_mut() else { return };
    match taken {
        None => {
            if nvml.gpm_sample(d.handle, *prev) {
                *taken = Some(Instant::now());
            }
        }
        Some(t) if t.elapsed() >= GPM_MIN_INTERVAL => {
            if !nvml.gpm_sample(d.handle, *cur) {
                return;
            }
            if let Some(values) = nvml.gpm_metrics(*prev, *cur, ids) {
                for ((_, name), v) in GPM_METRICS.iter().zip(values) {
                    if let Some(v) = v {
                        counter(name, d.index, v);
                    }
                }
            }
            std::mem::swap(prev, cur);
            *taken = Some(Instant::now());
        }
        Some(_) => {}
    }
}

// NVML is part of the driver: the sampler starts once tprof is enabled and the driver works.
lifecycle::start_with_driver!(start);

#[cfg(test)]
mod tests {
    use super::*;

    fn id(rank: Option<u32>, local: Option<u32>, world: Option<u32>, visible: Option<Vec<u32>>) -> Identity {
        Identity { rank, local_rank: local, world_size: world, visible }
    }

    #[test]
    fn one_sampler_per_device() {
        // torchrun-style: local rank L samples device L.
        for l in 0..4 {
            assert_eq!(devices_to_sample(&id(Some(l), Some(l), Some(4), None), 8), vec![l]);
        }
        // More ranks than devices: only the lowest local rank of each device samples.
        assert_eq!(devices_to_sample(&id(Some(9), Some(9), Some(16), None), 8), Vec::<u32>::new());
        assert_eq!(devices_to_sample(&id(Some(1), Some(1), Some(16), None), 8), vec![1]);
        // CUDA_VISIBLE_DEVICES remaps.
        assert_eq!(devices_to_sample(&id(Some(1), Some(1), Some(2), Some(vec![4, 6])), 8), vec![6]);
        // One device per process (SLURM-style binding): sample it.
        assert_eq!(devices_to_sample(&id(Some(3), Some(3), Some(4), Some(vec![3])), 8), vec![3]);
        // No local rank: rank 0 samples all, the others none.
        assert_eq!(devices_to_sample(&id(Some(0), None, Some(2), None), 2), vec![0, 1]);
        assert!(devices_to_sample(&id(Some(1), None, Some(2), None), 2).is_empty());
        // A launcher (WORLD_SIZE set, no rank) samples nothing; a plain program samples everything.
        assert!(devices_to_sample(&id(None, None, Some(4), None), 8).is_empty());
        assert!(samples_nothing(&id(None, None, Some(4), None)));
        assert!(samples_nothing(&id(Some(2), None, Some(4), None)));
        assert!(!samples_nothing(&id(Some(2), Some(2), Some(4), None)));
        assert_eq!(devices_to_sample(&id(None, None, None, None), 2), vec![0, 1]);
        assert!(devices_to_sample(&id(None, None, None, None), 0).is_empty());
    }

    #[test]
    fn visible_devices() {
        assert_eq!(parse_visible(Some("0,2".into())), Some(vec![0, 2]));
        assert_eq!(parse_visible(Some("GPU-abc".into())), None);
        assert_eq!(parse_visible(None), None);
    }
}
