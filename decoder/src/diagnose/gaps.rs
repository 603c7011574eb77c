//! The analysed window's split: GPU busy time by kind, and each GPU idle gap classified by what
//! the host was doing (blocked in a sync, outside CUDA at a step's start, launching, or none of
//! these), whole and per step. The gaps are found by sweeping the operations in start order and
//! come in time order, so every search only moves forward.

use super::busy_measures::{BusyMeasures, Queries};
use super::facts::Split;
use super::gpu_steps::{GpuSteps, OpSteps};
use super::gpu_windows::StepWindows;
use super::host_steps::{HostBusy, HostSteps, SyncSpan};
use super::spans::{observed_parts, ForwardMeasure};
use super::timeline::{forward_partition, RawCall, StepCursor, StepIndex};
use crate::model::Ns;

/// How long after the GPU ran dry a blocked host may return and still count as the cause (ns).
const SYNC_SLACK_NS: Ns = 5_000;
/// Idle gaps between kernels of a step up to this long count as launch overhead (ns).
const LAUNCH_GAP_MAX_NS: Ns = 1_000_000;

/// The parts of a [`Split`] an idle gap sets, as indexes of a [`GapParts`] row.
const DATA: usize = 0;
const LAUNCH: usize = 1;
const SYNC: usize = 2;
const IDLE: usize = 3;

/// Data, launch, sync and idle time of the gaps of one step position.
type GapParts = [Ns; 4];

/// Classifies each GPU idle gap by what the host was doing, and adds it up per step position.
struct GapClassifier<'a> {
    op_steps: OpSteps<'a>,
    /// First GPU start per step position.
    first: &'a [Option<Ns>],
    index: &'a StepIndex,
    host: HostBusy<'a>,
    setup: ForwardMeasure<'a>,
    alloc: ForwardMeasure<'a>,
    /// Any set-up calls, any allocation calls (without, their measures are 0).
    any_setup: bool,
    any_alloc: bool,
    /// The GPU idle time inside steps that allocation calls cover.
    alloc_idle_ns: Ns,
    syncs: &'a [SyncSpan],
    sync_cursor: usize,
    step_cursor: StepCursor,
    /// Per step position, and last the gaps of no step.
    parts: Vec<GapParts>,
    /// GPU idle time caused per sync call name (indexed by name).
    idle_by_name: Vec<Ns>,
}

impl<'a> GapClassifier<'a> {
    fn new(
        gpu: &'a GpuSteps<'a>,
        index: &'a StepIndex,
        host: &'a HostSteps,
        calls: &'a [RawCall],
    ) -> GapClassifier<'a> {
        GapClassifier {
            op_steps: gpu.op_steps(),
            first: &gpu.first,
            index,
            host: HostBusy::new(calls, &host.stand_ins),
            setup: ForwardMeasure::new(&host.setup),
            alloc: ForwardMeasure::new(&host.alloc),
            any_setup: !host.setup.is_empty(),
            any_alloc: !host.alloc.is_empty(),
            alloc_idle_ns: 0,
            syncs: &host.syncs,
            sync_cursor: 0,
            step_cursor: StepCursor::default(),
            parts: vec![GapParts::default(); index.len() + 1],
            idle_by_name: Vec::new(),
        }
    }

    /// The sync call the host was blocked in when the GPU ran dry at `a`.
    #[inline(always)]
    fn blocking_sync(&mut self, a: Ns) -> Option<u32> {
        let i = forward_partition(self.syncs, &mut self.sync_cursor, |c| c.start <= a);
        // None of the calls so far returned late enough: no need to look at the last 64.
        let last = self.syncs[..i].last()?;
        if last.ends_by + SYNC_SLACK_NS < a {
            return None;
        }
        // The usual case: the last call to start is the one.
        if last.end + SYNC_SLACK_NS >= a {
            return Some(last.name);
        }
        self.syncs[i.saturating_sub(64)..i - 1].iter().rev().find(|c| c.end + SYNC_SLACK_NS >= a).map(|c| c.name)
    }

    /// The gap `[a, b)`: its parts, added to the step it belongs to (that of the work after it:
    /// operation `i` on, the first to start at or after `b`), and to the sync call that caused it.
    #[inline(always)]
    fn gap(&mut self, a: Ns, b: Ns, i: usize) {
        let gap = b - a;
        let owner = self.op_steps.step_of(i).or_else(|| self.index.pos_forward(b, &mut self.step_cursor));
        if owner.is_some() && self.any_alloc {
            self.alloc_idle_ns += self.alloc.measure(a, b);
        }
        let row = owner.unwrap_or(self.parts.len() - 1);
        if self.any_setup && self.setup.measure(a, b) * 2 >= gap {
            // The GPU waited for set-up (communicators being created): neither launching nor data.
            self.parts[row][IDLE] += gap;
        } else if let Some(name) = self.blocking_sync(a) {
            self.parts[row][SYNC] += gap;
            let name = name as usize;
            if name >= self.idle_by_name.len() {
                self.idle_by_name.resize(name + 1, 0);
            }
            self.idle_by_name[name] += gap;
        } else if owner.is_some_and(|p| self.first[p] == Some(b)) {
            let inside = self.host.measure(a, b);
            let row = &mut self.parts[row];
            row[DATA] += gap - inside;
            row[LAUNCH] += inside;
        } else if owner.is_some() && (gap <= LAUNCH_GAP_MAX_NS || self.host.measure(a, b) * 2 >= gap) {
            self.parts[row][LAUNCH] += gap;
        } else {
            self.parts[row][IDLE] += gap;
        }
    }
}

