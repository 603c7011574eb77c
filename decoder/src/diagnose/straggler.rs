//! `straggler`: the rank that arrives last at collectives (arrival = its collective kernel's
//! start on the aligned clock; the others' kernels are long because they wait), and by how much;
//! or, without collectives, the rank whose step time is an outlier.
//!
//! Severity: the job's wall time lost waiting for it (per step, the largest lead it gave the
//! others), over the mean rank window.

use std::collections::BTreeMap;

use super::evidence::{CategoryPerStep, Evidence, StepTimeStragglerEvidence, StragglerEvidence};
use super::facts::Split;
use super::job::{comm_hex, Job};
use super::{step_list, CollectiveRef, Location, Verdict, VerdictKind};
use crate::model::Ns;
use crate::units::{millis, share};

/// The rank must be the last one at least this often.
const MIN_LAST_SHARE: f64 = 0.5;

fn median(mut v: Vec<Ns>) -> Ns {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[v.len() / 2]
}

/// What the late rank did more per step than the others: the likeliest cause.
/// A per-step category of a rank's split.
type Category = (&'static str, fn(&Split) -> Ns);

fn cause(job: &Job, late: usize) -> (String, Ns, BTreeMap<&'static str, CategoryPerStep>, &'static str) {
    let per_step = |s: &Split, n: usize, f: fn(&Split) -> Ns| f(s) / n.max(1) as Ns;
    let cats: [Category; 6] = [
        ("data", |s| s.data_ns),
        ("compute", |s| s.compute_ns),
        ("launch", |s| s.launch_ns),
        ("sync", |s| s.sync_ns),
        ("memcpy", |s| s.memcpy_ns),
        ("idle", |s| s.idle_ns),
    ];
    let me = &job.ranks[late];
    let mut best = ("unknown", 0u64);
    let mut table = BTreeMap::new();
    for (name, f) in cats {
        let mine = per_step(&me.split, me.steps.len(), f);
        let others = median(
            job.ranks
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != late)
                .map(|(_, r)| per_step(&r.split, r.steps.len(), f))
                .collect(),
        );
        let excess = mine.saturating_sub(others);
        table.insert(name, CategoryPerStep { others_ns_per_step: others, rank_ns_per_step: mine });
        if excess > best.1 {
            best = (name, excess);
        }
    }
    let text = match best.0 {
        "data" => format!("its GPU idled {} more per step at step start while its host was outside CUDA (input pipeline or host work)", millis(best.1)),
        "compute" => format!("its kernels took {} more per step (slower GPU, clocks / thermal throttling, or more work on this rank)", millis(best.1)),
        "launch" => format!("its host launched work {} slower per step (CPU contention, CPU affinity)", millis(best.1)),
        "sync" => format!("it lost {} more per step in host synchronizations", millis(best.1)),
        "memcpy" => format!("its copies took {} more per step", millis(best.1)),
        "idle" => format!("its GPU idled {} more per step for no recorded reason", millis(best.1)),
        _ => "no single cause stands out in its own trace".to_string(),
    };
    (text, best.1, table, best.0)
}

