//! Activity buffers: a pool allocated up front (8 x 4 MiB), handed to CUPTI by the request callback
//! and taken back by the completion callback after parsing. Neither callback takes a lock; only when
//! the pool is exhausted does the request callback allocate (up to a cap), and past the cap it
//! declines the buffer (CUPTI then counts the records as dropped) where CUPTI allows that.

use std::alloc::{alloc, dealloc, Layout};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};

use cupti_sys as sys;

use super::{parse, session};
use crate::base::panic_fence::ffi_guard;
use crate::record::reentrancy;

pub const BUFFER_BYTES: usize = 4 << 20;
const POOL: usize = 8;
/// Extra buffers allocated when the pool runs out (e.g. CUPTI's worker is slow to return them).
const MAX_EXTRA: usize = 24;
const ALIGN: usize = 8;

static BASE: AtomicPtr<u8> = AtomicPtr::new(std::ptr::null_mut());
static IN_USE: [AtomicBool; POOL] = [const { AtomicBool::new(false) }; POOL];
static EXTRA_LIVE: AtomicUsize = AtomicUsize::new(0);

fn pool_layout() -> Layout {
    Layout::from_size_align(BUFFER_BYTES * POOL, 4096).expect("constant layout")
}

fn extra_layout() -> Layout {
    Layout::from_size_align(BUFFER_BYTES, ALIGN).expect("constant layout")
}

/// Allocates the pool (once). False if the allocation failed.
pub fn init() -> bool {
    if !BASE.load(Ordering::Acquire).is_null() {
        return true;
    }
    // SAFETY: non-zero-sized layout; the memory is owned by the pool for the life of the process.
    let p = unsafe { alloc(pool_layout()) };
    if p.is_null() {
        return false;
    }
    if BASE.compare_exchange(std::ptr::null_mut(), p, Ordering::AcqRel, Ordering::Acquire).is_err() {
        // SAFETY: `p` came from `alloc` with this layout and was never shared.
        unsafe { dealloc(p, pool_layout()) };
    }
    true
}

fn take() -> Option<*mut u8> {
    let base = BASE.load(Ordering::Acquire);
    if !base.is_null() {
        for (i, used) in IN_USE.iter().enumerate() {
            if used.compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
                // SAFETY: slot i lies inside the pool allocation.
                return Some(unsafe { base.add(i * BUFFER_BYTES) });
            }
        }
    }
    if EXTRA_LIVE.fetch_add(1, Ordering::AcqRel) < MAX_EXTRA {
        // SAFETY: non-zero-sized layout; released in `give_back`.
        let p = unsafe { alloc(extra_layout()) };
        if !p.is_null() {
            return Some(p);
        }
    }
    EXTRA_LIVE.fetch_sub(1, Ordering::AcqRel);
    None
}

/// Returns a buffer to the pool (or frees an extra one).
fn give_back(p: *mut u8) {
    let base = BASE.load(Ordering::Acquire) as usize;
    let addr = p as usize;
    if base != 0 && addr >= base && addr < base + POOL * BUFFER_BYTES {
        IN_USE[(addr - base) / BUFFER_BYTES].store(false, Ordering::Release);
    } else if !p.is_null() {
        // SAFETY: buffers outside the pool come from `take`, allocated with `extra_layout`.
        unsafe { dealloc(p, extra_layout()) };
        EXTRA_LIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

/// CUPTI's buffer request callback.
pub unsafe extern "C" fn request(buffer: *mut *mut u8, size: *mut usize, max_num_records: *mut usize) {
    ffi_guard((), || {
        let got = take();
        let declines_ok =
            session::api().map(|a| sys::cupti_version_has(a.version, sys::CUPTI_API_VERSION_12_9)).unwrap_or(false);
        let (p, n) = match got {
            Some(p) => (p, BUFFER_BYTES),
            // CUPTI before API version 27 may crash on a declined buffer: allocate past the cap.
            None if !declines_ok => {
                // SAFETY: non-zero-sized layout; freed by `give_back` (it is outside the pool).
                let p = unsafe { alloc(extra_layout()) };
                if p.is_null() {
                    (p, 0)
                } else {
                    EXTRA_LIVE.fetch_add(1, Ordering::AcqRel);
                    (p, BUFFER_BYTES)
                }
            }
            None => (std::ptr::null_mut(), 0),
        };
        // SAFETY: CUPTI passes valid out-pointers.
        unsafe {
            *buffer = p;
            *size = n;
            *max_num_records = 0;
        }
    })
}

/// CUPTI's buffer completion callback: parse, then recycle.
pub unsafe extern "C" fn complete(
    _ctx: sys::CUcontext,
    _stream_id: u32,
    buffer: *mut u8,
    _size: usize,
    valid_size: usize,
) {
    ffi_guard((), || {
        if buffer.is_null() {
            return;
        }
        // CUDA calls CUPTI triggers from here must not be recorded (None: already inside, fine).
        let _inside = reentrancy::Reentrancy::enter();
        if let Some(api) = session::api() {
            if valid_size > 0 {
                // SAFETY: CUPTI hands back a buffer we gave it, with `valid_size` bytes of records.
                unsafe { parse::parse_buffer(api, buffer, valid_size) };
            }
            session::report_dropped(api);
        }
        give_back(buffer);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_hands_out_distinct_buffers_and_takes_them_back() {
        assert!(init());
        let a = take().unwrap();
        let b = take().unwrap();
        assert_ne!(a, b);
        assert_eq!(a as usize % ALIGN, 0);
        give_back(a);
        give_back(b);
        let many: Vec<_> = (0..POOL + 2).map(|_| take().unwrap()).collect();
        assert_eq!(EXTRA_LIVE.load(Ordering::Relaxed), 2);
        for p in many {
            give_back(p);
        }
        assert_eq!(EXTRA_LIVE.load(Ordering::Relaxed), 0);
    }
}
