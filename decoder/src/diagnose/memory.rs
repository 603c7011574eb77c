//! `oom` and `memory_pressure`: failed device allocations (with sizes), the reservation at the
//! failure and its growth per step; peak reservation against the device's capacity; allocation
//! churn inside steps (cudaMalloc / cudaFree synchronize and cost host time).
//!
//! `oom` severity 1 when the failure ended the run (no later step); otherwise the failure is
//! reported under `memory_pressure`, whose severity is the host time spent in allocation calls
//! inside steps.

use super::evidence::{Evidence, MemoryPressureEvidence, OomEvidence};
use super::facts::{AllocFailure, RankFacts};
use super::job::Job;
use super::{rank_list, Location, Verdict, VerdictKind};
use crate::model::Ns;
use crate::units::{byte_size, millis, share};

const FATAL_WITHIN_NS: Ns = 2_000_000_000;

/// Mean growth of the reservation per step (bytes), when it grows steadily.
pub fn growth_per_step(r: &RankFacts) -> Option<u64> {
    let v = &r.memory.reserved_by_step;
    if v.len() < 3 {
        return None;
    }
    let ups = v.windows(2).filter(|w| w[1].1 > w[0].1).count();
    let (first, last) = (v.first()?, v.last()?);
    if ups * 4 < (v.len() - 1) * 3 || last.1 <= first.1 || last.0 <= first.0 {
        return None;
    }
    Some((last.1 - first.1) / (last.0 - first.0))
}

fn is_fatal(r: &RankFacts, f: &AllocFailure) -> bool {
    let last_step = r.steps.iter().map(|s| s.index).max();
    let later_step = match (f.step, last_step) {
        (Some(s), Some(l)) => l > s,
        _ => false,
    };
    !later_step || r.span.1.saturating_sub(f.ts) < FATAL_WITHIN_NS
}

fn memory_advice(growth: Option<u64>, nranks: usize) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(g) = growth {
        a.push(format!(
            "Memory grows by {} every step: something keeps tensors alive across steps (total_loss += loss instead of loss.item() / loss.detach(), outputs or graphs appended to a list, a growing cache). Fix the leak before tuning.",
            byte_size(g)
        ));
    }
    a.push("Cut activation memory: activation checkpointing (torch.utils.checkpoint, FSDP/Megatron activation checkpointing; jax.checkpoint / jax.remat) trades ~30% more compute for most of the activations.".into());
    a.push(format!(
        "Shard model state: ZeRO stage 1/2/3 (DeepSpeed) or FSDP (ShardingStrategy.FULL_SHARD) keep 1/{} of the optimizer states (and gradients / parameters) per rank; CPU offload for what remains.",
        nranks.max(1)
    ));
    a.push(
        "Use a smaller micro-batch with gradient accumulation (same global batch), and bf16 mixed precision.".into(),
    );
    a.push("Against fragmentation: PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (or max_split_size_mb); JAX: XLA_PYTHON_CLIENT_MEM_FRACTION / XLA_PYTHON_CLIENT_ALLOCATOR=platform to compare.".into());
    a
}

pub fn find_oom(job: &Job) -> Option<Verdict> {
    let fatal: Vec<(usize, &AllocFailure)> = job
        .ranks
        .iter()
        .enumerate()
        .flat_map(|(i, r)| r.memory.failures.iter().filter(move |f| is_fatal(r, f)).map(move |f| (i, f)))
        .collect();
    let &(i, f) = fatal.first()?;
    let r = &job.ranks[i];
    let growth = growth_per_step(r);
    let mut v = Verdict::new(VerdictKind::Oom, 1.0);
    v.ranks = job.rank_ids(fatal.iter().map(|f| f.0));
    v.steps = fatal.iter().filter_map(|f| f.1.step).collect();
    v.steps.sort_unstable();
    v.steps.dedup();
    v.location = Location { device: Some(f.device), calls: vec!["cudaMalloc".into()], ..Location::default() };
    let need = f.reserved + f.bytes;
    let mut text = format!(
        "r{} failed to allocate {} on device {}{} while holding {} (it needed at least {}).",
        r.rank,
        byte_size(f.bytes),
        f.device,
        f.step.map(|s| format!(" in step {s}")).unwrap_or_default(),
        byte_size(f.reserved),
        byte_size(need)
    );
    if let Some(c) = r.memory.capacity {
        text.push_str(&format!(" Device capacity: {}.", byte_size(c)));
    }
    if let Some(g) = growth {
        text.push_str(&format!(" Its reservation grew by {} per step before that.", byte_size(g)));
    }
    v.evidence = Evidence::Oom(OomEvidence {
        capacity_bytes: r.memory.capacity,
        failures: fatal.len(),
        growth_per_step_bytes: growth,
        needed_bytes: need,
        peak_reserved_bytes: r.memory.peak_reserved,
        requested_bytes: f.bytes,
        reserved_bytes: f.reserved,
        step: f.step,
        text,
    });
    v.summary = format!(
        "Out of memory: {} could not allocate {} (holding {}){}",
        rank_list(&v.ranks),
        byte_size(f.bytes),
        byte_size(f.reserved),
        f.step.map(|s| format!(" at step {s}")).unwrap_or_default()
    );
    v.advice = memory_advice(growth, job.ranks.len());
    Some(v)
}