pub fn find(job: &Job) -> Option<Verdict> {
    let n = job.ranks.len();
    if n < 2 {
        return None;
    }
    let mut last_count = vec![0usize; n];
    let mut with_last = 0usize;
    let mut per_step: BTreeMap<(usize, Option<u64>), Ns> = BTreeMap::new();
    let mut worst: Vec<Option<(Ns, usize)>> = vec![None; n];
    for (i, inst) in job.instances.iter().enumerate() {
        let Some((r, late)) = inst.last else { continue };
        with_last += 1;
        if late == 0 {
            continue;
        }
        last_count[r] += 1;
        let e = per_step.entry((r, inst.step())).or_default();
        *e = (*e).max(late);
        if worst[r].is_none_or(|w| late > w.0) {
            worst[r] = Some((late, i));
        }
    }
    if with_last == 0 {
        return step_outlier(job);
    }
    let lost_of = |r: usize| per_step.iter().filter(|((x, _), _)| *x == r).map(|(_, v)| *v).sum::<Ns>();
    let late = (0..n).max_by_key(|&r| (lost_of(r), std::cmp::Reverse(r)))?;
    let lost = lost_of(late);
    if lost == 0 || (last_count[late] as f64) < MIN_LAST_SHARE * with_last as f64 {
        return None;
    }
    let severity = lost as f64 * n as f64 / job.total_ns().max(1) as f64;
    let latenesses: Vec<Ns> = per_step.iter().filter(|((x, _), _)| *x == late).map(|(_, v)| *v).collect();
    let med = median(latenesses.clone());
    // Someone always arrives last: a lateness under 1 ms and 2% of a step is jitter, not a straggler.
    if med < 1_000_000 && (med as f64) < 0.02 * job.median_step_ns() as f64 {
        return None;
    }
    let mut steps: Vec<u64> = per_step
        .iter()
        .filter(|((x, s), v)| *x == late && s.is_some() && **v * 4 >= med)
        .filter_map(|((_, s), _)| *s)
        .collect();
    steps.sort_unstable();
    let (why, _, cause_table, category) = cause(job, late);
    let rank = job.ranks[late].rank;
    let mut v = Verdict::new(VerdictKind::Straggler, severity);
    v.ranks = vec![rank];
    v.steps = steps.clone();
    if let Some((_, i)) = worst[late] {
        let inst = &job.instances[i];
        let (op, bytes, _) = inst.op_bytes();
        v.location = Location {
            device: Some(job.ranks[late].device),
            collective: Some(CollectiveRef {
                comm: comm_hex(inst.comm),
                seq: Some(inst.seq),
                op: op.name().into(),
                bytes: Some(bytes),
            }),
            ..Location::default()
        };
    }
    let text = format!(
        "r{rank} arrived last at {} of {with_last} collectives, by a median of {} per step (up to {}); the other {} ranks waited in their collective kernels: {} of wall time. Likely cause: {why}.",
        last_count[late],
        millis(med),
        millis(worst[late].map(|w| w.0).unwrap_or(0)),
        n - 1,
        share(severity)
    );
    v.evidence = Evidence::Straggler(StragglerEvidence {
        cause: why,
        cause_category: category,
        collectives: with_last,
        last_arrivals: last_count[late],
        lost_ns: lost,
        max_lateness_ns: worst[late].map(|w| w.0).unwrap_or(0),
        median_lateness_ns: med,
        per_step_by_category: cause_table,
        rank,
        text,
    });
    v.summary = format!(
        "Straggler r{rank}: the others wait {} per step for it at collectives, {} of wall time",
        millis(med),
        share(severity)
    );
    if !steps.is_empty() {
        v.summary.push_str(&format!(" (steps {})", step_list(&steps)));
    }
    v.advice = straggler_advice();
    Some(v)
}

fn straggler_advice() -> Vec<String> {
    vec![
        "Look at the named rank's own timeline first (tprof summary on its file): the cause above says which part of its step is longer than on the other ranks.".into(),
        "Input imbalance: give each rank the same work (DistributedSampler with drop_last=True, length-grouped / packed sequences so batches cost the same); more DataLoader workers on that rank's host.".into(),
        "Host problems: other processes or wrong CPU affinity on that host (numactl / taskset, OMP_NUM_THREADS), a slow local disk or network filesystem.".into(),
        "GPU problems: nvidia-smi -q -d CLOCK,PERFORMANCE,TEMPERATURE on that host (throttling, ECC, lower clocks); replace or exclude the node if it is consistently slow.".into(),
    ]
}

/// Without collectives: a rank whose mean step time stands out.
fn step_outlier(job: &Job) -> Option<Verdict> {
    let means: Vec<(usize, Ns)> = job
        .ranks
        .iter()
        .enumerate()
        .filter(|(_, r)| r.steps.len() >= 2)
        .map(|(i, r)| (i, r.steps.iter().map(|s| s.host_end - s.host_start).sum::<Ns>() / r.steps.len() as Ns))
        .collect();
    if means.len() < 2 {
        return None;
    }
    let med = median(means.iter().map(|m| m.1).collect());
    let &(late, mean) = means.iter().max_by_key(|m| m.1)?;
    if med == 0 || (mean as f64) < 1.25 * med as f64 {
        return None;
    }
    let severity = (mean - med) as f64 / mean as f64 / means.len() as f64;
    let rank = job.ranks[late].rank;
    let (why, _, table, _) = cause(job, late);
    let mut v = Verdict::new(VerdictKind::Straggler, severity);
    v.ranks = vec![rank];
    v.steps = job.ranks[late]
        .steps
        .iter()
        .filter(|s| (s.host_end - s.host_start) as f64 > 1.25 * med as f64)
        .map(|s| s.index)
        .collect();
    let text = format!(
        "r{rank}'s mean step takes {} against a median of {} over {} ranks. Likely cause: {why}.",
        millis(mean),
        millis(med),
        means.len()
    );
    v.evidence = Evidence::StepTimeStraggler(StepTimeStragglerEvidence {
        mean_step_ns: mean,
        median_step_ns: med,
        per_step_by_category: table,
        rank,
        text,
    });
    v.summary =
        format!("Straggler r{rank}: steps {} slower than the median rank", share((mean - med) as f64 / med as f64));
    v.advice = straggler_advice();
    Some(v)
}
