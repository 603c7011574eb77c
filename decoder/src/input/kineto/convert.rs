//! The Kineto converter: each intact event becomes a [`Rec`] the moment it is parsed; ranges,
//! API calls and collectives are nested per thread once all are seen (an external sort), then
//! everything goes to the sink in time order (a second external sort). Memory held: the sort
//! buffers, the name table, and one entry per NCCL kernel, process, thread and communicator.

use std::collections::HashMap;

use rustc_hash::FxHashMap;
use std::path::Path;

use super::event::{counter_args, Cat, NumArg, Ph, RawEvent};
use super::records::{Kind, NestOrder, Rec, TimeOrder, NONE};
use super::spill::Sorter;
use super::{collective_args, copy_kinds, fnv1a, us_to_ns};
use crate::error::InputError;
use crate::input::Notes;
use crate::model::*;

/// Bytes of records each of the two sorts holds in memory before spilling to a temporary file.
const SORT_BUDGET: usize = 48 << 20;

/// Names as small ids.
#[derive(Default)]
pub(super) struct NameTable {
    ids: FxHashMap<Name, u32>,
    pub names: Vec<Name>,
}

impl NameTable {
    pub fn id(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.ids.get(s) {
            return id;
        }
        let n: Name = Name::from(s);
        let id = self.names.len() as u32;
        self.names.push(n.clone());
        self.ids.insert(n, id);
        id
    }
}

/// What the events say about the process, known only once all are seen.
#[derive(Default)]
pub(super) struct Identity {
    /// The CPU process: the pid of the first runtime call / CPU op with a non-zero pid.
    pub pid: u32,
    /// `process_name` metadata per pid (the last).
    process_names: HashMap<u32, String>,
    pub gpu_activity: bool,
}

impl Identity {
    pub fn process_name(&self) -> String {
        self.process_names.get(&self.pid).cloned().unwrap_or_default()
    }
}

pub(super) struct KinetoConverter {
    pub names: NameTable,
    pub ident: Identity,
    /// External id -> correlation of the NCCL kernel launched under it (links `record_param_comms`).
    comm_kernel_corr: HashMap<u64, u64>,
    /// `thread_name` metadata: (pid, tid, name id), delivered once the process's pid is known.
    thread_names: Vec<(u32, u32, u32)>,
    nest: Sorter<NestOrder>,
    timed: Sorter<TimeOrder>,
    seq: u64,
    /// The next sequence number per communicator (process group).
    seq_per_comm: HashMap<u64, u64>,
    /// Collective calls (`record_param_comms`) converted.
    calls: usize,
    /// Slice events without a timestamp, skipped.
    without_ts: usize,
    /// Intact events seen.
    pub events: usize,
    /// A temporary file could not be written: the error, once.
    pub spill_error: Option<std::io::Error>,
}

impl KinetoConverter {
    pub fn new() -> KinetoConverter {
        KinetoConverter {
            names: NameTable::default(),
            ident: Identity::default(),
            comm_kernel_corr: HashMap::new(),
            thread_names: Vec::new(),
            nest: Sorter::new(SORT_BUDGET),
            timed: Sorter::new(SORT_BUDGET),
            seq: 0,
            seq_per_comm: HashMap::new(),
            calls: 0,
            without_ts: 0,
            events: 0,
            spill_error: None,
        }
    }

    fn rec(&mut self, kind: Kind, e: &RawEvent) -> Rec {
        let seq = self.seq;
        self.seq += 1;
        let ts = e.ts.unwrap_or(0.0);
        Rec {
            kind,
            start: us_to_ns(ts),
            end: us_to_ns(ts + e.dur.unwrap_or(0.0).max(0.0)),
            correlation: e.arg_or0(NumArg::Correlation),
            device: e.arg_or0(NumArg::Device) as u32,
            context: e.arg_or0(NumArg::Context) as u32,
            parent: NONE,
            range: NONE,
            seq,
            ..Rec::default()
        }
    }

    fn push_timed(&mut self, r: Rec) {
        if let Err(e) = self.timed.push(TimeOrder(r)) {
            self.spill_error.get_or_insert(e);
        }
    }

