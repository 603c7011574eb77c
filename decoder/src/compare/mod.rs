//! `tprof diff BASE NEW` (and `tprof report --baseline BASE`): what changed between two runs.
//!
//! Each run is decoded once into its [`Summary`] and [`Diagnosis`] (the same results `summary`
//! and `diagnose` print: nothing is recomputed here); [`compare`] then sets them side by side.
//! Everything is per step (and per rank where it is a sum over ranks), so runs of different
//! lengths and rank counts compare. Steps are the samples of the step-time statistics: the
//! Mann-Whitney U test and a bootstrap interval (on the means of 5-step blocks) say whether the
//! change is beyond run-to-run noise.

pub mod kernels;
pub mod sections;
pub mod stats;

use regex_lite::Regex;
use serde::Serialize;

use crate::clock_alignment::CollectiveEnds;
use crate::convert::ConvertOptions;
use crate::diagnose::collect::FactCollector;
use crate::diagnose::{diagnose_facts, DiagnoseOptions, Diagnosis};
use crate::input::Source;
use crate::model::Tee;
use crate::summary::{RankAnalysis, Summary};
use crate::units::millis;

/// A change of the median step time is significant when the test's p-value is below this ...
pub const MAX_P_VALUE: f64 = 0.01;
/// ... and the mean step time changed by at least this share of BASE's: smaller shifts are within
/// what two runs of one configuration differ by on a shared machine (measured: up to 2.3%).
pub const NOISE_FLOOR: f64 = 0.03;

/// One run, decoded.
pub struct RunProfile {
    pub summary: Summary,
    pub diagnosis: Diagnosis,
}

/// Decodes `sources` once (one pass, two sinks: the summary's and the diagnosis').
pub fn load(
    sources: &[Source],
    step_pattern: &Regex,
    opts: &DiagnoseOptions,
    convert: &ConvertOptions,
) -> (RunProfile, Vec<crate::error::InputError>) {
    let each = crate::convert::feed_each(
        sources,
        || Tee(RankAnalysis::new(step_pattern), FactCollector::new(step_pattern)),
        convert,
    );
    let notes: Vec<String> = each.notes.iter().map(|n| n.to_string()).collect();
    let with_colls = each.sinks.iter().filter(|s| !s.0.clock.ends.is_empty()).count();
    let plan = (with_colls > 1).then(|| {
        let ends: Vec<&CollectiveEnds> = each.sinks.iter().map(|s| &s.0.clock).collect();
        crate::clock_alignment::plan(&each.processes, &ends)
    });
    let mut ranks = Vec::new();
    let mut facts = Vec::new();
    let mut offsets = Vec::new();
    for (info, Tee(analysis, fc)) in each.processes.iter().zip(each.sinks) {
        ranks.extend(analysis.result);
        if let Some(f) = fc.result {
            offsets.push(plan.as_ref().map(|p| p.offset_of(&info.path)).unwrap_or(0));
            facts.push(f);
        }
    }
    let diagnosis = diagnose_facts(facts, offsets, opts, Vec::new());
    let summary = Summary::merge(ranks, plan, notes);
    (RunProfile { summary, diagnosis }, each.errors)
}

/// Step-time statistics of one run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepStats {
    /// Steps analysed (the first is left out as warm-up when there are at least 4).
    pub steps: usize,
    pub ranks: usize,
    pub median_ns: f64,
    pub p90_ns: f64,
    pub mean_ns: f64,
    pub steps_per_s: f64,
}

/// The step-time comparison.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepTimeDiff {
    pub base: StepStats,
    pub new: StepStats,
    /// `new - base` of the median, ns.
    pub median_change_ns: f64,
    /// `new / base - 1` of the median.
    pub median_change: f64,
    pub p90_change_ns: f64,
    /// `new - base` of the mean (the pace: steps per second), ns.
    pub mean_change_ns: f64,
    /// `new / base - 1` of the mean.
    pub mean_change: f64,
    /// Steps per block: the test and the interval are on the means of consecutive blocks of this
    /// many steps (a host that runs ahead makes single steps alternate long and short; block means
    /// are the pace, and closer to independent samples).
    pub block_steps: usize,
    /// `new / base - 1` of steps per second.
    pub throughput_change: f64,
    /// 95% bootstrap interval of the change of the median block mean, ns.
    pub ci95_ns: [f64; 2],
    /// Mann-Whitney U of the block means, two-sided.
    pub p_value: f64,
    /// Beyond run-to-run noise: p below 0.01, the interval excludes 0, and the mean changed by at
    /// least 3% of BASE's.
    pub significant: bool,
    pub statement: String,
}

