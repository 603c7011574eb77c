//! `tprof diagnose`: ranked verdicts (what is wrong, where, how much it costs, what to do) and
//! the efficiency headline, across ranks.
//!
//! One pass per process: [`collect::FactCollector`] (a [`crate::model::TraceSink`]) reduces a
//! rank to [`facts::RankFacts`] (per-step aggregates and short lists); [`job::Job`] joins the
//! ranks (clock alignment, collectives by communicator and sequence number, waits); each verdict
//! kind is one module of rules over the facts; [`diagnose_facts`] ranks what they found.
//!
//! Severity is the fraction of the job's wall time (rank-time summed over ranks) the problem
//! cost, 0..1. The JSON (`--json`) is [`Diagnosis`]; its keys are stable and documented in the
//! README ("Diagnoses (--json)").

pub mod collect;
pub mod evidence;
pub mod facts;
pub mod job;
pub mod runs;
pub mod timeline;

mod busy_measures;
mod coll_pairing;
mod corr_ids;
mod corr_steps;
mod gaps;
mod gpu_steps;
mod gpu_windows;
mod host_steps;
mod spans;

pub mod amp_overflow;
pub mod data_loading;
pub mod desync;
pub mod efficiency;
pub mod exposed_comm;
pub mod hang;
pub mod host_contention;
pub mod host_pipeline;
pub mod host_pressure;
pub mod hotspot;
pub mod launch_bound;
pub mod memory;
pub mod nccl_network;
pub mod nccl_shared_nic;
pub mod nccl_topology;
pub mod nccl_tuning_causes;
pub mod nic_load;
pub mod slow_collective;
pub mod slowdown;
pub mod straggler;
pub mod sync_bound;

use regex_lite::Regex;
use serde::Serialize;

use crate::clock_alignment::CollectiveEnds;
use crate::convert::ConvertOptions;
use crate::input::Source;
use crate::units::share;
use evidence::{AfterOom, Evidence, StragglerWait};
use facts::RankFacts;

/// Verdicts below this severity are dropped (kept: anything that names a correctness problem).
pub const MIN_SEVERITY: f64 = 0.0001;
/// A clean run has nothing above this.
pub const CLEAN_THRESHOLD: f64 = 0.05;

/// Stable verdict kinds (the JSON ids). Declaration order breaks severity ties.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictKind {
    Desync,
    Hang,
    Oom,
    Straggler,
    SlowCollective,
    ExposedCommunication,
    DataLoading,
    SyncBound,
    LaunchBound,
    MemoryPressure,
    AmpOverflow,
    HotspotKernel,
    Slowdown,
    HostCpuContention,
    HostMemoryPressure,
    NetworkBound,
    Topology,
    CrossNodeLatency,
}

impl VerdictKind {
    pub fn id(self) -> &'static str {
        match self {
            VerdictKind::Desync => "desync",
            VerdictKind::Hang => "hang",
            VerdictKind::Oom => "oom",
            VerdictKind::Straggler => "straggler",
            VerdictKind::SlowCollective => "slow_collective",
            VerdictKind::ExposedCommunication => "exposed_communication",
            VerdictKind::DataLoading => "data_loading",
            VerdictKind::SyncBound => "sync_bound",
            VerdictKind::LaunchBound => "launch_bound",
            VerdictKind::MemoryPressure => "memory_pressure",
            VerdictKind::AmpOverflow => "amp_overflow",
            VerdictKind::HotspotKernel => "hotspot_kernel",
            VerdictKind::Slowdown => "slowdown",
            VerdictKind::HostCpuContention => "host_cpu_contention",
            VerdictKind::HostMemoryPressure => "host_memory_pressure",
            VerdictKind::NetworkBound => "network_bound",
            VerdictKind::Topology => "topology",
            VerdictKind::CrossNodeLatency => "cross_node_latency",
        }
    }
}

/// A collective named by a verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CollectiveRef {
    /// Communicator id, hex (`"0x..."`); "" when unknown.
    pub comm: String,
    pub seq: Option<u64>,
    pub op: String,
    pub bytes: Option<u64>,
}

/// Where a problem is.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Location {
    pub device: Option<u32>,
    pub stream: Option<u64>,
    pub kernel: Option<String>,
    pub collective: Option<CollectiveRef>,
    /// Host calls involved (e.g. `cudaStreamSynchronize`).
    pub calls: Vec<String>,
}

