//! Minimal CUPTI FFI: the constants tprof uses, the common prefixes of the activity records it reads
//! and the C function-pointer types of the entry points it resolves.
//!
//! Nothing here links against `libcupti`: the shim `dlopen`s it at run time and casts `dlsym`
//! results to the `Fn*` types.
//!
//! Every constant, record layout and API version is declared with its C name ([`abi`]), and
//! `tests/real_headers.rs` compiles a C program from those tables against each installed CUPTI
//! (`scripts/setup-conformance.sh`) and compares every value, offset and size.
#![cfg_attr(not(test), no_std)]
#![allow(non_camel_case_types)]
#![deny(unsafe_op_in_unsafe_fn)]

#[macro_use]
pub mod abi;
mod cbids;
mod constants;
mod functions;
mod records;
mod results;

use core::ffi::c_void;

pub use cbids::*;
pub use constants::*;
pub use functions::*;
pub use records::*;
pub use results::*;

pub type CUptiResult = u32;
pub type CUpti_ActivityKind = u32;
pub type CUpti_CallbackDomain = u32;
pub type CUpti_CallbackId = u32;
pub type CUpti_SubscriberHandle = *mut c_void;
pub type CUcontext = *mut c_void;

/// Every constant table, for the header check.
pub const C_CONSTANTS: &[&[abi::CConstant]] =
    &[RESULTS, ACTIVITY_KINDS, EXTERNAL_CORRELATION_KINDS, ACTIVITY_CONTROLS, CALLBACK_DOMAINS, RECORD_FIELD_VALUES];
