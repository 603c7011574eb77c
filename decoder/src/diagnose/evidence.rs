//! The `evidence` of each verdict kind: one struct per kind, the numbers behind the verdict and
//! `text`, the sentence a person reads. The keys are documented in the README ("Diagnoses
//! (--json)"); a test holds the two together.
//!
//! Fields are declared in the alphabetical order of their keys, the order the document has
//! always had (a test checks it).

use std::collections::BTreeMap;

use serde::Serialize;

use crate::model::Ns;

/// A verdict's evidence.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(untagged)]
pub enum Evidence {
    /// Not given yet (written as `null`).
    #[default]
    None,
    Desync(DesyncEvidence),
    Hang(HangEvidence),
    Oom(OomEvidence),
    Straggler(StragglerEvidence),
    StepTimeStraggler(StepTimeStragglerEvidence),
    SlowCollective(SlowCollectiveEvidence),
    ExposedCommunication(ExposedCommunicationEvidence),
    DataLoading(DataLoadingEvidence),
    SyncBound(SyncBoundEvidence),
    LaunchBound(LaunchBoundEvidence),
    MemoryPressure(MemoryPressureEvidence),
    AmpOverflow(AmpOverflowEvidence),
    HotspotKernel(HotspotKernelEvidence),
    Slowdown(super::slowdown::SlowdownEvidence),
    HostCpuContention(super::host_contention::HostCpuContentionEvidence),
    HostMemoryPressure(super::host_pressure::HostMemoryPressureEvidence),
}

impl Evidence {
    /// The sentence a person reads ("" when there is no evidence).
    pub fn text(&self) -> &str {
        match self {
            Evidence::None => "",
            Evidence::Desync(e) => &e.text,
            Evidence::HostCpuContention(e) => &e.text,
            Evidence::HostMemoryPressure(e) => &e.text,
            Evidence::Hang(e) => &e.text,
            Evidence::Oom(e) => &e.text,
            Evidence::Straggler(e) => &e.text,
            Evidence::StepTimeStraggler(e) => &e.text,
            Evidence::SlowCollective(e) => &e.text,
            Evidence::ExposedCommunication(e) => &e.text,
            Evidence::DataLoading(e) => &e.text,
            Evidence::SyncBound(e) => &e.text,
            Evidence::LaunchBound(e) => &e.text,
            Evidence::MemoryPressure(e) => &e.text,
            Evidence::AmpOverflow(e) => &e.text,
            Evidence::HotspotKernel(e) => &e.text,
            Evidence::Slowdown(e) => &e.text,
        }
    }

    /// The slot for the straggler wait a host-side pathology also accounts for, and the text to
    /// extend (launch- and sync-bound verdicts only).
    pub fn straggler_wait_slot(&mut self) -> Option<(&mut Option<StragglerWait>, &mut String)> {
        match self {
            Evidence::LaunchBound(e) => Some((&mut e.includes_straggler_wait, &mut e.text)),
            Evidence::SyncBound(e) => Some((&mut e.includes_straggler_wait, &mut e.text)),
            _ => None,
        }
    }
}

