//! Folded stacks (`range;range;kernel <ns>` lines, as flamegraph.pl and inferno read them) and
//! flame graph SVGs (rendered by `inferno::flamegraph::from_lines`): each kernel, copy and memset
//! is placed under the NVTX ranges (or imported annotations / CPU operators) open on the thread
//! that launched it, weighted by its GPU time in nanoseconds. Frames are demangled and cleaned of
//! `;`. Stacks of all selected processes are summed.
//!
//! Memory: per process, the range tree (id -> name, parent) and GPU time per (range, frame) until
//! the process ends; the output map is bounded by distinct stacks.

use std::collections::{BTreeMap, HashMap};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::display_names::{frame_name, memcpy_name, memset_name, DisplayNames};
use super::{Exporter, Written};
use crate::correlate::Generations;
use crate::intervals::{FastMap, SeqMap};
use crate::model::*;

/// What to write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldedOutput {
    /// Folded text.
    Folded,
    /// An SVG flame graph.
    Svg,
}

/// `direct` entries before the first fold of completed chains.
const FOLD_AT: usize = 1 << 16;
/// Ranges followed up a chain (a deeper or looping chain is cut there).
const MAX_DEPTH: usize = 1000;

pub struct FoldedExporter {
    path: PathBuf,
    output: FoldedOutput,
    display: DisplayNames,
    /// Launch correlation -> innermost range open at the launch (the last one to two generations of
    /// launches: GPU work arrives soon after its launch, so memory does not grow with the trace).
    launches: Generations<Option<RangeId>>,
    /// GPU time whose launch has not been seen yet: correlation -> (frame, ns); what a generation
    /// pushes out unmatched stands at the root, as at the end of the process.
    early: Generations<Vec<(Name, Ns)>>,
    ranges: SeqMap<RangeId, (Name, Option<RangeId>)>,
    /// GPU time per (innermost range, frame) not yet folded into `stacks`: an entry moves there once
    /// its range's chain up to the top has ended (ranges end children first), so this holds only
    /// the work of ranges still open, not one entry per range ever seen.
    direct: FastMap<(Option<RangeId>, Name), Ns>,
    /// `direct`'s size that triggers the next fold of completed chains.
    fold_at: usize,
    stacks: BTreeMap<String, u64>,
    activities: u64,
}

impl FoldedExporter {
    pub fn new(path: &Path, output: FoldedOutput) -> FoldedExporter {
        FoldedExporter {
            path: path.to_path_buf(),
            output,
            display: DisplayNames::default(),
            launches: Generations::default(),
            early: Generations::default(),
            ranges: SeqMap::default(),
            direct: FastMap::default(),
            fold_at: FOLD_AT,
            stacks: BTreeMap::new(),
            activities: 0,
        }
    }

    /// The folded lines so far ("a;b;c 123"), sorted.
    pub fn lines(&self) -> Vec<String> {
        self.stacks.iter().map(|(s, n)| format!("{s} {n}")).collect()
    }

    fn launch(&mut self, correlation: u64, range: Option<RangeId>) {
        if correlation == 0 {
            return;
        }
        if let Some(done) = self.early.remove(correlation) {
            for (frame, ns) in done {
                *self.direct.entry((range, frame)).or_default() += ns;
            }
        }
        if self.launches.get(correlation).is_none() {
            self.launches.insert(correlation, range);
        }
    }

    fn gpu(&mut self, correlation: u64, frame: Name, start: Ns, end: Ns) {
        let ns = end.saturating_sub(start);
        if ns == 0 {
            return;
        }
        self.activities += 1;
        match self.launches.get(correlation) {
            Some(&r) => *self.direct.entry((r, frame)).or_default() += ns,
            None if correlation != 0 => match self.early.get_mut(correlation) {
                Some(v) => v.push((frame, ns)),
                None => {
                    if let Some(unmatched) = self.early.insert_evicting(correlation, vec![(frame, ns)]) {
                        self.at_root(unmatched.into_values());
                    }
                }
            },
            None => *self.direct.entry((None, frame)).or_default() += ns,
        }
        if self.direct.len() >= self.fold_at {
            self.fold_completed();
        }
    }

