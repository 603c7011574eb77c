//! What the report needs besides the summary and the diagnosis, gathered in the same pass:
//! kernel GPU time per (NVTX range, kernel) for the flame graph, device memory reservations over
//! time, and the counter series. Everything is aggregated per process; memory stays bounded by
//! the number of distinct (range, kernel) pairs, ranges and memory events, not by kernels.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::kernel_times::KernelTimes;
use super::launches::LaunchRanges;
use super::stacks::RangeStacks;
use crate::gpu_counters::CounterSet;
use crate::intervals::FastMap;
use crate::model::*;
use crate::ptr_cache::{name_key, PtrCache};

/// The stack of kernels launched outside any NVTX range.
const NO_RANGE: &str = "(no NVTX range)";

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
    /// Host samples of the process tree (`report::host`), and its pid.
    pub host: crate::host::HostSeries,
    pub pid: u32,
}

/// The per-process collecting sink.
///
/// Kernel GPU time is folded as kernels arrive into (NVTX stack, kernel name) sums as soon as the
/// stack of the launching range is known (its whole chain of ranges has completed), so memory is
/// bounded by distinct stacks and kernel names plus the kernels of ranges still open, not by the
/// number of range instances.
#[derive(Debug, Default)]
pub struct ReportCollector {
    info: Option<ProcessInfo>,
    launch_range: LaunchRanges,
    stacks: RangeStacks,
    /// The stack id of [`NO_RANGE`], once named.
    no_range: Option<u32>,
    kernels: KernelTimes,
    /// Waiting kernels left by the last sweep (chains under ranges still open): the next sweep
    /// waits until as many new ones arrived, so sweeping stays linear overall.
    pending_stuck: usize,
    /// Whether an API name contains "Launch", by name pointer (the name kept so the pointer
    /// stays its own), and a cache of it.
    is_launch: FastMap<usize, (Name, bool)>,
    launch_names: PtrCache<bool>,
    memory: HashMap<u32, Vec<(Ns, u64)>>,
    counters: CounterSet,
    host: crate::host::HostSeries,
    /// Kernel frame names, shared by the collectors of one report.
    frames: KernelFrames,
    pub result: Option<ProcReport>,
}

impl ReportCollector {
    pub fn new() -> ReportCollector {
        ReportCollector::default()
    }

    /// A collector sharing `frames` with others (their names are demangled once for all).
    pub fn with_frames(frames: KernelFrames) -> ReportCollector {
        ReportCollector { frames, ..ReportCollector::default() }
    }

    #[inline]
    fn launch(&mut self, correlation: u64, range: Option<RangeId>) {
        let Some(r) = range else { return };
        if correlation == 0 {
            return;
        }
        self.launch_range.launch(correlation, r);
    }

    /// Whether API `name` is a launch, past the cache.
    #[inline(never)]
    fn is_launch_any(&mut self, name: &Name) -> bool {
        let key = name_key(name);
        let l = self.is_launch.entry(key).or_insert_with(|| (name.clone(), name.contains("Launch"))).1;
        self.launch_names.put(key, l);
        l
    }

    /// The stack of kernels launched outside any range.
    fn no_range_stack(&mut self) -> u32 {
        match self.no_range {
            Some(s) => s,
            None => *self.no_range.insert(self.stacks.stack_id(NO_RANGE.into(), 1)),
        }
    }
}

/// A frame name safe in folded lines (no `;`, no newlines).
pub fn frame_name(s: &str) -> String {
    s.chars().map(|c| if c == ';' || c == '\n' || c == '\r' { ':' } else { c }).collect()
}

/// Kernel frame names ([`kernel_frame`]) by kernel name, shared between threads.
#[derive(Debug, Default, Clone)]
pub struct KernelFrames(Arc<Mutex<HashMap<Box<str>, String>>>);

impl KernelFrames {
    /// [`kernel_frame`] of `name`, computed once.
    pub fn get(&self, name: &str) -> String {
        let mut m = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(f) = m.get(name) {
            return f.clone();
        }
        let f = kernel_frame(name);
        m.insert(name.into(), f.clone());
        f
    }
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
    #[inline]
    fn handle_api(&mut self, a: &Api) {
        let launch = a.detail.is_some()
            || match self.launch_names.get(name_key(&a.name)) {
                Some(l) => l,
                None => self.is_launch_any(&a.name),
            };
        if launch {
            self.launch(a.correlation, a.range);
        }
    }
    fn handle_collective(&mut self, c: &Collective) {
        self.launch(c.correlation, c.range);
    }
    #[inline]
    fn handle_kernel(&mut self, k: &Kernel) {
        let d = k.duration();
        if d == 0 {
            return;
        }
        // The stack of a range is named when a root range completes (its whole chain is known
        // then) or at the end: until the next of those, the kernel waits.
        let name = self.kernels.name(&k.name);
        match self.launch_range.get(k.correlation) {
            None => {
                let s = self.no_range_stack();
                self.kernels.add(s, name, d);
            }
            // Named at the next sweep (a lookup per run of its range's kernels there).
            Some(r) => self.kernels.wait(r, name, d),
        }
    }
    #[inline]
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.stacks.complete(r.id, &r.name, r.parent);
        // A root range completes after everything inside it: fold what waited for it.
        let waiting = self.kernels.waiting();
        if r.parent.is_none() && waiting > 0 && waiting >= 2 * self.pending_stuck {
            let stacks = &mut self.stacks;
            self.kernels.sweep(|r| stacks.stack_of(r, true));
            self.pending_stuck = self.kernels.waiting();
        }
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        if m.space == MemSpace::Device {
            self.memory.entry(m.device).or_default().push((m.ts, m.reserved));
        }
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.counters.push(c);
    }
    fn handle_host_sample(&mut self, s: &HostSample) {
        self.host.push(s);
    }
    fn handle_host_entity(&mut self, e: &HostEntity) {
        self.host.entity(e);
    }
    fn handle_process_end(&mut self, _p: ProcId) {
        let info = self.info.take();
        let stacks = &mut self.stacks;
        self.kernels.sweep(|r| stacks.stack_of(r, false));
        let mut frames: FastMap<usize, String> = FastMap::default();
        let mut folded: HashMap<String, u64> = HashMap::new();
        for (stack, k, ns) in std::mem::take(&mut self.kernels).into_sums() {
            let kf = frames.entry(name_key(&k)).or_insert_with(|| self.frames.get(&k));
            let line = format!("{};{kf}", self.stacks.line(stack));
            *folded.entry(line).or_default() += ns;
        }
        let mut memory: Vec<(u32, Vec<(Ns, u64)>)> = std::mem::take(&mut self.memory).into_iter().collect();
        for (_, v) in &mut memory {
            v.sort_by_key(|x| x.0);
        }
        memory.sort_by_key(|m| m.0);
        let mut counters = std::mem::take(&mut self.counters);
        counters.sort();
        self.launch_range.finish();
        self.stacks = RangeStacks::default();
        self.no_range = None;
        self.is_launch = FastMap::default();
        self.launch_names = PtrCache::default();
        self.result = Some(ProcReport {
            rank: info.as_ref().and_then(|i| i.rank),
            label: info.as_ref().map(|i| i.label()).unwrap_or_default(),
            folded,
            memory,
            counters,
            pid: info.as_ref().map(|i| i.pid).unwrap_or(0),
            host: {
                let mut h = std::mem::take(&mut self.host);
                h.finish();
                h
            },
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
