//! Import a PyTorch-profiler / Kineto JSON trace (`.json` or `.json.gz`) into the model.
//!
//! Mapping: `kernel` -> [`Kernel`] (NCCL metadata such as "Collective name" -> `Kernel::collective`),
//! `gpu_memcpy` / `gpu_memset` -> [`Memcpy`] / [`Memset`], `cuda_runtime` / `cuda_driver` -> [`Api`],
//! `user_annotation` / `cpu_op` -> [`NvtxRange`] (kinds `Annotation` / `CpuOp`, nested per thread
//! by containment), `record_param_comms` with a collective name -> [`Collective`] (linked to its
//! kernel through the shared "External id"), `ph:"C"` -> counters, `thread_name` metadata ->
//! [`ThreadName`]. Times are microseconds in the file, nanoseconds in the model.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use super::Notes;
use crate::error::InputError;
use crate::model::*;

#[derive(Deserialize)]
struct RawTrace {
    #[serde(rename = "traceEvents", default)]
    trace_events: Vec<RawEvent>,
    #[serde(rename = "distributedInfo", default)]
    distributed_info: Option<Value>,
}

#[derive(Deserialize)]
struct RawEvent {
    #[serde(default)]
    ph: String,
    #[serde(default, deserialize_with = "canonical_category")]
    cat: String,
    #[serde(default)]
    name: String,
    #[serde(default)]
    pid: Value,
    #[serde(default)]
    tid: Value,
    #[serde(default)]
    ts: Option<f64>,
    #[serde(default)]
    dur: Option<f64>,
    #[serde(default)]
    args: Option<Map<String, Value>>,
}

/// The category in today's Kineto spelling: traces of PyTorch <= 1.9 say `Kernel`, `Memcpy`,
/// `Memset`, `Runtime`, `Driver`, `Operator`; a null category is an empty one.
fn canonical_category<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let cat = Option::<String>::deserialize(d)?.unwrap_or_default();
    Ok(match cat.as_str() {
        "Kernel" => "kernel".into(),
        "Memcpy" => "gpu_memcpy".into(),
        "Memset" => "gpu_memset".into(),
        "Runtime" => "cuda_runtime".into(),
        "Driver" => "cuda_driver".into(),
        "Operator" => "cpu_op".into(),
        _ => cat,
    })
}

impl RawEvent {
    fn arg(&self, k: &str) -> Option<&Value> {
        self.args.as_ref().and_then(|a| a.get(k))
    }
    fn arg_u64(&self, k: &str) -> Option<u64> {
        self.arg(k).and_then(|v| v.as_u64().or_else(|| v.as_f64().map(|f| f as u64)))
    }
    fn start(&self) -> Ns {
        us_to_ns(self.ts.unwrap_or(0.0))
    }
    fn end(&self) -> Ns {
        us_to_ns(self.ts.unwrap_or(0.0) + self.dur.unwrap_or(0.0).max(0.0))
    }
    fn tid_u32(&self) -> u32 {
        id_u32(&self.tid)
    }
    /// The GPU stream of a kernel, copy or memset: its `stream` arg, else its thread id.
    fn stream(&self) -> u32 {
        self.arg_u64("stream").map(|s| s as u32).unwrap_or_else(|| self.tid_u32())
    }
}

fn us_to_ns(us: f64) -> Ns {
    if us.is_finite() && us > 0.0 {
        (us * 1000.0).round() as u64
    } else {
        0
    }
}

fn id_u32(v: &Value) -> u32 {
    match v {
        Value::Number(n) => n.as_u64().unwrap_or(0) as u32,
        Value::String(s) => s.trim_start_matches("stream ").parse().unwrap_or(0),
        _ => 0,
    }
}

