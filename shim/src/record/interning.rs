//! String interning: text -> small [`StrId`], once per distinct string.
//!
//! Lookups of known strings are lock-free and allocation-free (hash probe + compare); only the first
//! sighting of a string takes a spin lock and allocates. Ids are dense from 1, so the writer thread
//! defines every string in the ring by walking ids in order (`for_each_since`), also after a fork.

use std::ffi::{c_char, CStr};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering};

use tprof_format::StrId;

use crate::base::config::config_if_read;

const TABLE_BITS: u32 = 18;
const TABLE_SIZE: usize = 1 << TABLE_BITS;
/// Stop inserting at 3/4 load: probes stay short.
const MAX_STRINGS: u32 = (TABLE_SIZE as u32 / 4) * 3;
const SEGMENT: usize = 1024;
const SEGMENTS: usize = (MAX_STRINGS as usize).div_ceil(SEGMENT) + 1;
/// Longest string kept (longer ones are cut).
pub const MAX_LEN: usize = 4096;

/// (hash high 32 bits | id) per slot; 0 = empty.
static TABLE: [AtomicU64; TABLE_SIZE] = [const { AtomicU64::new(0) }; TABLE_SIZE];
/// Segments of `SEGMENT` string pointers, indexed by id.
static SEGS: [AtomicPtr<Seg>; SEGMENTS] = [const { AtomicPtr::new(std::ptr::null_mut()) }; SEGMENTS];
static COUNT: AtomicU32 = AtomicU32::new(0);
static INSERT_LOCK: AtomicBool = AtomicBool::new(false);
static OVERFLOWED: AtomicBool = AtomicBool::new(false);

struct Seg {
    items: [AtomicPtr<Box<[u8]>>; SEGMENT],
}

#[inline]
fn hash(bytes: &[u8]) -> u64 {
    // FNV-1a 64 with a final mix: fast for short names, good enough spread for a probe table.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h ^= h >> 29;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^ (h >> 32)
}

fn get_bytes(id: u32) -> Option<&'static [u8]> {
    let seg = SEGS.get(id as usize / SEGMENT)?.load(Ordering::Acquire);
    if seg.is_null() {
        return None;
    }
    // SAFETY: segments and strings are allocated once, published with Release, and never freed, so a
    // non-null pointer read with Acquire stays valid for the life of the process.
    let item = unsafe { &(*seg).items[id as usize % SEGMENT] }.load(Ordering::Acquire);
    if item.is_null() {
        return None;
    }
    // SAFETY: as above; the boxed bytes are immutable once published.
    Some(unsafe { &**item })
}

/// The text of an interned id.
pub fn lookup(id: StrId) -> Option<&'static [u8]> {
    get_bytes(id.0)
}

/// Interns `bytes` (cut to [`MAX_LEN`]). Returns [`StrId::NONE`] for the empty string or when the
/// table is full (counted once with a warning).
pub fn intern_bytes(bytes: &[u8]) -> StrId {
    let bytes = &bytes[..bytes.len().min(MAX_LEN)];
    if bytes.is_empty() {
        return StrId::NONE;
    }
    let h = hash(bytes);
    let tag = (h >> 32) << 32;
    let mut slot = (h as usize) & (TABLE_SIZE - 1);
    loop {
        let e = TABLE[slot].load(Ordering::Acquire);
        if e == 0 {
            return insert_slow(bytes, h);
        }
        if e & 0xffff_ffff_0000_0000 == tag {
            let id = (e & 0xffff_ffff) as u32;
            if get_bytes(id) == Some(bytes) {
                return StrId(id);
            }
        }
        slot = (slot + 1) & (TABLE_SIZE - 1);
    }
}

fn insert_slow(bytes: &[u8], h: u64) -> StrId {
    panic_if_asked(bytes);
    while INSERT_LOCK.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::hint::spin_loop();
    }
    let id = insert_locked(bytes, h);
    INSERT_LOCK.store(false, Ordering::Release);
    id
}

/// The test switch `TPROF_TEST_PANIC=<name>`: tprof panics where it first records `name`, before it
/// takes the insert lock. Read only once the configuration is (so never before initialisation).
#[cold]
fn panic_if_asked(bytes: &[u8]) {
    if let Some(name) = config_if_read().and_then(|c| c.test_panic.as_deref()) {
        if name.as_bytes() == bytes {
            panic!("TPROF_TEST_PANIC={name}");
        }
    }
}

