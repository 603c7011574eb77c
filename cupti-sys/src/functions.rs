//! C function-pointer types of the CUPTI entry points tprof resolves with `dlsym`, and of the
//! callbacks it registers (`cupti_activity.h`, `cupti_callbacks.h`, `cupti_version.h`).

use core::ffi::{c_char, c_void};

use crate::records::ActivityHeader;
use crate::{
    CUcontext, CUptiResult, CUpti_ActivityKind, CUpti_CallbackDomain, CUpti_CallbackId, CUpti_SubscriberHandle,
};

pub type BuffersCallbackRequestFunc =
    unsafe extern "C" fn(buffer: *mut *mut u8, size: *mut usize, max_num_records: *mut usize);
pub type BuffersCallbackCompleteFunc =
    unsafe extern "C" fn(ctx: CUcontext, stream_id: u32, buffer: *mut u8, size: usize, valid_size: usize);
pub type TimestampCallbackFunc = unsafe extern "C" fn() -> u64;
pub type CallbackFunc = unsafe extern "C" fn(
    userdata: *mut c_void,
    domain: CUpti_CallbackDomain,
    cbid: CUpti_CallbackId,
    cbdata: *const c_void,
);

pub type FnGetVersion = unsafe extern "C" fn(version: *mut u32) -> CUptiResult;
pub type FnGetResultString = unsafe extern "C" fn(result: CUptiResult, str: *mut *const c_char) -> CUptiResult;
pub type FnSubscribe = unsafe extern "C" fn(
    subscriber: *mut CUpti_SubscriberHandle,
    callback: CallbackFunc,
    userdata: *mut c_void,
) -> CUptiResult;
pub type FnUnsubscribe = unsafe extern "C" fn(subscriber: CUpti_SubscriberHandle) -> CUptiResult;
pub type FnActivityEnable = unsafe extern "C" fn(kind: CUpti_ActivityKind) -> CUptiResult;
pub type FnActivityDisable = unsafe extern "C" fn(kind: CUpti_ActivityKind) -> CUptiResult;
pub type FnActivityRegisterCallbacks =
    unsafe extern "C" fn(request: BuffersCallbackRequestFunc, complete: BuffersCallbackCompleteFunc) -> CUptiResult;
pub type FnActivityRegisterTimestampCallback = unsafe extern "C" fn(f: TimestampCallbackFunc) -> CUptiResult;
pub type FnActivityFlushAll = unsafe extern "C" fn(flag: u32) -> CUptiResult;
pub type FnActivityFlushPeriod = unsafe extern "C" fn(ms: u32) -> CUptiResult;
pub type FnActivityGetNextRecord =
    unsafe extern "C" fn(buffer: *mut u8, valid_size: usize, record: *mut *mut ActivityHeader) -> CUptiResult;
pub type FnActivityGetNumDroppedRecords =
    unsafe extern "C" fn(ctx: CUcontext, stream_id: u32, dropped: *mut usize) -> CUptiResult;
pub type FnActivitySetAttribute =
    unsafe extern "C" fn(attr: u32, value_size: *mut usize, value: *mut c_void) -> CUptiResult;
pub type FnActivityPushExternalCorrelationId = unsafe extern "C" fn(kind: u32, id: u64) -> CUptiResult;
pub type FnActivityPopExternalCorrelationId = unsafe extern "C" fn(kind: u32, last_id: *mut u64) -> CUptiResult;
pub type FnGetCallbackName =
    unsafe extern "C" fn(domain: CUpti_CallbackDomain, cbid: u32, name: *mut *const c_char) -> CUptiResult;
pub type FnFinalize = unsafe extern "C" fn() -> CUptiResult;
/// `cuptiSetThreadIdType(CUpti_ActivityThreadIdType)`: 0 default (pthread_self), 1 system (gettid).
pub type FnSetThreadIdType = unsafe extern "C" fn(kind: u32) -> CUptiResult;
pub type FnGetTimestamp = unsafe extern "C" fn(timestamp: *mut u64) -> CUptiResult;
