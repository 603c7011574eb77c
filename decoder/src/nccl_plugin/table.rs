//! The plugin's records per rank ([`RankNccl`], a sink part of the summary) and across ranks
//! ([`NcclPluginSummary`]): per communicator its scope (intra- or inter-node), per communicator,
//! operation and size bucket what NCCL chose (algorithm, protocol, channels) and the bandwidth the
//! kernel-channel GPU timers give, per rank and peer the network links the proxy operations used
//! (bytes, time on the wire and waiting).

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use tprof_format::bus_bandwidth::bus_factor;
use tprof_format::CollOp;

use super::model::{NcclPluginEvent, NcclTask};
use crate::model::Ns;
use crate::summary::size_bucket;

/// Bytes of one element of an NCCL datatype named as NCCL names it (`ncclFloat32`).
pub fn datatype_bytes(name: &str) -> u64 {
    match name {
        "ncclInt8" | "ncclUint8" | "ncclFloat8e4m3" | "ncclFloat8e5m2" => 1,
        "ncclFloat16" | "ncclBfloat16" => 2,
        "ncclInt32" | "ncclUint32" | "ncclFloat32" => 4,
        "ncclInt64" | "ncclUint64" | "ncclFloat64" => 8,
        _ => 0,
    }
}

/// A task's size as nccl-tests reports it (the bytes convention of the interposers' records).
pub fn task_bytes(t: &NcclTask, nranks: u32) -> u64 {
    let b = t.count * datatype_bytes(&t.datatype);
    match t.op {
        CollOp::AllGather | CollOp::ReduceScatter | CollOp::AllToAll => b * nranks.max(1) as u64,
        _ => b,
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct CommInfo {
    pub(super) name: String,
    pub(super) nnodes: u32,
    pub(super) nranks: u32,
    pub(super) rank: u32,
    pub(super) version: u8,
}

impl CommInfo {
    /// NCCL's `init` described the communicator (ranks, nodes, this rank): plugin versions 4 and
    /// later; versions 1-3 say nothing, and what they do not say stays absent.
    pub(super) fn described(&self) -> bool {
        self.version >= 4
    }
}

#[derive(Debug, Clone, Default)]
pub(super) struct TaskStats {
    pub(super) calls: u64,
    pub(super) bytes: u64,
    pub(super) gpu_ns: u64,
    pub(super) gpu_timed: u64,
    graph_captured: u64,
    /// Tasks without algorithm, protocol or channels (p2p has no algorithm or protocol).
    undescribed: u64,
    algos: BTreeMap<String, u64>,
    protos: BTreeMap<String, u64>,
    channels: BTreeMap<u8, u64>,
}

#[derive(Debug, Clone, Default)]
pub(super) struct LinkStats {
    pub(super) ops: u64,
    pub(super) bytes: u64,
    pub(super) wire_ns: u64,
    pub(super) wait_ns: u64,
    /// The operations' time spans merged per task: first start .. last end, summed over tasks.
    span_ns: u64,
    /// Tasks that used the link.
    pub(super) tasks: u64,
}

/// One rank's plugin records, aggregated as they arrive.
#[derive(Debug, Clone, Default)]
pub struct RankNccl {
    pub(super) comms: HashMap<u64, CommInfo>,
    pub(super) tasks: HashMap<(u64, CollOp, u64), TaskStats>,
    pub(super) links: HashMap<(u64, i32, bool), LinkStats>,
    /// The topology records (25-27, 34).
    pub topo: super::topology::RankTopo,
    /// Per (comm, seq, peer, send): the span of the operations of one task on one link.
    open_spans: HashMap<(u64, u64, i32, bool), (u64, u64)>,
    /// When this rank's proxy operations (its network transfers) ran: their spans, merged with
    /// the previous one as they arrive (one period per collective; see `network_spans`).
    wire: Vec<(Ns, Ns)>,
}

impl RankNccl {
    pub fn is_empty(&self) -> bool {
        self.comms.is_empty() && self.tasks.is_empty() && self.topo.is_empty()
    }

    pub fn handle(&mut self, e: &NcclPluginEvent) {
        match e {
            NcclPluginEvent::Comm(c) => {
                self.comms.insert(
                    c.comm,
                    CommInfo {
                        name: c.name.to_string(),
                        nnodes: c.nnodes,
                        nranks: c.nranks,
                        rank: c.rank,
                        version: c.plugin_version,
                    },
                );
            }
            NcclPluginEvent::Task(t) => {
                let nranks = self.comms.get(&t.comm).map_or(0, |c| c.nranks);
                let bytes = task_bytes(t, nranks);
                let s = self.tasks.entry((t.comm, t.op, size_bucket(bytes))).or_default();
                s.calls += 1;
                s.bytes += bytes;
                if let Some(g) = t.gpu_ns() {
                    s.gpu_ns += g;
                    s.gpu_timed += 1;
                }
                s.graph_captured += (t.graph_captured == Some(true)) as u64;
                let described = !t.algo.is_empty() && !t.proto.is_empty() && t.nchannels > 0;
                s.undescribed += !described as u64;
                if !t.algo.is_empty() {
                    *s.algos.entry(t.algo.to_string()).or_default() += 1;
                }
                if !t.proto.is_empty() {
                    *s.protos.entry(t.proto.to_string()).or_default() += 1;
                }
                *s.channels.entry(t.nchannels).or_default() += 1;
            }
            NcclPluginEvent::TopoGpu(g) => self.topo.gpu = Some(g.clone()),
            NcclPluginEvent::TopoNic(n) => self.topo.nics.push(n.clone()),
            NcclPluginEvent::TopoPath(p) => self.topo.paths.push(p.clone()),
            NcclPluginEvent::Setting(s) => {
                let (name, value) = (s.name.to_string(), s.value.to_string());
                if !self.topo.settings.iter().any(|(n, _)| *n == name) {
                    self.topo.settings.push((name, value));
                }
            }
            NcclPluginEvent::Proxy(p) => {
                let l = self.links.entry((p.comm, p.peer, p.is_send)).or_default();
                l.ops += 1;
                l.bytes += p.bytes;
                l.wire_ns += p.wire_ns;
                l.wait_ns += p.wait_ns;
                let span = self.open_spans.entry((p.comm, p.seq, p.peer, p.is_send)).or_insert((p.start, p.end));
                span.0 = span.0.min(p.start);
                span.1 = span.1.max(p.end);
                match self.wire.last_mut() {
                    Some(last) if p.start >= last.0 && p.start <= last.1 => last.1 = last.1.max(p.end),
                    _ if p.end > p.start => self.wire.push((p.start, p.end)),
                    _ => {}
                }
            }
        }
    }

    /// When this rank's network transfers ran (the union of its proxy operations' spans).
    pub fn network_spans(&self) -> Vec<(Ns, Ns)> {
        crate::intervals::union(self.wire.clone())
    }

    /// Closes the per-task link spans (at the end of the process).
    pub fn finish(&mut self) {
        for ((comm, _, peer, send), (s, e)) in self.open_spans.drain() {
            if let Some(l) = self.links.get_mut(&(comm, peer, send)) {
                l.span_ns += e.saturating_sub(s);
                l.tasks += 1;
            }
        }
    }
}

/// A communicator as the plugin saw it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct CommRow {
    pub comm: String,
    pub name: String,
    /// None: the plugin version's `init` does not say (versions 1-3).
    pub nranks: Option<u32>,
    pub nnodes: Option<u32>,
    pub ranks_seen: u32,
    /// "intra-node", "inter-node", or "unknown" (versions 1-3).
    pub scope: &'static str,
    pub plugin_version: u8,
}

/// Per communicator, operation and size bucket.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct OpRow {
    pub comm: String,
    pub op: String,
    pub size_bucket: u64,
    /// None: no `init` described the communicator (plugin versions 1-3).
    pub nranks: Option<u32>,
    pub scope: &'static str,
    /// Tasks, over every rank.
    pub calls: u64,
    /// The most frequent algorithm, protocol and channel count (and how many tasks had them).
    pub algo: String,
    pub proto: String,
    pub nchannels: u8,
    pub undescribed: u64,
    pub graph_captured: u64,
    pub gpu_timed: u64,
    pub mean_gpu_ns: u64,
    /// None without kernel-channel GPU timers (versions 1-3) or, for busbw, without the ranks.
    pub algbw_gbps: Option<f64>,
    pub busbw_gbps: Option<f64>,
}

