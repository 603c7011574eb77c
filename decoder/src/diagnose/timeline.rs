//! One rank's GPU timeline, reduced to facts: unions of compute / communication / copy time,
//! each GPU idle gap classified by what the host was doing (data, launch, sync, idle), per-step
//! aggregates, collectives paired with their kernels, AMP skipped steps.
//!
//! Steps are host windows; GPU work belongs to the step whose host call launched it (by
//! correlation), so a host that runs ahead of the GPU is attributed right.

use std::collections::HashMap;

use super::facts::*;
use super::runs::Keyed;
use crate::corr_slots::CorrSlots;
use crate::correlate::{CollectiveMatcher, FromPairing};
use crate::intervals::{intersect_in, measure_in, FastMap, SeqMap};
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

impl Keyed for RawOp {
    type Key = (Ns, Ns);
    #[inline]
    fn key(&self) -> (Ns, Ns) {
        (self.start, self.end)
    }
}

/// What a host call does to the GPU pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallClass {
    Launch,
    /// Blocks the host until GPU work is done.
    Sync,
    Copy,
    Alloc,
    /// Setting up or tearing down (NCCL communicator init / destroy): the GPU idles meanwhile, but
    /// not because the host is busy launching work.
    Setup,
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

impl Keyed for RawCall {
    type Key = Ns;
    #[inline]
    fn key(&self) -> Ns {
        self.start
    }
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
    pub pageable: SeqMap<u64, (u64, Ns, Ns)>,
    pub small_d2h: Vec<u64>,
    pub colls: Vec<Collective>,
    pub comm_kernels: Vec<Kernel>,
    pub mem_samples: Vec<(Ns, u64)>,
    pub windows: Vec<StepWindow>,
    /// The windows were cut from the kernel stream (`StepSource::Periodic`): they are GPU time, so
    /// GPU work belongs to the window its start falls in, not to the one its launching call fell in
    /// (the host runs ahead of the GPU: a loop of asynchronous launches issues every step's work
    /// while the GPU is still in the first).
    pub windows_in_gpu_time: bool,
    pub span: (Ns, Ns),
    /// Stretches that capture windows did not record (sorted, disjoint): neither busy nor idle.
    pub unobserved: Vec<(Ns, Ns)>,
}

/// The parts of `[a, b)` outside the sorted, disjoint `holes`.
fn observed_parts(a: Ns, b: Ns, holes: &[(Ns, Ns)]) -> impl Iterator<Item = (Ns, Ns)> + '_ {
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

/// The union of intervals pushed in start order, as a sorted, disjoint list (empty ones left out).
#[derive(Debug, Default)]
struct StartOrderUnion(Vec<(Ns, Ns)>);

impl StartOrderUnion {
    /// Room for `n` intervals (the most that `n` pushes keep), so the list never grows by copying.
    fn with_capacity(n: usize) -> StartOrderUnion {
        StartOrderUnion(Vec::with_capacity(n))
    }

    #[inline]
    fn push(&mut self, s: Ns, e: Ns) {
        if e <= s {
            return;
        }
        match self.0.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => self.0.push((s, e)),
        }
    }
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
    /// GPU idle time inside steps while the host was in allocation calls.
    pub step_alloc_idle_ns: Ns,
    pub step_of_time: Option<StepIndex>,
}

/// The element at half the length in sorted order (0 for none).
fn median(v: &mut [Ns]) -> Ns {
    if v.is_empty() {
        return 0;
    }
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}

