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
    /// Bit `id - base` is set when `id` was inserted in order (and not again since).
    bits: Vec<u64>,
    /// Ids inserted in order.
    in_order: u64,
    /// The last id inserted in order (None before the first).
    last: Option<u32>,
    /// (first id, step) of each run of ids inserted in order with one step, by id: an id's step is
    /// that of the last run that starts at or before it.
    runs: Vec<(u32, u32)>,
    /// The ids inserted out of order (their bits cleared), and their steps.
    late: SeqMap<u32, u32>,
}

impl CorrSteps {
    /// Empty, with room for `n` ids in order made up front.
    pub fn with_room(n: usize) -> CorrSteps {
        CorrSteps { bits: Vec::with_capacity(n.div_ceil(64)), ..CorrSteps::default() }
    }

    /// Word and mask of `k`'s bit, when inside the bitmap.
    #[inline]
    fn bit(&self, k: u32) -> Option<(usize, u64)> {
        let i = u64::from(k).wrapping_sub(self.base.into());
        let w = (i / 64) as usize;
        (i < 64 * self.bits.len() as u64).then_some((w, 1 << (i % 64)))
    }

    #[inline]
    pub fn insert(&mut self, k: u32, step: u32) {
        match self.last {
            Some(last) if k > last && u64::from(k - self.base) <= SPREAD * self.in_order + SLACK_BITS => {}
            None => self.base = k,
            Some(_) => return self.insert_late(k, step),
        }
        let i = (k - self.base) as usize;
        if i / 64 >= self.bits.len() {
            self.bits.resize(i / 64 + 1, 0);
        }
        self.bits[i / 64] |= 1 << (i % 64);
        if self.runs.last().is_none_or(|r| r.1 != step) {
            self.runs.push((k, step));
        }
        self.last = Some(k);
        self.in_order += 1;
    }

    #[inline(never)]
    fn insert_late(&mut self, k: u32, step: u32) {
        if let Some((w, m)) = self.bit(k) {
            self.bits[w] &= !m;
        }
        self.late.insert(k, step);
    }

    /// The step of `k`.
    #[inline]
    pub fn get(&self, k: u32) -> Option<u32> {
        self.get_at(k, &mut 0)
    }

    /// [`CorrSteps::get`], with `run` (any value; start at 0) the run the last lookup found: ids
    /// asked mostly increasing find their run there or in the next one, without a search.
    #[inline]
    pub fn get_at(&self, k: u32, run: &mut usize) -> Option<u32> {
        match self.bit(k) {
            Some((w, m)) if self.bits[w] & m != 0 => Some(self.run_of(k, run)),
            _ if self.late.is_empty() => None,
            _ => self.late.get(&k).copied(),
        }
    }

    /// The step of the run that holds `k` (an id inserted in order).
    #[inline]
    fn run_of(&self, k: u32, run: &mut usize) -> u32 {
        let runs = &self.runs;
        let holds = |r: usize| runs.get(r).is_some_and(|x| x.0 <= k) && runs.get(r + 1).is_none_or(|x| x.0 > k);
        if !holds(*run) {
            *run = if holds(*run + 1) { *run + 1 } else { runs.partition_point(|x| x.0 <= k) - 1 };
        }
        runs[*run].1
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
            let mut run = 0;
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
        assert_eq!((steps.bits.len(), steps.runs.len()), (1563, 101));
        assert_eq!((steps.get(0), steps.get(54_321), steps.get(100_001)), (None, Some(54), None));
    }
}
