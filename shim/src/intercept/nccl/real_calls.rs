//! Calling the real NCCL: resolving each wrapper's real function, running it marked as "inside NCCL"
//! ([`forward`]), and the [`nccl_wrappers!`] macro that writes the wrappers.

use std::cell::Cell;
use std::ffi::{c_int, c_void, CStr};

use crate::base::dynamic_loader;
use crate::base::panic_fence::ffi_guard;
use crate::intercept::real::RealFn;

/// `ncclComm_t`.
pub type Comm = *mut c_void;
/// `cudaStream_t`.
pub type Stream = *mut c_void;
/// `ncclResult_t`.
pub type R = c_int;

pub const NCCL_SUCCESS: R = 0;
/// What a wrapper returns when no library defines its real function.
pub const NCCL_SYSTEM_ERROR: R = 2;
pub const NCCL_IN_PROGRESS: R = 7;

/// The real NCCL function for `slot`: its pointer if known or found for the `ncclX` name, else the
/// next `pncclX` (NCCL's profiling alias of the same function), else either name in an already
/// loaded `libnccl.so.2` (a program that dlopened it RTLD_LOCAL).
pub fn resolve(slot: &RealFn, pname: &CStr) -> Option<*mut c_void> {
    if let Some(p) = slot.get() {
        return Some(p);
    }
    ffi_guard(None, || resolve_elsewhere(slot, pname))
}

/// [`resolve`] once the slot has found nothing for the `ncclX` name (behind the panic fence).
fn resolve_elsewhere(slot: &RealFn, pname: &CStr) -> Option<*mut c_void> {
    let p = dynamic_loader::next(pname);
    if slot.offer(p) {
        return slot.get();
    }
    for lib in [c"libnccl.so.2", c"libnccl.so"] {
        // SAFETY: RTLD_NOLOAD only returns a handle to an already loaded library (never loads one).
        let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        for name in [pname, slot.name()] {
            // SAFETY: `h` is a live handle from dlopen.
            let p = unsafe { dynamic_loader::symbol_in(h, name) };
            if slot.offer(p) {
                // SAFETY: drops the extra reference RTLD_NOLOAD took; the library stays loaded.
                unsafe { libc::dlclose(h) };
                return slot.get();
            }
        }
        // SAFETY: as above.
        unsafe { libc::dlclose(h) };
    }
    None
}

thread_local! {
    /// How deep this thread is inside real NCCL calls made by the interposers.
    static FORWARDING: Cell<u32> = const { Cell::new(0) };
}

/// Runs the real NCCL function `real`, marking this thread as inside it.
pub fn forward<T>(real: impl FnOnce() -> T) -> T {
    let _ = FORWARDING.try_with(|d| d.set(d.get() + 1));
    let r = real();
    let _ = FORWARDING.try_with(|d| d.set(d.get().saturating_sub(1)));
    r
}

/// True while this thread runs a real NCCL function called by one of the interposers: what NCCL
/// does now (e.g. create its NVTX domain) belongs to a library whose calls tprof records.
pub fn forwarding() -> bool {
    FORWARDING.try_with(|d| d.get() > 0).unwrap_or(false)
}

/// Defines NCCL wrappers, each with its real-function slot (a module named like the wrapper, which
/// also names NCCL's profiling alias `pnccl*`), and the file's `HOOKS` table for the `dlsym` hook.
/// The wrapper resolves its real function (missing: one warning, `ncclSystemError`), then either
/// records an NCCL call (`=> collective (op, comm, count, datatype, peer, stream);`, the description
/// evaluated behind the panic fence) or runs its own body with the real function bound to the name
/// given (`=> call (real) { ... };`).
///
/// ```ignore
/// nccl_wrappers! {
///     fn ncclSend(buf: *const c_void, count: usize, dt: c_int, peer: c_int, comm: Comm, stream: Stream) -> R
///         => collective (CollOp::Send, comm, count as u64, dt, peer, stream);
///     fn ncclGetUniqueId(id: *mut NcclUniqueId) -> R => call (real) { forward(|| unsafe { real(id) }) };
/// }
/// ```
macro_rules! nccl_wrappers {
    ($(
        $(#[$meta:meta])*
        fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> R => $how:ident $spec:tt $($body:block)?;
    )*) => {
        $(
            #[allow(non_snake_case)]
            #[doc(hidden)]
            pub mod $name {
                pub static REAL: $crate::intercept::real::RealFn = $crate::intercept::real::RealFn::new(
                    $crate::intercept::real::cstr(concat!(stringify!($name), "\0").as_bytes()),
                );
                /// NCCL's profiling alias of this function.
                pub const PROFILING_NAME: &std::ffi::CStr =
                    $crate::intercept::real::cstr(concat!("p", stringify!($name), "\0").as_bytes());
            }

            $(#[$meta])*
            #[no_mangle]
            #[allow(clippy::missing_safety_doc, clippy::too_many_arguments)]
            pub unsafe extern "C" fn $name($($arg: $ty),*) -> $crate::intercept::nccl::real_calls::R {
                type Real = unsafe extern "C" fn($($ty),*) -> $crate::intercept::nccl::real_calls::R;
                let Some(p) = $crate::intercept::nccl::real_calls::resolve(&$name::REAL, $name::PROFILING_NAME) else {
                    return $name::REAL.missing($crate::intercept::nccl::real_calls::NCCL_SYSTEM_ERROR);
                };
                // SAFETY: the symbol is the NCCL function of this name, whose C signature is `Real`.
                let real = unsafe { std::mem::transmute::<*mut std::ffi::c_void, Real>(p) };
                nccl_wrappers!(@run $how $spec $($body)? real ($($arg),*))
            }
        )*

        /// The wrappers of this file, for the `dlsym` hook (lookups on a libnccl handle).
        pub static HOOKS: &[$crate::intercept::real::Hook] = &[$(
            $crate::intercept::real::Hook {
                name: $crate::intercept::real::cstr(concat!(stringify!($name), "\0").as_bytes()),
                real: &$name::REAL,
                wrapper: $name as *const (),
            },
        )*];
    };
    // `record` and `Described` are those of the file that defines collectives (`collectives`).
    (@run collective $describe:tt $real:ident ($($arg:ident),*)) => {
        record(
            || Described::from($describe),
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            || unsafe { $real($($arg),*) },
        )
    };
    (@run call ($bound:ident) $body:block $real:ident ($($arg:ident),*)) => {{
        let $bound = $real;
        $body
    }};
}
pub(crate) use nccl_wrappers;
