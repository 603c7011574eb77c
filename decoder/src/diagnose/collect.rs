//! The per-rank fact collector: a [`TraceSink`] fed one process, keeping compact GPU operations
//! and host calls (times and a class byte, no names) plus bounded tables, turned into
//! [`RankFacts`] by [`crate::diagnose::timeline`] when the process ends.

use std::cell::Cell;
use std::collections::HashMap;

use regex_lite::Regex;

use super::corr_ids::CorrIds;
use super::facts::*;
use super::runs::{Runs, SizeHints};
use super::timeline::{self, CallClass, OpKind, RawCall, RawOp};
use crate::clock_alignment::CollectiveEnds;
use crate::intervals::{FastMap, SeqMap};
use crate::model::*;
use crate::ptr_cache::PtrCache;
use crate::steps::StepFinder;

/// The run lengths of the GPU operations and host calls of the last process collected (the next
/// reserves as much: its lists then grow without copying).
static OP_RUNS: SizeHints = SizeHints::new();
static CALL_RUNS: SizeHints = SizeHints::new();

thread_local! {
    /// The sorted GPU operations and host calls of the last process this thread collected, for
    /// the next one to fill, emptied (cut to the room of the run it will hold): their pages are
    /// in memory already, where a new list's are mapped and zeroed anew (a list this large is an
    /// mmap of its own, unmapped when freed). Freed with the thread (a decoding worker, when
    /// every process is done).
    static SPARE: Cell<(Vec<RawOp>, Vec<RawCall>)> = const { Cell::new((Vec::new(), Vec::new())) };
}

/// Keeps `input`'s sorted lists for the next process this thread collects; the rest is dropped.
fn keep_lists(input: timeline::Input) {
    SPARE.set((OP_RUNS.spare(input.ops), CALL_RUNS.spare(input.calls)));
}

/// Most memory samples kept per process.
const MAX_MEM_SAMPLES: usize = 200_000;

/// A kernel's family and its slot in the family's by-name times (None beyond the first 4096).
type FamilySlot = (Family, Option<u32>);

/// One family's kernels, GPU ns, and GPU ns by kernel name (slots index `family_names`).
type FamilyTotals = (u64, Ns, HashMap<Name, u32>);

/// Name id and value by name pointer, in front of a map that keeps the names alive (so a cached
/// pointer is never reused).
type NameCache<V> = PtrCache<(u32, V), 4096>;

/// Collects one process's facts.
#[derive(Debug)]
pub struct FactCollector {
    info: Option<ProcessInfo>,
    host: crate::host::HostSeries,
    nccl: crate::nccl_plugin::table::RankNccl,
    steps: Option<StepFinder>,
    span: (Ns, Ns),
    /// GPU operations and host calls, in the sorted runs they arrive in (per stream, per thread).
    ops: Runs<RawOp>,
    calls: Runs<RawCall>,
    /// Correlation ids as the records above, the pageable copies and small copies keep them.
    corr_ids: CorrIds,
    /// Interned call names, indexed by `RawCall::name`.
    names: Vec<Name>,
    name_ids: HashMap<Name, u32>,
    /// Call name pointer -> (the name, its id in `names`, its class): the text is hashed and
    /// classified once per distinct name, not once per call.
    call_names: FastMap<usize, (Name, u32, CallClass)>,
    /// Recent entries of `call_names` (pointer, id, class), by pointer bits.
    call_cache: NameCache<CallClass>,
    /// Kernel name pointer -> its index in `kernel_names`.
    kernel_ids: FastMap<usize, u32>,
    /// Kernel names with their family and slot in the family's by-name times (decided on the
    /// first kernel without imported collective info).
    kernel_names: Vec<(Name, Option<FamilySlot>)>,
    /// Kernels and their GPU ns by index in `kernel_names`, of the kernels without imported
    /// collective info (folded into their family's times at the end: one sum per kernel here).
    kernel_times: Vec<(u64, Ns)>,
    /// Recent entries of `kernel_ids` (pointer, index, family and slot), by pointer bits.
    kernel_cache: NameCache<Option<FamilySlot>>,
    /// Call names of collectives, per op.
    coll_names: FastMap<u8, Name>,
    /// Correlations of copies touching pageable memory, with their bytes and GPU time.
    pageable: SeqMap<u32, (u64, Ns, Ns)>,
    /// Correlations of small device-to-host copies.
    small_d2h: Vec<u32>,
    colls: Vec<Collective>,
    /// Communication kernels by correlation (with imported collective info).
    comm_kernels: Vec<Kernel>,
    syncs: Vec<SyncEvent>,
    /// Per family, indexed by `Family as usize` (None until its first kernel).
    families: [Option<FamilyTotals>; Family::ALL.len()],
    family_names: Vec<(Name, Ns)>,
    mem: MemFacts,
    mem_samples: Vec<(Ns, u64)>,
    hang_markers: Vec<HangMarker>,
    /// The call that started last (its id in `names`, start).
    last_call: Option<(u32, Ns)>,
    /// Last kernel to start (its index in `kernel_names`, start, end).
    last_kernel: Option<(u32, Ns, Ns)>,
    tensor: (f64, u64),
    health: Vec<super::facts::HealthSample>,
    /// Kernels per device; runs of the same device are counted in `device_run` first (a device
    /// and its kernels, none yet when 0).
    devices: FastMap<u32, u64>,
    device_run: (u32, u64),
    exited: bool,
    api_count: u64,
    /// Collective ends for clock alignment across hosts.
    pub clock: CollectiveEnds,
    pub result: Option<RankFacts>,
}

