//! Converting a file's ticks to CLOCK_MONOTONIC and CLOCK_REALTIME nanoseconds.

use crate::header::{ClockSource, FileHeader};

/// The segment of the last [`TickConverter::to_mono_ns_near`] conversion: ticks in `lo..hi` map
/// through `(ta, ma)` at `slope`.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonoCursor {
    valid: bool,
    lo: u64,
    hi: u64,
    /// The segment's start pair, as floats (converted once per segment, not per conversion).
    ta: f64,
    ma: f64,
    slope: f64,
}

/// Piecewise-linear map from ticks to monotonic ns, built from (ticks, mono_ns, wall_ns) pairs.
#[derive(Debug, Clone)]
pub struct TickConverter {
    /// Sorted by ticks, strictly increasing in ticks.
    points: Vec<(u64, u64, u64)>,
    /// Nanoseconds per tick used outside the pairs (or with a single pair).
    default_ns_per_tick: f64,
    identity: bool,
}

impl TickConverter {
    /// Builds the converter from the header's start pair and the file's ClockSync pairs.
    pub fn new(header: &FileHeader, mut syncs: Vec<(u64, u64, u64)>) -> TickConverter {
        let identity = header.clock_source == ClockSource::Monotonic;
        if header.start_mono_ns != 0 || header.start_ticks != 0 {
            syncs.push((header.start_ticks, header.start_mono_ns, header.start_wall_ns));
        }
        syncs.sort_unstable();
        syncs.dedup_by_key(|p| p.0);
        // Drop pairs that go backwards in monotonic time (clock garbage).
        let mut points: Vec<(u64, u64, u64)> = Vec::with_capacity(syncs.len());
        for p in syncs {
            if points.last().is_none_or(|l| p.1 >= l.1) {
                points.push(p);
            }
        }
        let default_ns_per_tick = if header.ticks_per_sec > 0.0 && header.ticks_per_sec.is_finite() {
            1e9 / header.ticks_per_sec
        } else {
            1.0
        };
        TickConverter { points, default_ns_per_tick, identity }
    }

    /// Identity conversion (ticks are monotonic ns) with a wall offset of 0.
    pub fn identity() -> TickConverter {
        TickConverter { points: Vec::new(), default_ns_per_tick: 1.0, identity: true }
    }

    pub fn pairs(&self) -> &[(u64, u64, u64)] {
        &self.points
    }

    fn segment(&self, ticks: u64) -> Option<(usize, usize)> {
        let n = self.points.len();
        if n < 2 {
            return None;
        }
        let i = self.points.partition_point(|p| p.0 <= ticks);
        let (a, b) = if i == 0 {
            (0, 1)
        } else if i >= n {
            (n - 2, n - 1)
        } else {
            (i - 1, i)
        };
        Some((a, b))
    }

    /// [`TickConverter::to_mono_ns`] for ticks that arrive nearly in order (one file's records):
    /// `cursor` remembers the last segment, so most conversions skip the search. Same results.
    #[inline]
    pub fn to_mono_ns_near(&self, ticks: u64, cursor: &mut MonoCursor) -> u64 {
        if self.identity {
            return ticks;
        }
        if !(cursor.valid && ticks >= cursor.lo && ticks < cursor.hi) {
            if let Some(ns) = self.seek(ticks, cursor) {
                return ns;
            }
        }
        (cursor.ma + (ticks as f64 - cursor.ta) * cursor.slope).max(0.0) as u64
    }

    /// Points `cursor` at the segment of `ticks`; or, without segments, converts `ticks` itself.
    #[inline(never)]
    fn seek(&self, ticks: u64, cursor: &mut MonoCursor) -> Option<u64> {
        if self.identity || self.points.len() < 2 {
            return Some(self.to_mono_ns(ticks));
        }
        let (a, b) = self.segment(ticks).unwrap_or((0, 1));
        let i = self.points.partition_point(|p| p.0 <= ticks);
        let (ta, ma, _) = self.points[a];
        let (tb, mb, _) = self.points[b];
        *cursor = MonoCursor {
            valid: true,
            lo: if i == 0 { 0 } else { self.points[i - 1].0 },
            hi: self.points.get(i).map_or(u64::MAX, |p| p.0),
            ta: ta as f64,
            ma: ma as f64,
            slope: self.slope(ta, ma, tb, mb),
        };
        None
    }

