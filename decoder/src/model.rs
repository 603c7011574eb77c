//! The decoded trace model: what every input produces and every analysis / exporter consumes.
//!
//! Inputs (ring files, imported Kineto JSON) push events into a [`TraceSink`] (samply-style
//! push converter): first [`TraceSink::handle_process`] for a process, then that process's events,
//! then [`TraceSink::handle_process_end`]; after the last process, [`TraceSink::finish`].
//!
//! Conventions:
//! - Times ([`Ns`]) are nanoseconds on one global timebase: wall-clock (Unix epoch) nanoseconds after
//!   clock alignment across hosts (see `clock_alignment`). Imported traces keep their own timebase (us -> ns).
//! - Names are interned [`Name`]s (`Arc<str>`); cloning one is a refcount bump. Equal names from the
//!   same [`Interner`] share one allocation.
//! - A process is identified in events by its [`ProcId`] (dense index, unique within one decode);
//!   [`ProcessInfo`] carries rank / host / pid.
//! - Within a process, events arrive in the order the process recorded them (ring commit order,
//!   file order for imports), **not** sorted by time; GPU records usually arrive after the API call
//!   that launched them. Sinks that need time order sort per process.
//! - NVTX ranges arrive when they complete (inner before outer). Each range gets a per-process
//!   [`RangeId`] when it opens; API calls and collectives carry the innermost range open on their
//!   thread when they started (`range`), so GPU work can be attributed to ranges in one pass.
//! - Enums shared with the ring format ([`CopyKind`], [`CollOp`], ...) are re-exported from
//!   `tprof_format`.

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

pub use crate::host::{HostEntity, HostSample};
pub use tprof_format::{ApiDomain, CollOp, CopyKind, MarkerKind, MemOp, MemSpace, MemoryKind, SyncKind};

/// Nanoseconds on the global timebase.
pub type Ns = u64;

/// An interned name.
pub type Name = Arc<str>;

/// Dense process index within one decode (the order processes were opened).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize)]
pub struct ProcId(pub u32);

/// Per-process id of an NVTX range (or imported annotation / CPU op), assigned when it opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct RangeId(pub u64);

/// Where a process's events came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A tprof ring file.
    Ring,
    /// An imported PyTorch-profiler / Kineto JSON trace.
    Kineto,
}

/// Identity and clock facts of one traced process (one rank, usually).
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProcessInfo {
    pub id: ProcId,
    pub origin: Origin,
    /// The file it was read from.
    pub path: PathBuf,
    pub host: Name,
    pub pid: u32,
    pub ppid: u32,
    pub cmdline: String,
    pub rank: Option<u32>,
    pub local_rank: Option<u32>,
    pub world_size: Option<u32>,
    /// Job identifier (SLURM_JOB_ID, TORCHELASTIC_RUN_ID...) when the recorder found one.
    pub job_id: Option<String>,
    /// Offset added to this process's own wall-clock times to reach the global timebase (ns),
    /// from cross-rank collective alignment; 0 when not refined.
    pub clock_offset_ns: i64,
    /// False when the process recorded host API calls but GPU activity was unavailable
    /// (CUPTI off): GPU times are then missing. Set by the input when known at open time;
    /// sinks should also check whether any GPU record arrived.
    pub gpu_activity: bool,
    /// Events the recorder dropped (ring full, CUPTI drops), when known.
    pub dropped_events: u64,
}

impl ProcessInfo {
    /// "r3" / "pid 1234" — a short label for messages and tables.
    pub fn label(&self) -> String {
        match self.rank {
            Some(r) => format!("r{r}"),
            None => format!("pid {}", self.pid),
        }
    }
}

/// A kernel execution on the GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub proc: ProcId,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub start: Ns,
    pub end: Ns,
    /// As recorded (usually mangled); demangle for display.
    pub name: Name,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub registers: u16,
    pub shared_mem: u32,
    /// Links to the launching [`Api`] call (0 = unknown).
    pub correlation: u64,
    pub graph_id: u32,
    /// Collective metadata an imported trace attaches to NCCL kernels (Kineto "Collective name"...).
    pub collective: Option<KernelCollectiveInfo>,
}

