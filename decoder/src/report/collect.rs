//! What the report needs besides the summary and the diagnosis, gathered in the same pass:
//! kernel GPU time per (NVTX range, kernel) for the flame graph, device memory reservations over
//! time, and the counter series. Everything is aggregated per process; memory stays bounded by
//! the number of distinct (range, kernel) pairs, ranges and memory events, not by kernels.

use std::collections::{HashMap, VecDeque};

use crate::corr_slots::CorrSlots;
use crate::gpu_counters::CounterSet;
use crate::intervals::{FastMap, SeqMap};
use crate::model::*;

/// Launch correlations remembered while waiting for their GPU records (FIFO beyond this).
const MAX_PENDING_LAUNCHES: usize = 1 << 20;
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
    launch_range: CorrSlots<RangeId>,
    launch_order: VecDeque<u64>,
    ranges: SeqMap<RangeId, (Name, Option<RangeId>)>,
    /// Stack id of a range whose chain is complete.
    range_stack: SeqMap<RangeId, u32>,
    /// Distinct stacks ("range;range"), by id, with their number of frames.
    stacks: Vec<(String, usize)>,
    stack_ids: HashMap<String, u32>,
    /// The stack one range deeper: (stack id or [`ROOT`], range name pointer) -> (the name, stack id).
    children: FastMap<(u32, usize), (Name, u32)>,
    /// Scratch for [`ReportCollector::stack_of`]: the ranges walked up, innermost first.
    walk: Vec<RangeId>,
    /// GPU ns per (stack id, kernel name pointer); the name is kept so the pointer stays its own.
    kernel_ns: FastMap<(u32, usize), (Name, u64)>,
    /// GPU ns per (range, kernel name pointer) of kernels whose range chain is not complete yet.
    pending: FastMap<(RangeId, usize), (Name, u64)>,
    /// Pending entries left by the last sweep (chains under ranges still open): the next sweep
    /// waits until as many new ones arrived, so sweeping stays linear overall.
    pending_stuck: usize,
    /// Whether an API name contains "Launch", by name pointer.
    is_launch: FastMap<usize, (Name, bool)>,
    memory: HashMap<u32, Vec<(Ns, u64)>>,
    counters: CounterSet,
    host: crate::host::HostSeries,
    pub result: Option<ProcReport>,
}

/// Most ranges walked up from a kernel's range to name its stack.
const MAX_STACK_DEPTH: usize = 64;
/// The parent "stack" of outermost ranges in [`ReportCollector::children`].
const ROOT: u32 = u32::MAX;

