//! `desync`: ranks issued different collectives (op, size or datatype) at the same sequence number
//! of a communicator. Severity 1: the results are wrong or the job hangs.

use std::collections::BTreeMap;

use super::evidence::{DesyncEvidence, DesyncVariant, Evidence};
use super::job::{comm_hex, Job};
use super::{rank_list, CollectiveRef, Location, Verdict, VerdictKind};
use crate::model::CollOp;
use crate::units::byte_size;

/// NCCL datatype name.
pub fn dtype_name(d: u8) -> &'static str {
    match d {
        0 => "int8",
        1 => "uint8",
        2 => "int32",
        3 => "uint32",
        4 => "int64",
        5 => "uint64",
        6 => "float16",
        7 => "float32",
        8 => "float64",
        9 => "bfloat16",
        10 => "float8_e4m3",
        11 => "float8_e5m2",
        _ => "unknown",
    }
}

pub fn find(job: &Job) -> Option<Verdict> {
    // How often each signature occurs in the whole run breaks ties (two ranks: the usual one wins).
    let mut global: BTreeMap<(u8, u64, u8), usize> = BTreeMap::new();
    for m in job.instances.iter().flat_map(|i| i.members.iter()) {
        *global.entry((m.op as u8, m.bytes, m.datatype)).or_default() += 1;
    }
    let mut found = Vec::new();
    for inst in &job.instances {
        if inst.members.len() < 2 {
            continue;
        }
        let mut votes: BTreeMap<(u8, u64, u8), Vec<usize>> = BTreeMap::new();
        for m in &inst.members {
            votes.entry((m.op as u8, m.bytes, m.datatype)).or_default().push(m.rank);
        }
        if votes.len() < 2 {
            continue;
        }
        let major = votes
            .iter()
            .max_by_key(|(k, v)| (v.len(), global.get(*k).copied().unwrap_or(0), std::cmp::Reverse(**k)))
            .map(|(k, _)| *k)?;
        found.push((inst, major, votes));
    }
    let (inst, major, votes) = found.first()?;
    let mut v = Verdict::new(VerdictKind::Desync, 1.0);
    let odd: Vec<usize> = votes.iter().filter(|(k, _)| *k != major).flat_map(|(_, r)| r.iter().copied()).collect();
    v.ranks = job.rank_ids(odd.iter().copied());
    let mut steps: Vec<u64> = found.iter().filter_map(|f| f.0.step()).collect();
    steps.sort_unstable();
    steps.dedup();
    v.steps = steps;
    let describe =
        |k: &(u8, u64, u8)| format!("{} of {} {}", CollOp::from_u8(k.0).name(), byte_size(k.1), dtype_name(k.2));
    v.location = Location {
        collective: Some(CollectiveRef {
            comm: comm_hex(inst.comm),
            seq: Some(inst.seq),
            op: CollOp::from_u8(major.0).name().into(),
            bytes: Some(major.1),
        }),
        ..Location::default()
    };
    let variants: Vec<String> = votes
        .iter()
        .map(|(k, r)| format!("{} issued {}", rank_list(&job.rank_ids(r.iter().copied())), describe(k)))
        .collect();
    let text = format!(
        "At seq {} of comm {}{}: {}. {} mismatched collective{} in all.",
        inst.seq,
        comm_hex(inst.comm),
        inst.step().map(|s| format!(" (step {s})")).unwrap_or_default(),
        variants.join("; "),
        found.len(),
        if found.len() == 1 { "" } else { "s" }
    );
    v.evidence = Evidence::Desync(DesyncEvidence {
        comm: comm_hex(inst.comm),
        mismatches: found.len(),
        seq: inst.seq,
        step: inst.step(),
        text,
        variants: votes
            .iter()
            .map(|(k, r)| DesyncVariant {
                bytes: k.1,
                datatype: dtype_name(k.2),
                op: CollOp::from_u8(k.0).name(),
                ranks: job.rank_ids(r.iter().copied()),
            })
            .collect(),
    });
    v.summary = format!(
        "Desync: {} issued {} where the others issued {} (comm {}, seq {})",
        rank_list(&v.ranks),
        votes.iter().find(|(k, _)| *k != major).map(|(k, _)| describe(k)).unwrap_or_default(),
        describe(major),
        comm_hex(inst.comm),
        inst.seq
    );
    v.advice = vec![
        "Every rank must issue the same collectives in the same order with the same shapes and dtypes: look for rank-dependent branches, data-dependent shapes (pad before all_gather), or parameters with different dtypes on some ranks.".into(),
        "Run with TORCH_DISTRIBUTED_DEBUG=DETAIL (checks collective shapes across ranks) and NCCL_DEBUG=INFO; the NCCL flight recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) records each rank's sequence.".into(),
        "With uneven inputs use DDP's join() context manager or drop_last=True so all ranks run the same number of steps; in JAX keep shapes static across hosts (pmap / pjit see one program).".into(),
    ];
    Some(v)
}
