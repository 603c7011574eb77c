//! tprof decoder library: inputs (ring files, Kineto JSON) -> push-style [`model::TraceSink`] ->
//! analyses (summary, steps, correlation) and exporters.
#![forbid(unsafe_code)]

pub mod bounded_names;
pub mod cli;
pub mod clock_alignment;
pub mod compare;
pub mod convert;
pub mod corr_slots;
pub mod correlate;
pub mod diagnose;
pub mod error;
pub mod export;
pub mod gpu_counters;
pub mod host;
pub mod input;
pub mod intervals;
pub mod live;
pub mod model;
pub mod nccl_plugin;
pub mod output;
pub mod progress;
pub mod ptr_cache;
pub mod range_fold;
pub mod report;
pub mod steps;
pub mod summary;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod units;
pub mod xorshift;
