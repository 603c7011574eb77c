//! Interval arithmetic on sorted, disjoint `(start, end)` lists (GPU busy time, overlaps), and
//! the streaming form used by `summary`: [`StreamingUnion`] takes intervals as they arrive (mostly
//! in time order per stream, as CUPTI delivers them) and keeps their union delta-encoded
//! ([`CompactIntervals`], a few bytes per disjoint busy period instead of 24 bytes per event);
//! [`Union2`], [`Intersect`], [`measure_iter`] and [`measure_windows`] work on sorted disjoint
//! iterators, so nothing is ever expanded back into a `Vec`.

use std::hash::{BuildHasherDefault, Hasher};
use std::iter::Peekable;

use rustc_hash::FxHasher;

use crate::model::Ns;

mod compact;
mod cover;

pub use compact::{CompactIntervals, CompactIter};
pub use cover::{measure_by_cover, CoverList};

/// A `HashMap` with rustc's FxHash: fast and non-cryptographic, for the decoder's hot maps keyed by
/// integers (correlation ids, range ids, name pointers). Not for attacker-controlled string keys.
pub type FastMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// A hasher for integer keys that arrive nearly in sequence (correlation ids, range ids): the low
/// 57 bits of the hash are the key itself, so neighbouring keys land in neighbouring buckets of a
/// hashbrown table (one cache line serves many lookups, where a mixing hash sends every lookup of
/// a large table to a different line), and the top 7 bits (hashbrown's tag byte) are mixed so the
/// tags still tell keys apart. Only for one integer per key.
#[derive(Debug, Default, Clone, Copy)]
pub struct SeqHasher(u64);

impl SeqHasher {
    const LOW: u64 = (1 << 57) - 1;
}

impl Hasher for SeqHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut f = FxHasher::with_seed(self.0 as usize);
        f.write(bytes);
        self.0 = f.finish();
    }
    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.write_u64(v.into());
    }
    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.0 = (v & Self::LOW) | (v.wrapping_mul(0x9e37_79b9_7f4a_7c15) & !Self::LOW);
    }
    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A `HashMap` with [`SeqHasher`], for integer keys that arrive nearly in sequence.
pub type SeqMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<SeqHasher>>;

/// Intervals buffered before a merge into the committed part.
const PENDING_MAX: usize = 16 * 1024;
/// Sorted runs the pending intervals are dealt into: one per stream of GPU work, as many as a
/// process usually has of one kind (compute streams, a communication stream, copy streams).
const LANES: usize = 4;

/// Union of intervals pushed in any order, with memory bounded by the number of disjoint busy
/// periods (delta-encoded) when they arrive mostly in time order. Intervals that arrive before the
/// committed frontier are kept aside and merged in exactly (the result is the exact union for any
/// input order).
///
/// GPU work of one stream arrives in time order, the streams interleaved (CUPTI batches): each
/// pending interval goes to the lane whose last start is the latest at or before its own (so each
/// stream finds a lane of its own), where it extends the last interval when they touch. A commit
/// merges the lanes (no sort); intervals that fit no lane wait in `mixed`, sorted at commit.
#[derive(Debug, Default)]
pub struct StreamingUnion {
    lanes: [Vec<(Ns, Ns)>; LANES],
    /// A lane whose last start is the latest of all lanes' (any lane when all are empty).
    top: usize,
    /// The lane the last search picked (another stream's, mostly): tried after `top`.
    alt: usize,
    /// Pending intervals that fit no lane (in arrival order).
    mixed: Vec<(Ns, Ns)>,
    /// Intervals in `lanes` and `mixed`.
    pending: usize,
    out: CompactIntervals,
    /// The last committed interval, still extendable.
    tail: Option<(Ns, Ns)>,
    /// Intervals that started before `tail` (out of order beyond the pending window).
    late: Vec<(Ns, Ns)>,
}

