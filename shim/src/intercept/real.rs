//! Resolving the real functions behind the interposers, and the table entry ([`Hook`]) that pairs an
//! exported wrapper with its real function.
//!
//! Every wrapper owns a [`RealFn`] slot: an atomic pointer filled on first use from
//! `dlsym(RTLD_NEXT, name)`, or earlier by the `dlsym` / `cuGetProcAddress` hooks when a program
//! resolves the symbol itself from a library handle (late `dlopen` with `RTLD_LOCAL`, driver entry
//! points). A slot never holds a pointer into libtprof itself, so a wrapper can never call itself.
//!
//! Lookups go through glibc's real `dlsym` (`base::dynamic_loader`), never through our own hook.

use std::ffi::{c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};

use crate::base::dynamic_loader::{is_own, next, symbol_in_local_objects};

/// One exported wrapper, as the `dlsym` and entry-point hooks see it.
pub struct Hook {
    pub name: &'static CStr,
    pub real: &'static RealFn,
    pub wrapper: *const (),
}

// SAFETY: `wrapper` is the address of a function (immutable code); the struct is read-only.
unsafe impl Sync for Hook {}

/// A `&'static CStr` from a literal with its NUL (const context).
pub const fn cstr(bytes: &'static [u8]) -> &'static CStr {
    match CStr::from_bytes_with_nul(bytes) {
        Ok(c) => c,
        Err(_) => panic!("not a C string literal"),
    }
}

/// `addr` unchanged, but unknown to the optimiser: a call through it is an indirect call, which
/// the compiler turns into a jump where it would not for a direct call (arguments on the stack).
#[inline(always)]
pub fn opaque_address(addr: *const ()) -> *const () {
    let mut a = addr;
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    // SAFETY: an empty instruction sequence that names the register holding `a`: no memory written,
    // no stack or flags touched, the value unchanged (`readonly`, not `nomem`: `a` is a pointer).
    unsafe {
        std::arch::asm!("/* {0} */", inout(reg) a, options(pure, readonly, nostack, preserves_flags))
    };
    a
}

/// The real function behind one wrapper.
pub struct RealFn {
    name: &'static CStr,
    ptr: AtomicPtr<c_void>,
    warned: AtomicBool,
}

impl RealFn {
    pub const fn new(name: &'static CStr) -> RealFn {
        RealFn { name, ptr: AtomicPtr::new(null_mut()), warned: AtomicBool::new(false) }
    }

    /// The real function once resolved, else null (no resolution: the wrappers' closed-window path,
    /// which takes the full path when it is null).
    #[inline(always)]
    pub fn resolved(&self) -> *mut c_void {
        self.ptr.load(Ordering::Acquire)
    }

    /// The exported symbol name this slot stands for.
    pub fn name(&self) -> &'static CStr {
        self.name
    }

    /// The real function, resolving it on first use; None when no library defines it.
    #[inline]
    pub fn get(&self) -> Option<*mut c_void> {
        let p = self.ptr.load(Ordering::Acquire);
        if !p.is_null() {
            return Some(p);
        }
        self.resolve()
    }

    /// The first resolution (behind the panic fence: it runs inside every wrapper).
    #[cold]
    fn resolve(&self) -> Option<*mut c_void> {
        crate::base::panic_fence::ffi_guard(None, || self.look_up())
    }

    fn look_up(&self) -> Option<*mut c_void> {
        let mut p = next(self.name);
        if p.is_null() || is_own(p) {
            p = symbol_in_local_objects(self.name);
        }
        if p.is_null() || is_own(p) {
            return None;
        }
        match self.ptr.compare_exchange(null_mut(), p, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => Some(p),
            Err(existing) => Some(existing),
        }
    }

    /// Offers a real pointer found by a hook (`dlsym` on a handle, `cuGetProcAddress`): kept if the
    /// slot is still empty and the pointer is not ours. Returns true when the slot now holds a function.
    pub fn offer(&self, p: *mut c_void) -> bool {
        if !self.ptr.load(Ordering::Acquire).is_null() {
            return true;
        }
        if p.is_null() || is_own(p) {
            return false;
        }
        let _ = self.ptr.compare_exchange(null_mut(), p, Ordering::AcqRel, Ordering::Acquire);
        true
    }

    /// The value a wrapper returns when the real function is missing: warns once, returns `err`.
    #[cold]
    pub fn missing<T>(&self, err: T) -> T {
        if !self.warned.swap(true, Ordering::Relaxed) {
            crate::base::panic_fence::ffi_guard((), || {
                let name = self.name.to_str().unwrap_or("?");
                crate::base::messages::warn_line(&format!(
                    "{name} was called but no CUDA library defines it; returning an error (as without a driver)"
                ));
            });
        }
        err
    }
}

/// cudaErrorInsufficientDriver: what the runtime returns when the driver is missing.
pub const RT_ERR_NO_DRIVER: c_int = 35;
/// CUDA_ERROR_NOT_FOUND ("named symbol not found"): a driver entry point that does not exist.
pub const DRV_ERR_NOT_FOUND: c_int = 500;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_dlsym_is_glibc_and_resolves_libc_symbols() {
        assert!(!crate::base::dynamic_loader::glibc_dlsym().is_null());
        assert!(!next(c"malloc").is_null());
        let slot = RealFn::new(c"no_such_function_tprof");
        assert!(slot.get().is_none());
        assert_eq!(slot.missing(5), 5);
    }

    #[test]
    fn own_pointers_are_refused() {
        let slot = RealFn::new(c"no_such_function_tprof2");
        assert!(!slot.offer(RealFn::missing::<()> as *mut c_void));
        assert!(slot.get().is_none());
    }
}
