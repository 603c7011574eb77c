//! Kernel GPU time per (NVTX stack, kernel name) for the flame graph, and the kernels that wait
//! for their range's stack to be named.
//!
//! Kernel names are numbered per process (by their interned pointer, the name kept so the pointer
//! stays its own), so a kernel costs one pointer lookup and then plain integers: a waiting kernel is
//! a vector entry, not a hash map entry, and the sums are a table indexed by two small integers
//! ([`Sums`]).

use crate::intervals::FastMap;
use crate::model::{Name, RangeId};
use crate::ptr_cache::{name_key, PtrCache};

/// Waiting kernels held before duplicates (same range and name) are merged.
const MIN_COMPACT: usize = 1 << 16;

/// A kernel waiting for the stack of its range: (range, name index, GPU ns).
type Waiting = (RangeId, u32, u64);

#[derive(Debug, Default)]
pub struct KernelTimes {
    /// Kernel names by index.
    names: Vec<Name>,
    /// Name pointer -> index in `names`.
    index: FastMap<usize, u32>,
    /// A cache of `index`.
    recent: PtrCache<u32>,
    /// GPU ns per (stack id, name index).
    sums: Sums,
    /// Kernels whose range's stack is not named yet.
    waiting: Vec<Waiting>,
    /// `waiting` is compacted (duplicates merged) when it reaches this length, so it stays bounded
    /// by distinct (range, name) pairs as the hash map it replaces was.
    compact_at: usize,
}

impl KernelTimes {
    /// The index of kernel name `n`.
    #[inline]
    pub fn name(&mut self, n: &Name) -> u32 {
        match self.recent.get(name_key(n)) {
            Some(i) => i,
            None => self.name_any(n),
        }
    }

    /// [`KernelTimes::name`] past the cache.
    #[inline(never)]
    fn name_any(&mut self, n: &Name) -> u32 {
        let key = name_key(n);
        let i = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.names.len() as u32;
                self.names.push(n.clone());
                self.index.insert(key, i);
                i
            }
        };
        self.recent.put(key, i);
        i
    }

    /// `ns` (> 0) more GPU time for kernel name `name` under stack `stack`.
    #[inline]
    pub fn add(&mut self, stack: u32, name: u32, ns: u64) {
        self.sums.add(stack, name, ns);
    }

    /// A kernel of range `r` whose stack is not known yet.
    #[inline]
    pub fn wait(&mut self, r: RangeId, name: u32, ns: u64) {
        self.waiting.push((r, name, ns));
        if self.waiting.len() >= self.compact_at.max(MIN_COMPACT) {
            self.compact();
        }
    }

    /// Kernels waiting.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// Merges waiting entries of the same (range, name).
    #[cold]
    fn compact(&mut self) {
        self.waiting.sort_unstable_by_key(|w| (w.0, w.1));
        self.waiting.dedup_by(|later, kept| {
            let same = later.0 == kept.0 && later.1 == kept.1;
            if same {
                kept.2 += later.2;
            }
            same
        });
        self.compact_at = 2 * self.waiting.len();
    }

    /// Adds every waiting kernel whose range `stack_of` names; the others keep waiting.
    pub fn sweep(&mut self, mut stack_of: impl FnMut(RangeId) -> Option<u32>) {
        let waiting = &mut self.waiting;
        let mut kept = 0;
        let mut i = 0;
        // Kernels of one range arrive together: name each range once per run of its kernels.
        while i < waiting.len() {
            let r = waiting[i].0;
            match stack_of(r) {
                Some(s) => i += self.sums.add_run(s, &waiting[i..]),
                None => {
                    let run = waiting[i..].iter().position(|w| w.0 != r).unwrap_or(waiting.len() - i);
                    if kept != i {
                        waiting.copy_within(i..i + run, kept);
                    }
                    kept += run;
                    i += run;
                }
            }
        }
        waiting.truncate(kept);
    }

    /// The sums, consumed: (stack id, kernel name, GPU ns), each pair once, in no particular order.
    pub fn into_sums(self) -> impl Iterator<Item = (u32, Name, u64)> {
        let names = self.names;
        self.sums.into_iter().map(move |(s, n, ns)| (s, names[n as usize].clone(), ns))
    }
}

/// Table slots allowed beyond four per pair held.
const TABLE_SLACK: usize = 1 << 16;

