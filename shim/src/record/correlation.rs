//! Shim correlation ids: `0x8000_0000 | n`, disjoint from CUPTI's ids (which stay below 2^31).
//! Each thread takes blocks of ids from a global counter, so the per-call cost is a TLS increment.

use std::sync::atomic::{AtomicU32, Ordering};

/// High bit marking ids the shim assigned.
pub const SHIM_BIT: u32 = 0x8000_0000;
const BLOCK: u32 = 256;

static NEXT_BLOCK: AtomicU32 = AtomicU32::new(1);

/// A fresh correlation id for a host call.
#[inline]
pub fn next_id() -> u32 {
    next_id_in(crate::record::thread::ctx())
}

/// [`next_id`] with the calling thread's context: a TLS increment, a global atomic once per block.
#[inline(always)]
pub fn next_id_in(c: &crate::record::thread::ThreadCtx) -> u32 {
    let next = c.corr_next.get();
    if next >= c.corr_end.get() {
        return new_block(c);
    }
    c.corr_next.set(next + 1);
    SHIM_BIT | (next & 0x7fff_ffff)
}

#[cold]
#[inline(never)]
fn new_block(c: &crate::record::thread::ThreadCtx) -> u32 {
    let block = NEXT_BLOCK.fetch_add(1, Ordering::Relaxed) & 0x007f_ffff;
    let next = block * BLOCK;
    c.corr_end.set(next + BLOCK);
    c.corr_next.set(next + 1);
    SHIM_BIT | (next & 0x7fff_ffff)
}

/// True for ids assigned by the shim.
pub fn is_shim_id(id: u32) -> bool {
    id & SHIM_BIT != 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_threads_and_marked() {
        let handles: Vec<_> =
            (0..4).map(|_| std::thread::spawn(|| (0..2000).map(|_| next_id()).collect::<Vec<_>>())).collect();
        let mut all: Vec<u32> = handles.into_iter().flat_map(|h| h.join().unwrap()).collect();
        assert!(all.iter().all(|&i| is_shim_id(i)));
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n);
    }
}
