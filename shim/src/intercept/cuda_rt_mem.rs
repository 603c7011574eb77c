//! CUDA runtime memory: copies and memsets (sync, async, 2D, peer, symbol) and allocations / frees
//! (device, async / pool, managed, pinned host) with the per-device reservation kept in `memtrack`.

use std::ffi::{c_int, c_uint, c_void};

use tprof_format::{ApiDomain, MemOp, MemSpace};

use super::api_call::{begin_outer, current_device, interpose, real_or, slots, started, MemEvent, Work};
use super::cuda_types::Handle;
use super::memtrack;
use super::real::RT_ERR_NO_DRIVER;
use crate::base::panic_fence::ffi_guard;
use crate::record::interning::StaticName;

type Ptr = *mut c_void;
type CPtr = *const c_void;

#[inline]
fn copy(bytes: usize, stream: Handle) -> Work {
    Work::Gpu { bytes: bytes as u64, stream: stream as u64 }
}

#[inline]
fn copy2d(width: usize, height: usize, stream: Handle) -> Work {
    Work::Gpu { bytes: (width as u64).saturating_mul(height as u64), stream: stream as u64 }
}

const NO_STREAM: Handle = std::ptr::null_mut();

interpose! {
    domain = Runtime, missing = RT_ERR_NO_DRIVER;
    extra_hooks = [
        cudaMalloc, cudaMallocAsync, cudaMallocAsync_ptsz, cudaMallocFromPoolAsync, cudaMallocFromPoolAsync_ptsz,
        cudaMallocManaged, cudaMallocHost, cudaHostAlloc, cudaMallocPitch,
        cudaFree, cudaFreeAsync, cudaFreeAsync_ptsz, cudaFreeHost,
    ];
    fn cudaMemcpy(dst: Ptr, src: CPtr, count: usize, kind: c_int) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpy_ptds(dst: Ptr, src: CPtr, count: usize, kind: c_int) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpyAsync(dst: Ptr, src: CPtr, count: usize, kind: c_int, stream: Handle) -> c_int => copy(count, stream);
    fn cudaMemcpyAsync_ptsz(dst: Ptr, src: CPtr, count: usize, kind: c_int, stream: Handle) -> c_int => copy(count, stream);
    fn cudaMemcpy2D(dst: Ptr, dpitch: usize, src: CPtr, spitch: usize, width: usize, height: usize, kind: c_int) -> c_int
        => copy2d(width, height, NO_STREAM);
    fn cudaMemcpy2D_ptds(dst: Ptr, dpitch: usize, src: CPtr, spitch: usize, width: usize, height: usize, kind: c_int) -> c_int
        => copy2d(width, height, NO_STREAM);
    fn cudaMemcpy2DAsync(dst: Ptr, dpitch: usize, src: CPtr, spitch: usize, width: usize, height: usize, kind: c_int, stream: Handle) -> c_int
        => copy2d(width, height, stream);
    fn cudaMemcpy2DAsync_ptsz(dst: Ptr, dpitch: usize, src: CPtr, spitch: usize, width: usize, height: usize, kind: c_int, stream: Handle) -> c_int
        => copy2d(width, height, stream);
    fn cudaMemcpyPeer(dst: Ptr, dst_dev: c_int, src: CPtr, src_dev: c_int, count: usize) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpyPeer_ptds(dst: Ptr, dst_dev: c_int, src: CPtr, src_dev: c_int, count: usize) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpyPeerAsync(dst: Ptr, dst_dev: c_int, src: CPtr, src_dev: c_int, count: usize, stream: Handle) -> c_int
        => copy(count, stream);
    fn cudaMemcpyPeerAsync_ptsz(dst: Ptr, dst_dev: c_int, src: CPtr, src_dev: c_int, count: usize, stream: Handle) -> c_int
        => copy(count, stream);
    fn cudaMemcpyToSymbol(symbol: CPtr, src: CPtr, count: usize, offset: usize, kind: c_int) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpyToSymbol_ptds(symbol: CPtr, src: CPtr, count: usize, offset: usize, kind: c_int) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpyFromSymbol(dst: Ptr, symbol: CPtr, count: usize, offset: usize, kind: c_int) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpyFromSymbol_ptds(dst: Ptr, symbol: CPtr, count: usize, offset: usize, kind: c_int) -> c_int => copy(count, NO_STREAM);
    fn cudaMemcpyToSymbolAsync(symbol: CPtr, src: CPtr, count: usize, offset: usize, kind: c_int, stream: Handle) -> c_int
        => copy(count, stream);
    fn cudaMemcpyToSymbolAsync_ptsz(symbol: CPtr, src: CPtr, count: usize, offset: usize, kind: c_int, stream: Handle) -> c_int
        => copy(count, stream);
    fn cudaMemcpyFromSymbolAsync(dst: Ptr, symbol: CPtr, count: usize, offset: usize, kind: c_int, stream: Handle) -> c_int
        => copy(count, stream);
    fn cudaMemcpyFromSymbolAsync_ptsz(dst: Ptr, symbol: CPtr, count: usize, offset: usize, kind: c_int, stream: Handle) -> c_int
        => copy(count, stream);
    fn cudaMemset(ptr: Ptr, value: c_int, count: usize) -> c_int => copy(count, NO_STREAM);
    fn cudaMemset_ptds(ptr: Ptr, value: c_int, count: usize) -> c_int => copy(count, NO_STREAM);
    fn cudaMemsetAsync(ptr: Ptr, value: c_int, count: usize, stream: Handle) -> c_int => copy(count, stream);
    fn cudaMemsetAsync_ptsz(ptr: Ptr, value: c_int, count: usize, stream: Handle) -> c_int => copy(count, stream);
    fn cudaMemset2D(ptr: Ptr, pitch: usize, value: c_int, width: usize, height: usize) -> c_int => copy2d(width, height, NO_STREAM);
    fn cudaMemset2D_ptds(ptr: Ptr, pitch: usize, value: c_int, width: usize, height: usize) -> c_int
        => copy2d(width, height, NO_STREAM);
    fn cudaMemset2DAsync(ptr: Ptr, pitch: usize, value: c_int, width: usize, height: usize, stream: Handle) -> c_int
        => copy2d(width, height, stream);
    fn cudaMemset2DAsync_ptsz(ptr: Ptr, pitch: usize, value: c_int, width: usize, height: usize, stream: Handle) -> c_int
        => copy2d(width, height, stream);
}

