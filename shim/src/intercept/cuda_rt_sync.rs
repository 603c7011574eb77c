//! CUDA runtime synchronisation: device / stream / event synchronize and `cudaStreamWaitEvent`, each
//! recorded as `Api` plus a `Sync` record.

use std::ffi::{c_int, c_uint};

use tprof_format::SyncKind;

use super::real::RT_ERR_NO_DRIVER;
use super::{interpose, Handle, Work};

#[inline]
fn sync(kind: SyncKind, stream: Handle, event: Handle) -> Work {
    Work::Sync { kind, stream: stream as u64, event: event as u64 }
}

const NONE: Handle = std::ptr::null_mut();

interpose! {
    domain = Runtime, missing = RT_ERR_NO_DRIVER;
    extra_hooks = [];
    fn cudaDeviceSynchronize() -> c_int => sync(SyncKind::ContextSynchronize, NONE, NONE);
    fn cudaStreamSynchronize(stream: Handle) -> c_int => sync(SyncKind::StreamSynchronize, stream, NONE);
    fn cudaStreamSynchronize_ptsz(stream: Handle) -> c_int => sync(SyncKind::StreamSynchronize, stream, NONE);
    fn cudaEventSynchronize(event: Handle) -> c_int => sync(SyncKind::EventSynchronize, NONE, event);
    fn cudaStreamWaitEvent(stream: Handle, event: Handle, flags: c_uint) -> c_int
        => sync(SyncKind::StreamWaitEvent, stream, event);
    fn cudaStreamWaitEvent_ptsz(stream: Handle, event: Handle, flags: c_uint) -> c_int
        => sync(SyncKind::StreamWaitEvent, stream, event);
}
