//! Clock alignment across hosts.
//!
//! Each ring process maps its ticks to wall-clock ns with its own ClockSync / header wall-mono
//! pairs (in the ring input). Hosts' wall clocks disagree (NTP error: micro- to milliseconds), so
//! the plan refines them: the GPU kernels of one collective (same communicator, same sequence
//! number) end at nearly the same instant on every rank, so per host the median difference of those
//! ends to the reference host (the one holding the lowest rank) is its offset. What remains after
//! the shift — the spread of the collective ends — is reported as the residual skew.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::intervals::FastMap;
use crate::model::*;

/// A sink that keeps, per process, the GPU end time of each data-moving collective, keyed by
/// (communicator, sequence number). Memory is proportional to the number of collectives only.
#[derive(Debug, Default)]
pub struct CollectiveEnds {
    /// (comm, seq) -> end of its kernel (or of the host call when no kernel is known).
    pub ends: FastMap<(u64, u64), Ns>,
    pending_calls: FastMap<u64, (u64, u64, Ns)>,
    kernel_ends: FastMap<u64, Ns>,
    host: Option<Name>,
    path: Option<PathBuf>,
    rank: Option<u32>,
    /// Whether a kernel name is an NCCL kernel, by name pointer (the name kept so the pointer
    /// stays its own): the name test runs once per distinct name.
    is_comm: FastMap<usize, (Name, bool)>,
    /// The input promised no collective calls: no kernel end is kept for a call to find.
    no_calls: bool,
}

impl TraceSink for CollectiveEnds {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.host = Some(info.host.clone());
        self.path = Some(info.path.clone());
        self.rank = info.rank;
    }
    fn handle_collective(&mut self, c: &Collective) {
        if !c.op.moves_data() || c.comm == 0 {
            return;
        }
        if c.correlation != 0 {
            if let Some(end) = self.kernel_ends.remove(&c.correlation) {
                self.ends.insert((c.comm, c.seq), end);
                return;
            }
            self.pending_calls.insert(c.correlation, (c.comm, c.seq, c.end));
        } else {
            self.ends.insert((c.comm, c.seq), c.end);
        }
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        if k.correlation == 0 {
            return;
        }
        // Same as `k.work_kind() != Communication`, with the name test cached per name.
        let key = crate::ptr_cache::name_key(&k.name);
        let comm = k.collective.is_some()
            || self.is_comm.entry(key).or_insert_with(|| (k.name.clone(), is_comm_kernel(&k.name))).1;
        if !comm {
            return;
        }
        match self.pending_calls.remove(&k.correlation) {
            Some((comm, seq, _)) => {
                self.ends.insert((comm, seq), k.end);
            }
            None if self.no_calls => {}
            None => {
                self.kernel_ends.insert(k.correlation, k.end);
            }
        }
    }
    fn handle_no_collective_calls(&mut self, _p: ProcId) {
        self.no_calls = true;
    }
    fn handle_process_end(&mut self, _p: ProcId) {
        // Calls whose kernel never showed up (CUPTI off): use the host call's end.
        for (_, (comm, seq, end)) in self.pending_calls.drain() {
            self.ends.entry((comm, seq)).or_insert(end);
        }
        self.kernel_ends.clear();
        self.is_comm = FastMap::default();
        self.no_calls = false;
    }
}

/// Offsets to apply per process, and how well they agree.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ClockPlan {
    /// Per host: offset added to its times (ns), and how many collectives backed it.
    pub hosts: Vec<HostOffset>,
    /// File -> offset (ns).
    #[serde(skip)]
    pub by_path: HashMap<PathBuf, i64>,
    /// Collectives seen on more than one rank.
    pub matched_collectives: usize,
    /// Spread of collective ends across ranks after alignment: median and max (ns).
    pub residual_median_ns: u64,
    pub residual_max_ns: u64,
    /// Spread before alignment (max, ns), to show what alignment did.
    pub before_max_ns: u64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct HostOffset {
    pub host: String,
    pub offset_ns: i64,
    pub samples: usize,
}

impl ClockPlan {
    pub fn offset_of(&self, path: &Path) -> i64 {
        self.by_path.get(path).copied().unwrap_or(0)
    }
}

fn median_i64(v: &mut [i64]) -> Option<i64> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[v.len() / 2])
}

