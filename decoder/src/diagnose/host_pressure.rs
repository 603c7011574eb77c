//! Host memory verdict from the host samples (`TPROF_HOST_HZ`; the CPU one is `host_contention.rs`):
//!
//! - `host_memory_pressure`: swapping, PSI memory stalls, memory available near zero, or the tree's
//!   RSS near the machine's memory or its memory cgroup's limit. Severity: the PSI `some` share,
//!   at least 0.1 while swapping or near the limit (what that costs PSI may not see).

use serde::Serialize;

use super::job::Job;
use super::{Verdict, VerdictKind};
use crate::host::events::{HostMetric as M, HostScope as S};
use crate::host::usage::usage;
use crate::model::Ns;
use crate::units::{byte_size, share};

#[derive(Debug, Clone, Default, Serialize)]
pub struct HostMemoryPressureEvidence {
    pub swap_in_pages_per_s: f64,
    pub swap_out_pages_per_s: f64,
    pub psi_memory_some_share: Option<f64>,
    pub psi_memory_full_share: Option<f64>,
    pub mem_available_min_bytes: Option<u64>,
    pub mem_total_bytes: Option<u64>,
    /// The memory cgroup's limit, when the process runs under one.
    pub cgroup_memory_limit_bytes: Option<u64>,
    pub rss_bytes: u64,
    pub major_faults_per_s: f64,
    pub text: String,
}

pub(crate) fn window(r: &super::facts::RankFacts) -> Option<(Ns, Ns)> {
    if r.host_series.is_empty() {
        return None;
    }
    if r.window.1 > r.window.0 {
        Some(r.window)
    } else {
        r.host_series.span()
    }
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
        // The tree's RSS against the smaller of the machine's memory and the cgroup's limit.
        let limit = match (u.mem_total_bytes, u.cgroup_memory_limit_bytes) {
            (Some(t), Some(c)) => Some(t.min(c)),
            (t, c) => t.or(c),
        };
        let near_limit = limit.is_some_and(|t| t > 0 && u.rss_bytes as f64 >= 0.9 * t as f64);
        let psi = u.psi_memory_some_share.unwrap_or(0.0);
        let pressed = psi >= 0.05 || swap_rate >= 100.0 || low_available || near_limit;
        if !pressed {
            continue;
        }
        // Swapping or near a limit shows pressure whose cost PSI may not see: at least 0.1.
        let severity = if swap_rate >= 100.0 || low_available || near_limit { psi.max(0.1) } else { psi };
        let ev = HostMemoryPressureEvidence {
            swap_in_pages_per_s: u.swap_in_pages / secs,
            swap_out_pages_per_s: u.swap_out_pages / secs,
            psi_memory_some_share: u.psi_memory_some_share,
            psi_memory_full_share: u.psi_memory_full_share,
            mem_available_min_bytes: u.mem_available_min_bytes,
            mem_total_bytes: u.mem_total_bytes,
            cgroup_memory_limit_bytes: u.cgroup_memory_limit_bytes,
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
        "Host memory is short: {} available at the lowest of {}, {:.0} pages/s swapped, tasks stalled on memory {} of the time (PSI), the process tree holds {} resident{}.",
        ev.mem_available_min_bytes.map(byte_size).unwrap_or_else(|| "?".into()),
        ev.mem_total_bytes.map(byte_size).unwrap_or_else(|| "?".into()),
        ev.swap_in_pages_per_s + ev.swap_out_pages_per_s,
        share(ev.psi_memory_some_share.unwrap_or(0.0)),
        byte_size(ev.rss_bytes),
        ev.cgroup_memory_limit_bytes.map(|l| format!(" under a {} cgroup limit", byte_size(l))).unwrap_or_default()
    );
    v.summary = format!("Host memory pressure: swapping / memory stalls, {} of the time", share(severity));
    v.evidence = super::evidence::Evidence::HostMemoryPressure(ev);
    v.advice = vec![
        "Lower host memory use: fewer or lighter DataLoader workers (each holds a copy of the dataset object; use shared memory or memory-mapped datasets), smaller prefetch_factor, pinned-memory pools sized to need.".into(),
        "Leave memory for the page cache and other processes, or run on nodes with more memory; disable swap for training nodes so pressure fails fast instead of slowing every step.".into(),
    ];
    Some(v)
}
