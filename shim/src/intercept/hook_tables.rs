//! The tables of the CUDA runtime and driver wrappers (one per wrapper file), which the hooks that
//! hand wrappers out at run time search (`proc_address::hook_named`, the `dlsym` hook).

use super::real::Hook;
use super::{cuda_drv, cuda_rt, cuda_rt_graph, cuda_rt_mem, cuda_rt_stream, cuda_rt_sync, cuda_vmm};

/// Every CUDA runtime and driver wrapper table (the resolvers' own, `proc_address::HOOKS`, aside).
pub fn cuda_wrappers() -> impl Iterator<Item = &'static Hook> {
    [
        cuda_rt::HOOKS,
        cuda_rt_mem::HOOKS,
        cuda_rt_sync::HOOKS,
        cuda_rt_stream::HOOKS,
        cuda_rt_graph::HOOKS,
        cuda_drv::HOOKS,
        cuda_vmm::HOOKS,
    ]
    .into_iter()
    .flatten()
}