/// One rank's network link to a peer (one direction), from the proxy operations.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct LinkRow {
    pub comm: String,
    /// The rank in the communicator (None: not described, plugin versions 1-3).
    pub rank: Option<u32>,
    pub peer: i32,
    pub direction: &'static str,
    pub ops: u64,
    pub bytes: u64,
    /// Summed over the channels' operations.
    pub wire_ns: u64,
    pub wait_ns: u64,
    /// The link's busy time (per task, first operation start to last end; summed over tasks).
    pub span_ns: u64,
    /// The link's rate while on the wire: a task's operations (one per channel) run side by side,
    /// so bytes / (mean wire time of an operation x tasks). GB/s.
    pub link_gbps: f64,
    /// Time on the wire / (on the wire + waiting), over the operations.
    pub wire_share: f64,
}

/// What the plugin recorded, over every rank.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct NcclPluginSummary {
    pub comms: Vec<CommRow>,
    pub ops: Vec<OpRow>,
    pub links: Vec<LinkRow>,
    /// Share of the tasks' GPU time spent in communicators that span nodes.
    pub inter_node_share: f64,
    /// Nodes, GPUs and links as the topology probe recorded them (None: no topology records).
    pub topology: Option<super::topology::TopologySummary>,
    /// Per communicator, operation and size: bandwidth against what the links allow.
    pub analysis: Vec<super::analysis::BucketLink>,
    /// Per communicator spanning nodes and node: the send rate its proxy operations reached.
    pub node_links: Vec<super::analysis::NodeLink>,
}

fn most<K: Clone + Default>(m: &BTreeMap<K, u64>) -> K {
    m.iter().max_by_key(|(_, &n)| n).map(|(k, _)| k.clone()).unwrap_or_default()
}