/// Reduce one process's timeline to facts.
pub fn analyse(mut inp: Input) -> Timeline {
    let index = StepIndex::new(std::mem::take(&mut inp.windows));
    let nsteps = index.windows.len();
    prepare_calls(&mut inp);
    let mut host = HostSteps::of(&inp.calls, &inp.names, &index);
    if !inp.ops.is_sorted_by_key(Keyed::key) {
        inp.ops.sort_by_key(Keyed::key);
    }
    // Which step GPU work belongs to: its launching call's, unless the steps are GPU time.
    let by_time = CorrSlots::default();
    let gpu_corr_step = if inp.windows_in_gpu_time { &by_time } else { &host.corr_step };
    let gpu = GpuSteps::of(&inp.ops, gpu_corr_step, &index);
    // The first step is warm-up (lazy initialisation, first launches, communicator set-up): with
    // enough steps, the window starts at the second one.
    let skip = usize::from(nsteps >= WARMUP_MIN_STEPS);
    let window = analysed_window(&index, &gpu, skip, inp.span);
    let holes = holes_to_next_step(std::mem::take(&mut inp.unobserved), &index);
    let (split, step_split, alloc_idle_ns) =
        split_window(&gpu, &index, &inp.calls, window, &holes, &mut host.sync_stats);
    let mut kernels = StepKernels::of(&gpu, nsteps);
    let gpu_end = gpu_step_ends(&gpu.first, &holes, window.1);
    let steps = step_facts(&index, skip, &gpu, &host, &step_split, &mut kernels, &gpu_end);
    let amp = amp_facts(&index, &kernels, &steps);
    Timeline {
        gpu_ops: inp.ops.len(),
        window,
        split,
        colls: pair_collectives(&inp.colls, &inp.comm_kernels, &gpu.busy.compute, &index, gpu_corr_step),
        syncs: ranked_syncs(host.sync_stats),
        small_d2h: inp.small_d2h.iter().filter(|&&c| host.corr_step.get(c).is_some()).count() as u64,
        pageable: pageable_stat(&inp, &gpu.busy.cm),
        amp,
        reserved_by_step: reserved_by_step(&mut inp.mem_samples, &index),
        step_alloc_calls: host.alloc_calls,
        step_alloc_ns: host.alloc_ns,
        step_alloc_idle_ns: alloc_idle_ns,
        steps,
        step_of_time: Some(index),
    }
}

/// Pageable copies block the host like a sync; CUPTI / intercepted synchronization records stand
/// in when no sync call was recorded; then the calls in time order.
fn prepare_calls(inp: &mut Input) {
    for c in &mut inp.calls {
        if c.class == CallClass::Copy && c.corr != 0 && inp.pageable.contains_key(&c.corr) {
            c.class = CallClass::Sync;
        }
    }
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
    if !inp.calls.is_sorted_by_key(Keyed::key) {
        inp.calls.sort_by_key(Keyed::key);
    }
}

/// The host side per step: launches, synchronizations, allocations, and which step each
/// correlation id was issued in.
struct HostSteps {
    launches: Vec<u64>,
    sync_calls: Vec<u64>,
    sync_blocked: Vec<Ns>,
    /// Step position by correlation id.
    corr_step: CorrSlots<u32>,
    /// Per call name (the GPU idle time after each is added by [`split_window`]).
    sync_stats: FastMap<u32, SyncCallStat>,
    alloc_calls: u64,
    alloc_ns: Ns,
}

impl HostSteps {
    /// `calls` sorted by start.
    fn of(calls: &[RawCall], names: &[Name], index: &StepIndex) -> HostSteps {
        let nsteps = index.windows.len();
        let mut h = HostSteps {
            launches: vec![0; nsteps],
            sync_calls: vec![0; nsteps],
            sync_blocked: vec![0; nsteps],
            corr_step: CorrSlots::default(),
            sync_stats: FastMap::default(),
            alloc_calls: 0,
            alloc_ns: 0,
        };
        let mut cursor = 0;
        for c in calls {
            let Some(p) = index.pos_forward(c.start, &mut cursor) else { continue };
            if c.corr != 0 {
                h.corr_step.insert(c.corr, p as u32);
            }
            match c.class {
                CallClass::Launch => h.launches[p] += 1,
                CallClass::Sync => {
                    h.sync_calls[p] += 1;
                    let d = c.end.saturating_sub(c.start);
                    h.sync_blocked[p] += d;
                    let s = h.sync_stats.entry(c.name).or_insert_with(|| SyncCallStat {
                        name: names.get(c.name as usize).map(|n| n.to_string()).unwrap_or_default(),
                        ..SyncCallStat::default()
                    });
                    s.calls += 1;
                    s.blocked_ns += d;
                }
                CallClass::Alloc => {
                    h.alloc_calls += 1;
                    h.alloc_ns += c.end.saturating_sub(c.start);
                }
                _ => {}
            }
        }
        h
    }
}

