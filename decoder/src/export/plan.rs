//! Before exporting: which sources to decode, each one's clock offset, the global time origin and
//! each process's window. A first pass (span, collective ends, steps) runs only when needed: for
//! clock alignment across ring files and for time / step filters.

use regex_lite::Regex;

use super::select::{Selection, Window};
use crate::clock_alignment::{self, ClockPlan, CollectiveEnds};
use crate::convert::{feed_each, ConvertOptions};
use crate::input::{Notes, Source, SourceKind};
use crate::model::*;
use crate::steps::{StepFinder, StepWindow};

/// First-pass sink of one process: its span, collective ends (clock alignment) and steps.
pub struct Probe {
    pub ends: CollectiveEnds,
    pub span: Option<(Ns, Ns)>,
    finder: Option<StepFinder>,
    pub steps: Vec<StepWindow>,
}

impl Probe {
    pub fn new(step_pattern: Option<&Regex>) -> Probe {
        Probe {
            ends: CollectiveEnds::default(),
            span: None,
            finder: step_pattern.map(StepFinder::new),
            steps: Vec::new(),
        }
    }

    fn see(&mut self, start: Ns, end: Ns) {
        if start == 0 && end == 0 {
            return; // a GPU record without GPU times (CUPTI off)
        }
        let end = end.max(start);
        self.span = Some(match self.span {
            None => (start, end),
            Some((a, b)) => (a.min(start), b.max(end)),
        });
    }
}

impl TraceSink for Probe {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.ends.handle_process(info);
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        self.see(k.start, k.end);
        self.ends.handle_kernel(k);
        if let Some(f) = &mut self.finder {
            f.kernel(k);
        }
    }
    fn handle_memcpy(&mut self, m: &Memcpy) {
        self.see(m.start, m.end);
    }
    fn handle_memset(&mut self, m: &Memset) {
        self.see(m.start, m.end);
    }
    fn handle_api(&mut self, a: &Api) {
        self.see(a.start, a.end);
    }
    fn handle_sync(&mut self, s: &SyncEvent) {
        self.see(s.start, s.end);
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        self.see(m.ts, m.ts);
    }
    fn handle_collective(&mut self, c: &Collective) {
        self.see(c.start, c.end);
        self.ends.handle_collective(c);
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.see(r.start, r.end);
        if let Some(f) = &mut self.finder {
            f.range(r);
        }
    }
    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        self.see(m.ts, m.ts);
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.see(c.ts, c.ts);
    }
    fn handle_marker(&mut self, m: &Marker) {
        self.see(m.ts, m.ts);
        if let Some(f) = &mut self.finder {
            f.marker(m);
        }
    }
    fn handle_process_end(&mut self, p: ProcId) {
        self.ends.handle_process_end(p);
        if let Some(f) = self.finder.take() {
            self.steps = f.finish(self.span.unwrap_or((0, 0))).1;
        }
    }
}

/// What the export pass does with each source.
#[derive(Debug, Default)]
pub struct ExportPlan {
    /// Per source: `None` = skip it, `Some(window)` = decode it and keep what overlaps the window.
    pub windows: Vec<Option<Window>>,
    /// Per source: clock offset (ns) from cross-host alignment.
    pub offsets: Vec<i64>,
    /// Earliest event of the selected processes on the global timebase (0 when unknown).
    pub origin: Ns,
    pub clock: Option<ClockPlan>,
}

/// The header of a ring file from its first page alone (no mapping, no chunk scan).
pub fn ring_header(path: &std::path::Path) -> Option<tprof_format::FileHeader> {
    use std::io::Read;
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let mut page = Vec::with_capacity(4096);
    f.by_ref().take(4096).read_to_end(&mut page).ok()?;
    tprof_format::FileHeader::parse(&page, len).ok().map(|(h, _, _)| h)
}

/// Header start time (wall ns) of a ring file, when its wall clock is usable.
fn ring_header_start(path: &std::path::Path) -> Option<Ns> {
    let h = ring_header(path)?;
    (h.start_wall_ns >= 978_307_200_000_000_000).then_some(h.start_wall_ns)
}

