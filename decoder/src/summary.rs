//! `tprof summary`: where the time went, per rank and overall.
//!
//! [`RankAnalysis`] is a [`TraceSink`] for one process (built in parallel per file by
//! [`crate::convert::feed_each`]); [`Summary::merge`] combines them. Per process, memory holds the
//! per-name tables, the streaming busy-time unions (a few bytes per disjoint busy period, see
//! [`crate::intervals::StreamingUnion`]), and in-flight correlation. Per event, names are looked up
//! by their interned pointer (no string hashing, no allocation).

use regex_lite::Regex;
use serde::Serialize;

use crate::clock_alignment::CollectiveEnds;
use crate::correlate::{CollectiveMatcher, RangeProjection, RangeStat};
use crate::intervals::{measure_by_cover, CompactIntervals, FastMap, StreamingUnion};
use crate::model::*;
use crate::steps::{StepFinder, StepSource, StepWindow};

mod merge;

use merge::CollectiveFact;
pub use merge::{CollectiveRow, MemcpyRow, NameRow, StepSummaryRow, Summary, Totals};

/// count / total / min / max of durations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Stat {
    pub count: u64,
    pub total_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
}

impl Stat {
    pub fn add(&mut self, d: Ns) {
        if self.count == 0 || d < self.min_ns {
            self.min_ns = d;
        }
        self.max_ns = self.max_ns.max(d);
        self.count += 1;
        self.total_ns += d;
    }
    /// `calls` calls that took `total` together (each counted at the mean for min and max).
    pub fn add_calls(&mut self, calls: u64, total: Ns) {
        if calls == 0 {
            return;
        }
        let mean = total / calls;
        if self.count == 0 || mean < self.min_ns {
            self.min_ns = mean;
        }
        self.max_ns = self.max_ns.max(mean);
        self.count += calls;
        self.total_ns += total;
    }
    pub fn merge(&mut self, o: &Stat) {
        if o.count == 0 {
            return;
        }
        if self.count == 0 || o.min_ns < self.min_ns {
            self.min_ns = o.min_ns;
        }
        self.max_ns = self.max_ns.max(o.max_ns);
        self.count += o.count;
        self.total_ns += o.total_ns;
    }
    pub fn avg_ns(&self) -> u64 {
        self.total_ns.checked_div(self.count).unwrap_or(0)
    }
}

/// Per-step facts of one rank.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct StepRow {
    pub index: u64,
    pub name: String,
    pub start_ns: Ns,
    pub duration_ns: Ns,
    pub gpu_busy_ns: Ns,
    pub compute_ns: Ns,
    pub communication_ns: Ns,
    /// Communication time not overlapped by compute.
    pub exposed_comm_ns: Ns,
}

/// What one process amounted to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct RankSummary {
    pub label: String,
    pub rank: Option<u32>,
    pub host: String,
    pub pid: u32,
    pub path: String,
    pub start_ns: Ns,
    pub end_ns: Ns,
    pub span_ns: Ns,
    /// The part of the span that capture windows observed (production modes); `span_ns` when the
    /// whole run was recorded. Busy / compute / communication / memory / idle are within it.
    pub observed_ns: Ns,
    pub gpu_busy_ns: Ns,
    pub compute_ns: Ns,
    pub communication_ns: Ns,
    pub memory_ns: Ns,
    pub idle_ns: Ns,
    /// True when host API calls were recorded but no GPU activity: GPU times are missing.
    pub gpu_times_missing: bool,
    pub events: u64,
    pub step_source: Option<StepSource>,
    pub steps: Vec<StepRow>,
    /// GPU counters this process sampled (run stats; per-step means in `Summary::counters`).
    pub counters: crate::gpu_counters::RankCounters,
    /// Host resources of the process tree (and the machine), run and per step; None without host samples.
    pub host_resources: Option<crate::host::RankHost>,
    #[serde(skip)]
    nccl: crate::nccl_plugin::table::RankNccl,
    #[serde(skip)]
    kernels: FastMap<Name, Stat>,
    #[serde(skip)]
    apis: FastMap<Name, Stat>,
    #[serde(skip)]
    memcpy: FastMap<&'static str, (Stat, u64)>,
    #[serde(skip)]
    collectives: Vec<CollectiveFact>,
    #[serde(skip)]
    lone_kernels: LoneCommKernels,
    #[serde(skip)]
    nvtx: Vec<RangeStat>,
}