/// One category of the efficiency breakdown in both runs.
#[derive(Debug, Clone, Serialize)]
pub struct CategoryDiff {
    pub category: &'static str,
    pub base_share: f64,
    pub new_share: f64,
    /// Time per step and rank, ns (share x mean step time).
    pub base_ns_per_step: f64,
    pub new_ns_per_step: f64,
    pub change_ns_per_step: f64,
}

/// The `tprof diff --json` document.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Comparison {
    pub headline: String,
    pub step_time: StepTimeDiff,
    pub breakdown: Vec<CategoryDiff>,
    pub kernels: kernels::KernelsDiff,
    pub collectives: Vec<sections::CollectiveDiff>,
    pub verdicts: sections::VerdictsDiff,
    pub counters: Vec<sections::CounterDiff>,
    pub notes: Vec<String>,
}

/// The step times a run's statistics are made of: per step, the mean over the ranks (a rank's
/// step time; the slowest rank's would add the ranks' jitter, not the job's pace).
pub fn step_samples(s: &Summary) -> Vec<f64> {
    let skip = usize::from(s.steps.len() >= 4);
    s.steps.iter().skip(skip).map(|st| st.mean_duration_ns as f64).collect()
}

fn step_stats(s: &Summary, samples: &[f64]) -> StepStats {
    let sorted = stats::sorted(samples);
    let mean = stats::mean(samples);
    StepStats {
        steps: samples.len(),
        ranks: s.ranks.len(),
        median_ns: stats::median(&sorted),
        p90_ns: stats::quantile(&sorted, 0.9),
        mean_ns: mean,
        steps_per_s: if mean > 0.0 { 1e9 / mean } else { 0.0 },
    }
}

fn step_time(base: &Summary, new: &Summary) -> StepTimeDiff {
    let (a, b) = (step_samples(base), step_samples(new));
    let (sa, sb) = (step_stats(base, &a), step_stats(new, &b));
    let mut d = StepTimeDiff { base: sa.clone(), new: sb.clone(), ..Default::default() };
    if a.is_empty() || b.is_empty() {
        d.p_value = 1.0;
        d.statement = format!(
            "no step time to compare: {} has no steps (mark them with NVTX ranges named step, or --step-marker)",
            if a.is_empty() { "BASE" } else { "NEW" }
        );
        return d;
    }
    d.median_change_ns = sb.median_ns - sa.median_ns;
    d.median_change = if sa.median_ns > 0.0 { sb.median_ns / sa.median_ns - 1.0 } else { 0.0 };
    d.p90_change_ns = sb.p90_ns - sa.p90_ns;
    d.mean_change_ns = sb.mean_ns - sa.mean_ns;
    d.mean_change = if sa.mean_ns > 0.0 { sb.mean_ns / sa.mean_ns - 1.0 } else { 0.0 };
    d.throughput_change = if sa.steps_per_s > 0.0 { sb.steps_per_s / sa.steps_per_s - 1.0 } else { 0.0 };
    d.block_steps = if a.len().min(b.len()) >= 3 * BLOCK_STEPS { BLOCK_STEPS } else { 1 };
    let (ba, bb) = (block_means(&a, d.block_steps), block_means(&b, d.block_steps));
    let (lo, hi) = stats::bootstrap_median_change(&ba, &bb, 400);
    d.ci95_ns = [lo, hi];
    d.p_value = stats::mann_whitney_p(&ba, &bb);
    d.significant = d.p_value < MAX_P_VALUE && (lo > 0.0 || hi < 0.0) && d.mean_change.abs() >= NOISE_FLOOR;
    let ms = |x: f64| x / 1e6;
    d.statement = format!(
        "mean step {:.2} -> {:.2} ms ({:+.1}%; median {:.2} -> {:.2} ms; 95% interval of the change {:+.2}..{:+.2} ms, Mann-Whitney p = {:.2e} over {} vs {} blocks of {} steps): {}",
        ms(sa.mean_ns),
        ms(sb.mean_ns),
        100.0 * d.mean_change,
        ms(sa.median_ns),
        ms(sb.median_ns),
        ms(lo),
        ms(hi),
        d.p_value,
        ba.len(),
        bb.len(),
        d.block_steps,
        if d.significant {
            "beyond run-to-run noise"
        } else if d.p_value < MAX_P_VALUE && d.mean_change.abs() < NOISE_FLOOR {
            "measurable but under 3%: within run-to-run noise"
        } else {
            "within run-to-run noise"
        }
    );
    d
}

/// Steps per block of the significance test.
pub const BLOCK_STEPS: usize = 5;

/// Means of consecutive blocks of `k` samples (a partial last block is left out).
fn block_means(v: &[f64], k: usize) -> Vec<f64> {
    v.chunks_exact(k.max(1)).map(stats::mean).collect()
}

