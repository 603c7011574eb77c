//! The parts of a comparison besides step time and kernels: collectives per op and size bucket
//! (bus bandwidth), verdicts that appeared / disappeared / changed severity, and GPU counters.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::diagnose::{Diagnosis, CLEAN_THRESHOLD};
use crate::gpu_counters::CountersSummary;
use crate::summary::CollectiveRow;

/// One (op, size bucket) of collectives in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CollectiveFigures {
    pub nranks: u32,
    /// Calls per step and rank.
    pub calls_per_step: f64,
    /// Mean time of one call, ns.
    pub mean_ns: f64,
    pub busbw_gbps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CollectiveDiff {
    pub op: String,
    pub size_bucket: u64,
    pub base: Option<CollectiveFigures>,
    pub new: Option<CollectiveFigures>,
    /// `new / base - 1` of the bus bandwidth, when both have one.
    pub busbw_change: Option<f64>,
}

fn collective_figures(rows: &[CollectiveRow], per: f64) -> BTreeMap<(String, u64), CollectiveFigures> {
    // Rows are per (op, bucket, nranks); a run has one communicator size per op in practice: the
    // largest count wins the nranks, times and bandwidths are weighted by calls.
    // (nranks, calls, time, busbw x calls, calls of the row that gave nranks)
    type Acc = (u32, u64, u64, f64, u64);
    let mut acc: BTreeMap<(String, u64), Acc> = BTreeMap::new();
    for r in rows {
        let e = acc.entry((r.op.clone(), r.size_bucket)).or_default();
        if r.count > e.4 {
            e.0 = r.nranks;
            e.4 = r.count;
        }
        e.1 += r.count;
        e.2 += r.time_ns;
        e.3 += r.busbw_gbps * r.count as f64;
    }
    acc.into_iter()
        .map(|(k, (nranks, count, time, bw, _))| {
            let c = count.max(1) as f64;
            (
                k,
                CollectiveFigures {
                    nranks,
                    calls_per_step: count as f64 / per,
                    mean_ns: time as f64 / c,
                    busbw_gbps: bw / c,
                },
            )
        })
        .collect()
}

pub fn collectives(base: &[CollectiveRow], base_per: f64, new: &[CollectiveRow], new_per: f64) -> Vec<CollectiveDiff> {
    let b = collective_figures(base, base_per.max(1.0));
    let n = collective_figures(new, new_per.max(1.0));
    let keys: std::collections::BTreeSet<_> = b.keys().chain(n.keys()).cloned().collect();
    keys.into_iter()
        .map(|k| {
            let (bf, nf) = (b.get(&k).copied(), n.get(&k).copied());
            let busbw_change = match (bf, nf) {
                (Some(x), Some(y)) if x.busbw_gbps > 0.0 && y.busbw_gbps > 0.0 => {
                    Some(y.busbw_gbps / x.busbw_gbps - 1.0)
                }
                _ => None,
            };
            CollectiveDiff { op: k.0, size_bucket: k.1, base: bf, new: nf, busbw_change }
        })
        .collect()
}

/// A verdict kind in either run (the highest severity of the kind).
#[derive(Debug, Clone, Serialize)]
pub struct VerdictChange {
    pub kind: String,
    pub base_severity: Option<f64>,
    pub new_severity: Option<f64>,
    /// NEW's one-line summary (BASE's when it disappeared).
    pub summary: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct VerdictsDiff {
    /// Above the clean threshold in NEW, not in BASE.
    pub appeared: Vec<VerdictChange>,
    /// Above the clean threshold in BASE, not in NEW.
    pub disappeared: Vec<VerdictChange>,
    /// Above it in both, severity changed by at least 0.02.
    pub changed: Vec<VerdictChange>,
}

fn worst(d: &Diagnosis) -> BTreeMap<&'static str, (f64, String)> {
    let mut m: BTreeMap<&'static str, (f64, String)> = BTreeMap::new();
    for v in &d.verdicts {
        let e = m.entry(v.kind.id()).or_insert((v.severity, v.summary.clone()));
        if v.severity > e.0 {
            *e = (v.severity, v.summary.clone());
        }
    }
    m
}

pub fn verdicts(base: &Diagnosis, new: &Diagnosis) -> VerdictsDiff {
    let (b, n) = (worst(base), worst(new));
    let mut d = VerdictsDiff::default();
    let kinds: std::collections::BTreeSet<&str> = b.keys().chain(n.keys()).copied().collect();
    for k in kinds {
        let bs = b.get(k).filter(|x| x.0 >= CLEAN_THRESHOLD);
        let ns = n.get(k).filter(|x| x.0 >= CLEAN_THRESHOLD);
        let change = |summary: &str| VerdictChange {
            kind: k.to_string(),
            base_severity: b.get(k).map(|x| x.0),
            new_severity: n.get(k).map(|x| x.0),
            summary: summary.to_string(),
        };
        match (bs, ns) {
            (None, Some(x)) => d.appeared.push(change(&x.1)),
            (Some(x), None) => d.disappeared.push(change(&x.1)),
            (Some(x), Some(y)) if (y.0 - x.0).abs() >= 0.02 => d.changed.push(change(&y.1)),
            _ => {}
        }
    }
    d
}

/// One counter, its mean over the ranks' run means (and the highest value seen).
#[derive(Debug, Clone, Serialize)]
pub struct CounterDiff {
    pub name: String,
    pub base_mean: Option<f64>,
    pub new_mean: Option<f64>,
    pub base_max: Option<f64>,
    pub new_max: Option<f64>,
}

fn counter_means(c: &CountersSummary) -> BTreeMap<String, (f64, f64)> {
    let mut acc: BTreeMap<String, (f64, u32, f64)> = BTreeMap::new();
    for r in &c.per_rank {
        let e = acc.entry(r.name.clone()).or_insert((0.0, 0, f64::MIN));
        e.0 += r.stat.mean;
        e.1 += 1;
        e.2 = e.2.max(r.stat.max);
    }
    acc.into_iter().map(|(k, (s, n, mx))| (k, (s / n.max(1) as f64, mx))).collect()
}

pub fn counters(base: &CountersSummary, new: &CountersSummary) -> Vec<CounterDiff> {
    let (b, n) = (counter_means(base), counter_means(new));
    let names: std::collections::BTreeSet<&String> = b.keys().chain(n.keys()).collect();
    names
        .into_iter()
        .map(|k| CounterDiff {
            name: k.clone(),
            base_mean: b.get(k).map(|x| x.0),
            new_mean: n.get(k).map(|x| x.0),
            base_max: b.get(k).map(|x| x.1),
            new_max: n.get(k).map(|x| x.1),
        })
        .collect()
}
