//! Items that arrive as interleaved sorted runs (GPU work in time order per stream, host calls in
//! time order per thread, CUPTI delivering them in batches), put in key order in linear time: each
//! item joins the run it extends as it arrives, and [`Runs::into_sorted`] merges the runs, instead
//! of a full sort. The result is exactly that of a stable sort by key.

/// An item with a sort key.
pub trait Keyed {
    type Key: Ord + Copy;
    fn key(&self) -> Self::Key;
}

use std::sync::atomic::{AtomicUsize, Ordering};

/// Most runs kept apart; items that fit none wait unsorted until the end.
const MAX_RUNS: usize = 16;

/// The lengths of the runs (by order of opening, then the unsorted items) of the last [`Runs`]
/// sorted with these hints, and which of them the others were merged into, for the next one to
/// reserve up front: the next process of a job usually looks like the last, and a run that never
/// outgrows its room is never copied to grow. Room reserved and not used is not touched, so it
/// takes no memory.
#[derive(Debug)]
pub struct SizeHints {
    lens: [AtomicUsize; MAX_RUNS + 1],
    /// The run that held all items in the end (none: `usize::MAX`).
    target: AtomicUsize,
}

impl SizeHints {
    pub const fn new() -> SizeHints {
        SizeHints { lens: [const { AtomicUsize::new(0) }; MAX_RUNS + 1], target: AtomicUsize::new(usize::MAX) }
    }

    /// Room for run `i` (or the unsorted items, `MAX_RUNS`): its last length and an eighth more;
    /// for the run the others were merged into, their lengths all together and an eighth more.
    fn room(&self, i: usize) -> usize {
        let n = if i == self.target.load(Ordering::Relaxed) {
            self.lens.iter().map(|n| n.load(Ordering::Relaxed)).sum()
        } else {
            self.lens[i].load(Ordering::Relaxed)
        };
        n + n / 8
    }

    fn record(&self, i: usize, len: usize) {
        self.lens[i].store(len, Ordering::Relaxed);
    }

    /// `list` (the items of the last runs sorted with these hints), emptied, to be the list of
    /// the run the others were merged into in the next [`Runs`]: the pages that run fills before
    /// the merge stay in memory, those past them are given back (cut off, then reserved again:
    /// in place, without copying, as the room after the cut is free).
    pub fn spare<T>(&self, mut list: Vec<T>) -> Vec<T> {
        let target = self.target.load(Ordering::Relaxed);
        let n = self.lens.get(target).map_or(0, |n| n.load(Ordering::Relaxed));
        list.clear();
        list.shrink_to(n + n / 8);
        list.reserve(self.room(target.min(MAX_RUNS)));
        list
    }
}

impl Default for SizeHints {
    fn default() -> Self {
        SizeHints::new()
    }
}

/// Items collected into sorted runs.
///
/// Each item joins the run whose last key is the greatest at or below its own (a new run when
/// none is). The runs' last keys then strictly decrease from one run to the next, which stays so
/// (an item only ever raises its run's last key to below the previous run's), and an item equal
/// to an earlier one always lands in that one's run or a later one, so a merge that takes equal
/// keys from the earlier run first keeps arrival order among equals.
#[derive(Debug)]
pub struct Runs<T: Keyed> {
    /// Never empty each; last keys strictly decreasing.
    runs: Vec<Vec<T>>,
    /// Items that fit no run once [`MAX_RUNS`] were open, in arrival order (sorted at the end).
    mixed: Vec<T>,
    /// The run the last item joined, and the one joined before it.
    recent: usize,
    before: usize,
    /// The last key of run `recent` (None before the first run) and of the run before it (None
    /// for the first run): an item from the one up to below the other extends run `recent`.
    recent_last: Option<T::Key>,
    recent_above: Option<T::Key>,
    /// Where the lengths of the last runs are kept (none: runs start small).
    hints: Option<&'static SizeHints>,
    /// An empty list for the run the hints say the others will be merged into (its pages may be
    /// in memory already, where a new list's are mapped and zeroed anew).
    spare: Vec<T>,
}

impl<T: Keyed> Default for Runs<T> {
    fn default() -> Self {
        Runs {
            runs: Vec::new(),
            mixed: Vec::new(),
            recent: 0,
            before: 0,
            recent_last: None,
            recent_above: None,
            hints: None,
            spare: Vec::new(),
        }
    }
}

/// Pushes onto a run, a full run growing to four times its length (not twice): a run grows by
/// copying what it holds (below the allocator's mmap threshold), a third as much in all this way.
/// The room not yet used is not touched, so it takes no memory.
#[inline(always)]
fn push_grow<T>(run: &mut Vec<T>, x: T) {
    if run.len() == run.capacity() {
        run.reserve(3 * run.len());
    }
    run.push(x);
}

