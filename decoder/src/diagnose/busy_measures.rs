//! How long the GPU computed, or computed or communicated, inside the windows the timeline asks
//! about (steps' GPU windows, the observed parts of the analysed window, collectives' and pageable
//! copies' GPU spans), without ever holding the compute union (an interval per kernel, nearly: the
//! largest list of the analysis). The windows' ends are gathered first; one sweep over the compute
//! union, made on the fly from the kernels in start order, then gives at each end the measure of
//! the union before it, and that of its overlap with the communication union, so that a window's
//! measure is a difference of two of them.

use crate::intervals::measure_in;
use crate::model::Ns;

/// The windows' ends, as they are asked for.
#[derive(Debug, Default)]
pub struct Queries {
    points: Vec<Ns>,
}

impl Queries {
    /// The window `[lo, hi)` will be asked about.
    #[inline]
    pub fn add(&mut self, lo: Ns, hi: Ns) {
        self.points.extend([lo, hi]);
    }
}

/// The compute union's measure, and that of its overlap with communication, up to each window end.
#[derive(Debug)]
pub struct BusyMeasures<'a> {
    /// The window ends, sorted, each once.
    points: Vec<Ns>,
    /// Per point: the measure of the compute union before it, and of compute ∩ communication.
    before: Vec<(Ns, Ns)>,
    comm: &'a [(Ns, Ns)],
}

impl<'a> BusyMeasures<'a> {
    /// `compute` and `comm`: sorted, disjoint unions (`compute` is read only as far as the last
    /// window end).
    pub fn new(queries: Queries, compute: impl Iterator<Item = (Ns, Ns)>, comm: &'a [(Ns, Ns)]) -> BusyMeasures<'a> {
        let mut points = queries.points;
        points.sort_unstable();
        points.dedup();
        let mut before = Vec::with_capacity(points.len());
        // The first end not answered yet (`Ns::MAX` for none); the first communication interval
        // that ends after the current compute interval's start.
        let mut next = points.first().copied().unwrap_or(Ns::MAX);
        let mut c = 0;
        let (mut busy, mut both) = (0, 0);
        for (s, e) in compute {
            while comm.get(c).is_some_and(|x| x.1 <= s) {
                c += 1;
            }
            // The overlap of `[s, t)` with communication.
            let overlap = |t: Ns| -> Ns {
                let inside = comm[c..].iter().take_while(|x| x.0 < t);
                inside.map(|x| x.1.min(t).saturating_sub(x.0.max(s))).sum()
            };
            if next < e {
                // Ends at or before `s` see nothing of this interval; those inside it, part of it.
                while points.get(before.len()).is_some_and(|&t| t <= s) {
                    before.push((busy, both));
                }
                while let Some(&t) = points.get(before.len()).filter(|&&t| t < e) {
                    before.push((busy + (t - s), both + overlap(t)));
                }
                match points.get(before.len()) {
                    Some(&t) => next = t,
                    None => break,
                }
            }
            busy += e - s;
            if comm.get(c).is_some_and(|x| x.0 < e) {
                both += overlap(e);
            }
        }
        before.resize(points.len(), (busy, both));
        BusyMeasures { points, before, comm }
    }

    /// The sums before `t`, one of the window ends added.
    #[inline]
    fn at(&self, t: Ns) -> (Ns, Ns) {
        let i = self.points.partition_point(|&p| p < t);
        debug_assert_eq!(self.points.get(i), Some(&t), "{t} was not asked for");
        self.before[i]
    }

    /// `measure_in` of the compute union, `[lo, hi)` added.
    #[inline]
    pub fn compute_in(&self, lo: Ns, hi: Ns) -> Ns {
        if hi <= lo {
            return 0;
        }
        self.at(hi).0 - self.at(lo).0
    }

    /// `measure_in` of the union of compute and communication, `[lo, hi)` added (`|A ∪ B| = |A| +
    /// |B| - |A ∩ B|`).
    pub fn cm_in(&self, lo: Ns, hi: Ns) -> Ns {
        if hi <= lo {
            return 0;
        }
        let ((c0, b0), (c1, b1)) = (self.at(lo), self.at(hi));
        (c1 - c0) + measure_in(self.comm, lo, hi) - (b1 - b0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::spans::StartOrderUnion;
    use crate::intervals::{measure_in, union2};
    use crate::xorshift::XorShift;

    /// A sorted, disjoint random list inside `[0, 400)`.
    fn random_union(rng: &mut XorShift) -> Vec<(Ns, Ns)> {
        let mut u = StartOrderUnion::default();
        let mut t = 0;
        for _ in 0..rng.below(60) {
            t += rng.below(12);
            u.push(t, t + rng.below(15));
        }
        u.finish()
    }

    #[test]
    fn measures_match_measure_in_of_the_unions() {
        let mut rng = XorShift(0xc0de_0c0c_2026_1203);
        for _ in 0..500 {
            let (compute, comm) = (random_union(&mut rng), random_union(&mut rng));
            let cm = union2(&compute, &comm);
            let windows: Vec<(Ns, Ns)> = (0..rng.below(20))
                .map(|_| {
                    let lo = rng.below(420);
                    (lo, (lo + rng.below(200)).saturating_sub(rng.below(10)))
                })
                .collect();
            let mut queries = Queries::default();
            for &(lo, hi) in &windows {
                queries.add(lo, hi);
            }
            let m = BusyMeasures::new(queries, compute.iter().copied(), &comm);
            for &(lo, hi) in &windows {
                assert_eq!(m.compute_in(lo, hi), measure_in(&compute, lo, hi), "[{lo}, {hi}) in {compute:?}");
                assert_eq!(m.cm_in(lo, hi), measure_in(&cm, lo, hi), "[{lo}, {hi}) in {compute:?} {comm:?}");
            }
        }
    }
}
