//! The step position each host call's correlation id was issued in. The calls come in start order
//! and a process numbers its correlations as it issues them, so the ids mostly arrive increasing,
//! each step's in one stretch: those are kept as one bit per id (inserted or not) and the runs of
//! consecutive ids of one step, (first id, step). An id that arrives out of order (again, or
//! below the last) or far beyond the ids held goes to a hash map instead. Behaves as a hash map of
//! the same inserts would (same lookups), in a bit per id where a vector of `Option<u32>` by id
//! takes 64.

use crate::intervals::SeqMap;

/// Bits the bitmap may run ahead of the ids inserted in order (per id), beyond [`SLACK_BITS`]: ids
/// spread further go to the map, so memory follows the ids held, not their spread.
const SPREAD: u64 = 64;
const SLACK_BITS: u64 = 1 << 16;

#[derive(Debug, Default)]
pub struct CorrSteps {
    /// The id of bit 0 (the first id inserted).
    base: u32,
    /// Bit `id - base` is set when `id` was inserted in order (and not again since). Grown only
    /// by an insert that finds it too short (as far as the spread allows), so an id past the last
    /// and inside it is an insert in order.
    bits: Vec<u64>,
    /// Ids inserted in order.
    in_order: u64,
    /// The last id inserted in order (0 before the first).
    last: u32,
    /// (first id, step) of each run of ids inserted in order with one step, by id: an id's step is
    /// that of the last run that starts at or before it.
    runs: Vec<(u32, u32)>,
    /// The step of the last run.
    run_step: u32,
    /// The ids inserted out of order (their bits cleared), and their steps.
    late: SeqMap<u32, u32>,
}

/// The run of a [`CorrSteps`] the last lookup found, for [`CorrSteps::get_at`]: ids `lo` to
/// `lo + len - 1` (as far as the run reaches) have step `step`.
#[derive(Debug, Default, Clone, Copy)]
pub struct RunCursor {
    lo: u32,
    len: u64,
    step: u32,
}

impl CorrSteps {
    /// Empty, with room for `n` ids in order made up front.
    pub fn with_room(n: usize) -> CorrSteps {
        CorrSteps { bits: Vec::with_capacity(n.div_ceil(64)), ..CorrSteps::default() }
    }

    /// `k` was inserted in order (and not again since). An id below `base` wraps to a bit index
    /// past every id's, whose bit is never set.
    #[inline(always)]
    fn has_bit(&self, k: u32) -> bool {
        let i = k.wrapping_sub(self.base) as usize;
        self.bits.get(i / 64).is_some_and(|w| w >> (i % 64) & 1 != 0)
    }

    #[inline(always)]
    pub fn insert(&mut self, k: u32, step: u32) {
        // The usual case: past the last id, inside the bitmap.
        let i = k.wrapping_sub(self.base) as usize;
        match self.bits.get_mut(i / 64) {
            Some(w) if k > self.last => *w |= 1 << (i % 64),
            _ => return self.insert_any(k, step),
        }
        if step != self.run_step {
            self.runs.push((k, step));
            self.run_step = step;
        }
        self.last = k;
        self.in_order += 1;
    }

    #[inline(never)]
    fn insert_any(&mut self, k: u32, step: u32) {
        if self.in_order == 0 {
            self.base = k;
            self.bits.push(1);
            self.runs.push((k, step));
            (self.run_step, self.last, self.in_order) = (step, k, 1);
            return;
        }
        if k > self.last && u64::from(k - self.base) <= SPREAD * self.in_order + SLACK_BITS {
            // Past the bitmap, not far: grow it (doubling, as far as the spread allows) and insert.
            let words = (u64::from(k - self.base) / 64 + 1) as usize;
            let allowed = ((SPREAD * self.in_order + SLACK_BITS) / 64 + 1) as usize;
            self.bits.resize(words.max((2 * self.bits.len()).min(allowed)), 0);
            return self.insert(k, step);
        }
        if self.has_bit(k) {
            let i = (k - self.base) as usize;
            self.bits[i / 64] &= !(1 << (i % 64));
        }
        self.late.insert(k, step);
    }

    /// The step of `k`.
    #[inline]
    pub fn get(&self, k: u32) -> Option<u32> {
        self.get_at(k, &mut RunCursor::default())
    }

    /// [`CorrSteps::get`], with `run` the run the last lookup found (start at its default): ids
    /// asked mostly increasing find their run there, without a search.
    #[inline(always)]
    pub fn get_at(&self, k: u32, run: &mut RunCursor) -> Option<u32> {
        if self.has_bit(k) {
            if u64::from(k.wrapping_sub(run.lo)) >= run.len {
                *run = self.run_of(k);
            }
            Some(run.step)
        } else if self.late.is_empty() {
            None
        } else {
            self.late.get(&k).copied()
        }
    }

    /// The run that holds `k` (an id inserted in order).
    #[inline(never)]
    fn run_of(&self, k: u32) -> RunCursor {
        let r = self.runs.partition_point(|x| x.0 <= k) - 1;
        let (lo, step) = self.runs[r];
        let end = self.runs.get(r + 1).map_or(1 << 32, |x| u64::from(x.0));
        RunCursor { lo, len: end - u64::from(lo), step }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;
    use std::collections::HashMap;

    /// Mostly increasing ids with steps in stretches, some repeated, some backwards, some far: the
    /// same lookups as a hash map of the same inserts, asked in any order.
    #[test]
    fn behaves_as_a_hash_map() {
        let mut rng = XorShift(0xc0aa_5e1e_c7ed_2026);
        for round in 0..300u64 {
            let mut steps = CorrSteps::with_room(rng.index(100));
            let mut map: HashMap<u32, u32> = HashMap::new();
            let mut id = rng.below(1000) as u32;
            let mut step = 0;
            for _ in 0..rng.below(400) {
                let k = match rng.below(20) {
                    0 => id.saturating_sub(rng.below(30) as u32),
                    1 => rng.below(1 << 32) as u32,
                    2 if round % 2 == 0 => id + (1 << 20),
                    _ => {
                        id += 1 + rng.below(3) as u32 * rng.below(2) as u32;
                        id
                    }
                };
                if rng.below(15) == 0 {
                    step += 1;
                }
                let v = if rng.below(10) == 0 { rng.below(5) as u32 } else { step };
                steps.insert(k, v);
                map.insert(k, v);
            }
            let mut run = RunCursor::default();
            let mut keys: Vec<u32> = (0..id + 40).chain(map.keys().copied()).chain([u32::MAX]).collect();
            if round % 3 == 0 {
                keys.reverse();
            }
            for k in keys {
                assert_eq!(steps.get_at(k, &mut run), map.get(&k).copied(), "{k}");
                assert_eq!(steps.get(k), map.get(&k).copied(), "{k}");
            }
        }
    }

    #[test]
    fn in_order_ids_take_a_bit_each() {
        let mut steps = CorrSteps::default();
        for k in 1..=100_000u32 {
            steps.insert(k, k / 1000);
        }
        assert!(steps.late.is_empty());
        assert_eq!(steps.runs.len(), 101);
        assert!((1563..2 * 1563).contains(&steps.bits.len()), "{}", steps.bits.len());
        assert_eq!((steps.get(0), steps.get(54_321), steps.get(100_001)), (None, Some(54), None));
    }
}