/// NCCL kernels that no call can claim (the input promised it has none, see
/// [`TraceSink::handle_no_collective_calls`]), counted per op as they arrive instead of kept to the
/// end: each would become an instance of that op with no bytes, no ranks and its kernel's time, so
/// what the collective rows get from them does not depend on their order.
#[derive(Debug, Clone, Default)]
struct LoneCommKernels {
    /// (op, kernels, their time)
    by_op: Vec<(CollOp, u64, Ns)>,
}

impl LoneCommKernels {
    fn add(&mut self, op: CollOp, d: Ns) {
        match self.by_op.iter_mut().find(|e| e.0 == op) {
            Some(e) => {
                e.1 += 1;
                e.2 += d;
            }
            None => self.by_op.push((op, 1, d)),
        }
    }
}

const COMPUTE: u8 = 0;
const COMM: u8 = 1;
const MEMORY: u8 = 2;

/// Per-name stats keyed by the name's interned pointer (equal names from one interner share it);
/// names that were not interned get several slots, merged by text at the end.
#[derive(Debug, Default)]
struct NameStats {
    index: FastMap<usize, u32>,
    /// Names looked up lately, (key, slot) in a pair of places picked by the key's bits (the latest
    /// first): most lookups skip the map (a process has a few hundred names). Empty until the first
    /// name (a finished rank's emptied table holds none).
    recent: Vec<(usize, u32)>,
    /// (name, stat, is an NCCL kernel name, the collective op the name says)
    slots: Vec<(Name, Stat, bool, CollOp)>,
}

/// Places in [`NameStats::recent`].
const RECENT: usize = 1024;

impl NameStats {
    #[inline(always)]
    fn slot(&mut self, n: &Name) -> &mut (Name, Stat, bool, CollOp) {
        let key = crate::ptr_cache::name_key(n);
        let place = ((key >> 4 ^ key >> 13) % RECENT) & !1;
        if let Some(&[(k0, i0), (k1, i1)]) = self.recent.get(place..place + 2) {
            if k0 == key {
                return &mut self.slots[i0 as usize];
            }
            if k1 == key {
                return &mut self.slots[i1 as usize];
            }
        }
        self.slot_of(n, key, place)
    }

    /// [`NameStats::slot`] of a name not in its recent place.
    #[inline(never)]
    fn slot_of(&mut self, n: &Name, key: usize, place: usize) -> &mut (Name, Stat, bool, CollOp) {
        let slots = &mut self.slots;
        let i = *self.index.entry(key).or_insert_with(|| {
            let comm = is_comm_kernel(n);
            slots.push((n.clone(), Stat::default(), comm, if comm { coll_op_from_name(n) } else { CollOp::Unknown }));
            (slots.len() - 1) as u32
        });
        if self.recent.is_empty() {
            // Key 0 is no name's.
            self.recent = vec![(0, 0); RECENT];
        }
        self.recent[place + 1] = self.recent[place];
        self.recent[place] = (key, i);
        &mut self.slots[i as usize]
    }

    fn into_map(self) -> FastMap<Name, Stat> {
        let mut m: FastMap<Name, Stat> = FastMap::with_capacity_and_hasher(self.slots.len(), Default::default());
        for (n, st, _, _) in self.slots {
            m.entry(n).or_default().merge(&st);
        }
        m
    }
}

/// The per-process analysis sink.
#[derive(Debug)]
pub struct RankAnalysis {
    info: Option<ProcessInfo>,
    kernels: NameStats,
    apis: NameStats,
    memcpy: FastMap<&'static str, (Stat, u64)>,
    /// Busy-time unions per kind (COMPUTE, COMM, MEMORY).
    busy: [StreamingUnion; 3],
    span: (Ns, Ns),
    events: u64,
    api_count: u64,
    gpu_count: u64,
    colls: CollectiveMatcher<CollectiveFact>,
    /// The input promised no collective calls: NCCL kernels without collective info go to `lone`.
    no_calls: bool,
    lone: LoneCommKernels,
    proj: RangeProjection,
    steps: Option<StepFinder>,
    counters: crate::gpu_counters::CounterSet,
    host: crate::host::HostSeries,
    /// Collective ends for clock alignment.
    pub clock: CollectiveEnds,
    nccl: crate::nccl_plugin::table::RankNccl,
    pub result: Option<RankSummary>,
}