/// The last key of a run (runs are never empty).
fn last_key<T: Keyed>(run: &[T]) -> Option<T::Key> {
    run.last().map(Keyed::key)
}

impl<T: Keyed> Runs<T> {
    /// Runs that reserve the room `hints` give and leave their lengths there when sorted; the
    /// run the others were merged into last time starts in `spare` (from [`SizeHints::spare`]).
    pub fn with_hints(hints: &'static SizeHints, spare: Vec<T>) -> Runs<T> {
        Runs { hints: Some(hints), spare, ..Runs::default() }
    }

    /// A list for run `i` (or the unsorted items, `MAX_RUNS`), with the room its hint gives.
    fn new_list(&mut self, i: usize) -> Vec<T> {
        let Some(h) = self.hints else { return Vec::with_capacity(1) };
        let room = h.room(i).max(1);
        if i == h.target.load(Ordering::Relaxed) {
            let mut list = std::mem::take(&mut self.spare);
            list.reserve(room);
            return list;
        }
        Vec::with_capacity(room)
    }

    pub fn len(&self) -> usize {
        self.runs.iter().map(Vec::len).sum::<usize>() + self.mixed.len()
    }

    pub fn is_empty(&self) -> bool {
        self.runs.is_empty() && self.mixed.is_empty()
    }

    #[inline(always)]
    pub fn push(&mut self, x: T) {
        let k = x.key();
        // Most items extend the run the previous one joined: that run when it is still the first
        // whose last key is at or below `k` (the keys around it are kept at hand).
        if self.recent_last.is_some_and(|l| l <= k) && self.recent_above.is_none_or(|a| k < a) {
            if let Some(run) = self.runs.get_mut(self.recent) {
                push_grow(run, x);
                self.recent_last = Some(k);
                return;
            }
        }
        self.push_other(x, k);
    }

    /// [`Runs::push`] to a run other than the last one joined: the one joined before it (streams
    /// taking turns), else the first that fits.
    #[inline(never)]
    fn push_other(&mut self, x: T, k: T::Key) {
        let r = self.before;
        if self.is_first_fit(r, k) {
            push_grow(&mut self.runs[r], x);
            self.joined(r);
        } else {
            self.push_slow(x, k);
        }
    }

    /// An item joined run `r`: it becomes the recent run.
    #[inline(always)]
    fn joined(&mut self, r: usize) {
        if r != self.recent {
            (self.recent, self.before) = (r, self.recent);
        }
        self.recent_last = last_key(&self.runs[r]);
        self.recent_above = r.checked_sub(1).and_then(|a| last_key(&self.runs[a]));
    }

    /// Run `r` is the first whose last key is at or below `k` (last keys strictly decrease).
    #[inline(always)]
    fn is_first_fit(&self, r: usize, k: T::Key) -> bool {
        r < self.runs.len()
            && last_key(&self.runs[r]).is_some_and(|l| l <= k)
            && (r == 0 || last_key(&self.runs[r - 1]).is_some_and(|l| k < l))
    }

    #[inline(never)]
    fn push_slow(&mut self, x: T, k: T::Key) {
        let r = match self.runs.iter().position(|run| last_key(run).is_some_and(|l| l <= k)) {
            Some(r) => {
                push_grow(&mut self.runs[r], x);
                r
            }
            None if self.runs.len() < MAX_RUNS => {
                let mut run = self.new_list(self.runs.len());
                run.push(x);
                self.runs.push(run);
                self.runs.len() - 1
            }
            None => {
                if self.mixed.capacity() == 0 {
                    self.mixed = self.new_list(MAX_RUNS);
                }
                self.mixed.push(x);
                return;
            }
        };
        self.joined(r);
    }
}

impl<T: Keyed + Copy> Runs<T> {
    /// All items in key order, equal keys in arrival order: neighbouring runs merged two at a
    /// time, the pair with the fewest items first (of equal keys, the earlier run's first), each
    /// merge in the larger run's own list.
    pub fn into_sorted(self) -> Vec<T> {
        let Runs { mut runs, mut mixed, hints, .. } = self;
        if let Some(h) = hints {
            for i in 0..MAX_RUNS {
                h.record(i, runs.get(i).map_or(0, Vec::len));
            }
            h.record(MAX_RUNS, mixed.len());
        }
        // Which run each list began as (the unsorted items: `MAX_RUNS`).
        let mut origin: Vec<usize> = (0..runs.len()).collect();
        if !mixed.is_empty() {
            // An item equal to one in `mixed` arrived after it: `mixed` merges last among equals.
            mixed.sort_by_key(Keyed::key);
            runs.push(mixed);
            origin.push(MAX_RUNS);
        }
        while runs.len() > 1 {
            let i = (0..runs.len() - 1).min_by_key(|&i| runs[i].len() + runs[i + 1].len()).unwrap_or(0);
            let b = runs.remove(i + 1);
            let a = std::mem::take(&mut runs[i]);
            let b_origin = origin.remove(i + 1);
            runs[i] = if a.len() >= b.len() {
                merge_into(a, &b, true)
            } else {
                origin[i] = b_origin;
                merge_into(b, &a, false)
            };
        }
        if let Some(h) = hints {
            h.target.store(origin.first().copied().unwrap_or(usize::MAX), Ordering::Relaxed);
        }
        runs.pop().unwrap_or_default()
    }
}

