//! `topology`: collectives (>= 1 MiB) far below what the links allow while the links could carry
//! more (see `nccl_plugin::analysis`), for a reason the layout or NCCL's choices give:
//!
//! - `gpu_nic_cross_socket`: a node's proxy sends on a communicator reach less than half of its NIC
//!   line rate and its GPUs' nearest NIC is on the other socket (PCIe path SYS: no GPU Direct RDMA at
//!   NCCL's default `NCCL_NET_GDR_LEVEL`, the data crosses the CPU interconnect): that node is named.
//! - `degraded_link`: a node's proxy sends reach less than half of its NIC line rate while another
//!   node's reach at least 70% of its own: that node's link is slow (named), unless its NIC
//!   counters show the link 70% used or more (then other traffic fills it: `network_bound`,
//!   `shared_nic`).
//! - `p2p_disabled`, `protocol_mismatch`, `too_few_channels`: from NCCL's recorded choices and the
//!   NCCL settings of the ranks (`nccl_tuning_causes`).
//! - `spread_over_nodes`: a communicator's ranks span more nodes than they need (the job's ranks
//!   per node would hold them), so its large collectives cross the network instead of NVLink.
//!
//! Severity: the exposed communication's share of wall time times the share of the collective time
//! that would go with the cause (time beyond the bytes at the allowed rate; spread: beyond the bytes
//! at the ranks' NVLink rate).

use serde::Serialize;

use super::job::Job;
use super::nccl_network::NetworkView;
use super::nccl_tuning_causes as tuning;
use super::{Location, Verdict, VerdictKind};
use crate::nccl_plugin::analysis::BucketLink;
use crate::units::share;

const DEGRADED: f64 = 0.5;
const HEALTHY: f64 = 0.7;
const LARGE: u64 = 1 << 20;

#[derive(Debug, Clone, Default, Serialize)]
pub struct TopologyEvidence {
    /// The algorithm, protocol and channels NCCL used most for these collectives.
    pub algo: String,
    pub allowed_gbps: f64,
    pub busbw_gbps: f64,
    pub cause: String,
    /// too_few_channels: the channels the links need at the rate each channel reached.
    pub channels_needed: u32,
    pub comm: String,
    pub degraded_hosts: Vec<String>,
    pub excess_ns: u64,
    pub line_rate_gbps: f64,
    pub link_gbps: f64,
    pub nchannels: u32,
    /// degraded_link: the share of the slow node's line rate its NIC counters show in use while
    /// collectives across nodes ran (None: not sampled).
    pub nic_busy_share: Option<f64>,
    /// gpu_nic_cross_socket: the PCIe path from the named node's GPUs to their nearest NIC.
    pub nic_path: String,
    pub nodes: u32,
    pub nodes_needed: u32,
    pub op: String,
    pub per_channel_gbps: f64,
    pub proto: String,
    /// The NCCL settings (`NAME=value`) behind the cause, as the ranks' environments had them.
    pub settings: Vec<String>,
    pub text: String,
}

/// One cause found for one row: its cost (ns beyond the allowed rate), evidence and the ranks named.
pub struct Candidate {
    pub cost: u64,
    pub ev: TopologyEvidence,
    pub ranks: Vec<u32>,
}

/// Time of `b` beyond its bytes at `gbps`.
pub fn excess(b: &BucketLink, gbps: f64) -> u64 {
    if gbps <= 0.0 || b.busbw_gbps <= 0.0 {
        return 0;
    }
    (b.gpu_ns as f64 * (1.0 - (b.busbw_gbps / gbps).min(1.0))) as u64
}

