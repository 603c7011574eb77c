//! CUDA runtime stream capture and graphs: begin / end capture (also into an existing graph), the
//! capture queries, instantiation and destruction. Each is recorded as `Api`; begin, end,
//! instantiate and destroy are followed with the window closed too (`graph_capture`), so launches
//! captured early (PyTorch captures during warm-up) are known when the graph runs later.
//!
//! Signatures: CUDA 12.9 and 13 `cuda_runtime_api.h`. `cudaGraphInstantiate` has the CUDA 12
//! `(exec*, graph, unsigned long long flags)` form (both libraries export only that one).

use std::ffi::{c_int, c_ulonglong, c_void};

use super::api_call::{call_tracked, interpose, real_or, slots, Work};
use super::cuda_types::{per_thread, Handle};
use super::graph_capture;
use super::real::RT_ERR_NO_DRIVER;
use crate::base::panic_fence::ffi_guard;
use crate::record::interning::StaticName;

type Ptr = *mut c_void;

#[inline]
fn on_stream(stream: Handle) -> Work {
    Work::Stream { stream: stream as u64, arg: 0 }
}

interpose! {
    domain = Runtime, missing = RT_ERR_NO_DRIVER;
    extra_hooks = [
        cudaStreamBeginCapture, cudaStreamBeginCapture_ptsz,
        cudaStreamBeginCaptureToGraph, cudaStreamBeginCaptureToGraph_ptsz,
        cudaStreamEndCapture, cudaStreamEndCapture_ptsz,
        cudaGraphInstantiate, cudaGraphInstantiateWithFlags,
        cudaGraphInstantiateWithParams, cudaGraphInstantiateWithParams_ptsz,
        cudaGraphDestroy, cudaGraphExecDestroy,
    ];
    fn cudaStreamIsCapturing(stream: Handle, status: *mut c_int) -> c_int => on_stream(stream);
    fn cudaStreamIsCapturing_ptsz(stream: Handle, status: *mut c_int) -> c_int => on_stream(per_thread(stream));
    /// Three arguments in libcudart.so.12 (the CUDA 11.0 form, kept for old binaries; CUDA 12 headers
    /// call `_v2`), seven in libcudart.so.13. All seven are forwarded: the three-argument function
    /// never reads the others (x86-64 and AArch64 C calling conventions).
    fn cudaStreamGetCaptureInfo(stream: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle,
        deps: Ptr, edges: Ptr, n_deps: *mut usize) -> c_int => on_stream(stream);
    fn cudaStreamGetCaptureInfo_ptsz(stream: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle,
        deps: Ptr, edges: Ptr, n_deps: *mut usize) -> c_int => on_stream(per_thread(stream));
    fn cudaStreamGetCaptureInfo_v2(stream: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle,
        deps: Ptr, n_deps: *mut usize) -> c_int => on_stream(stream);
    fn cudaStreamGetCaptureInfo_v2_ptsz(stream: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle,
        deps: Ptr, n_deps: *mut usize) -> c_int => on_stream(per_thread(stream));
    fn cudaStreamGetCaptureInfo_v3(stream: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle,
        deps: Ptr, edges: Ptr, n_deps: *mut usize) -> c_int => on_stream(stream);
    fn cudaStreamGetCaptureInfo_v3_ptsz(stream: Handle, status: *mut c_int, id: *mut c_ulonglong, graph: *mut Handle,
        deps: Ptr, edges: Ptr, n_deps: *mut usize) -> c_int => on_stream(per_thread(stream));
    fn cudaThreadExchangeStreamCaptureMode(mode: *mut c_int) -> c_int => Work::Plain { arg: 0 };
}

slots!(
    cudaStreamBeginCapture,
    cudaStreamBeginCapture_ptsz,
    cudaStreamBeginCaptureToGraph,
    cudaStreamBeginCaptureToGraph_ptsz,
    cudaStreamEndCapture,
    cudaStreamEndCapture_ptsz,
    cudaGraphInstantiate,
    cudaGraphInstantiateWithFlags,
    cudaGraphInstantiateWithParams,
    cudaGraphInstantiateWithParams_ptsz,
    cudaGraphDestroy,
    cudaGraphExecDestroy,
);