/// Collective facts attached directly to a kernel by an imported trace.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelCollectiveInfo {
    pub op: CollOp,
    pub bytes: u64,
    pub nranks: u32,
}

/// A memory copy on the GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Memcpy {
    pub proc: ProcId,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub start: Ns,
    pub end: Ns,
    pub bytes: u64,
    pub kind: CopyKind,
    pub src_kind: MemoryKind,
    pub dst_kind: MemoryKind,
    pub correlation: u64,
}

/// A memset on the GPU.
#[derive(Debug, Clone, PartialEq)]
pub struct Memset {
    pub proc: ProcId,
    pub device: u32,
    pub context: u32,
    pub stream: u32,
    pub start: Ns,
    pub end: Ns,
    pub bytes: u64,
    pub value: u32,
    pub dst_kind: MemoryKind,
    pub correlation: u64,
}

/// A host API call (CUDA runtime / driver, NCCL entry points as seen by the API layer).
#[derive(Debug, Clone, PartialEq)]
pub struct Api {
    pub proc: ProcId,
    pub tid: u32,
    pub domain: ApiDomain,
    pub name: Name,
    pub start: Ns,
    pub end: Ns,
    pub result: i32,
    /// Links to GPU work (0 = none).
    pub correlation: u64,
    /// For launches: the kernel name, when the recorder knew it.
    pub detail: Option<Name>,
    pub stream: u64,
    /// Launch size or bytes, 0 when n/a.
    pub arg: u64,
    /// Innermost NVTX range open on this thread when the call started.
    pub range: Option<RangeId>,
    /// Several identical calls in one event (a completion poll repeated, recorded as `ApiRepeat`):
    /// then `start`..`end` spans them all. None: one call.
    pub repeat: Option<Repeat>,
}

/// Identical calls counted into one [`Api`] event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repeat {
    pub calls: u64,
    /// Time inside the calls, summed.
    pub busy: Ns,
}

impl Api {
    /// The calls this event stands for.
    pub fn calls(&self) -> u64 {
        self.repeat.map_or(1, |r| r.calls)
    }

    /// Time spent inside the call(s).
    pub fn busy(&self) -> Ns {
        self.repeat.map_or(self.end.saturating_sub(self.start), |r| r.busy)
    }
}

/// A synchronization.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncEvent {
    pub proc: ProcId,
    pub kind: SyncKind,
    pub tid: u32,
    pub context: u32,
    pub stream: u32,
    pub event: u64,
    pub start: Ns,
    pub end: Ns,
    pub correlation: u64,
    pub result: i32,
}

/// A memory allocation / free.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryEvent {
    pub proc: ProcId,
    pub op: MemOp,
    pub space: MemSpace,
    pub device: u32,
    pub address: u64,
    pub bytes: u64,
    /// The device's total reservation by this process after the operation.
    pub reserved: u64,
    pub ts: Ns,
    pub result: i32,
    pub correlation: u64,
    pub tid: u32,
}

/// An NCCL call on the host.
#[derive(Debug, Clone, PartialEq)]
pub struct Collective {
    pub proc: ProcId,
    pub tid: u32,
    pub op: CollOp,
    pub start: Ns,
    pub end: Ns,
    /// Communicator identity, identical on every rank of the communicator (0 = unknown).
    pub comm: u64,
    pub rank: u32,
    pub nranks: u32,
    pub count: u64,
    pub datatype: u8,
    /// Message size in bytes (per rank, as nccl-tests counts it).
    pub bytes: u64,
    /// Root for rooted collectives, peer for send/recv, -1 otherwise.
    pub peer: i32,
    pub stream: u64,
    /// Per-communicator sequence number of data-moving operations.
    pub seq: u64,
    pub result: i32,
    /// Links to its kernel (0 = unknown: match by stream order).
    pub correlation: u64,
    pub device: u32,
    /// Innermost NVTX range open on this thread when the call started.
    pub range: Option<RangeId>,
}