    /// Moves the GPU time of every range whose whole chain has ended into `stacks` (stacks add up, so
    /// folding early gives the same lines as folding at the end of the process).
    fn fold_completed(&mut self) {
        let mut cache = HashMap::new();
        let mut open = FastMap::default();
        for ((range, frame), ns) in std::mem::take(&mut self.direct) {
            if range.is_some_and(|r| !self.chain_ended(r)) {
                open.insert((range, frame), ns);
                continue;
            }
            let stack = self.stack(range, &frame, &mut cache);
            *self.stacks.entry(stack).or_default() += ns;
        }
        self.direct = open;
        // Twice what stayed: ranges open for long are not rescanned on every insertion.
        self.fold_at = (2 * self.direct.len()).max(FOLD_AT);
    }

    /// Whether `id` and every range above it have ended (their records seen).
    fn chain_ended(&self, id: RangeId) -> bool {
        let mut cur = Some(id);
        for _ in 0..=MAX_DEPTH {
            let Some(c) = cur else { return true };
            let Some((_, parent)) = self.ranges.get(&c) else { return false };
            cur = *parent;
        }
        true // deeper than `prefix` follows: its stack is cut there either way
    }

    /// The folded line's stack for GPU time in `range` under `frame`.
    fn stack(&self, range: Option<RangeId>, frame: &Name, cache: &mut HashMap<RangeId, String>) -> String {
        let leaf = frame_name(frame);
        match range.map(|r| self.prefix(r, cache)).filter(|p| !p.is_empty()) {
            Some(p) => format!("{p};{leaf}"),
            None => leaf,
        }
    }

    /// GPU time without a launch: at the root of the stacks.
    fn at_root(&mut self, unmatched: impl IntoIterator<Item = Vec<(Name, Ns)>>) {
        for (frame, ns) in unmatched.into_iter().flatten() {
            *self.direct.entry((None, frame)).or_default() += ns;
        }
    }

    /// "outer;inner" for a range (cached per range while folding one process).
    fn prefix(&self, id: RangeId, cache: &mut HashMap<RangeId, String>) -> String {
        if let Some(s) = cache.get(&id) {
            return s.clone();
        }
        let mut chain = Vec::new();
        let mut cur = Some(id);
        while let Some(c) = cur {
            let Some((name, parent)) = self.ranges.get(&c) else { break };
            chain.push(frame_name(name));
            cur = *parent;
            if chain.len() > MAX_DEPTH {
                break;
            }
        }
        chain.reverse();
        let s = chain.join(";");
        cache.insert(id, s.clone());
        s
    }

    fn write(&self) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::output::create_dir(dir)?;
        }
        let mut out = BufWriter::new(crate::output::create_file(&self.path)?);
        let lines = self.lines();
        match self.output {
            FoldedOutput::Folded => {
                for l in &lines {
                    writeln!(out, "{l}")?;
                }
            }
            FoldedOutput::Svg => {
                if lines.is_empty() {
                    return Err(io::Error::other("no GPU time to draw: nothing selected has GPU activity with times"));
                }
                let mut opts = inferno::flamegraph::Options::default();
                opts.title = "GPU time by NVTX range (tprof)".into();
                opts.count_name = "ns".into();
                inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), &mut out)
                    .map_err(io::Error::other)?;
            }
        }
        out.flush()?;
        out.get_mut().commit()
    }
}

impl TraceSink for FoldedExporter {
    fn handle_api(&mut self, a: &Api) {
        self.launch(a.correlation, a.range);
    }

