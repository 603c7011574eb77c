//! What the report needs besides the summary and the diagnosis, gathered in the same pass:
//! kernel GPU time per (NVTX range, kernel) for the flame graph, device memory reservations over
//! time, and the counter series. Everything is aggregated per process; memory stays bounded by
//! the number of distinct (range, kernel) pairs, ranges and memory events, not by kernels.

use std::collections::{HashMap, VecDeque};

use crate::counters::CounterSet;
use crate::model::*;

/// Launch correlations remembered while waiting for their GPU records (FIFO beyond this).
const MAX_PENDING_LAUNCHES: usize = 1 << 20;

/// One process's share of the report.
#[derive(Debug, Default)]
pub struct ProcReport {
    pub rank: Option<u32>,
    pub label: String,
    /// Folded stacks ("range;range;kernel") -> GPU ns.
    pub folded: HashMap<String, u64>,
    /// Per device: (ts, bytes reserved by this process) in time order.
    pub memory: Vec<(u32, Vec<(Ns, u64)>)>,
    pub counters: CounterSet,
}

/// The per-process collecting sink.
#[derive(Debug, Default)]
pub struct ReportCollector {
    info: Option<ProcessInfo>,
    launch_range: HashMap<u64, RangeId>,
    launch_order: VecDeque<u64>,
    ranges: HashMap<RangeId, (Name, Option<RangeId>)>,
    kernel_ns: HashMap<(Option<RangeId>, Name), u64>,
    memory: HashMap<u32, Vec<(Ns, u64)>>,
    counters: CounterSet,
    pub result: Option<ProcReport>,
}

impl ReportCollector {
    pub fn new() -> ReportCollector {
        ReportCollector::default()
    }

    fn launch(&mut self, correlation: u64, range: Option<RangeId>) {
        let Some(r) = range else { return };
        if correlation == 0 {
            return;
        }
        if self.launch_range.insert(correlation, r).is_none() {
            self.launch_order.push_back(correlation);
            if self.launch_order.len() > MAX_PENDING_LAUNCHES {
                if let Some(old) = self.launch_order.pop_front() {
                    self.launch_range.remove(&old);
                }
            }
        }
    }

    fn stack_of(&self, r: Option<RangeId>, memo: &mut HashMap<RangeId, String>) -> String {
        let Some(mut id) = r else { return "(no NVTX range)".into() };
        if let Some(s) = memo.get(&id) {
            return s.clone();
        }
        let start = id;
        let mut names: Vec<String> = Vec::new();
        for _ in 0..64 {
            match self.ranges.get(&id) {
                Some((n, parent)) => {
                    names.push(frame_name(n));
                    match parent {
                        Some(p) => id = *p,
                        None => break,
                    }
                }
                None => break,
            }
        }
        if names.is_empty() {
            names.push("(unfinished range)".into());
        }
        names.reverse();
        let s = names.join(";");
        memo.insert(start, s.clone());
        s
    }
}

/// A frame name safe in folded lines (no `;`, no newlines).
pub fn frame_name(s: &str) -> String {
    s.chars().map(|c| if c == ';' || c == '\n' || c == '\r' { ':' } else { c }).collect()
}

/// A kernel's display name for the flame graph: demangled, without the parameter list.
pub fn kernel_frame(name: &str) -> String {
    let d = crate::summary::demangle(name);
    let mut depth = 0i32;
    let mut cut = d.len();
    for (i, c) in d.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth -= 1,
            '(' if depth == 0 && i > 0 => {
                cut = i;
                break;
            }
            _ => {}
        }
    }
    frame_name(d[..cut].trim())
}

impl TraceSink for ReportCollector {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.info = Some(info.clone());
    }
    fn handle_api(&mut self, a: &Api) {
        if a.detail.is_some() || a.name.contains("Launch") {
            self.launch(a.correlation, a.range);
        }
    }
    fn handle_collective(&mut self, c: &Collective) {
        self.launch(c.correlation, c.range);
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        let d = k.duration();
        if d == 0 {
            return;
        }
        let r = self.launch_range.get(&k.correlation).copied();
        *self.kernel_ns.entry((r, k.name.clone())).or_default() += d;
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.ranges.insert(r.id, (r.name.clone(), r.parent));
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        if m.space == MemSpace::Device {
            self.memory.entry(m.device).or_default().push((m.ts, m.reserved));
        }
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.counters.push(c);
    }
    fn handle_process_end(&mut self, _p: ProcId) {
        let info = self.info.take();
        let mut memo = HashMap::new();
        let mut names: HashMap<Name, String> = HashMap::new();
        let mut folded: HashMap<String, u64> = HashMap::new();
        let kernel_ns = std::mem::take(&mut self.kernel_ns);
        for ((r, k), ns) in kernel_ns {
            let kf = names.entry(k.clone()).or_insert_with(|| kernel_frame(&k)).clone();
            let line = format!("{};{kf}", self.stack_of(r, &mut memo));
            *folded.entry(line).or_default() += ns;
        }
        let mut memory: Vec<(u32, Vec<(Ns, u64)>)> = std::mem::take(&mut self.memory).into_iter().collect();
        for (_, v) in &mut memory {
            v.sort_by_key(|x| x.0);
        }
        memory.sort_by_key(|m| m.0);
        let mut counters = std::mem::take(&mut self.counters);
        counters.sort();
        self.launch_range.clear();
        self.launch_order.clear();
        self.ranges.clear();
        self.result = Some(ProcReport {
            rank: info.as_ref().and_then(|i| i.rank),
            label: info.as_ref().map(|i| i.label()).unwrap_or_default(),
            folded,
            memory,
            counters,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_frames_drop_parameters_and_semicolons() {
        assert_eq!(kernel_frame("_Z4gemmPfS_S_i"), "gemm");
        assert_eq!(kernel_frame("void foo<bar(int)>(float*)"), "void foo<bar(int)>");
        assert_eq!(frame_name("a;b"), "a:b");
    }
}