/// Kind of a range in the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RangeKind {
    /// NVTX push/pop (thread-nested).
    Nvtx,
    /// NVTX start/end (may cross threads; not nested).
    NvtxStartEnd,
    /// Imported framework annotation (Kineto `user_annotation`, e.g. `ProfilerStep#3`).
    Annotation,
    /// Imported framework operator (Kineto `cpu_op`).
    CpuOp,
}

/// A completed NVTX range (or imported annotation).
#[derive(Debug, Clone, PartialEq)]
pub struct NvtxRange {
    pub proc: ProcId,
    pub id: RangeId,
    /// The enclosing range on the same thread (None at top level or for start/end ranges).
    pub parent: Option<RangeId>,
    /// Nesting depth (0 = top level).
    pub depth: u32,
    pub kind: RangeKind,
    /// Thread that opened it.
    pub tid: u32,
    pub domain: Option<Name>,
    pub name: Name,
    pub start: Ns,
    pub end: Ns,
}

/// An NVTX mark (instant).
#[derive(Debug, Clone, PartialEq)]
pub struct NvtxMark {
    pub proc: ProcId,
    pub tid: u32,
    pub domain: Option<Name>,
    pub name: Name,
    pub ts: Ns,
}

/// A counter sample.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterSample {
    pub proc: ProcId,
    pub name: Name,
    /// None for process-wide counters.
    pub device: Option<u32>,
    pub ts: Ns,
    pub value: f64,
}

/// A marker (step begin/end, capture window, hang suspected, drops, ...).
#[derive(Debug, Clone, PartialEq)]
pub struct Marker {
    pub proc: ProcId,
    pub kind: MarkerKind,
    pub ts: Ns,
    pub value: u64,
    pub name: Option<Name>,
}

/// A thread's name.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadName {
    pub proc: ProcId,
    pub tid: u32,
    pub name: Name,
}

/// Error a sink reports from [`TraceSink::finish`] (e.g. an exporter's write failed).
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