impl FactCollector {
    pub fn new(step_pattern: &Regex) -> FactCollector {
        let (ops, calls) = SPARE.take();
        FactCollector {
            info: None,
            steps: Some(StepFinder::new(step_pattern)),
            span: (u64::MAX, 0),
            ops: Runs::with_hints(&OP_RUNS, ops),
            calls: Runs::with_hints(&CALL_RUNS, calls),
            corr_ids: CorrIds::default(),
            names: Vec::new(),
            name_ids: HashMap::new(),
            call_names: FastMap::default(),
            call_cache: PtrCache::default(),
            kernel_ids: FastMap::default(),
            kernel_names: Vec::new(),
            kernel_times: Vec::new(),
            kernel_cache: PtrCache::default(),
            coll_names: FastMap::default(),
            pageable: SeqMap::default(),
            small_d2h: Vec::new(),
            colls: Vec::new(),
            comm_kernels: Vec::new(),
            syncs: Vec::new(),
            families: Default::default(),
            family_names: Vec::new(),
            mem: MemFacts::default(),
            mem_samples: Vec::new(),
            hang_markers: Vec::new(),
            last_call: None,
            last_kernel: None,
            tensor: (0.0, 0),
            health: Vec::new(),
            devices: FastMap::default(),
            device_run: (0, 0),
            exited: false,
            host: Default::default(),
            nccl: Default::default(),
            api_count: 0,
            clock: CollectiveEnds::default(),
            result: None,
        }
    }

    fn seen(&mut self, start: Ns, end: Ns) {
        self.span.0 = self.span.0.min(start);
        self.span.1 = self.span.1.max(end);
    }

    /// A copy or memset: GPU memory work.
    fn memory_op(&mut self, start: Ns, end: Ns, corr: u64) -> u32 {
        self.seen(start, end);
        let corr = self.corr_ids.compact(corr);
        self.ops.push(RawOp { start, end, corr, kind: OpKind::Memory, family: Family::Other });
        corr
    }

    fn name_id(&mut self, n: &Name) -> u32 {
        if let Some(&i) = self.name_ids.get(n) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(n.clone());
        self.name_ids.insert(n.clone(), i);
        i
    }

    /// Id and class of a call name (`class` None: classify it as a CUDA call).
    fn call_name(&mut self, name: &Name, class: Option<CallClass>) -> (u32, CallClass) {
        let key = crate::ptr_cache::name_key(name);
        if let Some((id, c)) = self.call_cache.get(key) {
            return (id, class.unwrap_or(c));
        }
        if let Some(&(_, id, c)) = self.call_names.get(&key) {
            self.call_cache.put(key, (id, c));
            return (id, class.unwrap_or(c));
        }
        let id = self.name_id(name);
        let c = class.unwrap_or_else(|| timeline::classify_call(name));
        if class.is_none() {
            self.call_names.insert(key, (name.clone(), id, c));
            self.call_cache.put(key, (id, c));
        }
        (id, c)
    }

    fn call(&mut self, name: &Name, start: Ns, end: Ns, corr: u64, class: Option<CallClass>) {
        let (id, class) = self.call_name(name, class);
        let corr = self.corr_ids.compact(corr);
        self.calls.push(RawCall::new(start, end, corr, class, id));
        if self.last_call.is_none_or(|l| start >= l.1) {
            self.last_call = Some((id, start));
        }
    }
}

