//! Host verdicts from the host samples (`TPROF_HOST_HZ`):
//!
//! - `host_cpu_contention`: the training process's main thread was runnable but waiting for a
//!   CPU (run-queue delay from schedstat, preemptions) for a real share of the wall time: other
//!   processes, too many threads, or an affinity that leaves too few CPUs. Severity: that share
//!   times the share of the window the GPU sat idle (GPU idle time the waiting explains when it is
//!   spread evenly; waiting while the GPU is busy costs nothing), mean over the ranks.
//! - `host_memory_pressure`: swapping, PSI memory stalls, memory available near zero, or the tree's
//!   RSS near the machine's memory. Severity: the PSI `some` share when the kernel has PSI, else
//!   0.1 while swapping or near the limit (what it costs is not measurable without PSI).

use serde::Serialize;

use super::job::Job;
use super::{rank_list, Verdict, VerdictKind};
use crate::host::events::{HostMetric as M, HostScope as S};
use crate::host::usage::usage;
use crate::model::Ns;
use crate::units::{byte_size, share};

/// The main thread waited on a run queue at least this share of the wall time.
const CONTENTION_SHARE: f64 = 0.05;

#[derive(Debug, Clone, Default, Serialize)]
pub struct HostCpuContentionEvidence {
    /// Of the worst rank: its main thread's run-queue wait, and that over the wall time.
    pub main_thread_run_delay_ns: Ns,
    pub run_delay_share: f64,
    /// The main process's (all threads) wait as a share of its demand.
    pub process_run_delay_share: f64,
    pub involuntary_switches_per_s: f64,
    pub cpus: u32,
    pub machine_cpu_util: Option<f64>,
    /// CPU cores the rest of the machine used beside this process tree (when the machine was sampled).
    pub other_cores: Option<f64>,
    pub run_queue_max: Option<u64>,
    pub psi_cpu_some_share: Option<f64>,
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HostMemoryPressureEvidence {
    pub swap_in_pages_per_s: f64,
    pub swap_out_pages_per_s: f64,
    pub psi_memory_some_share: Option<f64>,
    pub psi_memory_full_share: Option<f64>,
    pub mem_available_min_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    pub rss_bytes: u64,
    pub major_faults_per_s: f64,
    pub text: String,
}

fn window(r: &super::facts::RankFacts) -> Option<(Ns, Ns)> {
    if r.host_series.is_empty() {
        return None;
    }
    if r.window.1 > r.window.0 {
        Some(r.window)
    } else {
        r.host_series.span()
    }
}

pub fn find_cpu_contention(job: &Job) -> Option<Verdict> {
    let mut hit: Vec<(usize, f64, crate::host::HostUsage)> = Vec::new();
    let mut shares = Vec::new();
    for (i, r) in job.ranks.iter().enumerate() {
        let Some((a, b)) = window(r) else { continue };
        let u = usage(&r.host_series, r.pid, a, b);
        let sp = &r.split;
        let idle = (sp.data_ns + sp.launch_ns + sp.sync_ns + sp.idle_ns) as f64 / r.window_ns().max(1) as f64;
        shares.push(u.main_thread_run_delay_share * if r.gpu_times { idle.min(1.0) } else { 1.0 });
        if u.main_thread_run_delay_share >= CONTENTION_SHARE {
            hit.push((i, u.main_thread_run_delay_share, u));
        }
    }
    if hit.is_empty() {
        return None;
    }
    let severity = shares.iter().sum::<f64>() / shares.len() as f64;
    hit.sort_by(|x, y| y.1.total_cmp(&x.1));
    let (_, worst, u) = &hit[0];
    let mut v = Verdict::new(VerdictKind::HostCpuContention, severity);
    v.ranks = job.rank_ids(hit.iter().map(|h| h.0));
    let other = u.machine_cpu_util.map(|m| (m * u.machine_cores as f64 - u.main_cores - u.worker_cores).max(0.0));
    let text = format!(
        "The main thread of {} waited for a CPU {} of the time (run queue delay; {:.0} preemptions/s in the process) on {} CPUs{}.",
        rank_list(&v.ranks),
        share(*worst),
        u.main_involuntary_switches_per_s,
        u.cpus,
        match other {
            Some(o) => format!(", while other processes kept {o:.1} cores busy"),
            None => String::new(),
        }
    );
    v.summary = format!("Host CPU contention: the training thread waits for a CPU {} of the time", share(*worst));
    v.evidence = super::evidence::Evidence::HostCpuContention(HostCpuContentionEvidence {
        main_thread_run_delay_ns: (u.main_thread_run_delay_share * u.duration_ns as f64) as Ns,
        run_delay_share: *worst,
        process_run_delay_share: u.main_run_delay_share,
        involuntary_switches_per_s: u.main_involuntary_switches_per_s,
        cpus: u.cpus,
        machine_cpu_util: u.machine_cpu_util,
        other_cores: other,
        run_queue_max: u.run_queue_max,
        psi_cpu_some_share: u.psi_cpu_some_share,
        text,
    });
    v.advice = vec![
        "Give the training processes their own CPUs: stop or move other work on the machine, or raise the job's CPU request / cgroup limit.".into(),
        "Pin each rank to the cores of its GPU's NUMA node (torchrun --bind-numa / numactl --cpunodebind) and keep DataLoader workers plus intra-op threads (OMP_NUM_THREADS) within the cores left.".into(),
    ];
    Some(v)
}

pub fn find_memory_pressure(job: &Job) -> Option<Verdict> {
    let mut best: Option<(f64, usize, HostMemoryPressureEvidence)> = None;
    for (i, r) in job.ranks.iter().enumerate() {
        let Some((a, b)) = window(r) else { continue };
        let u = usage(&r.host_series, r.pid, a, b);
        let secs = (b - a).max(1) as f64 / 1e9;
        let majflt = r.host_series.delta((S::Process, r.pid, M::MajorFaults), a, b) / secs;
        let swap_rate = (u.swap_in_pages + u.swap_out_pages) / secs;
        let low_available = matches!((u.mem_available_min_bytes, u.mem_total_bytes), (Some(av), Some(t)) if t > 0 && (av as f64) < 0.05 * t as f64);
        let near_limit = u.mem_total_bytes.is_some_and(|t| t > 0 && u.rss_bytes as f64 >= 0.9 * t as f64);
        let psi = u.psi_memory_some_share.unwrap_or(0.0);
        let pressed = psi >= 0.05 || swap_rate >= 100.0 || low_available || near_limit;
        if !pressed {
            continue;
        }
        let severity = if u.psi_memory_some_share.is_some() && psi > 0.0 { psi } else { 0.1 };
        let ev = HostMemoryPressureEvidence {
            swap_in_pages_per_s: u.swap_in_pages / secs,
            swap_out_pages_per_s: u.swap_out_pages / secs,
            psi_memory_some_share: u.psi_memory_some_share,
            psi_memory_full_share: u.psi_memory_full_share,
            mem_available_min_bytes: u.mem_available_min_bytes,
            mem_total_bytes: u.mem_total_bytes,
            rss_bytes: u.rss_bytes,
            major_faults_per_s: majflt,
            text: String::new(),
        };
        if best.as_ref().is_none_or(|b| severity > b.0) {
            best = Some((severity, i, ev));
        }
    }
    let (severity, i, mut ev) = best?;
    let mut v = Verdict::new(VerdictKind::HostMemoryPressure, severity);
    v.ranks = job.rank_ids([i]);
    ev.text = format!(
        "Host memory is short: {} available at the lowest of {}, {:.0} pages/s swapped, tasks stalled on memory {} of the time (PSI), the process tree holds {} resident.",
        ev.mem_available_min_bytes.map(byte_size).unwrap_or_else(|| "?".into()),
        ev.mem_total_bytes.map(byte_size).unwrap_or_else(|| "?".into()),
        ev.swap_in_pages_per_s + ev.swap_out_pages_per_s,
        share(ev.psi_memory_some_share.unwrap_or(0.0)),
        byte_size(ev.rss_bytes)
    );
    v.summary = format!("Host memory pressure: swapping / memory stalls, {} of the time", share(severity));
    v.evidence = super::evidence::Evidence::HostMemoryPressure(ev);
    v.advice = vec![
        "Lower host memory use: fewer or lighter DataLoader workers (each holds a copy of the dataset object; use shared memory or memory-mapped datasets), smaller prefetch_factor, pinned-memory pools sized to need.".into(),
        "Leave memory for the page cache and other processes, or run on nodes with more memory; disable swap for training nodes so pressure fails fast instead of slowing every step.".into(),
    ];
    Some(v)
}
