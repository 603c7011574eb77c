//! The event vocabulary: every record a ring file can hold.
//!
//! Timestamps are *ticks* of the process clock named in the file header (TSC or CLOCK_MONOTONIC ns);
//! `ClockSync` records map ticks to monotonic and wall-clock nanoseconds. Strings (kernel, API, NVTX,
//! counter names) are interned: a record holds a [`StrId`], defined once by a string-table entry.
//!
//! Records are plain `Copy` values with no heap data, so the shim can store them on its hot path
//! into preallocated per-thread buffers.

/// An interned string. Id 0 is the empty string / "unknown".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize), serde(transparent))]
pub struct StrId(pub u32);

impl StrId {
    pub const NONE: StrId = StrId(0);
}

/// Kind of a memory copy, as CUPTI's `CUpti_ActivityMemcpyKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum CopyKind {
    #[default]
    Unknown = 0,
    HtoD = 1,
    DtoH = 2,
    HtoA = 3,
    AtoH = 4,
    AtoA = 5,
    AtoD = 6,
    DtoA = 7,
    DtoD = 8,
    HtoH = 9,
    PtoP = 10,
}

impl CopyKind {
    pub fn from_u8(v: u8) -> CopyKind {
        use CopyKind::*;
        match v {
            1 => HtoD,
            2 => DtoH,
            3 => HtoA,
            4 => AtoH,
            5 => AtoA,
            6 => AtoD,
            7 => DtoA,
            8 => DtoD,
            9 => HtoH,
            10 => PtoP,
            _ => Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        use CopyKind::*;
        match self {
            Unknown => "Unknown",
            HtoD => "HtoD",
            DtoH => "DtoH",
            HtoA => "HtoA",
            AtoH => "AtoH",
            AtoA => "AtoA",
            AtoD => "AtoD",
            DtoA => "DtoA",
            DtoD => "DtoD",
            HtoH => "HtoH",
            PtoP => "PtoP",
        }
    }
}

/// Kind of memory at one end of a copy or memset, as CUPTI's `CUpti_ActivityMemoryKind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum MemoryKind {
    #[default]
    Unknown = 0,
    Pageable = 1,
    Pinned = 2,
    Device = 3,
    Array = 4,
    Managed = 5,
    DeviceStatic = 6,
    ManagedStatic = 7,
}

impl MemoryKind {
    pub fn from_u8(v: u8) -> MemoryKind {
        use MemoryKind::*;
        match v {
            1 => Pageable,
            2 => Pinned,
            3 => Device,
            4 => Array,
            5 => Managed,
            6 => DeviceStatic,
            7 => ManagedStatic,
            _ => Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        use MemoryKind::*;
        match self {
            Unknown => "unknown",
            Pageable => "pageable",
            Pinned => "pinned",
            Device => "device",
            Array => "array",
            Managed => "managed",
            DeviceStatic => "device_static",
            ManagedStatic => "managed_static",
        }
    }
}

/// What a synchronization waited for (CUPTI `CUpti_ActivitySynchronizationType`, plus host-side kinds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum SyncKind {
    #[default]
    Unknown = 0,
    EventSynchronize = 1,
    StreamWaitEvent = 2,
    StreamSynchronize = 3,
    ContextSynchronize = 4,
}

impl SyncKind {
    pub fn from_u8(v: u8) -> SyncKind {
        use SyncKind::*;
        match v {
            1 => EventSynchronize,
            2 => StreamWaitEvent,
            3 => StreamSynchronize,
            4 => ContextSynchronize,
            _ => Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        use SyncKind::*;
        match self {
            Unknown => "unknown",
            EventSynchronize => "event_synchronize",
            StreamWaitEvent => "stream_wait_event",
            StreamSynchronize => "stream_synchronize",
            ContextSynchronize => "context_synchronize",
        }
    }
}

/// A memory operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum MemOp {
    #[default]
    Alloc = 0,
    Free = 1,
    /// An allocation that failed (e.g. out of memory); `bytes` is the requested size.
    AllocFailed = 2,
}

impl MemOp {
    pub fn from_u8(v: u8) -> MemOp {
        match v {
            1 => MemOp::Free,
            2 => MemOp::AllocFailed,
            _ => MemOp::Alloc,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MemOp::Alloc => "alloc",
            MemOp::Free => "free",
            MemOp::AllocFailed => "alloc_failed",
        }
    }
}

