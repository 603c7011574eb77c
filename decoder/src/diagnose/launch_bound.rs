//! `launch_bound`: the GPU idles between many short kernels while the host is busy launching them
//! (Python / framework overhead per operator).

use super::evidence::{Evidence, LaunchBoundEvidence};
use super::job::Job;
use super::{rank_list, step_list, Verdict, VerdictKind};
use crate::model::Ns;
use crate::units::{millis, share};

fn median(mut v: Vec<u64>) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// The largest rank's share of `loss` when every rank shows at least 5% of it (a job-wide pathology),
/// else None. Shared by the input-pipeline and launch rules.
pub(crate) fn job_level_share(job: &Job, loss: impl Fn(&super::facts::RankFacts) -> Ns) -> Option<f64> {
    let shares: Vec<f64> = job
        .ranks
        .iter()
        .filter(|r| r.gpu_times && r.window_ns() > 0)
        .map(|r| loss(r) as f64 / r.window_ns() as f64)
        .collect();
    if shares.len() < 2 || shares.iter().any(|&s| s < 0.05) {
        return None;
    }
    shares.into_iter().reduce(f64::max)
}

pub fn find(job: &Job) -> Option<Verdict> {
    // Launch idle less the share `host_cpu_contention` claims (the main thread waiting for a CPU):
    // GPU idle time is attributed once.
    let own: Vec<Ns> = job
        .ranks
        .iter()
        .map(|r| (r.split.launch_ns as f64 * (1.0 - super::host_contention::contention_share(r))) as Ns)
        .collect();
    let own_of = |r: &super::facts::RankFacts| {
        job.ranks.iter().position(|x| std::ptr::eq(x, r)).map(|i| own[i]).unwrap_or(r.split.launch_ns)
    };
    let loss: Ns = own.iter().sum();
    if loss == 0 {
        return None;
    }
    // When every rank is launch-bound, the slowest one gates the job at every collective (the others'
    // waiting is this loss too): the cost is the largest rank's share, not the mean.
    let job_level = job_level_share(job, own_of);
    let severity = job_level.unwrap_or_else(|| job.fraction(loss));
    // Every rank shows it when the loss is job-wide; else the ranks with at least half the cost.
    let cutoff = if job_level.is_some() { 0.05 } else { 0.5 * severity };
    // ... and every rank whose steps have the launch-bound shape (hundreds of launches of tiny kernels),
    // even when its own GPU waits at collectives instead of between kernels.
    let shaped = |r: &super::facts::RankFacts| {
        let s: Vec<&super::facts::StepFacts> = r.steps.iter().filter(|s| s.gpu_start.is_some()).collect();
        !s.is_empty()
            && median(s.iter().map(|s| s.launches).collect()) >= 500
            && median(s.iter().filter(|s| s.kernels > 0).map(|s| s.median_kernel_ns).collect()) <= 20_000
    };
    let ranks: Vec<usize> = (0..job.ranks.len())
        .filter(|&i| {
            let r = &job.ranks[i];
            r.window_ns() > 0 && (own[i] as f64 / r.window_ns() as f64 >= cutoff || shaped(r))
        })
        .collect();
    let steps_all = || job.ranks.iter().flat_map(|r| r.steps.iter()).filter(|s| s.gpu_start.is_some());
    let launches = median(steps_all().map(|s| s.launches).collect());
    let kernels = median(steps_all().map(|s| s.kernels).collect());
    let kernel_ns = median(steps_all().filter(|s| s.kernels > 0).map(|s| s.median_kernel_ns).collect());
    if launches == 0 {
        // No kernel launches to speak of: the GPU's gaps are not launch overhead.
        return None;
    }
    let gap_ns = median(steps_all().filter(|s| s.kernels > 1).map(|s| s.median_gap_ns).collect());
    let step_ns = job.median_step_ns();
    let mut steps: Vec<u64> =
        steps_all().filter(|s| s.split.launch_ns * 10 > s.gpu_window_ns().max(1)).map(|s| s.index).collect();
    steps.sort_unstable();
    steps.dedup();
    let mut v = Verdict::new(VerdictKind::LaunchBound, severity);
    v.ranks = job.rank_ids(ranks);
    v.steps = steps.clone();
    let text = format!(
        "{launches} kernel launches per step ({kernels} kernels), median kernel {}, median gap between kernels {}: the GPU idled {} of wall time waiting for the host to launch work on {}.",
        millis(kernel_ns),
        millis(gap_ns),
        share(severity),
        rank_list(&v.ranks)
    );
    v.evidence = Evidence::LaunchBound(LaunchBoundEvidence {
        includes_straggler_wait: None,
        kernels_per_step: kernels,
        launch_idle_ns: loss,
        launches_per_step: launches,
        median_kernel_ns: kernel_ns,
        median_launch_gap_ns: gap_ns,
        step_ns,
        text,
    });
    v.summary = format!(
        "Launch-bound: {launches} launches per step of {} median kernels, the GPU idles {} of wall time between them",
        millis(kernel_ns),
        share(severity)
    );
    if !steps.is_empty() {
        v.summary.push_str(&format!(" (steps {})", step_list(&steps)));
    }
    v.advice = vec![
        "Capture the step in a CUDA graph so one launch replays all kernels: torch.compile(model, mode=\"reduce-overhead\") or torch.cuda.graphs / torch.cuda.make_graphed_callables.".into(),
        "Fuse small operators: torch.compile (Inductor fuses pointwise chains), fused optimizers (torch.optim.AdamW(fused=True) or foreach=True), fused layers (apex / Transformer Engine).".into(),
        "Give each kernel more work: a larger micro-batch per GPU, fewer and larger parameter tensors (multi_tensor_apply), avoid Python loops over layers/params in the step.".into(),
        "JAX: jax.jit the whole train step (one XLA executable per step) rather than per-op dispatch.".into(),
    ];
    Some(v)
}
