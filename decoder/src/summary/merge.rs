//! [`Summary::merge`]: the per-rank results combined into the summary's tables (names, copies,
//! collectives with their bandwidths, steps, ranges).

use std::collections::BTreeMap;

use serde::Serialize;

use super::{bus_factor, demangle, size_bucket, RankSummary, Stat};
use crate::clock_alignment::ClockPlan;
use crate::correlate::{CollectiveInstance, FromPairing, RangeStat};
use crate::intervals::FastMap;
use crate::model::*;

/// One kernel or API call name, over all ranks.
#[derive(Debug, Clone, Serialize)]
pub struct NameRow {
    pub name: String,
    pub count: u64,
    pub total_ns: u64,
    pub avg_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    /// Share (percent) of the time of all kernels, or of all API calls.
    pub pct: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct MemcpyRow {
    pub kind: String,
    pub count: u64,
    pub bytes: u64,
    pub total_ns: u64,
    pub bandwidth_gbps: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct CollectiveRow {
    pub op: String,
    /// Message-size bucket upper bound (bytes, power of two).
    pub size_bucket: u64,
    pub nranks: u32,
    pub count: u64,
    /// Total bytes over all calls of the row (per rank, summed over ranks).
    pub bytes: u64,
    /// Mean message size.
    pub msg_bytes: u64,
    pub time_ns: u64,
    pub algbw_gbps: f64,
    pub busbw_gbps: f64,
    /// Calls whose time came from the GPU kernel (the rest from the host call).
    pub gpu_timed: u64,
}

#[derive(Debug, Clone, Serialize)]
pub struct StepSummaryRow {
    pub index: u64,
    pub name: String,
    pub ranks: u32,
    /// The slowest rank's step time.
    pub duration_ns: u64,
    pub mean_duration_ns: u64,
    pub mean_gpu_busy_ns: u64,
    pub mean_exposed_comm_ns: u64,
}

/// Overall totals.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Totals {
    pub ranks: usize,
    pub span_ns: u64,
    pub gpu_busy_ns: u64,
    pub compute_ns: u64,
    pub communication_ns: u64,
    pub memory_ns: u64,
    pub idle_ns: u64,
    pub kernel_ns: u64,
    pub events: u64,
}

/// The whole summary (the `--json` document).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    pub totals: Totals,
    pub ranks: Vec<RankSummary>,
    pub kernels: Vec<NameRow>,
    pub api: Vec<NameRow>,
    pub memcpy: Vec<MemcpyRow>,
    pub collectives: Vec<CollectiveRow>,
    pub steps: Vec<StepSummaryRow>,
    pub nvtx: Vec<RangeStat>,
    /// GPU counters: per rank over the run, and per-step means across ranks.
    pub counters: crate::gpu_counters::CountersSummary,
    pub clock: Option<ClockPlan>,
    /// What NCCL's profiler plugin recorded (absent without plugin records).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nccl_plugin: Option<crate::nccl_plugin::table::NcclPluginSummary>,
    pub notes: Vec<String>,
}

impl Summary {
    /// Combine per-rank results (in rank order).
    pub fn merge(mut ranks: Vec<RankSummary>, clock: Option<ClockPlan>, notes: Vec<String>) -> Summary {
        ranks.sort_by_key(|r| (r.rank.unwrap_or(u32::MAX), r.pid));
        let mut s = Summary { clock, notes, totals: Totals::of(&ranks), ..Summary::default() };
        let mut all = RankTables::default();
        // The ranks of a job take part in the same collectives, mostly: as many instances as the
        // rank with the most, made room for at once (no rehashing as they arrive).
        all.instances.reserve(ranks.iter().map(|r| r.collectives.len()).max().unwrap_or(0));
        for r in &ranks {
            if r.gpu_times_missing {
                s.notes.push(format!(
                    "{} ({}): host API calls were recorded but no GPU activity (CUPTI unavailable?): GPU times are missing",
                    r.label, r.path
                ));
            }
            all.add(r);
        }
        s.totals.kernel_ns = all.kernels.values().map(|k| k.total_ns).sum();
        s.kernels = name_rows(&all.kernels, demangle);
        s.api = name_rows(&all.apis, |n| n.to_string());
        s.memcpy = memcpy_rows(all.memcpy);
        s.collectives = collective_rows(all.collectives, all.instances);
        s.steps = step_summary_rows(all.steps);
        s.nvtx = all.nvtx.into_values().collect();
        s.nvtx.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then(b.range_ns.cmp(&a.range_ns)));
        s.counters =
            crate::gpu_counters::CountersSummary::merge(ranks.iter().map(|r| (r.rank, r.label.as_str(), &r.counters)));
        s.nccl_plugin = crate::nccl_plugin::table::merge(
            ranks.iter().enumerate().map(|(i, r)| (r.rank.unwrap_or(i as u32), &r.nccl)),
        );
        s.ranks = ranks;
        s
    }
}