/// What [`split_window`] found.
pub struct WindowSplit {
    /// The busy parts (compute, communication, copies) are 0 until [`WindowSplit::add_busy`].
    pub split: Split,
    /// Per step position: the idle gaps' parts only.
    pub steps: Vec<Split>,
    /// The GPU idle time inside steps that allocation calls covered.
    pub alloc_idle_ns: Ns,
    /// The GPU idle time each sync call caused, by call name.
    pub idle_by_sync: Vec<Ns>,
    /// The parts of the window that were recorded.
    pub observed: Vec<(Ns, Ns)>,
}

impl WindowSplit {
    /// The windows [`WindowSplit::add_busy`] asks about.
    pub fn ask(&self, queries: &mut Queries) {
        for &(lo, hi) in &self.observed {
            queries.add(lo, hi);
        }
    }

    /// The busy parts of the split: the observed time is busy (in the union of all operations) or
    /// in an idle gap.
    pub fn add_busy(&mut self, busy: &BusyMeasures<'_>) {
        let split = &mut self.split;
        let (mut compute, mut cm) = (0, 0);
        for &(lo, hi) in &self.observed {
            compute += busy.compute_in(lo, hi);
            cm += busy.cm_in(lo, hi);
        }
        // Communication not overlapped by compute: |comm| - |comm ∩ compute| = |comm ∪ compute| - |compute|.
        split.compute_ns = compute;
        split.comm_ns = cm - compute;
        let idle = split.data_ns + split.launch_ns + split.sync_ns + split.idle_ns;
        split.memcpy_ns = self.observed.iter().map(|p| p.1 - p.0).sum::<Ns>() - idle - cm;
    }
}

/// The window's split (busy time by kind, idle gaps by cause), whole and per step position;
/// time the capture windows did not record is left out, not called idle. Also finds the GPU idle
/// time each sync call caused, the idle stretches inside the steps' GPU windows (given to
/// `gpu_windows`), and the GPU idle time inside steps that allocation calls covered.
pub fn split_window(
    gpu: &GpuSteps<'_>,
    index: &StepIndex,
    host: &HostSteps,
    calls: &[RawCall],
    (w0, w1): (Ns, Ns),
    holes: &[(Ns, Ns)],
    gpu_windows: &mut StepWindows,
) -> WindowSplit {
    let mut gaps = GapClassifier::new(gpu, index, host, calls);
    // The idle gaps: where the operations (in start order) leave `[w0, w1)` uncovered. `prev`: the
    // latest end of the operations that start by it (empty ones and those before `w0` included:
    // they never reach past it).
    let ops = gpu.ops;
    let (mut prev, mut i) = (w0, 0);
    loop {
        while let Some(o) = ops.get(i).filter(|o| o.start <= prev) {
            prev = prev.max(o.end);
            i += 1;
        }
        let Some(o) = ops.get(i).filter(|o| o.start < w1) else { break };
        let s = o.start;
        if o.end > s {
            gpu_windows.idle(prev, s);
            if holes.is_empty() {
                // The first operation to start at `s` (empty ones sort first).
                let empty_before = ops[..i].iter().rev().take_while(|o| o.start == s).count();
                gaps.gap(prev, s, i - empty_before);
            } else {
                for (a, b) in observed_parts(prev, s, holes) {
                    gaps.gap(a, b, ops.partition_point(|o| o.start < b));
                }
            }
            prev = o.end;
        }
        i += 1;
    }
    let prev = prev.min(w1);
    if prev < w1 {
        gpu_windows.idle(prev, w1);
    }
    let GapClassifier { parts, idle_by_name, alloc_idle_ns, .. } = gaps;
    let mut split = Split::default();
    let step_split: Vec<Split> = parts[..index.len()].iter().map(|r| gap_split(*r)).collect();
    for r in &parts {
        split.add(&gap_split(*r));
    }
    if prev < w1 {
        split.idle_ns += observed_parts(prev, w1, holes).map(|p| p.1 - p.0).sum::<Ns>();
    }
    let observed: Vec<(Ns, Ns)> = observed_parts(w0, w1, holes).collect();
    WindowSplit { split, steps: step_split, alloc_idle_ns, idle_by_sync: idle_by_name, observed }
}

/// A split of idle gaps only.
fn gap_split(r: GapParts) -> Split {
    Split { data_ns: r[DATA], launch_ns: r[LAUNCH], sync_ns: r[SYNC], idle_ns: r[IDLE], ..Split::default() }
}