slots!(
    cudaMalloc,
    cudaMallocAsync,
    cudaMallocAsync_ptsz,
    cudaMallocFromPoolAsync,
    cudaMallocFromPoolAsync_ptsz,
    cudaMallocManaged,
    cudaMallocHost,
    cudaHostAlloc,
    cudaMallocPitch,
    cudaFree,
    cudaFreeAsync,
    cudaFreeAsync_ptsz,
    cudaFreeHost,
);

/// Runs an allocation through the real function and records it (`Api` + `Memory`). The reservation
/// is tracked even while the capture window is closed, but only at the outermost level (the real
/// runtime's own driver calls are not counted twice).
///
/// # Safety
/// `out` must be NULL or the out-pointer the caller passed to the real function.
pub(crate) unsafe fn tracked_alloc(
    domain: ApiDomain,
    name: &StaticName,
    space: MemSpace,
    requested: u64,
    out: *mut Ptr,
    real: impl FnOnce() -> c_int,
    allocated_bytes: impl FnOnce() -> u64,
) -> c_int {
    let call = started(begin_outer, || Work::Plain { arg: requested });
    let r = real();
    let Some((call, work)) = call else { return r };
    ffi_guard((), || {
        let device = if space == MemSpace::HostPinned { memtrack::HOST } else { current_device() };
        let mem = if r == 0 {
            // SAFETY: on success the real function stored the new pointer into the caller's out-pointer.
            let addr = if out.is_null() { 0 } else { (unsafe { *out }) as u64 };
            let bytes = allocated_bytes();
            let reserved = memtrack::on_alloc(device, addr, bytes);
            MemEvent { op: MemOp::Alloc, space, device, address: addr, bytes, reserved }
        } else {
            MemEvent {
                op: MemOp::AllocFailed,
                space,
                device,
                address: 0,
                bytes: requested,
                reserved: memtrack::reserved(device),
            }
        };
        call.finish_memory(domain, name, r, &work, mem);
    });
    r
}

/// Runs a free through the real function and records it.
pub(crate) fn tracked_free(
    domain: ApiDomain,
    name: &StaticName,
    space: MemSpace,
    addr: u64,
    real: impl FnOnce() -> c_int,
) -> c_int {
    let call = started(begin_outer, || Work::Plain { arg: 0 });
    let r = real();
    let Some((call, _)) = call else { return r };
    ffi_guard((), || {
        let freed = if r == 0 { memtrack::on_free(addr) } else { None };
        let (device, bytes, reserved) = match freed {
            Some(f) => f,
            None => {
                let d = if space == MemSpace::HostPinned { memtrack::HOST } else { current_device() };
                (d, 0, memtrack::reserved(d))
            }
        };
        let work = Work::Plain { arg: bytes };
        call.finish_memory(
            domain,
            name,
            r,
            &work,
            MemEvent { op: MemOp::Free, space, device, address: addr, bytes, reserved },
        );
    });
    r
}

