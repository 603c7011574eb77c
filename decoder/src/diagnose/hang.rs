//! `hang`: the run stopped with collectives unfinished. Evidence: a collective host call whose
//! kernel never completed, a `HangSuspected` marker (the shim's watchdog), ranks whose last
//! sequence numbers on a communicator differ. Per communicator: the last sequence number each
//! rank reached, the missing ranks, and for each stuck rank its last CUDA call and last kernel.
//!
//! Severity 1: the run did not finish.

use std::collections::{BTreeMap, BTreeSet};

use super::evidence::{Evidence, HangCommunicator, HangEvidence, HangRank, LastSeq, WatchdogFlag};
use super::facts::CollFact;
use super::job::{comm_hex, Job, P2pTransfer};
use super::{rank_list, CollectiveRef, Verdict, VerdictKind};
use crate::model::Ns;
use crate::summary::demangle;
use crate::units::millis;

/// An unfinished collective this long before the rank's last event is a hang on its own.
const STUCK_ALONE_NS: Ns = 1_000_000_000;

pub fn find(job: &Job) -> Option<Verdict> {
    let markers: Vec<(usize, &super::facts::HangMarker)> =
        job.ranks.iter().enumerate().flat_map(|(i, r)| r.hang_markers.iter().map(move |m| (i, m))).collect();
    // Per comm: per rank (last issued seq, first unfinished (seq, issued time)).
    type PerRank = BTreeMap<usize, (u64, Option<(u64, Ns)>)>;
    let mut comms: BTreeMap<u64, PerRank> = BTreeMap::new();
    for (i, r) in job.ranks.iter().enumerate() {
        // Collectives on one communicator complete in order: one whose kernel record is missing
        // (a dropped record) but followed by a completed one did complete.
        let mut last_done: BTreeMap<u64, u64> = BTreeMap::new();
        // Sends and receives are matched per peer (below), not by the communicator's sequence.
        for c in r.colls.iter().filter(|c| c.comm != 0 && !c.is_p2p() && c.gpu.is_some()) {
            let d = last_done.entry(c.comm).or_insert(c.seq);
            *d = (*d).max(c.seq);
        }
        for c in r.colls.iter().filter(|c| c.comm != 0 && !c.is_p2p()) {
            let e = comms.entry(c.comm).or_default().entry(i).or_insert((0, None));
            e.0 = e.0.max(c.seq);
            if c.gpu.is_none() && last_done.get(&c.comm).is_none_or(|&d| c.seq > d) {
                if let Some(h) = c.host {
                    if e.1.is_none_or(|u| c.seq < u.0) {
                        e.1 = Some((c.seq, h.0));
                    }
                }
            }
        }
    }
    let mut stuck: Option<(u64, u64)> = None; // (comm, seq)
    for (comm, per) in &comms {
        let unfinished: Vec<(usize, u64, Ns)> = per.iter().filter_map(|(i, p)| p.1.map(|u| (*i, u.0, u.1))).collect();
        if unfinished.is_empty() {
            continue;
        }
        let lasts: BTreeSet<u64> = per.values().map(|p| p.0).collect();
        let alone = unfinished.iter().any(|(i, _, t)| job.ranks[*i].span.1.saturating_sub(*t) >= STUCK_ALONE_NS);
        if lasts.len() > 1 || alone || !markers.is_empty() {
            let seq = unfinished.iter().map(|u| u.1).min().unwrap_or(0);
            if stuck.is_none_or(|s| seq < s.1) {
                stuck = Some((*comm, seq));
            }
        }
    }
    let p2p = if stuck.is_none() { stuck_transfer(job) } else { None };
    if stuck.is_none() && p2p.is_none() && markers.is_empty() {
        return None;
    }
    let mut v = Verdict::new(VerdictKind::Hang, 1.0);
    let mut comm_rows = Vec::new();
    let mut stuck_ranks: Vec<usize> = Vec::new();
    let mut missing_ranks: Vec<usize> = Vec::new();
    let mut text = String::new();
    if let Some((comm, seq)) = stuck {
        let per = &comms[&comm];
        for (i, p) in per {
            match p.1 {
                Some((s, _)) if s <= seq => stuck_ranks.push(*i),
                _ if p.0 < seq => missing_ranks.push(*i),
                _ => {}
            }
        }
        let waiting_op = job.ranks.iter().flat_map(|r| r.colls.iter()).find(|c| c.comm == comm && c.seq == seq);
        let op = waiting_op.map(|c| c.op.name()).unwrap_or("collective");
        let bytes = waiting_op.map(|c| c.bytes);
        v.location.collective = Some(CollectiveRef { comm: comm_hex(comm), seq: Some(seq), op: op.into(), bytes });
        v.steps = waiting_op.and_then(|c| c.step).into_iter().collect();
        comm_rows.push(HangCommunicator {
            comm: comm_hex(comm),
            last_seq_by_rank: per
                .iter()
                .map(|(i, p)| LastSeq {
                    first_unfinished_seq: p.1.map(|u| u.0),
                    last_seq: p.0,
                    rank: job.ranks[*i].rank,
                })
                .collect(),
            missing_ranks: job.rank_ids(missing_ranks.iter().copied()),
            op,
            stuck_seq: seq,
            waiting_ranks: job.rank_ids(stuck_ranks.iter().copied()),
        });
        let waiting = rank_list(&job.rank_ids(stuck_ranks.iter().copied()));
        text = if missing_ranks.is_empty() {
            format!(
                "{op} seq {seq} on comm {} never completed: {waiting} issued it and waited; every rank called it, \
                 so the wait is inside the collective (network, a peer's GPU, or a rank that died after calling it).",
                comm_hex(comm)
            )
        } else {
            format!(
                "{op} seq {seq} on comm {} never completed: {waiting} issued it and waited, {} never called it (last seq {}).",
                comm_hex(comm),
                rank_list(&job.rank_ids(missing_ranks.iter().copied())),
                missing_ranks.iter().map(|i| per[i].0.to_string()).collect::<Vec<_>>().join("/")
            )
        };
    }
    if let Some(t) = &p2p {
        let fact = |side: Option<(usize, usize)>| side.map(|(ri, ci)| &job.ranks[ri].colls[ci]);
        let (waiting, other) = match (fact(t.send), fact(t.recv)) {
            (Some(s), r) if s.gpu.is_none() => ((t.send.unwrap().0, "Send", t.to), r.map(|_| t.recv.unwrap().0)),
            (s, _) => ((t.recv.unwrap().0, "Recv", t.from), s.map(|_| t.send.unwrap().0)),
        };
        let (wi, op, peer) = waiting;
        stuck_ranks.push(wi);
        let w = fact(if op == "Send" { t.send } else { t.recv }).unwrap();
        v.location.collective =
            Some(CollectiveRef { comm: comm_hex(t.comm), seq: Some(t.seq), op: op.into(), bytes: Some(w.bytes) });
        v.steps = w.step.into_iter().collect();
        let counterpart = if op == "Send" { "Recv" } else { "Send" };
        text = match other {
            None => {
                if let Some(pi) =
                    job.ranks.iter().position(|r| r.colls.iter().any(|c| c.comm == t.comm && c.comm_rank == peer))
                {
                    missing_ranks.push(pi);
                }
                format!(
                    "{op} #{} on comm {} between comm ranks {} and {} never completed: r{} issued it and waited; its peer (comm rank {peer}) never posted the matching {counterpart}.",
                    t.seq,
                    comm_hex(t.comm),
                    t.from,
                    t.to,
                    job.ranks[wi].rank
                )
            }
            Some(oi) => {
                stuck_ranks.push(oi);
                format!(
                    "{op} #{} on comm {} from comm rank {} to {} never completed although both sides posted it (r{} and r{}): the transfer itself is stuck (network, a peer's GPU).",
                    t.seq,
                    comm_hex(t.comm),
                    t.from,
                    t.to,
                    job.ranks[wi].rank,
                    job.ranks[oi].rank
                )
            }
        };
    }
    for (i, m) in &markers {
        text.push_str(&format!(
            " The watchdog on r{} flagged {} pending for {}.",
            job.ranks[*i].rank,
            m.what.as_deref().unwrap_or("a call"),
            millis(m.pending_ns)
        ));
        if !stuck_ranks.contains(i) && !missing_ranks.contains(i) {
            stuck_ranks.push(*i);
        }
    }
    let involved: Vec<usize> = missing_ranks.iter().chain(stuck_ranks.iter()).copied().collect();
    // The culprits are the ranks that never arrived; without them, the waiting ones.
    v.ranks = job.rank_ids(if missing_ranks.is_empty() { stuck_ranks.clone() } else { missing_ranks.clone() });
    let last = |i: usize| {
        let r = &job.ranks[i];
        HangRank {
            last_cuda_call: r.last_call.as_ref().map(|c| c.0.clone()),
            last_cuda_call_ns: r.last_call.as_ref().map(|c| c.1),
            last_kernel: r.last_kernel.as_ref().map(|k| demangle(&k.0)),
            last_kernel_end_ns: r.last_kernel.as_ref().map(|k| k.2),
            rank: r.rank,
            state: if missing_ranks.contains(&i) { "did_not_arrive" } else { "waiting" },
        }
    };
    for i in missing_ranks.iter().take(4) {
        let r = &job.ranks[*i];
        text.push_str(&format!(
            " r{}'s last CUDA call was {} and its last kernel {}.",
            r.rank,
            r.last_call.as_ref().map(|c| c.0.as_str()).unwrap_or("none"),
            r.last_kernel.as_ref().map(|k| short(&demangle(&k.0))).unwrap_or_else(|| "none".into())
        ));
    }
    v.evidence = Evidence::Hang(HangEvidence {
        after_oom: None,
        communicators: comm_rows,
        ranks: involved.iter().map(|&i| last(i)).collect(),
        text: text.trim().to_string(),
        watchdog: markers
            .iter()
            .map(|(i, m)| WatchdogFlag {
                pending_ns: m.pending_ns,
                rank: job.ranks[*i].rank,
                ts: m.ts,
                what: m.what.clone(),
            })
            .collect(),
    });
    v.summary = match &v.location.collective {
        Some(c) => format!(
            "Hang: {} seq {} never completed; {} did not arrive",
            c.op,
            c.seq.unwrap_or(0),
            if missing_ranks.is_empty() { "no rank recorded that it".to_string() } else { rank_list(&v.ranks) }
        ),
        None => "Hang: the watchdog found a call pending".to_string(),
    };
    v.advice = vec![
        "Find why the named rank(s) never issued the collective: rank-dependent control flow (if rank == 0: ... around a collective), an exception or early exit on that rank, uneven data (one rank runs out of batches: DistributedSampler(drop_last=True), DDP join()).".into(),
        "Get stacks of the stuck processes (py-spy dump --pid PID, or TORCH_NCCL_DUMP_ON_TIMEOUT=1 with the NCCL flight recorder, TORCH_NCCL_TRACE_BUFFER_SIZE=2000).".into(),
        "Fail fast instead of hanging: init_process_group(timeout=timedelta(minutes=5)) with TORCH_NCCL_ASYNC_ERROR_HANDLING=1; NCCL_DEBUG=INFO shows the last operations per rank.".into(),
    ];
    Some(v)
}