/// Which memory an allocation came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum MemSpace {
    #[default]
    Device = 0,
    DeviceAsync = 1,
    HostPinned = 2,
    Managed = 3,
}

impl MemSpace {
    pub fn from_u8(v: u8) -> MemSpace {
        match v {
            1 => MemSpace::DeviceAsync,
            2 => MemSpace::HostPinned,
            3 => MemSpace::Managed,
            _ => MemSpace::Device,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            MemSpace::Device => "device",
            MemSpace::DeviceAsync => "device_async",
            MemSpace::HostPinned => "host_pinned",
            MemSpace::Managed => "managed",
        }
    }
}

/// NCCL operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum CollOp {
    #[default]
    Unknown = 0,
    AllReduce = 1,
    AllGather = 2,
    ReduceScatter = 3,
    Broadcast = 4,
    Reduce = 5,
    AllToAll = 6,
    Send = 7,
    Recv = 8,
    GroupStart = 9,
    GroupEnd = 10,
    CommInit = 11,
    CommDestroy = 12,
    CommAbort = 13,
    CommFinalize = 14,
    AsyncError = 15,
    Gather = 16,
    Scatter = 17,
    /// One-sided write into a peer's registered window, then a signal (`ncclPutSignal`).
    PutSignal = 18,
    /// A signal to a peer without data (`ncclSignal`).
    Signal = 19,
    /// Waiting for peers' signals (`ncclWaitSignal`).
    WaitSignal = 20,
}

impl CollOp {
    pub fn from_u8(v: u8) -> CollOp {
        use CollOp::*;
        match v {
            1 => AllReduce,
            2 => AllGather,
            3 => ReduceScatter,
            4 => Broadcast,
            5 => Reduce,
            6 => AllToAll,
            7 => Send,
            8 => Recv,
            9 => GroupStart,
            10 => GroupEnd,
            11 => CommInit,
            12 => CommDestroy,
            13 => CommAbort,
            14 => CommFinalize,
            15 => AsyncError,
            16 => Gather,
            17 => Scatter,
            18 => PutSignal,
            19 => Signal,
            20 => WaitSignal,
            _ => Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        use CollOp::*;
        match self {
            Unknown => "Unknown",
            AllReduce => "AllReduce",
            AllGather => "AllGather",
            ReduceScatter => "ReduceScatter",
            Broadcast => "Broadcast",
            Reduce => "Reduce",
            AllToAll => "AllToAll",
            Send => "Send",
            Recv => "Recv",
            GroupStart => "GroupStart",
            GroupEnd => "GroupEnd",
            CommInit => "CommInit",
            CommDestroy => "CommDestroy",
            CommAbort => "CommAbort",
            CommFinalize => "CommFinalize",
            AsyncError => "AsyncError",
            Gather => "Gather",
            Scatter => "Scatter",
            PutSignal => "PutSignal",
            Signal => "Signal",
            WaitSignal => "WaitSignal",
        }
    }
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
    /// True for the one-sided signal operations (put with signal, signal, wait for signals).
    pub fn is_one_sided(self) -> bool {
        matches!(self, CollOp::PutSignal | CollOp::Signal | CollOp::WaitSignal)
    }
}

/// Marker kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum MarkerKind {
    #[default]
    Unknown = 0,
    StepBegin = 1,
    StepEnd = 2,
    CaptureStart = 3,
    CaptureStop = 4,
    /// The hang watchdog fired; `value` = how long the call had been pending (ns), `name` = what was pending.
    HangSuspected = 5,
    /// `value` = events dropped by the shim since the previous marker of this kind.
    DroppedEvents = 6,
    /// `value` = records CUPTI reported dropped since the previous marker of this kind.
    CuptiDropped = 7,
    /// CUPTI is not available (no driver, another subscriber, disabled); `name` says why.
    CuptiUnavailable = 8,
    /// Process is exiting (clean shutdown); `value` = exit status when known.
    ProcessExit = 9,
    /// The shim disabled itself (panic caught, bad state); `name` says why.
    ShimDisabled = 10,
    /// Flight-recorder dump request served.
    FlightDump = 11,
    /// A fork happened; `value` = child pid (written in the parent).
    Fork = 12,
    /// Free-form note; `name` carries the text.
    Note = 13,
}

