//! Minimal CUPTI FFI: the common prefixes of the activity records tprof reads, the constants it uses
//! and the C function-pointer types of the entry points it resolves.
//!
//! Nothing here links against `libcupti`: the shim `dlopen`s it at run time and casts `dlsym`
//! results to the `Fn*` types below.
//!
//! # Record layout
//! CUPTI activity records are `__attribute__((packed, aligned(8)))` C structs. NVIDIA lays them out so
//! that every field is naturally aligned anyway, so a `#[repr(C)]` struct of the leading fields has the
//! same offsets (checked against the 12.9 headers by the `const` assertions at the bottom). A newer
//! CUPTI only appends fields (or renames padding), and `cuptiActivityGetNextRecord` steps by the
//! library's own record size, so reading a prefix is valid for every 12.x / 13.x record version.
//! Fields that appeared later are not part of these prefixes; read them through an explicit offset
//! gated on [`cupti_version_has`].
//!
//! Records in a buffer are only 8-byte aligned and the struct is packed in C: read them with
//! `ptr::read_unaligned` into these types.
#![cfg_attr(not(test), no_std)]
#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

use core::ffi::{c_char, c_void};

pub type CUptiResult = u32;
pub type CUpti_ActivityKind = u32;
pub type CUpti_CallbackDomain = u32;
pub type CUpti_CallbackId = u32;
pub type CUpti_SubscriberHandle = *mut c_void;
pub type CUcontext = *mut c_void;

// ---------------------------------------------------------------- results (cupti_result.h)

pub const CUPTI_SUCCESS: CUptiResult = 0;
pub const CUPTI_ERROR_INVALID_PARAMETER: CUptiResult = 1;
pub const CUPTI_ERROR_MAX_LIMIT_REACHED: CUptiResult = 12;
pub const CUPTI_ERROR_NOT_INITIALIZED: CUptiResult = 15;
pub const CUPTI_ERROR_QUEUE_EMPTY: CUptiResult = 18;
pub const CUPTI_ERROR_INVALID_KIND: CUptiResult = 21;
pub const CUPTI_ERROR_NOT_COMPATIBLE: CUptiResult = 26;
pub const CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CUptiResult = 39;
pub const CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: CUptiResult = 35;
pub const CUPTI_ERROR_UNKNOWN: CUptiResult = 999;

/// True when `cuptiActivityEnable` refused one kind as unavailable here (the others may still work).
pub fn kind_unavailable(r: CUptiResult) -> bool {
    r == CUPTI_ERROR_NOT_COMPATIBLE || r == CUPTI_ERROR_INVALID_KIND
}

/// A short name for a CUPTI result code (for the one-line warnings).
pub fn result_name(r: CUptiResult) -> &'static str {
    match r {
        0 => "CUPTI_SUCCESS",
        1 => "CUPTI_ERROR_INVALID_PARAMETER",
        12 => "CUPTI_ERROR_MAX_LIMIT_REACHED",
        15 => "CUPTI_ERROR_NOT_INITIALIZED",
        17 => "CUPTI_ERROR_NOT_SUPPORTED",
        18 => "CUPTI_ERROR_QUEUE_EMPTY",
        21 => "CUPTI_ERROR_INVALID_KIND",
        26 => "CUPTI_ERROR_NOT_COMPATIBLE",
        35 => "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES",
        39 => "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
        999 => "CUPTI_ERROR_UNKNOWN",
        _ => "CUPTI_ERROR_OTHER",
    }
}

// ---------------------------------------------------------------- activity kinds (cupti_activity.h)

pub const CUPTI_ACTIVITY_KIND_MEMCPY: CUpti_ActivityKind = 1;
pub const CUPTI_ACTIVITY_KIND_MEMSET: CUpti_ActivityKind = 2;
pub const CUPTI_ACTIVITY_KIND_KERNEL: CUpti_ActivityKind = 3;
pub const CUPTI_ACTIVITY_KIND_DRIVER: CUpti_ActivityKind = 4;
pub const CUPTI_ACTIVITY_KIND_RUNTIME: CUpti_ActivityKind = 5;
pub const CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: CUpti_ActivityKind = 10;
pub const CUPTI_ACTIVITY_KIND_MEMCPY2: CUpti_ActivityKind = 22;
pub const CUPTI_ACTIVITY_KIND_OVERHEAD: CUpti_ActivityKind = 17;
pub const CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: CUpti_ActivityKind = 38;
pub const CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: CUpti_ActivityKind = 39;
pub const CUPTI_ACTIVITY_KIND_MEMORY2: CUpti_ActivityKind = 49;
pub const CUPTI_ACTIVITY_KIND_GRAPH_TRACE: CUpti_ActivityKind = 51;