/// Read the whole file, gunzipping when needed.
fn read_bytes(path: &Path, notes: &mut Notes) -> Result<Vec<u8>, InputError> {
    let raw = std::fs::read(path).map_err(|e| InputError::io(path, e))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::with_capacity(raw.len() * 8);
        if let Err(e) = flate2::read::MultiGzDecoder::new(&raw[..]).read_to_end(&mut out) {
            if out.is_empty() {
                return Err(InputError::BadJson { path: path.to_path_buf(), message: format!("gzip: {e}") });
            }
            notes.add(Some(path), format!("gzip stream damaged ({e}); using the {} bytes before it", out.len()));
        }
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// Recover the events of a damaged (e.g. truncated) trace: parse `traceEvents` element by element
/// until the first one that does not parse.
fn salvage(bytes: &[u8]) -> Option<RawTrace> {
    let key = b"\"traceEvents\"";
    let at = bytes.windows(key.len()).position(|w| w == key)?;
    let mut pos = at + key.len() + bytes[at + key.len()..].iter().position(|&b| b == b'[')? + 1;
    let mut events = Vec::new();
    loop {
        while pos < bytes.len() && (bytes[pos].is_ascii_whitespace() || bytes[pos] == b',') {
            pos += 1;
        }
        if pos >= bytes.len() || bytes[pos] != b'{' {
            break;
        }
        let mut it = serde_json::Deserializer::from_slice(&bytes[pos..]).into_iter::<RawEvent>();
        match it.next() {
            Some(Ok(e)) => {
                events.push(e);
                pos += it.byte_offset();
            }
            _ => break,
        }
    }
    // distributedInfo may come before or after the events; look for it only if it parses alone.
    let distributed_info = {
        let key = b"\"distributedInfo\"";
        bytes.windows(key.len()).position(|w| w == key).and_then(|at| {
            let start = at + key.len() + bytes[at + key.len()..].iter().position(|&b| b == b'{')?;
            serde_json::Deserializer::from_slice(&bytes[start..]).into_iter::<Value>().next()?.ok()
        })
    };
    Some(RawTrace { trace_events: events, distributed_info })
}

/// Identity facts read from the trace before its events.
struct Identity {
    rank: Option<u32>,
    world_size: Option<u32>,
    pid: u32,
    process_name: String,
}

fn identity(t: &RawTrace) -> Identity {
    let di = t.distributed_info.as_ref();
    let get = |k: &str| di.and_then(|d| d.get(k)).and_then(Value::as_u64).map(|v| v as u32);
    // The CPU process is the pid of the runtime calls / CPU ops (GPU "processes" are device numbers).
    let mut pid = 0;
    let mut process_name = String::new();
    for e in &t.trace_events {
        if pid == 0 && matches!(e.cat.as_str(), "cuda_runtime" | "cuda_driver" | "cpu_op" | "user_annotation") {
            pid = id_u32(&e.pid);
        }
    }
    for e in &t.trace_events {
        if e.ph == "M" && e.name == "process_name" && id_u32(&e.pid) == pid {
            if let Some(n) = e.arg("name").and_then(Value::as_str) {
                process_name = n.to_string();
            }
        }
    }
    Identity { rank: get("rank"), world_size: get("world_size"), pid, process_name }
}

/// Bytes per element of a PyTorch dtype name as Kineto writes it ("Float", "BFloat16", "Long"...).
fn dtype_bytes(dtype: &str) -> u64 {
    match dtype.to_ascii_lowercase().as_str() {
        "double" | "long" | "int64" | "complexfloat" | "uint64" => 8,
        "float" | "int" | "int32" | "uint32" => 4,
        "half" | "bfloat16" | "short" | "int16" | "uint16" => 2,
        "byte" | "char" | "bool" | "int8" | "uint8" | "float8_e4m3fn" | "float8_e5m2" => 1,
        "complexdouble" => 16,
        _ => 4,
    }
}

/// Collective facts from Kineto's NCCL args ("Collective name", "In msg nelems", ...).
fn collective_args(e: &RawEvent) -> Option<(CollOp, u64, u32, String)> {
    let name = e.arg("Collective name")?.as_str()?;
    let op = coll_op_from_name(name);
    if op == CollOp::Unknown {
        return None;
    }
    let elem = dtype_bytes(e.arg("dtype").and_then(Value::as_str).unwrap_or("float"));
    let nelems = e.arg_u64("In msg nelems").unwrap_or(0).max(e.arg_u64("Out msg nelems").unwrap_or(0));
    let nranks = e.arg_u64("Group size").unwrap_or(0) as u32;
    let pg = e.arg("Process Group Name").and_then(Value::as_str).unwrap_or("").to_string();
    Some((op, nelems * elem, nranks, pg))
}

fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

fn copy_kinds(name: &str) -> (CopyKind, MemoryKind, MemoryKind) {
    let kind = ["HtoD", "DtoH", "DtoD", "HtoH", "PtoP", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA"]
        .iter()
        .position(|k| name.contains(k))
        .map(|i| [1u8, 2, 8, 9, 10, 3, 4, 5, 6, 7][i])
        .map(CopyKind::from_u8)
        .unwrap_or(CopyKind::Unknown);
    let mem = |s: &str| match s.trim() {
        "Pageable" => MemoryKind::Pageable,
        "Pinned" => MemoryKind::Pinned,
        "Device" => MemoryKind::Device,
        "Array" => MemoryKind::Array,
        "Managed" => MemoryKind::Managed,
        _ => MemoryKind::Unknown,
    };
    // "Memcpy DtoH (Device -> Pageable)"
    let (src, dst) = match (name.find('('), name.rfind(')')) {
        (Some(a), Some(b)) if a < b => match name[a + 1..b].split_once("->") {
            Some((s, d)) => (mem(s), mem(d)),
            None => (MemoryKind::Unknown, MemoryKind::Unknown),
        },
        _ => (MemoryKind::Unknown, MemoryKind::Unknown),
    };
    (kind, src, dst)
}

/// One model event with the time it is delivered at (ranges at their end, others at their start).
enum Item {
    Kernel(Kernel),
    Memcpy(Memcpy),
    Memset(Memset),
    Api(Api),
    Collective(Collective),
    Range(NvtxRange),
    Counter(CounterSample),
}

/// Decode one Kineto trace into `sink` as process `id`. Returns the process info it announced.
pub fn feed(path: &Path, id: ProcId, sink: &mut dyn TraceSink, notes: &mut Notes) -> Result<ProcessInfo, InputError> {
    let trace = read_trace(path, notes)?;
    if trace.trace_events.is_empty() {
        notes.add(Some(path), "trace has no events");
    }
    let ident = identity(&trace);
    let mut names = Interner::new();
    let info = process_info(path, id, &ident, &trace.trace_events, &mut names);
    sink.handle_process(&info);
    let events = &trace.trace_events;
    let mut conv = KinetoConverter {
        proc: id,
        ident: &ident,
        names,
        comm_kernel_corr: comm_kernel_correlations(events),
        items: Vec::with_capacity(events.len()),
        ranges: Vec::new(),
        apis: Vec::new(),
        colls: Vec::new(),
        seq_per_comm: HashMap::new(),
        without_ts: 0,
    };
    for (i, e) in events.iter().enumerate() {
        conv.on_event(i, e, sink);
    }
    conv.finish(path, sink, notes);
    Ok(info)
}

/// The trace's events, from intact JSON or, with a note, from the part before the damage.
fn read_trace(path: &Path, notes: &mut Notes) -> Result<RawTrace, InputError> {
    let bytes = read_bytes(path, notes)?;
    match serde_json::from_slice(&bytes) {
        Ok(t) => Ok(t),
        Err(e) => match salvage(&bytes) {
            Some(t) if !t.trace_events.is_empty() => {
                notes.add(
                    Some(path),
                    format!("corrupt JSON ({e}); using the {} events before the damage", t.trace_events.len()),
                );
                Ok(t)
            }
            _ => Err(InputError::BadJson { path: path.to_path_buf(), message: e.to_string() }),
        },
    }
}

fn process_info(path: &Path, id: ProcId, ident: &Identity, events: &[RawEvent], names: &mut Interner) -> ProcessInfo {
    let gpu_records = events.iter().any(|e| matches!(e.cat.as_str(), "kernel" | "gpu_memcpy" | "gpu_memset"));
    ProcessInfo {
        id,
        origin: Origin::Kineto,
        path: path.to_path_buf(),
        host: names.intern("unknown"),
        pid: ident.pid,
        ppid: 0,
        cmdline: ident.process_name.clone(),
        rank: ident.rank,
        local_rank: None,
        world_size: ident.world_size,
        job_id: None,
        clock_offset_ns: 0,
        gpu_activity: gpu_records,
        dropped_events: 0,
    }
}

/// External id -> correlation of the NCCL kernel launched under it (links `record_param_comms`).
fn comm_kernel_correlations(events: &[RawEvent]) -> HashMap<u64, u64> {
    let mut out = HashMap::new();
    for e in events {
        if e.cat == "kernel" && (is_comm_kernel(&e.name) || e.arg("Collective name").is_some()) {
            if let (Some(x), Some(c)) = (e.arg_u64("External id"), e.arg_u64("correlation")) {
                out.insert(x, c);
            }
        }
    }
    out
}

/// The Kineto converter: one trace's events into model events, gathered (ranges need their
/// nesting, which only the whole trace tells), then delivered in time order.
struct KinetoConverter<'t> {
    proc: ProcId,
    ident: &'t Identity,
    names: Interner,
    comm_kernel_corr: HashMap<u64, u64>,
    items: Vec<(Ns, Item)>,
    /// Positions in `items` of the ranges, API calls and collectives (nested by [`nest_ranges`]).
    ranges: Vec<usize>,
    apis: Vec<usize>,
    colls: Vec<usize>,
    /// The next sequence number per communicator (process group).
    seq_per_comm: HashMap<u64, u64>,
    /// Slice events without a timestamp, skipped.
    without_ts: usize,
}

impl KinetoConverter<'_> {
    /// Event `i` of the trace. Thread names go to the sink at once, the rest is gathered.
    fn on_event(&mut self, i: usize, e: &RawEvent, sink: &mut dyn TraceSink) {
        if e.ph == "X" && e.ts.is_none() {
            self.without_ts += 1;
            return;
        }
        match (e.ph.as_str(), e.cat.as_str()) {
            ("X", "kernel") => self.on_kernel(e),
            ("X", "gpu_memcpy") => self.on_memcpy(e),
            ("X", "gpu_memset") => self.on_memset(e),
            ("X", "cuda_runtime" | "cuda_driver") => self.on_api(e),
            ("X", "user_annotation" | "cpu_op") => self.on_cpu_span(i, e),
            ("C", _) => self.on_counter(e),
            ("M", _) if e.name == "thread_name" && id_u32(&e.pid) == self.ident.pid => {
                if let Some(n) = e.arg("name").and_then(Value::as_str) {
                    sink.handle_thread_name(&ThreadName {
                        proc: self.proc,
                        tid: e.tid_u32(),
                        name: self.names.intern(n),
                    });
                }
            }
            _ => {}
        }
    }

    fn on_kernel(&mut self, e: &RawEvent) {
        let arr = |k: &str| -> [u32; 3] {
            let mut out = [0u32; 3];
            if let Some(Value::Array(a)) = e.arg(k) {
                for (o, v) in out.iter_mut().zip(a) {
                    *o = v.as_u64().unwrap_or(0) as u32;
                }
            }
            out
        };
        let collective = collective_args(e).map(|(op, bytes, nranks, _)| KernelCollectiveInfo { op, bytes, nranks });
        let k = Kernel {
            proc: self.proc,
            device: e.arg_u64("device").unwrap_or(0) as u32,
            context: e.arg_u64("context").unwrap_or(0) as u32,
            stream: e.stream(),
            start: e.start(),
            end: e.end(),
            name: self.names.intern(&e.name),
            grid: arr("grid"),
            block: arr("block"),
            registers: e.arg_u64("registers per thread").unwrap_or(0) as u16,
            shared_mem: e.arg_u64("shared memory").unwrap_or(0) as u32,
            correlation: e.arg_u64("correlation").unwrap_or(0),
            graph_id: 0,
            collective,
        };
        self.items.push((k.start, Item::Kernel(k)));
    }

    fn on_memcpy(&mut self, e: &RawEvent) {
        let (kind, src_kind, dst_kind) = copy_kinds(&e.name);
        let m = Memcpy {
            proc: self.proc,
            device: e.arg_u64("device").unwrap_or(0) as u32,
            context: e.arg_u64("context").unwrap_or(0) as u32,
            stream: e.stream(),
            start: e.start(),
            end: e.end(),
            bytes: e.arg_u64("bytes").unwrap_or(0),
            kind,
            src_kind,
            dst_kind,
            correlation: e.arg_u64("correlation").unwrap_or(0),
        };
        self.items.push((m.start, Item::Memcpy(m)));
    }

    fn on_memset(&mut self, e: &RawEvent) {
        let m = Memset {
            proc: self.proc,
            device: e.arg_u64("device").unwrap_or(0) as u32,
            context: e.arg_u64("context").unwrap_or(0) as u32,
            stream: e.stream(),
            start: e.start(),
            end: e.end(),
            bytes: e.arg_u64("bytes").unwrap_or(0),
            value: 0,
            dst_kind: MemoryKind::Device,
            correlation: e.arg_u64("correlation").unwrap_or(0),
        };
        self.items.push((m.start, Item::Memset(m)));
    }

    /// A CUDA runtime or driver call.
    fn on_api(&mut self, e: &RawEvent) {
        let a = Api {
            proc: self.proc,
            tid: e.tid_u32(),
            domain: if e.cat == "cuda_driver" { ApiDomain::CuptiDriver } else { ApiDomain::CuptiRuntime },
            name: self.names.intern(&e.name),
            start: e.start(),
            end: e.end(),
            result: 0,
            correlation: e.arg_u64("correlation").unwrap_or(0),
            detail: None,
            stream: 0,
            arg: 0,
            range: None,
            repeat: None,
        };
        self.apis.push(self.items.len());
        self.items.push((a.start, Item::Api(a)));
    }

    /// A user annotation or CPU op (event `i`): a range; `record_param_comms` is also an NCCL call.
    fn on_cpu_span(&mut self, i: usize, e: &RawEvent) {
        if e.name == "record_param_comms" {
            self.on_collective_call(e);
        }
        let r = NvtxRange {
            proc: self.proc,
            id: RangeId(i as u64),
            parent: None,
            depth: 0,
            kind: if e.cat == "cpu_op" { RangeKind::CpuOp } else { RangeKind::Annotation },
            tid: e.tid_u32(),
            domain: None,
            name: self.names.intern(&e.name),
            start: e.start(),
            end: e.end(),
        };
        self.ranges.push(self.items.len());
        self.items.push((r.end, Item::Range(r)));
    }

    /// `record_param_comms` with a collective name: the NCCL call, numbered per process group and
    /// linked to its kernel through the shared "External id".
    fn on_collective_call(&mut self, e: &RawEvent) {
        let Some((op, bytes, nranks, pg)) = collective_args(e) else { return };
        let comm = fnv1a(&pg);
        let seq = self.seq_per_comm.entry(comm).or_insert(0);
        let c = Collective {
            proc: self.proc,
            tid: e.tid_u32(),
            op,
            start: e.start(),
            end: e.end(),
            comm,
            rank: self.ident.rank.unwrap_or(0),
            nranks,
            count: 0,
            datatype: 0,
            bytes,
            peer: -1,
            stream: 0,
            seq: *seq,
            result: 0,
            correlation: e.arg_u64("External id").and_then(|x| self.comm_kernel_corr.get(&x).copied()).unwrap_or(0),
            device: 0,
            range: None,
        };
        *seq += 1;
        self.colls.push(self.items.len());
        self.items.push((c.start, Item::Collective(c)));
    }

    /// A counter event: one sample per numeric arg (named `event.arg` when there are several).
    fn on_counter(&mut self, e: &RawEvent) {
        let Some(args) = &e.args else { return };
        for (k, v) in args {
            if let Some(value) = v.as_f64() {
                let name = if args.len() == 1 { e.name.clone() } else { format!("{}.{k}", e.name) };
                let c = CounterSample {
                    proc: self.proc,
                    name: self.names.intern(&name),
                    device: None,
                    ts: e.start(),
                    value,
                };
                self.items.push((c.ts, Item::Counter(c)));
            }
        }
    }

    /// Nests the ranges, then hands everything to the sink in time order (ranges at their end,
    /// deeper first on ties), and ends the process.
    fn finish(mut self, path: &Path, sink: &mut dyn TraceSink, notes: &mut Notes) {
        if self.without_ts > 0 {
            notes.add(Some(path), format!("{} slice events without a timestamp were skipped", self.without_ts));
        }
        nest_ranges(&mut self.items, &self.ranges, &self.apis, &self.colls);
        self.items.sort_by_key(|(t, it)| (*t, if let Item::Range(r) = it { u32::MAX - r.depth } else { 0 }));
        for (_, it) in &self.items {
            match it {
                Item::Kernel(k) => sink.handle_kernel(k),
                Item::Memcpy(m) => sink.handle_memcpy(m),
                Item::Memset(m) => sink.handle_memset(m),
                Item::Api(a) => sink.handle_api(a),
                Item::Collective(c) => sink.handle_collective(c),
                Item::Range(r) => sink.handle_nvtx_range(r),
                Item::Counter(c) => sink.handle_counter(c),
            }
        }
        sink.handle_process_end(self.proc);
    }
}

