//! Driver entry points resolved at run time: `cuGetProcAddress[_v2]` and the runtime's
//! `cudaGetDriverEntryPoint[ByVersion][_ptsz]`. Statically linked runtimes, NCCL and cuBLAS get
//! driver functions this way, never through the dynamic linker.
//!
//! Pattern (CUDA_FACTS §5): call the real resolver; if it returned a function we wrap, give the real
//! pointer to that wrapper's slot and hand back the wrapper. Each ABI of a base name has its own
//! wrapper and slot (`cuCtxSynchronize(void)` up to 13.0, `cuCtxSynchronize_v2(CUcontext)` from it):
//! the returned pointer's identity with a driver export decides which, else the version the caller
//! asked for (`cuMemAlloc` below 3020 is the old 32-bit one: not ours; `cudaGetDriverEntryPoint`
//! asks for the runtime's version) and the stream flavour (`_ptsz` / `_ptds` when
//! `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM`).
//!
//! The program's own `cuGetProcAddress` calls are recorded as `Api` records (the runtime's, made
//! inside a recorded runtime call, are not: the reentrancy guard).

use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void, CStr};
use std::sync::atomic::{AtomicI32, Ordering};

use tprof_format::ApiDomain;

use super::api_call::{begin, started, Work};
use super::hook_tables::cuda_wrappers;
use super::real::{cstr, Hook};
use super::real::{DRV_ERR_NOT_FOUND, RT_ERR_NO_DRIVER};
use crate::base::dynamic_loader::{is_own, DefiningObject};

/// `CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM` / `cudaEnablePerThreadDefaultStream`.
const PER_THREAD: u64 = 2;
/// `CU_GET_PROC_ADDRESS_LEGACY_STREAM` / `cudaEnableLegacyStream`.
const LEGACY: u64 = 1;

/// One wrapped driver entry point: one ABI of a base name as given to `cuGetProcAddress`.
///
/// `cudaTypedefs.h` names each ABI `PFN_<base>_v<version>`: an ABI is valid from its version up to
/// the next `PFN_<base>_v…` version (`cuCtxSynchronize`: `(void)` from 2000, `(CUcontext)` from 13000),
/// and each ABI has its own exported function and so its own wrapper and real slot.
pub(crate) struct Entry {
    pub base: &'static [u8],
    /// First CUDA version (1000 * major + 10 * minor) with this ABI.
    pub min_version: c_int,
    /// First version with the next ABI of `base` (exclusive bound), None while this one is the newest.
    pub until_version: Option<c_int>,
    /// Exported name of the legacy-stream function (and of our wrapper).
    pub legacy: &'static [u8],
    /// Exported name of the per-thread default stream twin (`_ptsz` / `_ptds`), if it has one.
    pub per_thread: Option<&'static [u8]>,
    /// Parameter count of the ABI; both wrappers have it (checked when this table compiles), and the
    /// header check compares it with the PFN typedef's.
    #[cfg_attr(not(test), allow(dead_code))]
    pub arity: usize,
}

impl Entry {
    fn covers(&self, version: c_int) -> bool {
        version >= self.min_version && self.until_version.is_none_or(|u| version < u)
    }
}

/// The type of an `extern "C"` wrapper with `n` parameters returning `CUresult`.
macro_rules! c_fn {
    (0) => { unsafe extern "C" fn() -> c_int };
    (1) => { unsafe extern "C" fn(_) -> c_int };
    (2) => { unsafe extern "C" fn(_, _) -> c_int };
    (3) => { unsafe extern "C" fn(_, _, _) -> c_int };
    (4) => { unsafe extern "C" fn(_, _, _, _) -> c_int };
    (5) => { unsafe extern "C" fn(_, _, _, _, _) -> c_int };
    (6) => { unsafe extern "C" fn(_, _, _, _, _, _) -> c_int };
    (10) => { unsafe extern "C" fn(_, _, _, _, _, _, _, _, _, _) -> c_int };
    (11) => { unsafe extern "C" fn(_, _, _, _, _, _, _, _, _, _, _) -> c_int };
}

