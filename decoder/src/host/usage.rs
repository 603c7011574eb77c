//! What a rank's host did over a stretch of time, from its [`HostSeries`]: CPU cores busy for the
//! main process, its main thread and its workers (the descendant processes), how much the main
//! process waited for a CPU, RSS, bytes read and written, network bytes, and the machine's CPU and
//! memory (when this process sampled the machine). `--json` keys of `tprof summary` (`host`).

use serde::Serialize;

use super::events::{HostMetric as M, HostScope as S};
use super::series::HostSeries;
use crate::model::Ns;

const CPU: [M; 2] = [M::CpuUserNs, M::CpuSysNs];

/// Host usage over one stretch (a run, a step, an idle gap).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostUsage {
    pub duration_ns: Ns,
    /// CPU cores busy (CPU time / wall time) for the main process (all its threads).
    pub main_cores: f64,
    /// ... for its main thread (the Python thread in PyTorch).
    pub main_thread_cores: f64,
    /// The main thread's demand: on a CPU or waiting on a run queue, in cores.
    pub main_thread_demand: f64,
    /// Worker processes (descendants) alive in the stretch.
    pub workers: u32,
    /// CPU cores busy for all workers together.
    pub worker_cores: f64,
    /// Their demand (on a CPU or waiting for one), in cores, per worker.
    pub worker_demand_each: f64,
    /// Share of the main process's demand spent waiting on a run queue (0..1).
    pub main_run_delay_share: f64,
    /// The main thread's run-queue wait over the stretch's wall time (0..1).
    pub main_thread_run_delay_share: f64,
    pub main_involuntary_switches_per_s: f64,
    /// RSS of the main process and the workers together, largest in the stretch.
    pub rss_bytes: u64,
    /// Bytes read through system calls (files, pipes, sockets): by the workers when there are
    /// any (the main process reading their pipes is not input), else by the main process.
    pub input_read_bytes: f64,
    /// Bytes the whole tree fetched from storage.
    pub storage_read_bytes: f64,
    pub storage_write_bytes: f64,
    /// Network interfaces (the machine sampler only), every interface summed.
    pub net_rx_bytes: f64,
    pub net_tx_bytes: f64,
    /// CPUs the main process may use.
    pub cpus: u32,
    /// Machine CPU utilisation (0..1) and cores; None when this process did not sample the machine.
    pub machine_cpu_util: Option<f64>,
    pub machine_cores: u32,
    pub mem_total_bytes: Option<u64>,
    pub mem_available_min_bytes: Option<u64>,
    /// The main process's memory cgroup: its limit (smallest in the stretch) and the most charged to it.
    pub cgroup_memory_limit_bytes: Option<u64>,
    pub cgroup_memory_usage_max_bytes: Option<u64>,
    pub swap_in_pages: f64,
    pub swap_out_pages: f64,
    /// PSI: share of the stretch some task stalled on memory / CPU (0..1).
    pub psi_memory_some_share: Option<f64>,
    pub psi_memory_full_share: Option<f64>,
    pub psi_cpu_some_share: Option<f64>,
    pub run_queue_max: Option<u64>,
}

/// One step's row of `host.steps`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostStep {
    pub index: u64,
    pub main_cores: f64,
    pub worker_cores: f64,
    pub rss_bytes: u64,
    pub input_read_bytes: f64,
    pub storage_read_bytes: f64,
    pub net_rx_bytes: f64,
    pub net_tx_bytes: f64,
}

/// One process (thread) of the tree over the run.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HostTask {
    pub id: u32,
    pub name: String,
    pub cores: f64,
    pub read_bytes: f64,
}

/// `tprof summary`'s `host` block of a rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RankHost {
    pub run: HostUsage,
    pub steps: Vec<HostStep>,
    /// The busiest threads of the main process (at most 8) and every worker process.
    pub threads: Vec<HostTask>,
    pub processes: Vec<HostTask>,
    /// The host sampler's own cost per round: wall time, and CPU time of its thread (`tprof-host`).
    pub sampler_rounds: u64,
    pub sampler_ns_per_round: u64,
    pub sampler_cpu_ns_per_round: u64,
}