/// Allocation churn alone (memory far from full, no failure) is a verdict only when the GPU waited
/// for it this much of the time: calls that overlap GPU work cost the step nothing.
const CHURN_MIN_SHARE: f64 = 0.05;

pub fn find_pressure(job: &Job) -> Option<Verdict> {
    let mut churn_ns: Ns = 0;
    let mut churn_calls = 0u64;
    let mut ranks = Vec::new();
    let mut recovered = 0usize;
    let mut near = Vec::new();
    let churn_idle: Ns = job.ranks.iter().map(|r| r.memory.step_alloc_idle_ns).sum();
    let churn_matters = job.fraction(churn_idle) >= CHURN_MIN_SHARE;
    for (i, r) in job.ranks.iter().enumerate() {
        let rec = r.memory.failures.iter().filter(|f| !is_fatal(r, f)).count();
        let close = r.memory.capacity.is_some_and(|c| c > 0 && r.memory.peak_reserved as f64 >= 0.9 * c as f64);
        churn_ns += r.memory.step_alloc_ns;
        churn_calls += r.memory.step_alloc_calls;
        if rec > 0 || close || (churn_matters && r.memory.step_alloc_calls > 0) {
            ranks.push(i);
        }
        recovered += rec;
        if close {
            near.push(i);
        }
    }
    if ranks.is_empty() {
        return None;
    }
    // What the churn costs is the GPU time it starved, not the host time in the calls.
    let churn_cost = if churn_matters { job.fraction(churn_idle) } else { 0.0 };
    let severity = churn_cost.max(if recovered > 0 || !near.is_empty() { 0.01 } else { 0.0 });
    let nsteps: u64 = job.ranks.iter().map(|r| r.steps.len() as u64).sum::<u64>().max(1);
    let r0 = &job.ranks[*near.first().or(ranks.first())?];
    let growth = growth_per_step(r0);
    let mut v = Verdict::new(VerdictKind::MemoryPressure, severity);
    v.ranks = job.rank_ids(ranks);
    v.steps = job.ranks.iter().flat_map(|r| r.memory.failures.iter().filter_map(|f| f.step)).collect();
    v.location.device = Some(r0.memory.peak_device);
    let text = format!(
        "Peak reservation {}{}; {:.1} allocation calls per step inside steps costing {} of host time; {} failed allocations recovered.",
        byte_size(r0.memory.peak_reserved),
        r0.memory.capacity.map(|c| format!(" of {} ({})", byte_size(c), share(r0.memory.peak_reserved as f64 / c as f64))).unwrap_or_default(),
        churn_calls as f64 / nsteps as f64,
        millis(churn_ns),
        recovered
    );
    v.evidence = Evidence::MemoryPressure(MemoryPressureEvidence {
        alloc_calls_in_steps: churn_calls,
        alloc_host_ns: churn_ns,
        capacity_bytes: r0.memory.capacity,
        growth_per_step_bytes: growth,
        peak_reserved_bytes: r0.memory.peak_reserved,
        recovered_failures: recovered,
        text,
    });
    v.summary = format!(
        "Memory pressure on {}: {:.1} allocations per step, peak {}",
        rank_list(&v.ranks),
        churn_calls as f64 / nsteps as f64,
        byte_size(r0.memory.peak_reserved)
    );
    let mut advice = vec![
        "Allocate once, reuse: let the caching allocator keep memory (avoid torch.cuda.empty_cache() in the loop), preallocate buffers, keep shapes static so cached blocks fit.".into(),
    ];
    advice.extend(memory_advice(growth, job.ranks.len()));
    v.advice = advice;
    Some(v)
}
