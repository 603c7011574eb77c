//! [`measure_by_cover`]: the time several sorted disjoint interval lists cover, split by which of
//! them cover it, in total and inside windows, in one pass over all the intervals.

use super::CompactIter;
use crate::model::Ns;

/// A sorted disjoint list as [`measure_by_cover`] walks it: one interval at a time, and runs of
/// intervals summed (which a list may do faster than one by one).
pub trait CoverList: Iterator<Item = (Ns, Ns)> {
    /// The intervals that end by `limit`, taken: the sum of their lengths and the last end (`from`
    /// when none did), and the first interval that ends after `limit`, taken too (None at the end).
    fn sum_until(&mut self, from: Ns, limit: Ns) -> (Ns, Ns, Option<(Ns, Ns)>) {
        let (mut lens, mut last) = (0, from);
        for (s, e) in &mut *self {
            if e > limit {
                return (lens, last, Some((s, e)));
            }
            lens += e - s;
            last = e;
        }
        (lens, last, None)
    }
}

impl CoverList for CompactIter<'_> {
    #[inline(always)]
    fn sum_until(&mut self, from: Ns, limit: Ns) -> (Ns, Ns, Option<(Ns, Ns)>) {
        self.sum_run(from, limit)
    }
}

impl CoverList for std::iter::Copied<std::slice::Iter<'_, (Ns, Ns)>> {}

impl CoverList for Box<dyn Iterator<Item = (Ns, Ns)> + '_> {}

/// Time covered by `K` sorted disjoint interval iterators, split by which of them cover it: entry
/// `m` of the result is the time covered by exactly the lists whose bits are set in `m` (entry 0
/// stays 0), in total and inside each window (windows in any order, may overlap). One pass over
/// all the intervals, however many measures are derived from the masks (union: every nonzero
/// mask; intersection of lists a and b: the masks with both bits).
pub fn measure_by_cover<const K: usize, const M: usize, I: CoverList>(
    lists: [I; K],
    windows: &[(Ns, Ns)],
) -> ([Ns; M], Vec<[Ns; M]>) {
    const { assert!(M == 1 << K) };
    // Each list is taken out of its place for a run (see `add_run`), so its state lives in registers.
    let mut lists: [Option<I>; K] = lists.map(Some);
    // The time each mask covered before each window's start and end, in time order: a window's
    // part is the difference (one comparison per stretch of cover instead of a window walk).
    let mut bounds = CoverBounds::<M>::new(windows);
    let mut total = [0 as Ns; M];
    let mut cur: [Option<(Ns, Ns)>; K] = std::array::from_fn(|k| lists[k].as_mut().and_then(Iterator::next));
    let Some(mut t) = cur.iter().flatten().map(|iv| iv.0).min() else {
        return (total, bounds.finish(&total, windows));
    };
    loop {
        // The lists covering `t`, and the next time that changes.
        let mut mask = 0usize;
        let mut next = Ns::MAX;
        for (k, iv) in cur.iter().enumerate() {
            if let Some((s, e)) = *iv {
                if s <= t {
                    mask |= 1 << k;
                    next = next.min(e);
                } else {
                    next = next.min(s);
                }
            }
        }
        if next == Ns::MAX {
            break;
        }
        if mask != 0 {
            bounds.pass(&total, t, next, mask);
            total[mask] += next - t;
        }
        t = next;
        let ending = (0..K).filter(|&k| cur[k].is_some_and(|(_, e)| e == t)).fold(0usize, |m, k| m | 1 << k);
        if ending.is_power_of_two() {
            // List `k` alone changes at `t`: the others keep covering (or not) until `bound`, so
            // its following intervals that end by then, and the gaps between them, are added in
            // a run of that list alone.
            let k = ending.trailing_zeros() as usize;
            let (mut bg, mut bound) = (0usize, Ns::MAX);
            for (j, iv) in cur.iter().enumerate() {
                match *iv {
                    Some((s, e)) if j != k && s <= t => {
                        bg |= 1 << j;
                        bound = bound.min(e);
                    }
                    Some((s, _)) if j != k => bound = bound.min(s),
                    _ => {}
                }
            }
            let it = lists[k].take().expect("a list with an interval is in its place");
            let run = Run { from: t, bound, bg, bit: 1 << k };
            let (it, iv, last_end) = add_run(it, run, &mut total, &mut bounds);
            lists[k] = Some(it);
            cur[k] = iv;
            t = last_end;
            continue;
        }
        for (k, iv) in cur.iter_mut().enumerate() {
            while iv.is_some_and(|(_, e)| e <= t) {
                *iv = lists[k].as_mut().and_then(Iterator::next);
            }
        }
    }
    (total, bounds.finish(&total, windows))
}