/// One finding.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub kind: VerdictKind,
    /// Fraction of wall time lost, 0..1.
    pub severity: f64,
    pub ranks: Vec<u32>,
    pub steps: Vec<u64>,
    #[serde(rename = "where")]
    pub location: Location,
    /// Structured numbers, plus `text`: one sentence a person reads.
    pub evidence: Evidence,
    /// One line: what is wrong and what it costs.
    pub summary: String,
    /// What to change, most useful first.
    pub advice: Vec<String>,
}

impl Verdict {
    pub fn new(kind: VerdictKind, severity: f64) -> Verdict {
        Verdict {
            kind,
            severity: clamp01(severity),
            ranks: Vec::new(),
            steps: Vec::new(),
            location: Location::default(),
            evidence: Evidence::None,
            summary: String::new(),
            advice: Vec::new(),
        }
    }
    /// The human sentence of the evidence.
    pub fn evidence_text(&self) -> &str {
        self.evidence.text()
    }
}

/// The `--json` document.
#[derive(Debug, Clone, Serialize)]
pub struct Diagnosis {
    pub efficiency: efficiency::Efficiency,
    /// Most severe first.
    pub verdicts: Vec<Verdict>,
    /// Input notes (damage, missing ranks, files not used).
    pub notes: Vec<String>,
}

impl Diagnosis {
    pub fn top(&self) -> Option<&Verdict> {
        self.verdicts.first()
    }
    pub fn find(&self, kind: VerdictKind) -> Option<&Verdict> {
        self.verdicts.iter().find(|v| v.kind == kind)
    }
}

/// Options of a diagnosis.
#[derive(Debug, Clone, Default)]
pub struct DiagnoseOptions {
    /// Expected peak bus bandwidth (GB/s) of the fabric; collectives well below it are slow.
    pub peak_busbw_gbps: Option<f64>,
}