impl RankAnalysis {
    pub fn new(step_pattern: &Regex) -> RankAnalysis {
        RankAnalysis {
            info: None,
            kernels: NameStats::default(),
            apis: NameStats::default(),
            memcpy: FastMap::default(),
            busy: Default::default(),
            span: (u64::MAX, 0),
            events: 0,
            api_count: 0,
            gpu_count: 0,
            colls: CollectiveMatcher::default(),
            no_calls: false,
            lone: LoneCommKernels::default(),
            proj: RangeProjection::default(),
            steps: Some(StepFinder::new(step_pattern)),
            counters: Default::default(),
            host: Default::default(),
            clock: CollectiveEnds::default(),
            nccl: Default::default(),
            result: None,
        }
    }

    fn seen(&mut self, start: Ns, end: Ns) {
        self.events += 1;
        self.span.0 = self.span.0.min(start);
        self.span.1 = self.span.1.max(end);
    }

    #[inline(always)]
    fn gpu_work(&mut self, start: Ns, end: Ns, kind: u8, correlation: u64) {
        self.seen(start, end);
        self.gpu_count += 1;
        self.busy[kind as usize].push(start, end);
        self.proj.gpu(correlation, end.saturating_sub(start));
    }
}

impl TraceSink for RankAnalysis {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.info = Some(info.clone());
        self.clock.handle_process(info);
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        let d = k.duration();
        let slot = self.kernels.slot(&k.name);
        slot.1.add(d);
        // Same as `k.work_kind()`, with the name test cached per name.
        let comm = k.collective.is_some() || slot.2;
        let op = slot.3;
        self.gpu_work(k.start, k.end, if comm { COMM } else { COMPUTE }, k.correlation);
        if comm {
            // Both ignore non-communication kernels. Without calls the matcher would keep such a
            // kernel to the end and pair it with nothing: it stands alone now.
            if self.no_calls && k.collective.is_none() && k.graph_id == 0 {
                self.lone.add(op, d);
            } else {
                self.colls.kernel(k);
            }
            self.clock.handle_kernel(k);
        }
        if let Some(s) = &mut self.steps {
            s.kernel(k);
        }
    }
    fn handle_memcpy(&mut self, m: &Memcpy) {
        let e = self.memcpy.entry(m.kind.name()).or_default();
        e.0.add(m.end.saturating_sub(m.start));
        e.1 += m.bytes;
        self.gpu_work(m.start, m.end, MEMORY, m.correlation);
    }
    fn handle_memset(&mut self, m: &Memset) {
        let e = self.memcpy.entry("Memset").or_default();
        e.0.add(m.end.saturating_sub(m.start));
        e.1 += m.bytes;
        self.gpu_work(m.start, m.end, MEMORY, m.correlation);
    }
    fn handle_api(&mut self, a: &Api) {
        self.seen(a.start, a.end);
        self.api_count += a.calls();
        match a.repeat {
            None => self.apis.slot(&a.name).1.add(a.end.saturating_sub(a.start)),
            Some(r) => self.apis.slot(&a.name).1.add_calls(r.calls, r.busy),
        }
        self.proj.api(a);
    }
    fn handle_sync(&mut self, s: &SyncEvent) {
        self.seen(s.start, s.end);
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        self.seen(m.ts, m.ts);
    }
    fn handle_collective(&mut self, c: &Collective) {
        self.seen(c.start, c.end);
        self.colls.call(c);
        self.proj.collective(c);
        self.clock.handle_collective(c);
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.seen(r.start, r.end);
        self.proj.range(r);
        if let Some(s) = &mut self.steps {
            s.range(r);
        }
    }
    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        self.seen(m.ts, m.ts);
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.seen(c.ts, c.ts);
        self.counters.push(c);
    }
    fn handle_marker(&mut self, m: &Marker) {
        self.seen(m.ts, m.ts);
        if let Some(s) = &mut self.steps {
            s.marker(m);
        }
    }
    fn handle_nccl_plugin(&mut self, e: &crate::nccl_plugin::NcclPluginEvent) {
        self.nccl.handle(e);
    }
    fn handle_host_sample(&mut self, s: &HostSample) {
        self.host.push(s);
    }
    fn handle_host_entity(&mut self, e: &HostEntity) {
        self.host.entity(e);
    }
    fn handle_ranges_close_in_order(&mut self, _p: ProcId) {
        self.proj.ranges_close_in_order();
    }
    fn handle_no_collective_calls(&mut self, p: ProcId) {
        self.no_calls = true;
        self.clock.handle_no_collective_calls(p);
    }
    fn handle_process_end(&mut self, p: ProcId) {
        self.clock.handle_process_end(p);
        self.nccl.finish();
        self.colls.finish();
        let info = self.info.take();
        let span = if self.span.0 == u64::MAX { (0, 0) } else { self.span };
        let [compute, comm, mem] = std::mem::take(&mut self.busy).map(StreamingUnion::finish);
        let busy = BusyUnions { compute, comm, mem };
        let unobserved = self.steps.as_ref().map(|f| f.unobserved(span)).unwrap_or_default();
        let (step_source, windows) = match self.steps.take() {
            Some(f) => {
                let (s, w) = f.finish(span);
                (Some(s), w)
            }
            None => (None, Vec::new()),
        };
        let ws: Vec<(Ns, Ns)> = windows.iter().map(|w| (w.start, w.end)).collect();
        // The three unions are walked once, together: totals and per-step parts of every measure.
        let (cover, in_steps) = busy.by_cover(&ws);
        let seen = if unobserved.is_empty() {
            ObservedBusy::of(&cover, span.1 - span.0)
        } else {
            ObservedBusy::within(&busy, span, &unobserved)
        };
        let steps = rank_step_rows(&windows, &in_steps);
        self.result = Some(RankSummary {
            label: info.as_ref().map(|i| i.label()).unwrap_or_default(),
            rank: info.as_ref().and_then(|i| i.rank),
            host: info.as_ref().map(|i| i.host.to_string()).unwrap_or_default(),
            pid: info.as_ref().map(|i| i.pid).unwrap_or(0),
            path: info.as_ref().map(|i| i.path.display().to_string()).unwrap_or_default(),
            start_ns: span.0,
            end_ns: span.1,
            span_ns: span.1 - span.0,
            observed_ns: seen.observed_ns,
            gpu_busy_ns: seen.busy_ns,
            compute_ns: seen.compute_ns,
            communication_ns: seen.cm_ns - seen.compute_ns,
            memory_ns: seen.busy_ns - seen.cm_ns,
            idle_ns: seen.observed_ns.saturating_sub(seen.busy_ns),
            gpu_times_missing: self.api_count > 0 && self.gpu_count == 0,
            events: self.events,
            step_source,
            counters: crate::gpu_counters::RankCounters::build(std::mem::take(&mut self.counters), &windows),
            host_resources: {
                let mut h = std::mem::take(&mut self.host);
                h.finish();
                let steps: Vec<(u64, Ns, Ns)> = windows.iter().map(|w| (w.index, w.start, w.end)).collect();
                crate::host::RankHost::build(&h, info.as_ref().map(|i| i.pid).unwrap_or(0), &steps)
            },
            steps,
            kernels: std::mem::take(&mut self.kernels).into_map(),
            apis: std::mem::take(&mut self.apis).into_map(),
            memcpy: std::mem::take(&mut self.memcpy),
            collectives: std::mem::take(&mut self.colls.done),
            lone_kernels: std::mem::take(&mut self.lone),
            // Taken, not cleared: a finished rank keeps none of its correlation tables' memory.
            nvtx: std::mem::take(&mut self.proj).finish(),
            nccl: std::mem::take(&mut self.nccl),
        });
    }
}

