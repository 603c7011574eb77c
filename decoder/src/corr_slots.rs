//! A map keyed by correlation id: a process's correlation ids are dense and increasing, so most
//! entries live in a vector indexed by (id - the first id inserted), with no hashing; ids below
//! that or far beyond the entries held go to a hash map, so memory follows the entries held, not the
//! spread of the ids. Behaves as the hash map alone would (same entries, same lookups).

use crate::intervals::SeqMap;

/// Slots the vector may run ahead of the entries held.
const SLACK: u64 = 4096;

#[derive(Debug)]
pub struct CorrSlots<V> {
    /// The id of `dense[0]` (the first id inserted).
    base: u64,
    dense: Vec<Option<V>>,
    /// Entries in `dense`.
    dense_filled: usize,
    sparse: SeqMap<u64, V>,
    /// Slots made room for at the first insert (address space only until used): no regrowing
    /// and copying the vector up to there.
    room: usize,
}

impl<V> Default for CorrSlots<V> {
    fn default() -> Self {
        CorrSlots::with_room(0)
    }
}

impl<V> CorrSlots<V> {
    /// Empty, with room for `room` slots made at the first insert.
    pub fn with_room(room: usize) -> Self {
        CorrSlots { base: 0, dense: Vec::new(), dense_filled: 0, sparse: SeqMap::default(), room }
    }

    /// Index of `k` in the vector, when it is inside.
    #[inline]
    fn index(&self, k: u64) -> Option<usize> {
        let i = k.wrapping_sub(self.base);
        (i < self.dense.len() as u64).then_some(i as usize)
    }

    /// [`CorrSlots::get`] of an id whose entry is in the vector (None for any other).
    #[inline(always)]
    pub fn get_in_vector(&self, k: u64) -> Option<&V> {
        self.index(k).and_then(|i| self.dense[i].as_ref())
    }

    #[inline]
    pub fn get(&self, k: u64) -> Option<&V> {
        match self.index(k).and_then(|i| self.dense[i].as_ref()) {
            Some(v) => Some(v),
            None if self.sparse.is_empty() => None,
            None => self.sparse.get(&k),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, k: u64) -> Option<&mut V> {
        if let Some(i) = self.index(k) {
            if self.dense[i].is_some() {
                return self.dense[i].as_mut();
            }
        }
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse.get_mut(&k)
    }

    #[inline]
    pub fn remove(&mut self, k: u64) -> Option<V> {
        if let Some(i) = self.index(k) {
            if let Some(v) = self.dense[i].take() {
                self.dense_filled -= 1;
                return Some(v);
            }
        }
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse.remove(&k)
    }

    #[inline(always)]
    pub fn insert(&mut self, k: u64, v: V) {
        // The usual case: the next id, nothing in the map.
        let i = k.wrapping_sub(self.base);
        if i == self.dense.len() as u64 && i != 0 && self.sparse.is_empty() {
            self.dense.push(Some(v));
            self.dense_filled += 1;
            return;
        }
        self.insert_any(k, v);
    }

    #[inline(never)]
    fn insert_any(&mut self, k: u64, v: V) {
        if self.dense.is_empty() {
            self.base = k;
            self.dense.reserve(self.room);
        }
        if !self.sparse.is_empty() {
            self.sparse.remove(&k);
        }
        let i = k.wrapping_sub(self.base);
        let len = self.dense.len() as u64;
        if i < len {
            let slot = &mut self.dense[i as usize];
            if slot.is_none() {
                self.dense_filled += 1;
            }
            *slot = Some(v);
        } else if i == len {
            // The next id: the usual case.
            self.dense.push(Some(v));
            self.dense_filled += 1;
        } else if i <= 2 * self.len() as u64 + SLACK {
            // Grow the vector to `k` while it stays proportionate to the entries held.
            self.dense.resize_with(i as usize, || None);
            self.dense.push(Some(v));
            self.dense_filled += 1;
        } else {
            self.sparse.insert(k, v);
        }
    }

    /// Removes every entry, keeping the vector's memory.
    pub fn clear(&mut self) {
        self.base = 0;
        self.dense.clear();
        self.dense_filled = 0;
        self.sparse = SeqMap::default();
    }

    /// Entries held.
    #[inline]
    pub fn len(&self) -> usize {
        self.dense_filled + self.sparse.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every value (the vector's in id order, then the map's).
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.dense.iter().flatten().chain(self.sparse.values())
    }

    /// Every entry, consuming the map (the vector's in id order, then the map's).
    pub fn into_entries(self) -> impl Iterator<Item = (u64, V)> {
        let base = self.base;
        let dense =
            self.dense.into_iter().enumerate().filter_map(move |(i, v)| Some((base.wrapping_add(i as u64), v?)));
        dense.chain(self.sparse)
    }

    /// Every value, consuming the map.
    pub fn into_values(self) -> impl Iterator<Item = V> {
        self.into_entries().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Dense, strided, backwards and far ids: the same entries and lookups as a hash map.
    #[test]
    fn behaves_as_a_hash_map() {
        let mut slots = CorrSlots::default();
        let mut map = HashMap::new();
        let mut ids: Vec<u64> = (1000..6000).collect();
        ids.extend((6000..40_000).step_by(3));
        ids.extend([5, 999, 1 << 40, u64::MAX, 1001, 45_000, 30_001]);
        for (n, &k) in ids.iter().enumerate() {
            slots.insert(k, n);
            map.insert(k, n);
            if n % 7 == 0 {
                assert_eq!(slots.remove(k - 1), map.remove(&(k - 1)), "{k}");
            }
            if n % 5 == 0 {
                if let (Some(a), Some(b)) = (slots.get_mut(k - 2), map.get_mut(&(k - 2))) {
                    *a += 1;
                    *b += 1;
                }
            }
        }
        assert_eq!(slots.len(), map.len());
        for k in (0..50_000).chain([1 << 40, u64::MAX]) {
            assert_eq!(slots.get(k), map.get(&k), "{k}");
            if let Some(v) = slots.get_in_vector(k) {
                assert_eq!(Some(v), map.get(&k), "{k}");
            }
        }
        let mut values: Vec<usize> = slots.values().copied().collect();
        values.sort_unstable();
        let mut entries: Vec<(u64, usize)> = slots.into_entries().collect();
        entries.sort_unstable();
        let mut expected: Vec<(u64, usize)> = map.into_iter().collect();
        expected.sort_unstable();
        let mut expected_values: Vec<usize> = expected.iter().map(|e| e.1).collect();
        expected_values.sort_unstable();
        assert_eq!(entries, expected);
        assert_eq!(values, expected_values);
    }

    #[test]
    fn far_ids_do_not_grow_the_vector() {
        let mut slots = CorrSlots::default();
        for k in 0..100u64 {
            slots.insert(k << 32, k);
        }
        assert!(slots.dense.len() <= 1, "{}", slots.dense.len());
        assert_eq!(slots.get(7 << 32), Some(&7));
    }

    #[test]
    fn cleared_slots_start_again_from_the_next_id() {
        let mut slots = CorrSlots::default();
        for k in 100..200u64 {
            slots.insert(k, k);
        }
        slots.insert(1 << 40, 1);
        slots.clear();
        assert!(slots.is_empty() && slots.get(150).is_none() && slots.get(1 << 40).is_none());
        for k in 5000..5100u64 {
            slots.insert(k, k + 1);
        }
        assert_eq!((slots.len(), slots.dense.len(), slots.get(5050)), (100, 100, Some(&5051)));
        assert_eq!(slots.get(150), None);
    }
}
