//! `CUptiResult` codes (`cupti_result.h`; the same numbering in every CUPTI 12.x and 13.x).

use crate::CUptiResult;

c_constants! {
    /// Every `CUptiResult` this crate names, in header order (also the names [`result_name`] gives).
    RESULTS;
    CUPTI_SUCCESS: CUptiResult = 0;
    CUPTI_ERROR_INVALID_PARAMETER: CUptiResult = 1;
    CUPTI_ERROR_INVALID_DEVICE: CUptiResult = 2;
    CUPTI_ERROR_INVALID_CONTEXT: CUptiResult = 3;
    CUPTI_ERROR_INVALID_EVENT_DOMAIN_ID: CUptiResult = 4;
    CUPTI_ERROR_INVALID_EVENT_ID: CUptiResult = 5;
    CUPTI_ERROR_INVALID_EVENT_NAME: CUptiResult = 6;
    CUPTI_ERROR_INVALID_OPERATION: CUptiResult = 7;
    CUPTI_ERROR_OUT_OF_MEMORY: CUptiResult = 8;
    CUPTI_ERROR_HARDWARE: CUptiResult = 9;
    CUPTI_ERROR_PARAMETER_SIZE_NOT_SUFFICIENT: CUptiResult = 10;
    CUPTI_ERROR_API_NOT_IMPLEMENTED: CUptiResult = 11;
    CUPTI_ERROR_MAX_LIMIT_REACHED: CUptiResult = 12;
    CUPTI_ERROR_NOT_READY: CUptiResult = 13;
    /// "The current operation is not compatible with the current state of the object";
    /// `cuptiActivityEnable`: "the activity kind cannot be enabled".
    CUPTI_ERROR_NOT_COMPATIBLE: CUptiResult = 14;
    /// "CUPTI is unable to initialize its connection to the CUDA driver" (12.x without a driver).
    CUPTI_ERROR_NOT_INITIALIZED: CUptiResult = 15;
    CUPTI_ERROR_INVALID_METRIC_ID: CUptiResult = 16;
    CUPTI_ERROR_INVALID_METRIC_NAME: CUptiResult = 17;
    CUPTI_ERROR_QUEUE_EMPTY: CUptiResult = 18;
    CUPTI_ERROR_INVALID_HANDLE: CUptiResult = 19;
    CUPTI_ERROR_INVALID_STREAM: CUptiResult = 20;
    /// `cuptiActivityEnable`: "the activity kind is not supported".
    CUPTI_ERROR_INVALID_KIND: CUptiResult = 21;
    CUPTI_ERROR_INVALID_EVENT_VALUE: CUptiResult = 22;
    /// "CUPTI is disabled due to conflicts with other enabled profilers".
    CUPTI_ERROR_DISABLED: CUptiResult = 23;
    CUPTI_ERROR_INVALID_MODULE: CUptiResult = 24;
    CUPTI_ERROR_INVALID_METRIC_VALUE: CUptiResult = 25;
    /// "The performance monitoring hardware is in use by other client".
    CUPTI_ERROR_HARDWARE_BUSY: CUptiResult = 26;
    /// "The attempted operation is not supported on the current system or device".
    CUPTI_ERROR_NOT_SUPPORTED: CUptiResult = 27;
    CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED: CUptiResult = 28;
    CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE: CUptiResult = 29;
    CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES: CUptiResult = 30;
    CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS: CUptiResult = 31;
    CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED: CUptiResult = 32;
    CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED: CUptiResult = 33;
    CUPTI_ERROR_CUDA_COMPILER_NOT_COMPATIBLE: CUptiResult = 34;
    CUPTI_ERROR_INSUFFICIENT_PRIVILEGES: CUptiResult = 35;
    CUPTI_ERROR_OLD_PROFILER_API_INITIALIZED: CUptiResult = 36;
    CUPTI_ERROR_OPENACC_UNDEFINED_ROUTINE: CUptiResult = 37;
    CUPTI_ERROR_LEGACY_PROFILER_NOT_SUPPORTED: CUptiResult = 38;
    /// A second subscriber (Nsight Systems/Compute, cuda-gdb, another in-process profiler).
    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED: CUptiResult = 39;
    CUPTI_ERROR_VIRTUALIZED_DEVICE_INSUFFICIENT_PRIVILEGES: CUptiResult = 40;
    CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED: CUptiResult = 41;
    CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED: CUptiResult = 42;
    CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED: CUptiResult = 43;
    CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED: CUptiResult = 44;
    CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED: CUptiResult = 45;
    /// Also what CUPTI 13.x returns without a driver (docs/conformance.md).
    CUPTI_ERROR_UNKNOWN: CUptiResult = 999;
}