/// `base min..[until] (arity) => module::legacy_wrapper [| per_thread_wrapper];`
macro_rules! entries {
    ($($base:ident $min:literal .. $($until:literal)? ($arity:tt) => $module:ident :: $legacy:ident $(| $pt:ident)?;)*) => {
        pub(crate) static ENTRIES: &[Entry] = &[$(Entry {
            base: stringify!($base).as_bytes(),
            min_version: $min,
            until_version: entries!(@opt $($until)?),
            legacy: stringify!($legacy).as_bytes(),
            per_thread: entries!(@opt $(stringify!($pt).as_bytes())?),
            arity: $arity,
        }),*];
        // Every wrapper takes the number of parameters its entry claims: a wrong count does not compile.
        const _: () = {$(
            let _: c_fn!($arity) = super::$module::$legacy;
            $(let _: c_fn!($arity) = super::$module::$pt;)?
        )*};
    };
    (@opt) => { None };
    (@opt $v:expr) => { Some($v) };
}

entries! {
    cuGetProcAddress 11030..12000 (4) => proc_address::cuGetProcAddress;
    cuGetProcAddress 12000.. (5) => proc_address::cuGetProcAddress_v2;
    cuInit 2000.. (1) => cuda_drv::cuInit;
    cuDeviceGet 2000.. (2) => cuda_drv::cuDeviceGet;
    cuDevicePrimaryCtxRetain 7000.. (2) => cuda_drv::cuDevicePrimaryCtxRetain;
    cuCtxSetCurrent 4000.. (1) => cuda_drv::cuCtxSetCurrent;
    cuModuleLoadData 2000.. (2) => cuda_drv::cuModuleLoadData;
    cuModuleLoadDataEx 2010.. (5) => cuda_drv::cuModuleLoadDataEx;
    cuModuleUnload 2000.. (1) => cuda_drv::cuModuleUnload;
    cuStreamCreate 2000.. (2) => cuda_drv::cuStreamCreate;
    cuStreamDestroy 4000.. (1) => cuda_drv::cuStreamDestroy_v2;
    cuStreamQuery 2000.. (1) => cuda_drv::cuStreamQuery | cuStreamQuery_ptsz;
    cuEventQuery 2000.. (1) => cuda_drv::cuEventQuery;
    cuLaunchKernel 4000.. (11) => cuda_drv::cuLaunchKernel | cuLaunchKernel_ptsz;
    cuLaunchKernelEx 11060.. (4) => cuda_drv::cuLaunchKernelEx | cuLaunchKernelEx_ptsz;
    cuLaunchCooperativeKernel 9000.. (10) => cuda_drv::cuLaunchCooperativeKernel | cuLaunchCooperativeKernel_ptsz;
    cuGraphLaunch 10000.. (2) => cuda_drv::cuGraphLaunch | cuGraphLaunch_ptsz;
    cuModuleGetFunction 2000.. (3) => cuda_drv::cuModuleGetFunction;
    cuLibraryGetKernel 12000.. (3) => cuda_drv::cuLibraryGetKernel;
    cuKernelGetFunction 12000.. (2) => cuda_drv::cuKernelGetFunction;
    cuMemAlloc 3020.. (2) => cuda_drv::cuMemAlloc_v2;
    cuMemFree 3020.. (1) => cuda_drv::cuMemFree_v2;
    cuMemAllocHost 3020.. (2) => cuda_drv::cuMemAllocHost_v2;
    cuMemHostAlloc 2020.. (3) => cuda_drv::cuMemHostAlloc;
    cuMemFreeHost 2000.. (1) => cuda_drv::cuMemFreeHost;
    cuMemAllocManaged 6000.. (3) => cuda_drv::cuMemAllocManaged;
    cuMemAllocAsync 11020.. (3) => cuda_drv::cuMemAllocAsync | cuMemAllocAsync_ptsz;
    cuMemFreeAsync 11020.. (2) => cuda_drv::cuMemFreeAsync | cuMemFreeAsync_ptsz;
    cuMemcpy 4000.. (3) => cuda_drv::cuMemcpy | cuMemcpy_ptds;
    cuMemcpyAsync 4000.. (4) => cuda_drv::cuMemcpyAsync | cuMemcpyAsync_ptsz;
    cuMemcpyHtoD 3020.. (3) => cuda_drv::cuMemcpyHtoD_v2 | cuMemcpyHtoD_v2_ptds;
    cuMemcpyDtoH 3020.. (3) => cuda_drv::cuMemcpyDtoH_v2 | cuMemcpyDtoH_v2_ptds;
    cuMemcpyDtoD 3020.. (3) => cuda_drv::cuMemcpyDtoD_v2 | cuMemcpyDtoD_v2_ptds;
    cuMemcpyHtoDAsync 3020.. (4) => cuda_drv::cuMemcpyHtoDAsync_v2 | cuMemcpyHtoDAsync_v2_ptsz;
    cuMemcpyDtoHAsync 3020.. (4) => cuda_drv::cuMemcpyDtoHAsync_v2 | cuMemcpyDtoHAsync_v2_ptsz;
    cuMemcpyDtoDAsync 3020.. (4) => cuda_drv::cuMemcpyDtoDAsync_v2 | cuMemcpyDtoDAsync_v2_ptsz;
    cuMemcpyPeer 4000.. (5) => cuda_drv::cuMemcpyPeer | cuMemcpyPeer_ptds;
    cuMemcpyPeerAsync 4000.. (6) => cuda_drv::cuMemcpyPeerAsync | cuMemcpyPeerAsync_ptsz;
    cuMemsetD8 3020.. (3) => cuda_drv::cuMemsetD8_v2 | cuMemsetD8_v2_ptds;
    cuMemsetD16 3020.. (3) => cuda_drv::cuMemsetD16_v2 | cuMemsetD16_v2_ptds;
    cuMemsetD32 3020.. (3) => cuda_drv::cuMemsetD32_v2 | cuMemsetD32_v2_ptds;
    cuMemsetD8Async 3020.. (4) => cuda_drv::cuMemsetD8Async | cuMemsetD8Async_ptsz;
    cuMemsetD16Async 3020.. (4) => cuda_drv::cuMemsetD16Async | cuMemsetD16Async_ptsz;
    cuMemsetD32Async 3020.. (4) => cuda_drv::cuMemsetD32Async | cuMemsetD32Async_ptsz;
    cuCtxSynchronize 2000..13000 (0) => cuda_drv::cuCtxSynchronize;
    cuCtxSynchronize 13000.. (1) => cuda_drv::cuCtxSynchronize_v2;
    cuStreamSynchronize 2000.. (1) => cuda_drv::cuStreamSynchronize | cuStreamSynchronize_ptsz;
    cuEventSynchronize 2000.. (1) => cuda_drv::cuEventSynchronize;
    cuStreamWaitEvent 3020.. (3) => cuda_drv::cuStreamWaitEvent | cuStreamWaitEvent_ptsz;
    cuMemAddressReserve 10020.. (5) => cuda_vmm::cuMemAddressReserve;
    cuMemAddressFree 10020.. (2) => cuda_vmm::cuMemAddressFree;
    cuMemCreate 10020.. (4) => cuda_vmm::cuMemCreate;
    cuMemRelease 10020.. (1) => cuda_vmm::cuMemRelease;
    cuMemMap 10020.. (5) => cuda_vmm::cuMemMap;
    cuMemUnmap 10020.. (2) => cuda_vmm::cuMemUnmap;
    cuMemSetAccess 10020.. (4) => cuda_vmm::cuMemSetAccess;
    cuMemRetainAllocationHandle 11000.. (2) => cuda_vmm::cuMemRetainAllocationHandle;
}