/// `CUpti_ExternalCorrelationKind`: CUSTOM0..2 are free for tools; tprof uses CUSTOM2
/// (Kineto uses CUSTOM0/CUSTOM1).
pub const CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0: u32 = 3;
pub const CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1: u32 = 4;
pub const CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2: u32 = 5;

/// `cuptiActivityFlushAll` flag: also flush buffers holding incomplete records.
pub const CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: u32 = 1;

/// `CUpti_ActivityAttribute`.
pub const CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE: u32 = 0;

/// `CUpti_CallbackDomain`.
pub const CUPTI_CB_DOMAIN_DRIVER_API: CUpti_CallbackDomain = 1;
pub const CUPTI_CB_DOMAIN_RUNTIME_API: CUpti_CallbackDomain = 2;

/// `CUpti_ActivityMemoryOperationType`.
pub const CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION: u32 = 1;
pub const CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE: u32 = 2;

/// `CUpti_ActivityMemoryKind` (same numbering as `tprof_format::MemoryKind`).
pub const CUPTI_ACTIVITY_MEMORY_KIND_PINNED: u32 = 2;
pub const CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: u32 = 3;
pub const CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: u32 = 5;

// ---------------------------------------------------------------- versions (cupti_version.h)

/// `cuptiGetVersion()` values: 12.x counts 19 (12.0) .. 28 (12.9); 13.x switches to 130001, 130101...
pub const CUPTI_API_VERSION_12_0: u32 = 19;
pub const CUPTI_API_VERSION_12_9: u32 = 28;
pub const CUPTI_API_VERSION_13_0: u32 = 130001;

/// True when a CUPTI reporting API version `have` is at least `want` (handles the 13.x renumbering:
/// every 13.x value is larger than every 12.x one, so a plain comparison works).
pub const fn cupti_version_has(have: u32, want: u32) -> bool {
    have >= want
}

// ---------------------------------------------------------------- record prefixes

/// Every record starts with its kind.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityHeader {
    pub kind: CUpti_ActivityKind,
}

/// `CUpti_ActivityKernel4..13` (CONCURRENT_KERNEL / KERNEL), fields common to all versions used by
/// CUDA 11.x..13.x, up to `graphId`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ActivityKernelPrefix {
    pub kind: CUpti_ActivityKind,
    pub cache_config: u8,
    pub shared_memory_config: u8,
    pub registers_per_thread: u16,
    pub partitioned_global_cache_requested: u32,
    pub partitioned_global_cache_executed: u32,
    pub start: u64,
    pub end: u64,
    pub completed: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub grid_x: i32,
    pub grid_y: i32,
    pub grid_z: i32,
    pub block_x: i32,
    pub block_y: i32,
    pub block_z: i32,
    pub static_shared_memory: i32,
    pub dynamic_shared_memory: i32,
    pub local_memory_per_thread: u32,
    pub local_memory_total: u32,
    pub correlation_id: u32,
    pub grid_id: i64,
    pub name: *const c_char,
    pub reserved0: *mut c_void,
    pub queued: u64,
    pub submitted: u64,
    pub launch_type: u8,
    pub is_shared_memory_carveout_requested: u8,
    pub shared_memory_carveout_requested: u8,
    pub padding: u8,
    pub shared_memory_executed: u32,
    pub graph_node_id: u64,
    pub shmem_limit_config: u32,
    pub graph_id: u32,
}

/// `CUpti_ActivityMemcpy5/6` (MEMCPY) up to `graphId`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ActivityMemcpyPrefix {
    pub kind: CUpti_ActivityKind,
    pub copy_kind: u8,
    pub src_kind: u8,
    pub dst_kind: u8,
    pub flags: u8,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub runtime_correlation_id: u32,
    pub pad: u32,
    pub reserved0: *mut c_void,
    pub graph_node_id: u64,
    pub graph_id: u32,
}

/// `CUpti_ActivityMemset3/4` (MEMSET) up to `graphId`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ActivityMemsetPrefix {
    pub kind: CUpti_ActivityKind,
    pub value: u32,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub correlation_id: u32,
    pub flags: u16,
    pub memory_kind: u16,
    pub pad: u32,
    pub reserved0: *mut c_void,
    pub graph_node_id: u64,
    pub graph_id: u32,
}

