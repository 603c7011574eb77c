//! The NVTX range open at each launch, by correlation id, for the kernels that arrive later: the
//! latest [`MAX_PENDING_LAUNCHES`] distinct correlations are held, the oldest giving way.
//!
//! A process's correlation ids increase, so while every new one is above the ones before, the
//! order of arrival is the order of the ids and the oldest is the first of the [`IdWindow`]: no
//! queue is kept. The first correlation below an earlier one (or one too far to sit in the window)
//! starts a queue of arrivals, built from the ids held then.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::id_window::IdWindow;
use crate::model::RangeId;

/// Launch correlations remembered while waiting for their GPU records (FIFO beyond this).
pub const MAX_PENDING_LAUNCHES: usize = 1 << 20;
/// Correlation ids per launch held in the window at most (other API calls take ids too).
const SPREAD: u64 = 4;

/// The window's slots when the last process ended: the next reserves as many and an eighth more
/// (processes of a job look alike), so its window grows without copying. Room not used is not
/// touched, so it takes no memory.
static LAST_SLOTS: AtomicUsize = AtomicUsize::new(0);

#[derive(Debug)]
pub struct LaunchRanges {
    ranges: IdWindow<RangeId>,
    /// Distinct correlations held, in arrival order, once the ids stopped increasing; None
    /// while they increase (then the window's order is the arrival order and nothing is far).
    arrivals: Option<VecDeque<u64>>,
    /// The last correlation that arrived, while they increase (0 before the first).
    last: u64,
    cap: usize,
}

impl Default for LaunchRanges {
    fn default() -> Self {
        LaunchRanges::with_cap(MAX_PENDING_LAUNCHES)
    }
}

impl LaunchRanges {
    fn with_cap(cap: usize) -> Self {
        let n = LAST_SLOTS.load(Ordering::Relaxed);
        LaunchRanges { ranges: IdWindow::with_room(SPREAD, n + n / 8), arrivals: None, last: 0, cap }
    }

    /// The process ended: the window's length is left for the next one, its memory is freed.
    pub fn finish(&mut self) {
        LAST_SLOTS.store(self.ranges.slots(), Ordering::Relaxed);
        *self = LaunchRanges { ranges: IdWindow::with_spread(SPREAD), arrivals: None, last: 0, cap: self.cap };
    }

    /// Launch `correlation` (not 0) happened inside range `r`.
    #[inline(always)]
    pub fn launch(&mut self, correlation: u64, r: RangeId) {
        // The usual case: a correlation above all the others, close after the last; once the cap
        // is reached (a long process), the oldest, the window's first, gives way.
        if self.arrivals.is_none() && correlation > self.last && self.ranges.push_after(correlation, r) {
            self.last = correlation;
            if self.ranges.len() > self.cap {
                self.evict_first();
            }
            return;
        }
        self.launch_any(correlation, r);
    }

    /// The oldest launch held gives way, while the ids increase (the window's first).
    #[inline]
    fn evict_first(&mut self) {
        if let Some(old) = self.ranges.first_in_window() {
            self.ranges.remove(old);
        }
    }

    /// [`LaunchRanges::launch`], any case.
    #[inline(never)]
    fn launch_any(&mut self, correlation: u64, r: RangeId) {
        let increasing = self.arrivals.is_none() && correlation > self.last;
        if self.ranges.insert(correlation, r).is_some() {
            return;
        }
        if increasing && !self.ranges.has_far() {
            self.last = correlation;
        } else {
            self.arrived_out_of_order(correlation);
        }
        if self.ranges.len() > self.cap {
            let oldest = match &mut self.arrivals {
                Some(a) => a.pop_front(),
                None => self.ranges.first_in_window(),
            };
            if let Some(old) = oldest {
                self.ranges.remove(old);
            }
        }
    }

    /// `correlation`, new, did not arrive above all the others or went far from the window.
    #[cold]
    fn arrived_out_of_order(&mut self, correlation: u64) {
        match &mut self.arrivals {
            Some(a) => a.push_back(correlation),
            None => {
                // Until now the ids increased: their order is the arrival order.
                let mut a: VecDeque<u64> =
                    self.ranges.ids_in_order().into_iter().filter(|&c| c != correlation).collect();
                a.push_back(correlation);
                self.arrivals = Some(a);
            }
        }
    }

    /// The range open when `correlation` was launched.
    #[inline]
    pub fn get(&self, correlation: u64) -> Option<RangeId> {
        self.ranges.get(correlation).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;
    use std::collections::HashMap;

    /// The hash map and queue of arrivals this replaces.
    #[derive(Default)]
    struct Reference {
        map: HashMap<u64, RangeId>,
        order: VecDeque<u64>,
    }

    impl Reference {
        fn launch(&mut self, c: u64, r: RangeId, cap: usize) {
            if self.map.insert(c, r).is_none() {
                self.order.push_back(c);
                if self.order.len() > cap {
                    let old = self.order.pop_front().unwrap();
                    self.map.remove(&old);
                }
            }
        }
    }

    #[test]
    fn keeps_what_a_map_and_a_queue_keep() {
        let mut rng = XorShift(0x2c1b_3c6d_5e7f_8a9b);
        let mut queued = 0;
        for round in 0..40 {
            let cap = 50 + rng.below(2000) as usize;
            let mut l = LaunchRanges::with_cap(cap);
            let mut want = Reference::default();
            let mut next = 1 + rng.below(1000);
            // Some rounds stay increasing; the others turn back or jump far at some point.
            let turn_at = if round % 3 == 0 { u64::MAX } else { rng.below(20_000) };
            for n in 0..20_000u64 {
                let c = match rng.below(100) {
                    0..=1 if n >= turn_at => next.saturating_sub(rng.below(3 * cap as u64)),
                    2 if n >= turn_at => next + (1 << 40) + rng.below(1 << 20),
                    3..=5 => next,
                    _ => {
                        next += 1 + rng.below(4);
                        next
                    }
                };
                let r = RangeId(rng.below(500));
                l.launch(c, r);
                want.launch(c, r, cap);
                if n % 97 == 0 || n + 1 == 20_000 {
                    for k in next.saturating_sub(4 * cap as u64)..next + 2 {
                        assert_eq!(l.get(k), want.map.get(&k).copied(), "round {round} step {n} id {k}");
                    }
                    for (&k, &v) in &want.map {
                        assert_eq!(l.get(k), Some(v), "round {round} step {n} id {k}");
                    }
                    assert_eq!(l.ranges.len(), want.map.len(), "round {round} step {n}");
                }
            }
            if round % 3 == 0 {
                assert!(l.arrivals.is_none(), "round {round}: increasing ids keep no queue");
            }
            queued += usize::from(l.arrivals.is_some());
        }
        assert!(queued >= 15, "ids turning back start the queue ({queued} rounds)");
    }
}
