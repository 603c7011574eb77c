//! `host_cpu_contention`: the training process's main thread was runnable but waiting for a CPU
//! (run-queue delay from schedstat, preemptions) for a real share of its time: other processes,
//! too many threads, or an affinity that leaves too few CPUs.
//!
//! It fires on a rank when the main thread waited at least 5% of the wall time *and* at least 20%
//! of the time it wanted a CPU (on a CPU or waiting): a thread that is mostly asleep (waiting for
//! the GPU) and waits a little at each wake-up on a busy machine does not count.
//!
//! GPU idle time is attributed once. Of the idle between kernels while the host launched work
//! (`launch`), the share the main thread spent waiting for a CPU of its demand is this verdict's,
//! the rest `launch_bound`'s (`launch_bound` takes [`contention_share`] off); of the idle nothing
//! else explains (`idle`), the wait's share of the wall time. Idle at step starts and after
//! synchronizations stays with `data_loading` and `sync_bound`. Severity: that claimed idle over
//! the window, mean over the ranks with host samples (without GPU times: the wait share itself).

use serde::Serialize;

use super::facts::RankFacts;
use super::job::Job;
use super::{rank_list, Verdict, VerdictKind};
use crate::host::events::{HostMetric as M, HostScope as S};
use crate::host::usage::{usage, HostUsage};
use crate::model::Ns;
use crate::units::share;

/// The main thread waited on a run queue at least this share of the wall time ...
const WAIT_OF_WALL: f64 = 0.05;
/// ... and at least this share of its demand (on a CPU or waiting for one).
const WAIT_OF_DEMAND: f64 = 0.2;

#[derive(Debug, Clone, Default, Serialize)]
pub struct HostCpuContentionEvidence {
    /// Of the worst rank: its main thread's run-queue wait, and that over the wall time.
    pub main_thread_run_delay_ns: Ns,
    pub run_delay_share: f64,
    /// The main thread's wait as a share of its demand (on a CPU or waiting).
    pub wait_of_demand_share: f64,
    /// The main process's (all threads) wait as a share of its demand.
    pub process_run_delay_share: f64,
    pub involuntary_switches_per_s: f64,
    /// GPU idle time this verdict claims, every rank summed (taken off `launch_bound`'s).
    pub gpu_idle_claimed_ns: Ns,
    pub cpus: u32,
    pub machine_cpu_util: Option<f64>,
    /// CPU cores the rest of the machine used beside this process tree (when the machine was sampled).
    pub other_cores: Option<f64>,
    pub run_queue_max: Option<u64>,
    pub psi_cpu_some_share: Option<f64>,
    pub text: String,
}

/// The main thread's wait on a rank, when it counts as contention.
pub(crate) struct CpuWait {
    /// Of the wall time.
    pub of_wall: f64,
    /// Of the main thread's demand.
    pub of_demand: f64,
    pub usage: HostUsage,
}

pub(crate) fn cpu_wait(r: &RankFacts) -> Option<CpuWait> {
    let (a, b) = super::host_pressure::window(r)?;
    let u = usage(&r.host_series, r.pid, a, b);
    let wait = r.host_series.delta((S::Thread, r.pid, M::RunDelayNs), a, b);
    let on_cpu = r.host_series.delta((S::Thread, r.pid, M::OnCpuNs), a, b);
    let of_demand = if wait + on_cpu > 0.0 { wait / (wait + on_cpu) } else { 0.0 };
    let of_wall = u.main_thread_run_delay_share;
    (of_wall >= WAIT_OF_WALL && of_demand >= WAIT_OF_DEMAND).then_some(CpuWait { of_wall, of_demand, usage: u })
}

/// The share of a rank's `launch` idle that is this verdict's (0 when it does not fire there).
pub(crate) fn contention_share(r: &RankFacts) -> f64 {
    cpu_wait(r).map(|w| w.of_demand).unwrap_or(0.0)
}

/// GPU idle time of a rank that the wait explains.
fn claimed_ns(r: &RankFacts, w: &CpuWait) -> Ns {
    (w.of_demand * r.split.launch_ns as f64 + w.of_wall * r.split.idle_ns as f64) as Ns
}

pub fn find(job: &Job) -> Option<Verdict> {
    let mut hit: Vec<(usize, CpuWait)> = Vec::new();
    let mut sampled = 0usize;
    let mut shares = 0.0;
    let mut claimed: Ns = 0;
    for (i, r) in job.ranks.iter().enumerate() {
        if super::host_pressure::window(r).is_none() {
            continue;
        }
        sampled += 1;
        let Some(w) = cpu_wait(r) else { continue };
        if r.gpu_times {
            let c = claimed_ns(r, &w);
            claimed += c;
            shares += c as f64 / r.window_ns().max(1) as f64;
        } else {
            shares += w.of_wall;
        }
        hit.push((i, w));
    }
    if hit.is_empty() {
        return None;
    }
    let severity = shares / sampled as f64;
    hit.sort_by(|x, y| y.1.of_wall.total_cmp(&x.1.of_wall));
    let w = &hit[0].1;
    let u = &w.usage;
    let mut v = Verdict::new(VerdictKind::HostCpuContention, severity);
    v.ranks = job.rank_ids(hit.iter().map(|h| h.0));
    let other = u.machine_cpu_util.map(|m| (m * u.machine_cores as f64 - u.main_cores - u.worker_cores).max(0.0));
    let text = format!(
        "The main thread of {} waited for a CPU {} of the time ({} of the time it wanted one; {:.0} preemptions/s in the process) on {} CPUs{}; that explains {} of GPU idle time.",
        rank_list(&v.ranks),
        share(w.of_wall),
        share(w.of_demand),
        u.main_involuntary_switches_per_s,
        u.cpus,
        match other {
            Some(o) => format!(", while other processes kept {o:.1} cores busy"),
            None => String::new(),
        },
        share(severity)
    );
    v.summary = format!("Host CPU contention: the training thread waits for a CPU {} of the time", share(w.of_wall));
    v.evidence = super::evidence::Evidence::HostCpuContention(HostCpuContentionEvidence {
        main_thread_run_delay_ns: (w.of_wall * u.duration_ns as f64) as Ns,
        run_delay_share: w.of_wall,
        wait_of_demand_share: w.of_demand,
        process_run_delay_share: u.main_run_delay_share,
        involuntary_switches_per_s: u.main_involuntary_switches_per_s,
        gpu_idle_claimed_ns: claimed,
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