impl StreamingUnion {
    #[inline(always)]
    pub fn push(&mut self, s: Ns, e: Ns) {
        // The usual case, inline: in time order on the top lane's stream, behind the committed
        // part, with room in the lane and in the pending window (which a push fills to
        // `PENDING_MAX` only to commit at once, so it holds fewer between pushes).
        if s < e && self.tail.is_none_or(|t| s >= t.0) {
            let top = &mut self.lanes[self.top];
            if let Some(l) = top.last_mut() {
                if l.0 <= s {
                    if s <= l.1 {
                        l.1 = l.1.max(e);
                        return;
                    }
                    if top.len() < top.capacity() && self.pending + 1 < PENDING_MAX {
                        top.push((s, e));
                        self.pending += 1;
                        return;
                    }
                }
            }
        }
        self.push_any(s, e);
    }

    /// [`StreamingUnion::push`] of any interval.
    #[inline(never)]
    fn push_any(&mut self, s: Ns, e: Ns) {
        if e <= s {
            return;
        }
        if self.tail.is_some_and(|t| s < t.0) {
            self.late.push((s, e));
            if self.late.len() >= PENDING_MAX.max(self.out.len() / 8) {
                self.rebuild();
            }
            return;
        }
        self.insert_pending(s, e);
        if self.pending >= PENDING_MAX {
            self.commit(PENDING_MAX / 4);
        }
    }

    /// Into the lane whose last start is the latest at or before `s` (an empty lane when none is,
    /// else `mixed`).
    #[inline]
    fn insert_pending(&mut self, s: Ns, e: Ns) {
        // Mostly the lane with the latest last start takes it, else the lane of the stream that
        // took the last searched one: any lane whose last start is at or before `s` keeps its
        // order, and any lanes sorted by start give the same union.
        if !self.insert_into(self.top, s, e) && !self.insert_into(self.alt, s, e) {
            self.insert_searched(s, e);
        }
    }

    /// Into lane `i` when its last start is at or before `s` (false when it is not, or empty).
    #[inline(always)]
    fn insert_into(&mut self, i: usize, s: Ns, e: Ns) -> bool {
        let lane = &mut self.lanes[i];
        match lane.last_mut() {
            Some(l) if l.0 <= s => {
                // Sorted by start, so touching the last interval means overlapping the union.
                if s <= l.1 {
                    l.1 = l.1.max(e);
                } else {
                    lane.push((s, e));
                    self.pending += 1;
                }
                true
            }
            _ => false,
        }
    }

    /// [`StreamingUnion::insert_pending`] of an interval the top lane cannot take.
    #[inline(never)]
    fn insert_searched(&mut self, s: Ns, e: Ns) {
        let mut best: Option<usize> = None;
        let mut best_start = 0;
        let mut empty: Option<usize> = None;
        for (i, lane) in self.lanes.iter().enumerate() {
            match lane.last() {
                Some(l) if l.0 <= s && (best.is_none() || l.0 > best_start) => {
                    best = Some(i);
                    best_start = l.0;
                }
                None if empty.is_none() => empty = Some(i),
                _ => {}
            }
        }
        match best.or(empty) {
            Some(i) => {
                if self.lanes[self.top].is_empty() {
                    // All lanes were empty.
                    self.top = i;
                }
                self.alt = i;
                let lane = &mut self.lanes[i];
                match lane.last_mut() {
                    // Sorted by start, so touching the last interval means overlapping the union.
                    Some(l) if s <= l.1 => l.1 = l.1.max(e),
                    _ => {
                        if lane.capacity() == 0 {
                            // A lane's share of the pending window at once, not regrown from empty.
                            lane.reserve(PENDING_MAX / LANES);
                        }
                        lane.push((s, e));
                        self.pending += 1;
                    }
                }
            }
            None => {
                self.mixed.push((s, e));
                self.pending += 1;
            }
        }
    }