impl RankHost {
    /// `pid`: the rank's own process; `steps`: (index, start, end).
    pub fn build(s: &HostSeries, pid: u32, steps: &[(u64, Ns, Ns)]) -> Option<RankHost> {
        let (a, b) = s.span()?;
        let run = usage(s, pid, a, b);
        let steps = steps
            .iter()
            .map(|&(index, a, b)| {
                let u = usage(s, pid, a, b);
                HostStep {
                    index,
                    main_cores: u.main_cores,
                    worker_cores: u.worker_cores,
                    rss_bytes: u.rss_bytes,
                    input_read_bytes: u.input_read_bytes,
                    storage_read_bytes: u.storage_read_bytes,
                    net_rx_bytes: u.net_rx_bytes,
                    net_tx_bytes: u.net_tx_bytes,
                }
            })
            .collect();
        let wall = (b - a).max(1) as f64;
        let task = |scope: S, id: u32| HostTask {
            id,
            name: s.name(scope, id).unwrap_or("").to_string(),
            cores: s.delta_sum(scope, id, &CPU, a, b) / wall,
            read_bytes: s.delta((scope, id, M::ReadBytes), a, b),
        };
        let mut threads: Vec<HostTask> =
            s.ids(S::Thread, M::CpuUserNs).into_iter().map(|t| task(S::Thread, t)).collect();
        threads.sort_by(|x, y| y.cores.total_cmp(&x.cores).then(x.id.cmp(&y.id)));
        threads.truncate(8);
        let processes =
            s.ids(S::Process, M::CpuUserNs).into_iter().filter(|&p| p != pid).map(|p| task(S::Process, p)).collect();
        let rounds = s.get((S::Process, pid, M::SamplerRounds)).last().map(|p| p.1).unwrap_or(0);
        let spent = s.get((S::Process, pid, M::SamplerNs)).last().map(|p| p.1).unwrap_or(0);
        let sampler_cpu = s
            .ids(S::Thread, M::OnCpuNs)
            .into_iter()
            .find(|&t| s.name(S::Thread, t) == Some("tprof-host"))
            .map(|t| s.delta((S::Thread, t, M::OnCpuNs), a, b))
            .unwrap_or(0.0);
        Some(RankHost {
            run,
            steps,
            threads,
            processes,
            sampler_rounds: rounds,
            sampler_ns_per_round: spent / rounds.max(1),
            sampler_cpu_ns_per_round: (sampler_cpu / rounds.max(1) as f64) as u64,
        })
    }
}

