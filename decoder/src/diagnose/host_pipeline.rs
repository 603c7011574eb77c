//! What kind of input-pipeline problem a `data_loading` verdict is, from the host samples of the
//! rank's process tree over its analysed window (`host::usage`):
//!
//! - `main_thread_bound`: the main thread is on a CPU (or waiting for one) most of the time and no
//!   worker is busy: the batch is made on the training thread (no workers, or the GIL);
//! - `workers_cpu_saturated`: every worker wants a whole core and the workers fill the CPUs the
//!   process may use: more workers will not help;
//! - `too_few_workers`: the workers are busy (or wait on something that is neither CPU nor
//!   reading) while CPUs are left: more workers help;
//! - `io_bound`: the input is read at a real rate while the readers use little CPU;
//! - `unknown`: no host samples (TPROF_HOST_HZ=0, imported traces), or nothing stands out.
//!
//! Demand (time on a CPU plus time waiting on a run queue, per wall time) rather than CPU time
//! decides "busy", so a loaded machine does not hide a CPU-bound worker.

use serde::Serialize;

use super::facts::RankFacts;
use crate::host::usage::{usage, HostUsage};

/// A reader that wants this much of a core is busy.
const BUSY_DEMAND: f64 = 0.6;
/// Input read at least this fast (bytes/s) by readers below [`BUSY_DEMAND`] is I/O-bound.
const IO_RATE: f64 = 2.0 * 1048576.0;

/// `evidence.host` of a `data_loading` verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct PipelineEvidence {
    /// CPUs the process may use.
    pub cpus: u32,
    /// Input read (by the workers, else the main process), bytes per second.
    pub input_read_bytes_per_s: f64,
    /// The machine's CPU utilisation when sampled.
    pub machine_cpu_util: Option<f64>,
    pub main_thread_cores: f64,
    pub main_thread_demand: f64,
    pub rank: u32,
    pub storage_read_bytes_per_s: f64,
    /// CPU cores busy for all workers, and each worker's demand (on a CPU or waiting for one).
    pub worker_cores: f64,
    pub worker_demand_each: f64,
    pub workers: u32,
}

/// The kind and its evidence for the rank `r` (None without host samples).
pub fn classify(r: &RankFacts) -> Option<(&'static str, PipelineEvidence, String)> {
    if r.host_series.is_empty() {
        return None;
    }
    let (a, b) = if r.window.1 > r.window.0 { r.window } else { r.host_series.span()? };
    let u = usage(&r.host_series, r.pid, a, b);
    let secs = (b - a).max(1) as f64 / 1e9;
    let ev = PipelineEvidence {
        rank: r.rank,
        workers: u.workers,
        worker_cores: u.worker_cores,
        worker_demand_each: u.worker_demand_each,
        main_thread_cores: u.main_thread_cores,
        main_thread_demand: u.main_thread_demand,
        input_read_bytes_per_s: u.input_read_bytes / secs,
        storage_read_bytes_per_s: u.storage_read_bytes / secs,
        cpus: u.cpus,
        machine_cpu_util: u.machine_cpu_util,
    };
    let (kind, text) = decide(&u, &ev);
    Some((kind, ev, text))
}

fn decide(u: &HostUsage, ev: &PipelineEvidence) -> (&'static str, String) {
    let mb = |b: f64| b / 1048576.0;
    let workers_busy = u.workers > 0 && u.worker_demand_each >= BUSY_DEMAND;
    if u.main_thread_demand >= BUSY_DEMAND && !workers_busy && ev.input_read_bytes_per_s < IO_RATE {
        return (
            "main_thread_bound",
            format!(
                "The main thread wanted {:.2} cores ({:.2} on a CPU) and {} worker(s) were not busy: the batches are made on the training thread.",
                u.main_thread_demand, u.main_thread_cores, u.workers
            ),
        );
    }
    if workers_busy {
        let cpus = u.cpus.max(1) as f64;
        if u.workers as f64 + 0.5 >= cpus {
            return (
                "workers_cpu_saturated",
                format!(
                    "{} workers each wanted {:.2} of a core ({:.2} cores busy in all) on {} CPUs: the input pipeline is CPU-bound and the CPUs are full.",
                    u.workers, u.worker_demand_each, u.worker_cores, u.cpus
                ),
            );
        }
        return (
            "too_few_workers",
            format!(
                "{} worker(s) each wanted {:.2} of a core while {} CPUs are available: more workers would make batches in parallel.",
                u.workers, u.worker_demand_each, u.cpus
            ),
        );
    }
    let readers_idle = if u.workers > 0 { u.worker_demand_each } else { u.main_thread_demand } < BUSY_DEMAND;
    if ev.input_read_bytes_per_s >= IO_RATE && readers_idle {
        return (
            "io_bound",
            format!(
                "The input was read at {:.1} MB/s ({:.1} MB/s from storage) by {} that used {:.2} of a core each: the pipeline waits for I/O.",
                mb(ev.input_read_bytes_per_s),
                mb(ev.storage_read_bytes_per_s),
                if u.workers > 0 { format!("{} worker(s)", u.workers) } else { "the main process".into() },
                if u.workers > 0 { u.worker_demand_each } else { u.main_thread_demand }
            ),
        );
    }
    if u.workers > 0 && (u.workers as f64) < u.cpus as f64 {
        return (
            "too_few_workers",
            format!(
                "{} worker(s) were mostly idle (each wanted {:.2} of a core, read {:.1} MB/s) while the main process waited for them: they wait on something else; more of them in parallel would hide it.",
                u.workers,
                u.worker_demand_each,
                mb(ev.input_read_bytes_per_s)
            ),
        );
    }
    (
        "unknown",
        format!(
            "The host samples show no busy reader: main thread {:.2} cores, {} worker(s), input {:.1} MB/s.",
            u.main_thread_demand,
            u.workers,
            mb(ev.input_read_bytes_per_s)
        ),
    )
}

/// Advice for a kind, most useful first.
pub fn advice(kind: &str) -> Vec<String> {
    let v: &[&str] = match kind {
        "workers_cpu_saturated" => &[
            "The CPUs are full: more workers will not help. Make each batch cheaper (simpler or fused transforms, smaller decode resolution), decode on the GPU (NVIDIA DALI, torchvision.io.decode_jpeg(device='cuda')), or preprocess the dataset offline.",
            "Check that nothing else runs on these CPUs (taskset / cgroup CPU limits) and that intra-op threads do not oversubscribe them (torch.set_num_threads(1) in workers).",
        ],
        "too_few_workers" => &[
            "Add DataLoader workers (num_workers up to the free CPUs), with persistent_workers=True and prefetch_factor=2..4.",
        ],
        "io_bound" => &[
            "The input is read slowly: stage the dataset on local NVMe or in memory, read larger sequential shards (WebDataset, TFRecord, MosaicML streaming), and raise prefetch_factor so reads overlap.",
            "On a network filesystem, use more reader workers / threads to keep more requests in flight.",
        ],
        "main_thread_bound" => &[
            "Move batch preparation off the training thread: DataLoader(num_workers>0) so it runs in worker processes (the GIL serialises threads).",
        ],
        _ => &[],
    };
    v.iter().map(|s| s.to_string()).collect()
}
