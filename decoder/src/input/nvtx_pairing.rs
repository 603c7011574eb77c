//! Pairs NVTX push/pop and start/end records of one ring file into completed ranges.
//!
//! Push/pop nest per thread, and one thread's records reach the ring in its own order, so a stack
//! per thread pairs them. Start/end ranges carry a range id and may end on another thread; the shim
//! drains per-thread buffers one after the other, so an end can reach the ring before its start.
//! They are paired by id in either order: a start waits for its end, an end waits for its start.
//!
//! Memory is bounded whatever the ring holds: at most [`MAX_PENDING`] starts and as many ends wait,
//! the oldest giving way (counted), and at most [`MAX_OPEN_PUSHES`] pushes are open at once, at most
//! [`MAX_DEPTH`] per thread (the others are counted and their pops consumed). Time is bounded too:
//! a pop looks for its domain among the innermost [`DOMAIN_SEARCH`] ranges only.

use std::collections::BTreeMap;

use tprof_format::StrId;

use crate::intervals::FastMap;
use crate::model::{Ns, RangeId, RangeKind};

/// Start/end ranges (and early ends) waiting for their other half, each.
pub const MAX_PENDING: usize = 1 << 16;
/// Push/pop ranges open at once, over all threads.
pub const MAX_OPEN_PUSHES: usize = 1 << 16;
/// Push/pop nesting depth tracked per thread.
pub const MAX_DEPTH: usize = 1 << 10;
/// How far down its thread's stack a pop looks for a range of its own domain.
const DOMAIN_SEARCH: usize = 64;

/// A range that has begun.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenRange {
    pub id: RangeId,
    pub parent: Option<RangeId>,
    pub depth: u32,
    pub kind: RangeKind,
    pub tid: u32,
    pub domain: StrId,
    pub name: StrId,
    pub start: Ns,
}

/// Values waiting under a 64-bit key, at most `cap` of them: inserting into a full set evicts the
/// one that has waited longest.
#[derive(Debug)]
struct Waiting<V> {
    by_key: FastMap<u64, (u64, V)>,
    /// Arrival number -> key, for the eviction order.
    order: BTreeMap<u64, u64>,
    arrivals: u64,
    cap: usize,
}

impl<V> Waiting<V> {
    fn new(cap: usize) -> Self {
        Waiting { by_key: FastMap::default(), order: BTreeMap::new(), arrivals: 0, cap }
    }
    fn contains(&self, key: u64) -> bool {
        self.by_key.contains_key(&key)
    }
    /// Adds `v` under a key not yet waiting; returns the value evicted to make room.
    fn insert(&mut self, key: u64, v: V) -> Option<V> {
        let evicted = if self.by_key.len() >= self.cap {
            self.order.pop_first().and_then(|(_, k)| self.by_key.remove(&k)).map(|(_, v)| v)
        } else {
            None
        };
        self.arrivals += 1;
        self.order.insert(self.arrivals, key);
        self.by_key.insert(key, (self.arrivals, v));
        evicted
    }
    fn remove(&mut self, key: u64) -> Option<V> {
        let (arrival, v) = self.by_key.remove(&key)?;
        self.order.remove(&arrival);
        Some(v)
    }
    fn len(&self) -> usize {
        self.by_key.len()
    }
    /// Everything still waiting, in arrival order.
    fn drain(&mut self) -> Vec<V> {
        let order = std::mem::take(&mut self.order);
        let mut out = Vec::with_capacity(order.len());
        for key in order.into_values() {
            if let Some((_, v)) = self.by_key.remove(&key) {
                out.push(v);
            }
        }
        out
    }
}

/// Open push ranges of one thread.
#[derive(Debug, Default)]
struct ThreadStack {
    open: Vec<OpenRange>,
    /// Pushes beyond the caps, innermost of all: the next pops consume them.
    untracked: u64,
}

/// What the pairing could not do, for the file's notes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PairingLosses {
    /// Pops and ends with no begin in the file (their begin was overwritten, or never recorded).
    pub unmatched_ends: u64,
    /// Starts given up while waiting for their end ([`MAX_PENDING`] later starts were waiting).
    pub evicted_starts: u64,
    /// Pushes not tracked: [`MAX_OPEN_PUSHES`] were already open, or [`MAX_DEPTH`] on their thread.
    pub untracked_pushes: u64,
    /// A start or end whose range id was already waiting (the later one is ignored).
    pub duplicate_ids: u64,
}

