//! One rank's GPU timeline, reduced to facts: unions of compute / communication / copy time,
//! each GPU idle gap classified by what the host was doing (data, launch, sync, idle), per-step
//! aggregates, collectives paired with their kernels, AMP skipped steps.
//!
//! Steps are host windows; GPU work belongs to the step whose host call launched it (by
//! correlation), so a host that runs ahead of the GPU is attributed right.

use std::collections::HashMap;

use super::facts::*;
use crate::intervals::{intersect_in, measure_in, union, union2, SeqMap};
use crate::model::*;
use crate::steps::StepWindow;

/// Kind of a GPU operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Compute,
    Comm,
    Memory,
}

/// A GPU operation, compact.
#[derive(Debug, Clone, Copy)]
pub struct RawOp {
    pub start: Ns,
    pub end: Ns,
    pub corr: u64,
    pub kind: OpKind,
    pub family: Family,
}

/// What a host call does to the GPU pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallClass {
    Launch,
    /// Blocks the host until GPU work is done.
    Sync,
    Copy,
    Alloc,
    Other,
}

/// A host call, compact (`name` indexes the collector's name table).
#[derive(Debug, Clone, Copy)]
pub struct RawCall {
    pub start: Ns,
    pub end: Ns,
    pub corr: u64,
    pub class: CallClass,
    pub name: u32,
}

/// Class of a CUDA runtime / driver call by name.
pub fn classify_call(name: &str) -> CallClass {
    let has = |p: &str| name.contains(p);
    if has("Synchronize") {
        CallClass::Sync
    } else if has("LaunchKernel") || has("cuLaunch") || has("GraphLaunch") || has("LaunchCooperative") {
        CallClass::Launch
    } else if has("Memcpy") {
        // A copy without "Async" returns when the data has arrived.
        if has("Async") {
            CallClass::Copy
        } else {
            CallClass::Sync
        }
    } else if has("Memset") {
        CallClass::Copy
    } else if has("Malloc") || has("Free") || has("MemAlloc") || has("MemFree") || is_vmm_call(name) {
        CallClass::Alloc
    } else {
        CallClass::Other
    }
}

/// The driver's virtual memory management calls (PyTorch's expandable segments, NCCL): allocation
/// calls like `cudaMalloc`, with reserving, mapping and access setup as part of them.
fn is_vmm_call(name: &str) -> bool {
    ["cuMemCreate", "cuMemRelease", "cuMemMap", "cuMemUnmap", "cuMemSetAccess", "cuMemAddressReserve"]
        .iter()
        .any(|p| name.starts_with(p))
}

/// How long after the GPU ran dry a blocked host may return and still count as the cause (ns).
const SYNC_SLACK_NS: Ns = 5_000;
/// With at least this many steps, the first one is left out as warm-up.
pub const WARMUP_MIN_STEPS: usize = 4;
/// Idle gaps between kernels of a step up to this long count as launch overhead (ns).
const LAUNCH_GAP_MAX_NS: Ns = 1_000_000;

/// Host step windows, searchable by time.
#[derive(Debug, Clone, Default)]
pub struct StepIndex {
    windows: Vec<StepWindow>,
}

impl StepIndex {
    pub fn new(mut windows: Vec<StepWindow>) -> StepIndex {
        windows.sort_by_key(|w| w.start);
        StepIndex { windows }
    }
    /// Position of the step whose host window holds `t`.
    pub fn pos(&self, t: Ns) -> Option<usize> {
        let i = self.windows.partition_point(|w| w.start <= t);
        let w = self.windows.get(i.checked_sub(1)?)?;
        (t <= w.end).then_some(i - 1)
    }
    /// [`StepIndex::pos`] for times that never decrease from one call to the next: `cursor`
    /// (start at 0) moves forward instead of a binary search per call. Same results.
    pub fn pos_forward(&self, t: Ns, cursor: &mut usize) -> Option<usize> {
        let i = forward_partition(&self.windows, cursor, |w| w.start <= t);
        let w = self.windows.get(i.checked_sub(1)?)?;
        (t <= w.end).then_some(i - 1)
    }
    /// Index of the step whose host window holds `t`.
    pub fn at(&self, t: Ns) -> Option<u64> {
        self.pos(t).map(|p| self.windows[p].index)
    }
}

/// `v.partition_point(pred)` for a predicate that only ever gets more inclusive from one call to
/// the next (non-decreasing query times): `cursor` moves forward and never searches.
fn forward_partition<T>(v: &[T], cursor: &mut usize, pred: impl Fn(&T) -> bool) -> usize {
    while *cursor < v.len() && pred(&v[*cursor]) {
        *cursor += 1;
    }
    *cursor
}

