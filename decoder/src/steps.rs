//! Training steps: from NVTX ranges (`step`, `ProfilerStep#N`, `train_step`, or `--step-marker`),
//! else StepBegin/StepEnd markers, else the periodic structure of the kernel stream, else the whole
//! run as one step.

use std::collections::HashMap;

use regex_lite::Regex;

use crate::intervals::FastMap;
use crate::model::*;

/// The default step-range pattern.
pub const DEFAULT_STEP_PATTERN: &str = r"^(?i:step|train_step|training_step)([ _#:]?\d+)?$|^ProfilerStep#\d+$";

/// Where the steps came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StepSource {
    Nvtx,
    Markers,
    Periodic,
    WholeRun,
}

/// One step of one process.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct StepWindow {
    pub index: u64,
    pub name: String,
    pub start: Ns,
    pub end: Ns,
}

/// Most kernel start times kept per name for periodic detection.
const MAX_STARTS_PER_NAME: usize = 100_000;
/// Most distinct kernel names tracked for periodic detection.
const MAX_NAMES: usize = 4096;

/// Collects step evidence of one process.
#[derive(Debug)]
pub struct StepFinder {
    pattern: Regex,
    ranges: Vec<(u32, StepWindow)>,
    begins: Vec<(Ns, u64)>,
    ends: Vec<Ns>,
    kernel_starts: HashMap<Name, Vec<Ns>>,
    /// Capture-window markers (production modes), (ts, is_start): time outside the windows was not
    /// observed, so no step may span it.
    captures: Vec<(Ns, bool)>,
    /// Whether a range name matches `pattern`, by the name's interned pointer (the name is kept so
    /// the pointer stays its own): the regex runs once per distinct name, not once per range.
    is_step: FastMap<usize, (Name, bool)>,
}

impl StepFinder {
    pub fn new(pattern: &Regex) -> StepFinder {
        StepFinder {
            pattern: pattern.clone(),
            ranges: Vec::new(),
            begins: Vec::new(),
            ends: Vec::new(),
            kernel_starts: HashMap::new(),
            captures: Vec::new(),
            is_step: FastMap::default(),
        }
    }

    pub fn range(&mut self, r: &NvtxRange) {
        let key = crate::ptr_cache::name_key(&r.name);
        let pattern = &self.pattern;
        let is_step = self.is_step.entry(key).or_insert_with(|| (r.name.clone(), pattern.is_match(&r.name))).1;
        if is_step {
            let w = StepWindow { index: 0, name: r.name.to_string(), start: r.start, end: r.end };
            self.ranges.push((r.depth, w));
        }
    }

    pub fn marker(&mut self, m: &Marker) {
        match m.kind {
            MarkerKind::StepBegin => self.begins.push((m.ts, m.value)),
            MarkerKind::StepEnd => self.ends.push(m.ts),
            MarkerKind::CaptureStart => self.captures.push((m.ts, true)),
            MarkerKind::CaptureStop => self.captures.push((m.ts, false)),
            _ => {}
        }
    }

    #[inline]
    pub fn kernel(&mut self, k: &Kernel) {
        // Step ranges or markers take precedence in `finish`: once one is seen, kernel starts are
        // never used, so stop collecting them.
        if !self.ranges.is_empty() || !self.begins.is_empty() {
            if !self.kernel_starts.is_empty() {
                self.kernel_starts = HashMap::new();
            }
            return;
        }
        self.kernel_start(k);
    }

    /// A kernel's start, kept for periodic detection.
    #[inline(never)]
    fn kernel_start(&mut self, k: &Kernel) {
        if self.kernel_starts.len() >= MAX_NAMES && !self.kernel_starts.contains_key(&k.name) {
            return;
        }
        let v = self.kernel_starts.entry(k.name.clone()).or_default();
        if v.len() < MAX_STARTS_PER_NAME {
            v.push(k.start);
        }
    }

    /// The stretches of `span` that capture windows left unobserved (production modes `steps`,
    /// `sample`, `tprof ctl`): before a first CaptureStart, between a CaptureStop and the next
    /// CaptureStart, after a last CaptureStop. None without capture markers (the whole run was seen).
    pub fn unobserved(&self, span: (Ns, Ns)) -> Vec<(Ns, Ns)> {
        let mut marks = self.captures.clone();
        marks.sort_unstable();
        let mut gaps = Vec::new();
        let mut closed_since = match marks.first() {
            Some(&(_, true)) => Some(span.0),
            _ => None,
        };
        for &(ts, is_start) in &marks {
            match (is_start, closed_since) {
                (true, Some(from)) => {
                    if ts > from {
                        gaps.push((from, ts));
                    }
                    closed_since = None;
                }
                (false, None) => closed_since = Some(ts),
                _ => {}
            }
        }
        if let Some(from) = closed_since {
            if span.1 > from {
                gaps.push((from, span.1));
            }
        }
        gaps
    }

