//! Perfetto protobuf trace (`Trace { repeated TracePacket packet = 1; }`), written packet by packet.
//!
//! Tracks: a process track per process ("rank 3 · host7 · pid 1234", synthetic pid = process
//! index + 1 so ranks on different hosts never merge); under it a thread track per host thread
//! holding its NVTX ranges / annotations, with a child "CUDA API" track for API and NCCL calls; a
//! track per GPU stream ("GPU 0 stream 7") for kernels, copies and memsets; counter tracks for
//! counter samples and memory reservations. Slices are `TYPE_SLICE_BEGIN` / `TYPE_SLICE_END`
//! pairs with interned names (`InternedData.event_names`) and categories; each launch carries
//! `flow_ids` that its GPU work terminates. Times are absolute nanoseconds.
//!
//! Ordering: Perfetto matches an END to the innermost open slice of its track, so slices that
//! start at the same instant must begin outer-first. Ranges arrive inner-first (when they
//! complete), so each thread's ranges are held until the enclosing top-level range completes and
//! then written in nesting order (memory: the open top-level range's subtree).

use crate::output::OutputFile;
use std::collections::HashMap;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use super::display_names::{
    flow_id, launches_gpu_work, memcpy_name, memset_name, process_label, stream_label, DisplayNames,
};
use super::proto::{put_varint, Msg};
use super::{Exporter, Written};
use crate::intervals::FastMap;
use crate::model::*;

// TracePacket
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQ_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_INTERNED: u32 = 12;
const PKT_SEQ_FLAGS: u32 = 13;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const SEQ_NEEDS_INCREMENTAL_STATE: u64 = 2;
// TrackDescriptor / ProcessDescriptor / ThreadDescriptor / CounterDescriptor
const TD_UUID: u32 = 1;
const TD_NAME: u32 = 2;
const TD_PROCESS: u32 = 3;
const TD_THREAD: u32 = 4;
const TD_PARENT: u32 = 5;
const TD_COUNTER: u32 = 8;
const PD_PID: u32 = 1;
const PD_NAME: u32 = 6;
const PD_LABELS: u32 = 8;
const THD_PID: u32 = 1;
const THD_TID: u32 = 2;
const THD_NAME: u32 = 5;
// TrackEvent
const TE_CATEGORY_IIDS: u32 = 3;
const TE_DEBUG: u32 = 4;
const TE_TYPE: u32 = 9;
const TE_NAME_IID: u32 = 10;
const TE_TRACK: u32 = 11;
const TE_DOUBLE_COUNTER: u32 = 44;
const TE_FLOW_IDS: u32 = 47;
const TE_TERMINATING_FLOW_IDS: u32 = 48;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
const TYPE_COUNTER: u64 = 4;
// InternedData / EventName / EventCategory / DebugAnnotation
const ID_EVENT_CATEGORIES: u32 = 1;
const ID_EVENT_NAMES: u32 = 2;
const IID: u32 = 1;
const IID_NAME: u32 = 2;
const DA_UINT: u32 = 3;
const DA_INT: u32 = 4;
const DA_STRING: u32 = 6;
const DA_NAME: u32 = 10;

/// The one packet sequence this writer uses.
const SEQUENCE: u64 = 1;

/// Categories, interned once in the first packet (iid = index + 1).
const CATEGORIES: [&str; 9] =
    ["kernel", "gpu_memcpy", "gpu_memset", "cuda_runtime", "cuda_driver", "nccl", "nvtx", "cpu_op", "marker"];

