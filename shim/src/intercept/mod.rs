//! CUDA runtime and driver interposers, NCCL's, the CUDA injection entry point, the CUPTI calls with
//! which a program claims CUPTI, and the hooks that hand the wrappers out to programs resolving
//! functions at run time (`dlsym`, `cuGetProcAddress`, `cudaGetDriverEntryPoint`).
//!
//! How one call is recorded: [`api_call`]. Safety contract of every exported wrapper: that of the
//! CUDA function of the same name.
#![allow(clippy::missing_safety_doc)]

use crate::base::panic_fence::ffi_guard;

pub mod api_call;
pub mod cuda_drv;
pub mod cuda_rt;
pub mod cuda_rt_graph;
pub mod cuda_rt_mem;
pub mod cuda_rt_stream;
pub mod cuda_rt_sync;
pub mod cuda_types;
pub mod cuda_vmm;
pub mod cupti_sharing;
pub mod dlsym;
pub mod graph_capture;
pub mod hook_tables;
pub mod injection;
pub mod kernel_names;
pub mod memtrack;
pub mod nccl;
pub mod nccl_profiler;
pub mod proc_address;
#[cfg(test)]
mod proc_address_typedefs;
pub mod process_image;
pub mod real;
pub mod vmmtrack;

/// True when an interposer wraps the function exported as `name`.
fn wraps(name: &[u8]) -> bool {
    proc_address::hook_named(name).is_some()
}

extern "C" fn constructor() {
    ffi_guard((), || crate::cupti::register_interposed_calls(wraps))
}

/// Tells the CUPTI parser which calls the interposers record when libtprof is loaded, before any
/// CUPTI record can arrive.
#[used]
#[link_section = ".init_array"]
static REGISTER_INTERPOSED_CALLS: extern "C" fn() = constructor;