fn name_key(n: &Name) -> usize {
    std::sync::Arc::as_ptr(n) as *const u8 as usize
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
        let fresh = self.launch_range.get(correlation).is_none();
        self.launch_range.insert(correlation, r);
        if fresh {
            self.launch_order.push_back(correlation);
            if self.launch_order.len() > MAX_PENDING_LAUNCHES {
                if let Some(old) = self.launch_order.pop_front() {
                    self.launch_range.remove(old);
                }
            }
        }
    }

    /// The id of a stack of `frames` frames.
    fn stack_id(&mut self, stack: String, frames: usize) -> u32 {
        if let Some(&i) = self.stack_ids.get(&stack) {
            return i;
        }
        let i = self.stacks.len() as u32;
        self.stacks.push((stack.clone(), frames));
        self.stack_ids.insert(stack, i);
        i
    }

    /// The stack of a range named `name` inside stack `parent` (or outermost, [`ROOT`]).
    fn child_stack(&mut self, parent: u32, name: &Name) -> u32 {
        if let Some(&(_, s)) = self.children.get(&(parent, name_key(name))) {
            return s;
        }
        let (line, frames) = match self.stacks.get(parent as usize) {
            Some((p, n)) => (format!("{p};{}", frame_name(name)), n + 1),
            None => (frame_name(name), 1),
        };
        let s = self.stack_id(line, frames);
        self.children.insert((parent, name_key(name)), (name.clone(), s));
        s
    }

    /// The stack of range `r` ("outer;inner"). With `complete_only`, None while a range of the
    /// chain has not completed yet (its name and parent are still unknown); at the end, a missing
    /// range ends the chain.
    ///
    /// Walks up only to the first range whose stack is known, then names each range on the way
    /// down from its parent's stack (memoized per range); chains deeper than [`MAX_STACK_DEPTH`]
    /// and ranges that never completed take [`ReportCollector::stack_by_walk`].
    fn stack_of(&mut self, r: RangeId, complete_only: bool) -> Option<u32> {
        if let Some(&s) = self.range_stack.get(&r) {
            return Some(s);
        }
        let mut chain = std::mem::take(&mut self.walk);
        chain.clear();
        let s = self.stack_down(r, complete_only, &mut chain);
        self.walk = chain;
        s
    }

    /// [`ReportCollector::stack_of`] for a range without a known stack, `chain` empty.
    fn stack_down(&mut self, r: RangeId, complete_only: bool, chain: &mut Vec<RangeId>) -> Option<u32> {
        let mut id = r;
        let base = loop {
            if chain.len() == MAX_STACK_DEPTH {
                return self.stack_by_walk(r, complete_only);
            }
            let Some((_, parent)) = self.ranges.get(&id) else {
                if complete_only {
                    return None;
                }
                if chain.is_empty() {
                    return self.stack_by_walk(r, complete_only);
                }
                // At the end, a range that never completed ends the chain.
                break ROOT;
            };
            if !chain.is_empty() {
                if let Some(&s) = self.range_stack.get(&id) {
                    break s;
                }
            }
            chain.push(id);
            match parent {
                Some(p) => id = *p,
                None => break ROOT,
            }
        };
        let base_frames = self.stacks.get(base as usize).map_or(0, |s| s.1);
        if base_frames + chain.len() > MAX_STACK_DEPTH {
            return self.stack_by_walk(r, complete_only);
        }
        let mut s = base;
        for id in chain.drain(..).rev() {
            let name = self.ranges.get(&id).map(|r| r.0.clone()).unwrap_or_default();
            s = self.child_stack(s, &name);
            self.range_stack.insert(id, s);
        }
        Some(s)
    }

    /// [`ReportCollector::stack_of`] by walking the whole chain up from `r`.
    fn stack_by_walk(&mut self, r: RangeId, complete_only: bool) -> Option<u32> {
        if complete_only && !self.chain_complete(r) {
            return None;
        }
        let mut id = r;
        let mut names: Vec<String> = Vec::new();
        let mut complete = false;
        for _ in 0..MAX_STACK_DEPTH {
            match self.ranges.get(&id) {
                Some((n, parent)) => {
                    names.push(frame_name(n));
                    match parent {
                        Some(p) => id = *p,
                        None => {
                            complete = true;
                            break;
                        }
                    }
                }
                None => break,
            }
        }
        if names.len() == MAX_STACK_DEPTH {
            complete = true;
        }
        if complete_only && !complete {
            return None;
        }
        if names.is_empty() {
            names.push("(unfinished range)".into());
        }
        names.reverse();
        let frames = names.len();
        let s = self.stack_id(names.join(";"), frames);
        self.range_stack.insert(r, s);
        Some(s)
    }

    /// True when every range of `r`'s chain (up to [`MAX_STACK_DEPTH`]) has completed.
    fn chain_complete(&self, r: RangeId) -> bool {
        let mut id = r;
        for _ in 0..MAX_STACK_DEPTH {
            match self.ranges.get(&id) {
                Some((_, Some(p))) => id = *p,
                Some((_, None)) => return true,
                None => return false,
            }
        }
        true
    }

    fn add_kernel_ns(&mut self, stack: u32, name: &Name, ns: u64) {
        self.kernel_ns.entry((stack, name_key(name))).or_insert_with(|| (name.clone(), 0)).1 += ns;
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
        let launch = a.detail.is_some()
            || self.is_launch.entry(name_key(&a.name)).or_insert_with(|| (a.name.clone(), a.name.contains("Launch"))).1;
        if launch {
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
        // The stack of a range is named when a root range completes (its whole chain is known
        // then) or at the end: until then, the kernel waits in `pending`.
        let stack = match self.launch_range.get(k.correlation).copied() {
            None => Some(self.stack_id(NO_RANGE.into(), 1)),
            Some(r) => match self.range_stack.get(&r).copied() {
                Some(s) => Some(s),
                None => {
                    self.pending.entry((r, name_key(&k.name))).or_insert_with(|| (k.name.clone(), 0)).1 += d;
                    None
                }
            },
        };
        if let Some(s) = stack {
            self.add_kernel_ns(s, &k.name, d);
        }
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.ranges.insert(r.id, (r.name.clone(), r.parent));
        // A root range completes after everything inside it: fold what waited for it.
        if r.parent.is_none() && !self.pending.is_empty() && self.pending.len() >= 2 * self.pending_stuck {
            let pending: Vec<((RangeId, usize), (Name, u64))> = self.pending.drain().collect();
            for ((rid, key), (name, ns)) in pending {
                match self.stack_of(rid, true) {
                    Some(s) => self.add_kernel_ns(s, &name, ns),
                    None => self.pending.entry((rid, key)).or_insert_with(|| (name, 0)).1 += ns,
                }
            }
            self.pending_stuck = self.pending.len();
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
        for ((rid, _), (name, ns)) in std::mem::take(&mut self.pending) {
            if let Some(s) = self.stack_of(rid, false) {
                self.add_kernel_ns(s, &name, ns);
            }
        }
        let mut frames: FastMap<usize, String> = FastMap::default();
        let mut folded: HashMap<String, u64> = HashMap::new();
        for ((stack, key), (k, ns)) in std::mem::take(&mut self.kernel_ns) {
            let kf = frames.entry(key).or_insert_with(|| kernel_frame(&k));
            let line = format!("{};{kf}", self.stacks[stack as usize].0);
            *folded.entry(line).or_default() += ns;
        }
        let mut memory: Vec<(u32, Vec<(Ns, u64)>)> = std::mem::take(&mut self.memory).into_iter().collect();
        for (_, v) in &mut memory {
            v.sort_by_key(|x| x.0);
        }
        memory.sort_by_key(|m| m.0);
        let mut counters = std::mem::take(&mut self.counters);
        counters.sort();
        self.launch_range = CorrSlots::default();
        self.launch_order = VecDeque::new();
        self.ranges = SeqMap::default();
        self.range_stack = SeqMap::default();
        self.stacks = Vec::new();
        self.stack_ids = HashMap::new();
        self.children = FastMap::default();
        self.is_launch = FastMap::default();
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
    use crate::xorshift::XorShift;

    /// The stack of `r` by walking its whole chain, in a collector that knows only the ranges.
    fn walked(c: &ReportCollector, r: RangeId, complete_only: bool) -> Option<String> {
        let mut fresh = ReportCollector { ranges: c.ranges.clone(), ..ReportCollector::default() };
        fresh.stack_by_walk(r, complete_only).map(|s| fresh.stacks[s as usize].0.clone())
    }

    #[test]
    fn memoized_stacks_name_ranges_as_the_whole_walk_does() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let names: Vec<Name> =
            ["step", "fwd", "layer;0", "attn", "mlp", "bwd", "x"].iter().map(|&n| n.into()).collect();
        for round in 0..30 {
            // A forest: each range opens inside a random open range (or none), some chains deeper
            // than MAX_STACK_DEPTH; ranges complete innermost first, a few never.
            let n = 300;
            let mut parent: Vec<Option<usize>> = Vec::new();
            let mut depth: Vec<usize> = Vec::new();
            for i in 0..n {
                // Every third round, long chains.
                let deep = round % 3 == 0;
                let p = match rng.below(100) {
                    _ if i == 0 => None,
                    0 => None,
                    1..=9 if !deep => None,
                    1..=90 if deep => Some(i - 1),
                    _ => Some(rng.below(i as u64) as usize),
                };
                depth.push(p.map_or(0, |p| depth[p] + 1));
                parent.push(p);
            }
            let mut order: Vec<usize> = (0..n).collect();
            let jitter: Vec<u64> = (0..n).map(|_| rng.below(4)).collect();
            order.sort_by_key(|&i| (std::cmp::Reverse(depth[i]), jitter[i]));
            let mut c = ReportCollector::default();
            for (k, &i) in order.iter().enumerate() {
                if rng.below(40) == 0 {
                    continue; // never completes
                }
                let name = names[rng.below(names.len() as u64) as usize].clone();
                c.ranges.insert(RangeId(i as u64), (name, parent[i].map(|p| RangeId(p as u64))));
                for _ in 0..3 {
                    let r = RangeId(rng.below(n as u64));
                    let got = c.stack_of(r, true).map(|s| c.stacks[s as usize].0.clone());
                    assert_eq!(got, walked(&c, r, true), "round {round} step {k} range {r:?}");
                }
            }
            for i in 0..n {
                let r = RangeId(i as u64);
                let got = c.stack_of(r, false).map(|s| c.stacks[s as usize].0.clone());
                assert_eq!(got, walked(&c, r, false), "round {round} end, range {r:?}");
            }
        }
    }

    #[test]
    fn kernel_frames_drop_parameters_and_semicolons() {
        assert_eq!(kernel_frame("_Z4gemmPfS_S_i"), "gemm");
        assert_eq!(kernel_frame("void foo<bar(int)>(float*)"), "void foo<bar(int)>");
        assert_eq!(frame_name("a;b"), "a:b");
    }
}