/// A run of one list's intervals under a steady background: from `from` (where the list's last
/// interval ended) up to `bound`, the other lists covering `bg` all along.
struct Run {
    from: Ns,
    bound: Ns,
    bg: usize,
    /// The list's own bit.
    bit: usize,
}

/// [`measure_by_cover`]'s run of the intervals of one list `it` that end by `run.bound`: each
/// interval is covered by `bg | bit`, each gap before one by `bg` (by nothing when `bg` is 0), added
/// as the step-by-step walk would. Returns the list, its first interval that does not end by the
/// bound (None at its end) and the last end added (`from` when none was). Between window bounds the
/// list sums its intervals itself ([`CoverList::sum_until`]), the sums kept in locals.
#[inline(never)]
fn add_run<const M: usize, I: CoverList>(
    it: I,
    run: Run,
    total: &mut [Ns; M],
    bounds: &mut CoverBounds<M>,
) -> (I, Option<(Ns, Ns)>, Ns) {
    // A local of its own (not the argument's place), which the loop's state is promoted out of.
    let mut it = it;
    let Run { from, bound, bg, bit } = run;
    let full = bg | bit;
    let mut last_end = from;
    // Gaps (covered by `bg`) and intervals (by `full`) not yet in `total`.
    let (mut gaps, mut lens) = (0 as Ns, 0 as Ns);
    loop {
        // Intervals that end by the next window bound pass none: summed.
        let (l, end, after) = it.sum_until(last_end, bound.min(bounds.next_time()));
        lens += l;
        gaps += end - last_end - l;
        last_end = end;
        match after {
            Some((s, e)) if e <= bound => {
                // A window bound in the gap or the interval: the sums so far go in first.
                total[full] += lens;
                lens = 0;
                if bg != 0 {
                    total[bg] += gaps;
                    gaps = 0;
                    bounds.pass(total, last_end, s, bg);
                    total[bg] += s - last_end;
                }
                bounds.pass(total, s, e, full);
                lens += e - s;
                last_end = e;
            }
            iv => {
                total[full] += lens;
                if bg != 0 {
                    total[bg] += gaps;
                }
                return (it, iv, last_end);
            }
        }
    }
}

/// The windows' starts and ends in time order, each with the time every mask had covered before it
/// (filled in as stretches of cover pass them, in time order).
struct CoverBounds<const M: usize> {
    /// (time, index into `before`), sorted by time.
    order: Vec<(Ns, usize)>,
    /// The first of `order` not yet passed.
    next: usize,
    /// Per window, the covered time before its start (`2w`) and before its end (`2w + 1`).
    before: Vec<[Ns; M]>,
}

impl<const M: usize> CoverBounds<M> {
    fn new(windows: &[(Ns, Ns)]) -> Self {
        let mut order: Vec<(Ns, usize)> = Vec::with_capacity(2 * windows.len());
        for (w, &(s, e)) in windows.iter().enumerate() {
            order.push((s, 2 * w));
            order.push((e, 2 * w + 1));
        }
        order.sort_unstable();
        CoverBounds { order, next: 0, before: vec![[0; M]; 2 * windows.len()] }
    }