/// The wrapper to hand out for a resolved driver symbol, or None to hand back the real pointer.
///
/// The pointer itself decides first: when it is the driver's export of one of the names we wrap for
/// `symbol` (`cuCtxSynchronize_v2`, `cuLaunchKernel_ptsz`), that name's wrapper has its ABI, whatever
/// version the caller gave. Otherwise the caller's version (asked for only then) picks the ABI and
/// the flags the flavour.
fn select(symbol: &[u8], version: impl FnOnce() -> c_int, flags: u64, real_ptr: *mut c_void) -> Option<&'static Hook> {
    let mut candidates = ENTRIES.iter().filter(|e| e.base == symbol).peekable();
    candidates.peek()?;
    if let Some(object) = DefiningObject::of(real_ptr) {
        for e in candidates {
            for name in std::iter::once(e.legacy).chain(e.per_thread) {
                if let Some(hook) = hook_named(name) {
                    if object.symbol(hook.name) == real_ptr {
                        return Some(hook);
                    }
                }
            }
        }
    }
    let version = version();
    let entry = ENTRIES.iter().find(|e| e.base == symbol && e.covers(version))?;
    let per_thread = flags & PER_THREAD != 0 && flags & LEGACY == 0;
    let name = match entry.per_thread {
        Some(pt) if per_thread => pt,
        _ => entry.legacy,
    };
    hook_named(name)
}