/// Busy-time unions of the GPU operations.
struct Busy {
    compute: Vec<(Ns, Ns)>,
    comm: Vec<(Ns, Ns)>,
    /// Compute or communication.
    cm: Vec<(Ns, Ns)>,
    /// Any operation.
    all: Vec<(Ns, Ns)>,
}

/// The GPU side: operations (sorted by start) with the step each belongs to, busy unions, and
/// when each step's GPU work started.
struct GpuSteps<'a> {
    ops: &'a [RawOp],
    /// Step position per operation (u32: half the memory of `Option<usize>`).
    op_step: Vec<Option<u32>>,
    busy: Busy,
    /// First GPU start per step position.
    first: Vec<Option<Ns>>,
    /// Latest end of any operation that belongs to a step.
    last: Ns,
}

impl<'a> GpuSteps<'a> {
    /// An operation belongs to the step whose host call launched it (by correlation), else to the
    /// step its start falls in.
    fn of(ops: &'a [RawOp], corr_step: &CorrSlots<u32>, index: &StepIndex) -> GpuSteps<'a> {
        let mut cursor = 0;
        let op_step: Vec<Option<u32>> = ops
            .iter()
            .map(|o| {
                (o.corr != 0)
                    .then(|| corr_step.get(o.corr).copied())
                    .flatten()
                    .or_else(|| index.pos_forward(o.start, &mut cursor).map(|p| p as u32))
            })
            .collect();
        // The operations are in start order: each union grows at its end.
        let mut kinds = [0usize; 3];
        for o in ops {
            kinds[o.kind as usize] += 1;
        }
        let [n_compute, n_comm, _] = kinds;
        let mut compute = StartOrderUnion::with_capacity(n_compute);
        let mut comm = StartOrderUnion::with_capacity(n_comm);
        let mut cm = StartOrderUnion::with_capacity(n_compute + n_comm);
        let mut all = StartOrderUnion::with_capacity(ops.len());
        for o in ops {
            let (s, e) = (o.start, o.end);
            match o.kind {
                OpKind::Compute => compute.push(s, e),
                OpKind::Comm => comm.push(s, e),
                OpKind::Memory => {}
            }
            if o.kind != OpKind::Memory {
                cm.push(s, e);
            }
            all.push(s, e);
        }
        let (compute, comm, cm, all) = (compute.0, comm.0, cm.0, all.0);
        let mut first: Vec<Option<Ns>> = vec![None; index.windows.len()];
        let mut last: Ns = 0;
        for (o, s) in ops.iter().zip(&op_step) {
            if let Some(p) = s.map(|p| p as usize) {
                if first[p].is_none_or(|f| o.start < f) {
                    first[p] = Some(o.start);
                }
                last = last.max(o.end);
            }
        }
        GpuSteps { ops, op_step, busy: Busy { compute, comm, cm, all }, first, last }
    }

    fn step_of(&self, op: usize) -> Option<usize> {
        self.op_step.get(op).copied().flatten().map(|p| p as usize)
    }
}

/// The analysed window: the steps from `skip` on (host and the GPU work they launched); the whole
/// span without steps.
fn analysed_window(index: &StepIndex, gpu: &GpuSteps<'_>, skip: usize, span: (Ns, Ns)) -> (Ns, Ns) {
    match (index.windows.get(skip), index.windows.last()) {
        (Some(f), Some(l)) => {
            let first_gpu = gpu.first[skip..].iter().flatten().min().copied().unwrap_or(f.start);
            (f.start.min(first_gpu), l.end.max(gpu.last))
        }
        _ => span,
    }
}

/// Unrecorded stretches reach to the next step's start: between a window's opening and its first
/// whole step the GPU still runs work launched before (unrecorded), which is not idle.
fn holes_to_next_step(mut holes: Vec<(Ns, Ns)>, index: &StepIndex) -> Vec<(Ns, Ns)> {
    for h in &mut holes {
        if let Some(next) = index.windows.iter().map(|w| w.start).filter(|&t| t >= h.1).min() {
            h.1 = next;
        }
    }
    holes
}

/// Classifies each GPU idle gap by what the host was doing: blocked in a sync, outside CUDA at a
/// step's start (data), launching (launch), or none of these (idle).
struct GapClassifier<'a> {
    gpu: &'a GpuSteps<'a>,
    index: &'a StepIndex,
    /// Union of the host calls (set-up calls apart).
    host: Vec<(Ns, Ns)>,
    /// Union of the set-up calls (communicator init / destroy).
    setup: Vec<(Ns, Ns)>,
    /// Union of the allocation calls, and the GPU idle time inside steps they cover.
    alloc: Vec<(Ns, Ns)>,
    alloc_idle_ns: Ns,
    /// Synchronizing calls by start.
    syncs: Vec<&'a RawCall>,
    // Gaps come in time order, so every search below only moves forward.
    sync_cursor: usize,
    op_cursor: usize,
    step_cursor: usize,
}

