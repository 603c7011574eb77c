//! The GPU side of one rank's timeline: each operation's step, the busy-time unions, when each
//! step's GPU work started, and each step's compute kernels (durations and the gaps between them,
//! for medians) and AMP check / optimizer kernels; one pass over the operations, then one over the
//! compute kernels to put their durations and gaps in per-step buckets of one flat list each.

use super::spans::StartOrderUnion;
use super::timeline::{OpKind, RawOp, StepCursor, StepIndex};
use crate::corr_slots::CorrSlots;
use crate::diagnose::facts::Family;
use crate::model::Ns;

/// `op_step` of an operation that belongs to no step.
const NO_STEP: u32 = u32::MAX;

/// Busy-time unions of the GPU operations.
pub struct Busy {
    pub compute: Vec<(Ns, Ns)>,
    /// Compute or communication (communication alone is never needed: its part outside compute
    /// is `cm` less `compute`). That of all operations is never built: the split sweeps the
    /// operations themselves.
    pub cm: Vec<(Ns, Ns)>,
}

/// The element at half the length of `v` in sorted order (0 for none).
fn median(v: &mut [Ns]) -> Ns {
    if v.is_empty() {
        return 0;
    }
    let mid = v.len() / 2;
    *v.select_nth_unstable(mid).1
}

/// The compute kernels of each step position, and the AMP check / optimizer kernels.
pub struct StepKernels {
    /// Compute kernels per step position.
    pub count: Vec<usize>,
    /// The median duration of each step position's compute kernels.
    pub median_duration: Vec<Ns>,
    /// The median idle time between consecutive compute kernels (in start order) of each step
    /// position.
    pub median_gap: Vec<Ns>,
    /// Start of the first AMP non-finite check.
    pub amp_check: Vec<Option<Ns>>,
    /// An optimizer kernel ran after the AMP check.
    pub optimizer_after_check: Vec<bool>,
    /// Any optimizer kernel ran at all.
    pub any_optimizer: bool,
}

/// The GPU side: operations (sorted by start) with the step each belongs to, busy unions, and
/// when each step's GPU work started.
pub struct GpuSteps<'a> {
    pub ops: &'a [RawOp],
    /// The step positions of the operations, in runs of consecutive operations of one step:
    /// (index of the run's first operation, step position or [`NO_STEP`]); the steps' work mostly
    /// runs one step after the other, so these are few.
    runs: Vec<(u32, u32)>,
    pub busy: Busy,
    /// First GPU start per step position.
    pub first: Vec<Option<Ns>>,
    /// Latest end of any operation that belongs to a step.
    pub last: Ns,
    /// Medians 0 until [`GpuSteps::kernel_medians`].
    pub kernels: StepKernels,
}

impl<'a> GpuSteps<'a> {
    /// An operation belongs to the step whose host call launched it (by correlation), else to the
    /// step its start falls in. `ops` sorted by (start, end).
    pub fn of(ops: &'a [RawOp], corr_step: &CorrSlots<u32>, index: &StepIndex) -> GpuSteps<'a> {
        let nsteps = index.len();
        assert!(ops.len() < u32::MAX as usize, "{} operations in one process", ops.len());
        let mut kinds = [0usize; 3];
        for o in ops {
            kinds[o.kind as usize] += 1;
        }
        let [n_compute, n_comm, _] = kinds;
        // The operations are in start order: each union grows at its end.
        let mut compute = StartOrderUnion::with_capacity(n_compute);
        let mut cm = StartOrderUnion::with_capacity(n_compute + n_comm);
        let mut runs: Vec<(u32, u32)> = Vec::new();
        // The step of the current run (none before the first).
        let mut run_step = NO_RUN;
        let mut first: Vec<Option<Ns>> = vec![None; nsteps];
        let mut last: Ns = 0;
        let mut compute_in_step = vec![0usize; nsteps];
        let mut amp_check: Vec<Option<Ns>> = vec![None; nsteps];
        // The latest start of an optimizer kernel per step position.
        let mut optimizer_last: Vec<Option<Ns>> = vec![None; nsteps];
        let mut any_optimizer = false;
        let mut cursor = StepCursor::default();
        for (i, o) in ops.iter().enumerate() {
            let (s, e) = (o.start, o.end);
            match o.kind {
                OpKind::Compute => {
                    compute.push(s, e);
                    cm.push(s, e);
                }
                OpKind::Comm => cm.push(s, e),
                OpKind::Memory => {}
            }
            let step = match (o.corr != 0).then(|| corr_step.get(o.corr.into())).flatten() {
                Some(&p) => p,
                None => index.pos_forward(s, &mut cursor).map_or(NO_STEP, |p| p as u32),
            };
            if step != run_step {
                runs.push((i as u32, step));
                run_step = step;
                // Sorted by start: the first operation of a step's first run is its earliest.
                if let Some(f) = first.get_mut(step as usize).filter(|f| f.is_none()) {
                    *f = Some(s);
                }
            }
            if step == NO_STEP {
                continue;
            }
            let p = step as usize;
            last = last.max(e);
            compute_in_step[p] += usize::from(o.kind == OpKind::Compute);
            match o.family {
                Family::AmpCheck if amp_check[p].is_none() => amp_check[p] = Some(s),
                Family::Optimizer => {
                    any_optimizer = true;
                    optimizer_last[p] = Some(s);
                }
                _ => {}
            }
        }
        let optimizer_after_check = amp_check
            .iter()
            .zip(&optimizer_last)
            .map(|(a, o)| matches!((a, o), (Some(a), Some(o)) if o >= a))
            .collect();
        GpuSteps {
            ops,
            runs,
            busy: Busy { compute: compute.finish(), cm: cm.finish() },
            first,
            last,
            kernels: StepKernels {
                median_duration: vec![0; nsteps],
                median_gap: vec![0; nsteps],
                count: compute_in_step,
                amp_check,
                optimizer_after_check,
                any_optimizer,
            },
        }
    }

    /// The runs as (operations, step position), the operations' step positions in order.
    fn run_ranges(&self) -> impl Iterator<Item = (std::ops::Range<usize>, u32)> + '_ {
        let ends = self.runs.iter().skip(1).map(|r| r.0 as usize).chain([self.ops.len()]);
        self.runs.iter().zip(ends).map(|(&(at, p), end)| (at as usize..end, p))
    }

