//! The dynamic loader, as tprof needs it: glibc's real `dlsym`, symbol lookups that never return one
//! of tprof's own exports, the objects loaded in the process, and which object tprof itself is.
//!
//! libtprof exports a `dlsym` hook (`intercept::dlsym`), so every `dlsym` call made from inside this
//! library would reach the hook: the code here calls glibc's real `dlsym`, found with `dlvsym`.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::ptr::null_mut;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;

static REAL_DLSYM: AtomicPtr<c_void> = AtomicPtr::new(null_mut());

/// glibc's `dlsym` (never the hook). Null only if glibc has neither symbol version (not seen on Linux).
pub fn glibc_dlsym() -> *mut c_void {
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
pub unsafe fn symbol(handle: *mut c_void, name: &CStr) -> *mut c_void {
    let p = glibc_dlsym();
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
    unsafe { symbol(libc::RTLD_NEXT, name) }
}

/// Resolves `name` in a library opened by the caller (the CUPTI, NCCL and NVML loaders): the real
/// symbol from that library, never one of libtprof's wrappers.
///
/// # Safety
/// `handle` must be a live handle returned by `dlopen`.
pub unsafe fn symbol_in(handle: *mut c_void, name: &CStr) -> *mut c_void {
    // SAFETY: forwarded contract.
    let p = unsafe { symbol(handle, name) };
    if is_own(p) {
        null_mut()
    } else {
        p
    }
}

/// Paths of every object loaded in the process, in load order (`dl_iterate_phdr`; the main program,
/// which has no name there, is left out).
pub fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn each(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        super::panic_fence::ffi_guard(0, || {
            // SAFETY: dl_iterate_phdr passes a valid info pointer and our Vec as `data`.
            let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<PathBuf>)) };
            if !info.dlpi_name.is_null() {
                // SAFETY: dlpi_name is a NUL-terminated string owned by the loader.
                let name = unsafe { CStr::from_ptr(info.dlpi_name) };
                if !name.to_bytes().is_empty() {
                    out.push(PathBuf::from(std::ffi::OsString::from_vec(name.to_bytes().to_vec())));
                }
            }
            0
        })
    }
    let mut out: Vec<PathBuf> = Vec::new();
    // SAFETY: the callback only reads the info and appends to the Vec we pass. Nothing is opened while
    // the iteration holds the loader's lock (dlopen there could deadlock against another thread's dlopen).
    unsafe { libc::dl_iterate_phdr(Some(each), (&mut out as *mut Vec<PathBuf>).cast()) };
    out
}

/// The definition of `name` in a loaded object outside the global scope: libraries loaded with
/// `RTLD_LOCAL` (a Python extension module's CUDA dependencies) call our exports, which are global,
/// but `RTLD_NEXT` does not search them. Tries the loaded objects in load order, skipping libtprof.
/// Slow (allocates, takes the loader lock per object): only for a slot's first resolution.
pub fn symbol_in_local_objects(name: &CStr) -> *mut c_void {
    for path in loaded_objects() {
        let Ok(path) = CString::new(path.into_os_string().into_vec()) else { continue };
        // SAFETY: RTLD_NOLOAD only takes a reference to an object that is already loaded.
        let h = unsafe { libc::dlopen(path.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        // SAFETY: `h` is a live handle from dlopen.
        let p = unsafe { symbol(h, name) };
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
        let (_, path) = object_of(p)?;
        // SAFETY: `path` is the loader's NUL-terminated path of a loaded object; RTLD_NOLOAD only
        // takes a reference to it (never loads anything).
        let h = unsafe { libc::dlopen(path, libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        (!h.is_null()).then_some(DefiningObject(h))
    }

    /// The object's own definition of `name` (null if it has none).
    pub fn symbol(&self, name: &CStr) -> *mut c_void {
        // SAFETY: self.0 is a live handle from dlopen.
        unsafe { symbol(self.0, name) }
    }
}

impl Drop for DefiningObject {
    fn drop(&mut self) {
        // SAFETY: drops the reference this value took with dlopen.
        unsafe { libc::dlclose(self.0) };
    }
}

/// (load address, path) of the loaded object containing `addr` (the path is the loader's string),
/// None if there is none.
fn object_of(addr: *const c_void) -> Option<(usize, *const c_char)> {
    if addr.is_null() {
        return None;
    }
    // SAFETY: Dl_info is plain old data; an all-zero value is valid.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: dladdr only reads loader tables and writes into `info`, which we own.
    let ok = unsafe { libc::dladdr(addr, &mut info) };
    (ok != 0 && !info.dli_fname.is_null()).then_some((info.dli_fbase as usize, info.dli_fname))
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

/// The object tprof's code is in (libtprof.so, or the executable a test links the library into):
/// its load address and path, asked once.
static OWN_BASE: AtomicUsize = AtomicUsize::new(0);
static OWN_PATH: AtomicPtr<c_char> = AtomicPtr::new(null_mut());

fn own_object() -> (usize, *const c_char) {
    let base = OWN_BASE.load(Ordering::Acquire);
    if base != 0 {
        return (base, OWN_PATH.load(Ordering::Acquire));
    }
    let Some((base, path)) = object_of(own_object as *const c_void) else { return (0, std::ptr::null()) };
    OWN_PATH.store(path as *mut c_char, Ordering::Release);
    OWN_BASE.store(base, Ordering::Release);
    (base, path)
}

/// True when `p` points into libtprof (one of our wrappers). Slow path only (takes the loader lock).
pub fn is_own(p: *const c_void) -> bool {
    let own = own_object().0;
    !p.is_null() && own != 0 && object_base(p) == own
}

/// Path of libtprof itself; None when this code is linked into an executable (unit tests).
pub fn own_library_path() -> Option<&'static CStr> {
    let (_, p) = own_object();
    if p.is_null() {
        return None;
    }
    // SAFETY: the loader's NUL-terminated path of the object our code is in, valid while it is loaded
    // (for as long as this code runs).
    let path: &'static CStr = unsafe { CStr::from_ptr(p) };
    let bytes = path.to_bytes();
    (bytes.ends_with(b".so") || bytes.windows(4).any(|w| w == b".so.")).then_some(path)
}

/// True when the process's global lookup of `name` finds tprof's own definition (LD_PRELOAD, or
/// libtprof linked in): then the program's calls of `name` reach tprof's export.
pub fn own_export_bound(name: &CStr) -> bool {
    // SAFETY: RTLD_DEFAULT lookup of a NUL-terminated name; returns a code address or NULL.
    is_own(unsafe { symbol(libc::RTLD_DEFAULT, name) })
}

/// Keeps the object tprof's code is in loaded for the life of the process: the writer thread runs
/// its code, so an injection-path `dlclose` must not unmap it.
pub fn pin_own_object() {
    let (_, path) = own_object();
    if !path.is_null() {
        // SAFETY: `path` is the loader's NUL-terminated path of our own object; RTLD_NOLOAD only takes
        // a reference to the already-loaded object.
        unsafe { libc::dlopen(path, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loaded_objects_include_libc() {
        assert!(loaded_objects().iter().any(|p| p.to_string_lossy().contains("libc.so")));
    }

    #[test]
    fn own_code_is_own_and_libc_is_not() {
        assert!(is_own(own_object as *const c_void));
        assert!(!is_own(next(c"malloc")));
        assert!(!is_own(std::ptr::null()));
        assert!(own_library_path().is_none(), "a test executable is not a shared library");
    }
}
