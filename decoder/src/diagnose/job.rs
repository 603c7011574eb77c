//! The ranks joined: collectives matched across ranks by (communicator, sequence number) on an
//! aligned clock, who arrived when, who waited how long. Waiting for a late rank is carved out
//! of each rank's exposed communication (into `wait`), so transfer time and waiting are told apart.

use std::collections::BTreeMap;

use super::facts::*;
use super::DiagnoseOptions;
use crate::model::{CollOp, Ns};

/// One rank's part in a collective instance.
#[derive(Debug, Clone)]
pub struct Member {
    /// Index into [`Job::ranks`].
    pub rank: usize,
    pub op: CollOp,
    pub bytes: u64,
    pub count: u64,
    pub datatype: u8,
    pub nranks: u32,
    /// Host call start (aligned clock).
    pub issued: Option<Ns>,
    /// Kernel start (aligned clock): the arrival.
    pub arrival: Option<Ns>,
    /// Kernel end (aligned clock); None when it never completed.
    pub end: Option<Ns>,
    pub exposed_ns: Ns,
    pub step: Option<u64>,
    /// Time spent waiting for the last rank to arrive (exposed part).
    pub wait_ns: Ns,
}

/// One collective across ranks.
#[derive(Debug, Clone)]
pub struct Instance {
    pub comm: u64,
    pub seq: u64,
    pub members: Vec<Member>,
    /// The last rank to arrive and by how much it trailed the one before it.
    pub last: Option<(usize, Ns)>,
    /// Kernel time after every rank had arrived (median over members).
    pub transfer_ns: Option<Ns>,
}

impl Instance {
    /// The most common (op, bytes) among members.
    pub fn op_bytes(&self) -> (CollOp, u64, u32) {
        let mut votes: BTreeMap<(u8, u64, u32), usize> = BTreeMap::new();
        for m in &self.members {
            *votes.entry((m.op as u8, m.bytes, m.nranks)).or_default() += 1;
        }
        let best = votes.into_iter().max_by_key(|(k, n)| (*n, std::cmp::Reverse(*k))).map(|(k, _)| k);
        let (op, bytes, nranks) = best.unwrap_or((0, 0, 0));
        (CollOp::from_u8(op), bytes, nranks)
    }
    /// The step most members attribute it to.
    pub fn step(&self) -> Option<u64> {
        let mut v: Vec<u64> = self.members.iter().filter_map(|m| m.step).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied()
    }
}

/// One point-to-point transfer: the `seq`-th send from `from` to `to` on `comm` and the `seq`-th
/// receive on `to` from `from` (communicator ranks); either side may be missing from the recording.
#[derive(Debug, Clone)]
pub struct P2pTransfer {
    pub comm: u64,
    pub from: u32,
    pub to: u32,
    pub seq: u64,
    /// (rank index, index into that rank's `colls`) of the send and of the receive.
    pub send: Option<(usize, usize)>,
    pub recv: Option<(usize, usize)>,
}

/// The job as the rules see it.
#[derive(Debug)]
pub struct Job {
    pub ranks: Vec<RankFacts>,
    /// Per rank: ns added to its times to reach the common clock.
    pub offsets: Vec<i64>,
    pub opts: DiagnoseOptions,
    /// Instances by (comm, seq) of collectives with a known communicator (sends and receives apart).
    pub instances: Vec<Instance>,
    /// Sends paired with the peers' receives, per peer in order.
    pub p2p: Vec<P2pTransfer>,
}

/// Where each step index first occurs in a rank's steps, searchable.
struct StepPositions(Vec<(u64, usize)>);

impl StepPositions {
    fn of(steps: &[StepFacts]) -> StepPositions {
        let mut v: Vec<(u64, usize)> = steps.iter().enumerate().map(|(i, s)| (s.index, i)).collect();
        v.sort_unstable();
        StepPositions(v)
    }

    /// The position of the first step with index `s` (as `steps.iter().position` finds it).
    fn first(&self, s: u64) -> Option<usize> {
        let i = self.0.partition_point(|x| x.0 < s);
        self.0.get(i).filter(|x| x.0 == s).map(|x| x.1)
    }
}

fn shift(t: Ns, off: i64) -> Ns {
    (t as i64 + off).max(0) as Ns
}