/// `desync`: ranks issued different collectives at one (communicator, seq).
#[derive(Debug, Clone, Default, Serialize)]
pub struct DesyncEvidence {
    /// Communicator id, hex.
    pub comm: String,
    /// Mismatched collectives in the whole run.
    pub mismatches: usize,
    pub seq: u64,
    pub step: Option<u64>,
    pub text: String,
    /// What each group of ranks issued.
    pub variants: Vec<DesyncVariant>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct DesyncVariant {
    pub bytes: u64,
    pub datatype: &'static str,
    pub op: &'static str,
    pub ranks: Vec<u32>,
}

/// `hang`: collectives that never completed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HangEvidence {
    /// Set when a rank ran out of memory and exited first (the likely cause).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_oom: Option<AfterOom>,
    pub communicators: Vec<HangCommunicator>,
    /// The ranks involved: those that never arrived, then those waiting.
    pub ranks: Vec<HangRank>,
    pub text: String,
    /// The watchdog's `HangSuspected` markers.
    pub watchdog: Vec<WatchdogFlag>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct AfterOom {
    pub ranks: Vec<u32>,
    pub steps: Vec<u64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HangCommunicator {
    pub comm: String,
    pub last_seq_by_rank: Vec<LastSeq>,
    pub missing_ranks: Vec<u32>,
    pub op: &'static str,
    pub stuck_seq: u64,
    pub waiting_ranks: Vec<u32>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct LastSeq {
    pub first_unfinished_seq: Option<u64>,
    pub last_seq: u64,
    pub rank: u32,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HangRank {
    pub last_cuda_call: Option<String>,
    pub last_cuda_call_ns: Option<Ns>,
    /// Demangled.
    pub last_kernel: Option<String>,
    pub last_kernel_end_ns: Option<Ns>,
    pub rank: u32,
    /// `did_not_arrive` or `waiting`.
    pub state: &'static str,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct WatchdogFlag {
    pub pending_ns: u64,
    pub rank: u32,
    pub ts: Ns,
    pub what: Option<String>,
}

/// `oom`: a failed device allocation ended the run.
#[derive(Debug, Clone, Default, Serialize)]
pub struct OomEvidence {
    pub capacity_bytes: Option<u64>,
    /// Fatal failures over all ranks.
    pub failures: usize,
    pub growth_per_step_bytes: Option<u64>,
    pub needed_bytes: u64,
    pub peak_reserved_bytes: u64,
    pub requested_bytes: u64,
    pub reserved_bytes: u64,
    pub step: Option<u64>,
    pub text: String,
}

/// Per step, what the late rank spent in one category against the median of the others.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CategoryPerStep {
    pub others_ns_per_step: Ns,
    pub rank_ns_per_step: Ns,
}

/// `straggler`, from collectives: the rank that arrives last.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StragglerEvidence {
    pub cause: String,
    /// The category of `per_step_by_category` it exceeds most (`unknown` when none).
    pub cause_category: &'static str,
    /// Collectives with a known last arrival.
    pub collectives: usize,
    pub last_arrivals: usize,
    pub lost_ns: Ns,
    pub max_lateness_ns: Ns,
    pub median_lateness_ns: Ns,
    pub per_step_by_category: BTreeMap<&'static str, CategoryPerStep>,
    pub rank: u32,
    pub text: String,
}

/// `straggler`, without collectives: a rank whose mean step time stands out.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StepTimeStragglerEvidence {
    pub mean_step_ns: Ns,
    pub median_step_ns: Ns,
    pub per_step_by_category: BTreeMap<&'static str, CategoryPerStep>,
    pub rank: u32,
    pub text: String,
}

/// `slow_collective`: bus bandwidth below half of the reference.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SlowCollectiveEvidence {
    pub busbw_gbps: f64,
    pub bytes: u64,
    /// Calls of this op and size bucket in the run.
    pub calls: usize,
    pub exposed_excess_ns: Ns,
    pub op: &'static str,
    /// `peak` (--peak-busbw) or `best_in_run`.
    pub reference: &'static str,
    pub reference_busbw_gbps: f64,
    pub size_bucket: u64,
    pub slow_calls: usize,
    pub text: String,
}

/// `exposed_communication`: communication not hidden behind compute.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ExposedCommunicationEvidence {
    pub collective_ns: Ns,
    /// By (op, size bucket), most exposed first.
    pub collectives: Vec<ExposedCollective>,
    pub exposed_per_step_ns: Ns,
    pub overlapped_share: f64,
    pub step_ns: Ns,
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct ExposedCollective {
    pub bytes: u64,
    pub calls: u64,
    pub exposed_ns: Ns,
    pub kernel_ns: Ns,
    pub op: &'static str,
    pub size_bucket: u64,
}

