//! `sync_bound`: host synchronizations inside steps (stream / device / event synchronize,
//! synchronous and small device-to-host copies: `.item()`, `.cpu()`, `print(loss)`) and pageable
//! copies, which block the host and drain the GPU's queue.
//!
//! Severity: GPU idle that followed a blocking call (the host was waiting when the GPU ran out of
//! work), plus copy time from pageable memory not overlapped by kernels.

use std::collections::BTreeMap;

use super::evidence::{Evidence, SyncBoundEvidence, SyncCall};
use super::job::Job;
use super::{rank_list, step_list, Location, Verdict, VerdictKind};
use crate::model::Ns;
use crate::units::{millis, share};

pub fn find(job: &Job) -> Option<Verdict> {
    let idle: Ns = job.ranks.iter().map(|r| r.split.sync_ns).sum();
    let pageable: Ns = job.ranks.iter().map(|r| r.pageable.exposed_ns).sum();
    let pageable_copies: u64 = job.ranks.iter().map(|r| r.pageable.copies).sum();
    let loss = idle + pageable;
    if loss == 0 {
        return None;
    }
    let severity = job.fraction(loss);
    // Calls by name over ranks.
    let mut calls: BTreeMap<String, (u64, Ns, Ns)> = BTreeMap::new();
    for r in &job.ranks {
        for s in &r.syncs {
            let e = calls.entry(s.name.clone()).or_default();
            e.0 += s.calls;
            e.1 += s.blocked_ns;
            e.2 += s.gpu_idle_ns;
        }
    }
    let mut named: Vec<(String, (u64, Ns, Ns))> = calls.into_iter().filter(|(_, v)| v.2 > 0).collect();
    named.sort_by(|a, b| b.1 .2.cmp(&a.1 .2).then(a.0.cmp(&b.0)));
    let mut pg_calls: Vec<String> = job.ranks.iter().flat_map(|r| r.pageable.calls.iter().cloned()).collect();
    pg_calls.sort();
    pg_calls.dedup();
    let nsteps: u64 = job.ranks.iter().map(|r| r.steps.len() as u64).sum::<u64>().max(1);
    let small_d2h: u64 = job.ranks.iter().map(|r| r.small_d2h).sum();
    let ranks: Vec<usize> = (0..job.ranks.len())
        .filter(|&i| {
            let r = &job.ranks[i];
            r.split.sync_ns + r.pageable.exposed_ns > 0
        })
        .collect();
    let mut steps: Vec<u64> = job
        .ranks
        .iter()
        .flat_map(|r| r.steps.iter())
        .filter(|s| s.split.sync_ns > 0 || (pageable_copies > 0 && s.sync_calls > 0))
        .map(|s| s.index)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    let mut v = Verdict::new(VerdictKind::SyncBound, severity);
    v.ranks = job.rank_ids(ranks);
    v.steps = steps.clone();
    let mut loc_calls: Vec<String> = named.iter().map(|n| n.0.clone()).collect();
    for c in &pg_calls {
        if !loc_calls.contains(c) {
            loc_calls.push(c.clone());
        }
    }
    v.location = Location { calls: loc_calls.clone(), ..Location::default() };
    let mut parts = Vec::new();
    for (name, (n, blocked, gidle)) in named.iter().take(3) {
        parts.push(format!(
            "{name} {:.1}x per step (host blocked {} per step, GPU then idle {} per step)",
            *n as f64 / nsteps as f64,
            millis(blocked / nsteps),
            millis(gidle / nsteps)
        ));
    }
    if small_d2h > 0 {
        parts.push(format!(
            "{:.1} small device-to-host copies per step (.item()-like)",
            small_d2h as f64 / nsteps as f64
        ));
    }
    if pageable_copies > 0 {
        let bytes: u64 = job.ranks.iter().map(|r| r.pageable.bytes).sum();
        parts.push(format!(
            "{pageable_copies} copies from pageable host memory ({}, {} not overlapped) by {}",
            crate::units::byte_size(bytes),
            millis(pageable),
            pg_calls.join(", ")
        ));
    }
    let text = format!("On {}: {}; {} of wall time lost.", rank_list(&v.ranks), parts.join("; "), share(severity));
    v.evidence = Evidence::SyncBound(SyncBoundEvidence {
        calls: named
            .iter()
            .map(|(name, (n, b, g))| SyncCall {
                calls: *n,
                gpu_idle_ns: *g,
                host_blocked_ns: *b,
                name: name.clone(),
                per_step: *n as f64 / nsteps as f64,
            })
            .collect(),
        gpu_idle_after_sync_ns: idle,
        includes_straggler_wait: None,
        pageable_calls: pg_calls,
        pageable_copies,
        pageable_exposed_ns: pageable,
        small_d2h_copies: small_d2h,
        text,
    });
    v.summary = format!(
        "Host synchronization inside steps ({}): the GPU runs dry, {} of wall time",
        if loc_calls.is_empty() { "synchronizing calls".to_string() } else { loc_calls.join(", ") },
        share(severity)
    );
    if !steps.is_empty() {
        v.summary.push_str(&format!(" (steps {})", step_list(&steps)));
    }
    v.advice = vec![
        "Remove host reads of GPU values from the step: loss.item(), tensor.cpu(), print(tensor), if tensor: ... , torch.nonzero / boolean-mask indexing. Log every N steps, or accumulate metrics on the GPU and read them once.".into(),
        "Replace torch.cuda.synchronize() / stream.synchronize() in the loop with CUDA events and stream waits (event.record(); other_stream.wait_event(event)).".into(),
        "Copy from pinned memory with non_blocking=True (DataLoader(pin_memory=True), tensor.pin_memory()); pageable copies are synchronous and slow.".into(),
        "Find hidden syncs with torch.cuda.set_sync_debug_mode(\"warn\"); in JAX avoid jax.device_get / float(x) / block_until_ready() inside the step.".into(),
    ];
    Some(v)
}
