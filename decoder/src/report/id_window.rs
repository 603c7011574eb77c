//! A map keyed by integer ids that arrive close together (NVTX range ids, correlation ids): a
//! window of slots indexed by (id - the window's first id), growing at either end while it stays
//! proportionate to the entries held (at most `spread` slots per entry, plus [`SLACK`]), so a
//! lookup is a subtraction and a bounds check. Ids too far from the window go to a hash map, so
//! memory follows the entries held, not the spread of the ids. Behaves as the hash map alone would
//! (same entries, same lookups).

use std::collections::VecDeque;

use crate::intervals::SeqMap;

/// Slots the window may hold beyond `spread` per entry.
const SLACK: u64 = 4096;
/// Empty slots [`IdWindow::push_after`] leaves before the id it pushes.
const PUSH_GAP: u64 = 64;

#[derive(Debug)]
pub struct IdWindow<V> {
    /// The id of `slots[0]`.
    first: u64,
    slots: VecDeque<Option<V>>,
    /// Entries in `slots`.
    in_slots: usize,
    /// Entries whose id was too far from the window when inserted.
    far: SeqMap<u64, V>,
    /// Slots the window may hold per entry.
    spread: u64,
}

impl<V> Default for IdWindow<V> {
    fn default() -> Self {
        IdWindow::with_spread(2)
    }
}

impl<V> IdWindow<V> {
    /// A window of at most `spread` slots per entry held (plus [`SLACK`]).
    pub fn with_spread(spread: u64) -> Self {
        IdWindow::with_room(spread, 0)
    }

    /// [`IdWindow::with_spread`], with room for `slots` slots before the window grows.
    pub fn with_room(spread: u64, slots: usize) -> Self {
        IdWindow { first: 0, slots: VecDeque::with_capacity(slots), in_slots: 0, far: SeqMap::default(), spread }
    }

    /// Slots of the window (held or empty).
    pub fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Whether the window may grow to `slots` slots.
    #[inline]
    fn may_hold(&self, slots: u64) -> bool {
        slots <= self.spread * (self.len() as u64 + 1) + SLACK
    }

    /// Index of `id` in the window, when it is inside.
    #[inline]
    fn index(&self, id: u64) -> Option<usize> {
        let i = id.wrapping_sub(self.first);
        (i < self.slots.len() as u64).then_some(i as usize)
    }

    /// Entries held.
    #[inline]
    pub fn len(&self) -> usize {
        self.in_slots + self.far.len()
    }

    /// Whether some entries are outside the window.
    #[inline]
    pub fn has_far(&self) -> bool {
        !self.far.is_empty()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, id: u64) -> Option<&V> {
        if let Some(v) = self.index(id).and_then(|i| self.slots[i].as_ref()) {
            return Some(v);
        }
        if self.far.is_empty() {
            return None;
        }
        self.far.get(&id)
    }

    #[inline]
    pub fn get_mut(&mut self, id: u64) -> Option<&mut V> {
        if let Some(i) = self.index(id) {
            if self.slots[i].is_some() {
                return self.slots[i].as_mut();
            }
        }
        if self.far.is_empty() {
            return None;
        }
        self.far.get_mut(&id)
    }

    /// Inserts `v` under `id`; returns the value it replaces.
    #[inline]
    pub fn insert(&mut self, id: u64, v: V) -> Option<V> {
        // The usual case: the id after the window's last, nothing far.
        if id.wrapping_sub(self.first) == self.slots.len() as u64 && self.in_slots > 0 && self.far.is_empty() {
            self.slots.push_back(Some(v));
            self.in_slots += 1;
            return None;
        }
        self.insert_any(id, v)
    }

    /// Inserts `v` under `id` when `id` is at most [`PUSH_GAP`] after the window's last slot, nothing
    /// is far and the window is not empty; returns whether it did.
    #[inline(always)]
    pub fn push_after(&mut self, id: u64, v: V) -> bool {
        let gap = id.wrapping_sub(self.first).wrapping_sub(self.slots.len() as u64);
        // One more slot with one more entry keeps the window within its spread.
        let spreads = gap > 0 && !self.may_hold(self.slots.len() as u64 + gap + 1);
        if gap > PUSH_GAP || self.in_slots == 0 || !self.far.is_empty() || spreads {
            return false;
        }
        for _ in 0..gap {
            self.slots.push_back(None);
        }
        self.slots.push_back(Some(v));
        self.in_slots += 1;
        true
    }

