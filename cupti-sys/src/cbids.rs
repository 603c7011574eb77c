//! Callback ids (`cupti_runtime_cbid.h`, `cupti_driver_cbid.h`): the name of every id, for API
//! records whose name CUPTI does not give (no `cuptiGetCallbackName`, or it fails). The tables are
//! generated from NVIDIA's headers (`gen_cbid_names.py`), one per CUDA major: an id keeps its number
//! across versions, but CUDA 13 renamed some (`cudaSignalExternalSemaphoresAsync_v2`).

use crate::constants::{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API};
use crate::CUpti_CallbackDomain;

include!("cbid_names.rs");

/// The CUDA major of a CUPTI, from its `cuptiGetVersion` API version (`v28` is CUDA 12.9 Update 1;
/// from CUDA 13.0 the version is `xxyyzz`: 130000).
pub fn cupti_cuda_major(api_version: u32) -> u32 {
    if api_version >= 130000 {
        api_version / 10000
    } else {
        12
    }
}

/// The callback id table of `domain` for the CUPTI of `cuda_major` (12, or 13 for 13 and later).
pub fn cbid_names(domain: CUpti_CallbackDomain, cuda_major: u32) -> Option<&'static [(u32, &'static str)]> {
    let newer = cuda_major >= 13;
    match domain {
        CUPTI_CB_DOMAIN_RUNTIME_API if newer => Some(RUNTIME_CBID_NAMES_13),
        CUPTI_CB_DOMAIN_RUNTIME_API => Some(RUNTIME_CBID_NAMES_12),
        CUPTI_CB_DOMAIN_DRIVER_API if newer => Some(DRIVER_CBID_NAMES_13),
        CUPTI_CB_DOMAIN_DRIVER_API => Some(DRIVER_CBID_NAMES_12),
        _ => None,
    }
}

/// The name of a callback id in the CUPTI of `cuda_major` (without its `_v<digits>` suffix), None for
/// an id that CUDA's headers do not have.
pub fn static_cbid_name(domain: CUpti_CallbackDomain, cbid: u32, cuda_major: u32) -> Option<&'static str> {
    let table = cbid_names(domain, cuda_major)?;
    table.binary_search_by_key(&cbid, |e| e.0).ok().map(|i| table[i].1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cbid_tables_are_sorted_and_name_the_ids_cupti_does() {
        for t in [RUNTIME_CBID_NAMES_12, RUNTIME_CBID_NAMES_13, DRIVER_CBID_NAMES_12, DRIVER_CBID_NAMES_13] {
            assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
        }
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_RUNTIME_API, 211, 12), Some("cudaLaunchKernel"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_RUNTIME_API, 443, 12), Some("cudaGraphInstantiate"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_RUNTIME_API, 130, 13), Some("cudaStreamDestroy"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_DRIVER_API, 22, 13), Some("cuModuleUnload"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_DRIVER_API, 652, 12), Some("cuLaunchKernelEx"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_RUNTIME_API, 393, 13), Some("cudaSignalExternalSemaphoresAsync"));
        assert_eq!(static_cbid_name(CUPTI_CB_DOMAIN_DRIVER_API, 9999, 13), None);
        assert_eq!(cupti_cuda_major(28), 12);
        assert_eq!(cupti_cuda_major(130500), 13);
    }
}
