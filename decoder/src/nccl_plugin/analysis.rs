//! The plugin's records against the topology's: per communicator, operation and size bucket the bus
//! bandwidth against what its links allow (NVLink inside a node, the node's NIC line rates summed
//! across nodes; nccl-tests bus factors), how much of its time bandwidth explains (the rest is
//! latency), whether its ranks span more nodes than they need; per communicator and node the send
//! rate its proxy operations reached against the node's line rate. Only recorded facts are used.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use tprof_format::bus_bandwidth::bus_factor;
use tprof_format::CollOp;

use super::table::RankNccl;
use super::topology::TopologySummary;

/// One communicator, operation and size bucket.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct BucketLink {
    pub comm: String,
    pub op: String,
    pub size_bucket: u64,
    pub nranks: u32,
    /// Nodes its ranks ran on (hosts from the topology, else NCCL's nNodes).
    pub nodes: u32,
    /// The fewest nodes that hold its ranks (the job's ranks per node).
    pub nodes_needed: u32,
    pub scope: &'static str,
    /// Tasks over every rank, and their GPU time summed (rank-time).
    pub calls: u64,
    pub gpu_ns: u64,
    pub mean_ns: u64,
    pub busbw_gbps: f64,
    /// What the links allow, GB/s (None: the topology does not say), and which links.
    pub allowed_gbps: Option<f64>,
    pub limit: &'static str,
    /// busbw / allowed.
    pub link_share: Option<f64>,
    /// Share of the time the bytes at the allowed rate explain (the rest: latency, waiting).
    pub bandwidth_time_share: Option<f64>,
    /// GB/s its ranks' NVLinks allow (what it would reach inside one node).
    pub nvlink_gbps: Option<f64>,
}

/// One node's sends on one communicator spanning nodes.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodeLink {
    pub comm: String,
    pub host: String,
    pub ranks: Vec<u32>,
    pub bytes: u64,
    /// The proxy operations' rate on the wire (bytes / wire time of a task's operations), GB/s.
    pub send_gbps: f64,
    /// The node's NIC line rates summed, GB/s (0: unknown).
    pub line_gbps: f64,
}

fn opt_pos(x: f64) -> Option<f64> {
    (x > 0.0 && x.is_finite()).then_some(x)
}

/// The analysis rows and the per-node links.
pub fn analyse(ranks: &[(u32, &RankNccl)], topo: Option<&TopologySummary>) -> (Vec<BucketLink>, Vec<NodeLink>) {
    let hex = |id: u64| format!("{id:016x}");
    // Communicator -> (nranks, NCCL's nNodes, member ranks).
    let mut members: BTreeMap<u64, (u32, u32, Vec<u32>)> = BTreeMap::new();
    for (rank, r) in ranks {
        for (&id, c) in &r.comms {
            let e = members.entry(id).or_insert((c.nranks, c.nnodes, Vec::new()));
            e.2.push(*rank);
        }
    }
    let per_node_capacity = topo.map_or(0, |t| t.nodes.iter().map(|n| n.ranks.len() as u32).max().unwrap_or(0));
    let host = |r: u32| topo.and_then(|t| t.host_of(r)).map(str::to_string);
    let mut out = Vec::new();
    // (comm, op, size bucket) -> (calls, bytes, GPU ns, timed tasks).
    type Sums = (u64, u64, u64, u64);
    let mut buckets: BTreeMap<(u64, CollOp, u64), Sums> = BTreeMap::new();
    for (_, r) in ranks {
        for (&(comm, op, bucket), s) in &r.tasks {
            let e = buckets.entry((comm, op, bucket)).or_default();
            e.0 += s.calls;
            e.1 += s.bytes;
            e.2 += s.gpu_ns;
            e.3 += s.gpu_timed;
        }
    }
    for ((comm, op, bucket), (calls, bytes, gpu_ns, timed)) in buckets {
        let Some((nranks, nccl_nodes, ref mems)) = members.get(&comm).cloned() else { continue };
        let hosts: BTreeSet<String> = mems.iter().filter_map(|&r| host(r)).collect();
        let nodes = if hosts.is_empty() { nccl_nodes.max(1) } else { hosts.len() as u32 };
        let nodes_needed = if per_node_capacity > 0 { nranks.div_ceil(per_node_capacity).max(1) } else { nodes };
        let mean_ns = gpu_ns.checked_div(timed).unwrap_or(0);
        let mean_bytes = bytes as f64 / calls.max(1) as f64;
        let factor = bus_factor(op, nranks.max(1));
        let busbw = if mean_ns > 0 { mean_bytes * factor / mean_ns as f64 } else { 0.0 };
        let nvlink = topo.and_then(|t| {
            let v: Vec<f64> = t.gpus.iter().filter(|g| mems.contains(&g.rank)).map(|g| g.nvlink_gbps).collect();
            opt_pos(v.iter().cloned().fold(f64::INFINITY, f64::min))
        });
        let (allowed, limit) = if nodes > 1 {
            let nic = topo.and_then(|t| {
                let v: Vec<f64> = hosts.iter().filter_map(|h| t.node(h)).map(|n| n.nic_gbps).collect();
                opt_pos(v.iter().cloned().fold(f64::INFINITY, f64::min))
            });
            match (nic, nvlink) {
                (Some(n), Some(l)) => (Some(n.min(l)), if n <= l { "nic" } else { "nvlink" }),
                (Some(n), None) => (Some(n), "nic"),
                _ => (None, "-"),
            }
        } else {
            (nvlink, if nvlink.is_some() { "nvlink" } else { "-" })
        };
        let bw_time = allowed.map(|a| calls as f64 * mean_bytes * factor / a);
        out.push(BucketLink {
            comm: hex(comm),
            op: op.name().to_string(),
            size_bucket: bucket,
            nranks,
            nodes,
            nodes_needed,
            scope: if nodes > 1 { "inter-node" } else { "intra-node" },
            calls,
            gpu_ns,
            mean_ns,
            busbw_gbps: busbw,
            allowed_gbps: allowed,
            limit,
            link_share: allowed.map(|a| busbw / a),
            bandwidth_time_share: bw_time.filter(|_| gpu_ns > 0).map(|t| (t / gpu_ns as f64).min(1.0)),
            nvlink_gbps: nvlink,
        });
    }
    // Per communicator spanning nodes and node: the proxy operations' send rate.
    let mut node_links: BTreeMap<(u64, String), (Vec<u32>, u64, f64)> = BTreeMap::new();
    for (rank, r) in ranks {
        let Some(h) = host(*rank) else { continue };
        for (&(comm, _, send), l) in &r.links {
            if !send || l.wire_ns == 0 || l.ops == 0 {
                continue;
            }
            let e = node_links.entry((comm, h.clone())).or_default();
            if !e.0.contains(rank) {
                e.0.push(*rank);
            }
            e.1 += l.bytes;
            e.2 += l.wire_ns as f64 / l.ops as f64 * l.tasks as f64;
        }
    }
    let links = node_links
        .into_iter()
        .map(|((comm, host), (mut ranks, bytes, wire))| {
            ranks.sort_unstable();
            NodeLink {
                comm: hex(comm),
                line_gbps: topo.and_then(|t| t.node(&host)).map_or(0.0, |n| n.nic_gbps),
                host,
                // Each rank's sends are one link: the node's rate is the ranks' links side by side.
                send_gbps: if wire > 0.0 { bytes as f64 / wire * ranks.len() as f64 } else { 0.0 },
                ranks,
                bytes,
            }
        })
        .collect();
    (out, links)
}