    /// The medians of each step position's compute kernel durations and of the gaps between them
    /// (from position `from` on), into `kernels`: a step's values are gathered from its runs in
    /// operation order into one buffer, reused from step to step (a gap with each kernel; before
    /// a step's first, not one: left out).
    pub fn kernel_medians(&mut self, from: usize) {
        let ranges: Vec<(std::ops::Range<usize>, u32)> = self.run_ranges().collect();
        // The runs of each step, by step position, each step's in operation order.
        let mut runs_of: Vec<(u32, usize)> = (ranges.iter().enumerate())
            .filter(|(_, r)| r.1 != NO_STEP && r.1 as usize >= from)
            .map(|(k, r)| (r.1, k))
            .collect();
        if !runs_of.is_sorted_by_key(|r| r.0) {
            runs_of.sort_by_key(|r| r.0);
        }
        let k = &mut self.kernels;
        let (mut durations, mut gaps): (Vec<Ns>, Vec<Ns>) = (Vec::new(), Vec::new());
        for runs in runs_of.chunk_by(|a, b| a.0 == b.0) {
            let p = runs[0].0 as usize;
            let n = k.count[p];
            if durations.len() < n {
                durations.resize(n, 0);
                gaps.resize(n, 0);
            }
            let (mut filled, mut e) = (0, 0);
            for &(_, r) in runs {
                let free = durations[filled..n].iter_mut().zip(&mut gaps[filled..n]);
                for (o, (d, g)) in self.ops[ranges[r].0.clone()].iter().filter(|o| o.kind == OpKind::Compute).zip(free)
                {
                    *d = o.end - o.start;
                    *g = o.start.saturating_sub(e);
                    e = o.end;
                    filled += 1;
                }
            }
            debug_assert_eq!(filled, n);
            k.median_duration[p] = median(&mut durations[..n]);
            k.median_gap[p] = median(&mut gaps[n.min(1)..n]);
        }
    }

    /// The step positions of the operations, asked in order of operation index.
    pub fn op_steps(&self) -> OpSteps<'_> {
        OpSteps { runs: &self.runs, n: self.ops.len(), next: 0, end: 0, step: NO_STEP }
    }
}

/// `step` of a run before the first.
const NO_RUN: u32 = NO_STEP - 1;

/// A cursor over [`GpuSteps`]' runs for operation indexes that never decrease from one call to
/// the next.
pub struct OpSteps<'a> {
    runs: &'a [(u32, u32)],
    n: usize,
    /// The run after the current one.
    next: usize,
    /// Where the current run ends.
    end: usize,
    step: u32,
}

impl OpSteps<'_> {
    /// The step position of operation `op` (None for none, and past the end).
    #[inline]
    pub fn step_of(&mut self, op: usize) -> Option<usize> {
        if op >= self.end {
            if op >= self.n {
                return None;
            }
            while self.runs.get(self.next).is_some_and(|r| r.0 as usize <= op) {
                self.step = self.runs[self.next].1;
                self.next += 1;
            }
            self.end = self.runs.get(self.next).map_or(self.n, |r| r.0 as usize);
        }
        (self.step != NO_STEP).then_some(self.step as usize)
    }
}