impl MarkerKind {
    pub fn from_u8(v: u8) -> MarkerKind {
        use MarkerKind::*;
        match v {
            1 => StepBegin,
            2 => StepEnd,
            3 => CaptureStart,
            4 => CaptureStop,
            5 => HangSuspected,
            6 => DroppedEvents,
            7 => CuptiDropped,
            8 => CuptiUnavailable,
            9 => ProcessExit,
            10 => ShimDisabled,
            11 => FlightDump,
            12 => Fork,
            13 => Note,
            _ => Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        use MarkerKind::*;
        match self {
            Unknown => "unknown",
            StepBegin => "step_begin",
            StepEnd => "step_end",
            CaptureStart => "capture_start",
            CaptureStop => "capture_stop",
            HangSuspected => "hang_suspected",
            DroppedEvents => "dropped_events",
            CuptiDropped => "cupti_dropped",
            CuptiUnavailable => "cupti_unavailable",
            ProcessExit => "process_exit",
            ShimDisabled => "shim_disabled",
            FlightDump => "flight_dump",
            Fork => "fork",
            Note => "note",
        }
    }
}

/// Where an API record came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[repr(u8)]
pub enum ApiDomain {
    /// Intercepted CUDA runtime call.
    #[default]
    Runtime = 0,
    /// Intercepted CUDA driver call.
    Driver = 1,
    /// A CUPTI RUNTIME activity record.
    CuptiRuntime = 2,
    /// A CUPTI DRIVER activity record.
    CuptiDriver = 3,
    /// An NCCL call.
    Nccl = 4,
}

impl ApiDomain {
    pub fn from_u8(v: u8) -> ApiDomain {
        match v {
            1 => ApiDomain::Driver,
            2 => ApiDomain::CuptiRuntime,
            3 => ApiDomain::CuptiDriver,
            4 => ApiDomain::Nccl,
            _ => ApiDomain::Runtime,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            ApiDomain::Runtime => "runtime",
            ApiDomain::Driver => "driver",
            ApiDomain::CuptiRuntime => "cupti_runtime",
            ApiDomain::CuptiDriver => "cupti_driver",
            ApiDomain::Nccl => "nccl",
        }
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
    /// A string-table entry carried in the ring (used when the dictionary region is full).
    /// The bytes live in the record payload; decoders see it through [`crate::Decoded::String`].
    StringRef { id: StrId },
}

/// Stable on-disk type codes. Never renumber; add new codes at the end.
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
}

impl Record {
    /// The on-disk type code of this record.
    pub fn type_code(&self) -> u8 {
        use type_code::*;
        match self {
            Record::ClockSync { .. } => CLOCK_SYNC,
            Record::Api { .. } => API,
            Record::Kernel { .. } => KERNEL,
            Record::Memcpy { .. } => MEMCPY,
            Record::Memset { .. } => MEMSET,
            Record::Sync { .. } => SYNC,
            Record::Memory { .. } => MEMORY,
            Record::Collective { .. } => COLLECTIVE,
            Record::ExternalCorrelation { .. } => EXTERNAL_CORRELATION,
            Record::NvtxPush { .. } => NVTX_PUSH,
            Record::NvtxPop { .. } => NVTX_POP,
            Record::NvtxStart { .. } => NVTX_START,
            Record::NvtxEnd { .. } => NVTX_END,
            Record::NvtxMark { .. } => NVTX_MARK,
            Record::ThreadName { .. } => THREAD_NAME,
            Record::Counter { .. } => COUNTER,
            Record::Marker { .. } => MARKER,
            Record::Overhead { .. } => OVERHEAD,
            Record::StringRef { .. } => STRING,
        }
    }

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
            | Record::Overhead { start, .. } => Some(start),
            Record::Memory { ts, .. }
            | Record::NvtxPush { ts, .. }
            | Record::NvtxPop { ts, .. }
            | Record::NvtxStart { ts, .. }
            | Record::NvtxEnd { ts, .. }
            | Record::NvtxMark { ts, .. }
            | Record::Counter { ts, .. }
            | Record::Marker { ts, .. } => Some(ts),
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
        STRING => "string",
        _ => "unknown",
    }
}
