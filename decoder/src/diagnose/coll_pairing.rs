//! NCCL calls paired with their kernels into [`CollFact`]s, numbered so that each matches its
//! counterparts on the other ranks.

use std::collections::HashMap;

use super::busy_measures::BusyMeasures;
use super::corr_steps::CorrSteps;
use super::facts::CollFact;
use super::timeline::StepIndex;
use crate::correlate::{CollectiveMatcher, FromPairing};
use crate::model::*;

/// One call and the GPU span it was paired with (the diagnoses keep the whole call).
struct PairedCall {
    call: Option<Collective>,
    gpu: Option<(Ns, Ns)>,
}

impl FromPairing for PairedCall {
    fn from_pairing(call: Option<&Collective>, _kernel: Option<&Kernel>, gpu: Option<(Ns, Ns)>) -> Self {
        PairedCall { call: call.cloned(), gpu }
    }
}

/// A leftover kernel pairs with a leftover call only if it started no more than this before the call.
const LOOSE_PAIR_LEAD_NS: Ns = 1_000_000_000;

/// The part of each collective's GPU span no compute kernel ran in (each span asked of `busy`).
pub fn add_exposed(colls: &mut [CollFact], busy: &BusyMeasures<'_>) {
    for c in colls {
        c.exposed_ns = c.gpu.map_or(0, |(s, e)| (e - s) - busy.compute_in(s, e));
    }
}

/// Pair NCCL calls with their kernels into [`CollFact`]s, as the summary does ([`CollectiveMatcher`]:
/// correlation, the kernels of a group end per device in call order, else issue order per rank).
/// `calls` holds the data-moving calls and the group starts / ends, in the order they were recorded.
/// Their exposed time is 0 until [`add_exposed`].
pub fn pair_collectives(
    calls: &[Collective],
    kernels: &[Kernel],
    index: &StepIndex,
    corr_step: &CorrSteps,
    corr_ids: &super::corr_ids::CorrIds,
) -> Vec<CollFact> {
    let mut matcher: CollectiveMatcher<PairedCall> = CollectiveMatcher::default();
    for c in calls {
        matcher.call(c);
    }
    let (imported, mut own): (Vec<&Kernel>, Vec<&Kernel>) = kernels.iter().partition(|k| k.collective.is_some());
    own.sort_by_key(|k| k.start);
    for k in own {
        matcher.kernel(k);
    }
    matcher.finish_accepting(|c, k| c.start <= k.start + LOOSE_PAIR_LEAD_NS);
    let mut paired: Vec<(Collective, Option<(Ns, Ns)>)> =
        matcher.done.into_iter().filter_map(|p| p.call.map(|c| (c, p.gpu))).collect();
    paired.sort_by_key(|(c, _)| (c.start, c.seq));
    let mut out = Vec::with_capacity(paired.len() + imported.len());
    // The recorded sequence numbers count sends and receives too, which ranks make in different
    // numbers (a pipeline's first stage only sends): collectives are numbered among collectives,
    // sends per peer and receives per peer, so each matches its counterparts on the other ranks.
    // Per (communicator, rank in it): one process may drive several ranks of a communicator.
    let mut p2p_before: HashMap<(u64, u32), u64> = HashMap::new();
    let mut p2p_order: HashMap<(u64, u32, i32, bool), u64> = HashMap::new();
    for (c, gpu) in paired {
        let seq = if c.op.is_p2p() {
            *p2p_before.entry((c.comm, c.rank)).or_default() += 1;
            let k = p2p_order.entry((c.comm, c.rank, c.peer, c.op == CollOp::Send)).or_default();
            *k += 1;
            *k - 1
        } else {
            c.seq.saturating_sub(p2p_before.get(&(c.comm, c.rank)).copied().unwrap_or(0))
        };
        out.push(CollFact {
            comm: c.comm,
            seq,
            comm_rank: c.rank,
            peer: c.peer,
            op: c.op,
            bytes: c.bytes,
            count: c.count,
            datatype: c.datatype,
            nranks: c.nranks,
            host: Some((c.start, c.end)),
            gpu,
            exposed_ns: 0,
            step: index.at(c.start),
            device: c.device,
            stream: c.stream,
        });
    }
    for (i, k) in imported.iter().enumerate() {
        let info = k.collective.as_ref();
        out.push(CollFact {
            comm: 0,
            seq: i as u64,
            op: info.map(|c| c.op).unwrap_or_default(),
            bytes: info.map(|c| c.bytes).unwrap_or(0),
            count: 0,
            datatype: 0,
            nranks: info.map(|c| c.nranks).unwrap_or(0),
            host: None,
            gpu: Some((k.start, k.end)),
            exposed_ns: 0,
            step: corr_ids
                .get(k.correlation)
                .and_then(|c| corr_step.get(c))
                .map(|p| index.windows[p as usize].index)
                .or_else(|| index.at(k.start)),
            device: k.device,
            stream: k.stream as u64,
            comm_rank: 0,
            peer: -1,
        });
    }
    out
}