impl FactCollector {
    /// A kernel's family and its slot in the family's by-name times (None beyond the first 4096
    /// names of a family), decided once per distinct name.
    fn kernel_family(&mut self, k: &Kernel, id: u32) -> FamilySlot {
        if k.collective.is_some() {
            // Imported collective info makes any kernel communication (imports only: not cached).
            return (Family::Communication, self.family_slot(Family::Communication, &k.name));
        }
        if let Some(c) = self.kernel_names[id as usize].1 {
            return c;
        }
        let family = Family::of(&k.name);
        let slot = self.family_slot(family, &k.name);
        self.kernel_names[id as usize].1 = Some((family, slot));
        (family, slot)
    }

    /// The index of a kernel's name in `kernel_names` (added on first sight), its family and its
    /// slot in the family's by-name times: from the cache for a name seen before (without imported
    /// collective info, which makes a kernel communication whatever its name).
    #[inline]
    fn kernel_id(&mut self, k: &Kernel) -> (u32, FamilySlot) {
        let key = crate::ptr_cache::name_key(&k.name);
        if k.collective.is_none() {
            if let Some((id, Some(c))) = self.kernel_cache.get(key) {
                return (id, c);
            }
        }
        self.kernel_id_slow(k, key)
    }

    #[inline(never)]
    fn kernel_id_slow(&mut self, k: &Kernel, key: usize) -> (u32, FamilySlot) {
        let next = self.kernel_names.len() as u32;
        let id = *self.kernel_ids.entry(key).or_insert(next);
        if id == next {
            self.kernel_names.push((k.name.clone(), None));
            self.kernel_times.push((0, 0));
        }
        let c = self.kernel_family(k, id);
        if k.collective.is_none() {
            self.kernel_cache.put(key, (id, Some(c)));
        }
        (id, c)
    }

    /// Counts a kernel on `device`.
    fn count_device(&mut self, device: u32) {
        match &mut self.device_run {
            (d, n) if *d == device => *n += 1,
            run => {
                let (d, n) = std::mem::replace(run, (device, 1));
                if n > 0 {
                    *self.devices.entry(d).or_default() += n;
                }
            }
        }
    }

    /// `kernels` more kernels of `family` and `ns` more GPU time, by name in `slot`.
    fn add_family_time(&mut self, family: Family, slot: Option<u32>, kernels: u64, ns: Ns) {
        let f = self.families[family as usize].get_or_insert_with(|| (0, 0, HashMap::new()));
        f.0 += kernels;
        f.1 += ns;
        if let Some(i) = slot {
            self.family_names[i as usize].1 += ns;
        }
    }

    /// The kernels summed by name added to their family's times.
    fn fold_kernel_times(&mut self) {
        for (id, (n, ns)) in std::mem::take(&mut self.kernel_times).into_iter().enumerate() {
            if let (true, Some((family, slot))) = (n > 0, self.kernel_names[id].1) {
                self.add_family_time(family, slot, n, ns);
            }
        }
    }

    fn family_slot(&mut self, family: Family, name: &Name) -> Option<u32> {
        let f = self.families[family as usize].get_or_insert_with(|| (0, 0, HashMap::new()));
        if let Some(&i) = f.2.get(name) {
            return Some(i);
        }
        if f.2.len() >= 4096 {
            return None;
        }
        let i = self.family_names.len() as u32;
        self.family_names.push((name.clone(), 0));
        f.2.insert(name.clone(), i);
        Some(i)
    }
}

