//! The event vocabulary: every record a ring file can hold.
//!
//! Timestamps are *ticks* of the process clock named in the file header (TSC or CLOCK_MONOTONIC ns);
//! `ClockSync` records map ticks to monotonic and wall-clock nanoseconds. Strings (kernel, API, NVTX,
//! counter names) are interned: a record holds a [`StrId`], defined once by a string-table entry.
//!
//! Records are plain `Copy` values with no heap data, so the shim can store them on its hot path
//! into preallocated per-thread buffers.

mod host;
mod wire_enum;

pub use host::{HostMetric, HostScope};
use wire_enum::wire_enum;

/// An interned string. Id 0 is the empty string / "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(transparent))]
pub struct StrId(pub u32);

impl StrId {
    pub const NONE: StrId = StrId(0);
}

wire_enum! {
    /// Kind of a memory copy, as CUPTI's `CUpti_ActivityMemcpyKind`.
    pub enum CopyKind {
        #[default]
        Unknown = 0 => "Unknown",
        HtoD = 1 => "HtoD",
        DtoH = 2 => "DtoH",
        HtoA = 3 => "HtoA",
        AtoH = 4 => "AtoH",
        AtoA = 5 => "AtoA",
        AtoD = 6 => "AtoD",
        DtoA = 7 => "DtoA",
        DtoD = 8 => "DtoD",
        HtoH = 9 => "HtoH",
        PtoP = 10 => "PtoP",
    }
}

wire_enum! {
    /// Kind of memory at one end of a copy or memset, as CUPTI's `CUpti_ActivityMemoryKind`.
    pub enum MemoryKind {
        #[default]
        Unknown = 0 => "unknown",
        Pageable = 1 => "pageable",
        Pinned = 2 => "pinned",
        Device = 3 => "device",
        Array = 4 => "array",
        Managed = 5 => "managed",
        DeviceStatic = 6 => "device_static",
        ManagedStatic = 7 => "managed_static",
    }
}

wire_enum! {
    /// What a synchronization waited for (CUPTI `CUpti_ActivitySynchronizationType`, plus host-side kinds).
    pub enum SyncKind {
        #[default]
        Unknown = 0 => "unknown",
        EventSynchronize = 1 => "event_synchronize",
        StreamWaitEvent = 2 => "stream_wait_event",
        StreamSynchronize = 3 => "stream_synchronize",
        ContextSynchronize = 4 => "context_synchronize",
    }
}

wire_enum! {
    /// A memory operation.
    pub enum MemOp {
        #[default]
        Alloc = 0 => "alloc",
        Free = 1 => "free",
        /// An allocation that failed (e.g. out of memory); `bytes` is the requested size.
        AllocFailed = 2 => "alloc_failed",
    }
}

wire_enum! {
    /// Which memory an allocation came from.
    pub enum MemSpace {
        #[default]
        Device = 0 => "device",
        DeviceAsync = 1 => "device_async",
        HostPinned = 2 => "host_pinned",
        Managed = 3 => "managed",
    }
}

wire_enum! {
    /// NCCL operation.
    #[derive(PartialOrd, Ord)]
    pub enum CollOp {
        #[default]
        Unknown = 0 => "Unknown",
        AllReduce = 1 => "AllReduce",
        AllGather = 2 => "AllGather",
        ReduceScatter = 3 => "ReduceScatter",
        Broadcast = 4 => "Broadcast",
        Reduce = 5 => "Reduce",
        AllToAll = 6 => "AllToAll",
        Send = 7 => "Send",
        Recv = 8 => "Recv",
        GroupStart = 9 => "GroupStart",
        GroupEnd = 10 => "GroupEnd",
        CommInit = 11 => "CommInit",
        CommDestroy = 12 => "CommDestroy",
        CommAbort = 13 => "CommAbort",
        CommFinalize = 14 => "CommFinalize",
        AsyncError = 15 => "AsyncError",
        Gather = 16 => "Gather",
        Scatter = 17 => "Scatter",
        /// One-sided write into a peer's registered window, then a signal (`ncclPutSignal`).
        PutSignal = 18 => "PutSignal",
        /// A signal to a peer without data (`ncclSignal`).
        Signal = 19 => "Signal",
        /// Waiting for peers' signals (`ncclWaitSignal`).
        WaitSignal = 20 => "WaitSignal",
    }
}

