//! Counter samples (GPU metrics the shim samples from NVML: `gpu.util_pct`, `gpu.sm_active_pct`,
//! `gpu.tensor_active_pct`, `gpu.dram_bw_pct`, `gpu.nvlink_rx_MBps`, `gpu.power_w`, ...):
//! per-process series, time-weighted means over windows (steps), and the `counters` section of
//! `tprof summary`.
//!
//! A sample at `t_i` describes the interval since the previous sample of the same series
//! (`(t_{i-1}, t_i]`: NVML utilization and GPM metrics are rates over that interval), so the mean
//! over a window weights each sample by its interval's overlap with the window. A window shorter
//! than the sampling period takes the value of the sample covering it.
//!
//! For diagnoses: feed a [`CounterCollector`] (alone or in a [`crate::model::Tee`]), then ask its
//! [`CounterSet`] e.g. [`CounterSet::mean_tensor_activity`] over a step window.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::*;
use crate::steps::StepWindow;

/// Well-known counter names (written by the shim's `gpu_metrics`; defined in the format crate).
pub mod names {
    pub use tprof_format::counter_names::*;
    /// Display order of the summary table (the ones present are shown).
    pub const TABLE: [&str; 8] = [UTIL, SM_ACTIVE, TENSOR_ACTIVE, DRAM_BW, NVLINK_RX, NVLINK_TX, POWER, MEM_USED];
}

/// Key of one series: counter name and device (None = process-wide).
pub type SeriesKey = (Name, Option<u32>);

/// All counter series of one process, samples in time order.
#[derive(Debug, Clone, Default)]
pub struct CounterSet {
    pub series: BTreeMap<SeriesKey, Vec<(Ns, f64)>>,
}

impl CounterSet {
    pub fn push(&mut self, c: &CounterSample) {
        self.series.entry((c.name.clone(), c.device)).or_default().push((c.ts, c.value));
    }