impl Totals {
    /// The ranks' times summed, the span from the first start to the last end (`kernel_ns` is
    /// left to [`Summary::merge`]).
    fn of(ranks: &[RankSummary]) -> Totals {
        let mut t = Totals { ranks: ranks.len(), ..Totals::default() };
        let (lo, hi) = ranks.iter().fold((u64::MAX, 0), |a, r| (a.0.min(r.start_ns), a.1.max(r.end_ns)));
        t.span_ns = hi.saturating_sub(lo);
        for r in ranks {
            t.gpu_busy_ns += r.gpu_busy_ns;
            t.compute_ns += r.compute_ns;
            t.communication_ns += r.communication_ns;
            t.memory_ns += r.memory_ns;
            t.idle_ns += r.idle_ns;
            t.events += r.events;
        }
        t
    }
}

/// Calls of one collective row (op, size bucket, nranks), summed over ranks.
#[derive(Debug, Default)]
struct CollectiveTally {
    count: u64,
    bytes: u64,
    time_ns: u64,
    /// Bytes times the bus factor, summed per call (weighted by time in the row).
    bus_bytes: f64,
    gpu_timed: u64,
}

/// One collective instance (comm, seq) across ranks: the shortest GPU duration is the transfer
/// time of the last rank to arrive (the others' kernels include waiting for it), which is what
/// nccl-tests' busbw measures.
#[derive(Debug, Clone, Copy)]
struct Instance {
    op: CollOp,
    bytes: u64,
    nranks: u32,
    shortest_ns: u64,
}

/// One step index over ranks.
#[derive(Debug)]
struct StepTally {
    name: String,
    ranks: u32,
    max_ns: u64,
    sum_ns: u64,
    busy_ns: u64,
    exposed_ns: u64,
}

/// What the merge takes of one paired collective: 40 bytes where a [`CollectiveInstance`] takes 80
/// (the host and GPU spans), kept per collective by every rank until the merge. The summary's
/// matcher makes them directly.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct CollectiveFact {
    comm: u64,
    seq: u64,
    bytes: u64,
    /// [`CollectiveInstance::time_ns`]: the kernel's duration when `gpu_timed`, else the host call's.
    time_ns: Ns,
    nranks: u32,
    op: CollOp,
    /// Whether the GPU span is known.
    gpu_timed: bool,
}

impl From<&CollectiveInstance> for CollectiveFact {
    fn from(i: &CollectiveInstance) -> Self {
        CollectiveFact {
            comm: i.comm,
            seq: i.seq,
            bytes: i.bytes,
            time_ns: i.time_ns(),
            nranks: i.nranks,
            op: i.op,
            gpu_timed: i.gpu.is_some(),
        }
    }
}

impl FromPairing for CollectiveFact {
    #[inline]
    fn from_pairing(call: Option<&Collective>, kernel: Option<&Kernel>, gpu: Option<(Ns, Ns)>) -> Self {
        CollectiveFact::from(&CollectiveInstance::from_pairing(call, kernel, gpu))
    }
}

/// The per-name tables of every rank, merged.
#[derive(Debug, Default)]
struct RankTables {
    kernels: FastMap<Name, Stat>,
    apis: FastMap<Name, Stat>,
    memcpy: BTreeMap<&'static str, (Stat, u64)>,
    collectives: BTreeMap<(CollOp, u64, u32), CollectiveTally>,
    /// By (comm, seq), hashed cheaply (std's SipHash cost most of the merge at 100 M events).
    instances: FastMap<(u64, u64), Instance>,
    steps: BTreeMap<u64, StepTally>,
    nvtx: BTreeMap<String, RangeStat>,
}

impl RankTables {
    fn add(&mut self, r: &RankSummary) {
        for (n, st) in &r.kernels {
            self.kernels.entry(n.clone()).or_default().merge(st);
        }
        for (n, st) in &r.apis {
            self.apis.entry(n.clone()).or_default().merge(st);
        }
        for (k, (st, b)) in &r.memcpy {
            let e = self.memcpy.entry(k).or_default();
            e.0.merge(st);
            e.1 += b;
        }
        for c in &r.collectives {
            self.add_collective(c);
        }
        for &(op, n, time_ns) in &r.lone_kernels.by_op {
            // As `add_collective` of `n` instances with no bytes and no ranks, each GPU-timed.
            self.tally_collectives(op, 0, 0, n, time_ns, n);
        }
        for st in &r.steps {
            let e = self.steps.entry(st.index).or_insert_with(|| StepTally {
                name: st.name.clone(),
                ranks: 0,
                max_ns: 0,
                sum_ns: 0,
                busy_ns: 0,
                exposed_ns: 0,
            });
            e.ranks += 1;
            e.max_ns = e.max_ns.max(st.duration_ns);
            e.sum_ns += st.duration_ns;
            e.busy_ns += st.gpu_busy_ns;
            e.exposed_ns += st.exposed_comm_ns;
        }
        for n in &r.nvtx {
            let e = self
                .nvtx
                .entry(n.name.clone())
                .or_insert_with(|| RangeStat { name: n.name.clone(), ..RangeStat::default() });
            e.count += n.count;
            e.range_ns += n.range_ns;
            e.gpu_ns += n.gpu_ns;
        }
    }