/// Replaces `*pfn` by our wrapper when we wrap it. Never panics; no-op on anything unexpected.
///
/// # Safety
/// `symbol` NULL or NUL-terminated; `pfn` NULL or the caller's out-pointer the resolver just filled.
unsafe fn substitute(symbol: *const c_char, pfn: *mut *mut c_void, version: impl FnOnce() -> c_int, flags: u64) {
    if symbol.is_null() || pfn.is_null() {
        return;
    }
    // SAFETY: the resolver succeeded, so `pfn` holds a pointer (maybe NULL) written by it.
    let real_ptr = unsafe { *pfn };
    if real_ptr.is_null() || is_own(real_ptr) {
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

super::api_call::slots!(
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
            name: cstr(concat!(stringify!($name), "\0").as_bytes()),
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

/// The wrapper exported under `name`, with its real slot: a CUDA runtime or driver wrapper, or one of
/// the resolvers below.
pub fn hook_named(name: &[u8]) -> Option<&'static Hook> {
    cuda_wrappers().chain(HOOKS.iter()).find(|h| h.name.to_bytes() == name)
}

/// The version assumed for `cudaGetDriverEntryPoint` when the runtime's own cannot be asked (every
/// runtime that has the call is >= 11.3; 12.0 is the oldest we support).
const RUNTIME_VERSION_FLOOR: c_int = 12000;

/// The CUDA version `cudaGetDriverEntryPoint` resolves symbols for: that of the runtime defining it
/// (its `cudaRuntimeGetVersion`), asked once per wrapper and kept in `cache`.
fn runtime_version(cache: &AtomicI32, real_fn: *mut c_void) -> c_int {
    let v = cache.load(Ordering::Relaxed);
    if v != 0 {
        return v;
    }
    let v = query_runtime_version(real_fn).unwrap_or(RUNTIME_VERSION_FLOOR);
    cache.store(v, Ordering::Relaxed);
    v
}

fn query_runtime_version(real_fn: *mut c_void) -> Option<c_int> {
    let object = DefiningObject::of(real_fn)?;
    let f = object.symbol(c"cudaRuntimeGetVersion");
    if f.is_null() || is_own(f) {
        return None;
    }
    type GetVersion = unsafe extern "C" fn(*mut c_int) -> c_int;
    // SAFETY: the runtime's own cudaRuntimeGetVersion, whose C signature is GetVersion.
    let f = unsafe { std::mem::transmute::<*mut c_void, GetVersion>(f) };
    let mut v: c_int = 0;
    // SAFETY: writes the version into our local; needs no initialisation of the runtime.
    let r = unsafe { f(&mut v) };
    (r == 0 && v > 0).then_some(v)
}

/// `cuGetProcAddress` (CUDA 11.3 ABI, 4 arguments).
#[no_mangle]
pub unsafe extern "C" fn cuGetProcAddress(
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    version: c_int,
    flags: u64,
) -> c_int {
    let real = super::api_call::real_or!(cuGetProcAddress, fn(*const c_char, *mut *mut c_void, c_int, u64) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin, || Work::Plain { arg: version as u64 });
    // SAFETY: forwarding the caller's arguments unchanged to the real resolver.
    let r = unsafe { real(symbol, pfn, version, flags) };
    if r == 0 {
        // SAFETY: the resolver succeeded with these caller pointers.
        crate::base::panic_fence::ffi_guard((), || unsafe { substitute(symbol, pfn, || version, flags) });
    }
    if let Some((call, work)) = call {
        call.finish(ApiDomain::Driver, &cuGetProcAddress::NAME, r, &work);
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
    let real = super::api_call::real_or!(cuGetProcAddress_v2, fn(*const c_char, *mut *mut c_void, c_int, u64, *mut c_int) -> c_int;
        DRV_ERR_NOT_FOUND);
    let call = started(begin, || Work::Plain { arg: version as u64 });
    // SAFETY: forwarding the caller's arguments unchanged to the real resolver.
    let r = unsafe { real(symbol, pfn, version, flags, status) };
    if r == 0 {
        // SAFETY: the resolver succeeded with these caller pointers.
        crate::base::panic_fence::ffi_guard((), || unsafe { substitute(symbol, pfn, || version, flags) });
    }
    if let Some((call, work)) = call {
        call.finish(ApiDomain::Driver, &cuGetProcAddress_v2::NAME, r, &work);
    }
    r
}

macro_rules! rt_entry_point {
    ($name:ident, default_flags = $default:expr) => {
        /// Runtime query for a driver entry point (CUDA 12 ABI: flags, status), for the runtime's version.
        #[no_mangle]
        pub unsafe extern "C" fn $name(symbol: *const c_char, pfn: *mut *mut c_void, flags: c_ulonglong, status: *mut c_int) -> c_int {
            static VERSION: AtomicI32 = AtomicI32::new(0);
            let real = super::api_call::real_or!($name, fn(*const c_char, *mut *mut c_void, c_ulonglong, *mut c_int) -> c_int;
                RT_ERR_NO_DRIVER);
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            let r = unsafe { real(symbol, pfn, flags, status) };
            if r == 0 {
                let flags = if flags == 0 { $default } else { flags };
                let version = || runtime_version(&VERSION, real as *mut c_void);
                // SAFETY: the query succeeded with these caller pointers.
                crate::base::panic_fence::ffi_guard((), || unsafe { substitute(symbol, pfn, version, flags) });
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
            let real = super::api_call::real_or!($name, fn(*const c_char, *mut *mut c_void, c_uint, c_ulonglong, *mut c_int) -> c_int;
                RT_ERR_NO_DRIVER);
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            let r = unsafe { real(symbol, pfn, version, flags, status) };
            if r == 0 {
                let flags = if flags == 0 { $default } else { flags };
                // SAFETY: the query succeeded with these caller pointers.
                crate::base::panic_fence::ffi_guard((), || unsafe { substitute(symbol, pfn, || version as c_int, flags) });
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
        assert!(select(b"cuMemAlloc", || 2000, 0, null).is_none(), "pre-3.2 ABI is not ours");
        assert_eq!(select(b"cuMemAlloc", || 12000, 0, null).unwrap().name, c"cuMemAlloc_v2");
        assert_eq!(select(b"cuLaunchKernel", || 12000, PER_THREAD, null).unwrap().name, c"cuLaunchKernel_ptsz");
        assert_eq!(select(b"cuLaunchKernel", || 12000, LEGACY, null).unwrap().name, c"cuLaunchKernel");
        assert_eq!(select(b"cuMemcpyHtoD", || 12000, PER_THREAD, null).unwrap().name, c"cuMemcpyHtoD_v2_ptds");
        assert_eq!(select(b"cuGetProcAddress", || 12000, 0, null).unwrap().name, c"cuGetProcAddress_v2");
        assert_eq!(select(b"cuGetProcAddress", || 11080, 0, null).unwrap().name, c"cuGetProcAddress");
        assert!(select(b"cuStreamGetPriority", || 12000, 0, null).is_none(), "not wrapped");
        assert_eq!(select(b"cuStreamCreate", || 12000, 0, null).unwrap().name, c"cuStreamCreate");
        assert_eq!(select(b"cuStreamDestroy", || 12000, 0, null).unwrap().name, c"cuStreamDestroy_v2");
        assert!(select(b"cuStreamDestroy", || 3020, 0, null).is_none(), "the 2.0 ABI is not ours");
        assert_eq!(select(b"cuStreamQuery", || 12000, PER_THREAD, null).unwrap().name, c"cuStreamQuery_ptsz");
        assert_eq!(select(b"cuCtxSynchronize", || 12080, 0, null).unwrap().name, c"cuCtxSynchronize");
        assert_eq!(select(b"cuCtxSynchronize", || 13000, 0, null).unwrap().name, c"cuCtxSynchronize_v2");
        assert!(select(b"cuStreamWaitEvent", || 2000, 0, null).is_none(), "no cuStreamWaitEvent before 3.2");
    }

    #[test]
    fn ranges_of_one_base_name_do_not_overlap() {
        for (i, a) in ENTRIES.iter().enumerate() {
            for b in ENTRIES[i + 1..].iter().filter(|b| b.base == a.base) {
                let disjoint = a.until_version.is_some_and(|u| u <= b.min_version)
                    || b.until_version.is_some_and(|u| u <= a.min_version);
                assert!(disjoint, "{:?}: overlapping version ranges", std::str::from_utf8(a.base));
            }
        }
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