    /// Commit all but the `keep` latest-starting pending intervals, merging the lanes and the
    /// sorted `mixed` in start order (of equal starts, `mixed`'s first, then the lanes' in order).
    fn commit(&mut self, keep: usize) {
        // By start alone: the union does not depend on the order of equal starts.
        self.mixed.sort_unstable_by_key(|iv| iv.0);
        let n = self.pending.saturating_sub(keep);
        let mut at = [0usize; LANES + 1];
        let (lanes, mixed) = (&self.lanes, &self.mixed);
        let run = |r: usize| if r == LANES { &mixed[..] } else { &lanes[r][..] };
        let mut left = n;
        while left > 0 {
            // The runs with intervals left, `mixed` first.
            let mut live = [LANES; LANES + 1];
            let mut m = 0;
            for r in std::iter::once(LANES).chain(0..LANES) {
                if at[r] < run(r).len() {
                    live[m] = r;
                    m += 1;
                }
            }
            if m <= 2 {
                // One or two runs (one stream, or two, of this kind): merged two-way to the end.
                let p = &run(live[0])[at[live[0]]..];
                let q = if m == 2 { &run(live[1])[at[live[1]]..] } else { &[][..] };
                let x = merged_from_first(p, q, left);
                self.out.extend_union(&mut self.tail, &mut Merge2 { p: &p[..x], q: &q[..left - x] });
                at[live[0]] += x;
                if m == 2 {
                    at[live[1]] += left - x;
                }
                break;
            }
            // The run whose next interval starts first (starts are below `Ns::MAX`).
            let mut pick = LANES;
            let mut first = mixed.get(at[LANES]).map_or(Ns::MAX, |iv| iv.0);
            for (i, lane) in lanes.iter().enumerate() {
                if let Some(iv) = lane.get(at[i]) {
                    if iv.0 < first {
                        pick = i;
                        first = iv.0;
                    }
                }
            }
            extend_tail(&mut self.tail, &mut self.out, run(pick)[at[pick]]);
            at[pick] += 1;
            left -= 1;
        }
        for (lane, &k) in self.lanes.iter_mut().zip(&at) {
            lane.drain(..k);
        }
        self.mixed.drain(..at[LANES]);
        self.pending -= n;
        self.top = (0..LANES).max_by_key(|&i| self.lanes[i].last().map(|l| l.0)).unwrap_or(0);
    }

    /// Merge the late intervals into the committed list (re-encoding it).
    fn rebuild(&mut self) {
        self.commit(0);
        let mut all: Vec<(Ns, Ns)> = std::mem::take(&mut self.late);
        all.sort_unstable();
        let old = std::mem::take(&mut self.out);
        let mut merged: Vec<(Ns, Ns)> =
            Union2::new(old.iter().chain(self.tail.take()), union(all).into_iter()).collect();
        drop(old);
        self.tail = merged.pop();
        for iv in merged {
            self.out.push(iv);
        }
        self.late.shrink_to(PENDING_MAX);
    }

    /// The union, as a compact sorted disjoint list.
    pub fn finish(mut self) -> CompactIntervals {
        if !self.late.is_empty() {
            self.rebuild();
        }
        self.commit(0);
        if let Some(t) = self.tail.take() {
            self.out.push(t);
        }
        self.out.shrink();
        self.out
    }
}

/// Two runs sorted by start, merged in start order (of equal starts, `p`'s first).
struct Merge2<'a> {
    p: &'a [(Ns, Ns)],
    q: &'a [(Ns, Ns)],
}

impl Iterator for Merge2<'_> {
    type Item = (Ns, Ns);
    #[inline(always)]
    fn next(&mut self) -> Option<(Ns, Ns)> {
        // The runs are advanced by value (no reference to either taken: both stay in registers).
        match (self.p.split_first(), self.q.split_first()) {
            (Some((&a, p)), Some((&b, q))) => {
                if a.0 <= b.0 {
                    self.p = p;
                    Some(a)
                } else {
                    self.q = q;
                    Some(b)
                }
            }
            (Some((&a, p)), None) => {
                self.p = p;
                Some(a)
            }
            (None, Some((&b, q))) => {
                self.q = q;
                Some(b)
            }
            (None, None) => None,
        }
    }
}

/// How many of the first `n` intervals of [`Merge2`] of `p` and `q` come from `p` (`n` at most
/// both lengths together): the least `x` whose next, `p[x]`, does not come before `q[n - x - 1]`.
fn merged_from_first(p: &[(Ns, Ns)], q: &[(Ns, Ns)], n: usize) -> usize {
    let mut hi = n.min(p.len());
    let mut lo = n.saturating_sub(q.len()).min(hi);
    while lo < hi {
        // lo <= x < hi: p[x] exists and q takes n - x >= 1.
        let x = (lo + hi) / 2;
        if p[x].0 <= q[n - x - 1].0 {
            lo = x + 1;
        } else {
            hi = x;
        }
    }
    lo
}