/// `data_loading`: GPU idle at step starts while the host is outside CUDA.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DataLoadingEvidence {
    /// The host samples that say which `kind` it is.
    pub host: Option<super::host_pipeline::PipelineEvidence>,
    pub idle_at_step_start_ns: Ns,
    /// `workers_cpu_saturated`, `io_bound`, `too_few_workers`, `main_thread_bound` or `unknown`
    /// (see `host_pipeline`).
    pub kind: String,
    pub share_by_rank: Vec<RankShare>,
    pub step_ns: Ns,
    pub steps_affected: usize,
    pub steps_total: usize,
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct RankShare {
    pub rank: u32,
    pub share: f64,
}

/// What a launch- or sync-bound verdict also accounts for: the others' waiting for the rank it
/// slows most.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StragglerWait {
    pub ranks: Vec<u32>,
    pub severity: f64,
}

/// `sync_bound`: synchronizing calls that drained the GPU, and pageable copies.
#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncBoundEvidence {
    pub calls: Vec<SyncCall>,
    pub gpu_idle_after_sync_ns: Ns,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub includes_straggler_wait: Option<StragglerWait>,
    pub pageable_calls: Vec<String>,
    pub pageable_copies: u64,
    pub pageable_exposed_ns: Ns,
    pub small_d2h_copies: u64,
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct SyncCall {
    pub calls: u64,
    pub gpu_idle_ns: Ns,
    pub host_blocked_ns: Ns,
    pub name: String,
    pub per_step: f64,
}

/// `launch_bound`: GPU idle between short kernels while the host launches.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LaunchBoundEvidence {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub includes_straggler_wait: Option<StragglerWait>,
    pub kernels_per_step: u64,
    pub launch_idle_ns: Ns,
    pub launches_per_step: u64,
    pub median_kernel_ns: Ns,
    pub median_launch_gap_ns: Ns,
    pub step_ns: Ns,
    pub text: String,
}

/// `memory_pressure`: allocation churn in steps, recovered failures, peak near capacity.
#[derive(Debug, Clone, Default, Serialize)]
pub struct MemoryPressureEvidence {
    pub alloc_calls_in_steps: u64,
    pub alloc_host_ns: Ns,
    pub capacity_bytes: Option<u64>,
    pub growth_per_step_bytes: Option<u64>,
    pub peak_reserved_bytes: u64,
    pub recovered_failures: usize,
    pub text: String,
}

/// `amp_overflow`: steps whose optimizer kernels are missing after the AMP check.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AmpOverflowEvidence {
    pub checked_steps: usize,
    pub lost_ns: Ns,
    /// Mean distance between skipped steps (two or more).
    pub skip_interval_steps: Option<f64>,
    pub skipped_steps: usize,
    pub text: String,
}

