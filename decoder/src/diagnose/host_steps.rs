//! The host side of one rank's timeline, in one pass over its calls: launches, synchronizations
//! and allocations per step, the step each correlation id was issued in, the unions of host call
//! time the gap classification measures, and the synchronizing calls it searches.

use super::corr_steps::CorrSteps;
use super::spans::StartOrderUnion;
use super::timeline::{CallClass, Input, RawCall, StepCursor, StepIndex};
use crate::diagnose::facts::SyncCallStat;
use crate::intervals::FastMap;
use crate::model::*;

/// Pageable copies block the host like a sync: the copy calls of pageable copies become sync calls.
pub fn prepare_calls(inp: &mut Input) {
    if !inp.pageable.is_empty() {
        for c in &mut inp.calls {
            if c.class() == CallClass::Copy && c.corr != 0 && inp.pageable.contains_key(&c.corr) {
                c.set_class(CallClass::Sync);
            }
        }
    }
    debug_assert!(inp.calls.is_sorted_by_key(|c| c.start), "calls in start order");
}

/// CUPTI / intercepted synchronization records stand in when no sync call was recorded: as sync
/// calls named `sync:<kind>` (names added to `names` as needed), in start order (of equal starts,
/// in arrival order). They are kept apart from the calls: merged into them (of equal starts, the
/// calls first), they would be read the same.
fn stand_in_syncs(syncs: &[SyncEvent], names: &mut Vec<Name>) -> Vec<RawCall> {
    let mut stand_ins = Vec::with_capacity(syncs.len());
    // The name id of each kind seen so far (a handful of kinds: searched in order).
    let mut kind_ids: Vec<(SyncKind, u32)> = Vec::new();
    for s in syncs {
        let id = match kind_ids.iter().find(|k| k.0 == s.kind) {
            Some(&(_, id)) => id,
            None => {
                let name: Name = format!("sync:{}", s.kind.name()).into();
                let id = match names.iter().position(|n| *n == name) {
                    Some(i) => i as u32,
                    None => {
                        names.push(name);
                        (names.len() - 1) as u32
                    }
                };
                kind_ids.push((s.kind, id));
                id
            }
        };
        stand_ins.push(RawCall::new(s.start, s.end, 0, CallClass::Sync, id));
    }
    if !stand_ins.is_sorted_by_key(|c| c.start) {
        stand_ins.sort_by_key(|c| c.start);
    }
    stand_ins
}

/// A synchronizing call, as the gap classification searches them.
#[derive(Debug, Clone, Copy)]
pub struct SyncSpan {
    pub start: Ns,
    pub end: Ns,
    /// The latest end of this and every earlier synchronizing call.
    pub ends_by: Ns,
    pub name: u32,
}

/// The host side per step: launches, synchronizations, allocations, and which step each
/// correlation id was issued in.
pub struct HostSteps {
    pub launches: Vec<u64>,
    pub sync_calls: Vec<u64>,
    pub sync_blocked: Vec<Ns>,
    /// Step position by correlation id.
    pub corr_step: CorrSteps,
    /// Per call name (the GPU idle time after each is added by the gap classification).
    pub sync_stats: FastMap<u32, SyncCallStat>,
    pub alloc_calls: u64,
    pub alloc_ns: Ns,
    /// Union of the set-up calls (communicator init / destroy).
    pub setup: Vec<(Ns, Ns)>,
    /// Union of the allocation calls.
    pub alloc: Vec<(Ns, Ns)>,
    /// Synchronizing calls by start (all of them, in steps or not).
    pub syncs: Vec<SyncSpan>,
    /// Calls whose correlation is a pageable copy's: (correlation, name).
    pub pageable_calls: Vec<(u32, u32)>,
    /// The stand-in sync calls, when no sync call was recorded ([`stand_in_syncs`]; else empty):
    /// calls too, in start order, kept apart from `inp.calls`.
    pub stand_ins: Vec<RawCall>,
}

impl HostSteps {
    /// `inp.calls` sorted by start ([`prepare_calls`]); names of stand-in syncs are added to
    /// `inp.names`.
    pub fn of(inp: &mut Input, index: &StepIndex) -> HostSteps {
        let nsteps = index.len();
        let mut h = HostSteps {
            launches: vec![0; nsteps],
            sync_calls: vec![0; nsteps],
            sync_blocked: vec![0; nsteps],
            // Correlation ids are dense: about one bit per call, made room for up front.
            corr_step: CorrSteps::with_room(inp.calls.len()),
            sync_stats: FastMap::default(),
            alloc_calls: 0,
            alloc_ns: 0,
            setup: Vec::new(),
            alloc: Vec::new(),
            syncs: Vec::new(),
            pageable_calls: Vec::new(),
            stand_ins: Vec::new(),
        };
        let (mut setup, mut alloc) = (StartOrderUnion::default(), StartOrderUnion::default());
        let any_pageable = !inp.pageable.is_empty();
        let mut cursor = StepCursor::default();
        for c in &inp.calls {
            let (class, name) = (c.class(), c.name());
            match class {
                CallClass::Setup => setup.push(c.start, c.end),
                CallClass::Alloc => alloc.push(c.start, c.end),
                CallClass::Sync => h.push_sync(c),
                _ => {}
            }
            if any_pageable && c.corr != 0 && inp.pageable.contains_key(&c.corr) {
                h.pageable_calls.push((c.corr, name));
            }
            let Some(p) = index.pos_forward(c.start, &mut cursor) else { continue };
            if c.corr != 0 {
                h.corr_step.insert(c.corr, p as u32);
            }
            match class {
                CallClass::Launch => h.launches[p] += 1,
                CallClass::Sync => h.count_sync(p, c, &inp.names),
                CallClass::Alloc => {
                    h.alloc_calls += 1;
                    h.alloc_ns += c.end.saturating_sub(c.start);
                }
                _ => {}
            }
        }
        if h.syncs.is_empty() && !inp.syncs.is_empty() {
            // Sync calls of correlation 0 that no pageable copy names: only the syncs and the
            // per-step sync counts see them.
            let stand_ins = stand_in_syncs(&inp.syncs, &mut inp.names);
            let mut cursor = StepCursor::default();
            for c in &stand_ins {
                h.push_sync(c);
                if let Some(p) = index.pos_forward(c.start, &mut cursor) {
                    h.count_sync(p, c, &inp.names);
                }
            }
            h.stand_ins = stand_ins;
        }
        (h.setup, h.alloc) = (setup.finish(), alloc.finish());
        h
    }

