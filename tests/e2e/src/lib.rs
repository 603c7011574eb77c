//! Helpers for the end-to-end tests (paths to built artifacts, ground truth reader).
pub mod diagnose;
pub mod export;
pub mod fake_sysfs;
pub mod fates;
pub mod gpu_trace;
pub mod nccl_nodes;
pub mod production;
pub mod programs;
pub mod report;
pub mod runs;
pub mod shim;
pub mod simgpu;
