//! The GPU side of one rank's timeline: each operation's step (as runs of consecutive operations
//! of one step), the busy-time unions, when each step's GPU work started, and each step's compute
//! kernels (how many, the medians of their durations and of the gaps between them) and AMP check /
//! optimizer kernels; one pass over the operations, then, for the medians, one over each step's
//! runs into a buffer reused from step to step.

use super::corr_steps::{CorrSteps, RunCursor};
use super::spans::{start_order_union, StartOrderUnion};
use super::timeline::{OpKind, RawOp, StepCursor, StepIndex};
use crate::diagnose::facts::Family;
use crate::model::Ns;

/// `op_step` of an operation that belongs to no step.
const NO_STEP: u32 = u32::MAX;

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
    /// The union of the communication operations. That of the compute operations is never held
    /// ([`GpuSteps::compute_union`] makes it on the fly), nor that of all operations (the split
    /// sweeps the operations themselves).
    pub comm: Vec<(Ns, Ns)>,
    /// First GPU start per step position.
    pub first: Vec<Option<Ns>>,
    /// Latest end of any operation that belongs to a step.
    pub last: Ns,
    /// Medians 0 until [`GpuSteps::kernel_medians`].
    pub kernels: StepKernels,
}

impl<'a> GpuSteps<'a> {
    /// An operation belongs to the step whose host call launched it (by correlation), else to the
    /// step its start falls in. `ops` sorted by (start, end); `n_comm`, how many are communication
    /// (room made for their union: any number is right, this one is enough).
    pub fn of(ops: &'a [RawOp], n_comm: usize, corr_step: &CorrSteps, index: &StepIndex) -> GpuSteps<'a> {
        let nsteps = index.len();
        assert!(ops.len() < u32::MAX as usize, "{} operations in one process", ops.len());
        // The operations are in start order: the union grows at its end.
        let mut comm = StartOrderUnion::with_capacity(n_comm);
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
        let mut corr_run = RunCursor::default();
        for (i, o) in ops.iter().enumerate() {
            let (s, e) = (o.start, o.end);
            if o.kind == OpKind::Comm {
                comm.push(s, e);
            }
            let step = match (o.corr != 0).then(|| corr_step.get_at(o.corr, &mut corr_run)).flatten() {
                Some(p) => p,
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
            comm: comm.finish(),
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

    /// The union of the compute operations, in time order, made as it is read.
    pub fn compute_union(&self) -> impl Iterator<Item = (Ns, Ns)> + '_ {
        let compute = self.ops.iter().filter(|o| o.kind == OpKind::Compute).map(|o| (o.start, o.end));
        start_order_union(compute)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::steps::StepWindow;
    use crate::xorshift::XorShift;

    /// Random operations in (start, end) order (some empty, some without a correlation, some of
    /// steps that overlap), the correlation -> step map of their calls, and the step windows.
    fn random_case(rng: &mut XorShift) -> (Vec<RawOp>, CorrSteps, StepIndex) {
        let nsteps = rng.below(6);
        let mut t = 0;
        let windows: Vec<StepWindow> = (0..nsteps)
            .map(|i| {
                t += rng.below(30);
                let start = t;
                t += 1 + rng.below(60);
                StepWindow { index: i, name: String::new(), start, end: t }
            })
            .collect();
        let mut corr_step = CorrSteps::default();
        let mut ops: Vec<RawOp> = (0..rng.below(120))
            .map(|i| {
                let start = rng.below(t + 40);
                let kind = [OpKind::Compute, OpKind::Compute, OpKind::Comm, OpKind::Memory][rng.index(4)];
                let corr = if rng.below(4) == 0 { 0 } else { i as u32 + 1 };
                if corr != 0 && nsteps > 0 && rng.below(3) > 0 {
                    // Mostly the step its start falls in (as launches run ahead), sometimes another.
                    let p =
                        if rng.below(4) == 0 { rng.below(nsteps) } else { (start * nsteps / (t + 40)).min(nsteps - 1) };
                    corr_step.insert(corr, p as u32);
                }
                RawOp { start, end: start + rng.below(9), corr, kind, family: Family::Gemm }
            })
            .collect();
        ops.sort_by_key(|o| (o.start, o.end));
        (ops, corr_step, StepIndex::new(windows))
    }

    /// Each operation's step position, one by one.
    fn steps_one_by_one(ops: &[RawOp], corr_step: &CorrSteps, index: &StepIndex) -> Vec<Option<usize>> {
        ops.iter()
            .map(|o| match (o.corr != 0).then(|| corr_step.get(o.corr)).flatten() {
                Some(p) => Some(p as usize),
                None => index.pos(o.start),
            })
            .collect()
    }

    #[test]
    fn op_steps_gives_each_operations_step() {
        let mut rng = XorShift(0x0b5e_55ed_2026_1203);
        for _ in 0..300 {
            let (ops, corr_step, index) = random_case(&mut rng);
            let want = steps_one_by_one(&ops, &corr_step, &index);
            let gpu = GpuSteps::of(&ops, 0, &corr_step, &index);
            let mut cursor = gpu.op_steps();
            let mut i = 0;
            while i < ops.len() {
                assert_eq!(cursor.step_of(i), want[i], "op {i} of {ops:?}");
                i += 1 + rng.index(3) * rng.index(2);
            }
            assert_eq!(cursor.step_of(ops.len()), None);
        }
    }

    #[test]
    fn kernel_medians_match_each_steps_kernels_sorted() {
        let mut rng = XorShift(0x3ed1_a45e_0000_0019);
        for _ in 0..300 {
            let (ops, corr_step, index) = random_case(&mut rng);
            let steps = steps_one_by_one(&ops, &corr_step, &index);
            let mut gpu = GpuSteps::of(&ops, 0, &corr_step, &index);
            let from = rng.index(2);
            gpu.kernel_medians(from);
            let median_of_sorted = |mut v: Vec<Ns>| {
                v.sort_unstable();
                v.get(v.len() / 2).copied().unwrap_or(0)
            };
            for p in 0..index.len() {
                let kernels: Vec<&RawOp> = ops
                    .iter()
                    .zip(&steps)
                    .filter(|(o, s)| **s == Some(p) && o.kind == OpKind::Compute)
                    .map(|x| x.0)
                    .collect();
                assert_eq!(gpu.kernels.count[p], kernels.len());
                if p < from {
                    continue;
                }
                let durations = kernels.iter().map(|o| o.end - o.start).collect();
                let gaps = kernels.windows(2).map(|w| w[1].start.saturating_sub(w[0].end)).collect();
                assert_eq!(gpu.kernels.median_duration[p], median_of_sorted(durations), "step {p} of {ops:?}");
                assert_eq!(gpu.kernels.median_gap[p], median_of_sorted(gaps), "step {p} of {ops:?}");
            }
        }
    }
}
