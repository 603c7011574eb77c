//! One rank's GPU timeline, reduced to facts: unions of compute / communication / copy time,
//! each GPU idle gap classified by what the host was doing (data, launch, sync, idle), per-step
//! aggregates, collectives paired with their kernels, AMP skipped steps.
//!
//! Steps are host windows; GPU work belongs to the step whose host call launched it (by
//! correlation), so a host that runs ahead of the GPU is attributed right.

use std::collections::HashMap;

use super::busy_measures::{BusyMeasures, Queries};
use super::coll_pairing::{add_exposed, pair_collectives};
use super::corr_steps::CorrSteps;
use super::facts::*;
use super::gaps::{split_window, WindowSplit};
use super::gpu_steps::{GpuSteps, StepKernels};
use super::gpu_windows::{gpu_step_ends, StepWindows};
use super::host_steps::{prepare_calls, HostSteps};
use super::runs::Keyed;
use crate::intervals::{FastMap, SeqMap};
use crate::model::*;
use crate::steps::StepWindow;

/// Kind of a GPU operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    Compute,
    Comm,
    Memory,
}

/// A GPU operation, compact (24 bytes; `corr` as [`super::corr_ids::CorrIds`] gives it).
#[derive(Debug, Clone, Copy)]
pub struct RawOp {
    pub start: Ns,
    pub end: Ns,
    pub corr: u32,
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub enum CallClass {
    Launch,
    /// Blocks the host until GPU work is done.
    Sync,
    Copy,
    Alloc,
    /// Setting up or tearing down (NCCL communicator init / destroy): the GPU idles meanwhile, but
    /// not because the host is busy launching work.
    Setup,
    #[default]
    Other,
}

/// A host call, compact (24 bytes): `corr` as [`super::corr_ids::CorrIds`] gives it; its name
/// (an index in the collector's name table) and class share one word.
#[derive(Debug, Clone, Copy)]
pub struct RawCall {
    pub start: Ns,
    pub end: Ns,
    pub corr: u32,
    /// The name in the low [`NAME_BITS`] bits, the class above them.
    name_class: u32,
}

/// Bits of a name index in [`RawCall`].
const NAME_BITS: u32 = 29;

impl CallClass {
    /// By discriminant, padded to the 8 values of the 3 bits above [`NAME_BITS`] (so that reading
    /// one needs no bounds check; the last two are never stored).
    const BY_BITS: [CallClass; 8] = [
        CallClass::Launch,
        CallClass::Sync,
        CallClass::Copy,
        CallClass::Alloc,
        CallClass::Setup,
        CallClass::Other,
        CallClass::Other,
        CallClass::Other,
    ];
}

impl RawCall {
    /// `name` below 2^29 (names are distinct call names: far fewer).
    #[inline]
    pub fn new(start: Ns, end: Ns, corr: u32, class: CallClass, name: u32) -> RawCall {
        assert!(name >> NAME_BITS == 0, "call name index {name} out of range");
        RawCall { start, end, corr, name_class: name | (class as u32) << NAME_BITS }
    }

    #[inline]
    pub fn name(&self) -> u32 {
        self.name_class & ((1 << NAME_BITS) - 1)
    }

    #[inline]
    pub fn class(&self) -> CallClass {
        CallClass::BY_BITS[(self.name_class >> NAME_BITS) as usize]
    }

