//! `exposed_communication`: communication kernels not overlapped by compute, per step, with the
//! collectives responsible. Waiting for a late rank (straggler) and the extra time of slow
//! collectives are reported by those verdicts and left out here.

use std::collections::BTreeMap;

use super::evidence::{Evidence, ExposedCollective, ExposedCommunicationEvidence};
use super::job::{comm_hex, Job};
use super::{rank_list, step_list, CollectiveRef, Verdict, VerdictKind};
use crate::model::{CollOp, Ns};
use crate::summary::size_bucket;
use crate::units::{byte_size, millis, share};

/// Per (op, size bucket): calls, exposed ns, kernel ns, a communicator, bytes.
type ByCollective = BTreeMap<(u8, u64), (u64, Ns, Ns, u64, u64)>;

pub fn find(job: &Job) -> Option<Verdict> {
    let slow = super::slow_collective::exposed_excess_by_rank(job);
    let per_rank: Vec<Ns> =
        job.ranks.iter().enumerate().map(|(i, r)| r.split.comm_ns.saturating_sub(slow[i])).collect();
    let loss: Ns = per_rank.iter().sum();
    if loss == 0 {
        return None;
    }
    let severity = job.fraction(loss);
    // Which collectives were exposed: (op, bucket) -> (count, exposed, total kernel time, comm, bytes).
    let mut by: ByCollective = BTreeMap::new();
    let mut total_comm: Ns = 0;
    for r in &job.ranks {
        for c in &r.colls {
            let d = c.gpu.map(|g| g.1 - g.0).unwrap_or(0);
            total_comm += d;
            let e = by.entry((c.op as u8, size_bucket(c.bytes))).or_default();
            e.0 += 1;
            e.1 += c.exposed_ns;
            e.2 += d;
            e.3 = c.comm;
            e.4 = c.bytes;
        }
    }
    let mut rows: Vec<_> = by.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1 .1));
    let nsteps: u64 =
        job.ranks.iter().map(|r| r.steps.iter().filter(|s| s.gpu_start.is_some()).count() as u64).sum::<u64>().max(1);
    let exposed_per_step = job.ranks.iter().flat_map(|r| r.steps.iter()).map(|s| s.split.comm_ns).sum::<Ns>() / nsteps;
    let step_ns = job.median_step_ns();
    let mut steps: Vec<u64> = job
        .ranks
        .iter()
        .flat_map(|r| r.steps.iter())
        .filter(|s| s.split.comm_ns * 20 > s.gpu_window_ns().max(1))
        .map(|s| s.index)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    let ranks: Vec<usize> = (0..job.ranks.len()).filter(|&i| per_rank[i] > 0).collect();
    let mut v = Verdict::new(VerdictKind::ExposedCommunication, severity);
    v.ranks = job.rank_ids(ranks);
    v.steps = steps.clone();
    if let Some(((op, _), (_, _, _, comm, bytes))) = rows.first() {
        v.location.collective = Some(CollectiveRef {
            comm: comm_hex(*comm),
            seq: None,
            op: CollOp::from_u8(*op).name().into(),
            bytes: Some(*bytes),
        });
    }
    let overlap = if total_comm == 0 { 0.0 } else { 1.0 - (loss as f64 / total_comm as f64).min(1.0) };
    let listed: Vec<String> = rows
        .iter()
        .take(3)
        .map(|((op, _), (n, exp, _, _, bytes))| {
            format!(
                "{} x{} {} ({} exposed per step)",
                CollOp::from_u8(*op).name(),
                n / nsteps.max(1),
                byte_size(*bytes),
                millis(exp / nsteps)
            )
        })
        .collect();
    // Traces whose communication kernels have no collective calls (some Kineto traces) list none.
    let listed = if listed.is_empty() { String::new() } else { format!(": {}", listed.join(", ")) };
    let text = format!(
        "{} per step of communication ran with no compute to hide it (step {}; {} of all collective time overlapped) on {}{}; {} of wall time.",
        millis(exposed_per_step),
        millis(step_ns),
        share(overlap),
        rank_list(&v.ranks),
        listed,
        share(severity)
    );
    v.evidence = Evidence::ExposedCommunication(ExposedCommunicationEvidence {
        collective_ns: total_comm,
        collectives: rows
            .iter()
            .map(|((op, bucket), (n, exp, total, _, bytes))| ExposedCollective {
                bytes: *bytes,
                calls: *n,
                exposed_ns: *exp,
                kernel_ns: *total,
                op: CollOp::from_u8(*op).name(),
                size_bucket: *bucket,
            })
            .collect(),
        exposed_per_step_ns: exposed_per_step,
        overlapped_share: overlap,
        step_ns,
        text,
    });
    v.summary = format!(
        "Communication not overlapped with compute: {} per step, {} of wall time",
        millis(exposed_per_step),
        share(severity)
    );
    if !steps.is_empty() {
        v.summary.push_str(&format!(" (steps {})", step_list(&steps)));
    }
    v.advice = vec![
        "Overlap gradient all-reduce with backward: keep DDP's bucketing on (no manual all_reduce after loss.backward()), DistributedDataParallel(bucket_cap_mb=25..100, gradient_as_bucket_view=True, static_graph=True).".into(),
        "Make the last bucket small so little is left after backward (smaller bucket_cap_mb, or first-bucket tuning); with gradient accumulation use model.no_sync() on the non-final micro-steps.".into(),
        "FSDP / ZeRO: FullyShardedDataParallel(backward_prefetch=BackwardPrefetch.BACKWARD_PRE, forward_prefetch=True, limit_all_gathers=True); DeepSpeed overlap_comm: true.".into(),
        "Put collectives on their own stream (DDP and FSDP do); JAX/XLA: --xla_gpu_enable_latency_hiding_scheduler=true and async collectives. NCCL tuning (NCCL_ALGO, NCCL_PROTO, NCCL_MIN_NCHANNELS) helps only once the overlap is right.".into(),
    ];
    Some(v)
}