    /// The steps, given the process's span (for the whole-run fallback). Steps that span time the
    /// capture windows did not observe are left out; without steps, each capture window is one.
    pub fn finish(self, span: (Ns, Ns)) -> (StepSource, Vec<StepWindow>) {
        let gaps = self.unobserved(span);
        let (source, mut v) = self.find(span);
        if gaps.is_empty() {
            return (source, v);
        }
        if source == StepSource::WholeRun {
            let mut windows = Vec::new();
            let mut from = span.0;
            for &(a, b) in gaps.iter().chain(std::iter::once(&(span.1, span.1))) {
                if a > from {
                    let i = windows.len() as u64;
                    windows.push(StepWindow { index: i, name: format!("capture window {i}"), start: from, end: a });
                }
                from = from.max(b);
            }
            return (source, windows);
        }
        // A step that starts a moment before its window opened still counts (the marker follows
        // the call that opened it): 5% of the step may lie outside.
        v.retain(|w| {
            let len = w.end.saturating_sub(w.start);
            let outside: Ns = gaps.iter().map(|&(a, b)| b.min(w.end).saturating_sub(a.max(w.start))).sum();
            outside * 20 <= len
        });
        (source, v)
    }

    fn find(mut self, span: (Ns, Ns)) -> (StepSource, Vec<StepWindow>) {
        if !self.ranges.is_empty() {
            let top = self.ranges.iter().map(|r| r.0).min().unwrap_or(0);
            let mut v: Vec<StepWindow> = self.ranges.into_iter().filter(|r| r.0 == top).map(|r| r.1).collect();
            v.sort_by_key(|w| w.start);
            return (StepSource::Nvtx, number(v));
        }
        if !self.begins.is_empty() {
            self.begins.sort_unstable();
            self.ends.sort_unstable();
            let mut v = Vec::new();
            for (i, &(b, value)) in self.begins.iter().enumerate() {
                let next_begin = self.begins.get(i + 1).map(|x| x.0).unwrap_or(span.1);
                let end = self.ends.iter().copied().find(|&e| e >= b && e <= next_begin).unwrap_or(next_begin);
                v.push(StepWindow { index: value, name: format!("step {value}"), start: b, end });
            }
            return (StepSource::Markers, v);
        }
        if let Some(starts) = periodic(&mut self.kernel_starts) {
            let mut v = Vec::new();
            for (i, w) in starts.windows(2).enumerate() {
                v.push(StepWindow { index: i as u64, name: format!("step {i}"), start: w[0], end: w[1] });
            }
            if let Some(&last) = starts.last() {
                if span.1 > last {
                    let i = v.len() as u64;
                    v.push(StepWindow { index: i, name: format!("step {i}"), start: last, end: span.1 });
                }
            }
            return (StepSource::Periodic, v);
        }
        (StepSource::WholeRun, vec![StepWindow { index: 0, name: "run".into(), start: span.0, end: span.1 }])
    }
}

fn number(mut v: Vec<StepWindow>) -> Vec<StepWindow> {
    for (i, w) in v.iter_mut().enumerate() {
        w.index = w.name.rsplit(|c: char| !c.is_ascii_digit()).next().and_then(|d| d.parse().ok()).unwrap_or(i as u64);
    }
    v
}

