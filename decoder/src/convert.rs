//! The converter driver: decode sources (ring files, Kineto traces) into [`TraceSink`]s.
//!
//! - [`feed_all`]: every source into one sink, process after process (exporters writing one file).
//! - [`feed_each`]: sources decoded in parallel, one sink per source (analyses that merge
//!   per-rank results afterwards, like `summary`).
//!
//! Both check the job as a whole (duplicate / missing ranks, files from another job) and return
//! notes; a file that cannot be read is reported and the others are still used.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use crate::clock_alignment::{self, ClockPlan, CollectiveEnds};
use crate::error::InputError;
use crate::input::{self, Notes, Source, SourceKind};
use crate::model::*;

/// How to decode.
#[derive(Debug, Clone)]
pub struct ConvertOptions {
    /// Worker threads for [`feed_each`] (0 = available parallelism).
    pub threads: usize,
    /// Show a progress bar (on a terminal, after a second).
    pub progress: bool,
    /// Align clocks across hosts by collective ends (a first pass over collectives) in [`feed_all`].
    pub align_clocks: bool,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions { threads: 0, progress: true, align_clocks: true }
    }
}

/// Decode one source into `sink` as process `id`, shifting its times by `offset_ns`.
pub fn feed_source(
    src: &Source,
    id: ProcId,
    offset_ns: i64,
    sink: &mut dyn TraceSink,
    notes: &mut Notes,
) -> Result<ProcessInfo, InputError> {
    match src.kind {
        SourceKind::Kineto => input::kineto::feed(&src.path, id, sink, notes),
        SourceKind::Ring => input::ring::feed(&src.path, id, offset_ns, sink, notes),
    }
}

/// What a multi-source decode produced besides the sinks' own results.
#[derive(Debug, Default)]
pub struct DecodeReport {
    /// Processes decoded, in source order (failed sources are absent).
    pub processes: Vec<ProcessInfo>,
    /// Sources that could not be used at all.
    pub errors: Vec<InputError>,
    pub notes: Notes,
    /// Clock alignment across ranks, when there was anything to align.
    pub clock: Option<ClockPlan>,
}

/// Decode every source into one sink, process after process, then call `finish`.
pub fn feed_all(
    sources: &[Source],
    sink: &mut dyn TraceSink,
    opts: &ConvertOptions,
) -> Result<DecodeReport, SinkError> {
    let mut report = DecodeReport::default();
    let plan = if opts.align_clocks && sources.iter().filter(|s| s.kind == SourceKind::Ring).count() > 1 {
        // First pass: collective ends per rank, to align the hosts.
        let probes = feed_each(sources, CollectiveEnds::default, opts);
        let refs: Vec<&CollectiveEnds> = probes.sinks.iter().collect();
        Some(clock_alignment::plan(&probes.processes, &refs))
    } else {
        None
    };
    let pb = crate::progress::bar(sources.len() as u64, "decoding", opts.progress);
    for (i, src) in sources.iter().enumerate() {
        let offset = plan.as_ref().map(|p| p.offset_of(&src.path)).unwrap_or(0);
        match feed_source(src, ProcId(i as u32), offset, sink, &mut report.notes) {
            Ok(info) => report.processes.push(info),
            Err(e) => report.errors.push(e),
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    check_job(&report.processes, &mut report.notes);
    report.clock = plan;
    sink.finish()?;
    Ok(report)
}

/// The result of [`feed_each`]: one sink per decoded process.
#[derive(Debug)]
pub struct EachResult<S> {
    pub processes: Vec<ProcessInfo>,
    /// `sinks[i]` holds the events of `processes[i]`.
    pub sinks: Vec<S>,
    pub errors: Vec<InputError>,
    pub notes: Notes,
}

/// Decode sources in parallel, each into its own sink made by `make` (no `finish` is called: the
/// caller merges). Times are each process's own (wall-clock) times: no cross-host alignment.
pub fn feed_each<S, F>(sources: &[Source], make: F, opts: &ConvertOptions) -> EachResult<S>
where
    S: TraceSink + Send,
    F: Fn() -> S + Sync,
{
    let threads = if opts.threads == 0 {
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    } else {
        opts.threads
    }
    .min(sources.len().max(1));
    let next = AtomicUsize::new(0);
    type Slot<S> = Option<(Result<(ProcessInfo, S), InputError>, Notes)>;
    let slots: Mutex<Vec<Slot<S>>> = Mutex::new((0..sources.len()).map(|_| None).collect());
    let pb = crate::progress::bar(sources.len() as u64, "decoding", opts.progress);
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= sources.len() {
                    break;
                }
                let mut sink = make();
                let mut notes = Notes::default();
                let r = feed_source(&sources[i], ProcId(i as u32), 0, &mut sink, &mut notes).map(|info| (info, sink));
                if let Ok(mut s) = slots.lock() {
                    s[i] = Some((r, notes));
                }
                pb.inc(1);
            });
        }
    });
    pb.finish_and_clear();
    let mut out = EachResult { processes: Vec::new(), sinks: Vec::new(), errors: Vec::new(), notes: Notes::default() };
    for (r, notes) in slots.into_inner().unwrap_or_default().into_iter().flatten() {
        out.notes.extend(notes);
        match r {
            Ok((info, sink)) => {
                out.processes.push(info);
                out.sinks.push(sink);
            }
            Err(e) => out.errors.push(e),
        }
    }
    check_job(&out.processes, &mut out.notes);
    out
}