/// The C name of a CUPTI result code (for the one-line warnings); `CUPTI_ERROR_OTHER` for a code
/// this crate does not know.
pub fn result_name(r: CUptiResult) -> &'static str {
    RESULTS.iter().find(|c| c.value == r as i64).map_or("CUPTI_ERROR_OTHER", |c| c.name)
}

/// True when `cuptiActivityEnable(kind)` refused only that kind: the kind does not exist in this
/// CUPTI, or this system or device cannot record it, while CUPTI itself works. The header documents
/// `NOT_COMPATIBLE` ("cannot be enabled") and `INVALID_KIND` ("not supported") for this call; the
/// other codes here are the ones `cupti_result.h` describes as a feature missing on this system or
/// device. Codes that mean CUPTI as a whole is unusable (`NOT_INITIALIZED`, `UNKNOWN`, `DISABLED`,
/// `MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`, the privilege errors, out of memory) are not.
pub fn kind_unavailable(r: CUptiResult) -> bool {
    matches!(
        r,
        CUPTI_ERROR_NOT_COMPATIBLE
            | CUPTI_ERROR_INVALID_KIND
            | CUPTI_ERROR_NOT_SUPPORTED
            | CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED
            | CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_DEVICE
            | CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_ON_NON_P2P_DEVICES
            | CUPTI_ERROR_UM_PROFILING_NOT_SUPPORTED_WITH_MPS
            | CUPTI_ERROR_CDP_TRACING_NOT_SUPPORTED
            | CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED
            | CUPTI_ERROR_CONFIDENTIAL_COMPUTING_NOT_SUPPORTED
            | CUPTI_ERROR_CMP_DEVICE_NOT_SUPPORTED
            | CUPTI_ERROR_MIG_DEVICE_NOT_SUPPORTED
            | CUPTI_ERROR_SLI_DEVICE_NOT_SUPPORTED
            | CUPTI_ERROR_WSL_DEVICE_NOT_SUPPORTED
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_names_are_the_constant_names() {
        assert_eq!(result_name(CUPTI_ERROR_NOT_COMPATIBLE), "CUPTI_ERROR_NOT_COMPATIBLE");
        assert_eq!(result_name(CUPTI_ERROR_HARDWARE_BUSY), "CUPTI_ERROR_HARDWARE_BUSY");
        assert_eq!(result_name(CUPTI_ERROR_NOT_SUPPORTED), "CUPTI_ERROR_NOT_SUPPORTED");
        assert_eq!(result_name(CUPTI_ERROR_INVALID_METRIC_NAME), "CUPTI_ERROR_INVALID_METRIC_NAME");
        assert_eq!(result_name(CUPTI_ERROR_UNKNOWN), "CUPTI_ERROR_UNKNOWN");
        assert_eq!(result_name(46), "CUPTI_ERROR_OTHER");
    }

    #[test]
    fn result_codes_are_unique() {
        for (i, a) in RESULTS.iter().enumerate() {
            assert!(RESULTS[i + 1..].iter().all(|b| b.value != a.value), "{} twice", a.value);
        }
    }

    #[test]
    fn a_refused_kind_is_told_apart_from_an_unusable_cupti() {
        for r in [CUPTI_ERROR_NOT_COMPATIBLE, CUPTI_ERROR_INVALID_KIND, CUPTI_ERROR_NOT_SUPPORTED] {
            assert!(kind_unavailable(r), "{}", result_name(r));
        }
        for r in [
            CUPTI_SUCCESS,
            CUPTI_ERROR_NOT_INITIALIZED,
            CUPTI_ERROR_UNKNOWN,
            CUPTI_ERROR_HARDWARE_BUSY,
            CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
            CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
            CUPTI_ERROR_OUT_OF_MEMORY,
        ] {
            assert!(!kind_unavailable(r), "{}", result_name(r));
        }
    }
}