fn begin_capture(name: &StaticName, stream: Handle, into: Handle, real: impl FnOnce() -> c_int) -> c_int {
    call_tracked(true, name, on_stream(stream), real, |r| {
        if r == 0 {
            graph_capture::begin(stream as u64, into as usize);
        }
    })
}

/// `cudaStreamBeginCapture`.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamBeginCapture(stream: Handle, mode: c_int) -> c_int {
    let real = real_or!(cudaStreamBeginCapture, fn(Handle, c_int) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    begin_capture(&cudaStreamBeginCapture::NAME, stream, std::ptr::null_mut(), || unsafe { real(stream, mode) })
}

/// `cudaStreamBeginCapture_ptsz` (NULL = the per-thread default stream).
#[no_mangle]
pub unsafe extern "C" fn cudaStreamBeginCapture_ptsz(stream: Handle, mode: c_int) -> c_int {
    let real = real_or!(cudaStreamBeginCapture_ptsz, fn(Handle, c_int) -> c_int; RT_ERR_NO_DRIVER);
    let s = per_thread(stream);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    begin_capture(&cudaStreamBeginCapture_ptsz::NAME, s, std::ptr::null_mut(), || unsafe { real(stream, mode) })
}

/// `cudaStreamBeginCaptureToGraph`: the captured work is added to `graph`.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamBeginCaptureToGraph(
    stream: Handle,
    graph: Handle,
    deps: Ptr,
    edges: Ptr,
    n_deps: usize,
    mode: c_int,
) -> c_int {
    let real =
        real_or!(cudaStreamBeginCaptureToGraph, fn(Handle, Handle, Ptr, Ptr, usize, c_int) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let call = || unsafe { real(stream, graph, deps, edges, n_deps, mode) };
    begin_capture(&cudaStreamBeginCaptureToGraph::NAME, stream, graph, call)
}

/// `cudaStreamBeginCaptureToGraph_ptsz` (NULL = the per-thread default stream).
#[no_mangle]
pub unsafe extern "C" fn cudaStreamBeginCaptureToGraph_ptsz(
    stream: Handle,
    graph: Handle,
    deps: Ptr,
    edges: Ptr,
    n_deps: usize,
    mode: c_int,
) -> c_int {
    let real = real_or!(cudaStreamBeginCaptureToGraph_ptsz, fn(Handle, Handle, Ptr, Ptr, usize, c_int) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let call = || unsafe { real(stream, graph, deps, edges, n_deps, mode) };
    begin_capture(&cudaStreamBeginCaptureToGraph_ptsz::NAME, per_thread(stream), graph, call)
}

fn end_capture(name: &StaticName, stream: Handle, graph: *mut Handle, real: impl FnOnce() -> c_int) -> c_int {
    call_tracked(true, name, on_stream(stream), real, |r| {
        // SAFETY: on success the runtime stored the graph into the caller's (non-null) out-pointer.
        let g = if r == 0 && !graph.is_null() { unsafe { *graph } } else { std::ptr::null_mut() };
        graph_capture::end(stream as u64, r, g as usize);
    })
}

/// `cudaStreamEndCapture`: the capture's launches are the graph's kernels.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamEndCapture(stream: Handle, graph: *mut Handle) -> c_int {
    let real = real_or!(cudaStreamEndCapture, fn(Handle, *mut Handle) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    end_capture(&cudaStreamEndCapture::NAME, stream, graph, || unsafe { real(stream, graph) })
}

/// `cudaStreamEndCapture_ptsz` (NULL = the per-thread default stream).
#[no_mangle]
pub unsafe extern "C" fn cudaStreamEndCapture_ptsz(stream: Handle, graph: *mut Handle) -> c_int {
    let real = real_or!(cudaStreamEndCapture_ptsz, fn(Handle, *mut Handle) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    end_capture(&cudaStreamEndCapture_ptsz::NAME, per_thread(stream), graph, || unsafe { real(stream, graph) })
}

fn instantiate(name: &StaticName, exec: *mut Handle, graph: Handle, real: impl FnOnce() -> c_int) -> c_int {
    call_tracked(true, name, Work::Plain { arg: 0 }, real, |r| {
        if r == 0 && !exec.is_null() {
            // SAFETY: on success the runtime stored the executable into the caller's non-null out-pointer.
            graph_capture::on_instantiate(unsafe { *exec } as usize, graph as usize);
        }
    })
}

/// `cudaGraphInstantiate`.
#[no_mangle]
pub unsafe extern "C" fn cudaGraphInstantiate(exec: *mut Handle, graph: Handle, flags: c_ulonglong) -> c_int {
    let real = real_or!(cudaGraphInstantiate, fn(*mut Handle, Handle, c_ulonglong) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    instantiate(&cudaGraphInstantiate::NAME, exec, graph, || unsafe { real(exec, graph, flags) })
}

/// `cudaGraphInstantiateWithFlags`.
#[no_mangle]
pub unsafe extern "C" fn cudaGraphInstantiateWithFlags(exec: *mut Handle, graph: Handle, flags: c_ulonglong) -> c_int {
    let real = real_or!(cudaGraphInstantiateWithFlags, fn(*mut Handle, Handle, c_ulonglong) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    instantiate(&cudaGraphInstantiateWithFlags::NAME, exec, graph, || unsafe { real(exec, graph, flags) })
}

/// `cudaGraphInstantiateWithParams` (`cudaGraphInstantiateParams*`).
#[no_mangle]
pub unsafe extern "C" fn cudaGraphInstantiateWithParams(exec: *mut Handle, graph: Handle, params: Ptr) -> c_int {
    let real = real_or!(cudaGraphInstantiateWithParams, fn(*mut Handle, Handle, Ptr) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    instantiate(&cudaGraphInstantiateWithParams::NAME, exec, graph, || unsafe { real(exec, graph, params) })
}

/// `cudaGraphInstantiateWithParams_ptsz`.
#[no_mangle]
pub unsafe extern "C" fn cudaGraphInstantiateWithParams_ptsz(exec: *mut Handle, graph: Handle, params: Ptr) -> c_int {
    let real = real_or!(cudaGraphInstantiateWithParams_ptsz, fn(*mut Handle, Handle, Ptr) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    instantiate(&cudaGraphInstantiateWithParams_ptsz::NAME, exec, graph, || unsafe { real(exec, graph, params) })
}

/// `cudaGraphDestroy`: the handle is forgotten first (its address may be reused right after).
#[no_mangle]
pub unsafe extern "C" fn cudaGraphDestroy(graph: Handle) -> c_int {
    let real = real_or!(cudaGraphDestroy, fn(Handle) -> c_int; RT_ERR_NO_DRIVER);
    let call = || {
        ffi_guard((), || graph_capture::forget_graph(graph as usize));
        // SAFETY: forwarding the caller's argument unchanged to the real function.
        unsafe { real(graph) }
    };
    call_tracked(true, &cudaGraphDestroy::NAME, Work::Plain { arg: 0 }, call, |_| {})
}

/// `cudaGraphExecDestroy`: the handle is forgotten first (its address may be reused right after).
#[no_mangle]
pub unsafe extern "C" fn cudaGraphExecDestroy(exec: Handle) -> c_int {
    let real = real_or!(cudaGraphExecDestroy, fn(Handle) -> c_int; RT_ERR_NO_DRIVER);
    let call = || {
        ffi_guard((), || graph_capture::forget_exec(exec as usize));
        // SAFETY: forwarding the caller's argument unchanged to the real function.
        unsafe { real(exec) }
    };
    call_tracked(true, &cudaGraphExecDestroy::NAME, Work::Plain { arg: 0 }, call, |_| {})
}