/// Job-level checks: duplicate ranks, missing ranks (named), files from another job,
/// inconsistent world sizes.
pub fn check_job(procs: &[ProcessInfo], notes: &mut Notes) {
    use std::collections::BTreeMap;
    let mut jobs: BTreeMap<&str, usize> = BTreeMap::new();
    for p in procs {
        if let Some(j) = &p.job_id {
            *jobs.entry(j.as_str()).or_default() += 1;
        }
    }
    if jobs.len() > 1 {
        let main = jobs.iter().max_by_key(|(_, n)| **n).map(|(j, _)| *j).unwrap_or_default();
        for p in procs {
            if let Some(j) = &p.job_id {
                if j != main {
                    notes.add(Some(&p.path), format!("belongs to job {j}, not {main} like the others"));
                }
            }
        }
    }
    let mut by_rank: BTreeMap<u32, Vec<&ProcessInfo>> = BTreeMap::new();
    for p in procs {
        if let Some(r) = p.rank {
            by_rank.entry(r).or_default().push(p);
        }
    }
    for (r, ps) in &by_rank {
        if ps.len() > 1 {
            let files: Vec<String> = ps.iter().map(|p| p.path.display().to_string()).collect();
            notes.add(None, format!("rank {r} appears in {} files: {}", ps.len(), files.join(", ")));
        }
    }
    let sizes: std::collections::BTreeSet<u32> = procs.iter().filter_map(|p| p.world_size).collect();
    if sizes.len() > 1 {
        notes.add(None, format!("inconsistent world sizes across files: {sizes:?}"));
    }
    // Only ring files are expected to hold every rank of a job; a handful of imported traces is normal.
    let rings: Vec<&ProcessInfo> = procs.iter().filter(|p| p.origin == Origin::Ring).collect();
    if let Some(&world) = sizes.iter().next_back() {
        if !rings.is_empty() && sizes.len() == 1 {
            // The world size comes from the files: work with the ranks present, never a list of
            // `world` entries.
            let present: std::collections::BTreeSet<u32> =
                rings.iter().filter_map(|p| p.rank).filter(|&r| r < world).collect();
            let missing = u64::from(world) - present.len() as u64;
            if missing > 0 {
                notes.add(None, format!("missing ranks ({missing} of {world}): {}", absent_ranges(&present, world)));
            }
        }
    }
}

/// Most ranges [`absent_ranges`] spells out.
const MAX_LISTED_RANGES: usize = 32;

/// The ranks in `0..world` not in `present`, as "2-3,5,7" (the first [`MAX_LISTED_RANGES`]
/// ranges, then how many more); time and memory follow `present`, not `world`.
pub fn absent_ranges(present: &std::collections::BTreeSet<u32>, world: u32) -> String {
    let mut gaps: Vec<(u32, u32)> = Vec::new();
    let mut more = 0usize;
    let mut next = 0u32;
    let bounds = present.iter().map(|&r| Some(r)).chain(std::iter::once(None));
    for r in bounds {
        let end = r.unwrap_or(world);
        if end > next {
            if gaps.len() < MAX_LISTED_RANGES {
                gaps.push((next, end - 1));
            } else {
                more += 1;
            }
        }
        match r {
            Some(r) => next = r.saturating_add(1),
            None => break,
        }
    }
    let mut out: Vec<String> =
        gaps.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
    if more > 0 {
        out.push(format!("... and {more} more ranges"));
    }
    out.join(",")
}

/// "0-3,7,9-10"
pub fn compress_ranges(v: &[u32]) -> String {
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        out.push(if i == j { v[i].to_string() } else { format!("{}-{}", v[i], v[j]) });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(rank: u32, world: u32, job: &str) -> ProcessInfo {
        ProcessInfo {
            id: ProcId(rank),
            origin: Origin::Ring,
            path: format!("r{rank}.tprof").into(),
            host: "h".into(),
            pid: 1,
            ppid: 0,
            cmdline: String::new(),
            rank: Some(rank),
            local_rank: None,
            world_size: Some(world),
            job_id: Some(job.into()),
            clock_offset_ns: 0,
            gpu_activity: true,
            dropped_events: 0,
        }
    }

    #[test]
    fn job_checks() {
        let mut ps: Vec<ProcessInfo> = [0, 1, 1, 4].iter().map(|&r| proc(r, 8, "j1")).collect();
        ps.push(proc(6, 8, "j2"));
        let mut notes = Notes::default();
        check_job(&ps, &mut notes);
        let all: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
        assert!(all.iter().any(|n| n.contains("r6.tprof: belongs to job j2")), "{all:?}");
        assert!(all.iter().any(|n| n.contains("rank 1 appears in 2 files")), "{all:?}");
        assert!(all.iter().any(|n| n.contains("missing ranks (4 of 8): 2-3,5,7")), "{all:?}");
    }

    #[test]
    fn absent_ranks_of_a_huge_world_are_counted_not_listed() {
        let mut notes = Notes::default();
        check_job(&[proc(3, u32::MAX, "j"), proc(7, u32::MAX, "j")], &mut notes);
        let all: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
        assert_eq!(all, vec![format!("missing ranks ({} of {}): 0-2,4-6,8-{}", u32::MAX - 2, u32::MAX, u32::MAX - 1)]);
        let present: std::collections::BTreeSet<u32> = (0..200).map(|r| 2 * r + 1).collect();
        let listed = absent_ranges(&present, 400);
        assert!(listed.starts_with("0,2,4,"), "{listed}");
        assert!(listed.ends_with(",62,... and 168 more ranges"), "{listed}");
        assert_eq!(absent_ranges(&[0, 1].into_iter().collect(), 2), "");
    }
}
