//! The fixed-size table `CUPTI correlation id -> shim correlation id`, filled from
//! ExternalCorrelation records (kind CUSTOM2) and read when GPU and API records are parsed.
//!
//! Direct-mapped on the low bits of the CUPTI id (CUPTI ids are sequential per process), one atomic
//! word per slot holding both ids, so a stale slot is recognised and lookups never lock or allocate.
//! An entry lives until 2^18 later CUPTI ids have been mapped: far longer than a GPU record waits.

use std::sync::atomic::{AtomicU64, Ordering};

const SLOTS: usize = 1 << 18;

/// Marks a CUPTI id whose API call the interposers recorded without an external id (no GPU work):
/// its CUPTI API record and its Sync / Memory records duplicate the interposer's. Never a shim id
/// (those have the high bit set).
pub const DUPLICATE: u32 = 1;

static TABLE: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];

#[inline]
fn slot(cupti: u32) -> &'static AtomicU64 {
    &TABLE[cupti as usize & (SLOTS - 1)]
}

/// Remembers that CUPTI's `cupti` id belongs to the shim's `shim` id.
#[inline]
pub fn insert(cupti: u32, shim: u32) {
    if shim == 0 {
        return;
    }
    slot(cupti).store(((cupti as u64) << 32) | shim as u64, Ordering::Relaxed);
}

/// The shim id of a CUPTI correlation id, if an ExternalCorrelation record mapped it.
#[inline]
pub fn get(cupti: u32) -> Option<u32> {
    let v = slot(cupti).load(Ordering::Relaxed);
    let shim = v as u32;
    ((v >> 32) as u32 == cupti && shim != 0).then_some(shim)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_and_evicts_by_slot() {
        insert(7, 0x8000_0001);
        assert_eq!(get(7), Some(0x8000_0001));
        assert_eq!(get(8), None);
        insert(7 + SLOTS as u32, 0x8000_0002);
        assert_eq!(get(7), None);
        assert_eq!(get(7 + SLOTS as u32), Some(0x8000_0002));
    }
}
