//! Enumerator values (`cupti_activity.h`, `cupti_callbacks.h`) and API version numbers
//! (`cupti_version.h`).

use crate::{CUpti_ActivityKind, CUpti_CallbackDomain};

c_constants! {
    /// `CUpti_ActivityKind` values tprof enables or reads.
    ACTIVITY_KINDS;
    CUPTI_ACTIVITY_KIND_MEMCPY: CUpti_ActivityKind = 1;
    CUPTI_ACTIVITY_KIND_MEMSET: CUpti_ActivityKind = 2;
    CUPTI_ACTIVITY_KIND_KERNEL: CUpti_ActivityKind = 3;
    CUPTI_ACTIVITY_KIND_DRIVER: CUpti_ActivityKind = 4;
    CUPTI_ACTIVITY_KIND_RUNTIME: CUpti_ActivityKind = 5;
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: CUpti_ActivityKind = 10;
    CUPTI_ACTIVITY_KIND_OVERHEAD: CUpti_ActivityKind = 17;
    CUPTI_ACTIVITY_KIND_MEMCPY2: CUpti_ActivityKind = 22;
    CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: CUpti_ActivityKind = 38;
    CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: CUpti_ActivityKind = 39;
    CUPTI_ACTIVITY_KIND_MEMORY2: CUpti_ActivityKind = 49;
    CUPTI_ACTIVITY_KIND_GRAPH_TRACE: CUpti_ActivityKind = 51;
}

c_constants! {
    /// `CUpti_ExternalCorrelationKind`: CUSTOM0..2 are free for tools; tprof uses CUSTOM2
    /// (Kineto uses CUSTOM0/CUSTOM1).
    EXTERNAL_CORRELATION_KINDS;
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0: u32 = 3;
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM1: u32 = 4;
    CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2: u32 = 5;
}

c_constants! {
    /// `CUpti_ActivityFlag`, `CUpti_ActivityAttribute`, `CUpti_ActivityThreadIdType`.
    ACTIVITY_CONTROLS;
    /// `cuptiActivityFlushAll` flag: also flush buffers holding incomplete records.
    CUPTI_ACTIVITY_FLAG_FLUSH_FORCED: u32 = 1;
    CUPTI_ACTIVITY_ATTR_DEVICE_BUFFER_SIZE: u32 = 0;
    /// `cuptiSetThreadIdType`: `pthread_self()` in API records.
    CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT: u32 = 0;
    /// `cuptiSetThreadIdType`: `gettid()` in API records.
    CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM: u32 = 1;
}

c_constants! {
    /// `CUpti_CallbackDomain`.
    CALLBACK_DOMAINS;
    CUPTI_CB_DOMAIN_DRIVER_API: CUpti_CallbackDomain = 1;
    CUPTI_CB_DOMAIN_RUNTIME_API: CUpti_CallbackDomain = 2;
}

c_constants! {
    /// Field values of the records tprof reads: `CUpti_ActivityMemoryOperationType`,
    /// `CUpti_ActivityMemoryKind` (same numbering as `tprof_format::MemoryKind`),
    /// `CUpti_ActivityMemcpyKind` (as `tprof_format::CopyKind`), `CUpti_ActivitySynchronizationType`
    /// (as `tprof_format::SyncKind`), `CUpti_ActivityObjectKind`, `CUpti_ActivityOverheadKind`.
    RECORD_FIELD_VALUES;
    CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION: u32 = 1;
    CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE: u32 = 2;
    CUPTI_ACTIVITY_MEMORY_KIND_UNKNOWN: u32 = 0;
    CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE: u32 = 1;
    CUPTI_ACTIVITY_MEMORY_KIND_PINNED: u32 = 2;
    CUPTI_ACTIVITY_MEMORY_KIND_DEVICE: u32 = 3;
    CUPTI_ACTIVITY_MEMORY_KIND_ARRAY: u32 = 4;
    CUPTI_ACTIVITY_MEMORY_KIND_MANAGED: u32 = 5;
    CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC: u32 = 6;
    CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC: u32 = 7;
    CUPTI_ACTIVITY_MEMCPY_KIND_UNKNOWN: u32 = 0;
    CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: u32 = 1;
    CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: u32 = 2;
    CUPTI_ACTIVITY_MEMCPY_KIND_HTOA: u32 = 3;
    CUPTI_ACTIVITY_MEMCPY_KIND_ATOH: u32 = 4;
    CUPTI_ACTIVITY_MEMCPY_KIND_ATOA: u32 = 5;
    CUPTI_ACTIVITY_MEMCPY_KIND_ATOD: u32 = 6;
    CUPTI_ACTIVITY_MEMCPY_KIND_DTOA: u32 = 7;
    CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: u32 = 8;
    CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: u32 = 9;
    CUPTI_ACTIVITY_MEMCPY_KIND_PTOP: u32 = 10;
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_UNKNOWN: u32 = 0;
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE: u32 = 1;
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT: u32 = 2;
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE: u32 = 3;
    CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE: u32 = 4;
    /// `CUpti_ActivityObjectKindId` holds `{processId, threadId}`.
    CUPTI_ACTIVITY_OBJECT_PROCESS: u32 = 1;
    CUPTI_ACTIVITY_OBJECT_THREAD: u32 = 2;
    CUPTI_ACTIVITY_OBJECT_DEVICE: u32 = 3;
    CUPTI_ACTIVITY_OBJECT_CONTEXT: u32 = 4;
    CUPTI_ACTIVITY_OBJECT_STREAM: u32 = 5;
    /// Overhead kinds: the CUPTI ones are `n << 16`, so they do not fit a byte.
    CUPTI_ACTIVITY_OVERHEAD_UNKNOWN: u32 = 0;
    CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: u32 = 1;
    CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: u32 = 1 << 16;
    CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: u32 = 2 << 16;
    CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: u32 = 3 << 16;
    CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST: u32 = 7 << 16;
}

c_api_versions! {
    /// `cuptiGetVersion()` values: 12.x counts 19 (12.0) .. 28 (12.9 Update 1); 13.x is
    /// `xxyyzz` (13.0 = 130000, 13.0 with CUPTI update 1 = 130001, 13.1 = 130100, ...).
    API_VERSIONS;
    CUPTI_API_VERSION_11_0 = 13 for "11.0";
    CUPTI_API_VERSION_12_0 = 19 for "12.0";
    /// First with `CUpti_ActivitySynchronization2` (`returnValue`).
    CUPTI_API_VERSION_12_8 = 26 for "12.8";
    CUPTI_API_VERSION_12_9 = 27 for "12.9";
    CUPTI_API_VERSION_12_9_UPDATE_1 = 28 for "12.9 Update 1";
    CUPTI_API_VERSION_13_0 = 130000 for "13.0";
}

/// True when a CUPTI reporting API version `have` is at least `want` (handles the 13.x renumbering:
/// every 13.x value is larger than every 12.x one, so a plain comparison works).
pub const fn cupti_version_has(have: u32, want: u32) -> bool {
    have >= want
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_gate_handles_13x_renumbering() {
        assert!(cupti_version_has(CUPTI_API_VERSION_13_0, CUPTI_API_VERSION_12_9_UPDATE_1));
        assert!(cupti_version_has(130001, CUPTI_API_VERSION_13_0));
        assert!(!cupti_version_has(CUPTI_API_VERSION_12_0, CUPTI_API_VERSION_12_9));
    }
}