/// A node whose sends reach under half of its line rate: cross-socket when its GPUs' nearest NIC is
/// across sockets, else a degraded link when another node is healthy.
fn node_link_cause(v: &NetworkView, b: &BucketLink) -> Option<Candidate> {
    let topo = v.summary.topology.as_ref()?;
    let links: Vec<_> = v.summary.node_links.iter().filter(|l| l.comm == b.comm && l.line_gbps > 0.0).collect();
    let ratio = |l: &&&crate::nccl_plugin::analysis::NodeLink| l.send_gbps / l.line_gbps;
    // A node whose NIC counters show the link full is busy with other traffic, not degraded
    // (`nccl_shared_nic`).
    let full = |host: &str| v.nic(host).and_then(|n| n.busy_share()).is_some_and(|s| s >= HEALTHY);
    let slow: Vec<_> = links.iter().filter(|l| ratio(l) < DEGRADED && !full(&l.host)).collect();
    let healthy = links.iter().any(|l| ratio(&l) >= HEALTHY);
    let cross = |host: &str| topo.gpus.iter().any(|g| g.host == host && g.nic_path == "SYS");
    let crossed: Vec<_> = slow.iter().filter(|l| cross(&l.host)).collect();
    let (cause, named): (&str, Vec<_>) = if !crossed.is_empty() {
        ("gpu_nic_cross_socket", crossed.into_iter().copied().collect())
    } else if !slow.is_empty() && healthy {
        ("degraded_link", slow)
    } else {
        return None;
    };
    let worst = named.iter().min_by(|a, c| ratio(a).total_cmp(&ratio(c)))?;
    let allowed = b.allowed_gbps.unwrap_or(0.0);
    let hosts: Vec<String> = named.iter().map(|l| l.host.clone()).collect();
    let mut ev = TopologyEvidence {
        allowed_gbps: allowed,
        busbw_gbps: b.busbw_gbps,
        cause: cause.into(),
        comm: b.comm.clone(),
        degraded_hosts: hosts.clone(),
        link_gbps: worst.send_gbps,
        line_rate_gbps: worst.line_gbps,
        nodes: b.nodes,
        nodes_needed: b.nodes_needed,
        op: b.op.clone(),
        excess_ns: excess(b, allowed),
        ..Default::default()
    };
    let label = &b.comm[..8];
    ev.nic_busy_share = v.nic(&worst.host).and_then(|n| n.busy_share());
    ev.text = if cause == "degraded_link" {
        let counters = match ev.nic_busy_share {
            Some(s) => format!(" Its NIC counters show the link {} used, so nothing else fills it.", share(s)),
            None => String::new(),
        };
        format!(
            "communicator {label}: node {} sends at {:.1} GB/s on a {:.1} GB/s line rate while the other nodes reach theirs; {} runs at {:.1} GB/s bus bandwidth of the {:.1} GB/s the links allow.{counters}",
            hosts.join(", "), worst.send_gbps, worst.line_gbps, b.op, b.busbw_gbps, allowed
        )
    } else {
        ev.nic_path = "SYS".into();
        ev.settings = tuning_settings(topo);
        let nic = topo.gpus.iter().find(|g| g.host == worst.host).map_or(String::new(), |g| {
            let numa = topo
                .node(&g.host)
                .and_then(|n| n.nics.iter().find(|c| c.name == g.nearest_nic))
                .map_or(-1, |c| c.numa_node);
            format!(" (GPU on NUMA node {}, {} on NUMA node {numa})", g.numa_node, g.nearest_nic)
        });
        format!(
            "communicator {label}: the GPUs of node {} reach their NIC across CPU sockets (path SYS{nic}), so NCCL sends without GPU Direct RDMA through host memory: {:.1} GB/s on a {:.1} GB/s line rate; {} runs at {:.1} GB/s bus bandwidth of the {:.1} GB/s the links allow.",
            hosts.join(", "), worst.send_gbps, worst.line_gbps, b.op, b.busbw_gbps, allowed
        )
    };
    Some(Candidate { cost: ev.excess_ns, ev, ranks: named.iter().flat_map(|l| l.ranks.clone()).collect() })
}

/// The settings that decide the NIC a GPU uses and whether GPU Direct RDMA is used.
fn tuning_settings(topo: &crate::nccl_plugin::topology::TopologySummary) -> Vec<String> {
    tuning::settings(topo, &["NCCL_IB_HCA", "NCCL_NET_GDR_LEVEL", "NCCL_CROSS_NIC", "NCCL_TOPO_FILE"])
}

