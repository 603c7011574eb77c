//! A small cache of values by name pointer ([`name_key`]) in front of a hash map.
//!
//! Each key has two candidate slots (two hashes of the pointer): a few hundred hot names sit in
//! it without evicting one another, where a direct-mapped table of the same size lost about one
//! lookup in seven to collisions. The cache only answers for keys it holds; the owner keeps the
//! names (so their pointers stay theirs) and the full map.

use crate::model::Name;

/// The key of a name in pointer-keyed maps and caches: the address of its interned text (equal
/// names from one interner share it; never 0).
#[inline]
pub fn name_key(n: &Name) -> usize {
    std::sync::Arc::as_ptr(n) as *const u8 as usize
}

/// (key, value) slots, key 0 for an empty one (no name lives at address 0); `SLOTS` is a power
/// of two. The slots are a fixed array made up front, so no lookup checks a bound or an
/// allocation.
#[derive(Debug)]
pub struct PtrCache<V, const SLOTS: usize = 1024> {
    slots: Box<[(usize, V); SLOTS]>,
}

impl<V: Copy + Default, const SLOTS: usize> Default for PtrCache<V, SLOTS> {
    fn default() -> Self {
        let slots = vec![(0, V::default()); SLOTS].into_boxed_slice();
        PtrCache { slots: slots.try_into().unwrap_or_else(|_| unreachable!("SLOTS slots")) }
    }
}

impl<V: Copy + Default, const SLOTS: usize> PtrCache<V, SLOTS> {
    const BITS: u32 = SLOTS.trailing_zeros();

    /// The two candidate slots of `key`.
    #[inline]
    fn slots_of(key: usize) -> (usize, usize) {
        let h = (key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        ((h >> (64 - Self::BITS)) as usize & (SLOTS - 1), (h >> (64 - 2 * Self::BITS)) as usize & (SLOTS - 1))
    }

    /// The value of `key` (not 0), if held.
    #[inline]
    pub fn get(&self, key: usize) -> Option<V> {
        let (a, b) = Self::slots_of(key);
        let s = self.slots[a];
        if s.0 == key {
            return Some(s.1);
        }
        let s = self.slots[b];
        (s.0 == key).then_some(s.1)
    }

    /// Holds `v` for `key` (not 0): in a free candidate slot, else in the first one, whose key
    /// moves to its own other slot when that is free.
    pub fn put(&mut self, key: usize, v: V) {
        let (a, b) = Self::slots_of(key);
        let (ka, kb) = (self.slots[a].0, self.slots[b].0);
        let at = if ka == 0 || ka == key {
            a
        } else if kb == 0 || kb == key {
            b
        } else {
            let (oa, ob) = Self::slots_of(ka);
            let alt = if oa == a { ob } else { oa };
            if self.slots[alt].0 == 0 {
                self.slots[alt] = self.slots[a];
            }
            a
        };
        self.slots[at] = (key, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;
    use std::collections::HashMap;

    #[test]
    fn answers_only_what_was_put_last() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let mut c: PtrCache<u32> = PtrCache::default();
        assert_eq!(c.get(8), None);
        let mut truth: HashMap<usize, u32> = HashMap::new();
        // Pointer-like keys: aligned, clustered, some far apart; more keys than slots.
        let keys: Vec<usize> = (0..3000).map(|_| 0x5555_0000_0000 + 16 * rng.below(1 << 20) as usize).collect();
        for _ in 0..200_000 {
            let k = keys[rng.below(keys.len() as u64) as usize];
            let v = rng.below(1 << 30) as u32;
            if rng.below(2) == 0 {
                c.put(k, v);
                truth.insert(k, v);
            }
            if let Some(got) = c.get(k) {
                assert_eq!(Some(&got), truth.get(&k), "key {k:#x}");
            }
        }
    }

    #[test]
    fn a_few_hundred_hot_keys_all_stay() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let mut c: PtrCache<u32> = PtrCache::default();
        let keys: Vec<usize> = (0..200).map(|_| 0x7f00_0000_0000 + 32 * rng.below(1 << 24) as usize).collect();
        let mut misses = 0;
        for round in 0..20 {
            for (i, &k) in keys.iter().enumerate() {
                match c.get(k) {
                    Some(v) => assert_eq!(v, i as u32),
                    None => {
                        misses += 1;
                        c.put(k, i as u32);
                    }
                }
            }
            if round == 0 {
                misses = 0;
            }
        }
        // After the first round, (almost) every key is held.
        assert!(misses < 20 * 4, "{misses} misses");
    }

    #[test]
    fn two_keys_of_one_first_slot_taking_turns_both_stay() {
        type Big = PtrCache<(u32, u8), 4096>;
        let a = 16;
        let b = (2..).map(|i| 16 * i).find(|&k| Big::slots_of(k).0 == Big::slots_of(a).0).unwrap();
        let mut c = Big::default();
        for round in 0..3u8 {
            c.put(a, (1, round));
            c.put(b, (2, round));
            assert_eq!((c.get(a), c.get(b)), (Some((1, round)), Some((2, round))));
        }
        assert_eq!(c.get(32 * 4096 + 16), None);
    }
}