/// What each category is called in the headline.
fn category_words(c: &str) -> &'static str {
    match c {
        "compute" => "compute",
        "comm" => "exposed comm",
        "wait" => "waiting for other ranks",
        "memcpy" => "copies",
        "data" => "data loading",
        "launch" => "launch overhead",
        "sync" => "synchronization",
        _ => "other idle",
    }
}

fn breakdown(base: &RunProfile, new: &RunProfile, st: &StepTimeDiff) -> Vec<CategoryDiff> {
    let (bb, nb) = (&base.diagnosis.efficiency.overall.breakdown, &new.diagnosis.efficiency.overall.breakdown);
    bb.parts()
        .iter()
        .zip(nb.parts().iter())
        .map(|((name, b), (_, n))| {
            let (bn, nn) =
                (b * mean_rank_step(&base.summary, st.base.mean_ns), n * mean_rank_step(&new.summary, st.new.mean_ns));
            CategoryDiff {
                category: name,
                base_share: *b,
                new_share: *n,
                base_ns_per_step: bn,
                new_ns_per_step: nn,
                change_ns_per_step: nn - bn,
            }
        })
        .collect()
}

/// A rank's mean step time over the analysed steps (mean over ranks), else `fallback`.
fn mean_rank_step(s: &Summary, fallback: f64) -> f64 {
    let skip = usize::from(s.steps.len() >= 4);
    let v: Vec<f64> = s.steps.iter().skip(skip).map(|st| st.mean_duration_ns as f64).collect();
    if v.is_empty() {
        fallback
    } else {
        stats::mean(&v)
    }
}

fn headline(st: &StepTimeDiff, parts: &[CategoryDiff], base: &Summary, new: &Summary) -> String {
    let ranks = if base.ranks.len() != new.ranks.len() {
        format!(" ({} -> {} ranks)", base.ranks.len(), new.ranks.len())
    } else {
        String::new()
    };
    if st.base.steps == 0 || st.new.steps == 0 {
        return format!("no step time to compare{ranks}: {}", st.statement);
    }
    if !st.significant {
        return format!(
            "no significant change per step{ranks}: mean {:.2} -> {:.2} ms ({:+.1}%, within run-to-run noise)",
            st.base.mean_ns / 1e6,
            st.new.mean_ns / 1e6,
            100.0 * st.mean_change
        );
    }
    let floor = (0.01 * st.base.mean_ns).max(10_000.0);
    let mut moved: Vec<&CategoryDiff> = parts.iter().filter(|c| c.change_ns_per_step.abs() >= floor).collect();
    moved.sort_by(|a, b| b.change_ns_per_step.abs().total_cmp(&a.change_ns_per_step.abs()));
    let why: Vec<String> = moved
        .iter()
        .take(3)
        .map(|c| {
            let sign = if c.change_ns_per_step < 0.0 { "-" } else { "+" };
            format!("{} {sign}{}/step", category_words(c.category), millis(c.change_ns_per_step.abs() as u64))
        })
        .collect();
    format!(
        "NEW is {:.0}% {} per step{ranks} (mean {:.2} -> {:.2} ms){}{}",
        100.0 * st.mean_change.abs(),
        if st.mean_change < 0.0 { "faster" } else { "slower" },
        st.base.mean_ns / 1e6,
        st.new.mean_ns / 1e6,
        if why.is_empty() { "" } else { ": " },
        why.join(", ")
    )
}

/// Compares two decoded runs.
pub fn compare(base: &RunProfile, new: &RunProfile) -> Comparison {
    let st = step_time(&base.summary, &new.summary);
    let parts = breakdown(base, new, &st);
    let per = |s: &Summary| (s.steps.len().max(1) * s.ranks.len().max(1)) as f64;
    let (bp, np) = (per(&base.summary), per(&new.summary));
    let mut notes = Vec::new();
    if base.summary.ranks.len() != new.summary.ranks.len() {
        notes.push(format!(
            "BASE has {} ranks, NEW {}: kernel and collective figures are per step and rank, step times per step",
            base.summary.ranks.len(),
            new.summary.ranks.len()
        ));
    }
    Comparison {
        headline: headline(&st, &parts, &base.summary, &new.summary),
        kernels: kernels::compare(&base.summary.kernels, bp, &new.summary.kernels, np),
        collectives: sections::collectives(&base.summary.collectives, bp, &new.summary.collectives, np),
        verdicts: sections::verdicts(&base.diagnosis, &new.diagnosis),
        counters: sections::counters(&base.summary.counters, &new.summary.counters),
        step_time: st,
        breakdown: parts,
        notes,
    }
}