/// Decide what to decode. `align` asks for cross-host clock alignment (several ring files).
pub fn make_plan(
    sources: &[Source],
    sel: &Selection,
    step_pattern: &Regex,
    align: bool,
    opts: &ConvertOptions,
    notes: &mut Notes,
) -> ExportPlan {
    let n = sources.len();
    let mut plan = ExportPlan { windows: vec![Some(Window::ALL); n], offsets: vec![0; n], origin: 0, clock: None };
    // Ranks of ring files are in their headers: unselected files are never decoded.
    if sel.ranks.is_some() {
        for (i, s) in sources.iter().enumerate() {
            if s.kind == SourceKind::Ring && !sel.rank_selected(ring_header(&s.path).and_then(|h| h.rank)) {
                plan.windows[i] = None;
            }
        }
    }
    let rings = (0..n).filter(|&i| plan.windows[i].is_some() && sources[i].kind == SourceKind::Ring).count();
    let align = align && rings > 1;
    if !align && !sel.needs_window() {
        plan.origin = (0..n)
            .filter(|&i| plan.windows[i].is_some() && sources[i].kind == SourceKind::Ring)
            .filter_map(|i| ring_header_start(&sources[i].path))
            .min()
            .map(|t| t - t % 1_000_000_000)
            .unwrap_or(0);
        return plan;
    }
    // First pass over the selected sources.
    let picked: Vec<usize> = (0..n).filter(|&i| plan.windows[i].is_some()).collect();
    let subset: Vec<Source> = picked.iter().map(|&i| sources[i].clone()).collect();
    let pattern = sel.steps.is_some().then_some(step_pattern);
    let first = feed_each(&subset, || Probe::new(pattern), &ConvertOptions { progress: opts.progress, ..opts.clone() });
    // feed_each numbers processes by their index in `subset`.
    let source_of = |p: &ProcessInfo| picked[p.id.0 as usize];
    if align {
        let rings: Vec<(ProcessInfo, &CollectiveEnds)> = first
            .processes
            .iter()
            .zip(&first.sinks)
            .filter(|(p, _)| p.origin == Origin::Ring)
            .map(|(p, s)| (p.clone(), &s.ends))
            .collect();
        let procs: Vec<ProcessInfo> = rings.iter().map(|r| r.0.clone()).collect();
        let ends: Vec<&CollectiveEnds> = rings.iter().map(|r| r.1).collect();
        let cp = clock_alignment::plan(&procs, &ends);
        for p in &first.processes {
            plan.offsets[source_of(p)] = cp.offset_of(&p.path);
        }
        plan.clock = Some(cp);
    }
    let shifted = |t: Ns, off: i64| (t as i64 + off).max(0) as Ns;
    let mut origin: Option<Ns> = None;
    for (p, probe) in first.processes.iter().zip(&first.sinks) {
        let i = source_of(p);
        if !sel.rank_selected(p.rank) {
            plan.windows[i] = None;
            continue;
        }
        if let Some((a, _)) = probe.span {
            let a = shifted(a, plan.offsets[i]);
            origin = Some(origin.map_or(a, |o| o.min(a)));
        }
    }
    plan.origin = origin.unwrap_or(0);
    for (p, probe) in first.processes.iter().zip(&first.sinks) {
        let i = source_of(p);
        let Some(mut w) = plan.windows[i] else { continue };
        if sel.from.is_some() || sel.to.is_some() {
            let lo = plan.origin.saturating_add(sel.from.unwrap_or(0));
            let hi = sel.to.map_or(Ns::MAX, |t| plan.origin.saturating_add(t));
            w = w.intersect(Window { lo, hi });
        }
        if let Some(steps) = &sel.steps {
            let chosen: Vec<&StepWindow> = probe.steps.iter().filter(|s| steps.contains(s.index)).collect();
            match (chosen.iter().map(|s| s.start).min(), chosen.iter().map(|s| s.end).max()) {
                (Some(a), Some(b)) => {
                    let off = plan.offsets[i];
                    w = w.intersect(Window { lo: shifted(a, off), hi: shifted(b, off) });
                }
                _ => {
                    notes.add(Some(&p.path), format!("{} has no step {steps}: not exported", p.label()));
                    plan.windows[i] = None;
                    continue;
                }
            }
        }
        plan.windows[i] = (!w.is_empty()).then_some(w);
    }
    // Sources the first pass could not read keep their window: the export pass reports them.
    plan
}
