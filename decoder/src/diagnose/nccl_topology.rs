//! `topology`: collectives across nodes far below what the links allow while the links could carry
//! more (see `nccl_plugin::analysis`), for a reason the layout gives:
//!
//! - `degraded_link`: a node's proxy sends on a communicator reach less than half of its NIC line
//!   rate while another node's reach at least 70% of its own: that node's link is slow (named),
//!   unless its NIC counters show the link 70% used or more (then other traffic fills it:
//!   `network_bound`, `shared_nic`).
//! - `spread_over_nodes`: a communicator's ranks span more nodes than they need (the job's ranks
//!   per node would hold them), so its large collectives cross the network instead of NVLink.
//!
//! Severity: the exposed communication's share of wall time times the share of the collective time
//! that would go with the cause (time beyond the bytes at the allowed rate; spread: beyond the bytes
//! at the ranks' NVLink rate).

use serde::Serialize;

use super::job::Job;
use super::nccl_network::NetworkView;
use super::{Location, Verdict, VerdictKind};
use crate::nccl_plugin::analysis::BucketLink;
use crate::units::share;

const DEGRADED: f64 = 0.5;
const HEALTHY: f64 = 0.7;
const LARGE: u64 = 1 << 20;

#[derive(Debug, Clone, Default, Serialize)]
pub struct TopologyEvidence {
    pub allowed_gbps: f64,
    pub busbw_gbps: f64,
    pub cause: String,
    pub comm: String,
    pub degraded_hosts: Vec<String>,
    pub excess_ns: u64,
    pub line_rate_gbps: f64,
    pub link_gbps: f64,
    /// degraded_link: the share of the slow node's line rate its NIC counters show in use while
    /// collectives across nodes ran (None: not sampled).
    pub nic_busy_share: Option<f64>,
    pub nodes: u32,
    pub nodes_needed: u32,
    pub op: String,
    pub text: String,
}

/// Time of `b` beyond its bytes at `gbps`.
fn excess(b: &BucketLink, gbps: f64) -> u64 {
    if gbps <= 0.0 || b.busbw_gbps <= 0.0 {
        return 0;
    }
    (b.gpu_ns as f64 * (1.0 - (b.busbw_gbps / gbps).min(1.0))) as u64
}

pub fn find(job: &Job, v: &NetworkView) -> Option<Verdict> {
    let rows: Vec<&BucketLink> = v.summary.analysis.iter().filter(|b| b.nodes > 1 && b.size_bucket >= LARGE).collect();
    let mut best: Option<(u64, TopologyEvidence, &BucketLink, Vec<u32>)> = None;
    for b in &rows {
        let links: Vec<_> = v.summary.node_links.iter().filter(|l| l.comm == b.comm && l.line_gbps > 0.0).collect();
        // A node whose NIC counters show the link full is busy with other traffic, not degraded
        // (`nccl_shared_nic`).
        let full = |host: &str| v.nic(host).and_then(|n| n.busy_share()).is_some_and(|s| s >= HEALTHY);
        let slow: Vec<_> = links.iter().filter(|l| l.send_gbps < DEGRADED * l.line_gbps && !full(&l.host)).collect();
        let healthy = links.iter().any(|l| l.send_gbps >= HEALTHY * l.line_gbps);
        let allowed = b.allowed_gbps.unwrap_or(0.0);
        let mut ev = TopologyEvidence {
            allowed_gbps: allowed,
            busbw_gbps: b.busbw_gbps,
            comm: b.comm.clone(),
            nodes: b.nodes,
            nodes_needed: b.nodes_needed,
            op: b.op.clone(),
            ..Default::default()
        };
        let (cost, ranks) = if !slow.is_empty() && healthy {
            let worst =
                slow.iter().min_by(|a, c| (a.send_gbps / a.line_gbps).total_cmp(&(c.send_gbps / c.line_gbps)))?;
            ev.cause = "degraded_link".into();
            ev.degraded_hosts = slow.iter().map(|l| l.host.clone()).collect();
            ev.link_gbps = worst.send_gbps;
            ev.line_rate_gbps = worst.line_gbps;
            ev.excess_ns = excess(b, allowed);
            ev.nic_busy_share = v.nic(&worst.host).and_then(|n| n.busy_share());
            let counters = match ev.nic_busy_share {
                Some(s) => format!(" Its NIC counters show the link {} used, so nothing else fills it.", share(s)),
                None => String::new(),
            };
            ev.text = format!(
                "communicator {}: node {} sends at {:.1} GB/s on a {:.1} GB/s line rate while the other nodes reach theirs; {} runs at {:.1} GB/s bus bandwidth of the {:.1} GB/s the links allow.{counters}",
                &b.comm[..8],
                ev.degraded_hosts.join(", "),
                worst.send_gbps,
                worst.line_gbps,
                b.op,
                b.busbw_gbps,
                allowed
            );
            (ev.excess_ns, slow.iter().flat_map(|l| l.ranks.clone()).collect())
        } else if b.nodes > b.nodes_needed {
            let nvlink = b.nvlink_gbps.unwrap_or(0.0);
            ev.cause = "spread_over_nodes".into();
            ev.link_gbps = nvlink;
            ev.line_rate_gbps = allowed;
            ev.excess_ns = excess(b, nvlink);
            ev.text = format!(
                "communicator {} has {} ranks on {} nodes although {} node(s) hold them: its {} crosses the network at {:.1} GB/s bus bandwidth where NVLink would allow {:.1} GB/s.",
                &b.comm[..8],
                b.nranks,
                b.nodes,
                b.nodes_needed,
                b.op,
                b.busbw_gbps,
                nvlink
            );
            (ev.excess_ns, Vec::new())
        } else {
            continue;
        };
        if best.as_ref().is_none_or(|(c, ..)| cost > *c) {
            best = Some((cost, ev, b, ranks));
        }
    }
    let (cost, ev, b, ranks) = best?;
    let mut out = Verdict::new(VerdictKind::Topology, v.exposed_share * cost as f64 / v.coll_ns as f64);
    out.ranks = if ranks.is_empty() { job.ranks.iter().map(|r| r.rank).collect() } else { ranks };
    out.location = Location {
        collective: Some(super::CollectiveRef {
            comm: format!("0x{}", b.comm),
            seq: None,
            op: b.op.clone(),
            bytes: Some(b.size_bucket),
        }),
        ..Default::default()
    };
    out.summary = match ev.cause.as_str() {
        "degraded_link" => format!(
            "topology: degraded link on {} ({:.1} of {:.1} GB/s), {} of wall time",
            ev.degraded_hosts.join(", "),
            ev.link_gbps,
            ev.line_rate_gbps,
            share(out.severity)
        ),
        _ => format!(
            "topology: communicator {} spread over {} nodes where {} would do, {} of wall time",
            &b.comm[..8],
            b.nodes,
            b.nodes_needed,
            share(out.severity)
        ),
    };
    out.advice = match ev.cause.as_str() {
        "degraded_link" => vec![
            format!(
                "check the NIC, cable and switch port of {} (ibstat, link errors, negotiated rate)",
                ev.degraded_hosts.join(", ")
            ),
            "drain the node or exclude it from the job until the link is fixed".into(),
        ],
        _ => vec![
            "lay out the process groups so that each group's ranks share a node (contiguous ranks per group)".into(),
            "put the bandwidth-heavy groups (tensor / expert parallel) inside nodes and the data-parallel one across"
                .into(),
        ],
    };
    out.evidence = super::evidence::Evidence::Topology(ev);
    Some(out)
}
