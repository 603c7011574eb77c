//! Each analysed step's GPU window (from its first GPU start to where the next step's GPU work
//! starts, or recording stopped) and how much of it the GPU was busy: the window less the idle
//! stretches inside it, which the split's sweep over the operations finds in time order, so the
//! union of all operations is never built.

use crate::model::Ns;

/// Where each step position's GPU window ends: where the next step's GPU work starts (in GPU
/// order), or where recording stopped before that, or the window's end.
pub fn gpu_step_ends(first: &[Option<Ns>], holes: &[(Ns, Ns)], w1: Ns) -> Vec<Ns> {
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

/// The GPU windows `[first, max(end, first))` of the step positions from `skip` on that have GPU
/// work, in time order (disjoint: each ends by where the next starts), and the idle time found
/// inside each so far.
pub struct StepWindows {
    /// (start, end, step position), by start.
    windows: Vec<(Ns, Ns, usize)>,
    idle: Vec<Ns>,
    /// The windows before this one end by the last idle stretch's start.
    at: usize,
    /// Where window `at` starts and ends (`Ns::MAX` for none).
    current: (Ns, Ns),
}

impl StepWindows {
    /// `ends` as [`gpu_step_ends`] gives them.
    pub fn new(first: &[Option<Ns>], ends: &[Ns], skip: usize) -> StepWindows {
        let mut windows: Vec<(Ns, Ns, usize)> =
            (skip..first.len()).filter_map(|p| first[p].map(|g| (g, ends[p].max(g), p))).collect();
        windows.sort_by_key(|w| w.0);
        debug_assert!(windows.windows(2).all(|w| w[0].1 <= w[1].1), "window ends in order: {windows:?}");
        let current = windows.first().map_or((Ns::MAX, Ns::MAX), |w| (w.0, w.1));
        StepWindows { idle: vec![0; windows.len()], windows, at: 0, current }
    }

    /// The GPU was idle in `[a, b)` (after the previous stretch).
    #[inline]
    pub fn idle(&mut self, a: Ns, b: Ns) {
        // The usual case: inside the current window.
        if a >= self.current.0 && b <= self.current.1 {
            self.idle[self.at] += b - a;
        } else {
            self.idle_across(a, b);
        }
    }

    #[inline(never)]
    fn idle_across(&mut self, a: Ns, b: Ns) {
        while self.windows.get(self.at).is_some_and(|w| w.1 <= a) {
            self.at += 1;
        }
        self.current = self.windows.get(self.at).map_or((Ns::MAX, Ns::MAX), |w| (w.0, w.1));
        for (w, idle) in self.windows[self.at..].iter().zip(&mut self.idle[self.at..]) {
            if w.0 >= b {
                break;
            }
            *idle += b.min(w.1).saturating_sub(a.max(w.0));
        }
    }

    /// The busy time inside each step position's window (0 for a step without one), once every
    /// idle stretch that reaches into a window was given.
    pub fn busy(&self, nsteps: usize) -> Vec<Ns> {
        let mut busy = vec![0; nsteps];
        for (&(s, e, p), idle) in self.windows.iter().zip(&self.idle) {
            busy[p] = (e - s) - idle;
        }
        busy
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::intervals::measure_in;
    use crate::xorshift::XorShift;

    #[test]
    fn busy_time_per_window_is_the_measure_of_the_union_inside_it() {
        let mut rng = XorShift(0x77aa_1234_5678_9abc);
        for round in 0..200u64 {
            // A union of busy intervals inside [0, w1), sorted and disjoint.
            let mut union: Vec<(Ns, Ns)> = Vec::new();
            let mut t = rng.below(10);
            for _ in 0..rng.below(40) {
                let s = t + rng.below(8);
                let e = s + 1 + rng.below(12);
                union.push((s, e));
                t = e + 1;
            }
            let w1 = t + rng.below(10);
            let nsteps = rng.below(8) as usize;
            let first: Vec<Option<Ns>> =
                (0..nsteps).map(|_| (rng.below(4) > 0).then(|| rng.below(w1.max(1)))).collect();
            let holes: Vec<(Ns, Ns)> = if round % 2 == 0 { Vec::new() } else { vec![(w1 / 3, w1 / 3 + 2)] };
            let ends = gpu_step_ends(&first, &holes, w1);
            let skip = usize::from(nsteps >= 4);
            let mut windows = StepWindows::new(&first, &ends, skip);
            // The idle stretches: the complement of the union in [0, w1), in order.
            let mut prev = 0;
            for &(s, e) in &union {
                if s > prev {
                    windows.idle(prev, s);
                }
                prev = e;
            }
            if prev < w1 {
                windows.idle(prev, w1);
            }
            let busy = windows.busy(nsteps);
            for p in 0..nsteps {
                let want = match first[p] {
                    Some(g) if p >= skip => measure_in(&union, g, ends[p].max(g)),
                    _ => 0,
                };
                assert_eq!(busy[p], want, "step {p}: first {first:?} ends {ends:?} union {union:?}");
            }
        }
    }
}