impl Job {
    pub fn new(mut ranks: Vec<RankFacts>, mut offsets: Vec<i64>, opts: &DiagnoseOptions) -> Job {
        offsets.resize(ranks.len(), 0);
        let mut by_key: BTreeMap<(u64, u64), Vec<Member>> = BTreeMap::new();
        let mut p2p: BTreeMap<(u64, u32, u32, u64), P2pTransfer> = BTreeMap::new();
        for (ri, r) in ranks.iter().enumerate() {
            for (ci, c) in r.colls.iter().enumerate().filter(|(_, c)| c.comm != 0 && c.is_p2p() && c.peer >= 0) {
                let send = c.op == CollOp::Send;
                let (from, to) = if send { (c.comm_rank, c.peer as u32) } else { (c.peer as u32, c.comm_rank) };
                let t = p2p.entry((c.comm, from, to, c.seq)).or_insert(P2pTransfer {
                    comm: c.comm,
                    from,
                    to,
                    seq: c.seq,
                    send: None,
                    recv: None,
                });
                if send {
                    t.send = Some((ri, ci));
                } else {
                    t.recv = Some((ri, ci));
                }
            }
        }
        for (ri, r) in ranks.iter().enumerate() {
            let off = offsets[ri];
            for c in r.colls.iter().filter(|c| c.comm != 0 && !c.is_p2p()) {
                by_key.entry((c.comm, c.seq)).or_default().push(Member {
                    rank: ri,
                    op: c.op,
                    bytes: c.bytes,
                    count: c.count,
                    datatype: c.datatype,
                    nranks: c.nranks,
                    issued: c.host.map(|h| shift(h.0, off)),
                    arrival: c.gpu.map(|g| shift(g.0, off)),
                    end: c.gpu.map(|g| shift(g.1, off)),
                    exposed_ns: c.exposed_ns,
                    step: c.step,
                    wait_ns: 0,
                });
            }
        }
        let mut instances = Vec::with_capacity(by_key.len());
        for ((comm, seq), mut members) in by_key {
            let mut arrivals: Vec<(Ns, usize)> =
                members.iter().filter_map(|m| m.arrival.map(|a| (a, m.rank))).collect();
            arrivals.sort_unstable();
            let mut last = None;
            let mut transfer = None;
            if arrivals.len() >= 2 && arrivals.len() == members.len() {
                let (t_last, r_last) = arrivals[arrivals.len() - 1];
                let t_prev = arrivals[arrivals.len() - 2].0;
                last = Some((r_last, t_last - t_prev));
                for m in &mut members {
                    if let Some(a) = m.arrival {
                        m.wait_ns = (t_last - a).min(m.exposed_ns);
                    }
                }
                let mut tr: Vec<Ns> = members.iter().filter_map(|m| m.end.map(|e| e.saturating_sub(t_last))).collect();
                tr.sort_unstable();
                transfer = tr.get(tr.len() / 2).copied();
            } else if members.len() == 1 {
                transfer = members[0].arrival.zip(members[0].end).map(|(a, e)| e - a);
            }
            instances.push(Instance { comm, seq, members, last, transfer_ns: transfer });
        }
        // Carve waiting out of exposed communication, per rank and per step.
        let step_pos: Vec<StepPositions> = ranks.iter().map(|r| StepPositions::of(&r.steps)).collect();
        for inst in &instances {
            for m in inst.members.iter().filter(|m| m.wait_ns > 0) {
                let r = &mut ranks[m.rank];
                let w = m.wait_ns.min(r.split.comm_ns);
                r.split.comm_ns -= w;
                r.split.wait_ns += w;
                if let Some(st) = m.step.and_then(|s| step_pos[m.rank].first(s)).map(|i| &mut r.steps[i]) {
                    let w = m.wait_ns.min(st.split.comm_ns);
                    st.split.comm_ns -= w;
                    st.split.wait_ns += w;
                }
            }
        }
        Job { ranks, offsets, opts: opts.clone(), instances, p2p: p2p.into_values().collect() }
    }

    /// Rank-time of the job: the sum of the ranks' analysed windows.
    pub fn total_ns(&self) -> Ns {
        self.ranks.iter().map(|r| r.window_ns()).sum()
    }

    /// Ranks (ids) of rank indices.
    pub fn rank_ids(&self, idx: impl IntoIterator<Item = usize>) -> Vec<u32> {
        let mut v: Vec<u32> = idx.into_iter().filter_map(|i| self.ranks.get(i).map(|r| r.rank)).collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    /// Fraction of the job's rank-time.
    pub fn fraction(&self, ns: Ns) -> f64 {
        let t = self.total_ns();
        if t == 0 {
            0.0
        } else {
            ns as f64 / t as f64
        }
    }

    /// The typical step time: the median GPU window of the steps of all ranks.
    pub fn median_step_ns(&self) -> Ns {
        let mut v: Vec<Ns> =
            self.ranks.iter().flat_map(|r| r.steps.iter().map(|s| s.gpu_window_ns())).filter(|&d| d > 0).collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    }

    /// The rank index of a rank id.
    pub fn index_of(&self, rank: u32) -> Option<usize> {
        self.ranks.iter().position(|r| r.rank == rank)
    }
}

/// "0x00c0ffee"
pub fn comm_hex(comm: u64) -> String {
    format!("{comm:#x}")
}
