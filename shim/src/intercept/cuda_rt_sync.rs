//! CUDA runtime synchronisation: device / stream / event synchronize and `cudaStreamWaitEvent`, each
//! recorded as `Api` plus a `Sync` record. A stream waiting on an event recorded in a stream capture
//! joins that capture (`graph_capture`).

use std::ffi::{c_int, c_uint};

use tprof_format::SyncKind;

use super::api_call::{call_tracked, interpose, real_or, slots, Work};
use super::cuda_types::{per_thread, Handle};
use super::graph_capture;
use super::real::RT_ERR_NO_DRIVER;

#[inline]
fn sync(kind: SyncKind, stream: Handle, event: Handle) -> Work {
    Work::Sync { kind, stream: stream as u64, event: event as u64 }
}

const NONE: Handle = std::ptr::null_mut();

interpose! {
    domain = Runtime, missing = RT_ERR_NO_DRIVER;
    extra_hooks = [cudaStreamWaitEvent, cudaStreamWaitEvent_ptsz];
    fn cudaDeviceSynchronize() -> c_int => sync(SyncKind::ContextSynchronize, NONE, NONE);
    fn cudaStreamSynchronize(stream: Handle) -> c_int => sync(SyncKind::StreamSynchronize, stream, NONE);
    fn cudaStreamSynchronize_ptsz(stream: Handle) -> c_int => sync(SyncKind::StreamSynchronize, stream, NONE);
    fn cudaEventSynchronize(event: Handle) -> c_int => sync(SyncKind::EventSynchronize, NONE, event);
}

slots!(cudaStreamWaitEvent, cudaStreamWaitEvent_ptsz);

/// `cudaStreamWaitEvent`: recorded; while a capture is in progress, a fork into it is followed.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamWaitEvent(stream: Handle, event: Handle, flags: c_uint) -> c_int {
    let real = real_or!(cudaStreamWaitEvent, fn(Handle, Handle, c_uint) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    wait_event(&cudaStreamWaitEvent::NAME, stream, event, || unsafe { real(stream, event, flags) })
}

/// `cudaStreamWaitEvent_ptsz` (NULL = the per-thread default stream).
#[no_mangle]
pub unsafe extern "C" fn cudaStreamWaitEvent_ptsz(stream: Handle, event: Handle, flags: c_uint) -> c_int {
    let real = real_or!(cudaStreamWaitEvent_ptsz, fn(Handle, Handle, c_uint) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    wait_event(&cudaStreamWaitEvent_ptsz::NAME, per_thread(stream), event, || unsafe { real(stream, event, flags) })
}

fn wait_event(
    name: &crate::record::interning::StaticName,
    stream: Handle,
    event: Handle,
    real: impl FnOnce() -> c_int,
) -> c_int {
    call_tracked(graph_capture::any_active(), name, sync(SyncKind::StreamWaitEvent, stream, event), real, |r| {
        if r == 0 && graph_capture::any_active() {
            graph_capture::on_stream_wait(stream as u64, event as usize);
        }
    })
}