impl<'a> GapClassifier<'a> {
    /// `calls` sorted by start.
    fn new(gpu: &'a GpuSteps<'a>, index: &'a StepIndex, calls: &'a [RawCall]) -> GapClassifier<'a> {
        let (mut setup, mut alloc) = <(StartOrderUnion, StartOrderUnion)>::default();
        let mut host = StartOrderUnion::with_capacity(calls.len());
        for c in calls {
            match c.class {
                CallClass::Setup => setup.push(c.start, c.end),
                CallClass::Alloc => {
                    alloc.push(c.start, c.end);
                    host.push(c.start, c.end);
                }
                _ => host.push(c.start, c.end),
            }
        }
        let (host, setup, alloc) = (host.0, setup.0, alloc.0);
        let mut syncs: Vec<&RawCall> = calls.iter().filter(|c| c.class == CallClass::Sync).collect();
        syncs.sort_by_key(|c| c.start);
        GapClassifier {
            gpu,
            index,
            host,
            setup,
            alloc,
            alloc_idle_ns: 0,
            syncs,
            sync_cursor: 0,
            op_cursor: 0,
            step_cursor: 0,
        }
    }

    /// The sync call the host was blocked in when the GPU ran dry at `a`.
    fn blocking_sync(&mut self, a: Ns) -> Option<u32> {
        let i = forward_partition(&self.syncs, &mut self.sync_cursor, |c| c.start <= a);
        self.syncs[..i].iter().rev().take(64).find(|c| c.end + SYNC_SLACK_NS >= a).map(|c| c.name)
    }

    /// The gap `[a, b)`: its split, the step it belongs to (that of the work after it), and the
    /// sync call that caused it.
    fn classify(&mut self, a: Ns, b: Ns) -> (Split, Option<usize>, Option<u32>) {
        let gap = b - a;
        let i = forward_partition(self.gpu.ops, &mut self.op_cursor, |o| o.start < b);
        let owner = self.gpu.step_of(i).or_else(|| self.index.pos_forward(b, &mut self.step_cursor));
        let first = owner.is_some_and(|p| self.gpu.first[p] == Some(b));
        let mut part = Split::default();
        let sync = self.blocking_sync(a);
        if owner.is_some() {
            self.alloc_idle_ns += measure_in(&self.alloc, a, b);
        }
        if measure_in(&self.setup, a, b) * 2 >= gap {
            // The GPU waited for set-up (communicators being created): neither launching nor data.
            part.idle_ns = gap;
        } else if sync.is_some() {
            part.sync_ns = gap;
        } else if first {
            let outside = gap - measure_in(&self.host, a, b);
            part.data_ns = outside;
            part.launch_ns = gap - outside;
        } else if owner.is_some() && gap <= LAUNCH_GAP_MAX_NS {
            part.launch_ns = gap;
        } else {
            let inside = measure_in(&self.host, a, b);
            if owner.is_some() && inside * 2 >= gap {
                part.launch_ns = gap;
            } else {
                part.idle_ns = gap;
            }
        }
        (part, owner, sync)
    }
}