impl CollOp {
    /// True for operations that move data (have bytes and a sequence number). The one-sided
    /// operations ([`CollOp::is_one_sided`]) are not among them: only the origin rank calls them, so
    /// they have no per-communicator sequence number that matches across ranks.
    pub fn moves_data(self) -> bool {
        use CollOp::*;
        matches!(
            self,
            AllReduce | AllGather | ReduceScatter | Broadcast | Reduce | AllToAll | Send | Recv | Gather | Scatter
        )
    }
    /// True for the point-to-point operations (send, receive): matched with the peer's
    /// counterpart, not across all ranks of the communicator.
    pub fn is_p2p(self) -> bool {
        matches!(self, CollOp::Send | CollOp::Recv)
    }
    /// True for the one-sided signal operations (put with signal, signal, wait for signals).
    pub fn is_one_sided(self) -> bool {
        matches!(self, CollOp::PutSignal | CollOp::Signal | CollOp::WaitSignal)
    }
}

wire_enum! {
    /// Marker kinds.
    pub enum MarkerKind {
        #[default]
        Unknown = 0 => "unknown",
        StepBegin = 1 => "step_begin",
        StepEnd = 2 => "step_end",
        CaptureStart = 3 => "capture_start",
        CaptureStop = 4 => "capture_stop",
        /// The hang watchdog fired; `value` = how long the call had been pending (ns), `name` = what was pending.
        HangSuspected = 5 => "hang_suspected",
        /// `value` = events dropped by the shim since the previous marker of this kind.
        DroppedEvents = 6 => "dropped_events",
        /// `value` = records CUPTI reported dropped since the previous marker of this kind.
        CuptiDropped = 7 => "cupti_dropped",
        /// CUPTI is not available (no driver, another subscriber, disabled); `name` says why.
        CuptiUnavailable = 8 => "cupti_unavailable",
        /// Process is exiting (clean shutdown); `value` = exit status when known.
        ProcessExit = 9 => "process_exit",
        /// The shim disabled itself (panic caught, bad state); `name` says why.
        ShimDisabled = 10 => "shim_disabled",
        /// Flight-recorder dump request served.
        FlightDump = 11 => "flight_dump",
        /// A fork happened; `value` = child pid (written in the parent).
        Fork = 12 => "fork",
        /// Free-form note; `name` carries the text.
        Note = 13 => "note",
    }
}

wire_enum! {
    /// Where an API record came from.
    pub enum ApiDomain {
        /// Intercepted CUDA runtime call.
        #[default]
        Runtime = 0 => "runtime",
        /// Intercepted CUDA driver call.
        Driver = 1 => "driver",
        /// A CUPTI RUNTIME activity record.
        CuptiRuntime = 2 => "cupti_runtime",
        /// A CUPTI DRIVER activity record.
        CuptiDriver = 3 => "cupti_driver",
        /// An NCCL call.
        Nccl = 4 => "nccl",
    }
}