macro_rules! alloc_wrapper {
    ($(#[$m:meta])* $name:ident($($arg:ident: $ty:ty),*), out = $out:ident, size = $size:expr, space = $space:expr) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let real = real_or!($name, fn($($ty),*) -> c_int; RT_ERR_NO_DRIVER);
            let requested: u64 = $size as u64;
            // SAFETY: `out` is the caller's out-pointer, forwarded unchanged.
            unsafe {
                tracked_alloc(ApiDomain::Runtime, &$name::NAME, $space, requested, $out, || real($($arg),*), || requested)
            }
        }
    };
}

macro_rules! free_wrapper {
    ($(#[$m:meta])* $name:ident($($arg:ident: $ty:ty),*), ptr = $ptr:ident, space = $space:expr) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let real = real_or!($name, fn($($ty),*) -> c_int; RT_ERR_NO_DRIVER);
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            tracked_free(ApiDomain::Runtime, &$name::NAME, $space, $ptr as u64, || unsafe { real($($arg),*) })
        }
    };
}

alloc_wrapper!(
    /// `cudaMalloc`.
    cudaMalloc(out: *mut Ptr, size: usize), out = out, size = size, space = MemSpace::Device);
alloc_wrapper!(
    /// `cudaMallocAsync` (stream-ordered).
    cudaMallocAsync(out: *mut Ptr, size: usize, stream: Handle), out = out, size = size, space = MemSpace::DeviceAsync);
alloc_wrapper!(
    /// `cudaMallocAsync_ptsz`.
    cudaMallocAsync_ptsz(out: *mut Ptr, size: usize, stream: Handle), out = out, size = size, space = MemSpace::DeviceAsync);
alloc_wrapper!(
    /// `cudaMallocFromPoolAsync`.
    cudaMallocFromPoolAsync(out: *mut Ptr, size: usize, pool: Handle, stream: Handle),
    out = out, size = size, space = MemSpace::DeviceAsync);
alloc_wrapper!(
    /// `cudaMallocFromPoolAsync_ptsz`.
    cudaMallocFromPoolAsync_ptsz(out: *mut Ptr, size: usize, pool: Handle, stream: Handle),
    out = out, size = size, space = MemSpace::DeviceAsync);
alloc_wrapper!(
    /// `cudaMallocManaged`.
    cudaMallocManaged(out: *mut Ptr, size: usize, flags: c_uint), out = out, size = size, space = MemSpace::Managed);
alloc_wrapper!(
    /// `cudaMallocHost` (pinned host memory).
    cudaMallocHost(out: *mut Ptr, size: usize), out = out, size = size, space = MemSpace::HostPinned);
alloc_wrapper!(
    /// `cudaHostAlloc` (pinned host memory).
    cudaHostAlloc(out: *mut Ptr, size: usize, flags: c_uint), out = out, size = size, space = MemSpace::HostPinned);

/// `cudaMallocPitch`: requested = width x height, allocated = pitch x height.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocPitch(out: *mut Ptr, pitch: *mut usize, width: usize, height: usize) -> c_int {
    let real = real_or!(cudaMallocPitch, fn(*mut Ptr, *mut usize, usize, usize) -> c_int; RT_ERR_NO_DRIVER);
    let requested = (width as u64).saturating_mul(height as u64);
    let allocated = || {
        if pitch.is_null() {
            requested
        } else {
            // SAFETY: on success the runtime wrote the pitch into the caller's non-null pointer.
            (unsafe { *pitch } as u64).saturating_mul(height as u64)
        }
    };
    // SAFETY: `out` is the caller's out-pointer, forwarded unchanged.
    unsafe {
        tracked_alloc(
            ApiDomain::Runtime,
            &cudaMallocPitch::NAME,
            MemSpace::Device,
            requested,
            out,
            || real(out, pitch, width, height),
            allocated,
        )
    }
}

free_wrapper!(
    /// `cudaFree`.
    cudaFree(ptr: Ptr), ptr = ptr, space = MemSpace::Device);
free_wrapper!(
    /// `cudaFreeAsync`.
    cudaFreeAsync(ptr: Ptr, stream: Handle), ptr = ptr, space = MemSpace::DeviceAsync);
free_wrapper!(
    /// `cudaFreeAsync_ptsz`.
    cudaFreeAsync_ptsz(ptr: Ptr, stream: Handle), ptr = ptr, space = MemSpace::DeviceAsync);
free_wrapper!(
    /// `cudaFreeHost`.
    cudaFreeHost(ptr: Ptr), ptr = ptr, space = MemSpace::HostPinned);