/// The window's split (busy time by kind, idle gaps by cause), whole and per step position;
/// time the capture windows did not record is left out, not called idle. Adds the GPU idle time
/// each sync call caused to `sync_stats`.
fn split_window(
    gpu: &GpuSteps<'_>,
    index: &StepIndex,
    calls: &[RawCall],
    (w0, w1): (Ns, Ns),
    holes: &[(Ns, Ns)],
    sync_stats: &mut FastMap<u32, SyncCallStat>,
) -> (Split, Vec<Split>, Ns) {
    let mut gaps = GapClassifier::new(gpu, index, calls);
    let mut step_split = vec![Split::default(); index.windows.len()];
    let mut split = Split::default();
    let mut prev = w0;
    for &(s, e) in &gpu.busy.all {
        if e <= w0 || s >= w1 {
            continue;
        }
        let (s, e) = (s.max(w0), e.min(w1));
        if s > prev {
            for (a, b) in observed_parts(prev, s, holes) {
                let (part, owner, sync) = gaps.classify(a, b);
                if let Some(st) = sync.and_then(|name| sync_stats.get_mut(&name)) {
                    st.gpu_idle_ns += part.sync_ns;
                }
                split.add(&part);
                if let Some(p) = owner {
                    step_split[p].add(&part);
                }
            }
        }
        prev = prev.max(e);
    }
    if prev < w1 {
        split.idle_ns += observed_parts(prev, w1, holes).map(|p| p.1 - p.0).sum::<Ns>();
    }
    let observed: Vec<(Ns, Ns)> = observed_parts(w0, w1, holes).collect();
    let in_observed = |set: &[(Ns, Ns)]| observed.iter().map(|&(a, b)| measure_in(set, a, b)).sum::<Ns>();
    let b = &gpu.busy;
    split.compute_ns = in_observed(&b.compute);
    split.comm_ns =
        in_observed(&b.comm) - observed.iter().map(|&(a, b2)| intersect_in(&b.comm, &b.compute, a, b2)).sum::<Ns>();
    split.memcpy_ns = in_observed(&b.all) - in_observed(&b.cm);
    (split, step_split, gaps.alloc_idle_ns)
}

/// The compute kernels of each step position, and the AMP check / optimizer kernels.
struct StepKernels {
    durations: Vec<Vec<Ns>>,
    /// The idle time between consecutive compute kernels (in start order) of each step position.
    gaps: Vec<Vec<Ns>>,
    /// Start of the first AMP non-finite check.
    amp_check: Vec<Option<Ns>>,
    /// An optimizer kernel ran after the AMP check.
    optimizer_after_check: Vec<bool>,
    /// Any optimizer kernel ran at all.
    any_optimizer: bool,
}

