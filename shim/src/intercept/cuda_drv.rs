//! CUDA driver API: start-up (`cuInit`, devices and contexts, module loading, streams), launches,
//! function naming (`cuModuleGetFunction`, `cuLibraryGetKernel`, `cuKernelGetFunction`), memory
//! basics, completion queries and synchronisation, with their `_ptsz` / `_ptds` twins. Every call
//! wrapped here is recorded as an `Api` record (the naming calls too), so a program that uses only
//! the driver (JAX, Triton) has its start-up in the ring.
//!
//! These are reached directly (programs linked to libcuda), through the `dlsym` hook, or through
//! `cuGetProcAddress` / `cudaGetDriverEntryPoint` (see `proc_address.rs`). When the real runtime
//! calls the driver inside one of our runtime wrappers, the reentrancy guard makes these forward
//! without recording, so a runtime call is never counted twice.

use std::ffi::{c_char, c_int, c_uint, c_void};

use tprof_format::{ApiDomain, MemSpace, SyncKind};

use super::api_call::{begin, interpose, real_or, slots, started, Launch, Work};
use super::cuda_rt_mem::{tracked_alloc, tracked_free};
use super::cuda_types::{Dim3, Handle};
use super::kernel_names;
use super::real::DRV_ERR_NOT_FOUND;
use crate::base::panic_fence::ffi_guard;
use crate::record::interning;

/// `CUdeviceptr`.
pub type DevPtr = u64;
type Ptr = *mut c_void;
type CPtr = *const c_void;

/// `CUlaunchConfig` (cuda.h): the prefix we read.
#[repr(C)]
pub struct CuLaunchConfig {
    pub grid_x: c_uint,
    pub grid_y: c_uint,
    pub grid_z: c_uint,
    pub block_x: c_uint,
    pub block_y: c_uint,
    pub block_z: c_uint,
    pub shared_mem: c_uint,
    pub stream: Handle,
    pub attrs: *mut c_void,
    pub num_attrs: c_uint,
}

#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn launch(
    f: Handle,
    gx: c_uint,
    gy: c_uint,
    gz: c_uint,
    bx: c_uint,
    by: c_uint,
    bz: c_uint,
    smem: c_uint,
    s: Handle,
) -> Launch {
    Launch {
        name: kernel_names::lookup(f),
        grid: Dim3 { x: gx, y: gy, z: gz },
        block: Dim3 { x: bx, y: by, z: bz },
        smem,
        stream: s as u64,
    }
}

#[inline(always)]
fn launch_ex(config: *const CuLaunchConfig, f: Handle) -> Launch {
    if config.is_null() {
        return launch(f, 0, 0, 0, 0, 0, 0, 0, std::ptr::null_mut());
    }
    // SAFETY: a non-null config points to the caller's CUlaunchConfig for the duration of the call.
    let c = unsafe { &*config };
    launch(f, c.grid_x, c.grid_y, c.grid_z, c.block_x, c.block_y, c.block_z, c.shared_mem, c.stream)
}

#[inline]
fn gpu(bytes: u64, stream: Handle) -> Work {
    Work::Gpu { bytes, stream: stream as u64 }
}

#[inline]
fn sync(kind: SyncKind, stream: Handle, event: Handle) -> Work {
    Work::Sync { kind, stream: stream as u64, event: event as u64 }
}

const NONE: Handle = std::ptr::null_mut();