    /// Sorts every series by time (inputs deliver in commit order; usually already sorted).
    pub fn sort(&mut self) {
        for v in self.series.values_mut() {
            if !v.windows(2).all(|w| w[0].0 <= w[1].0) {
                v.sort_by_key(|s| s.0);
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    /// Counter names present.
    pub fn names(&self) -> Vec<Name> {
        let mut v: Vec<Name> = self.series.keys().map(|k| k.0.clone()).collect();
        v.dedup();
        v
    }

    /// Time-weighted mean of `name` over `[lo, hi)`, averaged over the devices that have it.
    pub fn mean_in(&self, name: &str, lo: Ns, hi: Ns) -> Option<f64> {
        let means: Vec<f64> = self
            .series
            .iter()
            .filter(|((n, _), _)| &**n == name)
            .filter_map(|(_, s)| series_mean_in(s, lo, hi))
            .collect();
        (!means.is_empty()).then(|| means.iter().sum::<f64>() / means.len() as f64)
    }

    /// Mean of `name` over all samples (every device), with min and max and the sample count.
    pub fn stats(&self, name: &str) -> Option<CounterStat> {
        let mut st = CounterStat::default();
        for ((n, _), s) in &self.series {
            if &**n == name {
                for &(_, v) in s {
                    st.add(v);
                }
            }
        }
        (st.samples > 0).then_some(st)
    }

    /// Mean any-tensor activity (%) over a window; None without GPM samples.
    pub fn mean_tensor_activity(&self, lo: Ns, hi: Ns) -> Option<f64> {
        self.mean_in(names::TENSOR_ACTIVE, lo, hi)
    }

    /// Mean DRAM bandwidth utilization (%) over a window; None without GPM samples.
    pub fn mean_dram_bw(&self, lo: Ns, hi: Ns) -> Option<f64> {
        self.mean_in(names::DRAM_BW, lo, hi)
    }

    /// Mean SM activity (%) over a window; None without GPM samples.
    pub fn mean_sm_active(&self, lo: Ns, hi: Ns) -> Option<f64> {
        self.mean_in(names::SM_ACTIVE, lo, hi)
    }

    /// Per step window: the mean of every counter (steps with no coverage are left out).
    pub fn step_means(&self, steps: &[StepWindow]) -> Vec<StepCounters> {
        let names = self.names();
        steps
            .iter()
            .map(|w| StepCounters {
                index: w.index,
                means: names
                    .iter()
                    .filter_map(|n| self.mean_in(n, w.start, w.end).map(|m| (n.to_string(), m)))
                    .collect(),
            })
            .filter(|s| !s.means.is_empty())
            .collect()
    }

    /// Bins one series' samples into `bins` equal buckets over `[lo, hi)` (time-weighted mean per
    /// bucket; None where nothing covers it). For drawing.
    pub fn binned(&self, key: &SeriesKey, lo: Ns, hi: Ns, bins: usize) -> Vec<Option<f64>> {
        let Some(s) = self.series.get(key) else { return vec![None; bins] };
        binned(s, lo, hi, bins)
    }
}

/// Time-weighted mean of one series over `[lo, hi)`.
pub fn series_mean_in(s: &[(Ns, f64)], lo: Ns, hi: Ns) -> Option<f64> {
    if s.is_empty() || hi <= lo {
        return None;
    }
    // The first sample covers one typical interval before it.
    let first_span = if s.len() > 1 { s[1].0.saturating_sub(s[0].0) } else { 0 };
    let i = s.partition_point(|x| x.0 < lo);
    if i == s.len() {
        return None;
    }
    let mut acc = 0.0;
    let mut weight = 0u64;
    let mut prev = if i == 0 { s[0].0.saturating_sub(first_span) } else { s[i - 1].0 };
    for &(t, v) in &s[i..] {
        let a = prev.max(lo);
        let b = t.min(hi);
        if b > a {
            acc += v * (b - a) as f64;
            weight += b - a;
        }
        if t >= hi {
            break;
        }
        prev = t;
    }
    if weight == 0 {
        // No interval overlaps (a single sample, or a zero-length window): nearest sample at or after lo.
        return Some(s[i].1);
    }
    Some(acc / weight as f64)
}

/// See [`CounterSet::binned`].
pub fn binned(s: &[(Ns, f64)], lo: Ns, hi: Ns, bins: usize) -> Vec<Option<f64>> {
    if bins == 0 || hi <= lo {
        return Vec::new();
    }
    let width = (hi - lo).div_ceil(bins as u64).max(1);
    let mut acc = vec![(0.0f64, 0u64); bins];
    let first_span = if s.len() > 1 { s[1].0.saturating_sub(s[0].0) } else { 0 };
    let mut prev = s.first().map(|x| x.0.saturating_sub(first_span)).unwrap_or(0);
    for &(t, v) in s {
        let (a, b) = (prev.max(lo), t.min(hi));
        let mut x = a;
        while x < b {
            let bin = ((x - lo) / width) as usize;
            let end = (lo + (bin as u64 + 1) * width).min(b);
            if bin < bins {
                acc[bin].0 += v * (end - x) as f64;
                acc[bin].1 += end - x;
            }
            x = end;
        }
        prev = t;
    }
    acc.into_iter().map(|(a, w)| (w > 0).then(|| a / w as f64)).collect()
}

/// mean / min / max of samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CounterStat {
    pub samples: u64,
    pub mean: f64,
    pub min: f64,
    pub max: f64,
}

impl CounterStat {
    pub fn add(&mut self, v: f64) {
        if self.samples == 0 {
            self.min = v;
            self.max = v;
        }
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.mean += (v - self.mean) / (self.samples + 1) as f64;
        self.samples += 1;
    }
    pub fn merge(&mut self, o: &CounterStat) {
        if o.samples == 0 {
            return;
        }
        if self.samples == 0 {
            *self = *o;
            return;
        }
        let n = (self.samples + o.samples) as f64;
        self.mean = (self.mean * self.samples as f64 + o.mean * o.samples as f64) / n;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
        self.samples += o.samples;
    }
}

/// Mean of each counter over one step (of one rank, or across ranks).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepCounters {
    pub index: u64,
    /// counter name -> mean
    pub means: BTreeMap<String, f64>,
}

/// A [`TraceSink`] keeping every counter sample of the processes it is fed (one per process in
/// `feed_each`, or several: series are keyed per process).
#[derive(Debug, Default)]
pub struct CounterCollector {
    pub by_proc: BTreeMap<ProcId, CounterSet>,
}

impl TraceSink for CounterCollector {
    fn handle_counter(&mut self, c: &CounterSample) {
        self.by_proc.entry(c.proc).or_default().push(c);
    }
    fn handle_process_end(&mut self, p: ProcId) {
        if let Some(s) = self.by_proc.get_mut(&p) {
            s.sort();
        }
    }
}

/// One rank's counters as the summary keeps them.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RankCounters {
    /// counter name -> stats over the run.
    pub overall: BTreeMap<String, CounterStat>,
    /// Devices this rank sampled.
    pub devices: Vec<u32>,
    #[serde(skip)]
    pub steps: Vec<StepCounters>,
}