impl StepKernels {
    fn of(gpu: &GpuSteps<'_>, nsteps: usize) -> StepKernels {
        let mut count = vec![0usize; nsteps];
        for (o, s) in gpu.ops.iter().zip(&gpu.op_step) {
            if let (Some(p), OpKind::Compute) = (s, o.kind) {
                count[*p as usize] += 1;
            }
        }
        let mut k = StepKernels {
            durations: count.iter().map(|&n| Vec::with_capacity(n)).collect(),
            gaps: count.iter().map(|&n| Vec::with_capacity(n.saturating_sub(1))).collect(),
            amp_check: vec![None; nsteps],
            optimizer_after_check: vec![false; nsteps],
            any_optimizer: false,
        };
        // The end of the last compute kernel of each step position so far (the operations are in
        // (start, end) order).
        let mut last_end: Vec<Option<Ns>> = vec![None; nsteps];
        for (o, s) in gpu.ops.iter().zip(&gpu.op_step) {
            let Some(p) = s.map(|p| p as usize) else { continue };
            if o.kind == OpKind::Compute {
                k.durations[p].push(o.end - o.start);
                if let Some(e) = last_end[p] {
                    k.gaps[p].push(o.start.saturating_sub(e));
                }
                last_end[p] = Some(o.end);
            }
            match o.family {
                Family::AmpCheck => k.amp_check[p] = Some(k.amp_check[p].map_or(o.start, |t: Ns| t.min(o.start))),
                Family::Optimizer => k.any_optimizer = true,
                _ => {}
            }
        }
        for (o, s) in gpu.ops.iter().zip(&gpu.op_step) {
            if let (Some(p), Family::Optimizer) = (s.map(|p| p as usize), o.family) {
                if k.amp_check[p].is_some_and(|t| o.start >= t) {
                    k.optimizer_after_check[p] = true;
                }
            }
        }
        k
    }
}

/// Where each step position's GPU window ends: where the next step's GPU work starts (in GPU
/// order), or where recording stopped before that, or the window's end.
fn gpu_step_ends(first: &[Option<Ns>], holes: &[(Ns, Ns)], w1: Ns) -> Vec<Ns> {
    let nsteps = first.len();
    let mut order: Vec<usize> = (0..nsteps).filter(|&p| first[p].is_some()).collect();
    order.sort_by_key(|&p| first[p]);
    let mut next_first: Vec<Ns> = vec![w1; nsteps];
    for w in order.windows(2) {
        next_first[w[0]] = first[w[1]].unwrap_or(w1);
    }
    for p in 0..nsteps {
        if let Some(g) = first[p] {
            if let Some(h) = holes.iter().find(|h| h.0 >= g && h.0 < next_first[p]) {
                next_first[p] = h.0;
            }
        }
    }
    next_first
}

/// The facts of each analysed step (from `skip` on).
fn step_facts(
    index: &StepIndex,
    skip: usize,
    gpu: &GpuSteps<'_>,
    host: &HostSteps,
    step_split: &[Split],
    kernels: &mut StepKernels,
    gpu_end: &[Ns],
) -> Vec<StepFacts> {
    let b = &gpu.busy;
    let mut out = Vec::new();
    for (p, w) in index.windows.iter().enumerate().skip(skip) {
        let mut st = StepFacts {
            index: w.index,
            host_start: w.start,
            host_end: w.end,
            gpu_start: gpu.first[p],
            gpu_end: gpu_end[p],
            split: step_split[p],
            launches: host.launches[p],
            kernels: kernels.durations[p].len() as u64,
            median_kernel_ns: median(&mut kernels.durations[p]),
            sync_calls: host.sync_calls[p],
            sync_blocked_ns: host.sync_blocked[p],
            ..StepFacts::default()
        };
        if let Some(g) = gpu.first[p] {
            let e = gpu_end[p].max(g);
            st.split.compute_ns = measure_in(&b.compute, g, e);
            st.split.comm_ns = measure_in(&b.comm, g, e) - intersect_in(&b.comm, &b.compute, g, e);
            st.split.memcpy_ns = measure_in(&b.all, g, e) - measure_in(&b.cm, g, e);
        }
        st.median_gap_ns = median(&mut kernels.gaps[p]);
        out.push(st);
    }
    out
}