    pub fn set_class(&mut self, class: CallClass) {
        *self = RawCall::new(self.start, self.end, self.corr, class, self.name());
    }
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

/// With at least this many steps, the first one is left out as warm-up.
pub const WARMUP_MIN_STEPS: usize = 4;

/// Host step windows, searchable by time.
#[derive(Debug, Clone, Default)]
pub struct StepIndex {
    pub(super) windows: Vec<StepWindow>,
}

impl StepIndex {
    pub fn new(mut windows: Vec<StepWindow>) -> StepIndex {
        windows.sort_by_key(|w| w.start);
        StepIndex { windows }
    }
    /// Number of steps.
    pub fn len(&self) -> usize {
        self.windows.len()
    }
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }
    /// Position of the step whose host window holds `t`.
    pub fn pos(&self, t: Ns) -> Option<usize> {
        let i = self.windows.partition_point(|w| w.start <= t);
        let w = self.windows.get(i.checked_sub(1)?)?;
        (t <= w.end).then_some(i - 1)
    }
    /// [`StepIndex::pos`] for times that never decrease from one call to the next: `cursor`
    /// (start at its default) moves forward instead of a binary search per call, and holds where
    /// the next window starts, so that a time before that needs no search at all. Same results.
    #[inline]
    pub fn pos_forward(&self, t: Ns, cursor: &mut StepCursor) -> Option<usize> {
        let c = cursor;
        if t >= c.upto {
            let i = forward_partition(&self.windows, &mut c.next, |w| w.start <= t);
            c.upto = self.windows.get(i).map_or(Ns::MAX, |w| w.start);
            c.end = i.checked_sub(1).map_or(0, |p| self.windows[p].end);
        }
        (c.next > 0 && t <= c.end).then(|| c.next - 1)
    }
    /// Index of the step whose host window holds `t`.
    pub fn at(&self, t: Ns) -> Option<u64> {
        self.pos(t).map(|p| self.windows[p].index)
    }
}

/// A position in a [`StepIndex`] for [`StepIndex::pos_forward`]: the windows before `next` start
/// at or before the last time asked about; `upto` is where window `next` starts, `end` where
/// window `next - 1` ends.
#[derive(Debug, Default, Clone, Copy)]
pub struct StepCursor {
    next: usize,
    upto: Ns,
    end: Ns,
}

/// `v.partition_point(pred)` for a predicate that only ever gets more inclusive from one call to
/// the next (non-decreasing query times): `cursor` moves forward and never searches.
pub(super) fn forward_partition<T>(v: &[T], cursor: &mut usize, pred: impl Fn(&T) -> bool) -> usize {
    while *cursor < v.len() && pred(&v[*cursor]) {
        *cursor += 1;
    }
    *cursor
}

/// Everything the collector kept of one process.
#[derive(Debug, Default)]
pub struct Input {
    /// In (start, end) order, equal ones in arrival order (as [`super::runs::Runs::into_sorted`]
    /// gives them).
    pub ops: Vec<RawOp>,
    /// In start order, equal ones in arrival order.
    pub calls: Vec<RawCall>,
    pub names: Vec<Name>,
    pub syncs: Vec<SyncEvent>,
    /// Pageable copies: correlation -> (bytes, start, end).
    pub pageable: SeqMap<u32, (u64, Ns, Ns)>,
    pub small_d2h: Vec<u32>,
    pub colls: Vec<Collective>,
    pub comm_kernels: Vec<Kernel>,
    /// The compact ids of the correlations above (`colls` and `comm_kernels` keep theirs whole).
    pub corr_ids: super::corr_ids::CorrIds,
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

/// Reduce one process's timeline to facts.
pub fn analyse(inp: &mut Input) -> Timeline {
    let index = StepIndex::new(std::mem::take(&mut inp.windows));
    let nsteps = index.len();
    prepare_calls(inp);
    let mut host = HostSteps::of(inp, &index);
    debug_assert!(inp.ops.is_sorted_by_key(Keyed::key), "operations in (start, end) order");
    // Which step GPU work belongs to: its launching call's, unless the steps are GPU time.
    let by_time = CorrSteps::default();
    let gpu_corr_step = if inp.windows_in_gpu_time { &by_time } else { &host.corr_step };
    // Each communication kernel is an operation too.
    let mut gpu = GpuSteps::of(&inp.ops, inp.comm_kernels.len(), gpu_corr_step, &index);
    // The first step is warm-up (lazy initialisation, first launches, communicator set-up): with
    // enough steps, the window starts at the second one.
    let skip = usize::from(nsteps >= WARMUP_MIN_STEPS);
    let window = analysed_window(&index, &gpu, skip, inp.span);
    let holes = holes_to_next_step(std::mem::take(&mut inp.unobserved), &index);
    let gpu_end = gpu_step_ends(&gpu.first, &holes, window.1);
    let mut gpu_windows = StepWindows::new(&gpu.first, &gpu_end, skip);
    let mut window_split = split_window(&gpu, &index, &host, &inp.calls, window, &holes, &mut gpu_windows);
    let mut sync_stats = std::mem::take(&mut host.sync_stats);
    for (name, idle) in std::mem::take(&mut window_split.idle_by_sync).into_iter().enumerate() {
        if let Some(st) = sync_stats.get_mut(&(name as u32)) {
            st.gpu_idle_ns += idle;
        }
    }
    gpu.kernel_medians(skip);
    let mut colls = pair_collectives(&inp.colls, &inp.comm_kernels, &index, gpu_corr_step, &inp.corr_ids);
    // The busy time inside every window asked about: the analysed window's observed parts, the
    // steps' GPU windows, the collectives' and pageable copies' GPU spans.
    let step_windows: Vec<(usize, Ns, Ns)> =
        (skip..nsteps).filter_map(|p| gpu.first[p].map(|g| (p, g, gpu_end[p].max(g)))).collect();
    let mut queries = Queries::default();
    window_split.ask(&mut queries);
    for &(_, g, e) in &step_windows {
        queries.add(g, e);
    }
    for c in &colls {
        if let Some((s, e)) = c.gpu {
            queries.add(s, e);
        }
    }
    for &(_, s, e) in inp.pageable.values() {
        queries.add(s, e);
    }
    let busy = BusyMeasures::new(queries, gpu.compute_union(), &gpu.comm);
    window_split.add_busy(&busy);
    add_exposed(&mut colls, &busy);
    let busy_in_step = gpu_windows.busy(nsteps);
    let WindowSplit { split, steps: step_split, alloc_idle_ns, .. } = window_split;
    let mut steps = step_facts(&index, skip, &gpu, &host, &step_split, &gpu_end);
    add_step_busy(&mut steps, skip, &step_windows, &busy_in_step, &busy);
    let amp = amp_facts(&index, &gpu.kernels, &steps);
    Timeline {
        gpu_ops: inp.ops.len(),
        window,
        split,
        colls,
        syncs: ranked_syncs(sync_stats),
        small_d2h: inp.small_d2h.iter().filter(|&&c| host.corr_step.get(c).is_some()).count() as u64,
        pageable: pageable_stat(inp, &host.pageable_calls, &busy),
        amp,
        reserved_by_step: reserved_by_step(&mut inp.mem_samples, &index),
        step_alloc_calls: host.alloc_calls,
        step_alloc_ns: host.alloc_ns,
        step_alloc_idle_ns: alloc_idle_ns,
        steps,
        step_of_time: Some(index),
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

/// The facts of each analysed step (from `skip` on).
fn step_facts(
    index: &StepIndex,
    skip: usize,
    gpu: &GpuSteps<'_>,
    host: &HostSteps,
    step_split: &[Split],
    gpu_end: &[Ns],
) -> Vec<StepFacts> {
    let mut out = Vec::new();
    for (p, w) in index.windows.iter().enumerate().skip(skip) {
        let kernels = &gpu.kernels;
        let mut st = StepFacts {
            index: w.index,
            host_start: w.start,
            host_end: w.end,
            gpu_start: gpu.first[p],
            gpu_end: gpu_end[p],
            split: step_split[p],
            launches: host.launches[p],
            kernels: kernels.count[p] as u64,
            median_kernel_ns: kernels.median_duration[p],
            sync_calls: host.sync_calls[p],
            sync_blocked_ns: host.sync_blocked[p],
            ..StepFacts::default()
        };
        st.median_gap_ns = kernels.median_gap[p];
        out.push(st);
    }
    out
}

/// The busy parts of the analysed steps' splits (`steps` from position `skip` on): compute,
/// communication and copies inside each step's GPU window (`windows`: (position, start, end) of
/// those with GPU work), of which `busy_in_step` is busy.
fn add_step_busy(
    steps: &mut [StepFacts],
    skip: usize,
    windows: &[(usize, Ns, Ns)],
    busy_in_step: &[Ns],
    busy: &BusyMeasures<'_>,
) {
    for &(p, g, e) in windows {
        // Communication not overlapped by compute: |comm ∪ compute| - |compute|.
        let (compute, cm) = (busy.compute_in(g, e), busy.cm_in(g, e));
        let split = &mut steps[p - skip].split;
        split.compute_ns = compute;
        split.comm_ns = cm - compute;
        split.memcpy_ns = busy_in_step[p] - cm;
    }
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
/// the calls that issued them (`calls`: (correlation, name) of the calls with a pageable copy's
/// correlation, in time order).
fn pageable_stat(inp: &Input, calls: &[(u32, u32)], busy: &BusyMeasures<'_>) -> PageableStat {
    let mut pg = PageableStat::default();
    let mut call_names: Vec<String> = Vec::new();
    let corr_name: HashMap<u32, u32> = calls.iter().copied().collect();
    for (corr, &(bytes, s, e)) in &inp.pageable {
        pg.copies += 1;
        pg.bytes += bytes;
        pg.gpu_ns += e.saturating_sub(s);
        pg.exposed_ns += e.saturating_sub(s) - busy.cm_in(s, e);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn op(start: Ns, end: Ns, corr: u32, kind: OpKind) -> RawOp {
        RawOp { start, end, corr, kind, family: Family::Gemm }
    }
    fn call(start: Ns, end: Ns, corr: u32, class: CallClass) -> RawCall {
        RawCall::new(start, end, corr, class, 0)
    }

    #[test]
    fn pos_forward_matches_pos() {
        let mut rng = crate::xorshift::XorShift(0x5171_e9c0_11ec_7ab1);
        for _ in 0..100 {
            let mut t = 0;
            let windows: Vec<StepWindow> = (0..rng.below(8))
                .map(|i| {
                    t += rng.below(20);
                    let start = t;
                    t += rng.below(20);
                    StepWindow { index: i, name: String::new(), start, end: t }
                })
                .collect();
            let index = StepIndex::new(windows);
            let mut cursor = StepCursor::default();
            let mut q = 0;
            for _ in 0..100 {
                q += rng.below(4);
                assert_eq!(index.pos_forward(q, &mut cursor), index.pos(q), "{q} in {:?}", index.windows);
            }
        }
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
            ops: (0..3).map(|i| op((100 + 1000 * i) * K, (900 + 1000 * i) * K, i as u32 + 1, OpKind::Comm)).collect(),
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
        let t = analyse(&mut input(true));
        let starts: Vec<Option<Ns>> = t.steps.iter().map(|s| s.gpu_start).collect();
        assert_eq!(starts, [Some(100 * K), Some(1100 * K), Some(2100 * K)]);
        assert!(t.steps.iter().all(|s| s.split.comm_ns == 800 * K), "{:?}", t.steps);
        // Steps in host time (NVTX, markers) go by the launching call: all three in the first step.
        let t = analyse(&mut input(false));
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
        let o = |s: Ns, e: Ns, c: u32| op(s * K, e * K, c, OpKind::Compute);
        let c = |s: Ns, e: Ns, corr: u32, class: CallClass| call(s * K, e * K, corr, class);
        let mut inp = Input {
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
        let t = analyse(&mut inp);
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
