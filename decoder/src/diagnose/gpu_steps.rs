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
    /// is `cm` less `compute`).
    pub cm: Vec<(Ns, Ns)>,
    /// Any operation.
    pub all: Vec<(Ns, Ns)>,
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
        let mut at = vec![0];
        let mut total = 0;
        for n in sizes {
            total += n;
            at.push(total);
        }
        let next = at[..at.len() - 1].to_vec();
        (Buckets { values: vec![0; total], at }, next)
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
    /// Step position per operation ([`NO_STEP`]: none).
    op_step: Vec<u32>,
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
        let mut kinds = [0usize; 3];
        for o in ops {
            kinds[o.kind as usize] += 1;
        }
        let [n_compute, n_comm, _] = kinds;
        // The operations are in start order: each union grows at its end.
        let mut compute = StartOrderUnion::with_capacity(n_compute);
        let mut cm = StartOrderUnion::with_capacity(n_compute + n_comm);
        let mut all = StartOrderUnion::with_capacity(ops.len());
        let mut op_step: Vec<u32> = Vec::with_capacity(ops.len());
        let mut first: Vec<Option<Ns>> = vec![None; nsteps];
        let mut last: Ns = 0;
        let mut compute_in_step = vec![0usize; nsteps];
        let mut amp_check: Vec<Option<Ns>> = vec![None; nsteps];
        // The latest start of an optimizer kernel per step position.
        let mut optimizer_last: Vec<Option<Ns>> = vec![None; nsteps];
        let mut any_optimizer = false;
        let mut cursor = StepCursor::default();
        for o in ops {
            let (s, e) = (o.start, o.end);
            match o.kind {
                OpKind::Compute => {
                    compute.push(s, e);
                    cm.push(s, e);
                }
                OpKind::Comm => cm.push(s, e),
                OpKind::Memory => {}
            }
            all.push(s, e);
            let step = match (o.corr != 0).then(|| corr_step.get(o.corr.into())).flatten() {
                Some(&p) => Some(p as usize),
                None => index.pos_forward(s, &mut cursor),
            };
            let Some(p) = step else {
                op_step.push(NO_STEP);
                continue;
            };
            op_step.push(p as u32);
            // Sorted by start: the first operation of a step is its earliest.
            if first[p].is_none() {
                first[p] = Some(s);
            }
            last = last.max(e);
            if o.kind == OpKind::Compute {
                compute_in_step[p] += 1;
            }
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
            op_step,
            busy: Busy { compute: compute.finish(), cm: cm.finish(), all: all.finish() },
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

    /// Puts each step's compute kernel durations and the gaps between them in `kernels`' buckets.
    /// A second pass, run after the idle gaps are classified: its buckets (16 bytes per compute
    /// kernel) then do not coexist with the host's busy union the classification builds.
    pub fn fill_kernel_buckets(&mut self) {
        let (ops, op_step, compute_in_step) = (self.ops, &self.op_step, &self.compute_in_step);
        let (mut durations, next_d) = Buckets::with_sizes(compute_in_step.iter().copied());
        let (mut gaps, next_g) = Buckets::with_sizes(compute_in_step.iter().map(|&n| n.saturating_sub(1)));
        // Per step position: the next free slots of its buckets, and the end of its last compute
        // kernel so far (the operations are in (start, end) order).
        let mut fill: Vec<(usize, usize, Option<Ns>)> =
            next_d.into_iter().zip(next_g).map(|(d, g)| (d, g, None)).collect();
        for (o, &p) in ops.iter().zip(op_step) {
            if p == NO_STEP || o.kind != OpKind::Compute {
                continue;
            }
            let f = &mut fill[p as usize];
            durations.values[f.0] = o.end - o.start;
            f.0 += 1;
            if let Some(e) = f.2 {
                gaps.values[f.1] = o.start.saturating_sub(e);
                f.1 += 1;
            }
            f.2 = Some(o.end);
        }
        (self.kernels.durations, self.kernels.gaps) = (durations, gaps);
    }

    /// The step position of operation `op` (None past the end).
    #[inline]
    pub fn step_of(&self, op: usize) -> Option<usize> {
        self.op_step.get(op).copied().filter(|&p| p != NO_STEP).map(|p| p as usize)
    }
}
