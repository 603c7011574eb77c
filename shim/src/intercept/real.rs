//! Resolving the real functions behind the interposers.
//!
//! Every wrapper owns a [`RealFn`] slot: an atomic pointer filled on first use from
//! `dlsym(RTLD_NEXT, name)`, or earlier by the `dlsym` / `cuGetProcAddress` hooks when a program
//! resolves the symbol itself from a library handle (late `dlopen` with `RTLD_LOCAL`, driver entry
//! points). A slot never holds a pointer into libtprof itself, so a wrapper can never call itself.
//!
//! `dlsym` is exported by libtprof (see `dlsym.rs`), so every `dlsym` call made from inside this
//! library would reach the hook: the code here calls glibc's real `dlsym`, found with `dlvsym`.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr::null_mut;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

static REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

/// glibc's `dlsym` (never the hook). Null only if glibc has neither symbol version (not seen on Linux).
pub fn real_dlsym_ptr() -> *mut c_void {
    let p = REAL_DLSYM.load(Ordering::Acquire);
    if !p.is_null() {
        return p;
    }
    for version in [c"GLIBC_2.34", c"GLIBC_2.2.5"] {
        // SAFETY: both strings are NUL-terminated literals; dlvsym does not call dlsym and takes no
        // lock we could hold, so this is safe at any point of process start.
        let p = unsafe { libc::dlvsym(libc::RTLD_NEXT, c"dlsym".as_ptr(), version.as_ptr()) };
        if !p.is_null() {
            REAL_DLSYM.store(p, Ordering::Release);
            return p;
        }
    }
    null_mut()
}

/// `dlsym(handle, name)` through glibc's real `dlsym`. With `RTLD_NEXT` the search starts after
/// libtprof.
///
/// # Safety
/// `handle` must be a handle from `dlopen`, `RTLD_DEFAULT` or `RTLD_NEXT`.
pub unsafe fn dlsym_real(handle: *mut c_void, name: &CStr) -> *mut c_void {
    let p = real_dlsym_ptr();
    if p.is_null() {
        return null_mut();
    }
    // SAFETY: `p` is glibc's dlsym, whose C signature is DlsymFn.
    let f: DlsymFn = unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(p) };
    // SAFETY: the caller guarantees the handle; `name` is NUL-terminated.
    unsafe { f(handle, name.as_ptr()) }
}

/// The definition of `name` that follows libtprof in the search order (the real library's).
pub fn next(name: &CStr) -> *mut c_void {
    // SAFETY: RTLD_NEXT is always a valid pseudo-handle.
    unsafe { dlsym_real(libc::RTLD_NEXT, name) }
}

/// Resolves `name` in a library opened by the caller (for the CUPTI / NCCL / NVTX loaders): the real
/// symbol from that library, never one of libtprof's wrappers.
///
/// # Safety
/// `handle` must be a live handle returned by `dlopen`.
pub unsafe fn symbol_in(handle: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: forwarded contract.
    let p = unsafe { dlsym_real(handle, name) };
    if is_own(p) {
        null_mut()
    } else {
        p
    }
}

/// The definition of `name` in a loaded object outside the global scope: libraries loaded with
/// `RTLD_LOCAL` (a Python extension module's CUDA dependencies) call our exports, which are global,
/// but `RTLD_NEXT` does not search them. Tries the loaded objects in load order, skipping libtprof.
/// Slow (allocates, takes the loader lock per object): only for a slot's first resolution.
fn in_local_objects(name: &CStr) -> *mut c_void {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid info pointer and our Vec as `data`.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<std::ffi::CString>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
            let path = unsafe { CStr::from_ptr(info.dlpi_name) };
            if !path.to_bytes().is_empty() {
                out.push(path.to_owned());
            }
        }
        0
    }
    let mut paths: Vec<std::ffi::CString> = Vec::new();
    // SAFETY: the callback only copies names into the Vec we pass. Nothing is opened while the
    // iteration holds the loader's lock (dlopen there could deadlock against another thread's dlopen).
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut paths as *mut Vec<std::ffi::CString>).cast()) };
    for path in &paths {
        // SAFETY: RTLD_NOLOAD only takes a reference to an object that is already loaded.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        // SAFETY: `h` is a live handle from dlopen.
        let p = unsafe { dlsym_real(h, name) };
        // SAFETY: dropping the reference RTLD_NOLOAD took; the object stays loaded.
        unsafe { libc::dlclose(h) };
        if !p.is_null() && !is_own(p) {
            return p;
        }
    }
    null_mut()
}

