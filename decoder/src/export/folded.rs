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

pub struct FoldedExporter {
    path: PathBuf,
    output: FoldedOutput,
    display: DisplayNames,
    /// Launch correlation -> innermost range open at the launch.
    launches: SeqMap<u64, Option<RangeId>>,
    /// GPU time whose launch has not been seen yet: correlation -> (frame, ns).
    early: SeqMap<u64, Vec<(Name, Ns)>>,
    ranges: SeqMap<RangeId, (Name, Option<RangeId>)>,
    direct: FastMap<(Option<RangeId>, Name), Ns>,
    stacks: BTreeMap<String, u64>,
    activities: u64,
}

impl FoldedExporter {
    pub fn new(path: &Path, output: FoldedOutput) -> FoldedExporter {
        FoldedExporter {
            path: path.to_path_buf(),
            output,
            display: DisplayNames::default(),
            launches: SeqMap::default(),
            early: SeqMap::default(),
            ranges: SeqMap::default(),
            direct: FastMap::default(),
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
        if let Some(done) = self.early.remove(&correlation) {
            for (frame, ns) in done {
                *self.direct.entry((range, frame)).or_default() += ns;
            }
        }
        self.launches.entry(correlation).or_insert(range);
    }

    fn gpu(&mut self, correlation: u64, frame: Name, start: Ns, end: Ns) {
        let ns = end.saturating_sub(start);
        if ns == 0 {
            return;
        }
        self.activities += 1;
        match self.launches.get(&correlation) {
            Some(&r) => *self.direct.entry((r, frame)).or_default() += ns,
            None if correlation != 0 => self.early.entry(correlation).or_default().push((frame, ns)),
            None => *self.direct.entry((None, frame)).or_default() += ns,
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
            if chain.len() > 1000 {
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
        for (_, v) in std::mem::take(&mut self.early) {
            for (frame, ns) in v {
                *self.direct.entry((None, frame)).or_default() += ns;
            }
        }
        let mut cache = HashMap::new();
        let direct = std::mem::take(&mut self.direct);
        for ((range, frame), ns) in direct {
            let leaf = frame_name(&frame);
            let stack = match range.map(|r| self.prefix(r, &mut cache)).filter(|p| !p.is_empty()) {
                Some(p) => format!("{p};{leaf}"),
                None => leaf,
            };
            *self.stacks.entry(stack).or_default() += ns;
        }
        self.launches.clear();
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
