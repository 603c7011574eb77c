//! CUDA runtime: kernel launches (classic, `Ex`, cooperative, nvcc's `__cudaLaunchKernel`), graph
//! launches, `cudaSetDevice`, and what gives kernel names without CUPTI: nvcc's registration calls
//! and libraries (`cudaLibraryLoadData` / `cudaLibraryGetKernel`).
//!
//! Memory calls are in `cuda_rt_mem.rs`, synchronisation in `cuda_rt_sync.rs`, event records, queries
//! and host functions in `cuda_rt_stream.rs`, stream capture and graphs in `cuda_rt_graph.rs`.

use std::ffi::{c_char, c_int, c_uint, c_void};

use tprof_format::ApiDomain;

use crate::base::panic_fence::ffi_guard;

use super::api_call::{begin, call_tracked, interpose, real_or, set_current_device, slots, started, Launch, Work};
use super::cuda_types::{per_thread, Dim3, Handle};
use super::kernel_names;
use super::real::RT_ERR_NO_DRIVER;

/// `cudaLaunchConfig_t` (driver_types.h): the prefix we read.
#[repr(C)]
pub struct LaunchConfig {
    pub grid: Dim3,
    pub block: Dim3,
    pub dynamic_smem: usize,
    pub stream: Handle,
    pub attrs: *mut c_void,
    pub num_attrs: c_uint,
}

#[inline(always)]
fn launch(func: *const c_void, grid: Dim3, block: Dim3, smem: usize, stream: Handle) -> Launch {
    Launch { name: kernel_names::lookup(func), grid, block, smem: smem as u32, stream: stream as u64 }
}

/// `per_thread`: a `_ptsz` entry point (NULL = the per-thread default stream).
#[inline(always)]
fn launch_cfg(config: *const LaunchConfig, func: *const c_void, per_thread_stream: bool) -> Launch {
    if config.is_null() {
        return launch(func, Dim3::default(), Dim3::default(), 0, std::ptr::null_mut());
    }
    // SAFETY: a non-null config points to the caller's cudaLaunchConfig_t for the duration of the call.
    let c = unsafe { &*config };
    let stream = if per_thread_stream { per_thread(c.stream) } else { c.stream };
    launch(func, c.grid, c.block, c.dynamic_smem, stream)
}

#[inline]
fn graph_launch(exec: Handle, stream: Handle) -> Work {
    Work::GraphLaunch { exec: exec as usize, stream: stream as u64 }
}

interpose! {
    domain = Runtime, missing = RT_ERR_NO_DRIVER;
    extra_hooks = [
        __cudaRegisterFatBinary,
        __cudaRegisterFatBinaryEnd,
        __cudaRegisterFunction,
        __cudaGetKernel,
        cudaGetFuncBySymbol,
        cudaSetDevice,
        cudaLibraryGetKernel,
    ];
    launches = [
        fn cudaLaunchKernel(func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, smem: usize, stream: Handle) -> c_int
            => launch(func, grid, block, smem, stream);
        fn cudaLaunchKernel_ptsz(func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, smem: usize, stream: Handle) -> c_int
            => launch(func, grid, block, smem, per_thread(stream));
        fn cudaLaunchCooperativeKernel(func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, smem: usize, stream: Handle) -> c_int
            => launch(func, grid, block, smem, stream);
        fn cudaLaunchCooperativeKernel_ptsz(func: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, smem: usize, stream: Handle) -> c_int
            => launch(func, grid, block, smem, per_thread(stream));
        fn cudaLaunchKernelExC(config: *const LaunchConfig, func: *const c_void, args: *mut *mut c_void) -> c_int
            => launch_cfg(config, func, false);
        fn cudaLaunchKernelExC_ptsz(config: *const LaunchConfig, func: *const c_void, args: *mut *mut c_void) -> c_int
            => launch_cfg(config, func, true);
        fn __cudaLaunchKernel(kernel: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, smem: usize, stream: Handle) -> c_int
            => launch(kernel, grid, block, smem, stream);
        fn __cudaLaunchKernel_ptsz(kernel: *const c_void, grid: Dim3, block: Dim3, args: *mut *mut c_void, smem: usize, stream: Handle) -> c_int
            => launch(kernel, grid, block, smem, per_thread(stream));
    ];
    fn cudaGraphLaunch(exec: Handle, stream: Handle) -> c_int => graph_launch(exec, stream);
    fn cudaGraphLaunch_ptsz(exec: Handle, stream: Handle) -> c_int => graph_launch(exec, per_thread(stream));
    fn cudaLibraryLoadData(
        library: *mut Handle, code: *const c_void, jit_options: *mut c_int, jit_values: *mut *mut c_void, n_jit: c_uint,
        library_options: *mut c_int, library_values: *mut *mut c_void, n_library: c_uint
    ) -> c_int => Work::Plain { arg: 0 };
    fn cudaLibraryLoadFromFile(
        library: *mut Handle, path: *const c_char, jit_options: *mut c_int, jit_values: *mut *mut c_void, n_jit: c_uint,
        library_options: *mut c_int, library_values: *mut *mut c_void, n_library: c_uint
    ) -> c_int => Work::Plain { arg: 0 };
    fn cudaLibraryUnload(library: Handle) -> c_int => Work::Plain { arg: 0 };
}

slots!(
    __cudaRegisterFatBinary,
    __cudaRegisterFatBinaryEnd,
    __cudaRegisterFunction,
    __cudaGetKernel,
    cudaGetFuncBySymbol,
    cudaSetDevice,
    cudaLibraryGetKernel
);