/// AMP: steps with a non-finite check, and those whose optimizer kernels did not follow it.
fn amp_facts(index: &StepIndex, kernels: &StepKernels, steps: &[StepFacts]) -> AmpFacts {
    let mut amp = AmpFacts::default();
    if !kernels.any_optimizer {
        return amp;
    }
    for (p, w) in index.windows.iter().enumerate() {
        if kernels.amp_check[p].is_some() {
            amp.checked_steps.push(w.index);
            if !kernels.optimizer_after_check[p] {
                amp.skipped_steps.push(w.index);
                amp.skipped_ns += steps.iter().find(|s| s.index == w.index).map_or(0, |s| s.gpu_window_ns());
            }
        }
    }
    amp
}

/// Syncs inside steps, most costly first.
fn ranked_syncs(stats: FastMap<u32, SyncCallStat>) -> Vec<SyncCallStat> {
    let mut syncs: Vec<SyncCallStat> = stats.into_values().collect();
    syncs.sort_by(|a, b| {
        b.gpu_idle_ns.cmp(&a.gpu_idle_ns).then(b.blocked_ns.cmp(&a.blocked_ns)).then(a.name.cmp(&b.name))
    });
    syncs
}

/// Pageable copies: how many, their bytes and GPU time, the part not hidden behind kernels, and
/// the calls that issued them.
fn pageable_stat(inp: &Input, cm: &[(Ns, Ns)]) -> PageableStat {
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
        pg.exposed_ns += e.saturating_sub(s) - intersect_in(&[(s, e)], cm, s, e);
        if let Some(n) = corr_name.get(corr).and_then(|&i| inp.names.get(i as usize)) {
            if !call_names.iter().any(|c| c == &**n) {
                call_names.push(n.to_string());
            }
        }
    }
    call_names.sort();
    pg.calls = call_names;
    pg
}

/// The device memory reserved at the end of each step.
fn reserved_by_step(samples: &mut [(Ns, u64)], index: &StepIndex) -> Vec<(u64, u64)> {
    samples.sort_unstable();
    let mut by_step: Vec<(u64, u64)> = Vec::new();
    for &(t, r) in samples.iter() {
        if let Some(i) = index.at(t) {
            match by_step.last_mut() {
                Some(last) if last.0 == i => last.1 = r,
                _ => by_step.push((i, r)),
            }
        }
    }
    by_step
}

/// One call and the GPU span it was paired with (the diagnoses keep the whole call).
struct PairedCall {
    call: Option<Collective>,
    gpu: Option<(Ns, Ns)>,
}

impl FromPairing for PairedCall {
    fn from_pairing(call: Option<&Collective>, _kernel: Option<&Kernel>, gpu: Option<(Ns, Ns)>) -> Self {
        PairedCall { call: call.cloned(), gpu }
    }
}

/// A leftover kernel pairs with a leftover call only if it started no more than this before the call.
const LOOSE_PAIR_LEAD_NS: Ns = 1_000_000_000;