/// `CUpti_ActivityAPI` (RUNTIME / DRIVER), unversioned.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityApi {
    pub kind: CUpti_ActivityKind,
    pub cbid: CUpti_CallbackId,
    pub start: u64,
    pub end: u64,
    pub process_id: u32,
    pub thread_id: u32,
    pub correlation_id: u32,
    pub return_value: u32,
}

/// `CUpti_ActivitySynchronization` (v1 layout; v2 appends `cudaEventSyncId`, `returnValue`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivitySynchronizationPrefix {
    pub kind: CUpti_ActivityKind,
    pub sync_type: u32,
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub cuda_event_id: u32,
}

/// Offset of `returnValue` in `CUpti_ActivitySynchronization2` (CUPTI 12.8+, API version 27+).
pub const SYNCHRONIZATION2_RETURN_VALUE_OFFSET: usize = 48;

/// `CUpti_ActivityExternalCorrelation`, unversioned.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityExternalCorrelation {
    pub kind: CUpti_ActivityKind,
    pub external_kind: u32,
    pub external_id: u64,
    pub correlation_id: u32,
    pub reserved: u32,
}

/// `CUpti_ActivityMemory3/4` (MEMORY2) up to `isAsync`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ActivityMemoryPrefix {
    pub kind: CUpti_ActivityKind,
    pub memory_operation_type: u32,
    pub memory_kind: u32,
    pub correlation_id: u32,
    pub address: u64,
    pub bytes: u64,
    pub timestamp: u64,
    pub pc: u64,
    pub process_id: u32,
    pub device_id: u32,
    pub context_id: u32,
    pub stream_id: u32,
    pub name: *const c_char,
    pub is_async: u32,
}

/// `CUpti_ActivityOverhead2/3` (OVERHEAD) up to `correlationId`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ActivityOverheadPrefix {
    pub kind: CUpti_ActivityKind,
    pub overhead_kind: u32,
    pub object_kind: u32,
    /// `CUpti_ActivityObjectKindId`: `{processId, threadId}` or `{deviceId, contextId, streamId}`.
    pub object_id: [u32; 3],
    pub start: u64,
    pub end: u64,
    pub correlation_id: u32,
}

// Offsets and sizes checked against the CUPTI 12.9 headers (offsetof on x86-64).
const _: () = {
    use core::mem::{offset_of, size_of};
    assert!(offset_of!(ActivityKernelPrefix, registers_per_thread) == 6);
    assert!(offset_of!(ActivityKernelPrefix, start) == 16);
    assert!(offset_of!(ActivityKernelPrefix, device_id) == 40);
    assert!(offset_of!(ActivityKernelPrefix, grid_x) == 52);
    assert!(offset_of!(ActivityKernelPrefix, static_shared_memory) == 76);
    assert!(offset_of!(ActivityKernelPrefix, correlation_id) == 92);
    assert!(offset_of!(ActivityKernelPrefix, grid_id) == 96);
    assert!(offset_of!(ActivityKernelPrefix, name) == 104);
    assert!(offset_of!(ActivityKernelPrefix, queued) == 120);
    assert!(offset_of!(ActivityKernelPrefix, launch_type) == 136);
    assert!(offset_of!(ActivityKernelPrefix, graph_node_id) == 144);
    assert!(offset_of!(ActivityKernelPrefix, shmem_limit_config) == 152);
    assert!(offset_of!(ActivityKernelPrefix, graph_id) == 156);
    assert!(offset_of!(ActivityMemcpyPrefix, bytes) == 8);
    assert!(offset_of!(ActivityMemcpyPrefix, correlation_id) == 44);
    assert!(offset_of!(ActivityMemcpyPrefix, graph_id) == 72);
    assert!(offset_of!(ActivityMemsetPrefix, correlation_id) == 44);
    assert!(offset_of!(ActivityMemsetPrefix, memory_kind) == 50);
    assert!(offset_of!(ActivityMemsetPrefix, graph_id) == 72);
    assert!(size_of::<ActivityApi>() == 40);
    assert!(offset_of!(ActivitySynchronizationPrefix, cuda_event_id) == 36);
    assert!(size_of::<ActivityExternalCorrelation>() == 24);
    assert!(offset_of!(ActivityMemoryPrefix, stream_id) == 60);
    assert!(offset_of!(ActivityMemoryPrefix, name) == 64);
    assert!(offset_of!(ActivityMemoryPrefix, is_async) == 72);
    assert!(offset_of!(ActivityOverheadPrefix, object_id) == 12);
    assert!(offset_of!(ActivityOverheadPrefix, start) == 24);
    assert!(offset_of!(ActivityOverheadPrefix, correlation_id) == 40);
};