    fn push_nested(&mut self, r: Rec) {
        if let Err(e) = self.nest.push(NestOrder(r)) {
            self.spill_error.get_or_insert(e);
        }
    }

    /// Event `index` of `traceEvents`, parsed from `bytes`.
    pub fn on_event(&mut self, e: &RawEvent, index: usize, bytes: &[u8]) {
        self.events += 1;
        if self.ident.pid == 0 && e.cat.is_cpu_side() {
            self.ident.pid = e.pid;
        }
        if e.cat.is_gpu() {
            self.ident.gpu_activity = true;
        }
        if e.cat == Cat::Kernel && (is_comm_kernel(&e.name) || e.collective_key) {
            if let (Some(x), Some(c)) = (e.arg(NumArg::ExternalId), e.arg(NumArg::Correlation)) {
                self.comm_kernel_corr.insert(x, c);
            }
        }
        if e.ph == Ph::M {
            if let Some(n) = &e.meta_name {
                match e.name.as_str() {
                    "process_name" => {
                        self.ident.process_names.insert(e.pid, crate::bounded_names::cap(n).into_owned());
                    }
                    "thread_name" => {
                        let id = self.names.id(n);
                        self.thread_names.push((e.pid, e.tid, id));
                    }
                    _ => {}
                }
            }
            return;
        }
        if e.ph == Ph::X && e.ts.is_none() {
            self.without_ts += 1;
            return;
        }
        match (e.ph, e.cat) {
            (Ph::X, Cat::Kernel) => self.on_kernel(e),
            (Ph::X, Cat::Memcpy) => self.on_copy(Kind::Memcpy, e),
            (Ph::X, Cat::Memset) => self.on_copy(Kind::Memset, e),
            (Ph::X, Cat::Runtime | Cat::Driver) => {
                let mut r = self.rec(Kind::Api, e);
                r.tid = e.tid;
                r.flag = e.cat == Cat::Driver;
                r.name = self.names.id(&e.name);
                self.push_nested(r);
            }
            (Ph::X, Cat::UserAnnotation | Cat::CpuOp) => self.on_cpu_span(index, e),
            (Ph::C, _) => self.on_counter(e, bytes),
            _ => {}
        }
    }

    fn stream(e: &RawEvent) -> u32 {
        e.arg(NumArg::Stream).map(|s| s as u32).unwrap_or(e.tid)
    }

    fn on_kernel(&mut self, e: &RawEvent) {
        let mut r = self.rec(Kind::Kernel, e);
        if let Some((op, bytes, nranks, _)) = collective_args(e) {
            r.flag = true;
            r.op = op as u8;
            r.bytes = bytes;
            r.nranks = nranks;
        }
        r.tid = Self::stream(e);
        r.name = self.names.id(&e.name);
        r.grid = e.grid;
        r.block = e.block;
        r.registers = e.arg_or0(NumArg::Registers) as u16;
        r.shared_mem = e.arg_or0(NumArg::SharedMem) as u32;
        self.push_timed(r);
    }

    fn on_copy(&mut self, kind: Kind, e: &RawEvent) {
        let mut r = self.rec(kind, e);
        r.tid = Self::stream(e);
        r.bytes = e.arg_or0(NumArg::Bytes);
        if kind == Kind::Memcpy {
            r.name = self.names.id(&e.name);
        }
        self.push_timed(r);
    }

