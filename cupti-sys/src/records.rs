//! The common prefixes of the activity records tprof reads (`cupti_activity.h`,
//! `cupti_activity_deprecated.h`).
//!
//! CUPTI activity records are `__attribute__((packed, aligned(8)))` C structs. NVIDIA lays them out so
//! that every field is naturally aligned anyway, so a `#[repr(C)]` struct of the leading fields has the
//! same offsets. A newer CUPTI only appends fields (or renames padding), and
//! `cuptiActivityGetNextRecord` steps by the library's own record size, so reading a prefix is valid
//! for every record version listed at each type (`tests/real_headers.rs` checks every offset and size
//! against every installed CUPTI header, 12.8 to 13.5). Fields that appeared later are not part of
//! these prefixes; read them through an explicit offset ([`C_FIELDS_AT`]) gated on
//! [`crate::cupti_version_has`].
//!
//! Records in a buffer are only 8-byte aligned and the struct is packed in C: read them with
//! `ptr::read_unaligned` into these types.

use core::ffi::{c_char, c_void};
use core::mem::size_of;

use crate::abi::{CFieldAt, CRecord, CTypes};
use crate::constants::*;
use crate::{CUpti_ActivityKind, CUpti_CallbackId};

c_record! {
    Prefix, CTypes::Exact("CUpti_Activity");
    /// Every record starts with its kind (`CUpti_Activity` itself is 8 bytes: `aligned(8)`).
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ActivityHeader {
        pub kind: CUpti_ActivityKind => "kind",
    }
}

c_record! {
    Prefix, CTypes::Versions { base: "CUpti_ActivityKernel", first: 5 };
    /// `CUpti_ActivityKernel5..13` (CONCURRENT_KERNEL / KERNEL) up to `graphId`: the fields common to
    /// every version CUDA 11.x..13.x writes.
    #[derive(Clone, Copy, Debug)]
    pub struct ActivityKernelPrefix {
        pub kind: CUpti_ActivityKind => "kind",
        pub cache_config: u8 => "cacheConfig",
        pub shared_memory_config: u8 => "sharedMemoryConfig",
        pub registers_per_thread: u16 => "registersPerThread",
        pub partitioned_global_cache_requested: u32 => "partitionedGlobalCacheRequested",
        pub partitioned_global_cache_executed: u32 => "partitionedGlobalCacheExecuted",
        pub start: u64 => "start",
        pub end: u64 => "end",
        pub completed: u64 => "completed",
        pub device_id: u32 => "deviceId",
        pub context_id: u32 => "contextId",
        pub stream_id: u32 => "streamId",
        pub grid_x: i32 => "gridX",
        pub grid_y: i32 => "gridY",
        pub grid_z: i32 => "gridZ",
        pub block_x: i32 => "blockX",
        pub block_y: i32 => "blockY",
        pub block_z: i32 => "blockZ",
        pub static_shared_memory: i32 => "staticSharedMemory",
        pub dynamic_shared_memory: i32 => "dynamicSharedMemory",
        pub local_memory_per_thread: u32 => "localMemoryPerThread",
        pub local_memory_total: u32 => "localMemoryTotal",
        pub correlation_id: u32 => "correlationId",
        pub grid_id: i64 => "gridId",
        pub name: *const c_char => "name",
        pub reserved0: *mut c_void => "reserved0",
        pub queued: u64 => "queued",
        pub submitted: u64 => "submitted",
        pub launch_type: u8 => "launchType",
        pub is_shared_memory_carveout_requested: u8 => "isSharedMemoryCarveoutRequested",
        pub shared_memory_carveout_requested: u8 => "sharedMemoryCarveoutRequested",
        pub padding: u8 => "padding",
        pub shared_memory_executed: u32 => "sharedMemoryExecuted",
        pub graph_node_id: u64 => "graphNodeId",
        pub shmem_limit_config: u32 => "shmemLimitConfig",
        pub graph_id: u32 => "graphId",
    }
}

