//! Verdicts on the network from the NCCL profiler plugin and the topology records (see
//! `nccl_plugin::analysis`), per communicator and size bucket:
//!
//! - `network_bound`: collectives across nodes (messages >= 1 MiB) reach at least 70% of what the
//!   links allow (the nodes' NIC line rates summed, or NVLink when lower) and take at least a
//!   quarter of the collective time: the network, not the layout, limits them. Communicators whose
//!   ranks would fit on fewer nodes are left to `topology`. Severity: the exposed communication's
//!   share of wall time times those collectives' share of the collective time (`cause: line_rate`;
//!   the busiest NIC's counters are quoted when sampled). Or, by the NIC counters (`nic_load`), a
//!   node's NIC near its line rate while NCCL's sends through it are far below it: other traffic
//!   fills the NIC (`cause: shared_nic`, `nccl_shared_nic`).
//! - `cross_node_latency`: collectives across nodes (messages < 1 MiB) whose bytes at the allowed rate
//!   explain less than a quarter of their time (latency-bound) take at least a quarter of the
//!   collective time. Severity: exposed share x their share x the latency part of their time.

use serde::Serialize;

use super::job::Job;
use super::nic_load::{nic_loads, NicLoad};
use super::{Location, Verdict, VerdictKind};
use crate::nccl_plugin::analysis::BucketLink;
use crate::nccl_plugin::table::NcclPluginSummary;
use crate::units::{byte_size, duration, share};

/// Near the line rate.
pub(super) const NEAR_LINE_RATE: f64 = 0.7;
/// Collectives that matter: this share of the collective (rank-)time at least.
const MIN_TIME_SHARE: f64 = 0.25;
/// Latency-bound: bandwidth explains less than this share of the time.
const LATENCY_BOUND: f64 = 0.25;
pub(super) const LARGE: u64 = 1 << 20;

/// The job's plugin records merged, the exposed communication's share of wall time, and what the
/// nodes' NIC counters say while collectives across nodes ran.
pub struct NetworkView {
    pub summary: NcclPluginSummary,
    pub exposed_share: f64,
    /// Collective GPU time over every rank (ns).
    pub coll_ns: u64,
    pub nics: Vec<NicLoad>,
}

impl NetworkView {
    /// The NIC load of `host`, when its counters were sampled.
    pub fn nic(&self, host: &str) -> Option<&NicLoad> {
        self.nics.iter().find(|l| l.host == host)
    }
}