impl TraceSink for FactCollector {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.info = Some(info.clone());
        self.clock.handle_process(info);
    }

    fn handle_kernel(&mut self, k: &Kernel) {
        self.seen(k.start, k.end);
        if let Some(s) = &mut self.steps {
            s.kernel(k);
        }
        self.count_device(k.device);
        let (id, (family, slot)) = self.kernel_id(k);
        let kind = if family == Family::Communication { OpKind::Comm } else { OpKind::Compute };
        if kind == OpKind::Comm {
            // The clock sink ignores non-communication kernels (the same test as the family's).
            self.clock.handle_kernel(k);
        }
        let corr = self.corr_ids.compact(k.correlation);
        self.ops.push(RawOp { start: k.start, end: k.end, corr, kind, family });
        if k.collective.is_none() {
            // Its family and slot are its name's: summed per name, folded in at the end.
            let t = &mut self.kernel_times[id as usize];
            t.0 += 1;
            t.1 += k.duration();
        } else {
            self.add_family_time(family, slot, 1, k.duration());
        }
        if kind == OpKind::Comm {
            self.comm_kernels.push(k.clone());
        }
        if self.last_kernel.as_ref().is_none_or(|l| k.start >= l.1) {
            self.last_kernel = Some((id, k.start, k.end));
        }
    }

    fn handle_memcpy(&mut self, m: &Memcpy) {
        let corr = self.memory_op(m.start, m.end, m.correlation);
        if m.src_kind == MemoryKind::Pageable || m.dst_kind == MemoryKind::Pageable {
            let e = self.pageable.entry(corr).or_default();
            e.0 += m.bytes;
            e.1 = m.start;
            e.2 = m.end;
        }
        if m.kind == CopyKind::DtoH && m.bytes <= 1024 {
            self.small_d2h.push(corr);
        }
    }

    fn handle_memset(&mut self, m: &Memset) {
        self.memory_op(m.start, m.end, m.correlation);
    }

    fn handle_api(&mut self, a: &Api) {
        self.seen(a.start, a.end);
        self.api_count += 1;
        self.call(&a.name, a.start, a.end, a.correlation, None);
    }

    fn handle_sync(&mut self, s: &SyncEvent) {
        self.seen(s.start, s.end);
        if s.kind != SyncKind::StreamWaitEvent && self.syncs.len() < 1_000_000 {
            self.syncs.push(s.clone());
        }
    }

    fn handle_memory(&mut self, m: &MemoryEvent) {
        self.seen(m.ts, m.ts);
        if m.device == u32::MAX {
            return; // pinned host memory
        }
        let mem = &mut self.mem;
        match m.op {
            MemOp::Alloc => {
                mem.allocs += 1;
                mem.alloc_bytes += m.bytes;
            }
            MemOp::Free => mem.frees += 1,
            MemOp::AllocFailed => mem.failures.push(AllocFailure {
                ts: m.ts,
                device: m.device,
                bytes: m.bytes,
                reserved: m.reserved,
                step: None,
            }),
        }
        if m.op != MemOp::AllocFailed && m.reserved > mem.peak_reserved {
            mem.peak_reserved = m.reserved;
            mem.peak_device = m.device;
        }
        if m.op != MemOp::AllocFailed && self.mem_samples.len() < MAX_MEM_SAMPLES {
            self.mem_samples.push((m.ts, m.reserved));
        }
    }

    fn handle_collective(&mut self, c: &Collective) {
        self.seen(c.start, c.end);
        self.clock.handle_collective(c);
        let name = self.coll_names.entry(c.op as u8).or_insert_with(|| format!("nccl{}", c.op.name()).into()).clone();
        let class = match c.op {
            CollOp::CommInit | CollOp::CommDestroy | CollOp::CommFinalize | CollOp::CommAbort => CallClass::Setup,
            _ => CallClass::Other,
        };
        self.call(&name, c.start, c.end, c.correlation, Some(class));
        // Group starts and ends too: they tell which kernels a group end launched for its calls.
        if c.op.moves_data() || matches!(c.op, CollOp::GroupStart | CollOp::GroupEnd) {
            self.colls.push(c.clone());
        }
    }

    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.seen(r.start, r.end);
        if let Some(s) = &mut self.steps {
            s.range(r);
        }
    }

    fn handle_counter(&mut self, c: &CounterSample) {
        self.seen(c.ts, c.ts);
        if let Some(name) = super::facts::HealthSample::kind(&c.name).filter(|_| self.health.len() < 1 << 20) {
            self.health.push(super::facts::HealthSample { ts: c.ts, name, value: c.value });
        }
        let n = c.name.to_ascii_lowercase();
        if n.contains("tensor") {
            // Counters report either a fraction or a percentage.
            let v = if c.value > 1.0 { c.value / 100.0 } else { c.value };
            self.tensor.0 += v;
            self.tensor.1 += 1;
        } else if n.contains("mem") && (n.contains("total") || n.contains("capacity")) && c.value > 0.0 {
            self.mem.capacity = Some(c.value as u64);
        }
    }

    fn handle_marker(&mut self, m: &Marker) {
        self.seen(m.ts, m.ts);
        if let Some(s) = &mut self.steps {
            s.marker(m);
        }
        match m.kind {
            MarkerKind::HangSuspected => self.hang_markers.push(HangMarker {
                ts: m.ts,
                pending_ns: m.value,
                what: m.name.as_ref().map(|n| n.to_string()),
            }),
            MarkerKind::ProcessExit => self.exited = true,
            _ => {}
        }
    }

    fn handle_host_sample(&mut self, s: &HostSample) {
        self.host.push(s);
    }

    fn handle_host_entity(&mut self, e: &HostEntity) {
        self.host.entity(e);
    }

    fn handle_nccl_plugin(&mut self, e: &crate::nccl_plugin::NcclPluginEvent) {
        self.nccl.handle(e);
    }

    fn handle_process_end(&mut self, p: ProcId) {
        self.clock.handle_process_end(p);
        let Some(info) = self.info.take() else { return };
        let span = if self.span.0 == u64::MAX { (0, 0) } else { self.span };
        let unobserved = self.steps.as_ref().map(|f| f.unobserved(span)).unwrap_or_default();
        let (source, windows) = match self.steps.take() {
            Some(f) => f.finish(span),
            None => (crate::steps::StepSource::WholeRun, Vec::new()),
        };
        let last_call = self.last_call.take().map(|(i, t)| (self.names[i as usize].to_string(), t));
        let mut input = timeline::Input {
            ops: std::mem::take(&mut self.ops).into_sorted(),
            calls: std::mem::take(&mut self.calls).into_sorted(),
            names: std::mem::take(&mut self.names),
            syncs: std::mem::take(&mut self.syncs),
            pageable: std::mem::take(&mut self.pageable),
            small_d2h: std::mem::take(&mut self.small_d2h),
            colls: std::mem::take(&mut self.colls),
            comm_kernels: std::mem::take(&mut self.comm_kernels),
            corr_ids: std::mem::take(&mut self.corr_ids),
            mem_samples: std::mem::take(&mut self.mem_samples),
            windows,
            windows_in_gpu_time: source == crate::steps::StepSource::Periodic,
            span,
            unobserved,
        };
        let tl = timeline::analyse(&mut input);
        keep_lists(input);
        let mut memory = std::mem::take(&mut self.mem);
        memory.reserved_by_step = tl.reserved_by_step;
        memory.step_alloc_calls = tl.step_alloc_calls;
        memory.step_alloc_ns = tl.step_alloc_ns;
        memory.step_alloc_idle_ns = tl.step_alloc_idle_ns;
        for f in &mut memory.failures {
            f.step = tl.step_of_time.as_ref().and_then(|s| s.at(f.ts));
        }
        self.fold_kernel_times();
        let mut families: Vec<FamilyStat> = Family::ALL
            .into_iter()
            .filter_map(|family| Some((family, self.families[family as usize].take()?)))
            .map(|(family, (kernels, total_ns, by_name))| {
                let top = by_name
                    .into_iter()
                    .map(|(n, i)| (n, self.family_names[i as usize].1))
                    .max_by(|a, b| a.1.cmp(&b.1).then(b.0.cmp(&a.0)));
                FamilyStat {
                    family,
                    kernels,
                    total_ns,
                    top_kernel: top.as_ref().map(|t| t.0.to_string()).unwrap_or_default(),
                    top_kernel_ns: top.map(|t| t.1).unwrap_or(0),
                }
            })
            .collect();
        families.sort_by(|a, b| b.total_ns.cmp(&a.total_ns).then(a.family.cmp(&b.family)));
        if let (d, n @ 1..) = std::mem::take(&mut self.device_run) {
            *self.devices.entry(d).or_default() += n;
        }
        let device =
            self.devices.iter().max_by_key(|(d, n)| (**n, std::cmp::Reverse(**d))).map(|(d, _)| *d).unwrap_or(0);
        self.result = Some(RankFacts {
            proc: info.id,
            rank: info.rank.unwrap_or(info.id.0),
            label: info.label(),
            path: info.path.display().to_string(),
            host: info.host.to_string(),
            origin: info.origin,
            gpu_times: tl.gpu_ops > 0,
            span,
            window: tl.window,
            split: tl.split,
            steps: tl.steps,
            colls: tl.colls,
            syncs: tl.syncs,
            small_d2h: tl.small_d2h,
            pageable: tl.pageable,
            families,
            memory,
            amp: tl.amp,
            hang_markers: std::mem::take(&mut self.hang_markers),
            last_call,
            last_kernel: self.last_kernel.take().map(|(i, s, e)| (self.kernel_names[i as usize].0.to_string(), s, e)),
            tensor_activity: (self.tensor.1 > 0).then(|| self.tensor.0 / self.tensor.1 as f64),
            device,
            exited: self.exited,
            health: std::mem::take(&mut self.health),
            pid: info.pid,
            host_series: {
                let mut h = std::mem::take(&mut self.host);
                h.finish();
                h
            },
            nccl: {
                let mut n = std::mem::take(&mut self.nccl);
                n.finish();
                n
            },
        });
    }
}
