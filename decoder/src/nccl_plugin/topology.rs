//! The topology records (25-27 and 34, once per process): the process's GPU, the node's network
//! ports, the GPU's paths to the other GPUs and the NCCL settings the environment set; per rank ([`RankTopo`]) and merged into nodes (hosts) with
//! what their links carry ([`TopologySummary`]).

use std::collections::BTreeMap;

use serde::Serialize;
use tprof_format::topology::{mbps_to_gbps, nvlink_gbps_per_link, NicKind, PathLevel};

use crate::model::{Name, Ns, ProcId};

#[derive(Debug, Clone, PartialEq)]
pub struct TopoGpu {
    pub proc: ProcId,
    pub ts: Ns,
    pub host: Name,
    pub device: u32,
    pub bus_id: Name,
    pub numa_node: i32,
    pub nvlinks: u32,
    pub nvlink_version: u32,
    pub gpus: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopoNic {
    pub proc: ProcId,
    pub ts: Ns,
    pub name: Name,
    pub port: u32,
    pub kind: NicKind,
    pub rate_mbps: u64,
    pub numa_node: i32,
    pub path: PathLevel,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TopoGpuPath {
    pub proc: ProcId,
    pub ts: Ns,
    pub device: u32,
    pub peer: u32,
    pub level: PathLevel,
    pub nvlink: bool,
}

/// One NCCL environment setting of a process (`NCCL_P2P_DISABLE=1`).
#[derive(Debug, Clone, PartialEq)]
pub struct NcclSetting {
    pub proc: ProcId,
    pub ts: Ns,
    pub name: Name,
    pub value: Name,
}

/// One process's topology records.
#[derive(Debug, Clone, Default)]
pub struct RankTopo {
    pub gpu: Option<TopoGpu>,
    pub nics: Vec<TopoNic>,
    pub paths: Vec<TopoGpuPath>,
    /// (name, value) of the NCCL settings that were set.
    pub settings: Vec<(String, String)>,
}

impl RankTopo {
    pub fn is_empty(&self) -> bool {
        self.gpu.is_none()
    }
    /// GB/s this GPU's NVLinks carry (one direction), 0 when it has none or they are unknown.
    pub fn nvlink_gbps(&self) -> f64 {
        self.gpu.as_ref().map_or(0.0, |g| g.nvlinks as f64 * nvlink_gbps_per_link(g.nvlink_version))
    }
    /// The ports that carry inter-node traffic: InfiniBand ports that are up, else Ethernet ones.
    pub fn network_ports(&self) -> Vec<&TopoNic> {
        let up = |k: NicKind| self.nics.iter().filter(move |n| n.kind == k && n.rate_mbps > 0);
        let ib: Vec<&TopoNic> = up(NicKind::Infiniband).collect();
        if ib.is_empty() {
            up(NicKind::Ethernet).collect()
        } else {
            ib
        }
    }
}

#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NicRow {
    pub name: String,
    pub port: u32,
    pub kind: &'static str,
    pub rate_gbps: f64,
    pub numa_node: i32,
}

/// One node (host) of the job.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct NodeRow {
    pub host: String,
    pub ranks: Vec<u32>,
    pub gpus: u32,
    pub nics: Vec<NicRow>,
    /// The network ports' line rates summed, GB/s: what the node can send to other nodes.
    pub nic_gbps: f64,
    /// The slowest NVLink bandwidth of its GPUs, GB/s (0: no NVLink).
    pub nvlink_gbps: f64,
}

/// One rank's GPU.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct GpuRow {
    pub rank: u32,
    pub host: String,
    pub device: u32,
    pub bus_id: String,
    pub numa_node: i32,
    pub nvlinks: u32,
    pub nvlink_gbps: f64,
    /// Other GPUs of the node reached over NVLink.
    pub nvlink_peers: u32,
    /// The nearest network port and its PCIe path from this GPU (`nvidia-smi topo` names).
    pub nearest_nic: String,
    pub nic_path: &'static str,
}

/// One NCCL setting and the ranks that had it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct SettingRow {
    pub name: String,
    pub value: String,
    pub ranks: Vec<u32>,
}

#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct TopologySummary {
    pub nodes: Vec<NodeRow>,
    pub gpus: Vec<GpuRow>,
    /// The NCCL settings the ranks' environments set (by name, then value).
    pub nccl_settings: Vec<SettingRow>,
}

impl TopologySummary {
    /// The node (host) a rank ran on.
    pub fn host_of(&self, rank: u32) -> Option<&str> {
        self.gpus.iter().find(|g| g.rank == rank).map(|g| g.host.as_str())
    }
    pub fn node(&self, host: &str) -> Option<&NodeRow> {
        self.nodes.iter().find(|n| n.host == host)
    }
    /// The value of NCCL setting `name` on `rank`, when its environment set it.
    pub fn setting(&self, name: &str, rank: u32) -> Option<&str> {
        self.nccl_settings.iter().find(|s| s.name == name && s.ranks.contains(&rank)).map(|s| s.value.as_str())
    }
}

/// Merges the ranks' topology; None when no rank recorded one.
pub fn merge<'a>(ranks: impl Iterator<Item = (u32, &'a RankTopo)>) -> Option<TopologySummary> {
    let mut out = TopologySummary::default();
    let mut nodes: BTreeMap<String, NodeRow> = BTreeMap::new();
    let mut settings: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (rank, t) in ranks {
        for (name, value) in &t.settings {
            settings.entry((name.clone(), value.clone())).or_default().push(rank);
        }
        let Some(g) = &t.gpu else { continue };
        let host = g.host.to_string();
        let ports = t.network_ports();
        let nearest = t.nics.iter().filter(|n| n.rate_mbps > 0).min_by_key(|n| n.path as u8);
        out.gpus.push(GpuRow {
            rank,
            host: host.clone(),
            device: g.device,
            bus_id: g.bus_id.to_string(),
            numa_node: g.numa_node,
            nvlinks: g.nvlinks,
            nvlink_gbps: t.nvlink_gbps(),
            nvlink_peers: t.paths.iter().filter(|p| p.nvlink).count() as u32,
            nearest_nic: nearest.map(|n| n.name.to_string()).unwrap_or_default(),
            nic_path: nearest.map_or("-", |n| n.path.name()),
        });
        let node = nodes.entry(host.clone()).or_insert_with(|| NodeRow {
            host: host.clone(),
            ranks: Vec::new(),
            gpus: g.gpus,
            nics: t
                .nics
                .iter()
                .map(|n| NicRow {
                    name: n.name.to_string(),
                    port: n.port,
                    kind: n.kind.name(),
                    rate_gbps: mbps_to_gbps(n.rate_mbps),
                    numa_node: n.numa_node,
                })
                .collect(),
            nic_gbps: ports.iter().map(|n| mbps_to_gbps(n.rate_mbps)).sum(),
            nvlink_gbps: f64::INFINITY,
        });
        node.ranks.push(rank);
        node.nvlink_gbps = node.nvlink_gbps.min(t.nvlink_gbps());
    }
    if out.gpus.is_empty() {
        return None;
    }
    out.nodes = nodes.into_values().collect();
    for n in &mut out.nodes {
        n.ranks.sort_unstable();
        if !n.nvlink_gbps.is_finite() {
            n.nvlink_gbps = 0.0;
        }
    }
    out.gpus.sort_by_key(|g| g.rank);
    out.nccl_settings = settings
        .into_iter()
        .map(|((name, value), mut ranks)| {
            ranks.sort_unstable();
            SettingRow { name, value, ranks }
        })
        .collect();
    Some(out)
}