    /// A user annotation or CPU op (event `index`): a range; `record_param_comms` is also an NCCL call.
    fn on_cpu_span(&mut self, index: usize, e: &RawEvent) {
        if e.name == "record_param_comms" {
            if let Some((op, bytes, nranks, pg)) = collective_args(e) {
                let mut c = self.rec(Kind::Collective, e);
                let comm = fnv1a(&pg);
                let seq = self.seq_per_comm.entry(comm).or_insert(0);
                c.seq_comm = *seq;
                *seq += 1;
                c.tid = e.tid;
                c.op = op as u8;
                c.comm = comm;
                c.nranks = nranks;
                c.bytes = bytes;
                c.correlation = 0;
                c.device = 0;
                c.context = 0;
                if let Some(x) = e.arg(NumArg::ExternalId) {
                    c.has_ext = true;
                    c.id = x;
                }
                self.calls += 1;
                self.push_nested(c);
            }
        }
        let mut r = self.rec(Kind::Range, e);
        r.tid = e.tid;
        r.id = index as u64;
        r.flag = e.cat == Cat::CpuOp;
        r.name = self.names.id(&e.name);
        r.correlation = 0;
        r.device = 0;
        r.context = 0;
        self.push_nested(r);
    }

    /// A counter event: one sample per numeric arg (named `event.arg` when there are several).
    fn on_counter(&mut self, e: &RawEvent, bytes: &[u8]) {
        if !e.has_args {
            return;
        }
        let (values, n_args) = counter_args(bytes, e);
        for (k, value) in values {
            let name = if n_args == 1 { self.names.id(&e.name) } else { self.names.id(&format!("{}.{k}", e.name)) };
            let mut r = self.rec(Kind::Counter, e);
            r.name = name;
            r.value = value;
            self.push_timed(r);
        }
    }

