//! Points `NCCL_PROFILER_PLUGIN` at libtprof.so when it is preloaded, so NCCL (also one linked
//! statically into the program) loads it as its profiler plugin. Runs from `.init_array`, before the
//! program's `main` and its threads: the environment is changed while nobody else reads it. A value
//! the user set (a path, `none`) is kept, and nothing is set with `TPROF_DISABLE=1`.

use std::ffi::{c_char, c_void, CStr};

use crate::base::config::disabled_at_load;
use crate::base::panic_fence::ffi_guard;

const VAR: &CStr = c"NCCL_PROFILER_PLUGIN";

/// True when `preload` (the `LD_PRELOAD` value) names the library whose file name is `file`.
pub fn preload_names(preload: &[u8], file: &[u8]) -> bool {
    !file.is_empty()
        && preload.split(|&b| b == b':' || b == b' ').any(|entry| entry.rsplit(|&b| b == b'/').next() == Some(file))
}

/// libtprof's own path, resolved (NUL-terminated in `buf`), or None.
fn own_path(buf: &mut [c_char; libc::PATH_MAX as usize]) -> Option<&CStr> {
    // SAFETY: all-zero is a valid `Dl_info`; dladdr fills it for an address inside a loaded object.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    // SAFETY: the address of one of our own statics lies in libtprof's image.
    let found = unsafe { libc::dladdr(&VAR as *const _ as *const c_void, &mut info) };
    if found == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: dladdr's file name is a C string; `buf` holds PATH_MAX bytes as realpath requires.
    let p = unsafe { libc::realpath(info.dli_fname, buf.as_mut_ptr()) };
    // SAFETY: realpath wrote a NUL-terminated path into `buf` when it returned non-NULL.
    (!p.is_null()).then(|| unsafe { CStr::from_ptr(buf.as_ptr()) })
}

fn point_nccl_at_libtprof() {
    // SAFETY: getenv with a C string; read before any other thread of the program runs.
    let have = unsafe { libc::getenv(VAR.as_ptr()) };
    if !have.is_null() || disabled_at_load() {
        return;
    }
    // SAFETY: as above.
    let preload = unsafe { libc::getenv(c"LD_PRELOAD".as_ptr()) };
    if preload.is_null() {
        return;
    }
    let mut buf = [0 as c_char; libc::PATH_MAX as usize];
    let Some(path) = own_path(&mut buf) else { return };
    let file = path.to_bytes().rsplit(|&b| b == b'/').next().unwrap_or(&[]);
    // SAFETY: getenv returned a C string.
    if !preload_names(unsafe { CStr::from_ptr(preload) }.to_bytes(), file) {
        return;
    }
    // SAFETY: both are C strings; overwrite = 0 keeps a value set meanwhile.
    unsafe { libc::setenv(VAR.as_ptr(), path.as_ptr(), 0) };
}

extern "C" fn constructor() {
    ffi_guard((), point_nccl_at_libtprof)
}

#[used]
#[link_section = ".init_array"]
static POINT_NCCL_AT_LIBTPROF: extern "C" fn() = constructor;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preload_entries_are_matched_by_file_name() {
        assert!(preload_names(b"/a/b/libtprof.so", b"libtprof.so"));
        assert!(preload_names(b"libx.so:/opt/libtprof.so libz.so", b"libtprof.so"));
        assert!(!preload_names(b"/a/libtprof.so.old", b"libtprof.so"));
        assert!(!preload_names(b"", b"libtprof.so"));
        assert!(!preload_names(b"x", b""));
    }
}
