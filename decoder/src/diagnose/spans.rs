//! Interval helpers of the timeline analysis: unions built from intervals pushed in start order,
//! measures inside query windows that only move forward, and the observed parts of a span.

use crate::model::Ns;

/// The union of intervals pushed in start order, as a sorted, disjoint list (empty ones left out).
/// The last interval stays open (out of the list) while pushes extend it.
#[derive(Debug, Default)]
pub struct StartOrderUnion {
    done: Vec<(Ns, Ns)>,
    /// The open interval; `(0, 0)` before the first push (a push from 0 extends it as it would
    /// start a new one).
    open: (Ns, Ns),
}

impl StartOrderUnion {
    /// Room for `n` intervals (the most that `n` pushes keep), so the list never grows by copying.
    pub fn with_capacity(n: usize) -> StartOrderUnion {
        StartOrderUnion { done: Vec::with_capacity(n), open: (0, 0) }
    }

    #[inline]
    pub fn push(&mut self, s: Ns, e: Ns) {
        if e <= s {
            return;
        }
        if s <= self.open.1 {
            self.open.1 = self.open.1.max(e);
        } else {
            if self.open.1 > self.open.0 {
                self.done.push(self.open);
            }
            self.open = (s, e);
        }
    }

    /// The union.
    pub fn finish(mut self) -> Vec<(Ns, Ns)> {
        if self.open.1 > self.open.0 {
            self.done.push(self.open);
        }
        self.done
    }
}

/// The union of intervals in start order ([`StartOrderUnion`]'s), as they are read.
pub fn start_order_union(intervals: impl Iterator<Item = (Ns, Ns)>) -> impl Iterator<Item = (Ns, Ns)> {
    let mut intervals = intervals.fuse();
    // The open interval, as in `StartOrderUnion`.
    let mut open = (0, 0);
    std::iter::from_fn(move || {
        for (s, e) in intervals.by_ref() {
            if e <= s {
                continue;
            }
            if s <= open.1 {
                open.1 = open.1.max(e);
            } else {
                let done = std::mem::replace(&mut open, (s, e));
                if done.1 > done.0 {
                    return Some(done);
                }
            }
        }
        let last = std::mem::take(&mut open);
        (last.1 > last.0).then_some(last)
    })
}

/// `intervals::measure_in` on one sorted, disjoint list for query windows whose starts never
/// decrease from one call to the next: the first interval that can overlap is found by a cursor
/// that only moves forward, not by a binary search per call. Same results.
#[derive(Debug)]
pub struct ForwardMeasure<'a> {
    list: &'a [(Ns, Ns)],
    at: usize,
}

impl<'a> ForwardMeasure<'a> {
    pub fn new(list: &'a [(Ns, Ns)]) -> ForwardMeasure<'a> {
        ForwardMeasure { list, at: 0 }
    }

    /// Length of the list inside `[lo, hi)` (`lo` at or after the previous call's).
    #[inline]
    pub fn measure(&mut self, lo: Ns, hi: Ns) -> Ns {
        let list = self.list;
        while self.at < list.len() && list[self.at].1 <= lo {
            self.at += 1;
        }
        let mut total = 0;
        for &(s, e) in &list[self.at..] {
            if s >= hi {
                break;
            }
            total += e.min(hi).saturating_sub(s.max(lo));
        }
        total
    }
}

/// The parts of `[a, b)` outside the sorted, disjoint `holes`.
pub fn observed_parts(a: Ns, b: Ns, holes: &[(Ns, Ns)]) -> impl Iterator<Item = (Ns, Ns)> + '_ {
    let mut from = a;
    let mut inside = holes.iter().filter(move |h| h.1 > a && h.0 < b);
    let mut done = false;
    std::iter::from_fn(move || {
        while !done {
            match inside.next() {
                Some(&(s, e)) => {
                    let part = (s > from).then_some((from, s));
                    from = from.max(e);
                    if part.is_some() {
                        return part;
                    }
                }
                None => {
                    done = true;
                    if b > from {
                        return Some((from, b));
                    }
                }
            }
        }
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intervals::measure_in;
    use crate::xorshift::XorShift;

    /// The union by brute force: each unit of time covered or not.
    fn covered(intervals: &[(Ns, Ns)], t: Ns) -> bool {
        intervals.iter().any(|&(s, e)| s <= t && t < e)
    }

    #[test]
    fn start_order_union_is_the_union() {
        let mut rng = XorShift(0xdead_beef_0042);
        for _ in 0..200 {
            let mut pushed = Vec::new();
            let mut t = rng.below(3);
            for _ in 0..rng.below(30) {
                t += rng.below(6);
                pushed.push((t, t + rng.below(7)));
            }
            let mut u = StartOrderUnion::default();
            for &(s, e) in &pushed {
                u.push(s, e);
            }
            let list = u.finish();
            assert_eq!(start_order_union(pushed.iter().copied()).collect::<Vec<_>>(), list, "{pushed:?}");
            assert!(list.iter().all(|&(s, e)| s < e), "{list:?}");
            assert!(list.windows(2).all(|w| w[0].1 < w[1].0), "sorted, disjoint: {list:?}");
            for t in 0..t + 10 {
                assert_eq!(covered(&pushed, t), covered(&list, t), "{t} in {pushed:?} -> {list:?}");
            }
        }
    }

    #[test]
    fn forward_measure_matches_measure_in() {
        let mut rng = XorShift(0x5eed_1234_abcd_0001);
        for round in 0..50u64 {
            let mut u = StartOrderUnion::default();
            let mut t = 0;
            for _ in 0..rng.below(200) {
                t += rng.below(20);
                u.push(t, t + rng.below(30));
            }
            let list = u.finish();
            assert!(list.windows(2).all(|w| w[0].1 < w[1].0), "sorted, disjoint: {list:?}");
            let mut fwd = ForwardMeasure::new(&list);
            let mut lo = 0;
            for _ in 0..300 {
                lo += rng.below(8 + round);
                let hi = lo + rng.below(40);
                assert_eq!(fwd.measure(lo, hi), measure_in(&list, lo, hi), "[{lo}, {hi}) in {list:?}");
                if rng.below(3) == 0 {
                    // The same start again (split gaps share none, but it must hold).
                    assert_eq!(fwd.measure(lo, hi + 5), measure_in(&list, lo, hi + 5));
                }
            }
        }
    }
}