interpose! {
    domain = Driver, missing = DRV_ERR_NOT_FOUND;
    extra_hooks = [
        cuInit, cuModuleGetFunction, cuLibraryGetKernel, cuKernelGetFunction,
        cuMemAlloc_v2, cuMemAllocAsync, cuMemAllocAsync_ptsz, cuMemAllocManaged, cuMemAllocHost_v2, cuMemHostAlloc,
        cuMemFree_v2, cuMemFreeAsync, cuMemFreeAsync_ptsz, cuMemFreeHost,
    ];
    launches = [
        fn cuLaunchKernel(f: Handle, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, smem: c_uint,
            stream: Handle, params: *mut Ptr, extra: *mut Ptr) -> c_int => launch(f, gx, gy, gz, bx, by, bz, smem, stream);
        fn cuLaunchKernel_ptsz(f: Handle, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint, smem: c_uint,
            stream: Handle, params: *mut Ptr, extra: *mut Ptr) -> c_int => launch(f, gx, gy, gz, bx, by, bz, smem, stream);
        fn cuLaunchCooperativeKernel(f: Handle, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
            smem: c_uint, stream: Handle, params: *mut Ptr) -> c_int => launch(f, gx, gy, gz, bx, by, bz, smem, stream);
        fn cuLaunchCooperativeKernel_ptsz(f: Handle, gx: c_uint, gy: c_uint, gz: c_uint, bx: c_uint, by: c_uint, bz: c_uint,
            smem: c_uint, stream: Handle, params: *mut Ptr) -> c_int => launch(f, gx, gy, gz, bx, by, bz, smem, stream);
        fn cuLaunchKernelEx(config: *const CuLaunchConfig, f: Handle, params: *mut Ptr, extra: *mut Ptr) -> c_int
            => launch_ex(config, f);
        fn cuLaunchKernelEx_ptsz(config: *const CuLaunchConfig, f: Handle, params: *mut Ptr, extra: *mut Ptr) -> c_int
            => launch_ex(config, f);
    ];
    fn cuGraphLaunch(exec: Handle, stream: Handle) -> c_int => gpu(0, stream);
    fn cuGraphLaunch_ptsz(exec: Handle, stream: Handle) -> c_int => gpu(0, stream);

    fn cuMemcpy(dst: DevPtr, src: DevPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpy_ptds(dst: DevPtr, src: DevPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyAsync(dst: DevPtr, src: DevPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyAsync_ptsz(dst: DevPtr, src: DevPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyHtoD_v2(dst: DevPtr, src: CPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyHtoD_v2_ptds(dst: DevPtr, src: CPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyDtoH_v2(dst: Ptr, src: DevPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyDtoH_v2_ptds(dst: Ptr, src: DevPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyDtoD_v2(dst: DevPtr, src: DevPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyDtoD_v2_ptds(dst: DevPtr, src: DevPtr, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyHtoDAsync_v2(dst: DevPtr, src: CPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyHtoDAsync_v2_ptsz(dst: DevPtr, src: CPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyDtoHAsync_v2(dst: Ptr, src: DevPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyDtoHAsync_v2_ptsz(dst: Ptr, src: DevPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyDtoDAsync_v2(dst: DevPtr, src: DevPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyDtoDAsync_v2_ptsz(dst: DevPtr, src: DevPtr, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemcpyPeer(dst: DevPtr, dst_ctx: Handle, src: DevPtr, src_ctx: Handle, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemcpyPeer_ptds(dst: DevPtr, dst_ctx: Handle, src: DevPtr, src_ctx: Handle, n: usize) -> c_int
        => gpu(n as u64, NONE);
    fn cuMemcpyPeerAsync(dst: DevPtr, dst_ctx: Handle, src: DevPtr, src_ctx: Handle, n: usize, stream: Handle) -> c_int
        => gpu(n as u64, stream);
    fn cuMemcpyPeerAsync_ptsz(dst: DevPtr, dst_ctx: Handle, src: DevPtr, src_ctx: Handle, n: usize, stream: Handle) -> c_int
        => gpu(n as u64, stream);
    fn cuMemsetD8_v2(dst: DevPtr, v: u8, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemsetD8_v2_ptds(dst: DevPtr, v: u8, n: usize) -> c_int => gpu(n as u64, NONE);
    fn cuMemsetD16_v2(dst: DevPtr, v: u16, n: usize) -> c_int => gpu(2 * n as u64, NONE);
    fn cuMemsetD16_v2_ptds(dst: DevPtr, v: u16, n: usize) -> c_int => gpu(2 * n as u64, NONE);
    fn cuMemsetD32_v2(dst: DevPtr, v: c_uint, n: usize) -> c_int => gpu(4 * n as u64, NONE);
    fn cuMemsetD32_v2_ptds(dst: DevPtr, v: c_uint, n: usize) -> c_int => gpu(4 * n as u64, NONE);
    fn cuMemsetD8Async(dst: DevPtr, v: u8, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemsetD8Async_ptsz(dst: DevPtr, v: u8, n: usize, stream: Handle) -> c_int => gpu(n as u64, stream);
    fn cuMemsetD16Async(dst: DevPtr, v: u16, n: usize, stream: Handle) -> c_int => gpu(2 * n as u64, stream);
    fn cuMemsetD16Async_ptsz(dst: DevPtr, v: u16, n: usize, stream: Handle) -> c_int => gpu(2 * n as u64, stream);
    fn cuMemsetD32Async(dst: DevPtr, v: c_uint, n: usize, stream: Handle) -> c_int => gpu(4 * n as u64, stream);
    fn cuMemsetD32Async_ptsz(dst: DevPtr, v: c_uint, n: usize, stream: Handle) -> c_int => gpu(4 * n as u64, stream);

    fn cuCtxSynchronize() -> c_int => sync(SyncKind::ContextSynchronize, NONE, NONE);
    /// CUDA 13's ABI of `cuCtxSynchronize` (`PFN_cuCtxSynchronize_v13000`): the context to wait for,
    /// NULL for the current one.
    fn cuCtxSynchronize_v2(ctx: Handle) -> c_int => sync(SyncKind::ContextSynchronize, NONE, NONE);
    fn cuStreamSynchronize(stream: Handle) -> c_int => sync(SyncKind::StreamSynchronize, stream, NONE);
    fn cuStreamSynchronize_ptsz(stream: Handle) -> c_int => sync(SyncKind::StreamSynchronize, stream, NONE);
    fn cuEventSynchronize(event: Handle) -> c_int => sync(SyncKind::EventSynchronize, NONE, event);
    fn cuStreamWaitEvent(stream: Handle, event: Handle, flags: c_uint) -> c_int
        => sync(SyncKind::StreamWaitEvent, stream, event);
    fn cuStreamWaitEvent_ptsz(stream: Handle, event: Handle, flags: c_uint) -> c_int
        => sync(SyncKind::StreamWaitEvent, stream, event);
    fn cuStreamQuery(stream: Handle) -> c_int => Work::Poll { stream: stream as u64, handle: stream as u64 };
    fn cuStreamQuery_ptsz(stream: Handle) -> c_int => Work::Poll { stream: stream as u64, handle: stream as u64 };
    fn cuEventQuery(event: Handle) -> c_int => Work::Poll { stream: 0, handle: event as u64 };

    fn cuDeviceGet(device: *mut c_int, ordinal: c_int) -> c_int => Work::Plain { arg: ordinal as u64 };
    fn cuDevicePrimaryCtxRetain(ctx: *mut Handle, device: c_int) -> c_int => Work::Plain { arg: device as u64 };
    fn cuCtxSetCurrent(ctx: Handle) -> c_int => Work::Plain { arg: 0 };
    fn cuModuleLoadData(module: *mut Handle, image: CPtr) -> c_int => Work::Plain { arg: 0 };
    fn cuModuleLoadDataEx(module: *mut Handle, image: CPtr, n: c_uint, options: Ptr, values: *mut Ptr) -> c_int
        => Work::Plain { arg: 0 };
    fn cuModuleUnload(module: Handle) -> c_int => Work::Plain { arg: 0 };
    fn cuStreamCreate(stream: *mut Handle, flags: c_uint) -> c_int => Work::Plain { arg: u64::from(flags) };
    fn cuStreamDestroy_v2(stream: Handle) -> c_int => Work::Stream { stream: stream as u64, arg: 0 };
}

slots!(
    cuModuleGetFunction,
    cuLibraryGetKernel,
    cuKernelGetFunction,
    cuMemAlloc_v2,
    cuMemAllocAsync,
    cuMemAllocAsync_ptsz,
    cuMemAllocManaged,
    cuMemAllocHost_v2,
    cuMemHostAlloc,
    cuMemFree_v2,
    cuMemFreeAsync,
    cuMemFreeAsync_ptsz,
    cuMemFreeHost,
);

/// Names the `CUfunction` after the kernel (interned now: the caller's string may not outlive the
/// call), whether or not the call is recorded.
#[no_mangle]
pub unsafe extern "C" fn cuModuleGetFunction(out: *mut Handle, module: Handle, name: *const c_char) -> c_int {
    let real = real_or!(cuModuleGetFunction, fn(*mut Handle, Handle, *const c_char) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin, || Work::Plain { arg: 0 });
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(out, module, name) };
    if r == 0 && !out.is_null() {
        // SAFETY: on success the driver stored the handle into the caller's out-pointer.
        let f = unsafe { *out };
        // SAFETY: `name` is the caller's NUL-terminated kernel name, readable during this call.
        ffi_guard((), || unsafe { kernel_names::register_id(f, interning::intern_cstr(name)) });
    }
    if let Some((call, work)) = call {
        call.finish(ApiDomain::Driver, &cuModuleGetFunction::NAME, r, &work);
    }
    r
}

/// Names the `CUkernel` (CUDA 12 library API, lazy loading).
#[no_mangle]
pub unsafe extern "C" fn cuLibraryGetKernel(out: *mut Handle, library: Handle, name: *const c_char) -> c_int {
    let real = real_or!(cuLibraryGetKernel, fn(*mut Handle, Handle, *const c_char) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin, || Work::Plain { arg: 0 });
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(out, library, name) };
    if r == 0 && !out.is_null() {
        // SAFETY: as in cuModuleGetFunction.
        let k = unsafe { *out };
        // SAFETY: as in cuModuleGetFunction.
        ffi_guard((), || unsafe { kernel_names::register_id(k, interning::intern_cstr(name)) });
    }
    if let Some((call, work)) = call {
        call.finish(ApiDomain::Driver, &cuLibraryGetKernel::NAME, r, &work);
    }
    r
}

slots!(cuInit);

/// `cuInit`: recorded like any driver call, and always (also inside the runtime's implicit
/// initialisation, or with the capture window closed) tells [`crate::base::driver`] whether the driver
/// works: CUPTI and the NVML sampler start only after it returned `CUDA_SUCCESS`.
#[no_mangle]
pub unsafe extern "C" fn cuInit(flags: c_uint) -> c_int {
    let real = real_or!(cuInit, fn(c_uint) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin, || Work::Plain { arg: u64::from(flags) });
    // SAFETY: forwarding the caller's argument unchanged to the real function.
    let r = unsafe { real(flags) };
    if let Some((call, work)) = call {
        call.finish(ApiDomain::Driver, &cuInit::NAME, r, &work);
    }
    ffi_guard((), || crate::base::driver::note_init_result(r));
    r
}

/// The `CUfunction` of a `CUkernel` gets the kernel's name.
#[no_mangle]
pub unsafe extern "C" fn cuKernelGetFunction(out: *mut Handle, kernel: Handle) -> c_int {
    let real = real_or!(cuKernelGetFunction, fn(*mut Handle, Handle) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin, || Work::Plain { arg: 0 });
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(out, kernel) };
    if r == 0 && !out.is_null() {
        // SAFETY: on success the driver stored the handle into the caller's out-pointer.
        let f = unsafe { *out };
        ffi_guard((), || kernel_names::alias(f, kernel));
    }
    if let Some((call, work)) = call {
        call.finish(ApiDomain::Driver, &cuKernelGetFunction::NAME, r, &work);
    }
    r
}

macro_rules! drv_alloc {
    ($(#[$m:meta])* $name:ident($($arg:ident: $ty:ty),*), out = $out:ident, size = $size:expr, space = $space:expr) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let real = real_or!($name, fn($($ty),*) -> c_int; DRV_ERR_NOT_FOUND);
            let requested: u64 = $size as u64;
            // SAFETY: `out` is the caller's out-pointer (CUdeviceptr* or void**, both 8 bytes),
            // forwarded unchanged; read only after success.
            unsafe {
                tracked_alloc(ApiDomain::Driver, &$name::NAME, $space, requested, $out.cast(), || real($($arg),*), || requested)
            }
        }
    };
}

macro_rules! drv_free {
    ($(#[$m:meta])* $name:ident($($arg:ident: $ty:ty),*), ptr = $ptr:ident, space = $space:expr) => {
        $(#[$m])*
        #[no_mangle]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> c_int {
            let real = real_or!($name, fn($($ty),*) -> c_int; DRV_ERR_NOT_FOUND);
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            tracked_free(ApiDomain::Driver, &$name::NAME, $space, $ptr as u64, || unsafe { real($($arg),*) })
        }
    };
}

drv_alloc!(
    /// `cuMemAlloc_v2`.
    cuMemAlloc_v2(out: *mut DevPtr, size: usize), out = out, size = size, space = MemSpace::Device);
drv_alloc!(
    /// `cuMemAllocAsync`.
    cuMemAllocAsync(out: *mut DevPtr, size: usize, stream: Handle), out = out, size = size, space = MemSpace::DeviceAsync);
drv_alloc!(
    /// `cuMemAllocAsync_ptsz`.
    cuMemAllocAsync_ptsz(out: *mut DevPtr, size: usize, stream: Handle),
    out = out, size = size, space = MemSpace::DeviceAsync);
drv_alloc!(
    /// `cuMemAllocManaged`.
    cuMemAllocManaged(out: *mut DevPtr, size: usize, flags: c_uint), out = out, size = size, space = MemSpace::Managed);
drv_alloc!(
    /// `cuMemAllocHost_v2`.
    cuMemAllocHost_v2(out: *mut Ptr, size: usize), out = out, size = size, space = MemSpace::HostPinned);
drv_alloc!(
    /// `cuMemHostAlloc`.
    cuMemHostAlloc(out: *mut Ptr, size: usize, flags: c_uint), out = out, size = size, space = MemSpace::HostPinned);

drv_free!(
    /// `cuMemFree_v2`.
    cuMemFree_v2(ptr: DevPtr), ptr = ptr, space = MemSpace::Device);
drv_free!(
    /// `cuMemFreeAsync`.
    cuMemFreeAsync(ptr: DevPtr, stream: Handle), ptr = ptr, space = MemSpace::DeviceAsync);
drv_free!(
    /// `cuMemFreeAsync_ptsz`.
    cuMemFreeAsync_ptsz(ptr: DevPtr, stream: Handle), ptr = ptr, space = MemSpace::DeviceAsync);
drv_free!(
    /// `cuMemFreeHost`.
    cuMemFreeHost(ptr: Ptr), ptr = ptr, space = MemSpace::HostPinned);