/// Detect a period in the kernel stream: the kernel name that recurs at the most regular interval
/// (at least 3 times, coefficient of variation of the gaps under 0.2) marks step starts. Among
/// equally regular names, the one occurring earliest in a step (first in time) wins.
pub fn periodic(kernel_starts: &mut HashMap<Name, Vec<Ns>>) -> Option<Vec<Ns>> {
    let mut best: Option<(f64, Ns, Vec<Ns>)> = None;
    for starts in kernel_starts.values_mut() {
        if starts.len() < 3 {
            continue;
        }
        starts.sort_unstable();
        let gaps: Vec<f64> = starts.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        if mean <= 0.0 {
            continue;
        }
        let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
        let cv = var.sqrt() / mean;
        if cv >= 0.2 {
            continue;
        }
        // Prefer the longest period (once per step, not once per layer), then the earliest.
        let better = match &best {
            None => true,
            Some((m, first, _)) => mean > m * 1.01 || (mean >= m * 0.99 && starts[0] < *first),
        };
        if better {
            best = Some((mean, starts[0], starts.clone()));
        }
    }
    best.map(|b| b.2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re() -> Regex {
        Regex::new(DEFAULT_STEP_PATTERN).unwrap()
    }

    #[test]
    fn default_pattern() {
        let r = re();
        for ok in ["step", "ProfilerStep#12", "train_step", "Step 3", "step_4"] {
            assert!(r.is_match(ok), "{ok}");
        }
        for no in ["stepper", "optimizer.step", "ProfilerStep"] {
            assert!(!r.is_match(no), "{no}");
        }
    }

    #[test]
    fn from_markers_and_periodic() {
        let mut f = StepFinder::new(&re());
        for i in 0..3u64 {
            f.marker(&Marker { proc: ProcId(0), kind: MarkerKind::StepBegin, ts: i * 100, value: i, name: None });
            f.marker(&Marker { proc: ProcId(0), kind: MarkerKind::StepEnd, ts: i * 100 + 90, value: i, name: None });
        }
        let (src, v) = f.finish((0, 300));
        assert_eq!(src, StepSource::Markers);
        assert_eq!(v.len(), 3);
        assert_eq!((v[1].start, v[1].end), (100, 190));

        let mut f = StepFinder::new(&re());
        let k = |name: &str, start| Kernel {
            proc: ProcId(0),
            device: 0,
            context: 0,
            stream: 0,
            start,
            end: start + 1,
            name: name.into(),
            grid: [1; 3],
            block: [1; 3],
            registers: 0,
            shared_mem: 0,
            correlation: 0,
            graph_id: 0,
            collective: None,
        };
        for s in 0..5u64 {
            let t = 1000 + s * 1000 + (s % 2) * 7;
            f.kernel(&k("embed", t));
            for l in 0..4 {
                f.kernel(&k("layer", t + 100 + l * 200));
            }
        }
        let (src, v) = f.finish((0, 6000));
        assert_eq!(src, StepSource::Periodic);
        assert_eq!(v.len(), 5);
        assert_eq!(v[0].start, 1000);
        assert_eq!(v[1].start, 2007);

        let (src, v) = StepFinder::new(&re()).finish((5, 9));
        assert_eq!(src, StepSource::WholeRun);
        assert_eq!((v[0].start, v[0].end), (5, 9));
    }

    fn capture(f: &mut StepFinder, ts: Ns, start: bool) {
        let kind = if start { MarkerKind::CaptureStart } else { MarkerKind::CaptureStop };
        f.marker(&Marker { proc: ProcId(0), kind, ts, value: 0, name: None });
    }

    #[test]
    fn steps_across_an_unobserved_stretch_are_left_out() {
        // sample mode: windows [1000, 2000] and [5000, 6000]; steps of 100 ns, one of them (1950 to
        // 5050) spans the closed stretch and is dropped; one starts 3 ns before its window opens.
        let mut f = StepFinder::new(&re());
        capture(&mut f, 1000, true);
        capture(&mut f, 2000, false);
        capture(&mut f, 5000, true);
        capture(&mut f, 6000, false);
        let step = |i: u64, s: Ns, e: Ns| NvtxRange {
            proc: ProcId(0),
            tid: 1,
            domain: None,
            name: format!("step {i}").into(),
            start: s,
            end: e,
            depth: 0,
            id: RangeId(i),
            parent: None,
            kind: RangeKind::Nvtx,
        };
        f.range(&step(1, 997, 1100));
        f.range(&step(2, 1100, 1950));
        f.range(&step(3, 1950, 5050));
        f.range(&step(4, 5050, 5150));
        assert_eq!(f.unobserved((900, 6500)), vec![(900, 1000), (2000, 5000), (6000, 6500)]);
        let (src, v) = f.finish((900, 6500));
        assert_eq!(src, StepSource::Nvtx);
        assert_eq!(v.iter().map(|w| w.index).collect::<Vec<_>>(), vec![1, 2, 4]);
    }

    #[test]
    fn without_steps_each_capture_window_is_one() {
        let mut f = StepFinder::new(&re());
        capture(&mut f, 2000, false); // a window open from the start (ctl / flight)
        capture(&mut f, 5000, true);
        let (src, v) = f.finish((1000, 7000));
        assert_eq!(src, StepSource::WholeRun);
        assert_eq!(v.iter().map(|w| (w.start, w.end)).collect::<Vec<_>>(), vec![(1000, 2000), (5000, 7000)]);
        // No capture markers: the whole run.
        assert!(StepFinder::new(&re()).unobserved((0, 10)).is_empty());
    }
}
