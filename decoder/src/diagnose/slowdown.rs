//! `slowdown` (fail-slow): the step where the job's step time shifted up and stayed there, the
//! ranks that caused it and what grew in their breakdown.
//!
//! Change-point detection on the job's step times (per step, the slowest rank's GPU step window):
//! the step times are made robust (median / MAD scores clipped to +-3, so one-off jitter weighs
//! little), the change point is where their CUSUM is furthest from zero, and it is kept only when
//! both sides have at least [`MIN_SEGMENT`] steps, the median after it is at least [`MIN_SHIFT`]
//! above the median before, and the shift is sustained: most steps after it are above the midway
//! point, most before it below. The ranks named are those whose own time (step time less waiting
//! for others) grew by at least half the shift; without such a rank, every rank that slowed.
//!
//! Severity: the shift times the steps after it, over the mean step (rank-time: every rank waits
//! for the slow one), as a fraction of the job's wall time.

use std::collections::BTreeMap;

use serde::Serialize;

use super::facts::{RankFacts, Split, StepFacts};
use super::job::Job;
use super::{rank_list, Verdict, VerdictKind};
use crate::model::Ns;
use crate::units::millis;

/// Fewest steps on each side of a change point.
pub const MIN_SEGMENT: usize = 30;
/// Smallest relative rise of the median step time that is a slowdown.
pub const MIN_SHIFT: f64 = 0.10;
/// Share of steps after (before) the change point that must lie above (below) the midway point.
const SUSTAINED: f64 = 0.7;

/// Before and after the change point, per step.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct BeforeAfter {
    pub after_ns_per_step: Ns,
    pub before_ns_per_step: Ns,
}

/// A GPU counter's mean before and after the change point (on the ranks named).
#[derive(Debug, Clone, Default, Serialize)]
pub struct CounterShift {
    pub after: f64,
    pub before: f64,
    pub name: String,
}

/// The evidence of `slowdown`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SlowdownEvidence {
    /// Median step time after the change point.
    pub after_ns_per_step: Ns,
    /// Seconds from the first step's start to the step where it began.
    pub at_s: f64,
    pub before_ns_per_step: Ns,
    /// The breakdown category that grew most on the ranks named.
    pub category: &'static str,
    /// GPU clocks / temperature / power of the ranks named, when sampled.
    pub counters: Vec<CounterShift>,
    /// The ranks named: their time per step by category, median before and after.
    pub per_step_by_category: BTreeMap<&'static str, BeforeAfter>,
    /// `after / before - 1`.
    pub shift: f64,
    /// The first slow step.
    pub step: u64,
    pub steps_after: usize,
    pub text: String,
}

/// A change point in a series: (index of the first changed sample, median before, median after).
pub fn change_point(x: &[f64], min_segment: usize) -> Option<(usize, f64, f64)> {
    let n = x.len();
    if n < 2 * min_segment || min_segment == 0 {
        return None;
    }
    let med = median_f(x);
    let mad = median_f(&x.iter().map(|v| (v - med).abs()).collect::<Vec<_>>()) * 1.4826;
    let scale = mad.max(0.01 * med.abs()).max(f64::MIN_POSITIVE);
    let z: Vec<f64> = x.iter().map(|v| ((v - med) / scale).clamp(-3.0, 3.0)).collect();
    let mean = z.iter().sum::<f64>() / n as f64;
    let mut s = 0.0f64;
    let mut best = (0usize, 0.0f64);
    for (k, zk) in z.iter().enumerate().take(n - min_segment) {
        if k >= min_segment && s.abs() > best.1 {
            best = (k, s.abs());
        }
        s += zk - mean;
    }
    if best.0 == 0 {
        return None;
    }
    let k = best.0;
    Some((k, median_f(&x[..k]), median_f(&x[k..])))
}

/// Whether the change at `k` is sustained: after it, most samples lie above the midway point
/// between the medians; before it, most below.
pub fn sustained(x: &[f64], k: usize, before: f64, after: f64) -> bool {
    let mid = (before + after) / 2.0;
    let above = x[k..].iter().filter(|v| **v > mid).count() as f64 / (x.len() - k) as f64;
    let below = x[..k].iter().filter(|v| **v <= mid).count() as f64 / k as f64;
    above >= SUSTAINED && below >= SUSTAINED
}

fn median_f(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    if s.is_empty() {
        0.0
    } else {
        s[s.len() / 2]
    }
}

fn step_ns(s: &StepFacts) -> Ns {
    let w = s.gpu_window_ns();
    if w > 0 {
        w
    } else {
        s.host_end.saturating_sub(s.host_start)
    }
}