/// Everything the collector kept of one process.
#[derive(Debug, Default)]
pub struct Input {
    pub ops: Vec<RawOp>,
    pub calls: Vec<RawCall>,
    pub names: Vec<Name>,
    pub syncs: Vec<SyncEvent>,
    /// Pageable copies: correlation -> (bytes, start, end).
    pub pageable: HashMap<u64, (u64, Ns, Ns)>,
    pub small_d2h: Vec<u64>,
    pub colls: Vec<Collective>,
    pub comm_kernels: Vec<Kernel>,
    pub mem_samples: Vec<(Ns, u64)>,
    pub windows: Vec<StepWindow>,
    pub span: (Ns, Ns),
    /// Stretches that capture windows did not record (sorted, disjoint): neither busy nor idle.
    pub unobserved: Vec<(Ns, Ns)>,
}

/// The parts of `[a, b)` outside the sorted, disjoint `holes`.
fn observed_parts(a: Ns, b: Ns, holes: &[(Ns, Ns)]) -> Vec<(Ns, Ns)> {
    let mut out = Vec::new();
    let mut from = a;
    for &(s, e) in holes.iter().filter(|h| h.1 > a && h.0 < b) {
        if s > from {
            out.push((from, s));
        }
        from = from.max(e);
    }
    if b > from {
        out.push((from, b));
    }
    out
}

/// What [`analyse`] found.
#[derive(Debug, Default)]
pub struct Timeline {
    pub gpu_ops: usize,
    pub window: (Ns, Ns),
    pub split: Split,
    pub steps: Vec<StepFacts>,
    pub colls: Vec<CollFact>,
    pub syncs: Vec<SyncCallStat>,
    pub small_d2h: u64,
    pub pageable: PageableStat,
    pub amp: AmpFacts,
    pub reserved_by_step: Vec<(u64, u64)>,
    pub step_alloc_calls: u64,
    pub step_alloc_ns: Ns,
    pub step_of_time: Option<StepIndex>,
}

