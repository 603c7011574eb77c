//! libtprof.so: an LD_PRELOAD / CUDA_INJECTION64_PATH profiler shim for CUDA programs.
//!
//! See docs/DESIGN.md ("The shim") for the module owners and the recording API.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod base;
pub mod capture;
pub mod cupti;
pub mod gpu_metrics;
pub mod host_metrics;
pub mod intercept;
pub mod lifecycle;
pub mod nvtx;
pub mod record;
pub mod service;
pub mod topology;