/// Pair NCCL calls with their kernels into [`CollFact`]s, as the summary does ([`CollectiveMatcher`]:
/// correlation, the kernels of a group end per device in call order, else issue order per rank).
/// `calls` holds the data-moving calls and the group starts / ends, in the order they were recorded.
fn pair_collectives(
    calls: &[Collective],
    kernels: &[Kernel],
    compute: &[(Ns, Ns)],
    index: &StepIndex,
    corr_step: &CorrSlots<u32>,
) -> Vec<CollFact> {
    let exposed = |s: Ns, e: Ns| (e - s) - intersect_in(&[(s, e)], compute, s, e);
    let mut matcher: CollectiveMatcher<PairedCall> = CollectiveMatcher::default();
    for c in calls {
        matcher.call(c);
    }
    let (imported, mut own): (Vec<&Kernel>, Vec<&Kernel>) = kernels.iter().partition(|k| k.collective.is_some());
    own.sort_by_key(|k| k.start);
    for k in own {
        matcher.kernel(k);
    }
    matcher.finish_accepting(|c, k| c.start <= k.start + LOOSE_PAIR_LEAD_NS);
    let mut paired: Vec<(Collective, Option<(Ns, Ns)>)> =
        matcher.done.into_iter().filter_map(|p| p.call.map(|c| (c, p.gpu))).collect();
    paired.sort_by_key(|(c, _)| (c.start, c.seq));
    let mut out = Vec::with_capacity(paired.len() + imported.len());
    // The recorded sequence numbers count sends and receives too, which ranks make in different
    // numbers (a pipeline's first stage only sends): collectives are numbered among collectives,
    // sends per peer and receives per peer, so each matches its counterparts on the other ranks.
    // Per (communicator, rank in it): one process may drive several ranks of a communicator.
    let mut p2p_before: HashMap<(u64, u32), u64> = HashMap::new();
    let mut p2p_order: HashMap<(u64, u32, i32, bool), u64> = HashMap::new();
    for (c, gpu) in paired {
        let seq = if c.op.is_p2p() {
            *p2p_before.entry((c.comm, c.rank)).or_default() += 1;
            let k = p2p_order.entry((c.comm, c.rank, c.peer, c.op == CollOp::Send)).or_default();
            *k += 1;
            *k - 1
        } else {
            c.seq.saturating_sub(p2p_before.get(&(c.comm, c.rank)).copied().unwrap_or(0))
        };
        out.push(CollFact {
            comm: c.comm,
            seq,
            comm_rank: c.rank,
            peer: c.peer,
            op: c.op,
            bytes: c.bytes,
            count: c.count,
            datatype: c.datatype,
            nranks: c.nranks,
            host: Some((c.start, c.end)),
            gpu,
            exposed_ns: gpu.map(|(s, e)| exposed(s, e)).unwrap_or(0),
            step: index.at(c.start),
            device: c.device,
            stream: c.stream,
        });
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
            step: corr_step.get(k.correlation).map(|&p| index.windows[p as usize].index).or_else(|| index.at(k.start)),
            device: k.device,
            stream: k.stream as u64,
            comm_rank: 0,
            peer: -1,
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
    fn gpu_work_belongs_to_the_periodic_step_its_start_falls_in() {
        // A loop of asynchronous launches: the host issues the three all-reduces at 95, 105 and
        // 110 us, while the GPU runs them at 100, 1100 and 2100 us. Periodic steps are cut from those
        // GPU starts, so the second and third launches fall in the first step's window.
        const K: Ns = 1000;
        let windows: Vec<StepWindow> = (0..3)
            .map(|i| StepWindow {
                index: i,
                name: format!("step {i}"),
                start: (100 + 1000 * i) * K,
                end: (1100 + 1000 * i) * K,
            })
            .collect();
        let input = |windows_in_gpu_time| Input {
            ops: (0..3).map(|i| op((100 + 1000 * i) * K, (900 + 1000 * i) * K, i + 1, OpKind::Comm)).collect(),
            calls: [95, 105, 110]
                .iter()
                .zip(1..)
                .map(|(&t, c)| call(t * K, (t + 4) * K, c, CallClass::Launch))
                .collect(),
            windows: windows.clone(),
            windows_in_gpu_time,
            span: (0, 3100 * K),
            ..Input::default()
        };
        let t = analyse(input(true));
        let starts: Vec<Option<Ns>> = t.steps.iter().map(|s| s.gpu_start).collect();
        assert_eq!(starts, [Some(100 * K), Some(1100 * K), Some(2100 * K)]);
        assert!(t.steps.iter().all(|s| s.split.comm_ns == 800 * K), "{:?}", t.steps);
        // Steps in host time (NVTX, markers) go by the launching call: all three in the first step.
        let t = analyse(input(false));
        let starts: Vec<Option<Ns>> = t.steps.iter().map(|s| s.gpu_start).collect();
        assert_eq!(starts, [Some(100 * K), None, None]);
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