pub fn clamp01(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// Run the rules over per-rank facts (already collected) and rank the verdicts.
pub fn diagnose_facts(
    ranks: Vec<RankFacts>,
    offsets: Vec<i64>,
    opts: &DiagnoseOptions,
    notes: Vec<String>,
) -> Diagnosis {
    let job = job::Job::new(ranks, offsets, opts);
    let mut verdicts: Vec<Verdict> = Vec::new();
    verdicts.extend(desync::find(&job));
    verdicts.extend(hang::find(&job));
    verdicts.extend(memory::find_oom(&job));
    verdicts.extend(memory::find_pressure(&job));
    verdicts.extend(straggler::find(&job));
    verdicts.extend(slow_collective::find(&job));
    verdicts.extend(exposed_comm::find(&job));
    verdicts.extend(data_loading::find(&job));
    verdicts.extend(sync_bound::find(&job));
    verdicts.extend(launch_bound::find(&job));
    verdicts.extend(amp_overflow::find(&job));
    verdicts.extend(hotspot::find(&job));
    verdicts.extend(slowdown::find(&job));
    verdicts.extend(host_contention::find(&job));
    verdicts.extend(host_pressure::find_memory_pressure(&job));
    if let Some(net) = nccl_network::view(&job) {
        verdicts.extend(nccl_network::find_network_bound(&job, &net));
        verdicts.extend(nccl_topology::find(&job, &net));
        verdicts.extend(nccl_network::find_cross_node_latency(&job, &net));
    }
    hang_after_oom_is_a_consequence(&mut verdicts);
    attribute_straggler_to_cause(&mut verdicts, "launch", VerdictKind::LaunchBound);
    attribute_straggler_to_cause(&mut verdicts, "sync", VerdictKind::SyncBound);
    verdicts.retain(|v| {
        v.severity >= MIN_SEVERITY || matches!(v.kind, VerdictKind::Desync | VerdictKind::Hang | VerdictKind::Oom)
    });
    verdicts.sort_by(|a, b| b.severity.total_cmp(&a.severity).then(a.kind.cmp(&b.kind)));
    Diagnosis { efficiency: efficiency::compute(&job), verdicts, notes }
}

/// Decode `sources` (in parallel, one collector per file), align clocks, and diagnose.
pub fn diagnose(
    sources: &[Source],
    step_pattern: &Regex,
    opts: &DiagnoseOptions,
    convert: &ConvertOptions,
) -> (Diagnosis, Vec<crate::error::InputError>) {
    let each = crate::convert::feed_each(sources, || collect::FactCollector::new(step_pattern), convert);
    let mut notes: Vec<String> = each.notes.iter().map(|n| n.to_string()).collect();
    let with_colls = each.sinks.iter().filter(|s| !s.clock.ends.is_empty()).count();
    let plan = (with_colls > 1).then(|| {
        let ends: Vec<&CollectiveEnds> = each.sinks.iter().map(|s| &s.clock).collect();
        crate::clock_alignment::plan(&each.processes, &ends)
    });
    let mut ranks = Vec::new();
    let mut offsets = Vec::new();
    for (info, sink) in each.processes.iter().zip(each.sinks) {
        if let Some(f) = sink.result {
            offsets.push(plan.as_ref().map(|p| p.offset_of(&info.path)).unwrap_or(0));
            if !f.gpu_times {
                notes.push(format!(
                    "{} ({}): no GPU activity with times: GPU-side verdicts are not possible",
                    f.label, f.path
                ));
            }
            ranks.push(f);
        }
    }
    (diagnose_facts(ranks, offsets, opts, notes), each.errors)
}

/// "r0-3,7" style list of ranks.
pub fn rank_list(ranks: &[u32]) -> String {
    let mut v = ranks.to_vec();
    v.sort_unstable();
    v.dedup();
    format!("r{}", crate::convert::compress_ranges(&v))
}

/// "3-5,9" list of steps.
pub fn step_list(steps: &[u64]) -> String {
    let mut v: Vec<u32> = steps.iter().map(|&s| s.min(u32::MAX as u64) as u32).collect();
    v.sort_unstable();
    v.dedup();
    crate::convert::compress_ranges(&v)
}

/// A rank that ran out of memory exits, and the others then wait for it forever at their next
/// collective: the hang is a consequence, the out-of-memory the cause. The hang ranks second and
/// says so.
fn hang_after_oom_is_a_consequence(verdicts: &mut [Verdict]) {
    let Some(oi) = verdicts.iter().position(|v| v.kind == VerdictKind::Oom) else { return };
    let Some(hi) = verdicts.iter().position(|v| v.kind == VerdictKind::Hang) else { return };
    let (oom_ranks, oom_steps, oom_severity) =
        (verdicts[oi].ranks.clone(), verdicts[oi].steps.clone(), verdicts[oi].severity);
    let h = &mut verdicts[hi];
    h.severity = oom_severity * 0.99;
    h.summary.push_str(" (most likely because a rank ran out of memory and exited)");
    if let Evidence::Hang(e) = &mut h.evidence {
        let steps = oom_steps.iter().map(|s| s.to_string()).collect::<Vec<_>>().join(",");
        e.text = format!(
            "{} {} ran out of device memory{} and exited, so its peers could not complete their collectives: fix the out-of-memory first.",
            e.text,
            rank_list(&oom_ranks),
            if steps.is_empty() { String::new() } else { format!(" (step {steps})") }
        );
        e.after_oom = Some(AfterOom { ranks: oom_ranks, steps: oom_steps });
    }
}

/// A straggler whose own trace says it was slow because of a pathology the job's ranks share (its host
/// launching too slowly on a launch-bound job, its host synchronizing on a sync-bound one) is a
/// symptom: the root cause is that pathology, and the others' waiting is part of its cost. The
/// pathology's verdict then carries that cost and ranks first.
fn attribute_straggler_to_cause(verdicts: &mut [Verdict], category: &str, kind: VerdictKind) {
    let Some(si) = verdicts.iter().position(|v| match &v.evidence {
        Evidence::Straggler(e) => v.kind == VerdictKind::Straggler && e.cause_category == category,
        _ => false,
    }) else {
        return;
    };
    let Some(li) = verdicts.iter().position(|v| v.kind == kind) else { return };
    if !verdicts[si].ranks.iter().all(|r| verdicts[li].ranks.contains(r)) {
        return;
    }
    let (straggler, launch) = (verdicts[si].severity, verdicts[li].severity);
    if straggler <= launch {
        return;
    }
    let who = verdicts[si].ranks.clone();
    let v = &mut verdicts[li];
    v.severity = straggler;
    if let Some((wait, text)) = v.evidence.straggler_wait_slot() {
        *wait = Some(StragglerWait { ranks: who, severity: straggler });
        *text = format!(
            "{text} The rank it slows most also makes the others wait for it at every collective: {} of wall time in all.",
            share(straggler)
        );
    }
    verdicts[si].severity = (launch * 0.99).min(straggler);
}