/// The first point-to-point transfer that did not complete and is a hang: one side's kernel never
/// ran while the peer never posted its counterpart, or it waited alone long before its rank's end.
fn stuck_transfer(job: &Job) -> Option<P2pTransfer> {
    let fact = |side: Option<(usize, usize)>| side.map(|(ri, ci)| (ri, &job.ranks[ri].colls[ci]));
    let unfinished = |side: Option<(usize, &CollFact)>| side.is_some_and(|(_, c)| c.gpu.is_none() && c.host.is_some());
    let alone = |side: Option<(usize, &CollFact)>| {
        side.is_some_and(|(ri, c)| c.host.is_some_and(|h| job.ranks[ri].span.1.saturating_sub(h.0) >= STUCK_ALONE_NS))
    };
    let mut found: Option<&P2pTransfer> = None;
    for t in &job.p2p {
        let (s, r) = (fact(t.send), fact(t.recv));
        let stuck = (unfinished(s) && (r.is_none() || alone(s))) || (unfinished(r) && (s.is_none() || alone(r)));
        let issued = |x: Option<(usize, &CollFact)>| x.and_then(|(_, c)| c.host.map(|h| h.0)).unwrap_or(Ns::MAX);
        if stuck && found.is_none_or(|f| issued(s).min(issued(r)) < issued(fact(f.send)).min(issued(fact(f.recv)))) {
            found = Some(t);
        }
    }
    found.cloned()
}

fn short(s: &str) -> String {
    let t: String = s.chars().take(80).collect();
    if t.len() < s.len() {
        format!("{t}...")
    } else {
        t
    }
}