type Category = (&'static str, fn(&Split) -> Ns);
const CATEGORIES: [Category; 8] = [
    ("compute", |s| s.compute_ns),
    ("comm", |s| s.comm_ns),
    ("wait", |s| s.wait_ns),
    ("memcpy", |s| s.memcpy_ns),
    ("data", |s| s.data_ns),
    ("launch", |s| s.launch_ns),
    ("sync", |s| s.sync_ns),
    ("idle", |s| s.idle_ns),
];

/// Median of `f` over a rank's steps with index below / from `at`.
fn before_after(r: &RankFacts, at: u64, f: impl Fn(&StepFacts) -> Ns) -> BeforeAfter {
    let pick = |after: bool| {
        let v: Vec<f64> = r.steps.iter().filter(|s| (s.index >= at) == after).map(|s| f(s) as f64).collect();
        median_f(&v) as Ns
    };
    BeforeAfter { before_ns_per_step: pick(false), after_ns_per_step: pick(true) }
}

pub fn find(job: &Job) -> Option<Verdict> {
    // The job's step times: per step index, the slowest rank (the first step is warm-up).
    let mut by_step: BTreeMap<u64, (Ns, Ns)> = BTreeMap::new();
    for r in &job.ranks {
        for s in &r.steps {
            let e = by_step.entry(s.index).or_insert((0, s.host_start));
            e.0 = e.0.max(step_ns(s));
        }
    }
    let skip = usize::from(by_step.len() >= 4);
    let steps: Vec<(u64, Ns, Ns)> = by_step.into_iter().skip(skip).map(|(i, (d, t))| (i, d, t)).collect();
    let x: Vec<f64> = steps.iter().map(|s| s.1 as f64).collect();
    let (k, before, after) = change_point(&x, MIN_SEGMENT)?;
    if before <= 0.0 || after / before - 1.0 < MIN_SHIFT || !sustained(&x, k, before, after) {
        return None;
    }
    let (at_step, t0) = (steps[k].0, steps[0].2);
    let shift_ns = after - before;
    // Who: own time (step less waiting) grew by at least half the shift.
    let own = |s: &StepFacts| step_ns(s).saturating_sub(s.split.wait_ns);
    let grew: Vec<(usize, f64)> = job
        .ranks
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let ba = before_after(r, at_step, own);
            (i, ba.after_ns_per_step as f64 - ba.before_ns_per_step as f64)
        })
        .collect();
    let mut who: Vec<usize> = grew.iter().filter(|(_, g)| *g >= 0.5 * shift_ns).map(|(i, _)| *i).collect();
    if who.is_empty() {
        who = (0..job.ranks.len()).collect();
    }
    // What grew on them.
    let mut per_cat: BTreeMap<&'static str, BeforeAfter> = BTreeMap::new();
    for (name, f) in CATEGORIES {
        let mut acc = BeforeAfter::default();
        for &i in &who {
            let ba = before_after(&job.ranks[i], at_step, |s| f(&s.split));
            acc.before_ns_per_step += ba.before_ns_per_step / who.len() as Ns;
            acc.after_ns_per_step += ba.after_ns_per_step / who.len() as Ns;
        }
        per_cat.insert(name, acc);
    }
    let (category, grown) = per_cat
        .iter()
        .map(|(n, ba)| (*n, ba.after_ns_per_step as i64 - ba.before_ns_per_step as i64))
        .max_by_key(|(_, g)| *g)
        .unwrap_or(("idle", 0));
    let start_ns = steps[k].2;
    let counters = counter_shifts(job, &who, start_ns);
    let ranks = job.rank_ids(who.iter().copied());
    let steps_after = x.len() - k;
    let lost = shift_ns * steps_after as f64 * job.ranks.len() as f64;
    let mut v = Verdict::new(VerdictKind::Slowdown, lost / job.total_ns().max(1) as f64);
    v.steps = vec![at_step];
    v.ranks = ranks.clone();
    let shift = after / before - 1.0;
    let at_s = start_ns.saturating_sub(t0) as f64 / 1e9;
    let what = match category {
        "compute" => "their kernels took longer (GPU clocks, thermal throttling, a degraded GPU, or more work)",
        "data" => "their GPU waited longer for input at step starts (input pipeline, host contention)",
        "launch" => "their host launched work more slowly (CPU contention)",
        "sync" => "they lost more time in host synchronizations",
        "comm" | "wait" => "communication took longer (the network, or waiting for another rank)",
        "memcpy" => "their copies took longer",
        _ => "their GPU idled longer for no recorded reason",
    };
    let counter_text: Vec<String> = counters
        .iter()
        .filter(|c| c.before != 0.0 && ((c.after - c.before) / c.before).abs() >= 0.03)
        .map(|c| format!("{} {:.0} -> {:.0}", c.name, c.before, c.after))
        .collect();
    v.summary = format!(
        "the job slowed down by {:.0}% from step {at_step} ({at_s:.1} s in) on: {} {}",
        100.0 * shift,
        rank_list(&ranks),
        if ranks.len() == job.ranks.len() && job.ranks.len() > 1 { "(every rank)" } else { "is the cause" }
    );
    v.evidence = super::evidence::Evidence::Slowdown(SlowdownEvidence {
        after_ns_per_step: after as Ns,
        at_s,
        before_ns_per_step: before as Ns,
        category,
        counters,
        per_step_by_category: per_cat,
        shift,
        step: at_step,
        steps_after,
        text: format!(
            "From step {at_step} on ({steps_after} steps), the median step took {} instead of {} (+{:.0}%, sustained, not one-off jitter); on {} {category} grew by {}/step: {what}{}.",
            millis(after as Ns),
            millis(before as Ns),
            100.0 * shift,
            rank_list(&ranks),
            millis(grown.max(0) as Ns),
            if counter_text.is_empty() { String::new() } else { format!("; counters: {}", counter_text.join(", ")) }
        ),
    });
    v.advice = vec![
        format!("Look at {} around {at_s:.0} s into the run: GPU clocks, temperature and power (nvidia-smi -q -d PERFORMANCE shows throttle reasons), ECC / Xid errors in the kernel log, other processes on its host.", rank_list(&ranks)),
        "If the hardware is degraded, drain the node and restart from the last checkpoint without it.".into(),
        "Compare a profile from before and after with tprof diff to see what changed.".into(),
    ];
    Some(v)
}