/// Bytes of each record kind's prefix: a record shorter than this in a buffer is not read.
pub fn prefix_size(kind: CUpti_ActivityKind) -> usize {
    use core::mem::size_of;
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

// ---------------------------------------------------------------- function types

pub type BuffersCallbackRequestFunc =
    unsafe extern "C" fn(buffer: *mut *mut u8, size: *mut usize, max_num_records: *mut usize);
pub type BuffersCallbackCompleteFunc =
    unsafe extern "C" fn(ctx: CUcontext, stream_id: u32, buffer: *mut u8, size: usize, valid_size: usize);
pub type TimestampCallbackFunc = unsafe extern "C" fn() -> u64;
pub type CallbackFunc = unsafe extern "C" fn(
    userdata: *mut c_void,
    domain: CUpti_CallbackDomain,
    cbid: CUpti_CallbackId,
    cbdata: *const c_void,
);

pub type FnGetVersion = unsafe extern "C" fn(version: *mut u32) -> CUptiResult;
pub type FnGetResultString = unsafe extern "C" fn(result: CUptiResult, str: *mut *const c_char) -> CUptiResult;
pub type FnSubscribe = unsafe extern "C" fn(
    subscriber: *mut CUpti_SubscriberHandle,
    callback: CallbackFunc,
    userdata: *mut c_void,
) -> CUptiResult;
pub type FnUnsubscribe = unsafe extern "C" fn(subscriber: CUpti_SubscriberHandle) -> CUptiResult;
pub type FnActivityEnable = unsafe extern "C" fn(kind: CUpti_ActivityKind) -> CUptiResult;
pub type FnActivityDisable = unsafe extern "C" fn(kind: CUpti_ActivityKind) -> CUptiResult;
pub type FnActivityRegisterCallbacks =
    unsafe extern "C" fn(request: BuffersCallbackRequestFunc, complete: BuffersCallbackCompleteFunc) -> CUptiResult;
pub type FnActivityRegisterTimestampCallback = unsafe extern "C" fn(f: TimestampCallbackFunc) -> CUptiResult;
pub type FnActivityFlushAll = unsafe extern "C" fn(flag: u32) -> CUptiResult;
pub type FnActivityFlushPeriod = unsafe extern "C" fn(ms: u32) -> CUptiResult;
pub type FnActivityGetNextRecord =
    unsafe extern "C" fn(buffer: *mut u8, valid_size: usize, record: *mut *mut ActivityHeader) -> CUptiResult;
pub type FnActivityGetNumDroppedRecords =
    unsafe extern "C" fn(ctx: CUcontext, stream_id: u32, dropped: *mut usize) -> CUptiResult;
pub type FnActivitySetAttribute =
    unsafe extern "C" fn(attr: u32, value_size: *mut usize, value: *mut c_void) -> CUptiResult;
pub type FnActivityPushExternalCorrelationId = unsafe extern "C" fn(kind: u32, id: u64) -> CUptiResult;
pub type FnActivityPopExternalCorrelationId = unsafe extern "C" fn(kind: u32, last_id: *mut u64) -> CUptiResult;
pub type FnGetCallbackName =
    unsafe extern "C" fn(domain: CUpti_CallbackDomain, cbid: u32, name: *mut *const c_char) -> CUptiResult;
pub type FnFinalize = unsafe extern "C" fn() -> CUptiResult;
/// `cuptiSetThreadIdType(CUpti_ActivityThreadIdType)`: 0 default (pthread_self), 1 system (gettid).
pub type FnSetThreadIdType = unsafe extern "C" fn(kind: u32) -> CUptiResult;
pub type FnGetTimestamp = unsafe extern "C" fn(timestamp: *mut u64) -> CUptiResult;

// ---------------------------------------------------------------- callback ids (names for API records)

/// The most common runtime API callback ids (`cupti_runtime_cbid.h`), for CUPTIs without
/// `cuptiGetCallbackName`. Sorted by id.
pub const RUNTIME_CBID_NAMES: &[(u32, &str)] = &[
    (3, "cudaGetDeviceCount"),
    (4, "cudaGetDeviceProperties"),
    (16, "cudaSetDevice"),
    (17, "cudaGetDevice"),
    (20, "cudaMalloc"),
    (21, "cudaMallocPitch"),
    (22, "cudaFree"),
    (25, "cudaMallocHost"),
    (26, "cudaFreeHost"),
    (27, "cudaHostAlloc"),
    (31, "cudaMemcpy"),
    (32, "cudaMemcpy2D"),
    (41, "cudaMemcpyAsync"),
    (44, "cudaMemcpy2DAsync"),
    (49, "cudaMemset"),
    (51, "cudaMemsetAsync"),
    (52, "cudaMemset2DAsync"),
    (129, "cudaStreamCreate"),
    (130, "cudaStreamDestroy"),
    (131, "cudaStreamSynchronize"),
    (132, "cudaStreamQuery"),
    (133, "cudaEventCreate"),
    (134, "cudaEventCreateWithFlags"),
    (135, "cudaEventRecord"),
    (136, "cudaEventDestroy"),
    (137, "cudaEventSynchronize"),
    (138, "cudaEventQuery"),
    (139, "cudaEventElapsedTime"),
    (147, "cudaStreamWaitEvent"),
    (152, "cudaHostRegister"),
    (153, "cudaHostUnregister"),
    (160, "cudaMemcpyPeer"),
    (161, "cudaMemcpyPeerAsync"),
    (164, "cudaDeviceReset"),
    (165, "cudaDeviceSynchronize"),
    (198, "cudaStreamCreateWithFlags"),
    (206, "cudaMallocManaged"),
    (211, "cudaLaunchKernel"),
    (214, "cudaLaunchKernel_ptsz"),
    (215, "cudaMemcpy_ptds"),
    (225, "cudaMemcpyAsync_ptsz"),
    (235, "cudaMemsetAsync_ptsz"),
    (239, "cudaStreamSynchronize_ptsz"),
    (269, "cudaLaunchCooperativeKernel"),
    (310, "cudaGraphInstantiate"),
    (311, "cudaGraphLaunch"),
    (312, "cudaGraphLaunch_ptsz"),
    (315, "cudaStreamBeginCapture"),
    (319, "cudaStreamEndCapture"),
    (373, "cudaMallocAsync"),
    (375, "cudaFreeAsync"),
    (430, "cudaLaunchKernelExC"),
    (431, "cudaLaunchKernelExC_ptsz"),
];

/// The most common driver API callback ids (`cupti_driver_cbid.h`). Sorted by id.
pub const DRIVER_CBID_NAMES: &[(u32, &str)] = &[
    (1, "cuInit"),
    (17, "cuCtxSynchronize"),
    (126, "cuStreamSynchronize"),
    (216, "cuMemsetD8Async"),
    (243, "cuMemAlloc_v2"),
    (245, "cuMemFree_v2"),
    (276, "cuMemcpyHtoD_v2"),
    (278, "cuMemcpyDtoH_v2"),
    (306, "cuMemcpyAsync"),
    (307, "cuLaunchKernel"),
    (442, "cuLaunchKernel_ptsz"),
    (514, "cuGraphLaunch"),
    (652, "cuLaunchKernelEx"),
    (653, "cuLaunchKernelEx_ptsz"),
];

/// Static name of a callback id (None when not in the small tables).
pub fn static_cbid_name(domain: CUpti_CallbackDomain, cbid: u32) -> Option<&'static str> {
    let table = match domain {
        CUPTI_CB_DOMAIN_RUNTIME_API => RUNTIME_CBID_NAMES,
        CUPTI_CB_DOMAIN_DRIVER_API => DRIVER_CBID_NAMES,
        _ => return None,
    };
    table.binary_search_by_key(&cbid, |e| e.0).ok().map(|i| table[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbid_tables_are_sorted() {
        for t in [RUNTIME_CBID_NAMES, DRIVER_CBID_NAMES] {
            assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
        }
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_RUNTIME_API, 211), Some("cudaLaunchKernel"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_DRIVER_API, 652), Some("cuLaunchKernelEx"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_DRIVER_API, 9999), None);
    }

    #[test]
    fn version_gate_handles_13x_renumbering() {
        assert!(cupti_version_has(CUPTI_API_VERSION_13_0, CUPTI_API_VERSION_12_9));
        assert!(!cupti_version_has(CUPTI_API_VERSION_12_0, CUPTI_API_VERSION_12_9));
    }
}