/// nvcc's module registration (static constructors): forwarded untouched, nothing recorded (tprof
/// initialises lazily at the first real CUDA call).
#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterFatBinary(fat_cubin: *mut c_void) -> *mut *mut c_void {
    let real = real_or!(__cudaRegisterFatBinary, fn(*mut c_void) -> *mut *mut c_void; std::ptr::null_mut());
    // SAFETY: forwarding the caller's argument unchanged to the real function.
    unsafe { real(fat_cubin) }
}

/// Forwarded untouched.
#[no_mangle]
pub unsafe extern "C" fn __cudaRegisterFatBinaryEnd(handle: *mut *mut c_void) {
    let real = real_or!(__cudaRegisterFatBinaryEnd, fn(*mut *mut c_void); ());
    // SAFETY: forwarding the caller's argument unchanged to the real function.
    unsafe { real(handle) }
}

/// Registers a kernel: remembers host stub -> mangled device name, then forwards.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn __cudaRegisterFunction(
    handle: *mut *mut c_void,
    host_fun: *const c_char,
    device_fun: *mut c_char,
    device_name: *const c_char,
    thread_limit: c_int,
    tid: *mut c_void,
    bid: *mut c_void,
    b_dim: *mut c_void,
    g_dim: *mut c_void,
    w_size: *mut c_int,
) {
    ffi_guard((), || {
        kernel_names::register_static(host_fun.cast(), if device_name.is_null() { device_fun } else { device_name })
    });
    type Real = unsafe extern "C" fn(
        *mut *mut c_void,
        *const c_char,
        *mut c_char,
        *const c_char,
        c_int,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_int,
    );
    let Some(p) = __cudaRegisterFunction::REAL.get() else {
        return __cudaRegisterFunction::REAL.missing(());
    };
    // SAFETY: the slot holds the real __cudaRegisterFunction, which has this C signature.
    let real = unsafe { std::mem::transmute::<*mut c_void, Real>(p) };
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    unsafe { real(handle, host_fun, device_fun, device_name, thread_limit, tid, bid, b_dim, g_dim, w_size) }
}

/// `cudaKernel_t` for a host stub (CUDA 12.9+/13 `<<<>>>`): the handle gets the stub's name.
#[no_mangle]
pub unsafe extern "C" fn __cudaGetKernel(kernel: *mut *mut c_void, func: *const c_void) -> c_int {
    let real = real_or!(__cudaGetKernel, fn(*mut *mut c_void, *const c_void) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(kernel, func) };
    if r == 0 && !kernel.is_null() {
        // SAFETY: on success the runtime stored the handle into the caller's non-null out-pointer.
        let k = unsafe { *kernel };
        ffi_guard((), || kernel_names::alias(k, func));
    }
    r
}

/// `cudaFunction_t` (= `CUfunction`) for a host stub: the handle gets the stub's name, so a
/// `cuLaunchKernel` on it (libraries bypassing the runtime) is named.
#[no_mangle]
pub unsafe extern "C" fn cudaGetFuncBySymbol(func: *mut *mut c_void, symbol: *const c_void) -> c_int {
    let real = real_or!(cudaGetFuncBySymbol, fn(*mut *mut c_void, *const c_void) -> c_int; RT_ERR_NO_DRIVER);
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(func, symbol) };
    if r == 0 && !func.is_null() {
        // SAFETY: on success the runtime stored the handle into the caller's non-null out-pointer.
        let f = unsafe { *func };
        ffi_guard((), || kernel_names::alias(f, symbol));
    }
    r
}

/// `cudaSetDevice`: recorded, and the thread's current device is tracked for GPU-side records.
#[no_mangle]
pub unsafe extern "C" fn cudaSetDevice(device: c_int) -> c_int {
    let real = real_or!(cudaSetDevice, fn(c_int) -> c_int; RT_ERR_NO_DRIVER);
    let call = started(begin, || Work::Plain { arg: device as u64 });
    // SAFETY: forwarding the caller's argument unchanged to the real function.
    let r = unsafe { real(device) };
    if r == 0 && device >= 0 {
        ffi_guard((), || set_current_device(device as u32));
    }
    if let Some((c, work)) = call {
        c.finish(ApiDomain::Runtime, &cudaSetDevice::NAME, r, &work);
    }
    r
}

/// `cudaKernel_t` of a library kernel: recorded, and the handle named after the kernel (interned now:
/// the caller's string may not outlive the call), so launches through it are named. Followed with
/// the window closed too: the launches may come when it is open.
#[no_mangle]
pub unsafe extern "C" fn cudaLibraryGetKernel(kernel: *mut Handle, library: Handle, name: *const c_char) -> c_int {
    let real = real_or!(cudaLibraryGetKernel, fn(*mut Handle, Handle, *const c_char) -> c_int; RT_ERR_NO_DRIVER);
    call_tracked(
        true,
        &cudaLibraryGetKernel::NAME,
        Work::Plain { arg: 0 },
        // SAFETY: forwarding the caller's arguments unchanged to the real function.
        || unsafe { real(kernel, library, name) },
        |r| {
            if r == 0 && !kernel.is_null() {
                // SAFETY: on success the runtime stored the handle into the caller's non-null out-pointer;
                // `name` is the caller's NUL-terminated kernel name, valid for the call.
                unsafe { kernel_names::register_id(*kernel, crate::record::interning::intern_cstr(name)) };
            }
        },
    )
}
