//! The topology probe: once per process, on its own short-lived thread once the driver works, it
//! writes what the node looks like from this process's GPU: `TopoGpu` (host, GPU, NUMA node,
//! NVLinks), one `TopoNic` per network port (line rate, NUMA node, PCIe path from the GPU) and one
//! `TopoGpuPath` per other GPU (NVML's common ancestor, NVLink P2P), and one `NcclSetting` per NCCL
//! setting of `NCCL_SETTINGS` the environment or NCCL's configuration files set (`nccl_conf`).
//! Never on a hot path.
//!
//! The GPU is the one the process's local rank uses (`CUDA_VISIBLE_DEVICES` respected), else the
//! first. sysfs and procfs are read under `TPROF_SYSROOT` (default `/`; `%r` = the rank). A process
//! that exits normally while its probe still runs waits for it at most 500 ms (an exit hook), so a
//! short job keeps its topology.

pub mod nccl_conf;
pub mod sysfs;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tprof_format::topology::PathLevel;
use tprof_format::Record;

use crate::base::{config, panic_fence, process, ticks};
use crate::gpu_metrics::nvml::Nvml;
use crate::gpu_metrics::Identity;
use crate::lifecycle;
use crate::record::interning::intern;
use crate::record::{recorder, reentrancy};

static STARTED_PID: AtomicU32 = AtomicU32::new(0);

/// The NVML index this process's GPU has.
fn own_device(id: &Identity, count: u32) -> u32 {
    let visible: Vec<u32> = match &id.visible {
        Some(v) => v.iter().copied().filter(|&d| d < count).collect(),
        None => (0..count).collect(),
    };
    match (id.local_rank, visible.len()) {
        (_, 0) => 0,
        (Some(l), n) => visible[l as usize % n],
        (None, _) => visible[0],
    }
}

/// Starts the probe (idempotent per process; never blocks or panics).
pub fn start() {
    panic_fence::ffi_guard((), || {
        let pid = std::process::id();
        let prev = STARTED_PID.load(Ordering::Acquire);
        if prev == pid || STARTED_PID.compare_exchange(prev, pid, Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        PROBING_PID.store(pid, Ordering::Release);
        let spawned = std::thread::Builder::new().name("tprof-topology".into()).spawn(|| {
            if let Some(_inside) = reentrancy::Reentrancy::enter() {
                panic_fence::ffi_guard((), probe);
            }
            PROBING_PID.store(0, Ordering::Release);
        });
        if spawned.is_err() {
            PROBING_PID.store(0, Ordering::Release);
        }
    })
}

/// The process whose probe thread is running (its records not all written yet); 0: none. A fork
/// child inherits the value but not the thread: it waits only for a probe of its own.
static PROBING_PID: AtomicU32 = AtomicU32::new(0);

/// Longest the exit path waits for a running probe (a short job can end while NVML still loads).
const EXIT_WAIT: Duration = Duration::from_millis(500);

/// The exit hook: waits (bounded) for a probe still writing, so a short job keeps its topology.
fn wait_for_probe() {
    let (t0, pid) = (Instant::now(), std::process::id());
    while PROBING_PID.load(Ordering::Acquire) == pid && t0.elapsed() < EXIT_WAIT {
        std::thread::sleep(Duration::from_millis(2));
    }
}

fn probe() {
    let identity = Identity::from_env();
    let root = config::config().sysroot_of(identity.rank);
    let host = sysfs::hostname(&root).unwrap_or_else(process::hostname);
    let ports = sysfs::ports(&root);
    let nvml = Nvml::load().ok();
    let count = nvml.as_ref().map_or(0, |n| n.device_count());
    let device = own_device(&identity, count);
    let handle = nvml.as_ref().and_then(|n| n.device(device));
    let bus_id = match (&nvml, handle) {
        (Some(n), Some(h)) => n.pci_bus_id(h).unwrap_or_default(),
        _ => String::new(),
    };
    let gpu_path = (!bus_id.is_empty()).then(|| sysfs::pci_device_path(&root, &sysfs::sysfs_bus_id(&bus_id))).flatten();
    let gpu_numa = sysfs::numa_node(gpu_path.as_deref());
    let (nvlinks, nvlink_version) = match (&nvml, handle) {
        (Some(n), Some(h)) => n.nvlinks(h),
        _ => (0, 0),
    };
    recorder::emit(Record::TopoGpu {
        ts: ticks::now(),
        host: intern(&host),
        device,
        bus_id: intern(&bus_id),
        numa_node: gpu_numa,
        nvlinks,
        nvlink_version,
        gpus: count,
    });
    for p in &ports {
        let numa = sysfs::numa_node(p.pci_path.as_deref());
        let path = match (&gpu_path, &p.pci_path) {
            (Some(g), Some(n)) => sysfs::path_level(g, n, gpu_numa, numa),
            _ => PathLevel::Unknown,
        };
        recorder::emit(Record::TopoNic {
            ts: ticks::now(),
            name: intern(&p.name),
            port: p.port,
            kind: p.kind as u8,
            rate_mbps: p.rate_mbps,
            numa_node: numa,
            path: path as u8,
        });
    }
    for (name, value) in nccl_conf::settings(|n| std::env::var(n).ok(), &root) {
        recorder::emit(Record::NcclSetting { ts: ticks::now(), name: intern(&name), value: intern(&value) });
    }
    if let (Some(n), Some(h)) = (&nvml, handle) {
        for peer in (0..count).filter(|&d| d != device) {
            let Some(ph) = n.device(peer) else { continue };
            let (level, nvlink) = n.path(h, ph);
            recorder::emit(Record::TopoGpuPath {
                ts: ticks::now(),
                device,
                peer,
                level: level.map_or(PathLevel::Unknown, PathLevel::from_nvml) as u8,
                nvlink: match nvlink {
                    Some(true) => 1,
                    Some(false) => 0,
                    None => 2,
                },
            });
        }
    }
}

lifecycle::start_with_driver!(start, exit = wait_for_probe);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_device_follows_the_local_rank() {
        let id = |l: Option<u32>, v: Option<Vec<u32>>| Identity { local_rank: l, visible: v, ..Default::default() };
        assert_eq!(own_device(&id(Some(5), None), 8), 5);
        assert_eq!(own_device(&id(Some(1), Some(vec![6, 7])), 8), 7);
        assert_eq!(own_device(&id(None, None), 8), 0);
        assert_eq!(own_device(&id(Some(3), None), 0), 0);
    }
}
