//! CUDA runtime stream work that is neither a kernel nor a copy: event records, host functions and
//! stream callbacks, and the completion queries (`cudaStreamQuery` / `cudaEventQuery`; their
//! `cudaErrorNotReady` is an answer, recorded as the call's result like any other).
//!
//! These are frequent (once or more per kernel in PyTorch): `Api` records only, with the stream; a
//! query repeated with the same answer is counted into one `ApiRepeat` record (`Work::Poll`). An
//! event recorded in a capturing stream is remembered while the capture lasts (`graph_capture`), so a
//! stream that waits on it is known to join the capture. Host functions are ordered like GPU work
//! (their name says "Launch", so CUPTI's record of them is matched through the external id).

use std::ffi::{c_int, c_uint, c_void};

use super::api_call::{call_tracked, interpose, real_or, slots, Work};
use super::cuda_types::{per_thread, Handle};
use super::graph_capture;
use super::real::RT_ERR_NO_DRIVER;
use crate::record::interning::StaticName;

type HostFn = *const c_void;

#[inline]
fn on_stream(stream: Handle) -> Work {
    Work::Stream { stream: stream as u64, arg: 0 }
}

/// A stream query: a completion poll (repeats are counted, see `Work::Poll`).
#[inline]
fn poll_stream(stream: Handle) -> Work {
    Work::Poll { stream: stream as u64, handle: stream as u64 }
}

#[inline]
fn host_work(stream: Handle) -> Work {
    Work::Gpu { bytes: 0, stream: stream as u64 }
}

interpose! {
    domain = Runtime, missing = RT_ERR_NO_DRIVER;
    extra_hooks = [cudaEventRecord, cudaEventRecord_ptsz, cudaEventRecordWithFlags, cudaEventRecordWithFlags_ptsz];
    fn cudaStreamQuery(stream: Handle) -> c_int => poll_stream(stream);
    fn cudaStreamQuery_ptsz(stream: Handle) -> c_int => poll_stream(per_thread(stream));
    fn cudaEventQuery(event: Handle) -> c_int => Work::Poll { stream: 0, handle: event as u64 };
    fn cudaLaunchHostFunc(stream: Handle, func: HostFn, user_data: *mut c_void) -> c_int => host_work(stream);
    fn cudaLaunchHostFunc_ptsz(stream: Handle, func: HostFn, user_data: *mut c_void) -> c_int
        => host_work(per_thread(stream));
    /// CUDA 13: with a synchronisation mode for the host task.
    fn cudaLaunchHostFunc_v2(stream: Handle, func: HostFn, user_data: *mut c_void, sync_mode: c_uint) -> c_int
        => host_work(stream);
    fn cudaLaunchHostFunc_v2_ptsz(stream: Handle, func: HostFn, user_data: *mut c_void, sync_mode: c_uint) -> c_int
        => host_work(per_thread(stream));
    fn cudaStreamAddCallback(stream: Handle, callback: HostFn, user_data: *mut c_void, flags: c_uint) -> c_int
        => on_stream(stream);
    fn cudaStreamAddCallback_ptsz(stream: Handle, callback: HostFn, user_data: *mut c_void, flags: c_uint) -> c_int
        => on_stream(per_thread(stream));
}

slots!(cudaEventRecord, cudaEventRecord_ptsz, cudaEventRecordWithFlags, cudaEventRecordWithFlags_ptsz);

/// Records the call; while a capture is in progress, remembers whether the event was recorded in it.
fn event_record(name: &StaticName, event: Handle, stream: Handle, real: impl FnOnce() -> c_int) -> c_int {
    call_tracked(graph_capture::any_active(), name, on_stream(stream), real, |r| {
        if r == 0 && graph_capture::any_active() {
            graph_capture::on_event_record(event as usize, stream as u64);
        }
    })
}

/// `cudaEventRecord`.
#[no_mangle]
pub unsafe extern "C" fn cudaEventRecord(event: Handle, stream: Handle) -> c_int {
    let real = real_or!(cudaEventRecord, fn(Handle, Handle) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    event_record(&cudaEventRecord::NAME, event, stream, || unsafe { real(event, stream) })
}

/// `cudaEventRecord_ptsz` (NULL = the per-thread default stream).
#[no_mangle]
pub unsafe extern "C" fn cudaEventRecord_ptsz(event: Handle, stream: Handle) -> c_int {
    let real = real_or!(cudaEventRecord_ptsz, fn(Handle, Handle) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    event_record(&cudaEventRecord_ptsz::NAME, event, per_thread(stream), || unsafe { real(event, stream) })
}

/// `cudaEventRecordWithFlags`.
#[no_mangle]
pub unsafe extern "C" fn cudaEventRecordWithFlags(event: Handle, stream: Handle, flags: c_uint) -> c_int {
    let real = real_or!(cudaEventRecordWithFlags, fn(Handle, Handle, c_uint) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    event_record(&cudaEventRecordWithFlags::NAME, event, stream, || unsafe { real(event, stream, flags) })
}

/// `cudaEventRecordWithFlags_ptsz` (NULL = the per-thread default stream).
#[no_mangle]
pub unsafe extern "C" fn cudaEventRecordWithFlags_ptsz(event: Handle, stream: Handle, flags: c_uint) -> c_int {
    let real = real_or!(cudaEventRecordWithFlags_ptsz, fn(Handle, Handle, c_uint) -> c_int; RT_ERR_NO_DRIVER);
    let s = per_thread(stream);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    event_record(&cudaEventRecordWithFlags_ptsz::NAME, event, s, || unsafe { real(event, stream, flags) })
}