fn spread_cause(b: &BucketLink) -> Option<Candidate> {
    if b.nodes <= b.nodes_needed {
        return None;
    }
    let nvlink = b.nvlink_gbps.unwrap_or(0.0);
    let ev = TopologyEvidence {
        allowed_gbps: b.allowed_gbps.unwrap_or(0.0),
        busbw_gbps: b.busbw_gbps,
        cause: "spread_over_nodes".into(),
        comm: b.comm.clone(),
        link_gbps: nvlink,
        line_rate_gbps: b.allowed_gbps.unwrap_or(0.0),
        nodes: b.nodes,
        nodes_needed: b.nodes_needed,
        op: b.op.clone(),
        excess_ns: excess(b, nvlink),
        text: format!(
            "communicator {} has {} ranks on {} nodes although {} node(s) hold them: its {} crosses the network at {:.1} GB/s bus bandwidth where NVLink would allow {:.1} GB/s.",
            &b.comm[..8], b.nranks, b.nodes, b.nodes_needed, b.op, b.busbw_gbps, nvlink
        ),
        ..Default::default()
    };
    Some(Candidate { cost: ev.excess_ns, ev, ranks: Vec::new() })
}

pub fn find(job: &Job, v: &NetworkView) -> Option<Verdict> {
    let mut best: Option<(Candidate, &BucketLink)> = None;
    for b in v.summary.analysis.iter().filter(|b| b.size_bucket >= LARGE) {
        let inter = b.nodes > 1;
        let found = inter
            .then(|| node_link_cause(v, b))
            .flatten()
            .or_else(|| tuning::find(v, b))
            .or_else(|| inter.then(|| spread_cause(b)).flatten());
        let Some(c) = found else { continue };
        if best.as_ref().is_none_or(|(o, _)| c.cost > o.cost) {
            best = Some((c, b));
        }
    }
    let (Candidate { cost, ev, ranks }, b) = best?;
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
        "gpu_nic_cross_socket" => format!(
            "topology: GPU and NIC on different sockets on {} ({:.1} of {:.1} GB/s), {} of wall time",
            ev.degraded_hosts.join(", "),
            ev.link_gbps,
            ev.line_rate_gbps,
            share(out.severity)
        ),
        "p2p_disabled" => format!(
            "topology: P2P disabled ({}), {} at {:.1} of {:.1} GB/s, {} of wall time",
            ev.settings.join(", "),
            b.op,
            ev.busbw_gbps,
            ev.allowed_gbps,
            share(out.severity)
        ),
        "protocol_mismatch" => format!(
            "topology: {} protocol on {} of {} bytes ({:.1} of {:.1} GB/s), {} of wall time",
            ev.proto,
            b.op,
            b.size_bucket,
            ev.busbw_gbps,
            ev.allowed_gbps,
            share(out.severity)
        ),
        "too_few_channels" => format!(
            "topology: {} channels where the links need {} ({:.1} of {:.1} GB/s), {} of wall time",
            ev.nchannels,
            ev.channels_needed,
            ev.busbw_gbps,
            ev.allowed_gbps,
            share(out.severity)
        ),
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
        "gpu_nic_cross_socket" => vec![
            format!(
                "on {}, give each GPU the NIC on its own PCIe switch / socket (NCCL_IB_HCA, or a NIC-per-GPU layout; `nvidia-smi topo -m` shows the path)",
                ev.degraded_hosts.join(", ")
            ),
            "pin each rank's CPU threads and memory to its GPU's NUMA node (numactl --cpunodebind/--membind, or the launcher's binding)".into(),
            "if the node has no NIC on that socket, NCCL_NET_GDR_LEVEL=SYS enables GPU Direct RDMA across it (measure: it is not always faster)".into(),
        ],
        "p2p_disabled" | "protocol_mismatch" | "too_few_channels" => tuning::advice(&ev),
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