pub fn view(job: &Job) -> Option<NetworkView> {
    let summary = crate::nccl_plugin::table::merge(job.ranks.iter().map(|r| (r.rank, &r.nccl)))?;
    let topo = summary.topology.as_ref()?;
    let wall: u64 = job.ranks.iter().map(|r| r.window_ns()).sum();
    let comm: u64 = job.ranks.iter().map(|r| r.split.comm_ns + r.split.wait_ns).sum();
    let coll_ns = summary.analysis.iter().map(|b| b.gpu_ns).sum();
    let nics = nic_loads(job, topo);
    (wall > 0 && coll_ns > 0).then_some(NetworkView {
        exposed_share: (comm as f64 / wall as f64).min(1.0),
        coll_ns,
        summary,
        nics,
    })
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct NetworkBoundEvidence {
    pub busbw_gbps: f64,
    pub bytes: u64,
    pub calls: u64,
    /// `line_rate`: NCCL's own traffic fills the links; `shared_nic`: other traffic fills one
    /// node's NIC (`nccl_shared_nic`).
    pub cause: String,
    pub comm: String,
    pub exposed_comm_share: f64,
    pub inter_node_share: f64,
    pub line_rate_gbps: f64,
    pub link_share: f64,
    /// The busiest NIC by its counters while collectives across nodes ran: its node and the share
    /// of its line rate in use (None: no NIC counters).
    pub nic_busy_share: Option<f64>,
    pub nic_host: String,
    pub nodes: u32,
    pub op: String,
    /// GB/s through that NIC beyond NCCL's own sends (shared_nic).
    pub other_traffic_gbps: Option<f64>,
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct CrossNodeLatencyEvidence {
    pub bandwidth_time_share: f64,
    pub calls: u64,
    pub comm: String,
    pub exposed_comm_share: f64,
    pub latency_floor_ns: u64,
    pub mean_ns: u64,
    pub op: String,
    pub size_bucket: u64,
    pub small_share: f64,
    pub text: String,
}

/// The heaviest of the analysis rows `keep` selects, and their share of the collective time, when
/// that share is at least `MIN_TIME_SHARE`.
pub(super) fn heavy_rows(v: &NetworkView, keep: impl Fn(&BucketLink) -> bool) -> Option<(&BucketLink, f64)> {
    let hit: Vec<&BucketLink> = v.summary.analysis.iter().filter(|b| keep(b)).collect();
    let ns: u64 = hit.iter().map(|b| b.gpu_ns).sum();
    let time_share = ns as f64 / v.coll_ns as f64;
    if hit.is_empty() || time_share < MIN_TIME_SHARE {
        return None;
    }
    let top = hit.iter().copied().max_by_key(|b| b.gpu_ns)?;
    Some((top, time_share))
}

pub(super) fn location(b: &BucketLink) -> Location {
    Location {
        collective: Some(super::CollectiveRef {
            comm: format!("0x{}", b.comm),
            seq: None,
            op: b.op.clone(),
            bytes: Some(b.size_bucket),
        }),
        ..Default::default()
    }
}

pub fn find_network_bound(job: &Job, v: &NetworkView) -> Option<Verdict> {
    at_line_rate(job, v).or_else(|| super::nccl_shared_nic::find(job, v))
}

/// The busiest NIC by its counters among `hosts`: (host, share of its line rate).
pub(super) fn busiest_nic<'a>(v: &'a NetworkView, hosts: &[&str]) -> Option<(&'a str, f64)> {
    v.nics
        .iter()
        .filter(|l| hosts.is_empty() || hosts.contains(&l.host.as_str()))
        .filter_map(|l| Some((l.host.as_str(), l.busy_share()?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// NCCL's collectives across nodes near the line rate.
fn at_line_rate(job: &Job, v: &NetworkView) -> Option<Verdict> {
    let (top, time_share) = heavy_rows(v, |b| {
        b.nodes > 1
            && b.nodes <= b.nodes_needed
            && b.size_bucket >= LARGE
            && b.limit == "nic"
            && b.link_share.is_some_and(|s| s >= NEAR_LINE_RATE)
    })?;
    let line = top.allowed_gbps.unwrap_or(0.0);
    let mut out = Verdict::new(VerdictKind::NetworkBound, v.exposed_share * time_share);
    out.ranks = job.ranks.iter().map(|r| r.rank).collect();
    out.location = location(top);
    let nic = busiest_nic(v, &[]);
    let counters = match nic {
        Some((host, s)) => format!(" The NIC counters agree: {host}'s NIC ran at {} of its line rate.", share(s)),
        None => String::new(),
    };
    let text = format!(
        "{} on communicator {} across {} nodes runs at {:.1} GB/s bus bandwidth, {} of the {:.1} GB/s the nodes' NICs allow; collectives across nodes near the line rate are {} of the collective time and exposed communication {} of the wall time.{counters}",
        top.op,
        &top.comm[..8],
        top.nodes,
        top.busbw_gbps,
        share(top.link_share.unwrap_or(0.0)),
        line,
        share(time_share),
        share(v.exposed_share)
    );
    out.summary = format!(
        "network-bound: inter-node {} at {} of the NIC line rate, {} of wall time",
        top.op,
        share(top.link_share.unwrap_or(0.0)),
        share(out.severity)
    );
    out.evidence = super::evidence::Evidence::NetworkBound(NetworkBoundEvidence {
        busbw_gbps: top.busbw_gbps,
        bytes: top.size_bucket,
        calls: top.calls,
        cause: "line_rate".into(),
        comm: top.comm.clone(),
        exposed_comm_share: v.exposed_share,
        inter_node_share: time_share,
        line_rate_gbps: line,
        link_share: top.link_share.unwrap_or(0.0),
        nic_busy_share: nic.map(|n| n.1),
        nic_host: nic.map(|n| n.0.to_string()).unwrap_or_default(),
        nodes: top.nodes,
        op: top.op.clone(),
        other_traffic_gbps: None,
        text,
    });
    out.advice = vec![
        "overlap more communication with compute (earlier gradient buckets, async collectives)".into(),
        "send fewer bytes across nodes: bigger buckets, gradient compression or lower-precision gradients".into(),
        "use hierarchical / HSDP groups so that only one reduction per node crosses the network".into(),
        "add NICs per node or faster links: the collectives are at the line rate".into(),
    ];
    Some(out)
}

pub fn find_cross_node_latency(job: &Job, v: &NetworkView) -> Option<Verdict> {
    let (top, small_share) = heavy_rows(v, |b| {
        b.nodes > 1 && b.size_bucket < LARGE && b.bandwidth_time_share.is_some_and(|s| s < LATENCY_BOUND)
    })?;
    let bw = top.bandwidth_time_share.unwrap_or(0.0);
    let floor = v.summary.analysis.iter().filter(|b| b.comm == top.comm && b.mean_ns > 0).map(|b| b.mean_ns).min();
    let mut out = Verdict::new(VerdictKind::CrossNodeLatency, v.exposed_share * small_share * (1.0 - bw));
    out.ranks = job.ranks.iter().map(|r| r.rank).collect();
    out.location = location(top);
    let text = format!(
        "{} {}-byte {} calls on communicator {} across {} nodes take {} each, {} of it latency (the bytes at the allowed {:.1} GB/s explain {}); latency-bound collectives across nodes are {} of the collective time.",
        top.calls,
        byte_size(top.size_bucket),
        top.op,
        &top.comm[..8],
        top.nodes,
        duration(top.mean_ns),
        share(1.0 - bw),
        top.allowed_gbps.unwrap_or(0.0),
        share(bw),
        share(small_share)
    );
    out.summary = format!(
        "cross-node latency: small {} across nodes, {} latency, {} of wall time",
        top.op,
        share(1.0 - bw),
        share(out.severity)
    );
    out.evidence = super::evidence::Evidence::CrossNodeLatency(CrossNodeLatencyEvidence {
        bandwidth_time_share: bw,
        calls: top.calls,
        comm: top.comm.clone(),
        exposed_comm_share: v.exposed_share,
        latency_floor_ns: floor.unwrap_or(top.mean_ns),
        mean_ns: top.mean_ns,
        op: top.op.clone(),
        size_bucket: top.size_bucket,
        small_share,
        text,
    });
    out.advice = vec![
        "fuse small collectives (bucket gradients, coalesce parameters) so that fewer, larger messages cross nodes"
            .into(),
        "let NCCL use the tree algorithm / LL protocols for small sizes (NCCL_ALGO=Tree, NCCL_PROTO)".into(),
        "keep latency-sensitive groups inside a node (tensor / expert parallel groups per node)".into(),
    ];
    Some(out)
}
