//! Physical memory behind the driver's virtual memory management calls, as the driver accounts
//! for it (cuda.h, `cuMemRelease`): an allocation made by `cuMemCreate` lives while its handle has
//! references (`cuMemCreate` 1, `cuMemRetainAllocationHandle` +1, `cuMemRelease` -1) or it is
//! mapped (`cuMemMap` +1, `cuMemUnmap` -1 per whole mapping), and is freed when both are gone.
//! Reserving or mapping address space allocates nothing. The bytes are counted in `memtrack`'s
//! per-device totals, so the memory timeline shows physical memory in use.
//!
//! Two fixed open-addressing tables of atomics (as `memtrack`): handle -> (device, bytes, holds)
//! and mapped address -> (handle, size). No lock, no allocation.

use std::sync::atomic::{AtomicU64, Ordering};

use super::memtrack;

const BITS: u32 = 16;
const SIZE: usize = 1 << BITS;
const EMPTY: u64 = 0;
const TOMBSTONE: u64 = u64::MAX;
/// Value layout of an allocation: device (8 bits, 0xff = host) << 56 | bytes.
const BYTES_MASK: u64 = (1 << 56) - 1;

/// Keys (never 0 or `u64::MAX`) with two values each.
struct Table {
    keys: [AtomicU64; SIZE],
    first: [AtomicU64; SIZE],
    second: [AtomicU64; SIZE],
}

impl Table {
    const fn new() -> Table {
        Table {
            keys: [const { AtomicU64::new(EMPTY) }; SIZE],
            first: [const { AtomicU64::new(0) }; SIZE],
            second: [const { AtomicU64::new(0) }; SIZE],
        }
    }

    fn slot_of(key: u64) -> usize {
        (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - BITS)) as usize
    }

    /// Stores `key -> (a, b)`; returns the values it replaced when the key was already there.
    fn insert(&self, key: u64, a: u64, b: u64) -> Option<(u64, u64)> {
        if key == EMPTY || key == TOMBSTONE {
            return None;
        }
        if let Some(i) = self.find(key) {
            let old = (self.first[i].swap(a, Ordering::AcqRel), self.second[i].swap(b, Ordering::AcqRel));
            return Some(old);
        }
        let mut i = Self::slot_of(key);
        for _ in 0..SIZE {
            let k = self.keys[i].load(Ordering::Acquire);
            if (k == EMPTY || k == TOMBSTONE)
                && self.keys[i].compare_exchange(k, key, Ordering::AcqRel, Ordering::Acquire).is_ok()
            {
                self.first[i].store(a, Ordering::Release);
                self.second[i].store(b, Ordering::Release);
                return None;
            }
            i = (i + 1) & (SIZE - 1);
        }
        None
    }

    fn find(&self, key: u64) -> Option<usize> {
        if key == EMPTY || key == TOMBSTONE {
            return None;
        }
        let mut i = Self::slot_of(key);
        for _ in 0..SIZE {
            match self.keys[i].load(Ordering::Acquire) {
                EMPTY => return None,
                k if k == key => return Some(i),
                _ => i = (i + 1) & (SIZE - 1),
            }
        }
        None
    }

    /// Removes the key at slot `i`; returns its values, None if another thread removed it first.
    fn remove_at(&self, i: usize, key: u64) -> Option<(u64, u64)> {
        let a = self.first[i].load(Ordering::Acquire);
        let b = self.second[i].load(Ordering::Acquire);
        self.keys[i].compare_exchange(key, TOMBSTONE, Ordering::AcqRel, Ordering::Acquire).ok()?;
        Some((a, b))
    }

    fn remove(&self, key: u64) -> Option<(u64, u64)> {
        let i = self.find(key)?;
        self.remove_at(i, key)
    }
}

/// handle -> (device tag << 56 | bytes, holds).
static ALLOCATIONS: Table = Table::new();
/// mapped address -> (handle, size).
static MAPPINGS: Table = Table::new();

fn pack(device: u32, bytes: u64) -> u64 {
    let tag = if device == memtrack::HOST { 0xff } else { u64::from(device).min(0xfe) };
    (tag << 56) | (bytes & BYTES_MASK)
}

fn unpack(v: u64) -> (u32, u64) {
    let tag = v >> 56;
    (if tag == 0xff { memtrack::HOST } else { tag as u32 }, v & BYTES_MASK)
}

/// One allocation a call freed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FreedAllocation {
    pub handle: u64,
    pub device: u32,
    pub bytes: u64,
}

/// The allocations one `cuMemUnmap` freed, in order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Freed {
    allocations: [FreedAllocation; Freed::MAX],
    len: usize,
}

impl Freed {
    /// Allocations one call reports one by one; the bytes of more are added to the last one
    /// reported on the same device (or to the last one).
    pub const MAX: usize = 32;

    fn add(&mut self, a: FreedAllocation) {
        if self.len < Self::MAX {
            self.allocations[self.len] = a;
            self.len += 1;
            return;
        }
        let last = self.allocations.iter_mut().rev().find(|f| f.device == a.device);
        match last {
            Some(f) => f.bytes += a.bytes,
            None => self.allocations[Self::MAX - 1].bytes += a.bytes,
        }
    }

    /// The freed allocations.
    pub fn allocations(&self) -> &[FreedAllocation] {
        &self.allocations[..self.len]
    }
}