/// A finished process's busy time per kind (sorted, disjoint).
struct BusyUnions {
    compute: CompactIntervals,
    comm: CompactIntervals,
    mem: CompactIntervals,
}

/// Time by which kinds of GPU work cover it: entry `m` is the time when exactly the kinds whose
/// bits (`1 << COMPUTE`, `1 << COMM`, `1 << MEMORY`) are set in `m` were busy.
type Cover = [Ns; 8];

impl BusyUnions {
    /// [`Cover`] in all and inside each window, in one pass over the three unions.
    fn by_cover(&self, windows: &[(Ns, Ns)]) -> (Cover, Vec<Cover>) {
        measure_by_cover([self.compute.iter(), self.comm.iter(), self.mem.iter()], windows)
    }
}

/// The time of `cover` whose kinds mask passes `when`.
fn covered(cover: &Cover, when: impl Fn(usize) -> bool) -> Ns {
    (1..cover.len()).filter(|&m| when(m)).map(|m| cover[m]).sum()
}

/// Some kind of GPU work.
fn any_work(m: usize) -> bool {
    m != 0
}
fn compute_work(m: usize) -> bool {
    m & (1 << COMPUTE) != 0
}
fn comm_work(m: usize) -> bool {
    m & (1 << COMM) != 0
}
/// Compute or communication.
fn cm_work(m: usize) -> bool {
    compute_work(m) || comm_work(m)
}
/// Communication overlapped by compute.
fn overlapped_comm(m: usize) -> bool {
    compute_work(m) && comm_work(m)
}