/// GPU ns per (stack id, name index), both small dense integers: a row per stack indexed by name,
/// so an addition is two bounds checks, not a hash. Rows grow while the table stays proportionate
/// to the pairs held (at most four slots per pair plus [`TABLE_SLACK`]); a pair beyond that goes to
/// a hash map, so memory follows the pairs held. A pair spilled there moves into its row when the
/// row has grown to reach it, so every pair is held in one place.
#[derive(Debug, Default)]
struct Sums {
    /// Per stack: ns per name index (0 = none yet).
    rows: Vec<Vec<u64>>,
    /// Slots in `rows`, and how many are nonzero.
    slots: usize,
    filled: usize,
    spill: FastMap<u64, u64>,
}

impl Sums {
    /// `ns` (> 0) more for (`stack`, `name`).
    #[inline]
    fn add(&mut self, stack: u32, name: u32, ns: u64) {
        if let Some(slot) = self.rows.get_mut(stack as usize).and_then(|r| r.get_mut(name as usize)) {
            if *slot != 0 {
                *slot += ns;
                return;
            }
        }
        self.add_new(stack, name, ns);
    }

    /// Adds the leading kernels of `run` of its first kernel's range, under `stack`: the row is
    /// looked up once, not per kernel. Returns how many were added.
    fn add_run(&mut self, stack: u32, run: &[Waiting]) -> usize {
        let r = run[0].0;
        let mut done = 0;
        loop {
            if let Some(row) = self.rows.get_mut(stack as usize) {
                // Up to the end of the run or the first kernel whose slot is empty or beyond.
                done += run[done..]
                    .iter()
                    .position(|&(wr, name, ns)| {
                        let slot = match row.get_mut(name as usize) {
                            Some(slot) if *slot != 0 && wr == r => slot,
                            _ => return true,
                        };
                        *slot += ns;
                        false
                    })
                    .unwrap_or(run.len() - done);
            }
            match run.get(done) {
                Some(&(wr, name, ns)) if wr == r => {
                    self.add_new(stack, name, ns);
                    done += 1;
                }
                _ => return done,
            }
        }
    }

    /// [`Sums::add`] to an empty slot, a slot beyond its row, or a row not made yet.
    #[cold]
    #[inline(never)]
    fn add_new(&mut self, stack: u32, name: u32, ns: u64) {
        let (s, n) = (stack as usize, name as usize);
        let row_len = self.rows.get(s).map_or(0, |r| r.len());
        if n >= row_len {
            // The slots the row gains, and the empty rows made before it (counted as one slot each).
            let more = n + 1 - row_len + s.saturating_sub(self.rows.len());
            if self.slots + more > 4 * (self.filled + 1) + TABLE_SLACK {
                *self.spill.entry(((stack as u64) << 32) | name as u64).or_default() += ns;
                return;
            }
            if s >= self.rows.len() {
                self.rows.resize_with(s + 1, Vec::new);
            }
            self.rows[s].resize(n + 1, 0);
            self.slots += n + 1 - row_len;
        }
        let key = ((stack as u64) << 32) | name as u64;
        let spilled = if self.spill.is_empty() { 0 } else { self.spill.remove(&key).unwrap_or(0) };
        let slot = &mut self.rows[s][n];
        if *slot == 0 {
            self.filled += 1;
        }
        *slot += ns + spilled;
    }

