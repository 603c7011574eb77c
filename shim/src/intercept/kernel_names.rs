//! Kernel names by function handle: host stub (`__cudaRegisterFunction`), `cudaKernel_t`
//! (`__cudaGetKernel`) and `CUfunction` (`cuModuleGetFunction`) -> name.
//!
//! A fixed open-addressing table, written at registration (rare) and read at every launch: lookups
//! are a hash probe over atomics, no lock, no allocation. Registration stores the pointer to the
//! mangled name (nvcc's registration strings live in the program's read-only data as long as its
//! module is loaded); the name is interned on first launch only, so a library that registers
//! 100 000 kernels and launches 50 of them interns 50 names.

use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use tprof_format::StrId;

const BITS: u32 = 18;
const SIZE: usize = 1 << BITS;
/// Inserts stop at 7/8 load so probes stay bounded.
const MAX_ENTRIES: usize = SIZE / 8 * 7;

struct Entry {
    /// Function handle; 0 = empty.
    key: AtomicUsize,
    /// Pointer to a NUL-terminated name not yet interned (0 once interned or when unknown).
    text: AtomicUsize,
    /// Interned name, 0 until known.
    id: AtomicU32,
}

static TABLE: [Entry; SIZE] =
    [const { Entry { key: AtomicUsize::new(0), text: AtomicUsize::new(0), id: AtomicU32::new(0) } }; SIZE];
static USED: AtomicUsize = AtomicUsize::new(0);
static FULL_WARNED: AtomicU32 = AtomicU32::new(0);

#[inline]
fn slot_of(key: usize) -> usize {
    let h = (key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - BITS)) as usize
}

fn find_or_claim(key: usize) -> Option<&'static Entry> {
    let mut i = slot_of(key);
    for _ in 0..SIZE {
        let e = &TABLE[i];
        let k = e.key.load(Ordering::Acquire);
        if k == key {
            return Some(e);
        }
        if k == 0 {
            if USED.load(Ordering::Relaxed) >= MAX_ENTRIES {
                if FULL_WARNED.swap(1, Ordering::Relaxed) == 0 {
                    crate::base::messages::warn_line(
                        "kernel name table full: later kernels are recorded without names",
                    );
                }
                return None;
            }
            match e.key.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    USED.fetch_add(1, Ordering::Relaxed);
                    return Some(e);
                }
                Err(k2) if k2 == key => return Some(e),
                Err(_) => {}
            }
        }
        i = (i + 1) & (SIZE - 1);
    }
    None
}

fn find(key: usize) -> Option<&'static Entry> {
    let mut i = slot_of(key);
    for _ in 0..SIZE {
        let e = &TABLE[i];
        let k = e.key.load(Ordering::Acquire);
        if k == key {
            return Some(e);
        }
        if k == 0 {
            return None;
        }
        i = (i + 1) & (SIZE - 1);
    }
    None
}

/// Remembers that `handle` runs the kernel named by the NUL-terminated string at `name`, which must
/// stay readable while `handle` can be launched (true of nvcc's registration strings).
pub fn register_static(handle: *const c_void, name: *const c_char) {
    if handle.is_null() || name.is_null() {
        return;
    }
    if let Some(e) = find_or_claim(handle as usize) {
        e.id.store(0, Ordering::Release);
        e.text.store(name as usize, Ordering::Release);
    }
}

/// Remembers an already interned name for `handle`.
pub fn register_id(handle: *const c_void, id: StrId) {
    if handle.is_null() || id == StrId::NONE {
        return;
    }
    if let Some(e) = find_or_claim(handle as usize) {
        e.text.store(0, Ordering::Release);
        e.id.store(id.0, Ordering::Release);
    }
}

/// Gives `alias` (a `cudaKernel_t`) the name of `handle` (its host stub).
pub fn alias(alias: *const c_void, handle: *const c_void) {
    if alias.is_null() || alias == handle {
        return;
    }
    let Some(src) = find(handle as usize) else { return };
    let id = src.id.load(Ordering::Acquire);
    let text = src.text.load(Ordering::Acquire);
    if let Some(e) = find_or_claim(alias as usize) {
        e.id.store(id, Ordering::Release);
        e.text.store(text, Ordering::Release);
    }
}

/// The name registered for a function handle, [`StrId::NONE`] if unknown. Hot path: one probe;
/// the first lookup of each kernel interns its name.
#[inline]
pub fn lookup(handle: *const c_void) -> StrId {
    if handle.is_null() {
        return StrId::NONE;
    }
    let Some(e) = find(handle as usize) else { return StrId::NONE };
    let id = e.id.load(Ordering::Acquire);
    if id != 0 {
        return StrId(id);
    }
    intern_pending(e)
}

/// A kernel's first lookup interns its name (allocates): behind the panic fence, as the launch's short
/// way has none.
#[cold]
#[inline(never)]
fn intern_pending(e: &'static Entry) -> StrId {
    crate::base::panic_fence::ffi_guard(StrId::NONE, || intern_pending_unfenced(e))
}

fn intern_pending_unfenced(e: &Entry) -> StrId {
    let text = e.text.load(Ordering::Acquire);
    if text == 0 {
        return StrId::NONE;
    }
    // SAFETY: `text` was stored by `register_static`, whose contract keeps the string readable while
    // its handle can be launched.
    let id = unsafe { crate::record::interning::intern_cstr(text as *const c_char) };
    if id != StrId::NONE {
        e.id.store(id.0, Ordering::Release);
    }
    id
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn register_lookup_alias() {
        let a = 0x1000usize as *const c_void;
        let b = 0x2000usize as *const c_void;
        let c = 0x3000usize as *const c_void;
        assert_eq!(lookup(a), StrId::NONE);
        register_static(a, c"_Z6kernelPf".as_ptr());
        let id = lookup(a);
        assert_ne!(id, StrId::NONE);
        assert_eq!(lookup(a), id);
        alias(b, a);
        assert_eq!(lookup(b), id);
        let other = crate::record::interning::intern("other");
        register_id(c, other);
        assert_eq!(lookup(c), other);
        // re-registration replaces the name
        register_static(a, c"_Z7kernel2v".as_ptr());
        assert_ne!(lookup(a), id);
    }

    #[test]
    fn many_keys_collide_and_resolve() {
        for i in 1..5000usize {
            register_id((i << 20) as *const c_void, StrId(i as u32));
        }
        for i in 1..5000usize {
            assert_eq!(lookup((i << 20) as *const c_void), StrId(i as u32));
        }
    }
}