/// SM clock, temperature and power of ranks `who`, mean before and after `at` (when sampled).
fn counter_shifts(job: &Job, who: &[usize], at: Ns) -> Vec<CounterShift> {
    // name -> ((sum, samples) before, (sum, samples) after)
    type SumCount = (f64, u32);
    let mut acc: BTreeMap<&str, (SumCount, SumCount)> = BTreeMap::new();
    for &i in who {
        for h in &job.ranks[i].health {
            let e = acc.entry(h.name).or_default();
            let side = if h.ts >= at { &mut e.1 } else { &mut e.0 };
            side.0 += h.value;
            side.1 += 1;
        }
    }
    acc.into_iter()
        .filter(|(_, (b, a))| b.1 > 0 && a.1 > 0)
        .map(|(name, (b, a))| CounterShift {
            name: name.to_string(),
            before: b.0 / b.1 as f64,
            after: a.0 / a.1 as f64,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(n: usize, at: usize, base: f64, rise: f64, jitter: &[(usize, f64)]) -> Vec<f64> {
        let mut v: Vec<f64> = (0..n)
            .map(|i| base * (1.0 + 0.02 * ((i * 7919 % 13) as f64 / 13.0 - 0.5)) + if i >= at { rise } else { 0.0 })
            .collect();
        for &(i, x) in jitter {
            v[i] += x;
        }
        v
    }

    #[test]
    fn finds_a_sustained_step_change() {
        let x = series(1000, 300, 10.0, 2.0, &[(50, 30.0), (700, 40.0)]);
        let (k, b, a) = change_point(&x, MIN_SEGMENT).unwrap();
        assert!((298..=302).contains(&k), "{k}");
        assert!((b - 10.0).abs() < 0.2 && (a - 12.0).abs() < 0.2, "{b} {a}");
        assert!(sustained(&x, k, b, a));
    }

    #[test]
    fn one_off_jitter_is_no_change() {
        // Spikes of 5x for 5 steps, and a 3-step burst: the medians do not move.
        let x = series(1000, 1000, 10.0, 0.0, &[(100, 40.0), (101, 40.0), (102, 40.0), (500, 50.0), (900, 45.0)]);
        match change_point(&x, MIN_SEGMENT) {
            None => {}
            Some((k, b, a)) => assert!(a / b - 1.0 < MIN_SHIFT || !sustained(&x, k, b, a), "{k} {b} {a}"),
        }
    }

    #[test]
    fn a_short_burst_is_not_sustained() {
        // 40 slow steps in the middle: the medians of the two sides hardly differ.
        let x = series(600, 600, 10.0, 0.0, &(200..240).map(|i| (i, 3.0)).collect::<Vec<_>>());
        if let Some((k, b, a)) = change_point(&x, MIN_SEGMENT) {
            assert!(a / b - 1.0 < MIN_SHIFT || !sustained(&x, k, b, a), "{k} {b} {a}");
        }
    }
}