/// Two lists sorted by key merged in `run`'s own list, grown by `other`'s length (a large list
/// grows in place, without copying: only the pages for `other`'s length are new). Of equal keys,
/// `run`'s first when `run_first`, else `other`'s. The greatest `other.len()` items are merged
/// forwards onto the end of `run`, then the rest backwards into the room they leave, each item
/// copied once; items come in stretches from one list (streams take turns), each found by
/// comparing keys, then copied at once.
fn merge_into<T: Keyed + Copy>(mut run: Vec<T>, other: &[T], run_first: bool) -> Vec<T> {
    // Whether an item of `other` with key `ko` goes after one of `run` with key `kr`.
    let other_after = |ko: T::Key, kr: T::Key| if run_first { ko >= kr } else { ko > kr };
    let (r, m) = (run.len(), other.len());
    // The first `r` items of the result: `run[..p]` and `other[..q]`, p + q = r.
    // `other[q - 1]` goes before `run[r - q]` for every q up to that one, after it beyond.
    let (mut q, mut hi) = (0, m.min(r));
    while q < hi {
        let mid = q + (hi - q).div_ceil(2);
        if other_after(other[mid - 1].key(), run[r - mid].key()) {
            hi = mid - 1;
        } else {
            q = mid;
        }
    }
    let p = r - q;
    // The last `m`, merged forwards onto the end.
    run.reserve(m);
    let (mut i, mut j) = (p, q);
    while i < r && j < m {
        let (kr, ko) = (run[i].key(), other[j].key());
        if other_after(ko, kr) {
            let n = run[i..r].iter().take_while(|x| other_after(ko, x.key())).count();
            run.extend_from_within(i..i + n);
            i += n;
        } else {
            let n = other[j..].iter().take_while(|y| !other_after(y.key(), kr)).count();
            run.extend_from_slice(&other[j..j + n]);
            j += n;
        }
    }
    run.extend_from_within(i..r);
    run.extend_from_slice(&other[j..]);
    // The first `r` backwards, the greatest left to the last free place (past the items of `run`
    // not yet placed).
    let (mut i, mut j) = (p, q);
    while i > 0 && j > 0 {
        let (kr, ko) = (run[i - 1].key(), other[j - 1].key());
        if other_after(ko, kr) {
            let n = other[..j].iter().rev().take_while(|y| other_after(y.key(), kr)).count();
            run[i + j - n..i + j].copy_from_slice(&other[j - n..j]);
            j -= n;
        } else {
            let n = run[..i].iter().rev().take_while(|x| !other_after(ko, x.key())).count();
            run.copy_within(i - n..i, i + j - n);
            i -= n;
        }
    }
    // What is left of `run` is in place; what is left of `other` goes first.
    run[..j].copy_from_slice(&other[..j]);
    run
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct Item {
        key: (u64, u64),
        seq: usize,
    }

    impl Keyed for Item {
        type Key = (u64, u64);
        fn key(&self) -> (u64, u64) {
            self.key
        }
    }

    fn check(keys: &[(u64, u64)]) {
        let items: Vec<Item> = keys.iter().enumerate().map(|(seq, &key)| Item { key, seq }).collect();
        let mut want = items.clone();
        want.sort_by_key(|x| x.key);
        let mut runs = Runs::default();
        for &x in &items {
            runs.push(x);
            // The keys at hand are those of the recent run; the runs' last keys decrease.
            let r = runs.recent;
            assert_eq!(runs.recent_last, last_key(&runs.runs[r]));
            assert_eq!(runs.recent_above, r.checked_sub(1).and_then(|a| last_key(&runs.runs[a])));
            assert!(runs.runs.windows(2).all(|w| last_key(&w[1]) < last_key(&w[0])));
        }
        assert_eq!(runs.len(), items.len());
        assert_eq!(runs.into_sorted(), want);
    }

    #[test]
    fn interleaved_streams_merge_as_a_stable_sort() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for streams in [1, 2, 3, 5, 8, 16, 17, 40] {
            for round in 0..20 {
                // Each stream advances in time; batches of a random stream arrive in turn, with
                // coarse times so that equal keys (across streams and within one) are common.
                let mut clock = vec![0u64; streams];
                let mut keys = Vec::new();
                while keys.len() < 2000 {
                    let s = (rng.next_u64() % streams as u64) as usize;
                    for _ in 0..1 + rng.next_u64() % 30 {
                        clock[s] += rng.next_u64() % 3;
                        keys.push((clock[s], clock[s] + rng.next_u64() % 2 * (round % 3)));
                    }
                }
                check(&keys);
            }
        }
    }

    #[test]
    fn hinted_runs_reserve_the_last_lengths_and_sort_the_same() {
        static HINTS: SizeHints = SizeHints::new();
        let mut rng = XorShift(777);
        let mut last_lens: Option<Vec<usize>> = None;
        let mut spare: Vec<Item> = Vec::new();
        for round in 0..6 {
            // Three streams taking turns, the same shape each round.
            let mut clock = [0u64; 3];
            let mut keys = Vec::new();
            for _ in 0..3000 {
                let s = (rng.next_u64() % 3) as usize;
                clock[s] += 1 + rng.next_u64() % 5;
                keys.push((clock[s] + 1000 * (2 - s as u64) * (round + 1), 0));
            }
            let items: Vec<Item> = keys.iter().enumerate().map(|(seq, &key)| Item { key, seq }).collect();
            let target = HINTS.target.load(Ordering::Relaxed);
            let mut runs = Runs::with_hints(&HINTS, std::mem::take(&mut spare));
            for &x in &items {
                runs.push(x);
            }
            let lens: Vec<usize> = runs.runs.iter().map(Vec::len).collect();
            if let Some(last) = &last_lens {
                for (run, n) in runs.runs.iter().zip(last) {
                    assert!(run.capacity() >= *n, "round {round}: room for the last length {n}");
                }
                // The run the others went into last time has room for all.
                assert!(runs.runs[target].capacity() >= last.iter().sum(), "round {round}: room for all");
            }
            let lists: Vec<(*const Item, usize)> = runs.runs.iter().map(|r| (r.as_ptr(), r.capacity())).collect();
            let mut want = items.clone();
            want.sort_by_key(|x| x.key);
            let sorted = runs.into_sorted();
            assert_eq!(sorted, want);
            // The recorded target is the run whose list holds the result (when it never had to grow).
            let target = HINTS.target.load(Ordering::Relaxed);
            if lists[target].1 >= items.len() {
                assert_eq!(sorted.as_ptr(), lists[target].0, "round {round}: merged into run {target}");
            }
            // The spare list has that run's room.
            spare = HINTS.spare(sorted);
            assert!(spare.is_empty() && spare.capacity() >= HINTS.room(target));
            let all: usize = lens.iter().sum();
            for (i, n) in lens.iter().enumerate() {
                let n = if i == target { all } else { *n };
                assert_eq!(HINTS.room(i), n + n / 8);
            }
            last_lens = Some(lens);
        }
    }

    #[test]
    fn any_order_merges_as_a_stable_sort() {
        let mut rng = XorShift(12345);
        for n in [0, 1, 2, 3, 10, 100, 1000, 5000] {
            for modulus in [2, 10, 1000, u64::MAX] {
                let keys: Vec<(u64, u64)> = (0..n).map(|_| (rng.next_u64() % modulus, rng.next_u64() % 2)).collect();
                check(&keys);
                let mut desc = keys.clone();
                desc.sort_by(|a, b| b.cmp(a));
                check(&desc);
            }
        }
    }

    #[test]
    fn merge_into_either_list_is_a_stable_merge() {
        let mut rng = XorShift(4242);
        for (na, nb) in [(0, 0), (0, 5), (5, 0), (1, 1), (3, 700), (700, 3), (500, 500), (1000, 37), (37, 1000)] {
            for modulus in [1, 2, 10, 1000, u64::MAX] {
                let mut sorted_keys = |n: usize| {
                    let mut k: Vec<(u64, u64)> = (0..n).map(|_| (rng.next_u64() % modulus, 0)).collect();
                    k.sort();
                    k
                };
                let (ka, kb) = (sorted_keys(na), sorted_keys(nb));
                let a: Vec<Item> = ka.iter().enumerate().map(|(seq, &key)| Item { key, seq }).collect();
                let b: Vec<Item> = kb.iter().enumerate().map(|(seq, &key)| Item { key, seq: na + seq }).collect();
                let mut want: Vec<Item> = a.iter().chain(&b).copied().collect();
                want.sort_by_key(|x| x.key);
                assert_eq!(merge_into(a.clone(), &b, true), want, "{na} + {nb} mod {modulus}, into the first");
                assert_eq!(merge_into(b.clone(), &a, false), want, "{na} + {nb} mod {modulus}, into the second");
            }
        }
    }
}