/// One event. All timestamps are ticks (see module docs).
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub enum Record {
    /// Maps ticks to CLOCK_MONOTONIC and CLOCK_REALTIME nanoseconds.
    ClockSync { ticks: u64, mono_ns: u64, wall_ns: u64 },
    /// A host API call (CUDA runtime/driver, intercepted or from CUPTI). `correlation` links it to GPU work
    /// (CUPTI's correlation id when known, else the shim's own id, also stamped on the launch's GPU record).
    Api {
        tid: u32,
        domain: ApiDomain,
        name: StrId,
        start: u64,
        end: u64,
        result: i32,
        correlation: u32,
        /// For launches: the kernel name (from registration); for memory calls: 0.
        detail: StrId,
        /// Stream handle or id the call targeted (0 = default / not applicable).
        stream: u64,
        /// For launches: grid.x*grid.y*grid.z*block...; for copies/allocs: bytes. 0 when n/a.
        arg: u64,
    },
    /// A kernel execution on the GPU (from CUPTI, or estimated by the interposer when CUPTI is off:
    /// then `start == end == 0` and `correlation` links it to its launch).
    Kernel {
        device: u32,
        context: u32,
        stream: u32,
        start: u64,
        end: u64,
        grid: [u32; 3],
        block: [u32; 3],
        registers: u16,
        shared_mem: u32,
        correlation: u32,
        name: StrId,
        graph_id: u32,
    },
    /// A memory copy on the GPU.
    Memcpy {
        device: u32,
        context: u32,
        stream: u32,
        start: u64,
        end: u64,
        bytes: u64,
        kind: CopyKind,
        src_kind: MemoryKind,
        dst_kind: MemoryKind,
        correlation: u32,
    },
    /// A memset on the GPU.
    Memset {
        device: u32,
        context: u32,
        stream: u32,
        start: u64,
        end: u64,
        bytes: u64,
        value: u32,
        dst_kind: MemoryKind,
        correlation: u32,
    },
    /// A synchronization (CUPTI Synchronization record, or an intercepted synchronizing call).
    Sync {
        kind: SyncKind,
        tid: u32,
        context: u32,
        stream: u32,
        event: u64,
        start: u64,
        end: u64,
        correlation: u32,
        result: i32,
    },
    /// A memory allocation / free (intercepted or CUPTI Memory record).
    Memory {
        op: MemOp,
        space: MemSpace,
        device: u32,
        address: u64,
        bytes: u64,
        /// The device's total reservation by this process after the operation (before it, for failures).
        reserved: u64,
        ts: u64,
        result: i32,
        correlation: u32,
        tid: u32,
    },
    /// An NCCL call on the host (collectives, p2p, group and communicator calls).
    Collective {
        tid: u32,
        op: CollOp,
        start: u64,
        end: u64,
        /// Communicator identity, identical on every rank of the communicator (hash of the unique id).
        comm: u64,
        rank: u32,
        nranks: u32,
        count: u64,
        datatype: u8,
        bytes: u64,
        /// Root for rooted collectives, peer for send/recv, -1 otherwise.
        peer: i32,
        stream: u64,
        /// Per-communicator sequence number of data-moving operations (0-based).
        seq: u64,
        result: i32,
        correlation: u32,
        device: u32,
    },
    /// Links an external (tprof / framework) id to a CUPTI correlation id.
    ExternalCorrelation { kind: u8, external_id: u64, correlation: u32 },
    /// NVTX push (nested ranges, per thread and domain).
    NvtxPush { tid: u32, domain: StrId, name: StrId, ts: u64 },
    /// NVTX pop.
    NvtxPop { tid: u32, domain: StrId, ts: u64 },
    /// NVTX start/end range begin (may end on another thread).
    NvtxStart { tid: u32, domain: StrId, name: StrId, id: u64, ts: u64 },
    /// NVTX start/end range end.
    NvtxEnd { tid: u32, id: u64, ts: u64 },
    /// NVTX mark (instant).
    NvtxMark { tid: u32, domain: StrId, name: StrId, ts: u64 },
    /// A thread got a name (NVTX nameOsThread or the OS name).
    ThreadName { tid: u32, name: StrId },
    /// A counter sample (GPU metrics, memory in use...). `device` is u32::MAX for process-wide counters.
    Counter { name: StrId, device: u32, ts: u64, value: f64 },
    /// A marker (steps, capture windows, hang, drops...).
    Marker { kind: MarkerKind, ts: u64, value: u64, name: StrId },
    /// CUPTI overhead record. `kind`: `CUpti_ActivityOverheadKind` in one byte: the driver's kinds
    /// (below 2^16) as they are, CUPTI's own (`n << 16`) as `0x80 | n`.
    Overhead { kind: u8, start: u64, end: u64, tid: u32 },
    /// `calls` more calls of one API on one thread, each the same call as the `Api` record that came
    /// before them on that thread (same name, same handle in `stream`, same `result`): a completion
    /// poll (`cudaStreamQuery`, `cudaEventQuery` ...) repeated until the answer changes. `start` is
    /// the first repeat's start, `end` the last one's end, `busy` the ticks spent inside the calls
    /// (their durations summed). The first call of the run is its own `Api` record.
    ApiRepeat {
        tid: u32,
        domain: ApiDomain,
        name: StrId,
        start: u64,
        end: u64,
        result: i32,
        stream: u64,
        calls: u64,
        busy: u64,
    },
    /// NCCL profiler plugin: NCCL initialised the plugin for a communicator (`init`). `comm` is NCCL's
    /// own communicator hash (the same on every rank; not the interposers' `Collective::comm`).
    NcclCommInfo { comm: u64, name: StrId, nnodes: u32, nranks: u32, rank: u32, plugin_version: u8, ts: u64 },
    /// NCCL profiler plugin: one collective or point-to-point task as NCCL scheduled it, written when
    /// the task and all its proxy and kernel-channel events have ended. `start`/`end`: the task event
    /// on the host (ticks); `gpu_start`/`gpu_end`: first channel start and last channel stop of its
    /// kernel (GPU global timer ns, 0 when not offered); `channels_seen`: kernel channels reported.
    /// `seq`: NCCL's per-function sequence number (collectives; 0 for p2p). `peer`: root or peer.
    /// `graph_captured`: 1 captured in a CUDA graph, 0 not, 2 unknown (plugin versions before v5).
    /// `correlation`: the interposed NCCL call's shim id when the task started inside one, else 0.
    NcclTask {
        comm: u64,
        seq: u64,
        op: CollOp,
        count: u64,
        datatype: StrId,
        algo: StrId,
        proto: StrId,
        nchannels: u8,
        nwarps: u8,
        peer: i32,
        graph_captured: u8,
        start: u64,
        end: u64,
        gpu_start: u64,
        gpu_end: u64,
        channels_seen: u8,
        correlation: u32,
    },
    /// NCCL profiler plugin: one proxy operation (network send or receive on one channel with one
    /// peer) summarised over its steps. `start`/`end`: the operation (ticks); `wire` ticks the steps
    /// spent on the network (send: posted until done; receive: posted until data arrived), `wait`
    /// ticks waiting for the GPU, peer credits or flushes (since 2026-12-02 measured on one step in 2
    /// and scaled to all steps by the shim); `bytes`: the steps' transfer sizes summed.
    NcclProxy {
        comm: u64,
        seq: u64,
        channel: u8,
        peer: i32,
        is_send: u8,
        steps: u32,
        bytes: u64,
        start: u64,
        end: u64,
        wire: u64,
        wait: u64,
    },
    /// Topology (once per process, off the hot path): this process's GPU as NVML and sysfs see it.
    /// `host`: the node's host name; `device`: NVML index; `bus_id`: PCI bus id as NVML writes it;
    /// `numa_node`: -1 unknown; `nvlinks`: active NVLinks, `nvlink_version`: NVML's
    /// `nvmlNvlinkVersion_t` of the first active one (see [`crate::topology`]); `gpus`: GPUs NVML sees.
    TopoGpu {
        ts: u64,
        host: StrId,
        device: u32,
        bus_id: StrId,
        numa_node: i32,
        nvlinks: u32,
        nvlink_version: u32,
        gpus: u32,
    },
    /// Topology: one network port of the node. `kind`: [`crate::topology::NicKind`] byte; `rate_mbps`:
    /// line rate in Mbit/s (0: down or unknown); `path`: [`crate::topology::PathLevel`] byte from this
    /// process's GPU to the NIC.
    TopoNic { ts: u64, name: StrId, port: u32, kind: u8, rate_mbps: u64, numa_node: i32, path: u8 },
    /// Topology: the path from this process's GPU (`device`) to another GPU of the node (`peer`):
    /// `level` a [`crate::topology::PathLevel`] byte, `nvlink` 1 when NVML reports NVLink P2P between them.
    TopoGpuPath { ts: u64, device: u32, peer: u32, level: u8, nvlink: u8 },
    /// Topology: one NCCL setting of the process (an environment variable of
    /// [`crate::topology::NCCL_SETTINGS`] that is set), written with the topology records. Added after
    /// format version 1's first readers, which skip it by its type code.
    NcclSetting { ts: u64, name: StrId, value: StrId },
    /// A string-table entry carried in the ring (used when the dictionary region is full).
    /// The bytes live in the record payload; decoders see it through [`crate::Decoded::String`].
    StringRef { id: StrId },
    /// One host counter (see [`HostMetric`]) of one process, thread, core, disk or interface, sampled
    /// from /proc or sysfs by the shim's host sampler.
    HostSample { scope: HostScope, id: u32, metric: HostMetric, ts: u64, value: u64 },
    /// Names a host entity when the sampler first sees it (and again when a thread renames itself):
    /// a process (`parent` = ppid), thread (`parent` = pid), core (`parent` = NUMA node), disk or interface.
    HostEntity { scope: HostScope, id: u32, parent: u32, ts: u64, name: StrId },
}

