//! Sharing CUPTI with the program's own profiler.
//!
//! CUPTI serves one subscriber and one set of activity buffer callbacks per process. A program that
//! runs its own CUPTI client (`torch.profiler` through Kineto, `jax.profiler`, a custom tool) must
//! never fail or lose its records because tprof got there first. So tprof yields: libtprof exports
//! the CUPTI calls that claim CUPTI (`cuptiSubscribe`, `cuptiActivityRegisterCallbacks`,
//! `cuptiActivityRegisterTimestampCallback`), which under `LD_PRELOAD` the program reaches first
//! (also through `dlsym` on a libcupti handle). The first such call hands CUPTI over (see
//! `cupti::yield_to_program`): tprof flushes and delivers what CUPTI holds for it, disables its
//! activity kinds, unsubscribes, says so in one line, and records by interposition from then on;
//! then the program's call goes to CUPTI unchanged and returns CUPTI's result.
//!
//! Safety contract of every exported function: that of the CUPTI function of the same name.
#![allow(clippy::missing_safety_doc)]

use std::ffi::c_void;

use cupti_sys as sys;

use super::real::{cstr, Hook, RealFn};
use crate::base::panic_fence::ffi_guard;
use crate::cupti;

static SUBSCRIBE: RealFn = RealFn::new(cstr(b"cuptiSubscribe\0"));
static REGISTER_CALLBACKS: RealFn = RealFn::new(cstr(b"cuptiActivityRegisterCallbacks\0"));
static REGISTER_TIMESTAMP: RealFn = RealFn::new(cstr(b"cuptiActivityRegisterTimestampCallback\0"));

/// What CUPTI returns when its library is not loaded at all (the program's own call could not have
/// linked then; answer as CUPTI without a driver does).
const NOT_LOADED: sys::CUptiResult = sys::CUPTI_ERROR_NOT_INITIALIZED;

/// The program's `cuptiSubscribe`: tprof yields CUPTI first.
#[no_mangle]
pub unsafe extern "C" fn cuptiSubscribe(
    subscriber: *mut sys::CUpti_SubscriberHandle,
    callback: *const c_void,
    userdata: *mut c_void,
) -> sys::CUptiResult {
    type Real = unsafe extern "C" fn(*mut sys::CUpti_SubscriberHandle, *const c_void, *mut c_void) -> sys::CUptiResult;
    ffi_guard((), || cupti::yield_to_program("cuptiSubscribe"));
    let Some(real) = SUBSCRIBE.get() else { return NOT_LOADED };
    // SAFETY: the slot holds libcupti's cuptiSubscribe, whose C signature is `Real`.
    let real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
    // SAFETY: the program's arguments, unchanged.
    unsafe { real(subscriber, callback, userdata) }
}

/// The program's `cuptiActivityRegisterCallbacks`: tprof yields CUPTI first.
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterCallbacks(
    request: *const c_void,
    complete: *const c_void,
) -> sys::CUptiResult {
    type Real = unsafe extern "C" fn(*const c_void, *const c_void) -> sys::CUptiResult;
    ffi_guard((), || cupti::yield_to_program("cuptiActivityRegisterCallbacks"));
    let Some(real) = REGISTER_CALLBACKS.get() else { return NOT_LOADED };
    // SAFETY: the slot holds libcupti's cuptiActivityRegisterCallbacks, whose C signature is `Real`.
    let real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
    // SAFETY: the program's arguments, unchanged.
    unsafe { real(request, complete) }
}

/// The program's `cuptiActivityRegisterTimestampCallback`: tprof yields CUPTI first (its own
/// timestamp callback would otherwise stay in force for the program's records).
#[no_mangle]
pub unsafe extern "C" fn cuptiActivityRegisterTimestampCallback(callback: *const c_void) -> sys::CUptiResult {
    type Real = unsafe extern "C" fn(*const c_void) -> sys::CUptiResult;
    ffi_guard((), || cupti::yield_to_program("cuptiActivityRegisterTimestampCallback"));
    let Some(real) = REGISTER_TIMESTAMP.get() else { return NOT_LOADED };
    // SAFETY: the slot holds libcupti's cuptiActivityRegisterTimestampCallback, whose C signature is `Real`.
    let real = unsafe { std::mem::transmute::<*mut c_void, Real>(real) };
    // SAFETY: the program's argument, unchanged.
    unsafe { real(callback) }
}

/// These exports, for the `dlsym` hook (a program that `dlopen`s libcupti and looks them up).
pub static HOOKS: &[Hook] = &[
    Hook { name: cstr(b"cuptiSubscribe\0"), real: &SUBSCRIBE, wrapper: cuptiSubscribe as *const () },
    Hook {
        name: cstr(b"cuptiActivityRegisterCallbacks\0"),
        real: &REGISTER_CALLBACKS,
        wrapper: cuptiActivityRegisterCallbacks as *const (),
    },
    Hook {
        name: cstr(b"cuptiActivityRegisterTimestampCallback\0"),
        real: &REGISTER_TIMESTAMP,
        wrapper: cuptiActivityRegisterTimestampCallback as *const (),
    },
];
