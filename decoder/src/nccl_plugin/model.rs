//! The decoded records of the NCCL profiler plugin (times in ns of the process clock, names resolved).

use tprof_format::CollOp;

use crate::model::{Name, Ns, ProcId};

/// A communicator NCCL initialised the plugin for.
#[derive(Debug, Clone, PartialEq)]
pub struct NcclComm {
    pub proc: ProcId,
    /// NCCL's communicator hash (the same on every rank).
    pub comm: u64,
    pub name: Name,
    pub nnodes: u32,
    pub nranks: u32,
    pub rank: u32,
    /// The plugin interface version NCCL used (1-6).
    pub plugin_version: u8,
    pub ts: Ns,
}

/// One collective or point-to-point task as NCCL scheduled it.
#[derive(Debug, Clone, PartialEq)]
pub struct NcclTask {
    pub proc: ProcId,
    pub comm: u64,
    pub seq: u64,
    pub op: CollOp,
    pub count: u64,
    pub datatype: Name,
    pub algo: Name,
    pub proto: Name,
    pub nchannels: u8,
    pub nwarps: u8,
    pub peer: i32,
    /// `None`: the plugin version NCCL used does not say.
    pub graph_captured: Option<bool>,
    pub start: Ns,
    pub end: Ns,
    /// Kernel-channel GPU timers (GPU global timer ns, 0 when not offered).
    pub gpu_start: u64,
    pub gpu_end: u64,
    pub channels_seen: u8,
    pub correlation: u64,
}

impl NcclTask {
    /// The kernel's time on the GPU from the kernel-channel timers, when NCCL offered them.
    pub fn gpu_ns(&self) -> Option<u64> {
        (self.gpu_start != 0 && self.gpu_end > self.gpu_start).then(|| self.gpu_end - self.gpu_start)
    }
}

/// One proxy operation (network send or receive on one channel with one peer), summarised.
#[derive(Debug, Clone, PartialEq)]
pub struct NcclProxyOp {
    pub proc: ProcId,
    pub comm: u64,
    pub seq: u64,
    pub channel: u8,
    pub peer: i32,
    pub is_send: bool,
    pub steps: u32,
    pub bytes: u64,
    pub start: Ns,
    pub end: Ns,
    /// Time the steps spent on the network.
    pub wire_ns: u64,
    /// Time the steps waited for the GPU, peer credits or flushes.
    pub wait_ns: u64,
}

/// One record of the plugin, or of the topology probe (records 25-27 and 34, once per process).
#[derive(Debug, Clone, PartialEq)]
pub enum NcclPluginEvent {
    Comm(NcclComm),
    Task(NcclTask),
    Proxy(NcclProxyOp),
    TopoGpu(super::topology::TopoGpu),
    TopoNic(super::topology::TopoNic),
    TopoPath(super::topology::TopoGpuPath),
    Setting(super::topology::NcclSetting),
}