/// Stable on-disk type codes. Never renumber; add new codes at the end. Which record has which code
/// (`Record::type_code`) is part of the record table in [`crate::codec`].
pub mod type_code {
    pub const CLOCK_SYNC: u8 = 1;
    pub const API: u8 = 2;
    pub const KERNEL: u8 = 3;
    pub const MEMCPY: u8 = 4;
    pub const MEMSET: u8 = 5;
    pub const SYNC: u8 = 6;
    pub const MEMORY: u8 = 7;
    pub const COLLECTIVE: u8 = 8;
    pub const EXTERNAL_CORRELATION: u8 = 9;
    pub const NVTX_PUSH: u8 = 10;
    pub const NVTX_POP: u8 = 11;
    pub const NVTX_START: u8 = 12;
    pub const NVTX_END: u8 = 13;
    pub const NVTX_MARK: u8 = 14;
    pub const THREAD_NAME: u8 = 15;
    pub const COUNTER: u8 = 16;
    pub const MARKER: u8 = 17;
    pub const OVERHEAD: u8 = 18;
    /// A string definition inline in the ring: varint id, then the UTF-8 bytes.
    pub const STRING: u8 = 19;
    /// A thread-context switch: subsequent records without their own tid use it (reserved).
    pub const RESERVED_20: u8 = 20;
    pub const API_REPEAT: u8 = 21;
    /// 22-27: the NCCL profiler plugin and topology.
    pub const NCCL_COMM_INFO: u8 = 22;
    pub const NCCL_TASK: u8 = 23;
    pub const NCCL_PROXY: u8 = 24;
    /// 25-27: topology (once per process).
    pub const TOPO_GPU: u8 = 25;
    pub const TOPO_NIC: u8 = 26;
    pub const TOPO_GPU_PATH: u8 = 27;
    // host records take 28-33.
    pub const HOST_SAMPLE: u8 = 28;
    pub const HOST_ENTITY: u8 = 29;
    /// 34: the NCCL settings beside the topology (30-33 stay with the host records).
    pub const NCCL_SETTING: u8 = 34;
}

