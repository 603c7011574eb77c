//! Callback ids (`cupti_runtime_cbid.h`, `cupti_driver_cbid.h`): names for API records when CUPTI has
//! no `cuptiGetCallbackName`.

use crate::constants::{CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_CB_DOMAIN_RUNTIME_API};
use crate::CUpti_CallbackDomain;

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
}
