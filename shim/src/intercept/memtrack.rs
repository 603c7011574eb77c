//! Per-device reservation totals: what this process holds from `cudaMalloc*` / `cuMemAlloc*` and the
//! driver's `cuMemCreate` (see `vmmtrack`), so an allocation failure can be recorded with the
//! requested size and the reservation at that moment.
//!
//! Live allocations sit in a fixed open-addressing table (address -> device and size) of atomics:
//! no lock, no allocation. Pinned host memory is kept under the pseudo-device [`HOST`].

use std::sync::atomic::{AtomicU64, Ordering};

/// Devices tracked (higher ordinals share the last counter).
pub const MAX_DEVICES: usize = 64;
/// Pseudo-device index of pinned host memory.
pub const HOST: u32 = u32::MAX;

const BITS: u32 = 17;
const SIZE: usize = 1 << BITS;
const TOMBSTONE: u64 = u64::MAX;
/// Value layout: device (8 bits, 0xff = host) << 56 | bytes.
const BYTES_MASK: u64 = (1 << 56) - 1;

static KEYS: [AtomicU64; SIZE] = [const { AtomicU64::new(0) }; SIZE];
static VALS: [AtomicU64; SIZE] = [const { AtomicU64::new(0) }; SIZE];
static RESERVED: [AtomicU64; MAX_DEVICES] = [const { AtomicU64::new(0) }; MAX_DEVICES];
static HOST_RESERVED: AtomicU64 = AtomicU64::new(0);

fn counter(device: u32) -> &'static AtomicU64 {
    if device == HOST {
        &HOST_RESERVED
    } else {
        &RESERVED[(device as usize).min(MAX_DEVICES - 1)]
    }
}

#[inline]
fn slot_of(addr: u64) -> usize {
    (addr.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BITS)) as usize
}

/// Bytes this process holds on `device` now.
pub fn reserved(device: u32) -> u64 {
    counter(device).load(Ordering::Relaxed)
}

/// Adds `bytes` to what this process holds on `device` (no address kept); returns the new total.
pub fn add(device: u32, bytes: u64) -> u64 {
    counter(device).fetch_add(bytes, Ordering::Relaxed) + bytes
}

/// Takes `bytes` off what this process holds on `device` (never below 0); returns the new total.
pub fn sub(device: u32, bytes: u64) -> u64 {
    let c = counter(device);
    let mut cur = c.load(Ordering::Relaxed);
    loop {
        let new = cur.saturating_sub(bytes);
        match c.compare_exchange_weak(cur, new, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return new,
            Err(v) => cur = v,
        }
    }
}

/// Records a successful allocation; returns the reservation after it.
pub fn on_alloc(device: u32, addr: u64, bytes: u64) -> u64 {
    let total = add(device, bytes);
    if addr == 0 || addr == TOMBSTONE {
        return total;
    }
    let dev_tag = if device == HOST { 0xff } else { (device as u64).min(0xfe) };
    let val = (dev_tag << 56) | (bytes & BYTES_MASK);
    let mut i = slot_of(addr);
    for _ in 0..SIZE {
        let k = KEYS[i].load(Ordering::Acquire);
        if k == addr {
            // Address reused without a free we saw: replace.
            VALS[i].store(val, Ordering::Release);
            return total;
        }
        if k == 0 || k == TOMBSTONE {
            if KEYS[i].compare_exchange(k, addr, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                VALS[i].store(val, Ordering::Release);
                return total;
            }
            continue;
        }
        i = (i + 1) & (SIZE - 1);
    }
    total
}

/// Records a free; returns (device, bytes, reservation after) when the address was known.
pub fn on_free(addr: u64) -> Option<(u32, u64, u64)> {
    if addr == 0 || addr == TOMBSTONE {
        return None;
    }
    let mut i = slot_of(addr);
    for _ in 0..SIZE {
        let k = KEYS[i].load(Ordering::Acquire);
        if k == 0 {
            return None;
        }
        if k == addr {
            let val = VALS[i].swap(0, Ordering::AcqRel);
            if KEYS[i].compare_exchange(addr, TOMBSTONE, Ordering::AcqRel, Ordering::Acquire).is_err() {
                return None;
            }
            let tag = val >> 56;
            let device = if tag == 0xff { HOST } else { tag as u32 };
            let bytes = val & BYTES_MASK;
            return Some((device, bytes, sub(device, bytes)));
        }
        i = (i + 1) & (SIZE - 1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alloc_free_totals() {
        let d = 7;
        let base = reserved(d);
        assert_eq!(on_alloc(d, 0xdead_0000, 100), base + 100);
        assert_eq!(on_alloc(d, 0xdead_1000, 50), base + 150);
        assert_eq!(on_free(0xdead_0000), Some((d, 100, base + 50)));
        assert_eq!(on_free(0xdead_0000), None);
        assert_eq!(on_free(0xdead_1000), Some((d, 50, base)));
        let h = reserved(HOST);
        on_alloc(HOST, 0xbeef_0000, 10);
        assert_eq!(on_free(0xbeef_0000), Some((HOST, 10, h)));
    }
}