    /// The time of the next bound not passed yet (`Ns::MAX` when none is left).
    #[inline(always)]
    fn next_time(&self) -> Ns {
        self.order.get(self.next).map_or(Ns::MAX, |o| o.0)
    }

    /// `[s, e)` is covered by `mask` next (in time order, after the cover `total` holds): the
    /// bounds up to `e` take their covered time.
    #[inline(always)]
    fn pass(&mut self, total: &[Ns; M], s: Ns, e: Ns, mask: usize) {
        while let Some(&(b, i)) = self.order.get(self.next) {
            if b >= e {
                break;
            }
            self.before[i] = *total;
            if b > s {
                self.before[i][mask] += b - s;
            }
            self.next += 1;
        }
    }

    /// Each window's cover: what was covered before its end less what was before its start.
    fn finish(mut self, total: &[Ns; M], windows: &[(Ns, Ns)]) -> Vec<[Ns; M]> {
        for &(_, i) in &self.order[self.next..] {
            self.before[i] = *total;
        }
        windows
            .iter()
            .enumerate()
            .map(|(w, &(s, e))| {
                let (a, b) = (&self.before[2 * w], &self.before[2 * w + 1]);
                std::array::from_fn(|m| if e > s { b[m] - a[m] } else { 0 })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;

    /// Per mask, time by time: the cover of each unit of time in `0..horizon`.
    fn brute(lists: &[Vec<(Ns, Ns)>; 3], windows: &[(Ns, Ns)], horizon: Ns) -> ([Ns; 8], Vec<[Ns; 8]>) {
        let mut total = [0; 8];
        let mut inw = vec![[0; 8]; windows.len()];
        for t in 0..horizon {
            let mask = (0..3).filter(|&k| lists[k].iter().any(|&(s, e)| s <= t && t < e)).fold(0, |m, k| m | 1 << k);
            if mask == 0 {
                continue;
            }
            total[mask] += 1;
            for (w, &(s, e)) in windows.iter().enumerate() {
                if s <= t && t < e {
                    inw[w][mask] += 1;
                }
            }
        }
        (total, inw)
    }

    /// A sorted disjoint list: `n` intervals with random gaps (some long) and lengths.
    fn list(rng: &mut XorShift, n: u64, gap: u64, len: u64) -> Vec<(Ns, Ns)> {
        let mut t = rng.below(gap);
        (0..n)
            .map(|_| {
                let s = t + 1 + rng.below(gap) * if rng.below(10) == 0 { 8 } else { 1 };
                let e = s + 1 + rng.below(len);
                t = e;
                (s, e)
            })
            .collect()
    }

    /// Dense short intervals under long sparse ones and alone, windows anywhere (overlapping,
    /// empty, past the end): every mask's time, in all and per window, as counted unit by unit.
    #[test]
    fn cover_matches_a_unit_by_unit_count() {
        let mut rng = XorShift(99);
        for round in 0..300 {
            let n = [rng.below(60), rng.below(8), rng.below(6)];
            let lists = [
                list(&mut rng, n[0], 4, 6),
                list(&mut rng, n[1], 40, 60),
                list(&mut rng, n[2], 30, 1 + 80 * (round % 3)),
            ];
            let horizon = lists.iter().flatten().map(|iv| iv.1).max().unwrap_or(0) + 5;
            let windows: Vec<(Ns, Ns)> = (0..rng.below(6))
                .map(|_| {
                    let s = rng.below(horizon + 10);
                    (s, s + rng.below(horizon / 2 + 1))
                })
                .collect();
            let its = [lists[0].iter().copied(), lists[1].iter().copied(), lists[2].iter().copied()];
            let got: ([Ns; 8], Vec<[Ns; 8]>) = measure_by_cover(its, &windows);
            assert_eq!(got, brute(&lists, &windows, horizon + 10), "{lists:?} {windows:?}");
        }
    }
}