    /// (stack, name index, ns) for every pair held, each once, in no particular order.
    fn into_iter(self) -> impl Iterator<Item = (u32, u32, u64)> {
        let rows = self.rows.into_iter().enumerate().flat_map(|(s, row)| {
            row.into_iter().enumerate().filter(|&(_, ns)| ns != 0).map(move |(n, ns)| (s as u32, n as u32, ns))
        });
        rows.chain(self.spill.into_iter().map(|(k, ns)| ((k >> 32) as u32, k as u32, ns)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;
    use std::collections::HashMap;

    #[test]
    fn sums_match_a_map_of_every_kernel() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        let names: Vec<Name> = ["a", "b", "c", "d"].iter().map(|&n| n.into()).collect();
        let mut t = KernelTimes::default();
        // Ground truth: (stack, name) -> ns, ranges named by range id % 7 once "complete".
        let mut want: HashMap<(u32, String), u64> = HashMap::new();
        let stack_of = |r: RangeId| (r.0 % 7) as u32;
        let mut complete_below = 0u64;
        for i in 0..300_000u64 {
            let n = &names[rng.below(4) as usize];
            let ns = 1 + rng.below(1000);
            let r = RangeId(i / 50 + rng.below(3));
            *want.entry((stack_of(r), n.to_string())).or_default() += ns;
            let idx = t.name(n);
            if r.0 < complete_below {
                t.add(stack_of(r), idx, ns);
            } else {
                t.wait(r, idx, ns);
            }
            // Sweeps rare enough that waiting kernels pile up past MIN_COMPACT and are merged.
            if rng.below(60_000) == 0 {
                complete_below = i / 50;
                t.sweep(|r| (r.0 < complete_below).then(|| stack_of(r)));
                assert!(t.waiting.iter().all(|w| w.0 .0 >= complete_below));
            }
            assert!(t.waiting() < MIN_COMPACT.max(8 * (i as usize / 50 + 3)));
        }
        assert!(t.compact_at > 0, "the test compacts");
        t.sweep(|r| Some(stack_of(r)));
        assert_eq!(t.waiting(), 0);
        let mut got: HashMap<(u32, String), u64> = HashMap::new();
        for (s, n, ns) in t.into_sums() {
            *got.entry((s, n.to_string())).or_default() += ns;
        }
        want.retain(|_, ns| *ns > 0);
        got.retain(|_, ns| *ns > 0);
        assert_eq!(got, want);
    }

    #[test]
    fn runs_add_as_kernels_one_by_one() {
        let mut rng = XorShift(0x5bd1_e995_1234_5678);
        for round in 0..10 {
            let (mut by_run, mut one_by_one) = (Sums::default(), Sums::default());
            let spread = if round % 2 == 0 { 40 } else { 80_000 };
            let mut waiting: Vec<Waiting> = Vec::new();
            for i in 0..30_000u64 {
                let n = if rng.below(8) == 0 { rng.below(spread) } else { rng.below(20) } as u32;
                waiting.push((RangeId(i / (1 + rng.below(40))), n, 1 + rng.below(1000)));
            }
            let mut i = 0;
            while i < waiting.len() {
                let s = rng.below(30) as u32;
                let done = by_run.add_run(s, &waiting[i..]);
                let run = waiting[i..].iter().take_while(|w| w.0 == waiting[i].0).count();
                assert_eq!(done, run, "round {round}: the whole run of range {:?}", waiting[i].0);
                for &(_, n, ns) in &waiting[i..i + run] {
                    one_by_one.add(s, n, ns);
                }
                i += run;
            }
            let collect = |s: Sums| {
                let mut m: HashMap<(u32, u32), u64> = HashMap::new();
                for (s, n, ns) in s.into_iter() {
                    assert!(m.insert((s, n), ns).is_none());
                }
                m
            };
            assert_eq!(collect(by_run), collect(one_by_one), "round {round}");
        }
    }

    #[test]
    fn a_spilled_pair_moves_into_its_grown_row() {
        let mut sums = Sums::default();
        // Too far for an empty table: spilled.
        sums.add(0, 100_000, 5);
        assert_eq!(sums.spill.len(), 1);
        // Enough pairs held that row 0 may now reach name 100 000.
        for n in 0..12_000 {
            sums.add(1, n, 1);
        }
        sums.add(0, 100_000, 7);
        assert!(sums.spill.is_empty(), "the spilled part moved into the row");
        let got: Vec<(u32, u32, u64)> = sums.into_iter().filter(|p| p.0 == 0).collect();
        assert_eq!(got, [(0, 100_000, 12)]);
    }

    #[test]
    fn sums_table_matches_a_hash_map() {
        let mut rng = XorShift(0x0123_4567_89ab_cdef);
        for round in 0..20 {
            let mut sums = Sums::default();
            let mut want: HashMap<(u32, u32), u64> = HashMap::new();
            // Some rounds spread names far apart, so pairs spill and rows grow past spilled pairs.
            let spread = if round % 2 == 0 { 50 } else { 50_000 };
            for _ in 0..20_000 {
                let s = rng.below(40) as u32;
                let n = if rng.below(4) == 0 { rng.below(spread) } else { rng.below(30) } as u32;
                let ns = 1 + rng.below(1000);
                sums.add(s, n, ns);
                *want.entry((s, n)).or_default() += ns;
            }
            if round % 2 == 1 {
                assert!(!sums.spill.is_empty(), "round {round} spills");
            }
            assert_eq!(sums.slots, sums.rows.iter().map(|r| r.len()).sum::<usize>());
            assert_eq!(sums.filled, sums.rows.iter().flatten().filter(|&&ns| ns != 0).count());
            assert!(sums.slots <= 4 * (sums.filled + 1) + TABLE_SLACK);
            let mut got: HashMap<(u32, u32), u64> = HashMap::new();
            for (s, n, ns) in sums.into_iter() {
                assert!(got.insert((s, n), ns).is_none(), "round {round}: ({s}, {n}) held twice");
            }
            assert_eq!(got, want, "round {round}");
        }
    }
}