    fn handle_collective(&mut self, c: &Collective) {
        self.launch(c.correlation, c.range);
    }

    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.ranges.insert(r.id, (r.name.clone(), r.parent));
    }

    fn handle_kernel(&mut self, k: &Kernel) {
        let name = self.display.get(&k.name);
        self.gpu(k.correlation, name, k.start, k.end);
    }

    fn handle_memcpy(&mut self, m: &Memcpy) {
        self.gpu(m.correlation, memcpy_name(m).into(), m.start, m.end);
    }

    fn handle_memset(&mut self, m: &Memset) {
        self.gpu(m.correlation, memset_name(m).into(), m.start, m.end);
    }

    fn handle_process_end(&mut self, _p: ProcId) {
        // GPU work whose launch never showed up stands at the root.
        let unmatched: Vec<_> = self.early.drain().map(|(_, v)| v).collect();
        self.at_root(unmatched);
        let mut cache = HashMap::new();
        let direct = std::mem::take(&mut self.direct);
        for ((range, frame), ns) in direct {
            let stack = self.stack(range, &frame, &mut cache);
            *self.stacks.entry(stack).or_default() += ns;
        }
        self.fold_at = FOLD_AT;
        self.launches = Generations::default();
        self.ranges.clear();
        self.display.clear();
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        self.write()?;
        Ok(())
    }
}

impl Exporter for FoldedExporter {
    fn written(&self) -> Written {
        Written { files: vec![self.path.clone()], events: self.activities }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(correlation: u64, start: Ns) -> Kernel {
        Kernel {
            proc: ProcId(0),
            device: 0,
            context: 1,
            stream: 7,
            start,
            end: start + 10,
            name: Name::from("k"),
            grid: [1; 3],
            block: [1; 3],
            registers: 0,
            shared_mem: 0,
            correlation,
            graph_id: 0,
            collective: None,
        }
    }

    /// A million kernels whose launches never show up (a CUPTI-only process): the unmatched map
    /// keeps at most two generations, and every nanosecond still lands, at the root.
    #[test]
    fn gpu_work_without_launches_is_bounded_and_none_is_lost() {
        let mut f = FoldedExporter::new(Path::new("/dev/null"), FoldedOutput::Folded);
        let n = 1_000_000u64;
        for c in 1..=n {
            f.handle_kernel(&kernel(c, c * 100));
            assert!(f.early.len() <= 2 * crate::correlate::GENERATION);
        }
        // A launch inside a range whose kernel comes right after it is still attributed.
        f.ranges.insert(RangeId(1), (Name::from("step"), None));
        f.launch(n + 1, Some(RangeId(1)));
        f.handle_kernel(&kernel(n + 1, 0));
        f.handle_process_end(ProcId(0));
        assert_eq!(f.lines(), vec![format!("k {}", n * 10), "step;k 10".to_string()]);
    }

    /// 300k layer ranges with a kernel each: those under an ended `step` are folded as they come
    /// (the per-range map stays small), those under `outer`, which ends last, wait for it; the lines
    /// are what folding at the end gives.
    #[test]
    fn ended_chains_are_folded_early_and_the_lines_are_unchanged() {
        let mut f = FoldedExporter::new(Path::new("/dev/null"), FoldedOutput::Folded);
        let (step, outer) = (RangeId(1), RangeId(2));
        f.ranges.insert(step, (Name::from("step"), None));
        let (mut under_step, mut under_outer, mut most) = (0u64, 0u64, 0usize);
        for i in 0..300_000u64 {
            let layer = RangeId(10 + i);
            let parent = if i % 3 == 0 { outer } else { step };
            f.ranges.insert(layer, (Name::from("layer"), Some(parent)));
            f.launch(i + 1, Some(layer));
            f.handle_kernel(&kernel(i + 1, i * 100));
            if parent == step {
                under_step += 10;
            } else {
                under_outer += 10;
            }
            most = most.max(f.direct.len());
        }
        // 100k entries wait for `outer`; without folding there would be 300k.
        assert!(most <= 2 * 100_000 + FOLD_AT, "{most}");
        f.ranges.insert(outer, (Name::from("outer"), None));
        f.handle_process_end(ProcId(0));
        assert_eq!(f.lines(), vec![format!("outer;layer;k {under_outer}"), format!("step;layer;k {under_step}")]);
    }
}