/// The next committed interval `(s, e)` (in start order): it extends `tail` when they touch,
/// else `tail` goes out and `(s, e)` becomes it.
#[inline(always)]
fn extend_tail(tail: &mut Option<(Ns, Ns)>, out: &mut CompactIntervals, (s, e): (Ns, Ns)) {
    match tail {
        Some(t) if s <= t.1 => t.1 = t.1.max(e),
        Some(t) => {
            out.push(*t);
            *t = (s, e);
        }
        None => *tail = Some((s, e)),
    }
}

/// Union of two sorted disjoint interval iterators (sorted disjoint output).
pub struct Union2<A: Iterator<Item = (Ns, Ns)>, B: Iterator<Item = (Ns, Ns)>> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<A: Iterator<Item = (Ns, Ns)>, B: Iterator<Item = (Ns, Ns)>> Union2<A, B> {
    pub fn new(a: A, b: B) -> Self {
        Union2 { a: a.peekable(), b: b.peekable() }
    }
    #[inline]
    fn pop_min(&mut self) -> Option<(Ns, Ns)> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) if y.0 < x.0 => self.b.next(),
            (Some(_), _) => self.a.next(),
            (None, _) => self.b.next(),
        }
    }
    #[inline]
    fn min_start(&mut self) -> Option<Ns> {
        match (self.a.peek(), self.b.peek()) {
            (Some(x), Some(y)) => Some(x.0.min(y.0)),
            (Some(x), None) | (None, Some(x)) => Some(x.0),
            (None, None) => None,
        }
    }
}

impl<A: Iterator<Item = (Ns, Ns)>, B: Iterator<Item = (Ns, Ns)>> Iterator for Union2<A, B> {
    type Item = (Ns, Ns);
    fn next(&mut self) -> Option<(Ns, Ns)> {
        let mut cur = self.pop_min()?;
        while self.min_start().is_some_and(|s| s <= cur.1) {
            if let Some(n) = self.pop_min() {
                cur.1 = cur.1.max(n.1);
            }
        }
        Some(cur)
    }
}

/// Intersection of two sorted disjoint interval iterators (sorted disjoint output).
pub struct Intersect<A: Iterator<Item = (Ns, Ns)>, B: Iterator<Item = (Ns, Ns)>> {
    a: Peekable<A>,
    b: Peekable<B>,
}

impl<A: Iterator<Item = (Ns, Ns)>, B: Iterator<Item = (Ns, Ns)>> Intersect<A, B> {
    pub fn new(a: A, b: B) -> Self {
        Intersect { a: a.peekable(), b: b.peekable() }
    }
}

impl<A: Iterator<Item = (Ns, Ns)>, B: Iterator<Item = (Ns, Ns)>> Iterator for Intersect<A, B> {
    type Item = (Ns, Ns);
    fn next(&mut self) -> Option<(Ns, Ns)> {
        loop {
            let x = *self.a.peek()?;
            let y = *self.b.peek()?;
            let (s, e) = (x.0.max(y.0), x.1.min(y.1));
            if x.1 < y.1 {
                self.a.next();
            } else {
                self.b.next();
            }
            if e > s {
                return Some((s, e));
            }
        }
    }
}

/// Total length of a sorted disjoint iterator.
pub fn measure_iter(it: impl Iterator<Item = (Ns, Ns)>) -> Ns {
    it.map(|(s, e)| e - s).sum()
}

/// Length of a sorted disjoint iterator inside each window (windows in any order, may overlap);
/// one pass over the intervals.
pub fn measure_windows(it: impl Iterator<Item = (Ns, Ns)>, windows: &[(Ns, Ns)]) -> Vec<Ns> {
    measure_total_and_windows(it, windows).1
}

/// [`measure_iter`] and [`measure_windows`] in one pass over the intervals.
pub fn measure_total_and_windows(it: impl Iterator<Item = (Ns, Ns)>, windows: &[(Ns, Ns)]) -> (Ns, Vec<Ns>) {
    let mut cursor = WindowCursor::new(windows);
    let mut out = vec![0; windows.len()];
    let mut total: Ns = 0;
    for (s, e) in it {
        total += e - s;
        cursor.each_overlap(s, e, |w, d| out[w] += d);
    }
    (total, out)
}

