//! Driver entry points resolved at run time: `cuGetProcAddress[_v2]` and the runtime's
//! `cudaGetDriverEntryPoint[ByVersion][_ptsz]`. Statically linked runtimes, NCCL and cuBLAS get
//! driver functions this way, never through the dynamic linker.
//!
//! Pattern (CUDA_FACTS §5): call the real resolver; if it returned a function we wrap, give the real
//! pointer to that wrapper's slot and hand back the wrapper. Which wrapper depends on the ABI the
//! caller asked for: the symbol's version (`cuMemAlloc` below 3020 is the old 32-bit one: not ours)
//! and the stream flavour (`_ptsz` / `_ptds` when `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`,
//! or when the returned pointer is the driver's exported per-thread twin).

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};

use super::real::{self, DRV_ERR_NOT_FOUND, RT_ERR_NO_DRIVER};
use super::{hook_named, Hook};

/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM` / `cudaEnablePerThreadDefaultStream`.
const PER_THREAD: u64 = 2;
/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM` / `cudaEnableLegacyStream`.
const LEGACY: u64 = 1;

/// One wrapped driver entry point: base name as given to `cuGetProcAddress`, the lowest CUDA
/// version whose ABI our wrapper has, and the exported names of the legacy and per-thread variants.
struct Entry {
    base: &'static [u8],
    min_version: c_int,
    legacy: &'static [u8],
    per_thread: Option<&'static [u8]>,
}

const fn e(base: &'static [u8], min_version: c_int, legacy: &'static [u8], per_thread: Option<&'static [u8]>) -> Entry {
    Entry { base, min_version, legacy, per_thread }
}

/// Ordered: for a base name the first entry whose `min_version` the caller's version reaches wins.
static ENTRIES: &[Entry] = &[
    e(b"cuGetProcAddress", 12000, b"cuGetProcAddress_v2", None),
    e(b"cuGetProcAddress", 11030, b"cuGetProcAddress", None),
    e(b"cuInit", 2000, b"cuInit", None),
    e(b"cuLaunchKernel", 4000, b"cuLaunchKernel", Some(b"cuLaunchKernel_ptsz")),
    e(b"cuLaunchKernelEx", 11060, b"cuLaunchKernelEx", Some(b"cuLaunchKernelEx_ptsz")),
    e(b"cuLaunchCooperativeKernel", 9000, b"cuLaunchCooperativeKernel", Some(b"cuLaunchCooperativeKernel_ptsz")),
    e(b"cuGraphLaunch", 10000, b"cuGraphLaunch", Some(b"cuGraphLaunch_ptsz")),
    e(b"cuModuleGetFunction", 2000, b"cuModuleGetFunction", None),
    e(b"cuLibraryGetKernel", 12000, b"cuLibraryGetKernel", None),
    e(b"cuKernelGetFunction", 12000, b"cuKernelGetFunction", None),
    e(b"cuMemAlloc", 3020, b"cuMemAlloc_v2", None),
    e(b"cuMemFree", 3020, b"cuMemFree_v2", None),
    e(b"cuMemAllocHost", 3020, b"cuMemAllocHost_v2", None),
    e(b"cuMemHostAlloc", 2020, b"cuMemHostAlloc", None),
    e(b"cuMemFreeHost", 2000, b"cuMemFreeHost", None),
    e(b"cuMemAllocManaged", 6000, b"cuMemAllocManaged", None),
    e(b"cuMemAllocAsync", 11020, b"cuMemAllocAsync", Some(b"cuMemAllocAsync_ptsz")),
    e(b"cuMemFreeAsync", 11020, b"cuMemFreeAsync", Some(b"cuMemFreeAsync_ptsz")),
    e(b"cuMemcpy", 4000, b"cuMemcpy", Some(b"cuMemcpy_ptds")),
    e(b"cuMemcpyAsync", 4000, b"cuMemcpyAsync", Some(b"cuMemcpyAsync_ptsz")),
    e(b"cuMemcpyHtoD", 3020, b"cuMemcpyHtoD_v2", Some(b"cuMemcpyHtoD_v2_ptds")),
    e(b"cuMemcpyDtoH", 3020, b"cuMemcpyDtoH_v2", Some(b"cuMemcpyDtoH_v2_ptds")),
    e(b"cuMemcpyDtoD", 3020, b"cuMemcpyDtoD_v2", Some(b"cuMemcpyDtoD_v2_ptds")),
    e(b"cuMemcpyHtoDAsync", 3020, b"cuMemcpyHtoDAsync_v2", Some(b"cuMemcpyHtoDAsync_v2_ptsz")),
    e(b"cuMemcpyDtoHAsync", 3020, b"cuMemcpyDtoHAsync_v2", Some(b"cuMemcpyDtoHAsync_v2_ptsz")),
    e(b"cuMemcpyDtoDAsync", 3020, b"cuMemcpyDtoDAsync_v2", Some(b"cuMemcpyDtoDAsync_v2_ptsz")),
    e(b"cuMemcpyPeer", 4000, b"cuMemcpyPeer", Some(b"cuMemcpyPeer_ptds")),
    e(b"cuMemcpyPeerAsync", 4000, b"cuMemcpyPeerAsync", Some(b"cuMemcpyPeerAsync_ptsz")),
    e(b"cuMemsetD8", 3020, b"cuMemsetD8_v2", Some(b"cuMemsetD8_v2_ptds")),
    e(b"cuMemsetD16", 3020, b"cuMemsetD16_v2", Some(b"cuMemsetD16_v2_ptds")),
    e(b"cuMemsetD32", 3020, b"cuMemsetD32_v2", Some(b"cuMemsetD32_v2_ptds")),
    e(b"cuMemsetD8Async", 3020, b"cuMemsetD8Async", Some(b"cuMemsetD8Async_ptsz")),
    e(b"cuMemsetD16Async", 3020, b"cuMemsetD16Async", Some(b"cuMemsetD16Async_ptsz")),
    e(b"cuMemsetD32Async", 3020, b"cuMemsetD32Async", Some(b"cuMemsetD32Async_ptsz")),
    e(b"cuCtxSynchronize", 2000, b"cuCtxSynchronize", None),
    e(b"cuStreamSynchronize", 2000, b"cuStreamSynchronize", Some(b"cuStreamSynchronize_ptsz")),
    e(b"cuEventSynchronize", 2000, b"cuEventSynchronize", None),
    e(b"cuStreamWaitEvent", 2000, b"cuStreamWaitEvent", Some(b"cuStreamWaitEvent_ptsz")),
];