    /// Delivers the thread names of the process, nests the CPU-side records, then hands
    /// everything to the sink in time order and ends the process.
    pub fn finish(
        mut self,
        path: &Path,
        proc: ProcId,
        rank: Option<u32>,
        sink: &mut dyn TraceSink,
        notes: &mut Notes,
    ) -> Result<(), InputError> {
        if self.without_ts > 0 {
            notes.add(Some(path), format!("{} slice events without a timestamp were skipped", self.without_ts));
        }
        for &(pid, tid, name) in &self.thread_names {
            if pid == self.ident.pid {
                sink.handle_thread_name(&ThreadName { proc, tid, name: self.names.names[name as usize].clone() });
            }
        }
        let io = |e: std::io::Error| InputError::io(path, e);
        if let Some(e) = self.spill_error.take() {
            return Err(io(e));
        }
        let nest = std::mem::replace(&mut self.nest, Sorter::new(0));
        let mut nested = nest.into_sorted().map_err(io)?;
        // The open ranges of the thread, innermost last. A range goes to the time sort when it is
        // closed (popped), so that each thread's records arrive there nearly in its order (by
        // end for ranges, by start for the rest) and its sort only merges long runs; where it
        // goes does not change the order it comes out in (the keys are unique).
        let mut stack: Vec<Rec> = Vec::new();
        let mut nested_in_order = true;
        while let Some(NestOrder(mut r)) = nested.next().map_err(io)? {
            while let Some(top) = stack.last() {
                if top.tid != r.tid || top.end <= r.start {
                    let closed = stack.pop().expect("a top");
                    self.push_timed(closed);
                } else {
                    break;
                }
            }
            let top = stack.last().map_or(NONE, |s| s.id);
            match r.kind {
                Kind::Range => {
                    if let Some(top) = stack.last() {
                        if r.end > top.end {
                            // Overlapping but not nested: treat as a sibling of the top.
                            let closed = stack.pop().expect("a top");
                            self.push_timed(closed);
                        }
                    }
                    r.parent = stack.last().map_or(NONE, |s| s.id);
                    // A parent that ends first would arrive before its child.
                    nested_in_order &= stack.last().is_none_or(|p| p.end >= r.end);
                    r.depth = stack.len() as u32;
                    stack.push(r);
                    continue;
                }
                Kind::Collective => {
                    r.range = top;
                    r.correlation = if r.has_ext { self.comm_kernel_corr.get(&r.id).copied().unwrap_or(0) } else { 0 };
                }
                _ => r.range = top,
            }
            self.push_timed(r);
        }
        while let Some(open) = stack.pop() {
            self.push_timed(open);
        }
        drop(nested);
        // Only the nesting needed these: their memory is not held through the delivery.
        self.comm_kernel_corr = HashMap::new();
        self.names.ids = FxHashMap::default();
        if let Some(e) = self.spill_error.take() {
            return Err(io(e));
        }
        if self.calls == 0 {
            sink.handle_no_collective_calls(proc);
        }
        if nested_in_order {
            // Ids are event indices; the time order puts a range at its end, after everything
            // that started inside it, and deeper ranges first on equal ends.
            sink.handle_ranges_close_in_order(proc);
        }
        let timed = std::mem::replace(&mut self.timed, Sorter::new(0));
        let mut sorted = timed.into_sorted().map_err(io)?;
        let names = &self.names.names;
        let range_id = |v: u64| (v != NONE).then_some(RangeId(v));
        while let Some(TimeOrder(r)) = sorted.next().map_err(io)? {
            let name = || names[r.name as usize].clone();
            match r.kind {
                Kind::Kernel => sink.handle_kernel(&Kernel {
                    proc,
                    device: r.device,
                    context: r.context,
                    stream: r.tid,
                    start: r.start,
                    end: r.end,
                    name: name(),
                    grid: r.grid,
                    block: r.block,
                    registers: r.registers,
                    shared_mem: r.shared_mem,
                    correlation: r.correlation,
                    graph_id: 0,
                    collective: r.flag.then(|| KernelCollectiveInfo {
                        op: CollOp::from_u8(r.op),
                        bytes: r.bytes,
                        nranks: r.nranks,
                    }),
                }),
                Kind::Memcpy => {
                    let (kind, src_kind, dst_kind) = copy_kinds(&names[r.name as usize]);
                    sink.handle_memcpy(&Memcpy {
                        proc,
                        device: r.device,
                        context: r.context,
                        stream: r.tid,
                        start: r.start,
                        end: r.end,
                        bytes: r.bytes,
                        kind,
                        src_kind,
                        dst_kind,
                        correlation: r.correlation,
                    })
                }
                Kind::Memset => sink.handle_memset(&Memset {
                    proc,
                    device: r.device,
                    context: r.context,
                    stream: r.tid,
                    start: r.start,
                    end: r.end,
                    bytes: r.bytes,
                    value: 0,
                    dst_kind: MemoryKind::Device,
                    correlation: r.correlation,
                }),
                Kind::Api => sink.handle_api(&Api {
                    proc,
                    tid: r.tid,
                    domain: if r.flag { ApiDomain::CuptiDriver } else { ApiDomain::CuptiRuntime },
                    name: name(),
                    start: r.start,
                    end: r.end,
                    result: 0,
                    correlation: r.correlation,
                    detail: None,
                    stream: 0,
                    arg: 0,
                    range: range_id(r.range),
                    repeat: None,
                }),
                Kind::Collective => sink.handle_collective(&Collective {
                    proc,
                    tid: r.tid,
                    op: CollOp::from_u8(r.op),
                    start: r.start,
                    end: r.end,
                    comm: r.comm,
                    rank: rank.unwrap_or(0),
                    nranks: r.nranks,
                    count: 0,
                    datatype: 0,
                    bytes: r.bytes,
                    peer: -1,
                    stream: 0,
                    seq: r.seq_comm,
                    result: 0,
                    correlation: r.correlation,
                    device: 0,
                    range: range_id(r.range),
                }),
                Kind::Range => sink.handle_nvtx_range(&NvtxRange {
                    proc,
                    id: RangeId(r.id),
                    parent: range_id(r.parent),
                    depth: r.depth,
                    kind: if r.flag { RangeKind::CpuOp } else { RangeKind::Annotation },
                    tid: r.tid,
                    domain: None,
                    name: name(),
                    start: r.start,
                    end: r.end,
                }),
                Kind::Counter => sink.handle_counter(&CounterSample {
                    proc,
                    name: name(),
                    device: None,
                    ts: r.start,
                    value: r.value,
                }),
            }
        }
        // The merge's buffers are freed before the sink's end-of-process work.
        drop(sorted);
        if let Some(e) = self.spill_error.take() {
            return Err(io(e));
        }
        sink.handle_process_end(proc);
        Ok(())
    }
}