fn scope(c: &CommInfo) -> &'static str {
    if !c.described() {
        "unknown"
    } else if c.nnodes > 1 {
        "inter-node"
    } else {
        "intra-node"
    }
}

/// Merges the ranks' records (with their rank numbers); None when no rank has any.
pub fn merge<'a>(ranks: impl Iterator<Item = (u32, &'a RankNccl)>) -> Option<NcclPluginSummary> {
    let numbered: Vec<(u32, &RankNccl)> = ranks.filter(|(_, r)| !r.is_empty()).collect();
    if numbered.is_empty() {
        return None;
    }
    let ranks: Vec<&RankNccl> = numbered.iter().map(|(_, r)| *r).collect();
    let mut comms: BTreeMap<u64, (CommInfo, u32)> = BTreeMap::new();
    for r in &ranks {
        for (&id, c) in &r.comms {
            comms.entry(id).or_insert_with(|| (c.clone(), 0)).1 += 1;
        }
    }
    let hex = |id: u64| format!("{id:016x}");
    let mut out = NcclPluginSummary {
        comms: comms
            .iter()
            .map(|(&id, (c, seen))| CommRow {
                comm: hex(id),
                name: c.name.clone(),
                nranks: c.described().then_some(c.nranks),
                nnodes: c.described().then_some(c.nnodes),
                ranks_seen: *seen,
                scope: scope(c),
                plugin_version: c.version,
            })
            .collect(),
        ..Default::default()
    };
    let mut tasks: BTreeMap<(u64, CollOp, u64), TaskStats> = BTreeMap::new();
    for r in &ranks {
        for (k, s) in &r.tasks {
            let t = tasks.entry(*k).or_default();
            t.calls += s.calls;
            t.bytes += s.bytes;
            t.gpu_ns += s.gpu_ns;
            t.gpu_timed += s.gpu_timed;
            t.graph_captured += s.graph_captured;
            t.undescribed += s.undescribed;
            for (a, n) in &s.algos {
                *t.algos.entry(a.clone()).or_default() += n;
            }
            for (a, n) in &s.protos {
                *t.protos.entry(a.clone()).or_default() += n;
            }
            for (a, n) in &s.channels {
                *t.channels.entry(*a).or_default() += n;
            }
        }
    }
    let (mut inter_ns, mut all_ns) = (0u64, 0u64);
    for ((comm, op, bucket), t) in tasks {
        let c = comms.get(&comm).map(|(c, _)| c.clone()).unwrap_or_default();
        let mean_gpu_ns = t.gpu_ns.checked_div(t.gpu_timed).unwrap_or(0);
        let mean_bytes = t.bytes as f64 / t.calls.max(1) as f64;
        let algbw = (mean_gpu_ns > 0).then(|| mean_bytes / mean_gpu_ns as f64);
        all_ns += t.gpu_ns;
        if c.nnodes > 1 {
            inter_ns += t.gpu_ns;
        }
        out.ops.push(OpRow {
            comm: hex(comm),
            op: op.name().to_string(),
            size_bucket: bucket,
            nranks: c.described().then_some(c.nranks),
            scope: scope(&c),
            calls: t.calls,
            algo: most(&t.algos),
            proto: most(&t.protos),
            nchannels: most(&t.channels),
            undescribed: t.undescribed,
            graph_captured: t.graph_captured,
            gpu_timed: t.gpu_timed,
            mean_gpu_ns,
            algbw_gbps: algbw,
            busbw_gbps: algbw.filter(|_| c.described()).map(|a| a * bus_factor(op, c.nranks.max(1))),
        });
    }
    out.inter_node_share = if all_ns > 0 { inter_ns as f64 / all_ns as f64 } else { 0.0 };
    for r in &ranks {
        for (&(comm, peer, send), l) in &r.links {
            let rank = r.comms.get(&comm).filter(|c| c.described()).map(|c| c.rank);
            let busy = l.wire_ns + l.wait_ns;
            out.links.push(LinkRow {
                comm: hex(comm),
                rank,
                peer,
                direction: if send { "send" } else { "recv" },
                ops: l.ops,
                bytes: l.bytes,
                wire_ns: l.wire_ns,
                wait_ns: l.wait_ns,
                span_ns: l.span_ns,
                link_gbps: if l.wire_ns > 0 && l.ops > 0 {
                    l.bytes as f64 / (l.wire_ns as f64 / l.ops as f64 * l.tasks as f64)
                } else {
                    0.0
                },
                wire_share: if busy > 0 { l.wire_ns as f64 / busy as f64 } else { 0.0 },
            });
        }
    }
    out.links.sort_by(|a, b| (&a.comm, a.rank, a.peer, a.direction).cmp(&(&b.comm, b.rank, b.peer, b.direction)));
    out.topology = super::topology::merge(numbered.iter().map(|(n, r)| (*n, &r.topo)));
    let (analysis, node_links) = super::analysis::analyse(&numbered, out.topology.as_ref());
    out.analysis = analysis;
    out.node_links = node_links;
    Some(out)
}
