//! `slow_collective`: collectives whose bus bandwidth (nccl-tests definition, on the transfer
//! time after the last rank arrived) is well below the best seen for that op and size bucket in
//! the run, or below `--peak-busbw`.
//!
//! Severity: the exposed part of the extra time each slow collective took over the reference.

use std::collections::BTreeMap;

use super::evidence::{Evidence, SlowCollectiveEvidence};
use super::job::{comm_hex, Job};
use super::{rank_list, step_list, CollectiveRef, Location, Verdict, VerdictKind};
use crate::model::{CollOp, Ns};
use crate::summary::{bus_factor, size_bucket};
use crate::units::{byte_size, millis, share};

/// Slower than this fraction of the reference is slow.
pub const SLOW_FRACTION: f64 = 0.5;
/// Messages below this are latency-bound: compared only with each other, never with the peak.
const MIN_PEAK_BYTES: u64 = 1 << 20;

/// One slow collective instance.
#[derive(Debug, Clone)]
pub struct Slow {
    pub instance: usize,
    pub busbw_gbps: f64,
    pub reference_gbps: f64,
    /// Extra time over the reference, per rank index (exposed part only).
    pub exposed_excess: Vec<(usize, Ns)>,
}

/// Bus bandwidth of an instance (GB/s), from its transfer time.
fn busbw(op: CollOp, bytes: u64, nranks: u32, transfer: Ns) -> Option<f64> {
    (transfer > 0 && bytes > 0).then(|| bytes as f64 * bus_factor(op, nranks) / transfer as f64)
}

/// Every slow instance of the run.
pub fn slow_instances(job: &Job) -> Vec<Slow> {
    let mut best: BTreeMap<(u8, u64, u32), f64> = BTreeMap::new();
    let mut samples: Vec<(usize, (u8, u64, u32), f64)> = Vec::new();
    for (i, inst) in job.instances.iter().enumerate() {
        let (op, bytes, nranks) = inst.op_bytes();
        let Some(bw) = inst.transfer_ns.and_then(|t| busbw(op, bytes, nranks, t)) else { continue };
        let key = (op as u8, size_bucket(bytes), nranks);
        let b = best.entry(key).or_insert(0.0);
        *b = b.max(bw);
        samples.push((i, key, bw));
    }
    let mut out = Vec::new();
    for (i, key, bw) in samples {
        let inst = &job.instances[i];
        let (op, bytes, nranks) = inst.op_bytes();
        let mut reference = best.get(&key).copied().unwrap_or(0.0);
        if let Some(peak) = job.opts.peak_busbw_gbps {
            if bytes >= MIN_PEAK_BYTES {
                reference = reference.max(peak);
            }
        }
        if reference <= 0.0 || bw >= SLOW_FRACTION * reference {
            continue;
        }
        let expected = (bytes as f64 * bus_factor(op, nranks) / reference) as Ns;
        let excess = inst.transfer_ns.unwrap_or(0).saturating_sub(expected);
        let exposed_excess =
            inst.members.iter().map(|m| (m.rank, excess.min(m.exposed_ns.saturating_sub(m.wait_ns)))).collect();
        out.push(Slow { instance: i, busbw_gbps: bw, reference_gbps: reference, exposed_excess });
    }
    out
}

/// Exposed extra time of slow collectives per rank index.
pub fn exposed_excess_by_rank(job: &Job) -> Vec<Ns> {
    let mut v = vec![0; job.ranks.len()];
    for s in slow_instances(job) {
        for (r, e) in s.exposed_excess {
            v[r] += e;
        }
    }
    v
}

/// Per (op, size bucket): slow calls, summed busbw, reference, exposed excess, instances.
type Groups = BTreeMap<(u8, u64), (usize, f64, f64, Ns, Vec<usize>)>;