c_record! {
    Prefix, CTypes::Versions { base: "CUpti_ActivityMemcpy", first: 4 };
    /// `CUpti_ActivityMemcpy4..7` (MEMCPY) up to `graphId`.
    #[derive(Clone, Copy, Debug)]
    pub struct ActivityMemcpyPrefix {
        pub kind: CUpti_ActivityKind => "kind",
        pub copy_kind: u8 => "copyKind",
        pub src_kind: u8 => "srcKind",
        pub dst_kind: u8 => "dstKind",
        pub flags: u8 => "flags",
        pub bytes: u64 => "bytes",
        pub start: u64 => "start",
        pub end: u64 => "end",
        pub device_id: u32 => "deviceId",
        pub context_id: u32 => "contextId",
        pub stream_id: u32 => "streamId",
        pub correlation_id: u32 => "correlationId",
        pub runtime_correlation_id: u32 => "runtimeCorrelationId",
        pub pad: u32 => "pad",
        pub reserved0: *mut c_void => "reserved0",
        pub graph_node_id: u64 => "graphNodeId",
        pub graph_id: u32 => "graphId",
    }
}

c_record! {
    Prefix, CTypes::Versions { base: "CUpti_ActivityMemset", first: 3 };
    /// `CUpti_ActivityMemset3..5` (MEMSET) up to `graphId`.
    #[derive(Clone, Copy, Debug)]
    pub struct ActivityMemsetPrefix {
        pub kind: CUpti_ActivityKind => "kind",
        pub value: u32 => "value",
        pub bytes: u64 => "bytes",
        pub start: u64 => "start",
        pub end: u64 => "end",
        pub device_id: u32 => "deviceId",
        pub context_id: u32 => "contextId",
        pub stream_id: u32 => "streamId",
        pub correlation_id: u32 => "correlationId",
        pub flags: u16 => "flags",
        pub memory_kind: u16 => "memoryKind",
        pub pad: u32 => "pad",
        pub reserved0: *mut c_void => "reserved0",
        pub graph_node_id: u64 => "graphNodeId",
        pub graph_id: u32 => "graphId",
    }
}

c_record! {
    Whole, CTypes::Exact("CUpti_ActivityAPI");
    /// `CUpti_ActivityAPI` (RUNTIME / DRIVER), unversioned.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ActivityApi {
        pub kind: CUpti_ActivityKind => "kind",
        pub cbid: CUpti_CallbackId => "cbid",
        pub start: u64 => "start",
        pub end: u64 => "end",
        pub process_id: u32 => "processId",
        pub thread_id: u32 => "threadId",
        pub correlation_id: u32 => "correlationId",
        pub return_value: u32 => "returnValue",
    }
}

c_record! {
    Prefix, CTypes::Versions { base: "CUpti_ActivitySynchronization", first: 1 };
    /// `CUpti_ActivitySynchronization` (v1 layout; v2 appends `cudaEventSyncId`, `returnValue`).
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ActivitySynchronizationPrefix {
        pub kind: CUpti_ActivityKind => "kind",
        pub sync_type: u32 => "type",
        pub start: u64 => "start",
        pub end: u64 => "end",
        pub correlation_id: u32 => "correlationId",
        pub context_id: u32 => "contextId",
        pub stream_id: u32 => "streamId",
        pub cuda_event_id: u32 => "cudaEventId",
    }
}

/// Offset of `returnValue` in `CUpti_ActivitySynchronization2` (CUPTI 12.8+,
/// [`CUPTI_API_VERSION_12_8`]).
pub const SYNCHRONIZATION2_RETURN_VALUE_OFFSET: usize = 48;

c_record! {
    Whole, CTypes::Exact("CUpti_ActivityExternalCorrelation");
    /// `CUpti_ActivityExternalCorrelation`, unversioned.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ActivityExternalCorrelation {
        pub kind: CUpti_ActivityKind => "kind",
        pub external_kind: u32 => "externalKind",
        pub external_id: u64 => "externalId",
        pub correlation_id: u32 => "correlationId",
        pub reserved: u32 => "reserved",
    }
}