/// Usage of the tree of `pid` over `[a, b]`.
pub fn usage(s: &HostSeries, pid: u32, a: Ns, b: Ns) -> HostUsage {
    let wall = b.saturating_sub(a).max(1) as f64;
    let secs = wall / 1e9;
    let mut u = HostUsage { duration_ns: b.saturating_sub(a), ..Default::default() };
    let main_cpu = s.delta_sum(S::Process, pid, &CPU, a, b);
    let main_delay = s.delta((S::Process, pid, M::RunDelayNs), a, b);
    u.main_cores = main_cpu / wall;
    u.main_thread_cores = s.delta_sum(S::Thread, pid, &CPU, a, b) / wall;
    let thread_delay = s.delta((S::Thread, pid, M::RunDelayNs), a, b);
    let on_cpu = s.delta((S::Thread, pid, M::OnCpuNs), a, b);
    u.main_thread_demand = (if on_cpu > 0.0 { on_cpu / wall } else { u.main_thread_cores }) + thread_delay / wall;
    u.main_thread_run_delay_share = thread_delay / wall;
    u.main_run_delay_share = if main_cpu + main_delay > 0.0 { main_delay / (main_cpu + main_delay) } else { 0.0 };
    u.main_involuntary_switches_per_s = s.delta((S::Process, pid, M::InvoluntarySwitches), a, b) / secs;
    let workers: Vec<u32> =
        s.ids(S::Process, M::CpuUserNs).into_iter().filter(|&p| p != pid && s.alive(S::Process, p, a, b)).collect();
    u.workers = workers.len() as u32;
    let mut worker_demand = 0.0;
    let mut worker_read = 0.0;
    let mut rss = s.max_in((S::Process, pid, M::RssBytes), a, b).unwrap_or(0);
    for &w in &workers {
        let cpu = s.delta_sum(S::Process, w, &CPU, a, b);
        u.worker_cores += cpu / wall;
        worker_demand += (cpu + s.delta((S::Process, w, M::RunDelayNs), a, b)) / wall;
        worker_read += s.delta((S::Process, w, M::ReadBytes), a, b);
        rss += s.max_in((S::Process, w, M::RssBytes), a, b).unwrap_or(0);
    }
    u.worker_demand_each = if workers.is_empty() { 0.0 } else { worker_demand / workers.len() as f64 };
    u.rss_bytes = rss;
    u.input_read_bytes = if workers.is_empty() { s.delta((S::Process, pid, M::ReadBytes), a, b) } else { worker_read };
    for p in std::iter::once(pid).chain(workers.iter().copied()) {
        u.storage_read_bytes += s.delta((S::Process, p, M::StorageReadBytes), a, b);
        u.storage_write_bytes += s.delta((S::Process, p, M::StorageWriteBytes), a, b);
    }
    for nic in s.ids(S::Nic, M::RxBytes) {
        u.net_rx_bytes += s.delta((S::Nic, nic, M::RxBytes), a, b);
        u.net_tx_bytes += s.delta((S::Nic, nic, M::TxBytes), a, b);
    }
    u.cpus = s.max_in((S::Process, pid, M::CpusAllowed), a, b).unwrap_or(0) as u32;
    u.cgroup_memory_limit_bytes = s.min_in((S::Process, pid, M::CgroupMemLimitBytes), a, b);
    u.cgroup_memory_usage_max_bytes = s.max_in((S::Process, pid, M::CgroupMemUsageBytes), a, b);
    let cores = s.ids(S::Core, M::CoreBusyNs);
    if !cores.is_empty() {
        let busy: f64 = cores.iter().map(|&c| s.delta((S::Core, c, M::CoreBusyNs), a, b)).sum();
        let idle: f64 = cores.iter().map(|&c| s.delta((S::Core, c, M::CoreIdleNs), a, b)).sum();
        u.machine_cpu_util = Some(if busy + idle > 0.0 { busy / (busy + idle) } else { 0.0 });
        u.machine_cores = cores.len() as u32;
    }
    let m = |metric| (S::Machine, 0, metric);
    u.mem_total_bytes = s.max_in(m(M::MemTotalBytes), a, b);
    u.mem_available_min_bytes = s.min_in(m(M::MemAvailableBytes), a, b);
    u.swap_in_pages = s.delta(m(M::SwapInPages), a, b);
    u.swap_out_pages = s.delta(m(M::SwapOutPages), a, b);
    let share = |metric| (!s.get(m(metric)).is_empty()).then(|| (s.delta(m(metric), a, b) / wall).min(1.0));
    u.psi_memory_some_share = share(M::PsiMemSomeNs);
    u.psi_memory_full_share = share(M::PsiMemFullNs);
    u.psi_cpu_some_share = share(M::PsiCpuSomeNs);
    u.run_queue_max = s.max_in(m(M::RunQueue), a, b);
    u
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swap_and_psi_over_a_stretch() {
        // 4 s of machine samples: 100 pages swapped in and 300 out per second, memory stalls
        // (PSI some) 250 ms per second, full 50 ms per second; nothing of the process.
        let mut s = HostSeries::default();
        let sec = 1_000_000_000u64;
        for i in 0..=4u64 {
            for (metric, per_s) in [
                (M::SwapInPages, 100),
                (M::SwapOutPages, 300),
                (M::PsiMemSomeNs, 250_000_000),
                (M::PsiMemFullNs, 50_000_000),
            ] {
                s.series.entry((S::Machine, 0, metric)).or_default().push((i * sec, i * per_s));
            }
        }
        s.finish();
        let u = usage(&s, 1, sec, 3 * sec);
        assert_eq!((u.swap_in_pages, u.swap_out_pages), (200.0, 600.0), "2 s of the stretch");
        assert_eq!(u.psi_memory_some_share, Some(0.25));
        assert_eq!(u.psi_memory_full_share, Some(0.05));
        assert_eq!(u.psi_cpu_some_share, None, "not sampled: unknown, not zero");
    }
}
