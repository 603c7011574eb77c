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

/// Values in per-step buckets of one flat list: step position `p`'s are `values[at[p]..at[p + 1]]`.
#[derive(Debug, Default)]
pub struct Buckets {
    values: Vec<Ns>,
    at: Vec<usize>,
}

impl Buckets {
    /// Empty buckets of the given sizes, and the next free slot of each.
    fn with_sizes(sizes: impl Iterator<Item = usize>) -> (Buckets, Vec<usize>) {
        let sizes: Vec<usize> = sizes.collect();
        let b = Buckets::of_values(vec![0; sizes.iter().sum()], sizes.into_iter());
        let next = b.at[..b.at.len() - 1].to_vec();
        (b, next)
    }

    /// The buckets of the given sizes, `values` already in bucket order.
    fn of_values(values: Vec<Ns>, sizes: impl Iterator<Item = usize>) -> Buckets {
        let mut at = vec![0];
        at.extend(sizes.scan(0, |total, n| {
            *total += n;
            Some(*total)
        }));
        debug_assert_eq!(at.last(), Some(&values.len()));
        Buckets { values, at }
    }

    pub fn len(&self, p: usize) -> usize {
        self.at[p + 1] - self.at[p]
    }

    /// The element at half the length of bucket `p` in sorted order (0 for none).
    pub fn median(&mut self, p: usize) -> Ns {
        let v = &mut self.values[self.at[p]..self.at[p + 1]];
        if v.is_empty() {
            return 0;
        }
        let mid = v.len() / 2;
        *v.select_nth_unstable(mid).1
    }
}

/// The compute kernels of each step position, and the AMP check / optimizer kernels.
pub struct StepKernels {
    pub durations: Buckets,
    /// The idle time between consecutive compute kernels (in start order) of each step position.
    pub gaps: Buckets,
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
    /// Compute kernels per step position (the sizes of `kernels`' buckets).
    compute_in_step: Vec<usize>,
    /// Durations and gaps empty until [`GpuSteps::fill_kernel_buckets`].
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
            compute_in_step,
            kernels: StepKernels {
                durations: Buckets::default(),
                gaps: Buckets::default(),
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

    /// Puts each step's compute kernel durations and the gaps between them in `kernels`' buckets.
    /// A second pass, run after the idle gaps are classified: its buckets (16 bytes per compute
    /// kernel) then do not coexist with what the classification holds. The values are gathered
    /// run by run in operation order; when each step has one run and the runs are in step order
    /// (the steps' work did not overlap), that is already bucket order, else each run's values are
    /// copied to their step's bucket.
    pub fn fill_kernel_buckets(&mut self) {
        let nsteps = self.compute_in_step.len();
        let total: usize = self.compute_in_step.iter().sum();
        let (mut durations, mut gaps) = (Vec::with_capacity(total), Vec::with_capacity(total));
        // Per run of a step: (step position, where its durations and its gaps start).
        let mut segments: Vec<(u32, usize, usize)> = Vec::with_capacity(self.runs.len());
        // The end of the last compute kernel so far, per step position.
        let mut last_end: Vec<Option<Ns>> = vec![None; nsteps];
        let mut in_order = true;
        for (ops, p) in self.run_ranges() {
            let Some(end) = last_end.get_mut(p as usize) else { continue };
            in_order &= segments.last().is_none_or(|s| s.0 < p);
            segments.push((p, durations.len(), gaps.len()));
            for o in &self.ops[ops] {
                if o.kind == OpKind::Compute {
                    durations.push(o.end - o.start);
                    if let Some(e) = *end {
                        gaps.push(o.start.saturating_sub(e));
                    }
                    *end = Some(o.end);
                }
            }
        }
        let sizes = |gap: bool| self.compute_in_step.iter().map(move |&n| if gap { n.saturating_sub(1) } else { n });
        if in_order {
            self.kernels.durations = Buckets::of_values(durations, sizes(false));
            self.kernels.gaps = Buckets::of_values(gaps, sizes(true));
            return;
        }
        let (mut d_buckets, mut d_next) = Buckets::with_sizes(sizes(false));
        let (mut g_buckets, mut g_next) = Buckets::with_sizes(sizes(true));
        let ends = segments.iter().skip(1).map(|s| (s.1, s.2)).chain([(durations.len(), gaps.len())]);
        for (&(p, d, g), (d_end, g_end)) in segments.iter().zip(ends) {
            let p = p as usize;
            let (nd, ng) = (d_end - d, g_end - g);
            d_buckets.values[d_next[p]..d_next[p] + nd].copy_from_slice(&durations[d..d_end]);
            g_buckets.values[g_next[p]..g_next[p] + ng].copy_from_slice(&gaps[g..g_end]);
            d_next[p] += nd;
            g_next[p] += ng;
        }
        (self.kernels.durations, self.kernels.gaps) = (d_buckets, g_buckets);
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
