//! The decoded host events (see `tprof_format::HostMetric` for what each counter is).

use crate::model::{Name, Ns, ProcId};
pub use tprof_format::{HostMetric, HostScope};

/// One host counter value (running total, or a gauge) at `ts`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSample {
    pub proc: ProcId,
    pub scope: HostScope,
    pub id: u32,
    pub metric: HostMetric,
    pub ts: Ns,
    pub value: u64,
}

/// The name of a host entity: a process (`parent` = ppid), thread (`parent` = pid), core
/// (`parent` = NUMA node), disk or interface.
#[derive(Debug, Clone, PartialEq)]
pub struct HostEntity {
    pub proc: ProcId,
    pub scope: HostScope,
    pub id: u32,
    pub parent: u32,
    pub ts: Ns,
    pub name: Name,
}