fn insert_locked(bytes: &[u8], h: u64) -> StrId {
    let tag = (h >> 32) << 32;
    let mut slot = (h as usize) & (TABLE_SIZE - 1);
    // Re-probe under the lock: another thread may have inserted it meanwhile.
    loop {
        let e = TABLE[slot].load(Ordering::Acquire);
        if e == 0 {
            break;
        }
        if e & 0xffff_ffff_0000_0000 == tag {
            let id = (e & 0xffff_ffff) as u32;
            if get_bytes(id) == Some(bytes) {
                return StrId(id);
            }
        }
        slot = (slot + 1) & (TABLE_SIZE - 1);
    }
    let id = COUNT.load(Ordering::Relaxed) + 1;
    if id > MAX_STRINGS {
        if !OVERFLOWED.swap(true, Ordering::Relaxed) {
            crate::base::messages::warn_line(
                "more than 196608 distinct names; further new names are recorded as unnamed",
            );
        }
        return StrId::NONE;
    }
    let seg_idx = id as usize / SEGMENT;
    let mut seg = SEGS[seg_idx].load(Ordering::Acquire);
    if seg.is_null() {
        let fresh = Box::new(Seg { items: [const { AtomicPtr::new(std::ptr::null_mut()) }; SEGMENT] });
        seg = Box::into_raw(fresh);
        SEGS[seg_idx].store(seg, Ordering::Release);
    }
    let item = Box::into_raw(Box::new(bytes.to_vec().into_boxed_slice()));
    // SAFETY: `seg` is a live, never-freed segment (just allocated or loaded above).
    unsafe { &(*seg).items[id as usize % SEGMENT] }.store(item, Ordering::Release);
    COUNT.store(id, Ordering::Release);
    TABLE[slot].store(tag | u64::from(id), Ordering::Release);
    StrId(id)
}

/// Interns a UTF-8 string.
#[inline]
pub fn intern(s: &str) -> StrId {
    intern_bytes(s.as_bytes())
}

/// Interns a NUL-terminated C string (NULL -> [`StrId::NONE`]).
///
/// # Safety
/// `p` must be NULL or point to a NUL-terminated string readable for the duration of the call.
pub unsafe fn intern_cstr(p: *const c_char) -> StrId {
    if p.is_null() {
        return StrId::NONE;
    }
    // SAFETY: the caller guarantees a valid NUL-terminated string.
    let c = unsafe { CStr::from_ptr(p) };
    intern_bytes(c.to_bytes())
}

/// Number of strings interned so far (ids are 1..=count).
pub fn count() -> u32 {
    COUNT.load(Ordering::Acquire)
}

/// Calls `f(id, text)` for every string with id > `since`, in id order; returns the last id visited.
pub fn for_each_since(since: u32, mut f: impl FnMut(StrId, &[u8])) -> u32 {
    let n = count();
    let mut last = since;
    for id in since + 1..=n {
        match get_bytes(id) {
            Some(b) => {
                f(StrId(id), b);
                last = id;
            }
            None => break,
        }
    }
    last
}

/// In a fork child: the insert lock may have been held by a thread that no longer exists.
pub fn reset_after_fork() {
    INSERT_LOCK.store(false, Ordering::Release);
}

/// A string interned on first use and cached in a static: `static N: StaticName = StaticName::new("cudaMalloc");`.
pub struct StaticName {
    text: &'static str,
    id: AtomicU32,
}

impl StaticName {
    pub const fn new(text: &'static str) -> StaticName {
        StaticName { text, id: AtomicU32::new(0) }
    }

    #[inline]
    pub fn id(&self) -> StrId {
        let v = self.id.load(Ordering::Relaxed);
        if v != 0 {
            return StrId(v);
        }
        let id = intern(self.text);
        self.id.store(id.0, Ordering::Relaxed);
        id
    }

    /// The id when the name was interned already, else [`StrId::NONE`] (interns nothing: one load).
    #[inline(always)]
    pub fn interned(&self) -> StrId {
        StrId(self.id.load(Ordering::Relaxed))
    }

    pub fn text(&self) -> &'static str {
        self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_same_id_across_threads() {
        let ids: Vec<StrId> = (0..4)
            .map(|_| std::thread::spawn(|| intern("cudaLaunchKernel_test_name")))
            .map(|h| h.join().unwrap())
            .collect();
        assert!(ids.iter().all(|&i| i == ids[0] && i != StrId::NONE));
        assert_eq!(lookup(ids[0]), Some(&b"cudaLaunchKernel_test_name"[..]));
        assert_ne!(intern("other_name_x"), ids[0]);
        assert_eq!(intern(""), StrId::NONE);
    }

    #[test]
    fn for_each_since_walks_new_ids_in_order() {
        let a = intern("walk_a_unique");
        let b = intern("walk_b_unique");
        let mut seen = Vec::new();
        for_each_since(a.0 - 1, |id, t| seen.push((id, t.to_vec())));
        assert!(seen.iter().any(|(id, t)| *id == a && t == b"walk_a_unique"));
        assert!(seen.iter().any(|(id, _)| *id == b));
    }

    #[test]
    fn static_names_cache_their_id() {
        static N: StaticName = StaticName::new("cudaMemcpyAsync_static_test");
        let a = N.id();
        assert_eq!(N.id(), a);
        assert_eq!(intern("cudaMemcpyAsync_static_test"), a);
    }
}
