//! `tprof top`: what running processes are doing now, from their rings as they are written.
//!
//! Every refresh decodes the rings again through the damage-tolerant [`tprof_format::RingReader`],
//! which takes only committed chunks (the writer publishes a chunk's length and CRC with one atomic
//! store, at least every `TPROF_COMMIT_MS`): a chunk being written is not read past its last commit,
//! so a view is always of whole, committed records, and a process killed mid-way reads as it was at
//! its last commit. The rings are mapped read-only; the processes are never signalled or paused.
//! The view ([`LiveView`]) is made from the same summary and diagnosis the other commands print.

pub mod procs;

use std::collections::HashMap;

use serde::Serialize;

use crate::compare::RunProfile;
use crate::diagnose::CLEAN_THRESHOLD;
use crate::summary::StepRow;

/// One rank's last steps.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RankLive {
    pub rank: Option<u32>,
    pub label: String,
    pub host: String,
    pub pid: u32,
    /// Steps completed (in the committed data).
    pub steps: usize,
    /// The last step index completed.
    pub last_step: Option<u64>,
    /// Indices of the steps the figures below cover: `[first, last]`, the last `--last` steps
    /// before the newest one (which may still be running).
    pub window: Option<[u64; 2]>,
    /// Mean step time of the last steps, ns.
    pub step_ns: u64,
    /// Shares of those steps' time: useful compute, exposed communication, GPU idle.
    pub compute: f64,
    pub exposed_comm: f64,
    pub idle: f64,
    /// Whether the process still runs (this host only; None for another host's ring).
    pub alive: Option<bool>,
}

/// A kernel in the view.
#[derive(Debug, Clone, Serialize)]
pub struct KernelLive {
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CollectiveLive {
    pub op: String,
    pub size_bucket: u64,
    pub count: u64,
    pub busbw_gbps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct VerdictLive {
    pub kind: &'static str,
    pub severity: f64,
    pub summary: String,
}

/// What one refresh shows (`tprof top --once --json`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct LiveView {
    pub ranks: Vec<RankLive>,
    /// The rank with the longest recent step time.
    pub slowest_rank: Option<String>,
    /// Kernels since the previous refresh (the whole run on the first).
    pub kernels_since_s: f64,
    pub kernels: Vec<KernelLive>,
    pub collectives: Vec<CollectiveLive>,
    pub verdicts: Vec<VerdictLive>,
    pub notes: Vec<String>,
}

/// Kernel totals of the previous refresh (to show the kernels of the last interval).
#[derive(Debug, Default)]
pub struct Previous {
    kernels: HashMap<String, (u64, u64)>,
    at: Option<std::time::Instant>,
}

fn rank_live(r: &crate::summary::RankSummary, last: usize) -> RankLive {
    // The last step may still be running (its range is closed at the last event read): the
    // figures are of the completed steps before it.
    let done = &r.steps[..r.steps.len().saturating_sub(1)];
    let tail: &[StepRow] = &done[done.len().saturating_sub(last)..];
    let total: u64 = tail.iter().map(|s| s.duration_ns).sum();
    let sum = |f: fn(&StepRow) -> u64| tail.iter().map(f).sum::<u64>() as f64 / total.max(1) as f64;
    RankLive {
        rank: r.rank,
        label: r.label.clone(),
        host: r.host.clone(),
        pid: r.pid,
        steps: r.steps.len(),
        last_step: r.steps.last().map(|s| s.index),
        window: tail.first().zip(tail.last()).map(|(a, b)| [a.index, b.index]),
        step_ns: if tail.is_empty() { 0 } else { total / tail.len() as u64 },
        compute: sum(|s| s.compute_ns),
        exposed_comm: sum(|s| s.exposed_comm_ns),
        idle: if total == 0 { 0.0 } else { 1.0 - sum(|s| s.gpu_busy_ns).min(1.0) },
        alive: procs::alive(&r.host, r.pid),
    }
}

/// Builds the view of one refresh; `last` = steps per rank the step figures cover, `top` = rows.
pub fn view(run: &RunProfile, prev: &mut Previous, last: usize, top: usize) -> LiveView {
    let s = &run.summary;
    let ranks: Vec<RankLive> = s.ranks.iter().map(|r| rank_live(r, last.max(1))).collect();
    let slowest_rank = ranks.iter().filter(|r| r.step_ns > 0).max_by_key(|r| r.step_ns).map(|r| r.label.clone());
    let now = std::time::Instant::now();
    let since = prev.at.map(|t| now.duration_since(t).as_secs_f64()).unwrap_or(0.0);
    let mut kernels: Vec<KernelLive> = s
        .kernels
        .iter()
        .map(|k| {
            let (c, t) = prev.kernels.get(&k.name).copied().unwrap_or((0, 0));
            KernelLive {
                name: k.name.clone(),
                count: k.count.saturating_sub(c),
                total_ns: k.total_ns.saturating_sub(t),
            }
        })
        .filter(|k| k.count > 0)
        .collect();
    kernels.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    kernels.truncate(top);
    prev.kernels = s.kernels.iter().map(|k| (k.name.clone(), (k.count, k.total_ns))).collect();
    prev.at = Some(now);
    let collectives = s
        .collectives
        .iter()
        .filter(|c| c.bytes > 0)
        .map(|c| CollectiveLive {
            op: c.op.clone(),
            size_bucket: c.size_bucket,
            count: c.count,
            busbw_gbps: c.busbw_gbps,
        })
        .take(top)
        .collect();
    let verdicts = run
        .diagnosis
        .verdicts
        .iter()
        .filter(|v| v.severity >= CLEAN_THRESHOLD)
        .map(|v| VerdictLive { kind: v.kind.id(), severity: v.severity, summary: v.summary.clone() })
        .collect();
    LiveView { ranks, slowest_rank, kernels_since_s: since, kernels, collectives, verdicts, notes: s.notes.clone() }
}