fn category(name: &str) -> u64 {
    CATEGORIES.iter().position(|c| *c == name).map_or(0, |i| i as u64 + 1)
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum TrackKey {
    Process,
    Thread(u32),
    Api(u32),
    Stream(u32, u32),
    Counter(Name, Option<u32>),
    Memory(u32, MemSpace),
    StartEnd(Name),
}

/// A debug annotation value.
enum Arg<'a> {
    U(u64),
    I(i64),
    S(&'a str),
}

/// A range waiting for its top-level range to complete.
struct HeldRange {
    name: Name,
    cat: u64,
    start: Ns,
    end: Ns,
    depth: u32,
}

pub struct PerfettoExporter {
    out: BufWriter<OutputFile>,
    path: PathBuf,
    error: Option<io::Error>,
    events: u64,
    started: bool,
    iids: FastMap<Name, u64>,
    display: DisplayNames,
    tracks: FastMap<TrackKey, u64>,
    next_uuid: u64,
    proc: ProcId,
    pid: i64,
    thread_names: FastMap<u32, Name>,
    held: HashMap<u32, Vec<HeldRange>>,
    pkt: Msg,
    skipped_no_gpu_time: u64,
}

impl PerfettoExporter {
    pub fn create(path: &Path) -> io::Result<PerfettoExporter> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            crate::output::create_dir(dir)?;
        }
        Ok(PerfettoExporter {
            out: BufWriter::with_capacity(1 << 20, crate::output::create_file(path)?),
            path: path.to_path_buf(),
            error: None,
            events: 0,
            started: false,
            iids: FastMap::default(),
            display: DisplayNames::default(),
            tracks: FastMap::default(),
            next_uuid: 1,
            proc: ProcId(0),
            pid: 0,
            thread_names: FastMap::default(),
            held: HashMap::new(),
            pkt: Msg::new(),
            skipped_no_gpu_time: 0,
        })
    }

    fn guard(&mut self, r: io::Result<()>) {
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
    }

    /// Write `m` as one `Trace.packet`.
    fn write_packet(&mut self, m: &Msg) -> io::Result<()> {
        let mut head = Vec::with_capacity(6);
        head.push(0x0A);
        put_varint(&mut head, m.buf.len() as u64);
        self.out.write_all(&head)?;
        self.out.write_all(&m.buf)
    }

    fn descriptor(&mut self, f: impl FnOnce(&mut Msg)) -> io::Result<()> {
        let mut p = Msg::new();
        p.with(PKT_TRACK_DESCRIPTOR, f);
        self.write_packet(&p)
    }

    /// The uuid of a track of the current process, declaring it the first time.
    fn track(&mut self, key: TrackKey) -> io::Result<u64> {
        if let Some(&u) = self.tracks.get(&key) {
            return Ok(u);
        }
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        let parent = match &key {
            TrackKey::Process => None,
            TrackKey::Api(tid) => Some(self.track(TrackKey::Thread(*tid))?),
            _ => Some(self.track(TrackKey::Process)?),
        };
        let pid = self.pid;
        match &key {
            TrackKey::Process => unreachable!("declared in handle_process"),
            TrackKey::Thread(tid) => {
                let name = self.thread_names.get(tid).cloned();
                self.descriptor(|d| {
                    d.uint(TD_UUID, uuid);
                    d.uint(TD_PARENT, parent.unwrap_or(0));
                    d.with(TD_THREAD, |t| {
                        t.int(THD_PID, pid);
                        t.int(THD_TID, *tid as i64);
                        if let Some(n) = &name {
                            t.str(THD_NAME, n);
                        }
                    });
                })?;
            }
            other => {
                let name = match other {
                    TrackKey::Api(_) => "CUDA API".to_string(),
                    TrackKey::Stream(d, s) => stream_label(*d, *s),
                    TrackKey::Counter(n, Some(d)) => format!("{n} (GPU {d})"),
                    TrackKey::Counter(n, None) => n.to_string(),
                    TrackKey::Memory(d, MemSpace::Device) => format!("GPU {d} memory reserved"),
                    TrackKey::Memory(_, space) => format!("{} memory reserved", space.name()),
                    TrackKey::StartEnd(n) => format!("NVTX {n}"),
                    TrackKey::Process | TrackKey::Thread(_) => unreachable!(),
                };
                let counter = matches!(other, TrackKey::Counter(..) | TrackKey::Memory(..));
                self.descriptor(|d| {
                    d.uint(TD_UUID, uuid);
                    d.uint(TD_PARENT, parent.unwrap_or(0));
                    d.str(TD_NAME, &name);
                    if counter {
                        d.with(TD_COUNTER, |_| {});
                    }
                })?;
            }
        }
        self.tracks.insert(key, uuid);
        Ok(uuid)
    }

    /// Start a TrackEvent packet at `ts`; returns the interned-data message to fill for new names.
    fn begin_packet(&mut self, ts: Ns) -> Msg {
        let mut p = std::mem::take(&mut self.pkt);
        p.buf.clear();
        p.uint(PKT_TIMESTAMP, ts);
        p.uint(PKT_SEQ_ID, SEQUENCE);
        let mut interned = Msg::new();
        if !self.started {
            self.started = true;
            p.uint(PKT_SEQ_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED | SEQ_NEEDS_INCREMENTAL_STATE);
            for (i, c) in CATEGORIES.iter().enumerate() {
                interned.with(ID_EVENT_CATEGORIES, |e| {
                    e.uint(IID, i as u64 + 1);
                    e.str(IID_NAME, c);
                });
            }
        } else {
            p.uint(PKT_SEQ_FLAGS, SEQ_NEEDS_INCREMENTAL_STATE);
        }
        self.pkt = p;
        interned
    }

    fn name_iid(&mut self, name: &Name, interned: &mut Msg) -> u64 {
        if let Some(&i) = self.iids.get(name) {
            return i;
        }
        let iid = self.iids.len() as u64 + 1;
        self.iids.insert(name.clone(), iid);
        interned.with(ID_EVENT_NAMES, |e| {
            e.uint(IID, iid);
            e.str(IID_NAME, name);
        });
        iid
    }

    fn end_packet(&mut self, ev: &Msg, interned: &Msg) -> io::Result<()> {
        let mut p = std::mem::take(&mut self.pkt);
        p.msg(PKT_TRACK_EVENT, ev);
        if !interned.buf.is_empty() {
            p.msg(PKT_INTERNED, interned);
        }
        let r = self.write_packet(&p);
        self.pkt = p;
        r
    }

    /// A slice as a BEGIN / END pair. `flow_out` starts a flow, `flow_in` terminates one.
    #[allow(clippy::too_many_arguments)]
    fn slice(
        &mut self,
        track: u64,
        cat: u64,
        name: &Name,
        start: Ns,
        end: Ns,
        flow_out: Option<u64>,
        flow_in: Option<u64>,
        args: &[(&str, Arg)],
    ) -> io::Result<()> {
        self.slice_begin(track, cat, name, start, flow_out, flow_in, args)?;
        self.slice_end(track, end.max(start))
    }

    #[allow(clippy::too_many_arguments)]
    fn slice_begin(
        &mut self,
        track: u64,
        cat: u64,
        name: &Name,
        start: Ns,
        flow_out: Option<u64>,
        flow_in: Option<u64>,
        args: &[(&str, Arg)],
    ) -> io::Result<()> {
        self.events += 1;
        let mut interned = self.begin_packet(start);
        let iid = self.name_iid(name, &mut interned);
        let mut ev = Msg::new();
        ev.uint(TE_TYPE, TYPE_SLICE_BEGIN).uint(TE_TRACK, track).uint(TE_NAME_IID, iid);
        if cat != 0 {
            ev.uint(TE_CATEGORY_IIDS, cat);
        }
        if let Some(f) = flow_out {
            ev.fixed64(TE_FLOW_IDS, f);
        }
        if let Some(f) = flow_in {
            ev.fixed64(TE_TERMINATING_FLOW_IDS, f);
        }
        for (k, v) in args {
            ev.with(TE_DEBUG, |d| {
                d.str(DA_NAME, k);
                match v {
                    Arg::U(x) => d.uint(DA_UINT, *x),
                    Arg::I(x) => d.int(DA_INT, *x),
                    Arg::S(s) => d.str(DA_STRING, s),
                };
            });
        }
        self.end_packet(&ev, &interned)
    }

    fn slice_end(&mut self, track: u64, end: Ns) -> io::Result<()> {
        let interned = self.begin_packet(end);
        let mut ev = Msg::new();
        ev.uint(TE_TYPE, TYPE_SLICE_END).uint(TE_TRACK, track);
        self.end_packet(&ev, &interned)
    }

    fn instant(&mut self, track: u64, cat: u64, name: &Name, ts: Ns) -> io::Result<()> {
        self.events += 1;
        let mut interned = self.begin_packet(ts);
        let iid = self.name_iid(name, &mut interned);
        let mut ev = Msg::new();
        ev.uint(TE_TYPE, TYPE_INSTANT).uint(TE_TRACK, track).uint(TE_NAME_IID, iid).uint(TE_CATEGORY_IIDS, cat);
        self.end_packet(&ev, &interned)
    }

    fn counter(&mut self, key: TrackKey, ts: Ns, value: f64) -> io::Result<()> {
        let track = self.track(key)?;
        self.events += 1;
        let interned = self.begin_packet(ts);
        let mut ev = Msg::new();
        ev.uint(TE_TYPE, TYPE_COUNTER).uint(TE_TRACK, track).double(TE_DOUBLE_COUNTER, value);
        self.end_packet(&ev, &interned)
    }

    fn gpu_work(
        &mut self,
        cat: &str,
        name: &Name,
        dev_stream: (u32, u32),
        span: (Ns, Ns),
        corr: u64,
        args: &[(&str, Arg)],
    ) -> io::Result<()> {
        if span == (0, 0) {
            self.skipped_no_gpu_time += 1;
            return Ok(());
        }
        let track = self.track(TrackKey::Stream(dev_stream.0, dev_stream.1))?;
        let flow = (corr != 0).then(|| flow_id(self.proc, corr));
        self.slice(track, category(cat), name, span.0, span.1, None, flow, args)
    }

    /// Write a thread's held ranges in nesting order: at equal times ENDs before BEGINs, BEGINs
    /// outer-first, ENDs inner-first.
    fn flush_ranges(&mut self, tid: u32) -> io::Result<()> {
        let Some(items) = self.held.remove(&tid) else { return Ok(()) };
        let track = self.track(TrackKey::Thread(tid))?;
        let mut order: Vec<(Ns, u8, u32, usize)> = Vec::with_capacity(items.len() * 2);
        for (i, r) in items.iter().enumerate() {
            order.push((r.start, 1, r.depth, i));
            order.push((r.end.max(r.start), 0, u32::MAX - r.depth, i));
        }
        order.sort_unstable();
        for (ts, kind, _, i) in order {
            let r = &items[i];
            if kind == 1 {
                self.slice_begin(track, r.cat, &r.name, ts, None, None, &[])?;
            } else {
                self.slice_end(track, ts)?;
            }
        }
        Ok(())
    }

    fn write_kernel(&mut self, k: &Kernel) -> io::Result<()> {
        let name = self.display.get(&k.name);
        let grid = format!("{}x{}x{}", k.grid[0], k.grid[1], k.grid[2]);
        let block = format!("{}x{}x{}", k.block[0], k.block[1], k.block[2]);
        let args = [("correlation", Arg::U(k.correlation)), ("grid", Arg::S(&grid)), ("block", Arg::S(&block))];
        self.gpu_work("kernel", &name, (k.device, k.stream), (k.start, k.end), k.correlation, &args)
    }

    fn write_api(&mut self, a: &Api) -> io::Result<()> {
        let track = self.track(TrackKey::Api(a.tid))?;
        let cat = match a.domain {
            ApiDomain::Driver | ApiDomain::CuptiDriver => "cuda_driver",
            ApiDomain::Nccl => "nccl",
            _ => "cuda_runtime",
        };
        let flow = launches_gpu_work(a).then(|| flow_id(a.proc, a.correlation));
        let mut args = vec![("correlation", Arg::U(a.correlation))];
        if a.result != 0 {
            args.push(("result", Arg::I(a.result as i64)));
        }
        self.slice(track, category(cat), &a.name, a.start, a.end, flow, None, &args)
    }

    fn write_collective(&mut self, c: &Collective) -> io::Result<()> {
        let track = self.track(TrackKey::Api(c.tid))?;
        let name: Name = format!("nccl{}", c.op.name()).into();
        let comm = format!("{:#x}", c.comm);
        let args = [
            ("bytes", Arg::U(c.bytes)),
            ("nranks", Arg::U(c.nranks as u64)),
            ("comm", Arg::S(&comm)),
            ("seq", Arg::U(c.seq)),
            ("correlation", Arg::U(c.correlation)),
        ];
        let flow = (c.correlation != 0).then(|| flow_id(c.proc, c.correlation));
        self.slice(track, category("nccl"), &name, c.start, c.end, flow, None, &args)
    }

    fn write_range(&mut self, r: &NvtxRange) -> io::Result<()> {
        let cat = category(if r.kind == RangeKind::CpuOp { "cpu_op" } else { "nvtx" });
        if r.kind == RangeKind::NvtxStartEnd {
            let track = self.track(TrackKey::StartEnd(r.name.clone()))?;
            return self.slice(track, cat, &r.name, r.start, r.end, None, None, &[]);
        }
        self.held.entry(r.tid).or_default().push(HeldRange {
            name: r.name.clone(),
            cat,
            start: r.start,
            end: r.end,
            depth: r.depth,
        });
        if r.depth == 0 {
            self.flush_ranges(r.tid)?;
        }
        Ok(())
    }
}