c_record! {
    Prefix, CTypes::Versions { base: "CUpti_ActivityMemory", first: 2 };
    /// `CUpti_ActivityMemory2..4` (MEMORY2) up to `isAsync`.
    #[derive(Clone, Copy, Debug)]
    pub struct ActivityMemoryPrefix {
        pub kind: CUpti_ActivityKind => "kind",
        pub memory_operation_type: u32 => "memoryOperationType",
        pub memory_kind: u32 => "memoryKind",
        pub correlation_id: u32 => "correlationId",
        pub address: u64 => "address",
        pub bytes: u64 => "bytes",
        pub timestamp: u64 => "timestamp",
        pub pc: u64 => "PC",
        pub process_id: u32 => "processId",
        pub device_id: u32 => "deviceId",
        pub context_id: u32 => "contextId",
        pub stream_id: u32 => "streamId",
        pub name: *const c_char => "name",
        pub is_async: u32 => "isAsync",
    }
}

c_record! {
    Prefix, CTypes::Versions { base: "CUpti_ActivityOverhead", first: 2 };
    /// `CUpti_ActivityOverhead2/3` (OVERHEAD) up to `correlationId`.
    #[derive(Clone, Copy, Debug, Default)]
    pub struct ActivityOverheadPrefix {
        pub kind: CUpti_ActivityKind => "kind",
        pub overhead_kind: u32 => "overheadKind",
        pub object_kind: u32 => "objectKind",
        /// `CUpti_ActivityObjectKindId`: `{processId, threadId}` or `{deviceId, contextId, streamId}`.
        pub object_id: [u32; 3] => "objectId",
        pub start: u64 => "start",
        pub end: u64 => "end",
        pub correlation_id: u32 => "correlationId",
    }
}

/// Every record type above, for the header check.
pub const C_RECORDS: &[CRecord] = &[
    ActivityHeader::C_LAYOUT,
    ActivityKernelPrefix::C_LAYOUT,
    ActivityMemcpyPrefix::C_LAYOUT,
    ActivityMemsetPrefix::C_LAYOUT,
    ActivityApi::C_LAYOUT,
    ActivitySynchronizationPrefix::C_LAYOUT,
    ActivityExternalCorrelation::C_LAYOUT,
    ActivityMemoryPrefix::C_LAYOUT,
    ActivityOverheadPrefix::C_LAYOUT,
];

/// Every field read at an explicit offset, for the header check.
pub const C_FIELDS_AT: &[CFieldAt] = &[CFieldAt {
    rust_name: "SYNCHRONIZATION2_RETURN_VALUE_OFFSET",
    c_types: CTypes::Versions { base: "CUpti_ActivitySynchronization", first: 2 },
    c_name: "returnValue",
    offset: SYNCHRONIZATION2_RETURN_VALUE_OFFSET,
    size: size_of::<u32>(),
}];

/// Bytes of each record kind's prefix: a record shorter than this in a buffer is not read.
pub fn prefix_size(kind: CUpti_ActivityKind) -> usize {
    match kind {
        CUPTI_ACTIVITY_KIND_KERNEL | CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => size_of::<ActivityKernelPrefix>(),
        CUPTI_ACTIVITY_KIND_MEMCPY => size_of::<ActivityMemcpyPrefix>(),
        CUPTI_ACTIVITY_KIND_MEMSET => size_of::<ActivityMemsetPrefix>(),
        CUPTI_ACTIVITY_KIND_RUNTIME | CUPTI_ACTIVITY_KIND_DRIVER => size_of::<ActivityApi>(),
        CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => size_of::<ActivitySynchronizationPrefix>(),
        CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => size_of::<ActivityExternalCorrelation>(),
        CUPTI_ACTIVITY_KIND_MEMORY2 => size_of::<ActivityMemoryPrefix>(),
        CUPTI_ACTIVITY_KIND_OVERHEAD => size_of::<ActivityOverheadPrefix>(),
        _ => size_of::<ActivityHeader>(),
    }
}