/// Compute per-host offsets from each process's collective ends (`ends[i]` belongs to `procs[i]`).
pub fn plan(procs: &[ProcessInfo], ends: &[&CollectiveEnds]) -> ClockPlan {
    let mut hosts: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, p) in procs.iter().enumerate() {
        hosts.entry(&p.host).or_default().push(i);
    }
    // Reference host: the one holding the lowest rank (else the first).
    let reference = procs
        .iter()
        .enumerate()
        .min_by_key(|(i, p)| (p.rank.unwrap_or(u32::MAX), *i))
        .map(|(_, p)| &*p.host)
        .unwrap_or("");
    // Per host: (comm, seq) -> mean end over its processes.
    let host_ends = |idx: &[usize]| -> FastMap<(u64, u64), i64> {
        let mut acc: FastMap<(u64, u64), (i128, i128)> = FastMap::default();
        for &i in idx {
            if let Some(e) = ends.get(i) {
                for (k, &t) in &e.ends {
                    let a = acc.entry(*k).or_default();
                    a.0 += t as i128;
                    a.1 += 1;
                }
            }
        }
        acc.into_iter().map(|(k, (s, n))| (k, (s / n) as i64)).collect()
    };
    let ref_ends = hosts.get(reference).map(|v| host_ends(v)).unwrap_or_default();
    let mut out = ClockPlan::default();
    let mut offsets: HashMap<&str, i64> = HashMap::new();
    for (host, idx) in &hosts {
        let (offset, samples) = if *host == reference {
            (0, ref_ends.len())
        } else {
            let mine = host_ends(idx);
            let mut d: Vec<i64> = mine.iter().filter_map(|(k, &t)| ref_ends.get(k).map(|&r| r - t)).collect();
            let n = d.len();
            (median_i64(&mut d).unwrap_or(0), n)
        };
        offsets.insert(host, offset);
        out.hosts.push(HostOffset { host: host.to_string(), offset_ns: offset, samples });
        for &i in idx {
            out.by_path.insert(procs[i].path.clone(), offset);
        }
    }
    // Residual: spread of each collective's ends across processes, before and after.
    // (raw min, raw max, aligned min, aligned max, ranks) per collective.
    type Spread = (i64, i64, i64, i64, usize);
    let mut all: FastMap<(u64, u64), Spread> = FastMap::default();
    for (i, e) in ends.iter().enumerate() {
        let off = procs.get(i).and_then(|p| offsets.get(&*p.host)).copied().unwrap_or(0);
        for (k, &t) in &e.ends {
            let raw = t as i64;
            let adj = raw + off;
            let a = all.entry(*k).or_insert((raw, raw, adj, adj, 0));
            a.0 = a.0.min(raw);
            a.1 = a.1.max(raw);
            a.2 = a.2.min(adj);
            a.3 = a.3.max(adj);
            a.4 += 1;
        }
    }
    let mut spreads: Vec<i64> = Vec::new();
    for (lo, hi, alo, ahi, n) in all.values() {
        if *n > 1 {
            out.before_max_ns = out.before_max_ns.max((hi - lo) as u64);
            spreads.push(ahi - alo);
        }
    }
    out.matched_collectives = spreads.len();
    out.residual_max_ns = spreads.iter().copied().max().unwrap_or(0) as u64;
    out.residual_median_ns = median_i64(&mut spreads).unwrap_or(0) as u64;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(i: u32, host: &str) -> ProcessInfo {
        ProcessInfo {
            id: ProcId(i),
            origin: Origin::Ring,
            path: format!("r{i}").into(),
            host: host.into(),
            pid: i,
            ppid: 0,
            cmdline: String::new(),
            rank: Some(i),
            local_rank: None,
            world_size: Some(4),
            job_id: None,
            clock_offset_ns: 0,
            gpu_activity: true,
            dropped_events: 0,
        }
    }

    /// Four ranks on two hosts; host b's clock is 3.456789 ms ahead; collective ends jitter by up
    /// to 300 ns. The plan recovers the skew within 1 us.
    #[test]
    fn recovers_injected_skew() {
        let skew: i64 = 3_456_789;
        let procs = vec![proc(0, "a"), proc(1, "a"), proc(2, "b"), proc(3, "b")];
        let mut sinks: Vec<CollectiveEnds> = (0..4).map(|_| CollectiveEnds::default()).collect();
        let mut rng = 12345u64;
        for seq in 0..200u64 {
            let t = 1_000_000_000 + seq as i64 * 5_000_000;
            for (r, s) in sinks.iter_mut().enumerate() {
                rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                let jitter = ((rng >> 33) % 300) as i64;
                let local = t + jitter + if r >= 2 { skew } else { 0 };
                s.ends.insert((77, seq), local as u64);
            }
        }
        let refs: Vec<&CollectiveEnds> = sinks.iter().collect();
        let plan = plan(&procs, &refs);
        let b = plan.hosts.iter().find(|h| h.host == "b").unwrap();
        assert!((b.offset_ns + skew).abs() < 1_000, "offset {} vs skew {}", b.offset_ns, skew);
        assert_eq!(plan.matched_collectives, 200);
        assert!(plan.residual_max_ns < 1_000, "{plan:?}");
        assert!(plan.before_max_ns >= skew as u64);
        assert_eq!(plan.offset_of(Path::new("r3")), b.offset_ns);
    }

    #[test]
    fn probe_joins_calls_and_kernels() {
        let mut s = CollectiveEnds::default();
        let k = Kernel {
            proc: ProcId(0),
            device: 0,
            context: 0,
            stream: 1,
            start: 10,
            end: 50,
            name: "ncclKernel_AllReduce".into(),
            grid: [1; 3],
            block: [1; 3],
            registers: 0,
            shared_mem: 0,
            correlation: 5,
            graph_id: 0,
            collective: None,
        };
        let c = Collective {
            proc: ProcId(0),
            tid: 1,
            op: CollOp::AllReduce,
            start: 1,
            end: 2,
            comm: 9,
            rank: 0,
            nranks: 2,
            count: 1,
            datatype: 0,
            bytes: 4,
            peer: -1,
            stream: 1,
            seq: 3,
            result: 0,
            correlation: 5,
            device: 0,
            range: None,
        };
        s.handle_collective(&c);
        s.handle_kernel(&k);
        s.handle_process_end(ProcId(0));
        assert_eq!(s.ends.get(&(9, 3)), Some(&50));
    }
}