impl Record {
    /// A short lowercase name of the record type (for `tprof info` counts and dumps).
    pub fn type_name(&self) -> &'static str {
        type_name(self.type_code())
    }

    /// The record's main timestamp (start for intervals), if it has one.
    pub fn timestamp(&self) -> Option<u64> {
        match *self {
            Record::ClockSync { ticks, .. } => Some(ticks),
            Record::Api { start, .. }
            | Record::Kernel { start, .. }
            | Record::Memcpy { start, .. }
            | Record::Memset { start, .. }
            | Record::Sync { start, .. }
            | Record::Collective { start, .. }
            | Record::Overhead { start, .. }
            | Record::ApiRepeat { start, .. }
            | Record::NcclTask { start, .. }
            | Record::NcclProxy { start, .. } => Some(start),
            Record::Memory { ts, .. }
            | Record::NvtxPush { ts, .. }
            | Record::NvtxPop { ts, .. }
            | Record::NvtxStart { ts, .. }
            | Record::NvtxEnd { ts, .. }
            | Record::NvtxMark { ts, .. }
            | Record::Counter { ts, .. }
            | Record::Marker { ts, .. }
            | Record::NcclCommInfo { ts, .. } => Some(ts),
            Record::TopoGpu { ts, .. }
            | Record::TopoNic { ts, .. }
            | Record::TopoGpuPath { ts, .. }
            | Record::NcclSetting { ts, .. } => Some(ts),
            Record::HostSample { ts, .. } | Record::HostEntity { ts, .. } => Some(ts),
            Record::ExternalCorrelation { .. } | Record::ThreadName { .. } | Record::StringRef { .. } => None,
        }
    }
}

