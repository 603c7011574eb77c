//! One process's host samples as series, and reading them: a running total between two times
//! (linear between samples, held flat outside them), a gauge's largest or smallest value.

use std::collections::HashMap;

use super::events::{HostEntity, HostMetric, HostSample, HostScope};
use crate::model::Ns;

/// The shim writes every value at least this often (its full rounds), with a margin.
const FULL_ROUND_NS: Ns = 11_000_000_000;

pub type SeriesKey = (HostScope, u32, HostMetric);

/// The host samples of one ring file.
#[derive(Debug, Clone, Default)]
pub struct HostSeries {
    pub series: HashMap<SeriesKey, Vec<(Ns, u64)>>,
    /// (scope, id) -> (name, parent).
    pub entities: HashMap<(HostScope, u32), (String, u32)>,
    sorted: bool,
}

impl HostSeries {
    pub fn push(&mut self, s: &HostSample) {
        self.sorted = false;
        self.series.entry((s.scope, s.id, s.metric)).or_default().push((s.ts, s.value));
    }

    pub fn entity(&mut self, e: &HostEntity) {
        self.entities.insert((e.scope, e.id), (e.name.to_string(), e.parent));
    }

    /// Sorts every series by time (samples arrive in commit order).
    pub fn finish(&mut self) {
        for v in self.series.values_mut() {
            v.sort_by_key(|p| p.0);
            v.dedup_by_key(|p| p.0);
        }
        self.sorted = true;
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    pub fn get(&self, key: SeriesKey) -> &[(Ns, u64)] {
        self.series.get(&key).map(Vec::as_slice).unwrap_or(&[])
    }

    /// Ids of `scope` that have samples of `metric`.
    pub fn ids(&self, scope: HostScope, metric: HostMetric) -> Vec<u32> {
        let mut ids: Vec<u32> = self.series.keys().filter(|k| k.0 == scope && k.2 == metric).map(|k| k.1).collect();
        ids.sort_unstable();
        ids
    }

    pub fn name(&self, scope: HostScope, id: u32) -> Option<&str> {
        self.entities.get(&(scope, id)).map(|e| e.0.as_str())
    }

    /// How much a running total grew over `[a, b]`.
    pub fn delta(&self, key: SeriesKey, a: Ns, b: Ns) -> f64 {
        let v = self.get(key);
        (value_at(v, b) - value_at(v, a)).max(0.0)
    }

    /// How much the sum of `metrics` grew over `[a, b]`.
    pub fn delta_sum(&self, scope: HostScope, id: u32, metrics: &[HostMetric], a: Ns, b: Ns) -> f64 {
        metrics.iter().map(|&m| self.delta((scope, id, m), a, b)).sum()
    }

    /// The largest value of a gauge in `[a, b]` (the last one before `a` counts).
    pub fn max_in(&self, key: SeriesKey, a: Ns, b: Ns) -> Option<u64> {
        in_window(self.get(key), a, b).map(|(_, v)| *v).max()
    }

    pub fn min_in(&self, key: SeriesKey, a: Ns, b: Ns) -> Option<u64> {
        in_window(self.get(key), a, b).map(|(_, v)| *v).min()
    }

    /// Whether the series has samples that cover some of `[a, b]`.
    pub fn covers(&self, key: SeriesKey, a: Ns, b: Ns) -> bool {
        let v = self.get(key);
        matches!((v.first(), v.last()), (Some(f), Some(l)) if f.0 < b && l.0 > a)
    }

    /// Whether an entity lived in `[a, b]`: sampled before `b`, and sampled after `a` or within a
    /// full-round interval (the sampler writes every value at least every 10 s) before it.
    pub fn alive(&self, scope: HostScope, id: u32, a: Ns, b: Ns) -> bool {
        let mut first = Ns::MAX;
        let mut last = 0;
        for (k, v) in &self.series {
            if k.0 == scope && k.1 == id {
                first = first.min(v.first().map_or(Ns::MAX, |p| p.0));
                last = last.max(v.last().map_or(0, |p| p.0));
            }
        }
        first < b && last.saturating_add(FULL_ROUND_NS) > a
    }

    /// The first and last sample times over every series.
    pub fn span(&self) -> Option<(Ns, Ns)> {
        let first = self.series.values().filter_map(|v| v.first()).map(|p| p.0).min()?;
        let last = self.series.values().filter_map(|v| v.last()).map(|p| p.0).max()?;
        Some((first, last))
    }
}

fn in_window(v: &[(Ns, u64)], a: Ns, b: Ns) -> impl Iterator<Item = &(Ns, u64)> {
    let start = v.partition_point(|p| p.0 <= a).saturating_sub(1);
    v[start.min(v.len())..].iter().take_while(move |p| p.0 <= b)
}

/// A running total at `t`: linear between samples, the first / last value outside them.
pub fn value_at(v: &[(Ns, u64)], t: Ns) -> f64 {
    let Some(first) = v.first() else { return 0.0 };
    if t <= first.0 {
        return first.1 as f64;
    }
    let i = v.partition_point(|p| p.0 <= t);
    if i >= v.len() {
        return v[v.len() - 1].1 as f64;
    }
    let (t0, v0) = v[i - 1];
    let (t1, v1) = v[i];
    let f = (t - t0) as f64 / (t1 - t0).max(1) as f64;
    v0 as f64 + f * (v1 as f64 - v0 as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_interpolate_and_hold() {
        let v = [(100, 0), (200, 50), (300, 150)];
        assert_eq!(value_at(&v, 50), 0.0);
        assert_eq!(value_at(&v, 150), 25.0);
        assert_eq!(value_at(&v, 250), 100.0);
        assert_eq!(value_at(&v, 400), 150.0);
        let mut s = HostSeries::default();
        for (ts, value) in v {
            s.push(&HostSample {
                proc: Default::default(),
                scope: HostScope::Process,
                id: 7,
                metric: HostMetric::CpuUserNs,
                ts,
                value,
            });
        }
        s.finish();
        assert_eq!(s.delta((HostScope::Process, 7, HostMetric::CpuUserNs), 150, 250), 75.0);
        assert_eq!(s.max_in((HostScope::Process, 7, HostMetric::CpuUserNs), 150, 250), Some(50));
        assert_eq!(s.min_in((HostScope::Process, 7, HostMetric::CpuUserNs), 150, 250), Some(0));
        assert!(s.covers((HostScope::Process, 7, HostMetric::CpuUserNs), 250, 900));
        assert!(!s.covers((HostScope::Process, 7, HostMetric::CpuUserNs), 301, 900));
    }
}
