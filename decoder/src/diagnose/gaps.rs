//! The analysed window's split: GPU busy time by kind, and each GPU idle gap classified by what
//! the host was doing (blocked in a sync, outside CUDA at a step's start, launching, or none of
//! these), whole and per step. Gaps come in time order, so every search only moves forward.

use super::facts::{Split, SyncCallStat};
use super::gpu_steps::GpuSteps;
use super::host_steps::{HostBusy, HostSteps, SyncSpan};
use super::spans::{observed_parts, ForwardMeasure};
use super::timeline::{forward_partition, RawCall, StepCursor, StepIndex};
use crate::intervals::{measure_in, FastMap};
use crate::model::Ns;

/// How long after the GPU ran dry a blocked host may return and still count as the cause (ns).
const SYNC_SLACK_NS: Ns = 5_000;
/// Idle gaps between kernels of a step up to this long count as launch overhead (ns).
const LAUNCH_GAP_MAX_NS: Ns = 1_000_000;

/// What one idle gap was: only these parts of a [`Split`] are ever set.
#[derive(Debug, Default, Clone, Copy)]
struct GapPart {
    data_ns: Ns,
    launch_ns: Ns,
    sync_ns: Ns,
    idle_ns: Ns,
}

impl GapPart {
    #[inline]
    fn add_to(self, s: &mut Split) {
        s.data_ns += self.data_ns;
        s.launch_ns += self.launch_ns;
        s.sync_ns += self.sync_ns;
        s.idle_ns += self.idle_ns;
    }
}

/// Classifies each GPU idle gap by what the host was doing.
struct GapClassifier<'a> {
    gpu: &'a GpuSteps<'a>,
    index: &'a StepIndex,
    host: HostBusy<'a>,
    setup: ForwardMeasure<'a>,
    alloc: ForwardMeasure<'a>,
    /// The GPU idle time inside steps that allocation calls cover.
    alloc_idle_ns: Ns,
    syncs: &'a [SyncSpan],
    sync_cursor: usize,
    op_cursor: usize,
    step_cursor: StepCursor,
}

impl<'a> GapClassifier<'a> {
    fn new(
        gpu: &'a GpuSteps<'a>,
        index: &'a StepIndex,
        host: &'a HostSteps,
        calls: &'a [RawCall],
    ) -> GapClassifier<'a> {
        GapClassifier {
            gpu,
            index,
            host: HostBusy::new(calls),
            setup: ForwardMeasure::new(&host.setup),
            alloc: ForwardMeasure::new(&host.alloc),
            alloc_idle_ns: 0,
            syncs: &host.syncs,
            sync_cursor: 0,
            op_cursor: 0,
            step_cursor: StepCursor::default(),
        }
    }

    /// The sync call the host was blocked in when the GPU ran dry at `a`.
    fn blocking_sync(&mut self, a: Ns) -> Option<u32> {
        let i = forward_partition(self.syncs, &mut self.sync_cursor, |c| c.start <= a);
        // None of the calls so far returned late enough: no need to look at the last 64.
        if i == 0 || self.syncs[i - 1].ends_by + SYNC_SLACK_NS < a {
            return None;
        }
        self.syncs[i.saturating_sub(64)..i].iter().rev().find(|c| c.end + SYNC_SLACK_NS >= a).map(|c| c.name)
    }

    /// The gap `[a, b)`: its parts, the step it belongs to (that of the work after it), and the
    /// sync call that caused it.
    fn classify(&mut self, a: Ns, b: Ns) -> (GapPart, Option<usize>, Option<u32>) {
        let gap = b - a;
        let i = forward_partition(self.gpu.ops, &mut self.op_cursor, |o| o.start < b);
        let owner = self.gpu.step_of(i).or_else(|| self.index.pos_forward(b, &mut self.step_cursor));
        let first = owner.is_some_and(|p| self.gpu.first[p] == Some(b));
        let mut part = GapPart::default();
        let sync = self.blocking_sync(a);
        if owner.is_some() {
            self.alloc_idle_ns += self.alloc.measure(a, b);
        }
        if self.setup.measure(a, b) * 2 >= gap {
            // The GPU waited for set-up (communicators being created): neither launching nor data.
            part.idle_ns = gap;
        } else if sync.is_some() {
            part.sync_ns = gap;
        } else if first {
            let outside = gap - self.host.measure(a, b);
            part.data_ns = outside;
            part.launch_ns = gap - outside;
        } else if owner.is_some() && gap <= LAUNCH_GAP_MAX_NS {
            part.launch_ns = gap;
        } else {
            let inside = self.host.measure(a, b);
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
/// each sync call caused to `sync_stats`; also returns the GPU idle time inside steps that
/// allocation calls covered.
pub fn split_window(
    gpu: &GpuSteps<'_>,
    index: &StepIndex,
    host: &HostSteps,
    calls: &[RawCall],
    (w0, w1): (Ns, Ns),
    holes: &[(Ns, Ns)],
    sync_stats: &mut FastMap<u32, SyncCallStat>,
) -> (Split, Vec<Split>, Ns) {
    let mut gaps = GapClassifier::new(gpu, index, host, calls);
    let mut step_split = vec![Split::default(); index.len()];
    let mut split = Split::default();
    // GPU idle time caused per sync call name (indexed by name), added to `sync_stats` at the end.
    let mut idle_by_name: Vec<Ns> = Vec::new();
    let mut on_gap = |a: Ns, b: Ns| {
        let (part, owner, sync) = gaps.classify(a, b);
        if let Some(name) = sync.map(|n| n as usize) {
            if name >= idle_by_name.len() {
                idle_by_name.resize(name + 1, 0);
            }
            idle_by_name[name] += part.sync_ns;
        }
        part.add_to(&mut split);
        if let Some(p) = owner {
            part.add_to(&mut step_split[p]);
        }
    };
    let mut prev = w0;
    for &(s, e) in &gpu.busy.all {
        if e <= w0 || s >= w1 {
            continue;
        }
        let (s, e) = (s.max(w0), e.min(w1));
        if s > prev {
            if holes.is_empty() {
                on_gap(prev, s);
            } else {
                for (a, b) in observed_parts(prev, s, holes) {
                    on_gap(a, b);
                }
            }
        }
        prev = prev.max(e);
    }
    let alloc_idle_ns = gaps.alloc_idle_ns;
    for (name, idle) in idle_by_name.into_iter().enumerate() {
        if let Some(st) = sync_stats.get_mut(&(name as u32)) {
            st.gpu_idle_ns += idle;
        }
    }
    if prev < w1 {
        split.idle_ns += observed_parts(prev, w1, holes).map(|p| p.1 - p.0).sum::<Ns>();
    }
    let observed: Vec<(Ns, Ns)> = observed_parts(w0, w1, holes).collect();
    let in_observed = |set: &[(Ns, Ns)]| observed.iter().map(|&(a, b)| measure_in(set, a, b)).sum::<Ns>();
    let b = &gpu.busy;
    // Communication not overlapped by compute: |comm| - |comm ∩ compute| = |comm ∪ compute| - |compute|.
    let (compute, cm) = (in_observed(&b.compute), in_observed(&b.cm));
    split.compute_ns = compute;
    split.comm_ns = cm - compute;
    split.memcpy_ns = in_observed(&b.all) - cm;
    (split, step_split, alloc_idle_ns)
}