    #[inline(never)]
    fn insert_any(&mut self, id: u64, v: V) -> Option<V> {
        let old = if self.far.is_empty() { None } else { self.far.remove(&id) };
        if let Some(i) = self.index(id) {
            let slot = &mut self.slots[i];
            if slot.is_none() {
                self.in_slots += 1;
            }
            return slot.replace(v).or(old);
        }
        let end = self.first.wrapping_add(self.slots.len() as u64);
        if self.in_slots == 0 {
            // An empty window starts again at `id`.
            self.slots.clear();
            self.first = id;
            self.slots.push_back(Some(v));
        } else if id >= end && self.may_hold(id.wrapping_sub(self.first).saturating_add(1)) {
            let gap = (id - end) as usize;
            self.slots.resize_with(self.slots.len() + gap, || None);
            self.slots.push_back(Some(v));
        } else if id < self.first && self.may_hold(end.wrapping_sub(id)) {
            for _ in 1..self.first - id {
                self.slots.push_front(None);
            }
            self.slots.push_front(Some(v));
            self.first = id;
        } else {
            self.far.insert(id, v);
            return old;
        }
        self.in_slots += 1;
        old
    }

    #[inline]
    pub fn remove(&mut self, id: u64) -> Option<V> {
        if let Some(i) = self.index(id) {
            if let Some(v) = self.slots[i].take() {
                self.in_slots -= 1;
                self.trim();
                return Some(v);
            }
        }
        if self.far.is_empty() {
            return None;
        }
        self.far.remove(&id)
    }

    /// Drops the empty slots at both ends of the window.
    fn trim(&mut self) {
        while let Some(None) = self.slots.front() {
            self.slots.pop_front();
            self.first = self.first.wrapping_add(1);
        }
        while let Some(None) = self.slots.back() {
            self.slots.pop_back();
        }
    }

    /// The lowest id in the window (the far ones aside).
    #[inline]
    pub fn first_in_window(&self) -> Option<u64> {
        // The window never starts with an empty slot.
        self.slots.front().map(|_| self.first)
    }

    /// Every entry's id, in increasing order.
    pub fn ids_in_order(&self) -> Vec<u64> {
        let window = self.slots.iter().enumerate().filter(|s| s.1.is_some());
        let mut ids: Vec<u64> = window.map(|(i, _)| self.first.wrapping_add(i as u64)).collect();
        ids.extend(self.far.keys().copied());
        ids.sort_unstable();
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;
    use std::collections::HashMap;

    /// Dense, strided, backwards, far and removed ids: the same entries and lookups as a hash map.
    #[test]
    fn behaves_as_a_hash_map() {
        let mut rng = XorShift(0x5851_f42d_4c95_7f2d);
        for round in 0..20 {
            let mut w = IdWindow::default();
            let mut map = HashMap::new();
            let mut next = 1000 + rng.below(100);
            for n in 0..20_000u64 {
                let id = match rng.below(100) {
                    0 => rng.below(1 << 50),
                    1..=4 => next.saturating_sub(rng.below(5000)),
                    5..=9 if round % 2 == 0 => next + rng.below(100_000),
                    _ => {
                        next += 1 + rng.below(3);
                        next
                    }
                };
                assert_eq!(w.insert(id, n), map.insert(id, n), "round {round} insert {id}");
                if rng.below(3) == 0 {
                    let k = next.saturating_sub(rng.below(3000));
                    assert_eq!(w.remove(k), map.remove(&k), "round {round} remove {k}");
                }
                if rng.below(5) == 0 {
                    let k = next.saturating_sub(rng.below(3000));
                    if let (Some(a), Some(b)) = (w.get_mut(k), map.get_mut(&k)) {
                        *a += 1;
                        *b += 1;
                    }
                }
                assert_eq!(w.len(), map.len());
                assert!(w.slots.front().is_none_or(|s| s.is_some()), "the window starts with an entry");
            }
            for k in 0..next + 200_000 {
                assert_eq!(w.get(k), map.get(&k), "round {round} get {k}");
            }
            for &k in map.keys() {
                assert_eq!(w.get(k), map.get(&k), "round {round} get {k}");
            }
            let mut want: Vec<u64> = map.keys().copied().collect();
            want.sort_unstable();
            assert_eq!(w.ids_in_order(), want);
            assert!(w.slots.len() as u64 <= 3 * map.len() as u64 + 3 * SLACK + 200_000, "round {round}");
        }
    }

    #[test]
    fn far_ids_do_not_grow_the_window() {
        let mut w = IdWindow::default();
        for k in 1..100u64 {
            w.insert(k << 32, k);
        }
        assert!(w.slots.len() <= 1, "{}", w.slots.len());
        assert_eq!(w.get(7 << 32), Some(&7));
    }

    #[test]
    fn removing_the_first_entries_moves_the_window() {
        let mut w = IdWindow::default();
        for k in (10..1000u64).step_by(2) {
            w.insert(k, k);
        }
        for k in (10..500u64).step_by(2) {
            assert_eq!(w.first_in_window(), Some(k));
            assert_eq!(w.remove(k), Some(k));
        }
        assert_eq!((w.first_in_window(), w.slots.len()), (Some(500), 499));
    }
}
