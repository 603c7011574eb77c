//! A small cache of values by name pointer ([`super::stacks::name_key`]) in front of a hash map.
//!
//! Each key has two candidate slots (two hashes of the pointer): a few hundred hot names sit in
//! it without evicting one another, where a direct-mapped table of the same size lost about one
//! lookup in seven to collisions. The cache only answers for keys it holds; the owner keeps the
//! names (so their pointers stay theirs) and the full map.

/// Slots (a power of two).
const SLOTS: usize = 1024;
const BITS: u32 = SLOTS.trailing_zeros();

/// The two candidate slots of `key`.
#[inline]
fn slots_of(key: usize) -> (usize, usize) {
    let h = (key as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    ((h >> (64 - BITS)) as usize, (h >> (64 - 2 * BITS)) as usize & (SLOTS - 1))
}

/// (key, value) slots, key 0 for an empty one (no name lives at address 0).
#[derive(Debug, Default)]
pub struct PtrCache<V> {
    slots: Vec<(usize, V)>,
}

impl<V: Copy + Default> PtrCache<V> {
    /// The value of `key` (not 0), if held.
    #[inline]
    pub fn get(&self, key: usize) -> Option<V> {
        let (a, b) = slots_of(key);
        let s = self.slots.get(a)?;
        if s.0 == key {
            return Some(s.1);
        }
        let s = self.slots[b];
        (s.0 == key).then_some(s.1)
    }

    /// Holds `v` for `key` (not 0): in a free candidate slot, else in the first one, whose key
    /// moves to its own other slot when that is free.
    pub fn put(&mut self, key: usize, v: V) {
        if self.slots.is_empty() {
            self.slots = vec![(0, V::default()); SLOTS];
        }
        let (a, b) = slots_of(key);
        let (ka, kb) = (self.slots[a].0, self.slots[b].0);
        let at = if ka == 0 || ka == key {
            a
        } else if kb == 0 || kb == key {
            b
        } else {
            let (oa, ob) = slots_of(ka);
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
}