impl RankCounters {
    pub fn build(mut set: CounterSet, steps: &[StepWindow]) -> RankCounters {
        set.sort();
        let mut devices: Vec<u32> = set.series.keys().filter_map(|k| k.1).collect();
        devices.sort_unstable();
        devices.dedup();
        let overall = set.names().into_iter().filter_map(|n| set.stats(&n).map(|s| (n.to_string(), s))).collect();
        RankCounters { overall, devices, steps: set.step_means(steps) }
    }
}

/// Per counter and rank: the run's stats.
#[derive(Debug, Clone, Serialize)]
pub struct CounterRow {
    pub name: String,
    pub rank: Option<u32>,
    pub label: String,
    pub devices: Vec<u32>,
    #[serde(flatten)]
    pub stat: CounterStat,
}

/// Per step: each counter's mean over the ranks that sampled it.
#[derive(Debug, Clone, Serialize)]
pub struct StepCounterRow {
    pub index: u64,
    /// Ranks contributing.
    pub ranks: u32,
    pub means: BTreeMap<String, f64>,
}

/// The `counters` section of the summary.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CountersSummary {
    /// Counter names present (sorted).
    pub names: Vec<String>,
    pub per_rank: Vec<CounterRow>,
    pub steps: Vec<StepCounterRow>,
}

impl CountersSummary {
    /// Merges the ranks' counters; `ranks` are (rank, label, counters) in rank order.
    pub fn merge<'a>(ranks: impl Iterator<Item = (Option<u32>, &'a str, &'a RankCounters)>) -> CountersSummary {
        let mut s = CountersSummary::default();
        // step -> (ranks, counter -> (sum of means, ranks with it))
        type StepAcc = (u32, BTreeMap<String, (f64, u32)>);
        let mut steps: BTreeMap<u64, StepAcc> = BTreeMap::new();
        let mut names = std::collections::BTreeSet::new();
        for (rank, label, rc) in ranks {
            for (n, st) in &rc.overall {
                names.insert(n.clone());
                s.per_rank.push(CounterRow {
                    name: n.clone(),
                    rank,
                    label: label.to_string(),
                    devices: rc.devices.clone(),
                    stat: *st,
                });
            }
            for sc in &rc.steps {
                let e = steps.entry(sc.index).or_default();
                e.0 += 1;
                for (n, m) in &sc.means {
                    let x = e.1.entry(n.clone()).or_insert((0.0, 0));
                    x.0 += m;
                    x.1 += 1;
                }
            }
        }
        s.per_rank.sort_by(|a, b| a.name.cmp(&b.name).then(a.rank.cmp(&b.rank)));
        s.names = names.into_iter().collect();
        s.steps = steps
            .into_iter()
            .map(|(index, (ranks, m))| StepCounterRow {
                index,
                ranks,
                means: m.into_iter().map(|(n, (sum, k))| (n, sum / k.max(1) as f64)).collect(),
            })
            .collect();
        s
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// Run-wide mean of a counter over every rank that has it.
    pub fn overall(&self, name: &str) -> Option<CounterStat> {
        let mut st = CounterStat::default();
        for r in self.per_rank.iter().filter(|r| r.name == name) {
            st.merge(&r.stat);
        }
        (st.samples > 0).then_some(st)
    }
}