    #[inline]
    fn slope(&self, ta: u64, ma: u64, tb: u64, mb: u64) -> f64 {
        let slope = (mb as f64 - ma as f64) / (tb as f64 - ta as f64);
        if slope.is_finite() && slope > 0.0 {
            slope
        } else {
            self.default_ns_per_tick
        }
    }

    /// Ticks -> CLOCK_MONOTONIC ns.
    pub fn to_mono_ns(&self, ticks: u64) -> u64 {
        if self.identity {
            return ticks;
        }
        match (self.segment(ticks), self.points.first()) {
            (Some((a, b)), _) => {
                let (ta, ma, _) = self.points[a];
                let (tb, mb, _) = self.points[b];
                let slope = self.slope(ta, ma, tb, mb);
                (ma as f64 + (ticks as f64 - ta as f64) * slope).max(0.0) as u64
            }
            (None, Some(&(t0, m0, _))) => {
                (m0 as f64 + (ticks as f64 - t0 as f64) * self.default_ns_per_tick).max(0.0) as u64
            }
            (None, None) => (ticks as f64 * self.default_ns_per_tick) as u64,
        }
    }

    /// Offset wall - monotonic (ns) nearest to `ticks`.
    pub fn wall_offset_ns(&self, ticks: u64) -> i64 {
        if self.points.is_empty() {
            return 0;
        }
        let i = self.points.partition_point(|p| p.0 <= ticks).min(self.points.len() - 1);
        let (_, m, w) = self.points[i];
        w as i64 - m as i64
    }

    /// Ticks -> CLOCK_REALTIME ns.
    pub fn to_wall_ns(&self, ticks: u64) -> u64 {
        (self.to_mono_ns(ticks) as i64 + self.wall_offset_ns(ticks)).max(0) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tsc_header() -> FileHeader {
        FileHeader { clock_source: ClockSource::Tsc, ticks_per_sec: 2e9, ..FileHeader::default() }
    }

    #[test]
    fn interpolates_and_extrapolates() {
        // 2 ticks per ns, with a slightly different rate in the second segment.
        let c =
            TickConverter::new(&tsc_header(), vec![(1000, 500, 10_500), (3000, 1500, 11_500), (5000, 2502, 12_502)]);
        assert_eq!(c.to_mono_ns(2000), 1000);
        assert_eq!(c.to_mono_ns(4000), 2001);
        assert_eq!(c.to_mono_ns(7000), 3504);
        assert_eq!(c.to_mono_ns(0), 0);
        assert_eq!(c.to_wall_ns(2000), 11_000);
        let mut cur = MonoCursor::default();
        for t in [2000, 4000, 7000, 0, 1000, 2999, 3000, 3001, 5000, 4999, u64::MAX, 1] {
            assert_eq!(c.to_mono_ns_near(t, &mut cur), c.to_mono_ns(t), "{t}");
        }
    }

    #[test]
    fn monotonic_source_is_identity() {
        let h = FileHeader { clock_source: ClockSource::Monotonic, ..FileHeader::default() };
        let c = TickConverter::new(&h, vec![(10, 10, 1_000_010)]);
        assert_eq!(c.to_mono_ns(12345), 12345);
        assert_eq!(c.to_wall_ns(12345), 1_012_345);
    }

    #[test]
    fn garbage_pairs_do_not_break_conversion() {
        let c = TickConverter::new(&tsc_header(), vec![(1000, 500, 0), (2000, 100, 0), (2000, 9, 0)]);
        let a = c.to_mono_ns(1000);
        let b = c.to_mono_ns(3000);
        assert!(b >= a);
    }
}