/// The wrapper to hand out for a resolved driver symbol, or None to hand back the real pointer.
fn select(symbol: &[u8], version: c_int, flags: u64, real_ptr: *mut c_void) -> Option<&'static Hook> {
    let entry = ENTRIES.iter().find(|e| e.base == symbol && version >= e.min_version)?;
    let per_thread = match entry.per_thread {
        None => false,
        Some(pt) => {
            // Prefer identity with the driver's exported twins; fall back to the flags.
            let hook_pt = hook_named(pt);
            let hook_legacy = hook_named(entry.legacy);
            let is_export_of = |h: Option<&'static Hook>| {
                let p = h.map(|h| real::next(h.name)).unwrap_or(std::ptr::null_mut());
                !p.is_null() && p == real_ptr
            };
            if is_export_of(hook_pt) {
                true
            } else if is_export_of(hook_legacy) {
                false
            } else {
                flags & PER_THREAD != 0 && flags & LEGACY == 0
            }
        }
    };
    let name = if per_thread { entry.per_thread? } else { entry.legacy };
    hook_named(name)
}

/// Replaces `*pfn` by our wrapper when we wrap it. Never panics; no-op on anything unexpected.
///
/// # Safety
/// `symbol` NULL or NUL-terminated; `pfn` NULL or the caller's out-pointer the resolver just filled.
unsafe fn substitute(symbol: *const c_char, pfn: *mut *mut c_void, version: c_int, flags: u64) {
    if symbol.is_null() || pfn.is_null() {
        return;
    }
    // SAFETY: the resolver succeeded, so `pfn` holds a pointer (maybe NULL) written by it.
    let real_ptr = unsafe { *pfn };
    if real_ptr.is_null() || real::is_own(real_ptr) {
        return;
    }
    // SAFETY: the caller's NUL-terminated symbol name.
    let symbol = unsafe { CStr::from_ptr(symbol) }.to_bytes();
    if let Some(hook) = select(symbol, version, flags, real_ptr) {
        if hook.real.offer(real_ptr) {
            // SAFETY: writing our wrapper (same C signature as the resolved function) to the caller's slot.
            unsafe { *pfn = hook.wrapper as *mut c_void };
        }
    }
}

super::slots!(
    cuGetProcAddress,
    cuGetProcAddress_v2,
    cudaGetDriverEntryPoint,
    cudaGetDriverEntryPoint_ptsz,
    cudaGetDriverEntryPointByVersion,
    cudaGetDriverEntryPointByVersion_ptsz,
);

macro_rules! hooks {
    ($($name:ident),*) => {
        /// The resolver hooks, for the `dlsym` hook (and `cuGetProcAddress("cuGetProcAddress")`).
        pub static HOOKS: &[Hook] = &[$(Hook {
            name: super::cstr(concat!(stringify!($name), "\0").as_bytes()),
            real: &$name::REAL,
            wrapper: $name as *const (),
        }),*];
    };
}
hooks!(
    cuGetProcAddress,
    cuGetProcAddress_v2,
    cudaGetDriverEntryPoint,
    cudaGetDriverEntryPoint_ptsz,
    cudaGetDriverEntryPointByVersion,
    cudaGetDriverEntryPointByVersion_ptsz
);

/// CUDA's own version for runtime entry-point queries that carry none (cudaGetDriverEntryPoint
/// resolves for the runtime's version; every runtime that has it is >= 11.3).
const RUNTIME_VERSION_FLOOR: c_int = 12000;