/// Pairs NVTX push/pop and start/end records into completed ranges.
#[derive(Debug)]
pub struct RangeTracker {
    next_id: u64,
    stacks: FastMap<u32, ThreadStack>,
    open_pushes: usize,
    started: Waiting<OpenRange>,
    /// Ends seen before their start: NVTX range id -> end time.
    early_ends: Waiting<Ns>,
    pub losses: PairingLosses,
    /// The last answer of [`RangeTracker::innermost`], (thread, range), forgotten whenever a push,
    /// a pop or the end changes the stacks: API calls come in runs on one thread between NVTX
    /// records, and each would otherwise look its thread up.
    last_innermost: Option<(u32, Option<RangeId>)>,
}

impl Default for RangeTracker {
    fn default() -> Self {
        RangeTracker {
            next_id: 0,
            stacks: FastMap::default(),
            open_pushes: 0,
            started: Waiting::new(MAX_PENDING),
            early_ends: Waiting::new(MAX_PENDING),
            losses: PairingLosses::default(),
            last_innermost: None,
        }
    }
}

impl RangeTracker {
    fn new_id(&mut self) -> RangeId {
        self.next_id += 1;
        RangeId(self.next_id)
    }

    /// The innermost push range open on `tid`.
    #[inline]
    pub fn innermost(&mut self, tid: u32) -> Option<RangeId> {
        match self.last_innermost {
            Some((t, r)) if t == tid => r,
            _ => {
                let r = self.stacks.get(&tid).and_then(|s| s.open.last()).map(|r| r.id);
                self.last_innermost = Some((tid, r));
                r
            }
        }
    }

    pub fn push(&mut self, tid: u32, domain: StrId, name: StrId, start: Ns) {
        self.last_innermost = None;
        let full = self.open_pushes >= MAX_OPEN_PUSHES;
        let stack = self.stacks.entry(tid).or_default();
        if full || stack.open.len() >= MAX_DEPTH || stack.untracked > 0 {
            stack.untracked += 1;
            self.losses.untracked_pushes += 1;
            return;
        }
        self.next_id += 1;
        let id = RangeId(self.next_id);
        let (parent, depth) = (stack.open.last().map(|r| r.id), stack.open.len() as u32);
        stack.open.push(OpenRange { id, parent, depth, kind: RangeKind::Nvtx, tid, domain, name, start });
        self.open_pushes += 1;
    }

    /// Closes the innermost push of `domain` on `tid` (else the innermost of any domain).
    pub fn pop(&mut self, tid: u32, domain: StrId) -> Option<OpenRange> {
        self.last_innermost = None;
        let Some(stack) = self.stacks.get_mut(&tid) else {
            self.losses.unmatched_ends += 1;
            return None;
        };
        if stack.untracked > 0 {
            stack.untracked -= 1;
            return None;
        }
        let Some(innermost) = stack.open.len().checked_sub(1) else {
            self.losses.unmatched_ends += 1;
            return None;
        };
        let window = stack.open.len().saturating_sub(DOMAIN_SEARCH);
        let i = stack.open[window..].iter().rposition(|r| r.domain == domain).map_or(innermost, |i| window + i);
        self.open_pushes -= 1;
        Some(stack.open.remove(i))
    }

    /// A start/end range begins; returns it completed when its end came first.
    pub fn start(&mut self, tid: u32, domain: StrId, name: StrId, nvtx_id: u64, start: Ns) -> Option<(OpenRange, Ns)> {
        if self.started.contains(nvtx_id) {
            self.losses.duplicate_ids += 1;
            return None;
        }
        let id = self.new_id();
        let r = OpenRange { id, parent: None, depth: 0, kind: RangeKind::NvtxStartEnd, tid, domain, name, start };
        if let Some(end) = self.early_ends.remove(nvtx_id) {
            return Some((r, end));
        }
        if self.started.insert(nvtx_id, r).is_some() {
            self.losses.evicted_starts += 1;
        }
        None
    }

    /// A start/end range ends; returns it when its start has been seen.
    pub fn end(&mut self, nvtx_id: u64, end: Ns) -> Option<OpenRange> {
        if let Some(r) = self.started.remove(nvtx_id) {
            return Some(r);
        }
        if self.early_ends.contains(nvtx_id) {
            self.losses.duplicate_ids += 1;
        } else if self.early_ends.insert(nvtx_id, end).is_some() {
            self.losses.unmatched_ends += 1;
        }
        None
    }