impl TraceSink for PerfettoExporter {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.proc = info.id;
        self.pid = info.id.0 as i64 + 1;
        self.tracks.clear();
        self.thread_names.clear();
        let uuid = self.next_uuid;
        self.next_uuid += 1;
        self.tracks.insert(TrackKey::Process, uuid);
        let pid = self.pid;
        let label = process_label(info);
        let host = format!("host={}", info.host);
        let rank = info.rank.map(|r| format!("rank={r}"));
        let r = self.descriptor(|d| {
            d.uint(TD_UUID, uuid);
            d.with(TD_PROCESS, |p| {
                p.int(PD_PID, pid);
                p.str(PD_NAME, &label);
                p.str(PD_LABELS, &host);
                if let Some(r) = &rank {
                    p.str(PD_LABELS, r);
                }
            });
        });
        self.guard(r);
    }

    fn handle_thread_name(&mut self, t: &ThreadName) {
        self.thread_names.insert(t.tid, t.name.clone());
        if let Some(&uuid) = self.tracks.get(&TrackKey::Thread(t.tid)) {
            // Declared before its name was known: declare it again, named.
            let (pid, parent) = (self.pid, self.tracks.get(&TrackKey::Process).copied().unwrap_or(0));
            let name = t.name.clone();
            let r = self.descriptor(|d| {
                d.uint(TD_UUID, uuid);
                d.uint(TD_PARENT, parent);
                d.with(TD_THREAD, |th| {
                    th.int(THD_PID, pid);
                    th.int(THD_TID, t.tid as i64);
                    th.str(THD_NAME, &name);
                });
            });
            self.guard(r);
        }
    }

    fn handle_kernel(&mut self, k: &Kernel) {
        let r = self.write_kernel(k);
        self.guard(r);
    }

    fn handle_memcpy(&mut self, m: &Memcpy) {
        let name: Name = memcpy_name(m).into();
        let args = [("bytes", Arg::U(m.bytes)), ("correlation", Arg::U(m.correlation))];
        let r = self.gpu_work("gpu_memcpy", &name, (m.device, m.stream), (m.start, m.end), m.correlation, &args);
        self.guard(r);
    }

    fn handle_memset(&mut self, m: &Memset) {
        let name: Name = memset_name(m).into();
        let args = [("bytes", Arg::U(m.bytes)), ("correlation", Arg::U(m.correlation))];
        let r = self.gpu_work("gpu_memset", &name, (m.device, m.stream), (m.start, m.end), m.correlation, &args);
        self.guard(r);
    }

    fn handle_api(&mut self, a: &Api) {
        let r = self.write_api(a);
        self.guard(r);
    }

    fn handle_collective(&mut self, c: &Collective) {
        let r = self.write_collective(c);
        self.guard(r);
    }

    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        let res = self.write_range(r);
        self.guard(res);
    }

    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        let res = self.track(TrackKey::Thread(m.tid)).and_then(|t| self.instant(t, category("nvtx"), &m.name, m.ts));
        self.guard(res);
    }

    fn handle_counter(&mut self, c: &CounterSample) {
        let r = self.counter(TrackKey::Counter(c.name.clone(), c.device), c.ts, c.value);
        self.guard(r);
    }

    fn handle_memory(&mut self, m: &MemoryEvent) {
        let r = self.counter(TrackKey::Memory(m.device, m.space), m.ts, m.reserved as f64);
        self.guard(r);
    }

    fn handle_marker(&mut self, m: &Marker) {
        let name: Name = match &m.name {
            Some(n) => format!("{}: {n}", m.kind.name()),
            None => format!("{} {}", m.kind.name(), m.value),
        }
        .into();
        let res = self.track(TrackKey::Process).and_then(|t| self.instant(t, category("marker"), &name, m.ts));
        self.guard(res);
    }

    fn handle_process_end(&mut self, _p: ProcId) {
        // Ranges whose top-level range never completed (the process was cut short).
        let tids: Vec<u32> = self.held.keys().copied().collect();
        for tid in tids {
            let r = self.flush_ranges(tid);
            self.guard(r);
        }
        self.display.clear();
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        if let Some(e) = self.error.take() {
            return Err(e.into());
        }
        self.out.flush()?;
        self.out.get_mut().commit()?;
        Ok(())
    }
}

impl Exporter for PerfettoExporter {
    fn written(&self) -> Written {
        Written { files: vec![self.path.clone()], events: self.events }
    }
}