/// The shared object that defines a function pointer, opened again (`RTLD_NOLOAD`) to look up its
/// other symbols; closed on drop. For telling which exported function a resolver handed out.
pub struct DefiningObject(*mut c_void);

impl DefiningObject {
    /// The object containing `p`, or None (not in a loaded object, or not openable by its path).
    pub fn of(p: *const c_void) -> Option<DefiningObject> {
        let path = object_path(p)?;
        // SAFETY: `path` is the loader's NUL-terminated path of a loaded object; RTLD_NOLOAD only
        // takes a reference to it (never loads anything).
        let h = unsafe { libc::dlopen(path, libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        (!h.is_null()).then_some(DefiningObject(h))
    }

    /// The object's own definition of `name` (null if it has none).
    pub fn symbol(&self, name: &CStr) -> *mut c_void {
        // SAFETY: self.0 is a live handle from dlopen.
        unsafe { dlsym_real(self.0, name) }
    }
}

impl Drop for DefiningObject {
    fn drop(&mut self) {
        // SAFETY: drops the reference this value took with dlopen.
        unsafe { libc::dlclose(self.0) };
    }
}

/// Load address of libtprof (0 until first asked).
static OWN_BASE: AtomicUsize = AtomicUsize::new(0);

fn own_base() -> usize {
    let b = OWN_BASE.load(Ordering::Relaxed);
    if b != 0 {
        return b;
    }
    let b = object_base(own_base as *const c_void);
    OWN_BASE.store(b, Ordering::Relaxed);
    b
}

/// The path of the loaded object containing `addr` (the loader's string), None if there is none.
fn object_path(addr: *const c_void) -> Option<*const c_char> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: Dl_info is plain old data; an all-zero value is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads loader tables and writes into `info`, which we own.
    let ok = unsafe { libc::dladdr(addr, &mut info) };
    (ok != 0 && !info.dli_fname.is_null()).then_some(info.dli_fname)
}

fn object_base(addr: *const c_void) -> usize {
    // SAFETY: Dl_info is plain old data; an all-zero value is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads loader tables and writes into `info`, which we own.
    let ok = unsafe { libc::dladdr(addr, &mut info) };
    if ok == 0 {
        0
    } else {
        info.dli_fbase as usize
    }
}

/// True when `p` points into libtprof (one of our wrappers). Slow path only (takes the loader lock).
pub fn is_own(p: *const c_void) -> bool {
    !p.is_null() && object_base(p) == own_base() && own_base() != 0
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

    #[cold]
    fn resolve(&self) -> Option<*mut c_void> {
        let mut p = next(self.name);
        if p.is_null() || is_own(p) {
            p = in_local_objects(self.name);
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
            let name = self.name.to_str().unwrap_or("?");
            crate::state::warn_line(&format!(
                "{name} was called but no CUDA library defines it; returning an error (as without a driver)"
            ));
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
        assert!(!real_dlsym_ptr().is_null());
        assert!(!next(c"malloc").is_null());
        let slot = RealFn::new(c"no_such_function_tprof");
        assert!(slot.get().is_none());
        assert_eq!(slot.missing(5), 5);
    }

    #[test]
    fn own_pointers_are_refused() {
        let slot = RealFn::new(c"no_such_function_tprof2");
        assert!(!slot.offer(own_base as *mut c_void));
        assert!(slot.get().is_none());
    }
}