pub fn find(job: &Job) -> Option<Verdict> {
    let slow = slow_instances(job);
    if slow.is_empty() {
        return None;
    }
    let loss: Ns = slow.iter().flat_map(|s| s.exposed_excess.iter().map(|e| e.1)).sum();
    let severity = job.fraction(loss);
    // The worst (op, bucket) group.
    let mut groups: Groups = BTreeMap::new();
    for s in &slow {
        let inst = &job.instances[s.instance];
        let (op, bytes, _) = inst.op_bytes();
        let g = groups.entry((op as u8, size_bucket(bytes))).or_insert((0, 0.0, 0.0, 0, Vec::new()));
        g.0 += 1;
        g.1 += s.busbw_gbps;
        g.2 = g.2.max(s.reference_gbps);
        g.3 += s.exposed_excess.iter().map(|e| e.1).sum::<Ns>();
        g.4.push(s.instance);
    }
    let ((op, bucket), (count, bw_sum, reference, _, insts)) =
        groups.iter().max_by_key(|(_, g)| (g.3, g.0)).map(|(k, g)| (*k, g.clone()))?;
    let op = CollOp::from_u8(op);
    let mean_bw = bw_sum / count as f64;
    let first = &job.instances[insts[0]];
    let total_of_kind =
        job.instances.iter().filter(|i| i.op_bytes().0 == op && size_bucket(i.op_bytes().1) == bucket).count();
    let mut steps: Vec<u64> = slow.iter().filter_map(|s| job.instances[s.instance].step()).collect();
    steps.sort_unstable();
    steps.dedup();
    let ranks: Vec<usize> = first.members.iter().map(|m| m.rank).collect();
    let mut v = Verdict::new(VerdictKind::SlowCollective, severity);
    v.ranks = job.rank_ids(ranks);
    v.steps = steps.clone();
    v.location = Location {
        device: None,
        stream: None,
        kernel: None,
        collective: Some(CollectiveRef {
            comm: comm_hex(first.comm),
            seq: None,
            op: op.name().into(),
            bytes: Some(first.op_bytes().1),
        }),
        calls: Vec::new(),
    };
    let against = if job.opts.peak_busbw_gbps.is_some_and(|p| reference <= p + 1e-9) {
        "the expected peak (--peak-busbw)"
    } else {
        "the best seen for this size in the run"
    };
    let text = format!(
        "{count} of {total_of_kind} {} calls of {} ran at {:.1} GB/s bus bandwidth, {} of {against} ({:.1} GB/s); the extra time not hidden by compute was {} ({} of wall time) on {}.",
        op.name(),
        byte_size(first.op_bytes().1),
        mean_bw,
        share(mean_bw / reference),
        reference,
        millis(loss),
        share(severity),
        rank_list(&v.ranks)
    );
    v.evidence = Evidence::SlowCollective(SlowCollectiveEvidence {
        bytes: first.op_bytes().1,
        busbw_gbps: mean_bw,
        calls: total_of_kind,
        exposed_excess_ns: loss,
        op: op.name(),
        reference: if against.starts_with("the expected") { "peak" } else { "best_in_run" },
        reference_busbw_gbps: reference,
        size_bucket: bucket,
        slow_calls: count,
        text,
    });
    v.summary = format!(
        "Slow {}: {:.1} GB/s busbw vs {:.1} GB/s, {} of wall time",
        op.name(),
        mean_bw,
        reference,
        share(severity)
    );
    if !steps.is_empty() {
        v.summary.push_str(&format!(" (steps {})", step_list(&steps)));
    }
    v.advice = vec![
        "Measure the fabric alone with nccl-tests (all_reduce_perf -b 1M -e 1G -f 2 -g 1 across the same nodes) and compare with the expected busbw.".into(),
        "Check NCCL's choices with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET: the right NICs (NCCL_IB_HCA, NCCL_SOCKET_IFNAME), GPUDirect RDMA (NCCL_NET_GDR_LEVEL), NVLink/P2P not disabled (NCCL_P2P_DISABLE unset).".into(),
        "Larger messages reach higher bandwidth: raise DDP bucket_cap_mb (e.g. 100) or FSDP's wrapping granularity; consider gradient compression (DDP comm hooks: PowerSGD, fp16/bf16 compress).".into(),
        "If only some links are slow, look for a degraded NIC / link (ibstat, nvidia-smi nvlink -s) on the hosts of the listed ranks.".into(),
    ];
    Some(v)
}