    /// End of the file: the ranges still open (innermost pushes first, then starts in arrival
    /// order). Ends still waiting for a start count as unmatched.
    pub fn finish(&mut self) -> Vec<OpenRange> {
        self.last_innermost = None;
        let mut open: Vec<OpenRange> = self.stacks.drain().flat_map(|(_, s)| s.open.into_iter().rev()).collect();
        open.sort_by_key(|r| std::cmp::Reverse(r.depth));
        open.extend(self.started.drain());
        self.open_pushes = 0;
        self.losses.unmatched_ends += self.early_ends.len() as u64;
        self.early_ends.drain();
        open
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: StrId = StrId(1);
    const N: StrId = StrId(2);

    #[test]
    fn start_end_pair_in_either_order() {
        let mut t = RangeTracker::default();
        assert_eq!(t.start(1, D, N, 7, 100), None);
        let r = t.end(7, 300).expect("end after start");
        assert_eq!((r.tid, r.start, r.kind), (1, 100, RangeKind::NvtxStartEnd));
        assert_eq!(t.end(8, 500), None);
        let (r, end) = t.start(1, D, N, 8, 200).expect("start after its end");
        assert_eq!((r.tid, r.start, end), (1, 200, 500));
        assert!(t.finish().is_empty());
        assert_eq!(t.losses, PairingLosses::default());
    }

    #[test]
    fn waiting_starts_and_ends_are_capped_and_counted() {
        let mut t = RangeTracker::default();
        let n = MAX_PENDING as u64 + 10;
        for i in 0..n {
            t.start(1, D, N, i, i);
        }
        assert_eq!(t.losses.evicted_starts, 10);
        // The oldest ten gave way: their ends now wait for a start that never comes.
        for i in 0..10 {
            assert_eq!(t.end(i, n), None);
        }
        assert_eq!(t.end(10, n).map(|r| r.start), Some(10));
        for i in 0..n {
            t.end(1_000_000 + i, 0);
        }
        assert_eq!(t.losses.unmatched_ends, 10 + 10);
        assert!(t.early_ends.len() <= MAX_PENDING && t.started.len() <= MAX_PENDING);
        let open = t.finish();
        assert_eq!(open.len(), MAX_PENDING - 1);
        assert_eq!(open[0].start, 11, "arrival order");
        assert_eq!(t.losses.unmatched_ends, 20 + MAX_PENDING as u64);
    }

    #[test]
    fn pushes_beyond_the_caps_are_counted_and_their_pops_consumed() {
        let mut t = RangeTracker::default();
        for i in 0..MAX_DEPTH as u64 + 3 {
            t.push(5, D, N, i);
        }
        assert_eq!(t.losses.untracked_pushes, 3);
        for _ in 0..3 {
            assert_eq!(t.pop(5, D), None);
        }
        let r = t.pop(5, D).expect("the innermost tracked push");
        assert_eq!((r.depth, r.start), (MAX_DEPTH as u32 - 1, MAX_DEPTH as u64 - 1));
        assert_eq!(t.losses.unmatched_ends, 0);
        assert_eq!(t.pop(6, D), None);
        assert_eq!(t.losses.unmatched_ends, 1);

        // Over all threads: one push each on many threads.
        let mut t = RangeTracker::default();
        for tid in 0..MAX_OPEN_PUSHES as u32 + 2 {
            t.push(tid, D, N, 0);
        }
        assert_eq!(t.losses.untracked_pushes, 2);
        assert_eq!(t.pop(MAX_OPEN_PUSHES as u32 + 1, D), None);
        assert!(t.pop(0, D).is_some());
        t.push(9_999_999, D, N, 1);
        assert_eq!(t.innermost(9_999_999), Some(RangeId(MAX_OPEN_PUSHES as u64 + 1)));
        assert_eq!(t.finish().len(), MAX_OPEN_PUSHES);
    }

    #[test]
    fn pop_prefers_its_domain_among_the_innermost() {
        let mut t = RangeTracker::default();
        let other = StrId(3);
        t.push(1, D, N, 0);
        t.push(1, other, N, 1);
        assert_eq!(t.pop(1, D).map(|r| r.start), Some(0));
        assert_eq!(t.pop(1, D).map(|r| r.start), Some(1), "no range of the domain: the innermost");
    }

    #[test]
    fn innermost_remembered_answers_those_of_the_stacks() {
        // Random pushes, pops and queries on a few threads: the remembered answer is always the
        // one the stacks give.
        let mut t = RangeTracker::default();
        let mut rng = crate::xorshift::XorShift(4242);
        for i in 0..20_000u64 {
            let tid = rng.below(3) as u32;
            match rng.below(5) {
                0 => t.push(tid, D, N, i),
                1 => {
                    t.pop(tid, D);
                }
                _ => {
                    let truth = t.stacks.get(&tid).and_then(|s| s.open.last()).map(|r| r.id);
                    assert_eq!(t.innermost(tid), truth, "step {i}");
                }
            }
        }
        t.finish();
        assert_eq!(t.innermost(1), None);
    }
}