/// The push-style converter interface. Every method has a no-op default, so a sink implements only
/// what it consumes. See the module docs for ordering guarantees.
pub trait TraceSink {
    fn handle_process(&mut self, _info: &ProcessInfo) {}
    fn handle_thread_name(&mut self, _t: &ThreadName) {}
    fn handle_kernel(&mut self, _k: &Kernel) {}
    fn handle_memcpy(&mut self, _m: &Memcpy) {}
    fn handle_memset(&mut self, _m: &Memset) {}
    fn handle_api(&mut self, _a: &Api) {}
    fn handle_sync(&mut self, _s: &SyncEvent) {}
    fn handle_memory(&mut self, _m: &MemoryEvent) {}
    fn handle_collective(&mut self, _c: &Collective) {}
    fn handle_nvtx_range(&mut self, _r: &NvtxRange) {}
    fn handle_nvtx_mark(&mut self, _m: &NvtxMark) {}
    fn handle_counter(&mut self, _c: &CounterSample) {}
    fn handle_host_sample(&mut self, _s: &HostSample) {}
    fn handle_host_entity(&mut self, _e: &HostEntity) {}
    fn handle_marker(&mut self, _m: &Marker) {}
    /// A record of the NCCL profiler plugin (communicator, task, proxy operation).
    fn handle_nccl_plugin(&mut self, _e: &crate::nccl_plugin::NcclPluginEvent) {}
    /// A promise, made before the process's first event, about the order of its ranges: range ids
    /// are unique, and each range arrives after every API call, collective and range inside it and
    /// before its parent (the Kineto import of a properly nested trace). Lets the summary fold
    /// complete range trees early (see [`crate::range_fold`]).
    fn handle_ranges_close_in_order(&mut self, _proc: ProcId) {}
    /// A promise, made before the process's first event: no [`Collective`] call of this process
    /// will be delivered (a Kineto trace without `record_param_comms`). An NCCL kernel then has no
    /// call to wait for: the summary counts it alone at once instead of keeping it to the end.
    fn handle_no_collective_calls(&mut self, _proc: ProcId) {}
    /// All events of this process have been delivered.
    fn handle_process_end(&mut self, _proc: ProcId) {}
    /// No more events. Exporters flush here.
    fn finish(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// Forwards every event to two sinks (compose analyses in one pass).
pub struct Tee<A, B>(pub A, pub B);

impl<A: TraceSink, B: TraceSink> TraceSink for Tee<A, B> {
    fn handle_process(&mut self, i: &ProcessInfo) {
        self.0.handle_process(i);
        self.1.handle_process(i);
    }
    fn handle_thread_name(&mut self, t: &ThreadName) {
        self.0.handle_thread_name(t);
        self.1.handle_thread_name(t);
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        self.0.handle_kernel(k);
        self.1.handle_kernel(k);
    }
    fn handle_memcpy(&mut self, m: &Memcpy) {
        self.0.handle_memcpy(m);
        self.1.handle_memcpy(m);
    }
    fn handle_memset(&mut self, m: &Memset) {
        self.0.handle_memset(m);
        self.1.handle_memset(m);
    }
    fn handle_api(&mut self, a: &Api) {
        self.0.handle_api(a);
        self.1.handle_api(a);
    }
    fn handle_sync(&mut self, s: &SyncEvent) {
        self.0.handle_sync(s);
        self.1.handle_sync(s);
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        self.0.handle_memory(m);
        self.1.handle_memory(m);
    }
    fn handle_collective(&mut self, c: &Collective) {
        self.0.handle_collective(c);
        self.1.handle_collective(c);
    }
    fn handle_nccl_plugin(&mut self, e: &crate::nccl_plugin::NcclPluginEvent) {
        self.0.handle_nccl_plugin(e);
        self.1.handle_nccl_plugin(e);
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.0.handle_nvtx_range(r);
        self.1.handle_nvtx_range(r);
    }
    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        self.0.handle_nvtx_mark(m);
        self.1.handle_nvtx_mark(m);
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.0.handle_counter(c);
        self.1.handle_counter(c);
    }
    fn handle_host_sample(&mut self, s: &HostSample) {
        self.0.handle_host_sample(s);
        self.1.handle_host_sample(s);
    }
    fn handle_host_entity(&mut self, e: &HostEntity) {
        self.0.handle_host_entity(e);
        self.1.handle_host_entity(e);
    }
    fn handle_marker(&mut self, m: &Marker) {
        self.0.handle_marker(m);
        self.1.handle_marker(m);
    }
    fn handle_ranges_close_in_order(&mut self, p: ProcId) {
        self.0.handle_ranges_close_in_order(p);
        self.1.handle_ranges_close_in_order(p);
    }
    fn handle_no_collective_calls(&mut self, p: ProcId) {
        self.0.handle_no_collective_calls(p);
        self.1.handle_no_collective_calls(p);
    }
    fn handle_process_end(&mut self, p: ProcId) {
        self.0.handle_process_end(p);
        self.1.handle_process_end(p);
    }
    fn finish(&mut self) -> Result<(), SinkError> {
        let a = self.0.finish();
        let b = self.1.finish();
        a.and(b)
    }
}

impl<S: TraceSink + ?Sized> TraceSink for &mut S {
    fn handle_process(&mut self, i: &ProcessInfo) {
        (**self).handle_process(i)
    }
    fn handle_thread_name(&mut self, t: &ThreadName) {
        (**self).handle_thread_name(t)
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        (**self).handle_kernel(k)
    }
    fn handle_memcpy(&mut self, m: &Memcpy) {
        (**self).handle_memcpy(m)
    }
    fn handle_memset(&mut self, m: &Memset) {
        (**self).handle_memset(m)
    }
    fn handle_api(&mut self, a: &Api) {
        (**self).handle_api(a)
    }
    fn handle_sync(&mut self, s: &SyncEvent) {
        (**self).handle_sync(s)
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        (**self).handle_memory(m)
    }
    fn handle_collective(&mut self, c: &Collective) {
        (**self).handle_collective(c)
    }
    fn handle_nccl_plugin(&mut self, e: &crate::nccl_plugin::NcclPluginEvent) {
        (**self).handle_nccl_plugin(e)
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        (**self).handle_nvtx_range(r)
    }
    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        (**self).handle_nvtx_mark(m)
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        (**self).handle_counter(c)
    }
    fn handle_host_sample(&mut self, s: &HostSample) {
        (**self).handle_host_sample(s)
    }
    fn handle_host_entity(&mut self, e: &HostEntity) {
        (**self).handle_host_entity(e)
    }
    fn handle_marker(&mut self, m: &Marker) {
        (**self).handle_marker(m)
    }
    fn handle_ranges_close_in_order(&mut self, p: ProcId) {
        (**self).handle_ranges_close_in_order(p)
    }
    fn handle_no_collective_calls(&mut self, p: ProcId) {
        (**self).handle_no_collective_calls(p)
    }
    fn handle_process_end(&mut self, p: ProcId) {
        (**self).handle_process_end(p)
    }
    fn finish(&mut self) -> Result<(), SinkError> {
        (**self).finish()
    }
}