/// `cuGetProcAddress` (CUDA 11.3 ABI, 4 arguments).
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> c_int {
    let real =
        super::real_or!(cuGetProcAddress, fn(*const c_char, *mut *mut c_void, c_int, u64) -> c_int; DRV_ERR_NOT_FOUND);
    // SAFETY: forwarding the caller's arguments unchanged to the real resolver.
    let r = unsafe { real(symbol, pfn, version, flags) };
    if r == 0 {
        // SAFETY: the resolver succeeded with these caller pointers.
        crate::guard::ffi_guard((), || unsafe { substitute(symbol, pfn, version, flags) });
    }
    r
}

/// `cuGetProcAddress_v2` (CUDA 12 ABI, with the symbol status).
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress_v2(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
    status: *mut c_int,
) -> c_int {
    let real = super::real_or!(cuGetProcAddress_v2, fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_int;
        DRV_ERR_NOT_FOUND);
    // SAFETY: forwarding the caller's arguments unchanged to the real resolver.
    let r = unsafe { real(symbol, pfn, version, flags, status) };
    if r == 0 {
        // SAFETY: the resolver succeeded with these caller pointers.
        crate::guard::ffi_guard((), || unsafe { substitute(symbol, pfn, version, flags) });
    }
    r
}

macro_rules! rt_entry_point {
    ($name:ident, default_flags = $default:expr) => {
        /// Runtime query for a driver entry point (CUDA 12 ABI: flags, status).
        #[no_mangle]
        pub unsafe extern "C" fn $name(symbol: *const c_char, pfn: *mut *mut c_void, flags: c_ulonglong, status: *mut c_int) -> c_int {
            let real = super::real_or!($name, fn(*const c_char, *mut *mut c_void, c_ulonglong, *mut c_int) -> c_int;
                RT_ERR_NO_DRIVER);
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            let r = unsafe { real(symbol, pfn, flags, status) };
            if r == 0 {
                let flags = if flags == 0 { $default } else { flags };
                // SAFETY: the query succeeded with these caller pointers.
                crate::guard::ffi_guard((), || unsafe { substitute(symbol, pfn, RUNTIME_VERSION_FLOOR, flags) });
            }
            r
        }
    };
}

macro_rules! rt_entry_point_by_version {
    ($name:ident, default_flags = $default:expr) => {
        /// Runtime query for a driver entry point of a given CUDA version.
        #[no_mangle]
        pub unsafe extern "C" fn $name(
            symbol: *const c_char,
            pfn: *mut *mut c_void,
            version: c_uint,
            flags: c_ulonglong,
            status: *mut c_int,
        ) -> c_int {
            let real = super::real_or!($name, fn(*const c_char, *mut *mut c_void, c_uint, c_ulonglong, *mut c_int) -> c_int;
                RT_ERR_NO_DRIVER);
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            let r = unsafe { real(symbol, pfn, version, flags, status) };
            if r == 0 {
                let flags = if flags == 0 { $default } else { flags };
                // SAFETY: the query succeeded with these caller pointers.
                crate::guard::ffi_guard((), || unsafe { substitute(symbol, pfn, version as c_int, flags) });
            }
            r
        }
    };
}

rt_entry_point!(cudaGetDriverEntryPoint, default_flags = LEGACY);
rt_entry_point!(cudaGetDriverEntryPoint_ptsz, default_flags = PER_THREAD);
rt_entry_point_by_version!(cudaGetDriverEntryPointByVersion, default_flags = LEGACY);
rt_entry_point_by_version!(cudaGetDriverEntryPointByVersion_ptsz, default_flags = PER_THREAD);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_flavours_pick_the_right_wrapper() {
        let null = std::ptr::null_mut();
        assert!(select(b"cuMemAlloc", 2000, 0, null).is_none(), "pre-3.2 ABI is not ours");
        assert_eq!(select(b"cuMemAlloc", 12000, 0, null).unwrap().name, c"cuMemAlloc_v2");
        assert_eq!(select(b"cuLaunchKernel", 12000, PER_THREAD, null).unwrap().name, c"cuLaunchKernel_ptsz");
        assert_eq!(select(b"cuLaunchKernel", 12000, LEGACY, null).unwrap().name, c"cuLaunchKernel");
        assert_eq!(select(b"cuMemcpyHtoD", 12000, PER_THREAD, null).unwrap().name, c"cuMemcpyHtoD_v2_ptds");
        assert_eq!(select(b"cuGetProcAddress", 12000, 0, null).unwrap().name, c"cuGetProcAddress_v2");
        assert_eq!(select(b"cuGetProcAddress", 11080, 0, null).unwrap().name, c"cuGetProcAddress");
        assert!(select(b"cuStreamCreate", 12000, 0, null).is_none());
    }

    #[test]
    fn every_entry_names_an_existing_wrapper() {
        for e in ENTRIES {
            assert!(hook_named(e.legacy).is_some(), "{:?}", std::str::from_utf8(e.legacy));
            if let Some(pt) = e.per_thread {
                assert!(hook_named(pt).is_some(), "{:?}", std::str::from_utf8(pt));
            }
        }
    }
}
