//! `network_bound` with `cause: shared_nic`: a node's NIC, by its counters (`nic_load`), carries at
//! least 70% of its line rate while the node's collectives across nodes run, although NCCL's own
//! proxy sends through it reach at most half of that rate: traffic that is not this job's NCCL
//! (another job, checkpoint writes, a network filesystem, the input pipeline) fills the link, and
//! the collectives across nodes (messages >= 1 MiB, below 70% of the allowed rate) that cross it
//! are slow for it. Severity: the exposed communication's share of wall time times those
//! collectives' share of the collective time times the part of their time beyond the allowed rate.

use super::job::Job;
use super::nccl_network::{
    busiest_nic, heavy_rows, location, NetworkBoundEvidence, NetworkView, LARGE, NEAR_LINE_RATE,
};
use super::nic_load::NicLoad;
use super::{Verdict, VerdictKind};
use crate::nccl_plugin::analysis::BucketLink;
use crate::units::share;

/// NCCL's part of the NIC: at most this share of the line rate for the rest to be other traffic.
const NCCL_PART: f64 = 0.5;

/// GB/s NCCL's proxies sent through `host`'s NIC (the fastest communicator's rate on the wire).
fn nccl_gbps(v: &NetworkView, host: &str) -> f64 {
    v.summary.node_links.iter().filter(|l| l.host == host).map(|l| l.send_gbps).fold(0.0, f64::max)
}

pub fn find(job: &Job, v: &NetworkView) -> Option<Verdict> {
    // The most loaded NIC that other traffic fills.
    let (nic, nccl) = v
        .nics
        .iter()
        .filter(|l| l.busy_share().is_some_and(|s| s >= NEAR_LINE_RATE))
        .map(|l| (l, nccl_gbps(v, &l.host)))
        .filter(|(l, nccl)| *nccl <= NCCL_PART * l.line_gbps)
        .max_by(|a, b| (a.0.busy_gbps.unwrap_or(0.0) - a.1).total_cmp(&(b.0.busy_gbps.unwrap_or(0.0) - b.1)))?;
    let crosses = |b: &BucketLink| v.summary.node_links.iter().any(|l| l.comm == b.comm && l.host == nic.host);
    let (top, time_share) = heavy_rows(v, |b| {
        b.nodes > 1
            && b.size_bucket >= LARGE
            && b.limit == "nic"
            && crosses(b)
            && b.link_share.is_some_and(|s| s < NEAR_LINE_RATE)
    })?;
    let link_share = top.link_share.unwrap_or(0.0);
    let busy = nic.busy_gbps.unwrap_or(0.0);
    let other = (busy - nccl).max(0.0);
    let mut out = Verdict::new(VerdictKind::NetworkBound, v.exposed_share * time_share * (1.0 - link_share));
    out.ranks = v.summary.node_links.iter().filter(|l| l.host == nic.host).flat_map(|l| l.ranks.clone()).collect();
    out.ranks.sort_unstable();
    out.ranks.dedup();
    if out.ranks.is_empty() {
        out.ranks = job.ranks.iter().map(|r| r.rank).collect();
    }
    out.location = location(top);
    out.summary = format!(
        "network-bound: {}'s NIC full ({} of its line rate, {:.1} GB/s not NCCL's), {} of wall time",
        nic.host,
        share(busy / nic.line_gbps),
        other,
        share(out.severity)
    );
    let text = format!(
        "{}'s NIC ({}) carried {:.1} GB/s of its {:.1} GB/s line rate while collectives across nodes ran, but NCCL's sends through it reached {:.1} GB/s: {:.1} GB/s is other traffic{}. {} on communicator {} runs at {:.1} GB/s bus bandwidth, {} of the {:.1} GB/s the links allow; such collectives are {} of the collective time.",
        nic.host,
        nic.ports.join(", "),
        busy,
        nic.line_gbps,
        nccl,
        other,
        idle_note(nic),
        top.op,
        &top.comm[..8],
        top.busbw_gbps,
        share(link_share),
        top.allowed_gbps.unwrap_or(0.0),
        share(time_share)
    );
    out.evidence = super::evidence::Evidence::NetworkBound(NetworkBoundEvidence {
        busbw_gbps: top.busbw_gbps,
        bytes: top.size_bucket,
        calls: top.calls,
        cause: "shared_nic".into(),
        comm: top.comm.clone(),
        exposed_comm_share: v.exposed_share,
        inter_node_share: time_share,
        line_rate_gbps: nic.line_gbps,
        link_share,
        nic_busy_share: busiest_nic(v, &[nic.host.as_str()]).map(|n| n.1),
        nic_host: nic.host.clone(),
        nodes: top.nodes,
        op: top.op.clone(),
        other_traffic_gbps: Some(other),
        text,
    });
    out.advice = vec![
        format!(
            "find what else uses {}'s NIC while the job runs (another job, checkpoint or log writes, a network filesystem, remote data loading: `ibtop`, `sar -n DEV`, the switch port counters)",
            nic.host
        ),
        "move bulk transfers off the training NICs (a separate storage network or NIC, or schedule checkpoints outside the communication phases)".into(),
        "ask for exclusive nodes or network QoS (a traffic class / service level for NCCL: NCCL_IB_TC, NCCL_IB_SL)".into(),
    ];
    Some(out)
}

/// What the NIC carried while no collective ran, when sampled.
fn idle_note(nic: &NicLoad) -> String {
    match nic.idle_gbps {
        Some(g) => format!(" (it carried {g:.1} GB/s while no collective ran)"),
        None => String::new(),
    }
}
