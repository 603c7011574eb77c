//! `data_loading`: the GPU idles at step starts while the host thread is outside CUDA (the input
//! pipeline, or host work before the step's first launch).
//!
//! Severity: when every rank idles for data, the largest rank's share (the slowest pipeline gates
//! the job); otherwise the loss common to the ranks (the lower quartile of the ranks' data-idle
//! shares; a single slow rank is a straggler, reported there).

use super::evidence::{DataLoadingEvidence, Evidence, RankShare};
use super::job::Job;
use super::{rank_list, step_list, Verdict, VerdictKind};
use crate::units::{millis, share};

pub fn find(job: &Job) -> Option<Verdict> {
    let mut shares: Vec<(f64, usize)> = job
        .ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.gpu_times && r.window_ns() > 0)
        .map(|(i, r)| (r.split.data_ns as f64 / r.window_ns() as f64, i))
        .collect();
    if shares.is_empty() {
        return None;
    }
    shares.sort_by(|a, b| a.0.total_cmp(&b.0));
    // A job-wide input problem costs what the slowest input pipeline costs (everyone waits for it at
    // the collectives); a single slow rank is a straggler, so otherwise count what the ranks share.
    let severity =
        super::launch_bound::job_level_share(job, |r| r.split.data_ns).unwrap_or(shares[(shares.len() - 1) / 4].0);
    let max = shares.last().map(|s| s.0).unwrap_or(0.0);
    // Every rank when the problem is job-wide; else the ranks with at least half the worst share.
    let job_wide = super::launch_bound::job_level_share(job, |r| r.split.data_ns).is_some();
    let cutoff = if job_wide { 0.05 } else { 0.5 * max };
    let ranks: Vec<usize> = shares.iter().filter(|s| s.0 >= cutoff && s.0 > 0.0).map(|s| s.1).collect();
    // Steps whose start gap is a real part of the step on most of those ranks.
    let mut per_step: std::collections::BTreeMap<u64, (usize, u64, u64)> = Default::default();
    for &i in &ranks {
        for st in &job.ranks[i].steps {
            let e = per_step.entry(st.index).or_default();
            e.2 += st.gpu_window_ns();
            if st.split.data_ns * 10 > st.gpu_window_ns().max(1) {
                e.0 += 1;
                e.1 += st.split.data_ns;
            }
        }
    }
    let steps: Vec<u64> = per_step.iter().filter(|(_, v)| v.0 * 2 >= ranks.len().max(1)).map(|(k, _)| *k).collect();
    // Mean idle at the start of the affected steps (of all steps when none stands out).
    let pick = |k: &u64| steps.is_empty() || steps.contains(k);
    let chosen: Vec<&(usize, u64, u64)> = per_step.iter().filter(|(k, _)| pick(k)).map(|(_, v)| v).collect();
    let n = chosen.len().max(1) as u64;
    let data_total: u64 = ranks.iter().map(|&i| job.ranks[i].split.data_ns).sum();
    let idle_per_step = if steps.is_empty() {
        data_total / (n * ranks.len().max(1) as u64)
    } else {
        chosen.iter().map(|v| v.1 / v.0.max(1) as u64).sum::<u64>() / n
    };
    let step_per = chosen.iter().map(|v| v.2 / ranks.len().max(1) as u64).sum::<u64>() / n;
    let total_steps = job.ranks.iter().map(|r| r.steps.len()).max().unwrap_or(0);
    let mut v = Verdict::new(VerdictKind::DataLoading, severity);
    v.ranks = job.rank_ids(ranks.iter().copied());
    v.steps = steps.clone();
    let text = format!(
        "The GPU sat idle for {} at the start of {} of {} steps (mean step {}) on {} while the host thread was outside CUDA: {} of wall time.",
        millis(idle_per_step),
        if steps.is_empty() { "each".to_string() } else { steps.len().to_string() },
        total_steps,
        millis(step_per),
        rank_list(&v.ranks),
        share(severity)
    );
    // Which kind, from the host samples of the worst rank.
    let worst = ranks.iter().copied().max_by(|&x, &y| {
        let sh = |i: usize| job.ranks[i].split.data_ns as f64 / job.ranks[i].window_ns().max(1) as f64;
        sh(x).total_cmp(&sh(y))
    });
    let pipeline = worst.and_then(|i| super::host_pipeline::classify(&job.ranks[i]));
    let kind = pipeline.as_ref().map(|p| p.0).unwrap_or("unknown");
    let text = match &pipeline {
        Some((_, _, why)) => format!("{text} {why}"),
        None => text,
    };
    v.evidence = Evidence::DataLoading(DataLoadingEvidence {
        kind: kind.to_string(),
        host: pipeline.map(|p| p.1),
        idle_at_step_start_ns: idle_per_step,
        share_by_rank: shares.iter().map(|(s, i)| RankShare { rank: job.ranks[*i].rank, share: *s }).collect(),
        step_ns: step_per,
        steps_affected: steps.len(),
        steps_total: total_steps,
        text,
    });
    v.summary = format!(
        "Input pipeline: the GPU waits {} per step for data, {} of wall time",
        millis(idle_per_step),
        share(severity)
    );
    if !steps.is_empty() {
        v.summary.push_str(&format!(" (steps {})", step_list(&steps)));
    }
    v.advice = super::host_pipeline::advice(kind);
    v.advice.extend([
        "Load batches in parallel and ahead of time: PyTorch DataLoader(num_workers=4..8 per GPU, pin_memory=True, prefetch_factor=2..4, persistent_workers=True).".into(),
        "Copy the batch asynchronously: tensor.to(device, non_blocking=True) from pinned memory, or a CUDA-stream prefetcher that stages step N+1 during step N.".into(),
        "Move decoding / augmentation off the Python thread (NVIDIA DALI, GPU augmentation) or pre-process the dataset offline; check the 'data' range in the timeline for what the host did.".into(),
        "JAX / TF: tf.data with .prefetch(tf.data.AUTOTUNE) and num_parallel_calls, or flax.jax_utils.prefetch_to_device(iterator, 2).".into(),
    ]);
    if kind != "unknown" {
        v.summary.push_str(&format!(" ({})", kind.replace('_', " ")));
    }
    Some(v)
}