fn median(v: &mut [Ns]) -> Ns {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// Reduce one process's timeline to facts.
pub fn analyse(mut inp: Input) -> Timeline {
    let index = StepIndex::new(std::mem::take(&mut inp.windows));
    let nsteps = index.windows.len();
    let mut out = Timeline { gpu_ops: inp.ops.len(), ..Timeline::default() };

    // Host calls: pageable copies block the host like a sync.
    for c in &mut inp.calls {
        if c.corr != 0 && inp.pageable.contains_key(&c.corr) && c.class == CallClass::Copy {
            c.class = CallClass::Sync;
        }
    }
    // CUPTI / intercepted synchronization records stand in when no sync call was recorded.
    if !inp.calls.iter().any(|c| c.class == CallClass::Sync) {
        for s in &inp.syncs {
            let name: Name = format!("sync:{}", s.kind.name()).into();
            let id = match inp.names.iter().position(|n| *n == name) {
                Some(i) => i as u32,
                None => {
                    inp.names.push(name);
                    (inp.names.len() - 1) as u32
                }
            };
            inp.calls.push(RawCall { start: s.start, end: s.end, corr: 0, class: CallClass::Sync, name: id });
        }
    }
    inp.calls.sort_by_key(|c| c.start);

    // Per step host facts; launch correlation -> step position.
    let mut launches = vec![0u64; nsteps];
    let mut sync_calls = vec![0u64; nsteps];
    let mut sync_blocked = vec![0u64; nsteps];
    let mut corr_step: SeqMap<u64, usize> = SeqMap::default();
    let mut sync_stats: HashMap<u32, SyncCallStat> = HashMap::new();
    let mut call_cursor = 0;
    for c in &inp.calls {
        // Calls are sorted by start.
        let Some(p) = index.pos_forward(c.start, &mut call_cursor) else { continue };
        if c.corr != 0 {
            corr_step.insert(c.corr, p);
        }
        match c.class {
            CallClass::Launch => launches[p] += 1,
            CallClass::Sync => {
                sync_calls[p] += 1;
                let d = c.end.saturating_sub(c.start);
                sync_blocked[p] += d;
                let s = sync_stats.entry(c.name).or_insert_with(|| SyncCallStat {
                    name: inp.names.get(c.name as usize).map(|n| n.to_string()).unwrap_or_default(),
                    ..SyncCallStat::default()
                });
                s.calls += 1;
                s.blocked_ns += d;
            }
            CallClass::Alloc => {
                out.step_alloc_calls += 1;
                out.step_alloc_ns += c.end.saturating_sub(c.start);
            }
            _ => {}
        }
    }

    // GPU operations, each with its step position.
    inp.ops.sort_by_key(|o| (o.start, o.end));
    // u32 positions: half the memory of Option<usize> per operation.
    // Operations are sorted by start.
    let mut op_cursor = 0;
    let op_step: Vec<Option<u32>> = inp
        .ops
        .iter()
        .map(|o| {
            (o.corr != 0)
                .then(|| corr_step.get(&o.corr).copied())
                .flatten()
                .or_else(|| index.pos_forward(o.start, &mut op_cursor))
                .map(|p| p as u32)
        })
        .collect();
    let pick = |k: OpKind| union(inp.ops.iter().filter(|o| o.kind == k).map(|o| (o.start, o.end)).collect());
    let (compute, comm, mem) = (pick(OpKind::Compute), pick(OpKind::Comm), pick(OpKind::Memory));
    let cm = union2(&compute, &comm);
    let all = union2(&cm, &mem);

    // The analysed window: the steps (host and the GPU work they launched).
    let mut g_first: Vec<Option<Ns>> = vec![None; nsteps];
    let mut g_last: Ns = 0;
    for (o, s) in inp.ops.iter().zip(&op_step) {
        if let Some(p) = s.map(|p| p as usize) {
            if g_first[p].is_none_or(|f| o.start < f) {
                g_first[p] = Some(o.start);
            }
            g_last = g_last.max(o.end);
        }
    }
    // The first step is warm-up (lazy initialisation, first launches, communicator set-up): with
    // enough steps, the window starts at the second one.
    let skip = usize::from(nsteps >= WARMUP_MIN_STEPS);
    let (w0, w1) = match (index.windows.get(skip), index.windows.last()) {
        (Some(f), Some(l)) => {
            let first_gpu = g_first[skip..].iter().flatten().min().copied().unwrap_or(f.start);
            (f.start.min(first_gpu), l.end.max(g_last))
        }
        _ => inp.span,
    };
    out.window = (w0, w1);

    // Idle gaps, classified.
    let host = union(inp.calls.iter().map(|c| (c.start, c.end)).collect());
    let mut sync_list: Vec<&RawCall> = inp.calls.iter().filter(|c| c.class == CallClass::Sync).collect();
    sync_list.sort_by_key(|c| c.start);
    // Gaps are classified in time order, so the searches below only move forward.
    let mut sync_cursor = 0;
    let mut blocking_sync = |a: Ns| -> Option<u32> {
        let i = forward_partition(&sync_list, &mut sync_cursor, |c| c.start <= a);
        sync_list[..i].iter().rev().take(64).find(|c| c.end + SYNC_SLACK_NS >= a).map(|c| c.name)
    };
    let mut step_split = vec![Split::default(); nsteps];
    let mut split = Split::default();
    let mut prev = w0;
    let (mut gap_op_cursor, mut gap_cursor) = (0, 0);
    let mut classify_gap = |a: Ns, b: Ns, split: &mut Split, step_split: &mut [Split]| {
        let gap = b - a;
        let i = forward_partition(&inp.ops, &mut gap_op_cursor, |o| o.start < b);
        let owner =
            op_step.get(i).copied().flatten().map(|p| p as usize).or_else(|| index.pos_forward(b, &mut gap_cursor));
        let first = owner.is_some_and(|p| g_first[p] == Some(b));
        let mut part = Split::default();
        if let Some(name) = blocking_sync(a) {
            part.sync_ns = gap;
            if let Some(s) = sync_stats.get_mut(&name) {
                s.gpu_idle_ns += gap;
            }
        } else if first {
            let outside = gap - measure_in(&host, a, b);
            part.data_ns = outside;
            part.launch_ns = gap - outside;
        } else if owner.is_some() && gap <= LAUNCH_GAP_MAX_NS {
            part.launch_ns = gap;
        } else {
            let inside = measure_in(&host, a, b);
            if owner.is_some() && inside * 2 >= gap {
                part.launch_ns = gap;
            } else {
                part.idle_ns = gap;
            }
        }
        split.add(&part);
        if let Some(p) = owner {
            step_split[p].add(&part);
        }
    };
    // Unrecorded stretches reach to the next step's start: between a window's opening and its
    // first whole step the GPU still runs work launched before (unrecorded), which is not idle.
    let mut holes = std::mem::take(&mut inp.unobserved);
    for h in &mut holes {
        if let Some(next) = index.windows.iter().map(|w| w.start).filter(|&t| t >= h.1).min() {
            h.1 = next;
        }
    }
    let observed = observed_parts(w0, w1, &holes);
    let in_observed = |set: &[(Ns, Ns)]| observed.iter().map(|&(a, b)| measure_in(set, a, b)).sum::<Ns>();
    for &(s, e) in &all {
        if e <= w0 || s >= w1 {
            continue;
        }
        let (s, e) = (s.max(w0), e.min(w1));
        if s > prev {
            // Time the capture windows did not record is left out, not called idle.
            for (a, b) in observed_parts(prev, s, &holes) {
                classify_gap(a, b, &mut split, &mut step_split);
            }
        }
        prev = prev.max(e);
    }
    if prev < w1 {
        split.idle_ns += observed_parts(prev, w1, &holes).iter().map(|p| p.1 - p.0).sum::<Ns>();
    }
    split.compute_ns = in_observed(&compute);
    split.comm_ns = in_observed(&comm) - observed.iter().map(|&(a, b)| intersect_in(&comm, &compute, a, b)).sum::<Ns>();
    split.memcpy_ns = in_observed(&all) - in_observed(&cm);

    // Per step.
    let mut kdur: Vec<Vec<Ns>> = vec![Vec::new(); nsteps];
    let mut kspan: Vec<Vec<(Ns, Ns)>> = vec![Vec::new(); nsteps];
    let mut amp_check: Vec<Option<Ns>> = vec![None; nsteps];
    let mut optim_after: Vec<bool> = vec![false; nsteps];
    let mut optim_name: Option<Family> = None;
    for (o, s) in inp.ops.iter().zip(&op_step) {
        let Some(p) = s.map(|p| p as usize) else { continue };
        if o.kind == OpKind::Compute {
            kdur[p].push(o.end - o.start);
            kspan[p].push((o.start, o.end));
        }
        match o.family {
            Family::AmpCheck => amp_check[p] = Some(amp_check[p].map_or(o.start, |t: Ns| t.min(o.start))),
            Family::Optimizer => optim_name = Some(Family::Optimizer),
            _ => {}
        }
    }
    for (o, s) in inp.ops.iter().zip(&op_step) {
        if let (Some(p), Family::Optimizer) = (s.map(|p| p as usize), o.family) {
            if amp_check[p].is_some_and(|t| o.start >= t) {
                optim_after[p] = true;
            }
        }
    }
    let mut order: Vec<usize> = (0..nsteps).filter(|&p| g_first[p].is_some()).collect();
    order.sort_by_key(|&p| g_first[p]);
    let mut next_first: Vec<Ns> = vec![w1; nsteps];
    for w in order.windows(2) {
        next_first[w[0]] = g_first[w[1]].unwrap_or(w1);
    }
    // A step's GPU window ends where recording stopped, not after the unrecorded stretch.
    for p in 0..nsteps {
        if let Some(g) = g_first[p] {
            if let Some(h) = holes.iter().find(|h| h.0 >= g && h.0 < next_first[p]) {
                next_first[p] = h.0;
            }
        }
    }
    for (p, w) in index.windows.iter().enumerate().skip(skip) {
        let mut st = StepFacts {
            index: w.index,
            host_start: w.start,
            host_end: w.end,
            gpu_start: g_first[p],
            gpu_end: next_first[p],
            split: step_split[p],
            launches: launches[p],
            kernels: kdur[p].len() as u64,
            median_kernel_ns: median(&mut kdur[p]),
            sync_calls: sync_calls[p],
            sync_blocked_ns: sync_blocked[p],
            ..StepFacts::default()
        };
        if let Some(g) = g_first[p] {
            let e = next_first[p].max(g);
            st.split.compute_ns = measure_in(&compute, g, e);
            st.split.comm_ns = measure_in(&comm, g, e) - intersect_in(&comm, &compute, g, e);
            st.split.memcpy_ns = measure_in(&all, g, e) - measure_in(&cm, g, e);
        }
        let ks = &mut kspan[p];
        ks.sort_unstable();
        let mut gaps: Vec<Ns> = ks.windows(2).map(|k| k[1].0.saturating_sub(k[0].1)).collect();
        st.median_gap_ns = median(&mut gaps);
        out.steps.push(st);
    }

    // AMP.
    if optim_name.is_some() {
        for (p, w) in index.windows.iter().enumerate() {
            if amp_check[p].is_some() {
                out.amp.checked_steps.push(w.index);
                if !optim_after[p] {
                    out.amp.skipped_steps.push(w.index);
                    out.amp.skipped_ns +=
                        out.steps.iter().find(|s| s.index == w.index).map_or(0, |s| s.gpu_window_ns());
                }
            }
        }
    }

    out.colls = pair_collectives(&inp.colls, &inp.comm_kernels, &compute, &index, &corr_step);

    // Syncs inside steps, most costly first.
    let mut syncs: Vec<SyncCallStat> = sync_stats.into_values().collect();
    syncs.sort_by(|a, b| {
        b.gpu_idle_ns.cmp(&a.gpu_idle_ns).then(b.blocked_ns.cmp(&a.blocked_ns)).then(a.name.cmp(&b.name))
    });
    out.syncs = syncs;
    out.small_d2h = inp.small_d2h.iter().filter(|c| corr_step.contains_key(c)).count() as u64;

    // Pageable copies.
    let mut pg = PageableStat::default();
    let mut call_names: Vec<String> = Vec::new();
    let corr_name: HashMap<u64, u32> = inp
        .calls
        .iter()
        .filter(|c| c.corr != 0 && inp.pageable.contains_key(&c.corr))
        .map(|c| (c.corr, c.name))
        .collect();
    for (corr, &(bytes, s, e)) in &inp.pageable {
        pg.copies += 1;
        pg.bytes += bytes;
        pg.gpu_ns += e.saturating_sub(s);
        pg.exposed_ns += e.saturating_sub(s) - intersect_in(&[(s, e)], &cm, s, e);
        if let Some(n) = corr_name.get(corr).and_then(|&i| inp.names.get(i as usize)) {
            if !call_names.iter().any(|c| c == &**n) {
                call_names.push(n.to_string());
            }
        }
    }
    call_names.sort();
    pg.calls = call_names;
    out.pageable = pg;

    // Reservation at the end of each step.
    inp.mem_samples.sort_unstable();
    let mut by_step: Vec<(u64, u64)> = Vec::new();
    for &(t, r) in &inp.mem_samples {
        if let Some(i) = index.at(t) {
            match by_step.last_mut() {
                Some(last) if last.0 == i => last.1 = r,
                _ => by_step.push((i, r)),
            }
        }
    }
    out.reserved_by_step = by_step;
    out.split = split;
    out.step_of_time = Some(index);
    out
}

/// Pair NCCL calls with their kernels (correlation, else issue order per rank) into [`CollFact`]s.
fn pair_collectives(
    calls: &[Collective],
    kernels: &[Kernel],
    compute: &[(Ns, Ns)],
    index: &StepIndex,
    corr_step: &SeqMap<u64, usize>,
) -> Vec<CollFact> {
    let exposed = |s: Ns, e: Ns| (e - s) - intersect_in(&[(s, e)], compute, s, e);
    let mut by_corr: HashMap<u64, &Kernel> = HashMap::new();
    let mut loose: Vec<&Kernel> = Vec::new();
    let mut imported: Vec<&Kernel> = Vec::new();
    for k in kernels {
        if k.collective.is_some() {
            imported.push(k);
        } else if k.correlation != 0 {
            by_corr.insert(k.correlation, k);
        } else {
            loose.push(k);
        }
    }
    let mut calls: Vec<&Collective> = calls.iter().collect();
    calls.sort_by_key(|c| (c.start, c.seq));
    let mut out = Vec::new();
    let mut unmatched: Vec<usize> = Vec::new();
    for c in &calls {
        let k = (c.correlation != 0).then(|| by_corr.remove(&c.correlation)).flatten();
        if k.is_none() {
            unmatched.push(out.len());
        }
        let step = index.at(c.start);
        out.push(CollFact {
            comm: c.comm,
            seq: c.seq,
            op: c.op,
            bytes: c.bytes,
            count: c.count,
            datatype: c.datatype,
            nranks: c.nranks,
            host: Some((c.start, c.end)),
            gpu: k.map(|k| (k.start, k.end)),
            exposed_ns: k.map(|k| exposed(k.start, k.end)).unwrap_or(0),
            step,
            device: c.device,
            stream: c.stream,
        });
    }
    // Leftover kernels (no correlation link) pair with leftover calls in issue order.
    loose.extend(by_corr.into_values());
    loose.sort_by_key(|k| k.start);
    for (slot, k) in unmatched.iter().zip(loose.iter()) {
        let f = &mut out[*slot];
        if f.host.is_some_and(|h| h.0 <= k.start + 1_000_000_000) {
            f.gpu = Some((k.start, k.end));
            f.exposed_ns = exposed(k.start, k.end);
        }
    }
    for (i, k) in imported.iter().enumerate() {
        let info = k.collective.as_ref();
        out.push(CollFact {
            comm: 0,
            seq: i as u64,
            op: info.map(|c| c.op).unwrap_or_default(),
            bytes: info.map(|c| c.bytes).unwrap_or(0),
            count: 0,
            datatype: 0,
            nranks: info.map(|c| c.nranks).unwrap_or(0),
            host: None,
            gpu: Some((k.start, k.end)),
            exposed_ns: exposed(k.start, k.end),
            step: corr_step.get(&k.correlation).map(|&p| index.windows[p].index).or_else(|| index.at(k.start)),
            device: k.device,
            stream: k.stream as u64,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(start: Ns, end: Ns, corr: u64, kind: OpKind) -> RawOp {
        RawOp { start, end, corr, kind, family: Family::Gemm }
    }
    fn call(start: Ns, end: Ns, corr: u64, class: CallClass) -> RawCall {
        RawCall { start, end, corr, class, name: 0 }
    }

    #[test]
    fn driver_vmm_calls_are_allocation_calls() {
        for n in ["cuMemCreate", "cuMemMap", "cuMemUnmap", "cuMemRelease", "cuMemSetAccess", "cuMemAddressReserve"] {
            assert!(matches!(classify_call(n), CallClass::Alloc), "{n}");
        }
        assert!(matches!(classify_call("cuMemAlloc_v2"), CallClass::Alloc));
        assert!(matches!(classify_call("cuMemGetInfo_v2"), CallClass::Other));
    }

    #[test]
    fn gaps_are_classified() {
        // Times in microseconds (K ns). Step 0 [0, 999]: the host loads data until 300 (outside
        // CUDA), launches at 300 -> kernel 310..600; a sync at 590..700 drains the GPU; the next
        // kernel starts at 720. Step 1 [1000, 2000]: launch at 1000 -> kernel 1010..1500, then a
        // launch gap of 20.
        const K: Ns = 1000;
        let windows = vec![
            StepWindow { index: 0, name: "s".into(), start: 0, end: 999 * K },
            StepWindow { index: 1, name: "s".into(), start: 1000 * K, end: 2000 * K },
        ];
        let o = |s: Ns, e: Ns, c: u64| op(s * K, e * K, c, OpKind::Compute);
        let c = |s: Ns, e: Ns, corr: u64, class: CallClass| call(s * K, e * K, corr, class);
        let inp = Input {
            ops: vec![o(310, 600, 1), o(720, 800, 3), o(1010, 1500, 4), o(1520, 1600, 5)],
            calls: vec![
                c(300, 305, 1, CallClass::Launch),
                c(590, 700, 2, CallClass::Sync),
                c(705, 715, 3, CallClass::Launch),
                c(1000, 1005, 4, CallClass::Launch),
                c(1505, 1515, 5, CallClass::Launch),
            ],
            names: vec!["cudaStreamSynchronize".into()],
            windows,
            span: (0, 2000 * K),
            ..Input::default()
        };
        let t = analyse(inp);
        assert_eq!(t.window, (0, 2000 * K));
        let s = t.split;
        assert_eq!(s.total(), 2000 * K);
        assert_eq!(s.compute_ns, (290 + 80 + 490 + 80) * K);
        assert_eq!(s.sync_ns, 120 * K);
        assert_eq!(s.data_ns, (305 + 205) * K);
        assert_eq!(s.launch_ns, (5 + 5 + 20) * K);
        assert_eq!(s.idle_ns, 400 * K);
        assert_eq!(t.steps[0].split.data_ns, 305 * K);
        assert_eq!(t.steps[0].split.sync_ns, 120 * K);
        assert_eq!(t.steps[1].split.data_ns, 205 * K);
        assert_eq!(t.steps[1].split.launch_ns, 25 * K);
        assert_eq!(t.steps[1].launches, 2);
        assert_eq!(t.syncs[0].name, "cudaStreamSynchronize");
        assert_eq!(t.syncs[0].gpu_idle_ns, 120 * K);
        assert_eq!(t.steps[1].median_gap_ns, 20 * K);
    }
}