/// A successful `cuMemCreate`: `bytes` of physical memory on `device` under `handle`, one reference.
/// Returns the device's total after it.
pub fn on_create(handle: u64, device: u32, bytes: u64) -> u64 {
    if let Some((old, _)) = ALLOCATIONS.insert(handle, pack(device, bytes), 1) {
        // A handle value reused without the release that freed it reaching us: drop the old one.
        let (old_device, old_bytes) = unpack(old);
        memtrack::sub(old_device, old_bytes);
    }
    memtrack::add(device, bytes)
}

/// One more hold on `handle` (a retained reference or a mapping); false if the handle is unknown.
fn hold(handle: u64) -> bool {
    match ALLOCATIONS.find(handle) {
        Some(i) => {
            ALLOCATIONS.second[i].fetch_add(1, Ordering::AcqRel);
            true
        }
        None => false,
    }
}

/// One hold fewer on `handle`; the allocation (device, bytes) when that was its last one.
fn drop_hold(handle: u64) -> Option<(u32, u64)> {
    let i = ALLOCATIONS.find(handle)?;
    let holds = &ALLOCATIONS.second[i];
    let mut cur = holds.load(Ordering::Acquire);
    loop {
        if cur == 0 {
            return None;
        }
        match holds.compare_exchange_weak(cur, cur - 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(v) => cur = v,
        }
    }
    if cur != 1 {
        return None;
    }
    let (packed, _) = ALLOCATIONS.remove_at(i, handle)?;
    let (device, bytes) = unpack(packed);
    memtrack::sub(device, bytes);
    Some((device, bytes))
}

/// A successful `cuMemRetainAllocationHandle` that returned `handle`.
pub fn on_retain(handle: u64) {
    hold(handle);
}

/// A successful `cuMemRelease`: (device, bytes, device total after) when it freed the allocation.
pub fn on_release(handle: u64) -> Option<(u32, u64, u64)> {
    let (device, bytes) = drop_hold(handle)?;
    Some((device, bytes, memtrack::reserved(device)))
}

/// A successful `cuMemMap` of `size` bytes of `handle` at `addr`.
pub fn on_map(addr: u64, size: u64, handle: u64) {
    if let Some((old_handle, _)) = MAPPINGS.insert(addr, handle, size) {
        // A mapping we never saw unmapped: its hold goes with it.
        drop_hold(old_handle);
    }
    hold(handle);
}

/// A successful `cuMemUnmap` of `[addr, addr + size)`: the whole mappings in it, from `addr` on;
/// what their allocations freed.
pub fn on_unmap(addr: u64, size: u64) -> Freed {
    let mut freed = Freed::default();
    let end = addr.saturating_add(size);
    let mut cur = addr;
    while cur < end {
        let Some((handle, len)) = MAPPINGS.remove(cur) else { break };
        if let Some((device, bytes)) = drop_hold(handle) {
            freed.add(FreedAllocation { handle, device, bytes });
        }
        if len == 0 {
            break;
        }
        cur = cur.saturating_add(len);
    }
    freed
}

#[cfg(test)]
mod tests {
    use super::*;

    const G: u64 = 2 << 20;

    #[test]
    fn memory_is_freed_when_the_last_reference_and_mapping_are_gone() {
        let d = 9;
        let base = memtrack::reserved(d);
        let (h1, h2) = (0x5151_0001, 0x5151_0002);
        assert_eq!(on_create(h1, d, G), base + G);
        assert_eq!(on_create(h2, d, G), base + 2 * G);
        let va = 0x7f00_0000_0000;
        on_map(va, G, h1);
        on_map(va + G, G, h2);
        // Released while mapped (the NVIDIA samples' pattern): still in use.
        assert_eq!(on_release(h1), None);
        assert_eq!(memtrack::reserved(d), base + 2 * G);
        // One unmap over both mappings frees h1 only (h2 still has its handle reference).
        let freed = on_unmap(va, 2 * G);
        assert_eq!(freed.allocations(), &[FreedAllocation { handle: h1, device: d, bytes: G }]);
        assert_eq!(memtrack::reserved(d), base + G);
        // A retained reference needs its own release.
        on_retain(h2);
        assert_eq!(on_release(h2), None);
        assert_eq!(on_release(h2), Some((d, G, base)));
        assert_eq!(on_release(h2), None, "unknown after being freed");
        assert_eq!(memtrack::reserved(d), base);
    }

    #[test]
    fn unmapping_nothing_frees_nothing_and_unknown_handles_are_ignored() {
        assert!(on_unmap(0x7e00_0000_0000, G).allocations().is_empty());
        assert_eq!(on_release(0x5151_00ff), None);
        on_map(0x7e00_0000_0000, G, 0x5151_00fe);
        assert!(on_unmap(0x7e00_0000_0000, G).allocations().is_empty());
    }

    #[test]
    fn more_frees_than_reported_keep_their_bytes_on_their_device() {
        let mut f = Freed::default();
        for i in 0..Freed::MAX as u64 {
            f.add(FreedAllocation { handle: i + 1, device: (i % 2) as u32, bytes: 1 });
        }
        f.add(FreedAllocation { handle: 99, device: 0, bytes: 10 });
        assert_eq!(f.allocations().len(), Freed::MAX);
        let on0: u64 = f.allocations().iter().filter(|a| a.device == 0).map(|a| a.bytes).sum();
        assert_eq!(on0, Freed::MAX as u64 / 2 + 10);
    }
}