/// Busy times within the observed part of a process's span.
struct ObservedBusy {
    busy_ns: Ns,
    compute_ns: Ns,
    /// Compute or communication.
    cm_ns: Ns,
    observed_ns: Ns,
}

impl ObservedBusy {
    /// The whole span observed.
    fn of(cover: &Cover, observed_ns: Ns) -> ObservedBusy {
        ObservedBusy {
            busy_ns: covered(cover, any_work),
            compute_ns: covered(cover, compute_work),
            cm_ns: covered(cover, cm_work),
            observed_ns,
        }
    }

    /// With capture windows: only the observed time counts (GPU work that ends after a window
    /// closed is clipped to it). `unobserved` is sorted and disjoint.
    fn within(busy: &BusyUnions, span: (Ns, Ns), unobserved: &[(Ns, Ns)]) -> ObservedBusy {
        let mut observed = Vec::new();
        let mut from = span.0;
        for &(a, b) in unobserved {
            if a > from {
                observed.push((from, a));
            }
            from = from.max(b);
        }
        if span.1 > from {
            observed.push((from, span.1));
        }
        // The observed windows are disjoint: their parts add up.
        let (_, parts) = busy.by_cover(&observed);
        let mut cover: Cover = [0; 8];
        for part in &parts {
            for (c, p) in cover.iter_mut().zip(part) {
                *c += p;
            }
        }
        ObservedBusy::of(&cover, observed.iter().map(|w| w.1 - w.0).sum())
    }
}

/// One row per step window; `in_steps` is the [`Cover`] inside each.
fn rank_step_rows(windows: &[StepWindow], in_steps: &[Cover]) -> Vec<StepRow> {
    windows
        .iter()
        .zip(in_steps)
        .map(|(w, cover)| {
            let comm = covered(cover, comm_work);
            StepRow {
                index: w.index,
                name: w.name.clone(),
                start_ns: w.start,
                duration_ns: w.end.saturating_sub(w.start),
                gpu_busy_ns: covered(cover, any_work),
                compute_ns: covered(cover, compute_work),
                communication_ns: comm,
                exposed_comm_ns: comm - covered(cover, overlapped_comm),
            }
        })
        .collect()
}

/// nccl-tests bus bandwidth factor (shared with the shim's metrics).
pub use tprof_format::bus_bandwidth::bus_factor;

/// Message-size bucket: the power of two at or above `bytes`.
pub fn size_bucket(bytes: u64) -> u64 {
    bytes.max(1).next_power_of_two()
}

/// Demangle a C++ kernel name when it is mangled (capped like every name, see `bounded_names`).
pub use crate::bounded_names::demangle;

/// Decode `sources` in parallel and summarize them. Files that cannot be used are returned as
/// errors; everything usable is summarized.
pub fn summarize(
    sources: &[crate::input::Source],
    step_pattern: &Regex,
    opts: &crate::convert::ConvertOptions,
) -> (Summary, Vec<crate::error::InputError>) {
    let each = crate::convert::feed_each(sources, || RankAnalysis::new(step_pattern), opts);
    let mut notes: Vec<String> = each.notes.iter().map(|n| n.to_string()).collect();
    let with_colls = each.sinks.iter().filter(|s| !s.clock.ends.is_empty()).count();
    let clock = (with_colls > 1).then(|| {
        let ends: Vec<&CollectiveEnds> = each.sinks.iter().map(|s| &s.clock).collect();
        crate::clock_alignment::plan(&each.processes, &ends)
    });
    if let Some(c) = &clock {
        if c.matched_collectives == 0 && each.processes.len() > 1 {
            notes.push("clock alignment: no collective was seen on more than one rank; hosts not refined".into());
        }
    }
    let ranks = each.sinks.into_iter().filter_map(|s| s.result).collect();
    (Summary::merge(ranks, clock, notes), each.errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    // The bus factors are tested where they live (format's bus_bandwidth).
    #[test]
    fn size_buckets_and_names() {
        assert_eq!(size_bucket(3000), 4096);
        assert_eq!(crate::units::byte_size(64 << 20), "64 MiB");
        assert_eq!(demangle("_Z4gemmPfS_S_i"), "gemm(float*, float*, float*, int)");
    }
}