/// Name of a type code ("unknown" for codes this version does not know).
pub fn type_name(code: u8) -> &'static str {
    use type_code::*;
    match code {
        CLOCK_SYNC => "clock_sync",
        API => "api",
        KERNEL => "kernel",
        MEMCPY => "memcpy",
        MEMSET => "memset",
        SYNC => "sync",
        MEMORY => "memory",
        COLLECTIVE => "collective",
        EXTERNAL_CORRELATION => "external_correlation",
        NVTX_PUSH => "nvtx_push",
        NVTX_POP => "nvtx_pop",
        NVTX_START => "nvtx_start",
        NVTX_END => "nvtx_end",
        NVTX_MARK => "nvtx_mark",
        THREAD_NAME => "thread_name",
        COUNTER => "counter",
        MARKER => "marker",
        OVERHEAD => "overhead",
        API_REPEAT => "api_repeat",
        STRING => "string",
        NCCL_COMM_INFO => "nccl_comm_info",
        NCCL_TASK => "nccl_task",
        NCCL_PROXY => "nccl_proxy",
        TOPO_GPU => "topo_gpu",
        TOPO_NIC => "topo_nic",
        TOPO_GPU_PATH => "topo_gpu_path",
        NCCL_SETTING => "nccl_setting",
        HOST_SAMPLE => "host_sample",
        HOST_ENTITY => "host_entity",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One wire enum's table: every byte reads back as its variant, bytes this version does not know
    /// read as the default, names are distinct.
    fn check_table<E: Copy + PartialEq + Default + std::fmt::Debug>(
        all: &[E],
        byte: impl Fn(E) -> u8,
        from_u8: impl Fn(u8) -> E,
        name: impl Fn(E) -> &'static str,
    ) {
        for &v in all {
            assert_eq!(from_u8(byte(v)), v);
        }
        let known: Vec<u8> = all.iter().map(|&v| byte(v)).collect();
        for b in (0..=u8::MAX).filter(|b| !known.contains(b)) {
            assert_eq!(from_u8(b), E::default(), "byte {b}");
        }
        let mut names: Vec<&str> = all.iter().map(|&v| name(v)).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len(), "names of {all:?} are not distinct");
    }

    #[test]
    fn wire_enum_tables_read_back_and_name_every_variant() {
        check_table(CopyKind::ALL, |v| v as u8, CopyKind::from_u8, CopyKind::name);
        check_table(MemoryKind::ALL, |v| v as u8, MemoryKind::from_u8, MemoryKind::name);
        check_table(SyncKind::ALL, |v| v as u8, SyncKind::from_u8, SyncKind::name);
        check_table(MemOp::ALL, |v| v as u8, MemOp::from_u8, MemOp::name);
        check_table(MemSpace::ALL, |v| v as u8, MemSpace::from_u8, MemSpace::name);
        check_table(CollOp::ALL, |v| v as u8, CollOp::from_u8, CollOp::name);
        check_table(MarkerKind::ALL, |v| v as u8, MarkerKind::from_u8, MarkerKind::name);
        check_table(ApiDomain::ALL, |v| v as u8, ApiDomain::from_u8, ApiDomain::name);
        assert_eq!(CollOp::ALL.len(), 21);
        assert_eq!(MarkerKind::from_u8(13), MarkerKind::Note);
        assert_eq!(MemOp::from_u8(200), MemOp::Alloc);
    }
}
