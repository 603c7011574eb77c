//! `amp_overflow`: steps whose optimizer kernels are missing after the AMP non-finite check
//! (`_amp_foreach_non_finite_check_and_unscale_`): GradScaler found inf/NaN gradients and skipped
//! the step. Severity: the GPU time of the skipped steps (their work was thrown away).

use super::evidence::{AmpOverflowEvidence, Evidence};
use super::job::Job;
use super::{rank_list, step_list, Verdict, VerdictKind};
use crate::model::Ns;
use crate::units::share;

pub fn find(job: &Job) -> Option<Verdict> {
    let ranks: Vec<usize> = (0..job.ranks.len()).filter(|&i| !job.ranks[i].amp.skipped_steps.is_empty()).collect();
    if ranks.is_empty() {
        return None;
    }
    let lost: Ns = job.ranks.iter().map(|r| r.amp.skipped_ns).sum();
    let severity = job.fraction(lost);
    let mut steps: Vec<u64> = ranks.iter().flat_map(|&i| job.ranks[i].amp.skipped_steps.iter().copied()).collect();
    steps.sort_unstable();
    steps.dedup();
    let checked = ranks.iter().map(|&i| job.ranks[i].amp.checked_steps.len()).max().unwrap_or(0);
    let mut v = Verdict::new(VerdictKind::AmpOverflow, severity);
    v.ranks = job.rank_ids(ranks);
    v.steps = steps.clone();
    v.location.kernel = Some("_amp_foreach_non_finite_check_and_unscale_".into());
    let every = if steps.len() >= 2 {
        Some((steps[steps.len() - 1] - steps[0]) as f64 / (steps.len() - 1) as f64)
    } else {
        None
    };
    let text = format!(
        "{} of {checked} steps ran the AMP non-finite check but no optimizer kernel after it (steps {}{}), on {}: their work was discarded, {} of wall time.",
        steps.len(),
        step_list(&steps),
        every.map(|e| format!(", one every {e:.1} steps")).unwrap_or_default(),
        rank_list(&v.ranks),
        share(severity)
    );
    v.evidence = Evidence::AmpOverflow(AmpOverflowEvidence {
        checked_steps: checked,
        lost_ns: lost,
        skip_interval_steps: every,
        skipped_steps: steps.len(),
        text,
    });
    v.summary = format!(
        "AMP overflow: the optimizer was skipped in {} of {checked} steps, {} of wall time",
        steps.len(),
        share(severity)
    );
    v.advice = vec![
        "A few skips at the start are GradScaler calibrating; frequent skips mean the scale keeps overflowing: start lower (GradScaler(init_scale=2**12)) or grow slower (growth_interval=4000).".into(),
        "Prefer bf16 autocast (torch.autocast(\"cuda\", dtype=torch.bfloat16)): same range as fp32, no loss scaling, no skipped steps.".into(),
        "If the overflow is real (inf/NaN in the model), find it: lower the learning rate / add warm-up, clip gradients after scaler.unscale_(optimizer), keep softmax / attention logits and the loss in fp32, torch.autograd.detect_anomaly() on a short run.".into(),
        "JAX: jmp.DynamicLossScale or optax.apply_if_finite; check where jnp.isfinite first fails.".into(),
    ];
    Some(v)
}
