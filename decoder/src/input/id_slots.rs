//! Values keyed by string id, with memory that follows the entries held, not the largest id.
//!
//! Writers assign string ids densely (1, 2, 3 ...), so a vector indexed by id is the fast path; but a
//! damaged or hostile file may use any id, and a vector grown to it would exhaust memory. The vector
//! grows only while it stays within a constant factor of the entries it holds; ids beyond go to a hash
//! map.

use crate::intervals::FastMap;

/// Ids the vector may run ahead of the entries it holds.
const SLACK: usize = 4096;

#[derive(Debug)]
pub struct IdSlots<V> {
    dense: Vec<Option<V>>,
    sparse: FastMap<u32, V>,
    /// Entries in `dense`.
    dense_filled: usize,
}

impl<V> Default for IdSlots<V> {
    fn default() -> Self {
        IdSlots { dense: Vec::new(), sparse: FastMap::default(), dense_filled: 0 }
    }
}

impl<V> IdSlots<V> {
    #[inline]
    pub fn get(&self, id: u32) -> Option<&V> {
        match self.dense.get(id as usize) {
            Some(Some(v)) => Some(v),
            _ if self.sparse.is_empty() => None,
            _ => self.sparse.get(&id),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, id: u32) -> Option<&mut V> {
        let i = id as usize;
        if i < self.dense.len() && self.dense[i].is_some() {
            return self.dense[i].as_mut();
        }
        if self.sparse.is_empty() {
            return None;
        }
        self.sparse.get_mut(&id)
    }

    /// True when `id` may live in the vector (growing it to `id` keeps it proportionate).
    fn dense_room(&self, id: u32) -> bool {
        let i = id as usize;
        i < self.dense.len() || i <= 2 * (self.dense_filled + self.sparse.len()) + SLACK
    }

    pub fn insert(&mut self, id: u32, v: V) {
        if !self.dense_room(id) {
            self.sparse.insert(id, v);
            return;
        }
        let i = id as usize;
        if i >= self.dense.len() {
            self.dense.resize_with(i + 1, || None);
        }
        if !self.sparse.is_empty() {
            self.sparse.remove(&id);
        }
        if self.dense[i].is_none() {
            self.dense_filled += 1;
        }
        self.dense[i] = Some(v);
    }

    /// The value of `id`, made by `make` when absent. Only the path that makes a value calls out
    /// of line, after `make` has run inline: what `make` captures stays in registers on the hot path
    /// (an out-of-line call taking `make` would need it stored on every call).
    #[inline(always)]
    pub fn get_or_insert_with(&mut self, id: u32, make: impl FnOnce() -> V) -> &mut V {
        let i = id as usize;
        if i < self.dense.len() && self.dense[i].is_some() {
            return self.dense[i].as_mut().expect("checked");
        }
        if self.in_sparse(id) {
            return self.sparse.get_mut(&id).expect("checked");
        }
        self.insert_new(id, make())
    }

    /// True when `id` is held in the map.
    #[cold]
    #[inline(never)]
    fn in_sparse(&self, id: u32) -> bool {
        !self.sparse.is_empty() && self.sparse.contains_key(&id)
    }

    /// Inserts `v` for an `id` not held, and returns it.
    #[cold]
    #[inline(never)]
    fn insert_new(&mut self, id: u32, v: V) -> &mut V {
        if self.dense_room(id) {
            self.insert(id, v);
            return self.dense[id as usize].as_mut().expect("just inserted");
        }
        self.sparse.entry(id).or_insert(v)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.dense_filled + self.sparse.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Length of the vector (for tests of the bound).
    pub fn dense_len(&self) -> usize {
        self.dense.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dense_ids_use_the_vector_and_far_ids_the_map() {
        let mut s = IdSlots::default();
        for id in 1..10_000u32 {
            s.insert(id, id);
        }
        assert_eq!(s.dense_len(), 10_000);
        // Ids stepping by 2^20: the vector does not follow them.
        for k in 1..2_000u32 {
            s.insert(k << 20, k);
        }
        assert!(s.dense_len() <= 2 * s.len() + SLACK + 1, "{} for {} entries", s.dense_len(), s.len());
        assert_eq!(s.get(5 << 20), Some(&5));
        assert_eq!(s.get(7_777), Some(&7_777));
        assert_eq!(s.get(12_345), None);
        assert_eq!(s.len(), 9_999 + 1_999);
        *s.get_or_insert_with(3 << 20, || 0) += 100;
        assert_eq!(s.get(3 << 20), Some(&103));
        assert_eq!(*s.get_or_insert_with(u32::MAX, || 9), 9);
        assert_eq!(s.get(u32::MAX), Some(&9));
    }

    #[test]
    fn the_maker_runs_only_for_an_id_not_held() {
        let mut s = IdSlots::default();
        let mut made = 0;
        // Ids in the vector, in the map, and far ids: each made once, then found where it was put.
        let ids = [1u32, 2, 1, 7 << 20, 1, 7 << 20, u32::MAX, 2, u32::MAX, 5_000];
        for (k, &id) in ids.iter().enumerate() {
            let v = *s.get_or_insert_with(id, || {
                made += 1;
                k
            });
            assert_eq!(v, ids.iter().position(|&x| x == id).unwrap(), "id {id}");
        }
        assert_eq!(made, 5);
        assert_eq!(s.len(), 5);
        assert!(s.dense_len() <= 5_001);
    }

    #[test]
    fn an_id_moves_from_the_map_to_the_vector_once_it_is_in_reach() {
        let mut s = IdSlots::default();
        s.insert(100_000, 1);
        for id in 0..60_000u32 {
            s.insert(id, 0);
        }
        // 100000 is now within reach of the vector: a new value replaces the map's.
        s.insert(100_000, 2);
        assert_eq!(s.get(100_000), Some(&2));
        assert_eq!(s.len(), 60_001);
    }
}