/// Windows (any order, may overlap) met by intervals that come in time order: which windows each
/// interval overlaps, skipping those that ended before it.
struct WindowCursor<'a> {
    windows: &'a [(Ns, Ns)],
    /// Window indices by start.
    order: Vec<usize>,
    /// The first of `order` that had not ended before the last interval began.
    lo: usize,
}

impl<'a> WindowCursor<'a> {
    fn new(windows: &'a [(Ns, Ns)]) -> Self {
        let mut order: Vec<usize> = (0..windows.len()).collect();
        order.sort_by_key(|&i| windows[i].0);
        WindowCursor { windows, order, lo: 0 }
    }

    /// `add(window, overlap)` for each window `[s, e)` overlaps; `s` at or after the previous call's.
    #[inline]
    fn each_overlap(&mut self, s: Ns, e: Ns, mut add: impl FnMut(usize, Ns)) {
        while self.lo < self.order.len() && self.windows[self.order[self.lo]].1 <= s {
            self.lo += 1;
        }
        for &w in &self.order[self.lo..] {
            let (ws, we) = self.windows[w];
            if ws >= e {
                break;
            }
            let (a, b) = (s.max(ws), e.min(we));
            if b > a {
                add(w, b - a);
            }
        }
    }
}

/// Union of intervals (any order) as a sorted disjoint list.
pub fn union(mut v: Vec<(Ns, Ns)>) -> Vec<(Ns, Ns)> {
    v.sort_unstable();
    let mut out: Vec<(Ns, Ns)> = Vec::with_capacity(v.len() / 2 + 1);
    for (s, e) in v {
        if e <= s {
            continue;
        }
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Merge two sorted disjoint lists into their union.
pub fn union2(a: &[(Ns, Ns)], b: &[(Ns, Ns)]) -> Vec<(Ns, Ns)> {
    let mut v = Vec::with_capacity(a.len() + b.len());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    union(v)
}

/// Total length of a sorted disjoint list inside `[lo, hi)`.
pub fn measure_in(list: &[(Ns, Ns)], lo: Ns, hi: Ns) -> Ns {
    let first = list.partition_point(|x| x.1 <= lo);
    let mut total = 0;
    for &(s, e) in &list[first..] {
        if s >= hi {
            break;
        }
        total += e.min(hi).saturating_sub(s.max(lo));
    }
    total
}

/// Total length of a sorted disjoint list.
pub fn measure(list: &[(Ns, Ns)]) -> Ns {
    list.iter().map(|(s, e)| e - s).sum()
}

/// Length of `a ∩ b` inside `[lo, hi)`, both sorted and disjoint.
pub fn intersect_in(a: &[(Ns, Ns)], b: &[(Ns, Ns)], lo: Ns, hi: Ns) -> Ns {
    let mut i = a.partition_point(|x| x.1 <= lo);
    let mut j = b.partition_point(|x| x.1 <= lo);
    let mut total = 0;
    while i < a.len() && j < b.len() {
        let (s1, e1) = a[i];
        let (s2, e2) = b[j];
        if s1 >= hi || s2 >= hi {
            break;
        }
        let s = s1.max(s2).max(lo);
        let e = e1.min(e2).min(hi);
        if e > s {
            total += e - s;
        }
        if e1 < e2 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The split of a merge's first `n` intervals between two runs (with ties, runs of any lengths)
    /// is the one a merge taken one interval at a time makes.
    #[test]
    fn merged_prefix_splits_as_a_step_by_step_merge() {
        let mut rng = crate::xorshift::XorShift(4242);
        for _ in 0..300 {
            let mut run = || -> Vec<(Ns, Ns)> {
                let len = rng.below(30);
                let mut v: Vec<(Ns, Ns)> = (0..len).map(|_| (rng.below(40), 0)).collect();
                v.sort_unstable();
                v
            };
            let (p, q) = (run(), run());
            for n in 0..=p.len() + q.len() {
                let (mut i, mut j) = (0, 0);
                for _ in 0..n {
                    if j == q.len() || (i < p.len() && p[i].0 <= q[j].0) {
                        i += 1;
                    } else {
                        j += 1;
                    }
                }
                assert_eq!(merged_from_first(&p, &q, n), i, "{p:?} {q:?} {n}");
                let merged: Vec<(Ns, Ns)> = Merge2 { p: &p[..i], q: &q[..j] }.collect();
                assert_eq!(merged.len(), n);
                assert!(merged.windows(2).all(|w| w[0].0 <= w[1].0));
            }
        }
    }

    #[test]
    fn arithmetic() {
        let a = union(vec![(5, 10), (0, 3), (2, 4), (10, 12)]);
        assert_eq!(a, vec![(0, 4), (5, 12)]);
        assert_eq!(measure(&a), 11);
        assert_eq!(measure_in(&a, 3, 6), 2);
        let b = union(vec![(3, 6), (11, 20)]);
        assert_eq!(intersect_in(&a, &b, 0, 100), 1 + 1 + 1);
        assert_eq!(intersect_in(&a, &b, 0, 5), 1);
        assert_eq!(measure(&union2(&a, &b)), 20);
    }

    /// Streams' intervals in alternating batches (as CUPTI delivers them): two streams find a lane
    /// each, six overflow the lanes into the sorted remainder; all give the exact union, also across
    /// several commits.
    #[test]
    fn streaming_batches_of_streams_match_batch() {
        for streams in [2u64, 6] {
            for batch in [1usize, 20, 63, 64, 65, 300, 5000] {
                let mut x = 777u64;
                let n = 3 * PENDING_MAX as u64;
                let per_stream: Vec<Vec<(Ns, Ns)>> = (0..streams)
                    .map(|k| {
                        (0..n)
                            .map(|i| {
                                x ^= x << 13;
                                x ^= x >> 7;
                                x ^= x << 17;
                                let t = i * 1_000 + k * 333;
                                (t, t + 200 + x % 900)
                            })
                            .collect()
                    })
                    .collect();
                let mut v: Vec<(Ns, Ns)> = Vec::new();
                for b in 0..n as usize / batch + 1 {
                    for st in &per_stream {
                        v.extend_from_slice(&st[(b * batch).min(st.len())..((b + 1) * batch).min(st.len())]);
                    }
                }
                assert_eq!(v.len(), (streams * n) as usize);
                let mut su = StreamingUnion::default();
                for &(s, e) in &v {
                    su.push(s, e);
                }
                let got = su.finish().iter().collect::<Vec<_>>();
                assert_eq!(got, union(v.clone()), "{streams} streams, batches of {batch}");
                assert!(got.len() > 100, "{streams} streams: {} intervals", got.len());
            }
        }
    }

    #[test]
    fn streaming_matches_batch() {
        // Mostly ordered per stream, two streams interleaved, some far out of order, touching,
        // nested and empty intervals.
        let mut v: Vec<(Ns, Ns)> = Vec::new();
        let mut x = 12345u64;
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = i * 100;
            v.push((t, t + 50 + x % 120));
            if i % 3 == 0 {
                v.push((t + 30, t + 30 + x % 70));
            }
            if i % 9973 == 0 {
                let back = (x % 5_000_000).min(t);
                v.push((t - back, t - back + 400));
            }
            if i % 101 == 0 {
                v.push((t, t));
            }
        }
        let batch = union(v.clone());
        let mut su = StreamingUnion::default();
        for &(s, e) in &v {
            su.push(s, e);
        }
        let c = su.finish();
        let streamed: Vec<(Ns, Ns)> = c.iter().collect();
        assert_eq!(streamed, batch);
        assert_eq!(c.len(), batch.len());
        let other = union(v.iter().map(|&(s, e)| (s + 37, e + 20)).collect());
        assert_eq!(Union2::new(c.iter(), other.iter().copied()).collect::<Vec<_>>(), union2(&batch, &other));
        let windows = [(0, 1_000_000), (500_000, 700_000), (5_000_000, 9_000_000), (30, 31)];
        let m = measure_windows(c.iter(), &windows);
        let i = measure_windows(Intersect::new(c.iter(), other.iter().copied()), &windows);
        for (k, &(lo, hi)) in windows.iter().enumerate() {
            assert_eq!(m[k], measure_in(&batch, lo, hi));
            assert_eq!(i[k], intersect_in(&batch, &other, lo, hi));
        }
        assert_eq!(measure_iter(c.iter()), measure(&batch));
        // Split by cover: every measure derived from the masks matches its own walk.
        let third = union(v.iter().map(|&(s, e)| (s / 3 + 11, e / 3 + 40)).collect());
        let lists: [Box<dyn Iterator<Item = (Ns, Ns)> + '_>; 3] =
            [Box::new(c.iter()), Box::new(other.iter().copied()), Box::new(third.iter().copied())];
        let (by, inw): ([Ns; 8], Vec<[Ns; 8]>) = measure_by_cover(lists, &windows);
        let pick = |m: &[Ns; 8], f: fn(usize) -> bool| (1..8).filter(|&k| f(k)).map(|k| m[k]).sum::<Ns>();
        assert_eq!(by[0], 0);
        let any = Union2::new(Union2::new(c.iter(), other.iter().copied()), third.iter().copied());
        assert_eq!(pick(&by, |k| k != 0), measure_iter(any));
        assert_eq!(pick(&by, |k| k & 1 != 0), measure(&batch));
        assert_eq!(pick(&by, |k| k & 3 == 3), measure_iter(Intersect::new(c.iter(), other.iter().copied())));
        for (k, &(lo, hi)) in windows.iter().enumerate() {
            assert_eq!(pick(&inw[k], |m| m & 1 != 0), measure_in(&batch, lo, hi));
            assert_eq!(pick(&inw[k], |m| m & 2 != 0), measure_in(&other, lo, hi));
            assert_eq!(pick(&inw[k], |m| m & 4 != 0), measure_in(&third, lo, hi));
            assert_eq!(pick(&inw[k], |m| m & 3 == 3), intersect_in(&batch, &other, lo, hi));
        }
        // One dense list and two sparse ones (long runs of the dense list alone), windows touching
        // and overlapping: each mask's time equals the measures of plain sorted lists.
        let dense: Vec<(Ns, Ns)> = (0..50_000u64).map(|i| (i * 100, i * 100 + 60 + i % 30)).collect();
        let sparse: Vec<(Ns, Ns)> = (0..300u64).map(|i| (i * 16_000 + 7, i * 16_000 + 7 + (i % 5) * 900)).collect();
        let sparse = union(sparse);
        let rare = vec![(1_000_000, 1_000_050), (2_000_010, 3_100_000)];
        let windows = [(0, 100), (100, 2_500_000), (99, 101), (4_000_000, 5_000_000), (2_000_000, 2_000_000)];
        let lists = [dense.iter().copied(), sparse.iter().copied(), rare.iter().copied()];
        let (by, inw): ([Ns; 8], Vec<[Ns; 8]>) = measure_by_cover(lists, &windows);
        assert_eq!(pick(&by, |k| k & 1 != 0), measure(&dense));
        assert_eq!(pick(&by, |k| k & 2 != 0), measure(&sparse));
        assert_eq!(pick(&by, |k| k == 1), measure(&dense) - intersect_in(&dense, &union2(&sparse, &rare), 0, Ns::MAX));
        for (k, &(lo, hi)) in windows.iter().enumerate() {
            assert_eq!(pick(&inw[k], |m| m & 1 != 0), measure_in(&dense, lo, hi));
            assert_eq!(pick(&inw[k], |m| m & 4 != 0), measure_in(&rare, lo, hi));
            assert_eq!(pick(&inw[k], |m| m & 3 == 3), intersect_in(&dense, &sparse, lo, hi));
            assert_eq!(pick(&inw[k], |m| m != 0), measure_in(&union2(&union2(&dense, &sparse), &rare), lo, hi));
        }
        // Reverse order: everything late.
        let mut su = StreamingUnion::default();
        for &(s, e) in v.iter().rev() {
            su.push(s, e);
        }
        assert_eq!(su.finish().iter().collect::<Vec<_>>(), batch);
    }
}