    /// `count` collectives of `op`, `bytes` each over `nranks` ranks, taking `time_ns` in all, of
    /// which `gpu_timed` have GPU times: into their row.
    fn tally_collectives(&mut self, op: CollOp, bytes: u64, nranks: u32, count: u64, time_ns: Ns, gpu_timed: u64) {
        let e = self.collectives.entry((op, size_bucket(bytes), nranks)).or_default();
        e.count += count;
        e.bytes += bytes * count;
        e.time_ns += time_ns;
        e.bus_bytes += (bytes * count) as f64 * bus_factor(op, nranks);
        e.gpu_timed += gpu_timed;
    }

    fn add_collective(&mut self, c: &CollectiveFact) {
        self.tally_collectives(c.op, c.bytes, c.nranks, 1, c.time_ns, c.gpu_timed as u64);
        if c.gpu_timed && c.comm != 0 && c.op.moves_data() {
            // The kernel's duration, when it is known.
            let dur = c.time_ns;
            let inst = self.instances.entry((c.comm, c.seq)).or_insert(Instance {
                op: c.op,
                bytes: c.bytes,
                nranks: c.nranks,
                shortest_ns: dur,
            });
            inst.shortest_ns = inst.shortest_ns.min(dur);
        }
    }
}

/// Rows by total time, most first, each with its share of all (names as `name_of` writes them).
fn name_rows(stats: &FastMap<Name, Stat>, name_of: impl Fn(&str) -> String) -> Vec<NameRow> {
    let total: u64 = stats.values().map(|k| k.total_ns).sum();
    let mut rows: Vec<NameRow> = stats
        .iter()
        .map(|(n, k)| NameRow {
            name: name_of(n),
            count: k.count,
            total_ns: k.total_ns,
            avg_ns: k.avg_ns(),
            min_ns: k.min_ns,
            max_ns: k.max_ns,
            pct: if total == 0 { 0.0 } else { 100.0 * k.total_ns as f64 / total as f64 },
        })
        .collect();
    rows.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.name.cmp(&b.name)));
    rows
}

fn memcpy_rows(memcpy: BTreeMap<&'static str, (Stat, u64)>) -> Vec<MemcpyRow> {
    memcpy
        .into_iter()
        .map(|(k, (st, bytes))| MemcpyRow {
            kind: k.to_string(),
            count: st.count,
            bytes,
            total_ns: st.total_ns,
            bandwidth_gbps: if st.total_ns == 0 { 0.0 } else { bytes as f64 / st.total_ns as f64 },
        })
        .collect()
}

/// Collective rows; bandwidths from the transfer time (waiting for late ranks excluded) when
/// instances matched across ranks, else from the calls' times.
fn collective_rows(
    rows: BTreeMap<(CollOp, u64, u32), CollectiveTally>,
    instances: FastMap<(u64, u64), Instance>,
) -> Vec<CollectiveRow> {
    // (algorithm bytes, bus bytes, transfer time) per row, from the matched instances.
    let mut transfer: BTreeMap<(CollOp, u64, u32), (f64, f64, u64)> = BTreeMap::new();
    for i in instances.into_values() {
        let e = transfer.entry((i.op, size_bucket(i.bytes), i.nranks)).or_default();
        e.0 += i.bytes as f64;
        e.1 += i.bytes as f64 * bus_factor(i.op, i.nranks);
        e.2 += i.shortest_ns;
    }
    rows.into_iter()
        .map(|((op, bucket, nranks), t)| {
            let gbps = |b: f64| if t.time_ns == 0 { 0.0 } else { b / t.time_ns as f64 };
            let (algbw, busbw) = match transfer.get(&(op, bucket, nranks)) {
                Some(&(alg, bus, time)) if time > 0 => (alg / time as f64, bus / time as f64),
                _ => (gbps(t.bytes as f64), gbps(t.bus_bytes)),
            };
            CollectiveRow {
                op: op.name().to_string(),
                size_bucket: bucket,
                nranks,
                count: t.count,
                bytes: t.bytes,
                msg_bytes: t.bytes.checked_div(t.count).unwrap_or(0),
                time_ns: t.time_ns,
                algbw_gbps: algbw,
                busbw_gbps: busbw,
                gpu_timed: t.gpu_timed,
            }
        })
        .collect()
}

fn step_summary_rows(steps: BTreeMap<u64, StepTally>) -> Vec<StepSummaryRow> {
    steps
        .into_iter()
        .map(|(index, t)| {
            let n = t.ranks.max(1) as u64;
            StepSummaryRow {
                index,
                name: t.name,
                ranks: t.ranks,
                duration_ns: t.max_ns,
                mean_duration_ns: t.sum_ns / n,
                mean_gpu_busy_ns: t.busy_ns / n,
                mean_exposed_comm_ns: t.exposed_ns / n,
            }
        })
        .collect()
}