    #[inline]
    fn push_sync(&mut self, c: &RawCall) {
        let ends_by = self.syncs.last().map_or(c.end, |l| l.ends_by.max(c.end));
        self.syncs.push(SyncSpan { start: c.start, end: c.end, ends_by, name: c.name() });
    }

    /// A sync call in step position `p`.
    fn count_sync(&mut self, p: usize, c: &RawCall, names: &[Name]) {
        self.sync_calls[p] += 1;
        let d = c.end.saturating_sub(c.start);
        self.sync_blocked[p] += d;
        let name = c.name();
        let s = self.sync_stats.entry(name).or_insert_with(|| SyncCallStat {
            name: names.get(name as usize).map(|n| n.to_string()).unwrap_or_default(),
            ..SyncCallStat::default()
        });
        s.calls += 1;
        s.blocked_ns += d;
    }
}

/// How long the host was busy in calls other than set-up inside query windows whose starts never
/// decrease from one call to the next: the measure of the calls' union, as `intervals::measure_in`
/// on it would give, found with a cursor per list of calls (each in start order; together, the
/// calls and the stand-in syncs) that only moves forward and the latest end of the calls behind
/// them, so neither the union nor the merged list is ever built.
#[derive(Debug)]
pub struct HostBusy<'a> {
    lists: [&'a [RawCall]; 2],
    /// Calls before these start before the last query's start.
    at: [usize; 2],
    /// The latest end of the calls before `at` (other than set-up).
    reach: Ns,
}

impl<'a> HostBusy<'a> {
    pub fn new(calls: &'a [RawCall], more: &'a [RawCall]) -> HostBusy<'a> {
        HostBusy { lists: [calls, more], at: [0, 0], reach: 0 }
    }

    /// Length of the calls' union inside `[lo, hi)` (`lo` at or after the previous call's).
    #[inline]
    pub fn measure(&mut self, lo: Ns, hi: Ns) -> Ns {
        for (list, at) in self.lists.iter().zip(&mut self.at) {
            while let Some(c) = list.get(*at).filter(|c| c.start < lo) {
                if c.class() != CallClass::Setup {
                    self.reach = self.reach.max(c.end);
                }
                *at += 1;
            }
        }
        if hi <= lo {
            return 0;
        }
        // Covered from `lo` up to `to` so far: the calls that started before `lo` reach this far.
        let mut to = self.reach.clamp(lo, hi);
        let mut total = to - lo;
        // The calls that start before `hi`, both lists merged by start (of equal starts, either
        // first: the union is the same).
        let [a, b] = self.lists;
        let (mut i, mut j) = (self.at[0], self.at[1]);
        loop {
            let x = a.get(i).filter(|c| c.start < hi);
            let y = b.get(j).filter(|c| c.start < hi);
            let c = match (x, y) {
                (Some(x), Some(y)) if y.start < x.start => {
                    j += 1;
                    y
                }
                (Some(x), _) => {
                    i += 1;
                    x
                }
                (None, Some(y)) => {
                    j += 1;
                    y
                }
                (None, None) => break,
            };
            let (s, e) = (c.start.max(to), c.end.min(hi));
            if e > s && c.class() != CallClass::Setup {
                total += e - s;
                to = e;
            }
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intervals::measure_in;
    use crate::xorshift::XorShift;

    #[test]
    fn host_busy_measures_the_union_of_the_calls_of_both_lists() {
        let mut rng = XorShift(0x1234_5678_9abc_def1);
        for round in 0..100u64 {
            let mut calls = Vec::new();
            let mut t = rng.below(5);
            for i in 0..rng.below(100) as u32 {
                t += rng.below(12);
                let class = if rng.below(5) == 0 { CallClass::Setup } else { CallClass::Other };
                // Some empty and backwards calls too.
                let end = (t + rng.below(40)).saturating_sub(rng.below(4));
                calls.push(RawCall::new(t, end, i, class, 0));
            }
            let mut union = StartOrderUnion::default();
            for c in calls.iter().filter(|c| c.class() != CallClass::Setup) {
                union.push(c.start, c.end);
            }
            let union = union.finish();
            // The calls in two lists, each in start order (the second empty in some rounds).
            let (a, b): (Vec<RawCall>, Vec<RawCall>) = calls.iter().partition(|_| round % 3 == 0 || rng.below(3) > 0);
            let mut busy = HostBusy::new(&a, &b);
            let mut lo = 0;
            for _ in 0..200 {
                lo += rng.below(6 + round % 20);
                let hi = lo + rng.below(50);
                assert_eq!(busy.measure(lo, hi), measure_in(&union, lo, hi), "[{lo}, {hi}) in {calls:?}");
                if rng.below(3) == 0 {
                    assert_eq!(busy.measure(lo, hi + 7), measure_in(&union, lo, hi + 7));
                }
            }
        }
    }
}
