//! The `dlsym` hook: a program that `dlopen`s libcudart / libcuda late (even `RTLD_LOCAL`) and looks
//! functions up on that handle gets our wrappers, whose slots get the real pointers from that handle.
//!
//! `dlsym` runs everywhere: during process start, inside the dynamic loader paths of other
//! libraries, inside Rust's std (weak symbols), inside tprof. The decision function therefore
//! allocates nothing, takes no lock of ours, never initialises tprof and never calls the hook
//! again (it uses glibc's real `dlsym`). On x86_64 the exported `dlsym` is a naked trampoline that
//! *jumps* to glibc's `dlsym` when it does not substitute, so glibc sees the original caller's return
//! address: `RTLD_NEXT` and `RTLD_DEFAULT` lookups keep the caller's semantics exactly.
//!
//! Only real library handles are considered: `RTLD_DEFAULT` already finds our exports first under
//! `LD_PRELOAD`, and an `RTLD_NEXT` lookup is another interposer asking for what follows it.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::null_mut;

use super::proc_address::hook_named;
use super::real::Hook;
use crate::base::dynamic_loader;

/// What the trampoline does: return `replacement` if non-null, else jump to `real` (glibc's dlsym).
#[repr(C)]
pub struct Decision {
    pub replacement: *mut c_void,
    pub real: *mut c_void,
}

/// The wrappers of other libraries that `dlsym` on their handle hands out: NCCL's, and the CUPTI
/// calls with which a program claims CUPTI.
fn other_hooks() -> impl Iterator<Item = &'static Hook> {
    super::nccl::hooks().chain(super::cupti_sharing::HOOKS)
}

fn find_hook(name: &[u8]) -> Option<&'static Hook> {
    if name.starts_with(b"cu") || name.starts_with(b"__cuda") {
        if let Some(h) = hook_named(name) {
            return Some(h);
        }
    }
    other_hooks().find(|h| h.name.to_bytes() == name)
}

/// The decision behind the exported `dlsym`.
///
/// # Safety
/// Same contract as `dlsym`: `handle` from `dlopen` or a pseudo-handle, `name` NULL or NUL-terminated.
pub unsafe extern "C" fn decide(handle: *mut c_void, name: *const c_char) -> Decision {
    let real_dlsym = dynamic_loader::glibc_dlsym();
    let pass = Decision { replacement: null_mut(), real: real_dlsym };
    if name.is_null() || handle.is_null() || handle == libc::RTLD_NEXT || real_dlsym.is_null() {
        return pass;
    }
    let outcome = std::panic::catch_unwind(|| {
        // SAFETY: the caller's NUL-terminated symbol name.
        let cname = unsafe { CStr::from_ptr(name) };
        let hook = find_hook(cname.to_bytes())?;
        // SAFETY: `handle` is the caller's dlopen handle, as dlsym requires.
        let p = unsafe { dynamic_loader::symbol(handle, cname) };
        if p.is_null() || p as *const () == hook.wrapper {
            return None;
        }
        hook.real.offer(p).then_some(hook.wrapper as *mut c_void)
    });
    match outcome {
        Ok(Some(w)) => Decision { replacement: w, real: real_dlsym },
        _ => pass,
    }
}

#[cfg(target_arch = "x86_64")]
extern "C" fn decide_for_trampoline(handle: *mut c_void, name: *const c_char) -> Decision {
    // SAFETY: called only by the `dlsym` trampoline with the caller's own dlsym arguments.
    unsafe { decide(handle, name) }
}

/// `dlsym`, interposed. Substitutes our wrapper for CUDA functions looked up on a library handle;
/// otherwise tail-jumps to glibc's `dlsym` with the original arguments and return address.
///
/// # Safety
/// As glibc's `dlsym`.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    // On entry rsp = 8 mod 16. Save the two arguments (+8 keeps the call aligned), ask `decide`
    // (returns the Decision in rax:rdx), restore, then either return rax or jump to rdx.
    core::arch::naked_asm!(
        "push rdi",
        "push rsi",
        "sub rsp, 8",
        "call {decide}",
        "add rsp, 8",
        "pop rsi",
        "pop rdi",
        "test rax, rax",
        "jnz 2f",
        "test rdx, rdx",
        "jz 2f",
        "jmp rdx",
        "2:",
        "ret",
        decide = sym decide_for_trampoline,
    )
}

/// `dlsym`, interposed (portable version: glibc sees libtprof as the caller).
///
/// # Safety
/// As glibc's `dlsym`.
#[cfg(not(target_arch = "x86_64"))]
#[no_mangle]
pub unsafe extern "C" fn dlsym(handle: *mut c_void, name: *const c_char) -> *mut c_void {
    // SAFETY: forwarded contract.
    let d = unsafe { decide(handle, name) };
    if !d.replacement.is_null() || d.real.is_null() {
        return d.replacement;
    }
    type DlsymFn = unsafe extern "C" fn(*mut c_void, *const c_char) -> *mut c_void;
    // SAFETY: `d.real` is glibc's dlsym.
    let f: DlsymFn = unsafe { std::mem::transmute::<*mut c_void, DlsymFn>(d.real) };
    // SAFETY: forwarded contract.
    unsafe { f(handle, name) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pseudo_handles_and_unknown_names_pass_through() {
        // SAFETY: valid pseudo-handles and literal names.
        unsafe {
            let d = decide(libc::RTLD_DEFAULT, c"cudaMalloc".as_ptr());
            assert!(d.replacement.is_null());
            assert!(!d.real.is_null());
            let d = decide(libc::RTLD_NEXT, c"cudaMalloc".as_ptr());
            assert!(d.replacement.is_null());
            let libc_handle = libc::dlopen(c"libc.so.6".as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD);
            assert!(!libc_handle.is_null());
            let d = decide(libc_handle, c"malloc".as_ptr());
            assert!(d.replacement.is_null());
            let d = decide(libc_handle, c"cudaMalloc".as_ptr());
            assert!(d.replacement.is_null(), "libc has no cudaMalloc: nothing to substitute");
        }
    }

    #[test]
    fn the_exported_dlsym_behaves_like_glibc() {
        // SAFETY: ordinary dlsym calls through the interposed symbol.
        unsafe {
            let p = dlsym(libc::RTLD_DEFAULT, c"malloc".as_ptr());
            assert!(!p.is_null());
            let q = dlsym(libc::RTLD_DEFAULT, c"no_such_symbol_tprof".as_ptr());
            assert!(q.is_null());
            assert!(!libc::dlerror().is_null());
        }
    }
}
