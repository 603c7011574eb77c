//! The metrics file's fail-slow watch: a per-rank check of the step time, cheap enough for the
//! shim (no analysis: a few float operations per metrics interval, on the writer thread).
//!
//! Each interval's median step time (of the steps the tallies still hold) is compared with a baseline, the median of the last [`KEPT`]
//! intervals that were not slow (a median: one noisy interval does not move it). An interval at least [`RISE`] above the baseline is slow;
//! [`SUSTAIN`] slow intervals in a row (after [`WARMUP`] intervals) set the slowdown state, which
//! holds until an interval is back under the threshold; the baseline does not follow slow
//! intervals, so a shift that stays is not learnt as the new normal. The full change-point
//! analysis (which step, which rank, what grew) is `tprof diagnose`'s `slowdown` verdict.

/// Relative rise over the baseline that makes an interval slow.
pub const RISE: f64 = 0.10;
/// Slow intervals in a row that make a slowdown.
pub const SUSTAIN: u32 = 3;
/// Intervals (with steps) before a slowdown can be declared.
pub const WARMUP: u32 = 3;
/// Normal intervals the baseline is the median of.
pub const KEPT: usize = 8;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct StepWatch {
    /// Baseline step time, seconds (0 before the first interval with steps).
    pub baseline_s: f64,
    /// The last normal intervals' step times (a ring), and how many were kept.
    normal: [f64; KEPT],
    kept: usize,
    /// Last interval's step time over the baseline.
    pub ratio: f64,
    /// Intervals with steps seen.
    pub intervals: u32,
    /// Slow intervals in a row.
    pub slow_run: u32,
    pub slowdown: bool,
    /// Times the slowdown state was entered.
    pub slowdowns: u64,
}

impl StepWatch {
    pub const fn new() -> StepWatch {
        StepWatch {
            baseline_s: 0.0,
            normal: [0.0; KEPT],
            kept: 0,
            ratio: 0.0,
            intervals: 0,
            slow_run: 0,
            slowdown: false,
            slowdowns: 0,
        }
    }

    /// One interval's mean step time (call only for intervals in which steps completed).
    pub fn observe(&mut self, step_s: f64) {
        if !step_s.is_finite() || step_s <= 0.0 {
            return;
        }
        self.intervals += 1;
        if self.baseline_s <= 0.0 {
            self.normal_interval(step_s);
            self.ratio = 1.0;
            return;
        }
        self.ratio = step_s / self.baseline_s;
        if self.ratio >= 1.0 + RISE {
            self.slow_run += 1;
        } else {
            self.slow_run = 0;
            self.slowdown = false;
            self.normal_interval(step_s);
        }
        if !self.slowdown && self.slow_run >= SUSTAIN && self.intervals > WARMUP {
            self.slowdown = true;
            self.slowdowns += 1;
        }
    }

    fn normal_interval(&mut self, step_s: f64) {
        self.normal[self.kept % KEPT] = step_s;
        self.kept += 1;
        let n = self.kept.min(KEPT);
        let mut v = self.normal;
        v[..n].sort_by(f64::total_cmp);
        self.baseline_s = v[n / 2];
    }

    /// The metric families: (name, type, help, value).
    pub fn families(&self) -> [(&'static str, &'static str, &'static str, f64); 4] {
        [
            (
                "tprof_step_seconds_baseline",
                "gauge",
                "Baseline step time: median of the last 8 intervals that were not slow.",
                self.baseline_s,
            ),
            ("tprof_step_slowdown_ratio", "gauge", "Last interval's step time over the baseline.", self.ratio),
            (
                "tprof_step_slowdown",
                "gauge",
                "1 while the step time has stayed 10% or more above the baseline for 3 intervals (fail-slow).",
                if self.slowdown { 1.0 } else { 0.0 },
            ),
            ("tprof_step_slowdowns_total", "counter", "Times a slowdown began.", self.slowdowns as f64),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sustained_rise_is_a_slowdown_and_jitter_is_not() {
        let mut w = StepWatch::new();
        // Warm-up interval slower, then steady 10 ms with one 30 ms jitter interval.
        for s in [0.020, 0.010, 0.0101, 0.0099, 0.030, 0.010, 0.0102, 0.010] {
            w.observe(s);
            assert!(!w.slowdown, "{w:?}");
        }
        assert!((w.baseline_s - 0.010).abs() < 0.002, "{w:?}");
        // 20% slower from now on: the third slow interval sets the state, the baseline holds.
        let base = w.baseline_s;
        w.observe(0.012);
        w.observe(0.012);
        assert!(!w.slowdown);
        w.observe(0.012);
        assert!(w.slowdown && w.slowdowns == 1, "{w:?}");
        w.observe(0.012);
        assert!(w.slowdown && w.baseline_s == base && (w.ratio - 0.012 / base).abs() < 1e-12);
        // Back to normal: cleared.
        w.observe(0.010);
        assert!(!w.slowdown && w.slowdowns == 1);
        // Nonsense is ignored.
        w.observe(f64::NAN);
        w.observe(0.0);
        assert_eq!(w.intervals, 13);
    }
}