/// Per thread, nest ranges by containment (parent, depth) and stamp each API call / collective with
/// the innermost range that contains its start.
fn nest_ranges(items: &mut [(Ns, Item)], ranges: &[usize], apis: &[usize], colls: &[usize]) {
    // (tid, start, order, is_range, index): ranges sort before calls at equal start, longer first.
    let mut order: Vec<(u32, Ns, u64, usize)> = Vec::with_capacity(ranges.len() + apis.len());
    for &i in ranges {
        if let Item::Range(r) = &items[i].1 {
            order.push((r.tid, r.start, u64::MAX - (r.end - r.start), i));
        }
    }
    for &i in apis.iter().chain(colls) {
        match &items[i].1 {
            Item::Api(a) => order.push((a.tid, a.start, 0, i)),
            Item::Collective(c) => order.push((c.tid, c.start, 0, i)),
            _ => {}
        }
    }
    order.sort_unstable();
    let mut stack: Vec<(u32, Ns, RangeId)> = Vec::new(); // (tid, end, id)
    for &(tid, start, _, i) in &order {
        while let Some(&(t, end, _)) = stack.last() {
            if t != tid || end <= start {
                stack.pop();
            } else {
                break;
            }
        }
        let top = stack.last().map(|s| s.2);
        match &mut items[i].1 {
            Item::Range(r) => {
                if let Some(&(_, end, _)) = stack.last() {
                    if r.end > end {
                        // Overlapping but not nested: treat as a sibling of the top.
                        stack.pop();
                    }
                }
                r.parent = stack.last().map(|s| s.2);
                r.depth = stack.len() as u32;
                stack.push((tid, r.end, r.id));
            }
            Item::Api(a) => a.range = top,
            Item::Collective(c) => c.range = top,
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Collect {
        kernels: Vec<Kernel>,
        ranges: Vec<NvtxRange>,
        apis: Vec<Api>,
        colls: Vec<Collective>,
    }
    impl TraceSink for Collect {
        fn handle_kernel(&mut self, k: &Kernel) {
            self.kernels.push(k.clone());
        }
        fn handle_nvtx_range(&mut self, r: &NvtxRange) {
            self.ranges.push(r.clone());
        }
        fn handle_api(&mut self, a: &Api) {
            self.apis.push(a.clone());
        }
        fn handle_collective(&mut self, c: &Collective) {
            self.colls.push(c.clone());
        }
    }

    #[test]
    fn small_trace() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.json");
        std::fs::write(
            &p,
            r#"{"distributedInfo":{"rank":3,"world_size":8},"traceEvents":[
            {"ph":"X","cat":"user_annotation","name":"ProfilerStep#1","pid":10,"tid":10,"ts":100,"dur":100},
            {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":10,"tid":10,"ts":110,"dur":20},
            {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":10,"tid":10,"ts":115,"dur":5,"args":{"correlation":7}},
            {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":121.5,"dur":10,"args":{"correlation":7,"stream":7,"device":0,"grid":[2,1,1]}},
            {"ph":"X","cat":"cpu_op","name":"record_param_comms","pid":10,"tid":10,"ts":140,"dur":5,"args":{"External id":5,"Collective name":"allreduce","In msg nelems":1024,"dtype":"Float","Group size":8,"Process Group Name":"0"}},
            {"ph":"X","cat":"kernel","name":"ncclKernel_AllReduce_RING_LL_Sum_float","pid":0,"tid":9,"ts":150,"dur":30,"args":{"correlation":9,"External id":5,"stream":9}}
            ]}"#,
        )
        .unwrap();
        let mut c = Collect::default();
        let mut notes = Notes::default();
        let info = feed(&p, ProcId(0), &mut c, &mut notes).unwrap();
        assert_eq!(info.rank, Some(3));
        assert_eq!(info.pid, 10);
        assert_eq!(c.kernels.len(), 2);
        assert_eq!(c.kernels[0].start, 121_500);
        assert_eq!(c.kernels[0].end, 131_500);
        assert_eq!(c.kernels[0].grid, [2, 1, 1]);
        assert_eq!(c.ranges.len(), 3);
        let mm = c.ranges.iter().find(|r| &*r.name == "aten::mm").unwrap();
        let step = c.ranges.iter().find(|r| &*r.name == "ProfilerStep#1").unwrap();
        assert_eq!(mm.parent, Some(step.id));
        assert_eq!(mm.depth, 1);
        assert_eq!(c.apis[0].range, Some(mm.id));
        assert_eq!(c.colls.len(), 1);
        assert_eq!(c.colls[0].bytes, 4096);
        assert_eq!(c.colls[0].correlation, 9);
        assert_eq!(c.colls[0].op, CollOp::AllReduce);
    }

    #[test]
    fn corrupt_json_names_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("bad.json");
        std::fs::write(&p, r#"{"traceEvents":[{"ph":"X","#).unwrap();
        let err = feed(&p, ProcId(0), &mut Collect::default(), &mut Notes::default()).unwrap_err();
        assert!(err.to_string().contains("bad.json"), "{err}");
        // Truncated after two events: the two are used, with a note.
        std::fs::write(
            &p,
            r#"{"traceEvents":[{"ph":"X","cat":"kernel","name":"a","ts":1,"dur":1},
            {"ph":"X","cat":"kernel","name":"b","ts":3,"dur":1},{"ph":"X","cat":"ker"#,
        )
        .unwrap();
        let mut c = Collect::default();
        let mut notes = Notes::default();
        feed(&p, ProcId(0), &mut c, &mut notes).unwrap();
        assert_eq!(c.kernels.len(), 2);
        assert!(notes.0[0].message.contains("corrupt JSON"), "{:?}", notes);
    }

    #[test]
    fn old_pytorch_category_spellings_and_null_category() {
        // PyTorch <= 1.9 wrote `Kernel`/`Runtime`/`Memcpy`/`Operator`; some writers put a null cat.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("old.json");
        std::fs::write(
            &p,
            r#"{"traceEvents":[
            {"ph":"X","cat":"Operator","name":"aten::add","pid":5,"tid":5,"ts":100,"dur":20},
            {"ph":"X","cat":"Runtime","name":"cudaLaunchKernel","pid":5,"tid":5,"ts":105,"dur":5,"args":{"correlation":3}},
            {"ph":"X","cat":"Kernel","name":"add_kernel","pid":0,"tid":7,"ts":111,"dur":4,"args":{"correlation":3,"stream":7,"device":0}},
            {"ph":"X","cat":"Memcpy","name":"Memcpy HtoD (Pageable -> Device)","pid":0,"tid":7,"ts":120,"dur":2,"args":{"correlation":4,"stream":7,"device":0,"bytes":64}},
            {"ph":"i","cat":null,"name":"marker","pid":5,"tid":5,"ts":130}
            ]}"#,
        )
        .unwrap();
        let mut c = Collect::default();
        let mut notes = Notes::default();
        let info = feed(&p, ProcId(0), &mut c, &mut notes).unwrap();
        assert_eq!(info.pid, 5);
        assert_eq!(c.kernels.len(), 1);
        assert_eq!(c.kernels[0].end - c.kernels[0].start, 4_000);
        assert_eq!(c.apis.len(), 1);
        assert_eq!(c.apis[0].correlation, 3);
        assert_eq!(c.ranges.len(), 1);
    }

    #[test]
    fn memcpy_kinds() {
        let (k, s, d) = copy_kinds("Memcpy DtoH (Device -> Pageable)");
        assert_eq!((k, s, d), (CopyKind::DtoH, MemoryKind::Device, MemoryKind::Pageable));
    }
}