/// Interns names: equal strings share one `Arc<str>`. One per decode (or per input file when
/// files are decoded in parallel; names from different interners compare equal by value).
#[derive(Debug, Default)]
pub struct Interner {
    set: HashSet<Arc<str>>,
}

impl Interner {
    pub fn new() -> Interner {
        Interner::default()
    }

    /// The interned name of `s`, capped to [`crate::bounded_names::NAME_CAP`] bytes.
    pub fn intern(&mut self, s: &str) -> Name {
        let s = crate::bounded_names::cap(s);
        let s: &str = &s;
        if let Some(n) = self.set.get(s) {
            return n.clone();
        }
        let n: Name = Arc::from(s);
        self.set.insert(n.clone());
        n
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }
}

/// Kind of GPU activity, for busy-time splits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum GpuWorkKind {
    Compute,
    Communication,
    Memory,
}

/// True when a kernel name is an NCCL (communication) kernel.
pub fn is_comm_kernel(name: &str) -> bool {
    name.starts_with("nccl") || name.contains("ncclKernel") || name.contains("ncclDevKernel")
}

impl Kernel {
    pub fn work_kind(&self) -> GpuWorkKind {
        if self.collective.is_some() || is_comm_kernel(&self.name) {
            GpuWorkKind::Communication
        } else {
            GpuWorkKind::Compute
        }
    }
    pub fn duration(&self) -> Ns {
        self.end.saturating_sub(self.start)
    }
}

/// Collective op from an NCCL kernel name (`ncclKernel_AllReduce_RING_LL_Sum_float`,
/// `ncclDevKernel_AllGather_RING_LL`, `ncclKernel_SendRecv_...`) or a framework name
/// (`allreduce`, `all_to_all`, `nccl:all_reduce`, `_allgather_base`).
pub fn coll_op_from_name(name: &str) -> CollOp {
    let lower: String = name.chars().filter(|c| c.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
    let table: [(&str, CollOp); 12] = [
        ("allreduce", CollOp::AllReduce),
        ("reducescatter", CollOp::ReduceScatter),
        ("allgather", CollOp::AllGather),
        ("alltoall", CollOp::AllToAll),
        ("broadcast", CollOp::Broadcast),
        ("sendrecv", CollOp::Send),
        ("reduce", CollOp::Reduce),
        ("gather", CollOp::Gather),
        ("scatter", CollOp::Scatter),
        ("send", CollOp::Send),
        ("recv", CollOp::Recv),
        ("bcast", CollOp::Broadcast),
    ];
    for (pat, op) in table {
        if lower.contains(pat) {
            return op;
        }
    }
    CollOp::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interner_shares() {
        let mut i = Interner::new();
        let a = i.intern("k");
        let b = i.intern("k");
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(i.len(), 1);
    }

    #[test]
    fn op_names() {
        assert_eq!(coll_op_from_name("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)"), CollOp::AllReduce);
        assert_eq!(coll_op_from_name("nccl:all_to_all"), CollOp::AllToAll);
        assert_eq!(coll_op_from_name("_reduce_scatter_base"), CollOp::ReduceScatter);
        assert_eq!(coll_op_from_name("ncclDevKernel_AllGather_RING_LL"), CollOp::AllGather);
        assert_eq!(coll_op_from_name("ncclKernel_SendRecv_RING_SIMPLE"), CollOp::Send);
        assert_eq!(coll_op_from_name("broadcast"), CollOp::Broadcast);
    }
}
