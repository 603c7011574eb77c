//! Helpers for the end-to-end tests (paths to built artifacts, ground truth reader).
pub mod diagnose;
pub mod production;
pub mod programs;
pub mod shim;
pub mod simgpu;
pub mod gpu_trace;
pub mod export;
pub mod report;