/// Short column title of a counter ("gpu.tensor_active_pct" -> "tensor %").
pub fn short_title(name: &str) -> String {
    let n = name.strip_prefix("gpu.").unwrap_or(name);
    if let Some(b) = n.strip_suffix("_pct") {
        format!("{} %", b.replace("_active", "").replace('_', " "))
    } else if let Some(b) = n.strip_suffix("_MBps") {
        format!("{} MiB/s", b.replace('_', " "))
    } else if let Some(b) = n.strip_suffix("_bytes") {
        format!("{} GiB", b.replace('_', " "))
    } else if let Some(b) = n.strip_suffix("_w") {
        format!("{b} W")
    } else if let Some(b) = n.strip_suffix("_mhz") {
        format!("{} MHz", b.replace('_', " "))
    } else if let Some(b) = n.strip_suffix("_c") {
        format!("{b} C")
    } else {
        n.to_string()
    }
}

/// A value formatted for its counter (bytes as GiB).
pub fn format_value(name: &str, v: f64) -> String {
    if name.ends_with("_bytes") {
        format!("{:.2}", v / (1u64 << 30) as f64)
    } else if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_weighted_means() {
        // Samples every 100: value 10 over (0,100], 30 over (100,200], 50 over (200,300].
        let s = vec![(100, 10.0), (200, 30.0), (300, 50.0)];
        assert_eq!(series_mean_in(&s, 100, 300), Some(40.0));
        assert_eq!(series_mean_in(&s, 0, 300), Some(30.0));
        assert_eq!(series_mean_in(&s, 150, 250), Some(40.0));
        // A window inside one interval takes that sample's value.
        assert_eq!(series_mean_in(&s, 120, 130), Some(30.0));
        assert_eq!(series_mean_in(&s, 400, 500), None);
        let b = binned(&s, 0, 300, 3);
        assert_eq!(b, vec![Some(10.0), Some(30.0), Some(50.0)]);
    }

    #[test]
    fn step_means_and_merge() {
        let mut set = CounterSet::default();
        let name: Name = "gpu.tensor_active_pct".into();
        for (i, v) in [(100u64, 20.0), (200, 40.0), (300, 60.0), (400, 80.0)] {
            set.push(&CounterSample { proc: ProcId(0), name: name.clone(), device: Some(0), ts: i, value: v });
        }
        let steps = vec![
            StepWindow { index: 0, name: "step".into(), start: 100, end: 200 },
            StepWindow { index: 1, name: "step".into(), start: 200, end: 400 },
        ];
        assert_eq!(set.mean_tensor_activity(200, 400), Some(70.0));
        let rc = RankCounters::build(set, &steps);
        assert_eq!(rc.devices, vec![0]);
        assert_eq!(rc.steps[0].means["gpu.tensor_active_pct"], 40.0);
        assert_eq!(rc.steps[1].means["gpu.tensor_active_pct"], 70.0);
        let st = rc.overall["gpu.tensor_active_pct"];
        assert_eq!((st.samples, st.mean, st.min, st.max), (4, 50.0, 20.0, 80.0));
        let sum = CountersSummary::merge([(Some(0), "r0", &rc), (Some(1), "r1", &rc)].into_iter());
        assert_eq!(sum.steps.len(), 2);
        assert_eq!(sum.steps[1].ranks, 2);
        assert_eq!(sum.overall("gpu.tensor_active_pct").unwrap().samples, 8);
        assert_eq!(short_title("gpu.tensor_active_pct"), "tensor %");
        assert_eq!(short_title("gpu.nvlink_rx_MBps"), "nvlink rx MiB/s");
    }
}