/// `hotspot_kernel`: kernel families dominating GPU time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct HotspotKernelEvidence {
    pub estimated_saving_ns: Ns,
    /// By GPU time, most first.
    pub families: Vec<FamilyShare>,
    pub fusible_ns: Ns,
    /// Mean tensor-core activity (0..1) when counters were sampled.
    pub tensor_activity: Option<f64>,
    pub text: String,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct FamilyShare {
    pub family: &'static str,
    pub kernels: u64,
    pub share: f64,
    /// Demangled.
    pub top_kernel: String,
    pub total_ns: Ns,
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::Value;

    use super::*;

    fn keys(x: impl Serialize) -> Keys {
        match serde_json::to_value(x).unwrap() {
            Value::Object(m) => m.keys().cloned().collect(),
            other => panic!("not an object: {other}"),
        }
    }

    type Keys = BTreeSet<String>;
    /// A kind's evidence keys and, for its lists of objects, their keys.
    type KindKeys = (Keys, BTreeMap<&'static str, Keys>);

    /// Per kind: the evidence keys (optional ones included) and, for lists of objects, their keys.
    fn ours() -> BTreeMap<&'static str, KindKeys> {
        let wait = || Some(StragglerWait::default());
        let mut straggler = keys(StragglerEvidence::default());
        straggler.extend(keys(StepTimeStragglerEvidence::default()));
        let nested = |v: &[(&'static str, Keys)]| v.iter().cloned().collect::<BTreeMap<_, _>>();
        BTreeMap::from([
            ("desync", (keys(DesyncEvidence::default()), nested(&[("variants", keys(DesyncVariant::default()))]))),
            (
                "hang",
                (
                    keys(HangEvidence { after_oom: Some(AfterOom::default()), ..Default::default() }),
                    nested(&[
                        ("communicators", keys(HangCommunicator::default())),
                        ("ranks", keys(HangRank::default())),
                    ]),
                ),
            ),
            ("oom", (keys(OomEvidence::default()), nested(&[]))),
            ("straggler", (straggler, nested(&[]))),
            ("slow_collective", (keys(SlowCollectiveEvidence::default()), nested(&[]))),
            (
                "exposed_communication",
                (
                    keys(ExposedCommunicationEvidence::default()),
                    nested(&[("collectives", keys(ExposedCollective::default()))]),
                ),
            ),
            (
                "data_loading",
                (
                    keys(DataLoadingEvidence::default()),
                    nested(&[("host", keys(super::super::host_pipeline::PipelineEvidence::default()))]),
                ),
            ),
            (
                "sync_bound",
                (
                    keys(SyncBoundEvidence { includes_straggler_wait: wait(), ..Default::default() }),
                    nested(&[("calls", keys(SyncCall::default()))]),
                ),
            ),
            (
                "launch_bound",
                (keys(LaunchBoundEvidence { includes_straggler_wait: wait(), ..Default::default() }), nested(&[])),
            ),
            ("memory_pressure", (keys(MemoryPressureEvidence::default()), nested(&[]))),
            ("amp_overflow", (keys(AmpOverflowEvidence::default()), nested(&[]))),
            (
                "hotspot_kernel",
                (keys(HotspotKernelEvidence::default()), nested(&[("families", keys(FamilyShare::default()))])),
            ),
            (
                "slowdown",
                (
                    keys(super::super::slowdown::SlowdownEvidence::default()),
                    nested(&[("counters", keys(super::super::slowdown::CounterShift::default()))]),
                ),
            ),
            (
                "host_cpu_contention",
                (keys(super::super::host_contention::HostCpuContentionEvidence::default()), nested(&[])),
            ),
            (
                "host_memory_pressure",
                (keys(super::super::host_pressure::HostMemoryPressureEvidence::default()), nested(&[])),
            ),
        ])
    }

    /// A README key list: `key`, `key[{a, b, ...}]` (a list of objects) or `key{a, b}` (one object; a
    /// trailing `...`: the list is not complete).
    struct DocKey {
        name: String,
        nested: Option<(Keys, bool)>,
    }

    /// The README's evidence table: kind -> keys.
    fn readme() -> BTreeMap<String, Vec<DocKey>> {
        let text = include_str!("../../../README.md");
        let section = text.split("## Diagnoses (--json)").nth(1).expect("README section Diagnoses (--json)");
        let mut out = BTreeMap::new();
        for line in section.lines().take_while(|l| !l.starts_with("## ")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() < 5 || !cells[1].starts_with('`') || cells[1] == "`kind`" {
                continue;
            }
            let kind = cells[1].trim_matches('`').to_string();
            let keys = cells[3]
                .split('`')
                .skip(1)
                .step_by(2)
                .map(|k| match k.split_once(['[', '{']) {
                    None => DocKey { name: k.to_string(), nested: None },
                    Some((name, rest)) => {
                        let inner = rest.trim_end_matches(']').trim_start_matches('{').trim_end_matches('}');
                        let mut names: Keys = inner.split(',').map(|s| s.trim().to_string()).collect();
                        let complete = !names.remove("...");
                        names.remove("");
                        DocKey { name: name.to_string(), nested: (!names.is_empty()).then_some((names, complete)) }
                    }
                })
                .collect();
            out.insert(kind, keys);
        }
        out
    }

    #[test]
    fn readme_evidence_table_names_every_key() {
        let doc = readme();
        let ours = ours();
        assert_eq!(doc.keys().map(String::as_str).collect::<Vec<_>>(), ours.keys().copied().collect::<Vec<_>>());
        for (kind, (fields, nested)) in &ours {
            let listed = &doc[*kind];
            let mut names: Keys = listed.iter().map(|k| k.name.clone()).collect();
            names.insert("text".into());
            assert_eq!(&names, fields, "README keys of `{kind}` evidence");
            for k in listed {
                let Some((doc_nested, complete)) = &k.nested else { continue };
                let ours =
                    nested.get(k.name.as_str()).unwrap_or_else(|| panic!("{kind}.{}: not a list of objects", k.name));
                if *complete {
                    assert_eq!(doc_nested, ours, "README keys of `{kind}.{}`", k.name);
                } else {
                    assert!(
                        doc_nested.is_subset(ours),
                        "README keys of `{kind}.{}`: {doc_nested:?} not in {ours:?}",
                        k.name
                    );
                }
            }
        }
    }

    /// Fields in key order: a struct writes the same bytes as the sorted map the evidence once was.
    fn assert_key_order(x: impl Serialize + std::fmt::Debug) {
        let direct = serde_json::to_string(&x).unwrap();
        let sorted = serde_json::to_string(&serde_json::to_value(&x).unwrap()).unwrap();
        assert_eq!(direct, sorted, "{x:?}: fields out of key order");
    }

    #[test]
    fn fields_are_declared_in_key_order() {
        let wait = Some(StragglerWait::default());
        let by_category = BTreeMap::from([("data", CategoryPerStep::default())]);
        assert_key_order(DesyncEvidence { variants: vec![DesyncVariant::default()], ..Default::default() });
        assert_key_order(HangEvidence {
            after_oom: Some(AfterOom::default()),
            communicators: vec![HangCommunicator { last_seq_by_rank: vec![LastSeq::default()], ..Default::default() }],
            ranks: vec![HangRank::default()],
            watchdog: vec![WatchdogFlag::default()],
            ..Default::default()
        });
        assert_key_order(OomEvidence::default());
        assert_key_order(StragglerEvidence { per_step_by_category: by_category.clone(), ..Default::default() });
        assert_key_order(StepTimeStragglerEvidence { per_step_by_category: by_category, ..Default::default() });
        assert_key_order(SlowCollectiveEvidence::default());
        assert_key_order(ExposedCommunicationEvidence {
            collectives: vec![ExposedCollective::default()],
            ..Default::default()
        });
        assert_key_order(DataLoadingEvidence {
            host: Some(super::super::host_pipeline::PipelineEvidence::default()),
            share_by_rank: vec![RankShare::default()],
            ..Default::default()
        });
        assert_key_order(SyncBoundEvidence {
            calls: vec![SyncCall::default()],
            includes_straggler_wait: wait.clone(),
            ..Default::default()
        });
        assert_key_order(LaunchBoundEvidence { includes_straggler_wait: wait, ..Default::default() });
        assert_key_order(MemoryPressureEvidence::default());
        assert_key_order(AmpOverflowEvidence { skip_interval_steps: Some(2.5), ..Default::default() });
        assert_key_order(HotspotKernelEvidence { families: vec![FamilyShare::default()], ..Default::default() });
        assert_key_order(super::super::slowdown::SlowdownEvidence {
            counters: vec![super::super::slowdown::CounterShift::default()],
            per_step_by_category: BTreeMap::from([("data", super::super::slowdown::BeforeAfter::default())]),
            ..Default::default()
        });
    }
}
