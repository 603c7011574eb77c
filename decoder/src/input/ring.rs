//! Decode a tprof ring file into the model.
//!
//! Ticks become global ns as `mono(ticks) + (start_wall - start_mono) + offset`: the file's
//! ClockSync pairs give the tick -> CLOCK_MONOTONIC map, the header's start pair places the process
//! on the wall clock, and the clock plan's per-host offset refines hosts against each other. NVTX
//! push/pop and start/end are paired into completed ranges by [`super::nvtx_pairing`].

use std::path::Path;

use tprof_format::{Damage, Decoded, DecodedVisitor, FileHeader, MonoCursor, Record, RingReader, StrId, TickConverter};

use super::id_slots::IdSlots;
use super::nvtx_pairing::{OpenRange, PairingLosses, RangeTracker};
use super::Notes;
use crate::error::InputError;
use crate::model::*;
use crate::nccl_plugin::{
    NcclComm, NcclPluginEvent, NcclProxyOp, NcclSetting, NcclTask, TopoGpu, TopoGpuPath, TopoNic,
};
use tprof_format::topology::{NicKind, PathLevel};

/// Open a ring file, as an input error naming the file.
pub fn open(path: &Path) -> Result<RingReader, InputError> {
    RingReader::open(path).map_err(|e| InputError::BadRing { path: path.to_path_buf(), message: e.source.to_string() })
}

/// Wall-clock base (wall - mono at start) of a file, with a note when the clock looks like garbage.
pub fn wall_base(header: &FileHeader, tc: &TickConverter, path: &Path, notes: &mut Notes) -> i64 {
    const YEAR_2001_NS: u64 = 978_307_200_000_000_000;
    if header.start_wall_ns < YEAR_2001_NS {
        notes.add(
            Some(path),
            format!(
                "no usable wall clock in the header (start_wall_ns = {}); times stay on this host's monotonic clock",
                header.start_wall_ns
            ),
        );
        return 0;
    }
    let base = header.start_wall_ns as i64 - header.start_mono_ns as i64;
    let worst = tc.pairs().iter().map(|&(_, m, w)| ((w as i64 - m as i64) - base).abs()).max().unwrap_or(0);
    if worst > 1_000_000_000 {
        notes.add(
            Some(path),
            format!("the wall clock stepped by up to {:.3} s during the run; using the start pair", worst as f64 / 1e9),
        );
    }
    base
}

/// The header's world size, unless the metadata that holds it is damaged or contradicts the rank
/// (it sizes job-level checks: a garbage value must not be believed).
fn trusted_world_size(reader: &RingReader, path: &Path, notes: &mut Notes) -> Option<u32> {
    let h = reader.header();
    let world = h.world_size?;
    let meta_damaged = reader.damage().iter().any(|d| d.offset == tprof_format::header::META_OFFSET as u64);
    if meta_damaged {
        notes.add(Some(path), format!("world size {world} not used: the metadata holding it is damaged"));
        return None;
    }
    if world == 0 || h.rank.is_some_and(|r| r >= world) {
        let rank = h.rank.map_or("-".to_string(), |r| r.to_string());
        notes.add(Some(path), format!("world size {world} not used: impossible for rank {rank}"));
        return None;
    }
    Some(world)
}

/// Resolves string ids to interned names, learning inline definitions as they arrive.
struct Names<'r> {
    reader: &'r RingReader,
    cache: IdSlots<Name>,
    interner: Interner,
    /// Inline string definitions so far: a name resolved when this was the same is still current.
    defined: u64,
}

impl Names<'_> {
    fn get(&mut self, id: StrId) -> Name {
        if let Some(n) = self.cache.get(id.0) {
            return n.clone();
        }
        let n = self.interner.intern(&self.reader.name(id));
        self.cache.insert(id.0, n.clone());
        n
    }
    /// True when `n` is the name of `id` (same interned allocation).
    fn is(&mut self, id: StrId, n: &Name) -> bool {
        match self.cache.get(id.0) {
            Some(c) => std::sync::Arc::ptr_eq(c, n),
            None => std::sync::Arc::ptr_eq(&self.get(id), n),
        }
    }
    fn opt(&mut self, id: StrId) -> Option<Name> {
        (id.0 != 0).then(|| self.get(id))
    }
    fn define(&mut self, id: StrId, text: &[u8]) {
        let n = self.interner.intern(&crate::bounded_names::cap_bytes(text));
        self.cache.insert(id.0, n);
        self.defined += 1;
    }
}

/// Event structs reused from one record to the next, one per name (kernels, NVTX ranges) or per
/// launched kernel name (API calls): handing a sink `&Kernel` / `&Api` then costs no reference counting on the
/// names (an atomic read-modify-write per clone and per drop was the decode loop's largest cost).
/// Each remembers [`Names::defined`] when its names were last checked (and an API call the string id
/// of its name), so that its names are checked again only when a string was defined since.
#[derive(Default)]
struct Reused {
    kernels: IdSlots<(Kernel, u64)>,
    apis: IdSlots<(Api, StrId, u64)>,
    /// NVTX ranges by name, with the string id of their domain.
    ranges: IdSlots<(NvtxRange, StrId, u64)>,
}

/// Decode one ring file into `sink` as process `id`, shifting its times by `offset_ns`.
pub fn feed(
    path: &Path,
    id: ProcId,
    offset_ns: i64,
    sink: &mut dyn TraceSink,
    notes: &mut Notes,
) -> Result<ProcessInfo, InputError> {
    let reader = open(path)?;
    for d in reader.damage() {
        notes.add(Some(path), format!("damage at offset {}: {}", d.offset, d.what));
    }
    let tc = reader.tick_converter();
    let base = wall_base(reader.header(), &tc, path, notes) + offset_ns;
    let clock = RingClock { tc, cursor: MonoCursor::default(), base };
    let mut names = Names { reader: &reader, cache: IdSlots::default(), interner: Interner::new(), defined: 0 };
    let info = process_info(&reader, path, id, offset_ns, &mut names.interner, notes);
    sink.handle_process(&info);
    let mut conv = RingConverter {
        proc: id,
        clock,
        names,
        ranges: RangeTracker::default(),
        reused: Reused::default(),
        sink,
        last_ts: 0,
        skipped: Skipped::default(),
    };
    // Chunk by chunk in one pass (the same order as `reader.records()`: each chunk's pages leave the
    // resident set once decoded), each record handed over where it is decoded.
    for (_, items) in reader.chunk_pass() {
        if let Some(d) = items.for_each_item(&mut conv) {
            conv.on_damage(d, path, notes);
        }
    }
    conv.finish(path, notes);
    Ok(info)
}

/// Who the process was, from the header (and a note when the recorder dropped events).
fn process_info(
    reader: &RingReader,
    path: &Path,
    id: ProcId,
    offset_ns: i64,
    interner: &mut Interner,
    notes: &mut Notes,
) -> ProcessInfo {
    let h = reader.header();
    let stats = reader.stats();
    let dropped = stats.dropped_events + stats.cupti_dropped;
    if stats.dropped_events > 0 {
        notes.add(Some(path), format!("the recorder dropped {} events", stats.dropped_events));
    }
    if stats.cupti_dropped > 0 {
        notes.add(
            Some(path),
            format!("CUPTI dropped {} activity records: GPU work and CUDA calls are missing", stats.cupti_dropped),
        );
    }
    ProcessInfo {
        id,
        origin: Origin::Ring,
        path: path.to_path_buf(),
        host: interner.intern(&h.hostname),
        pid: h.pid,
        ppid: h.ppid,
        cmdline: h.cmdline.join(" "),
        rank: h.rank,
        local_rank: h.local_rank,
        world_size: trusted_world_size(reader, path, notes),
        job_id: h.job_id.clone(),
        clock_offset_ns: offset_ns,
        gpu_activity: true,
        dropped_events: dropped,
    }
}

/// A file's ticks -> global ns (see the module doc).
struct RingClock {
    tc: TickConverter,
    cursor: MonoCursor,
    base: i64,
}

impl RingClock {
    #[inline]
    fn ns(&mut self, ticks: u64) -> Ns {
        (self.tc.to_mono_ns_near(ticks, &mut self.cursor) as i64 + self.base).max(0) as u64
    }
}

/// What the decode loop passed over, for the notes at the end.
#[derive(Default)]
struct Skipped {
    /// Records of types this build does not know.
    unknown: u64,
    /// GPU records without times.
    placeholders: u64,
    /// Damaged chunks (the first [`DAMAGE_NOTES`] are named one by one).
    damaged: usize,
}

/// Damaged chunks named one note each; the rest are counted.
const DAMAGE_NOTES: usize = 20;

/// The ring converter: one file's records, in commit order, into model events for a sink.
struct RingConverter<'r, 's> {
    proc: ProcId,
    clock: RingClock,
    names: Names<'r>,
    ranges: RangeTracker,
    reused: Reused,
    sink: &'s mut dyn TraceSink,
    /// The latest event time so far (where ranges still open at the end are closed).
    last_ts: Ns,
    skipped: Skipped,
}

/// One item of a chunk: a record, an inline string definition or an unknown record. Inlined into
/// the decoder's code for each record type, where the match on the type folds.
impl<'a> DecodedVisitor<'a> for RingConverter<'_, '_> {
    type Out = ();
    #[inline(always)]
    fn visit(&mut self, item: Decoded<'a>) {
        match item {
            Decoded::Record(r) => self.on_record(r),
            Decoded::String { id, bytes } => self.names.define(id, bytes),
            Decoded::Unknown { .. } => self.skipped.unknown += 1,
        }
    }
}

impl RingConverter<'_, '_> {
    /// A damaged frame (the rest of its chunk is skipped).
    fn on_damage(&mut self, d: Damage, path: &Path, notes: &mut Notes) {
        self.skipped.damaged += 1;
        if self.skipped.damaged <= DAMAGE_NOTES {
            notes.add(Some(path), format!("damage at offset {}: {}", d.offset, d.what));
        }
    }

    /// `ticks` on the global clock, the latest event time moved on to it.
    #[inline(always)]
    fn at(&mut self, ticks: u64) -> Ns {
        let ns = self.clock.ns(ticks);
        self.last_ts = self.last_ts.max(ns);
        ns
    }

    #[inline(always)]
    fn on_record(&mut self, rec: Record) {
        // API calls, kernels and NVTX push/pop move the latest event time on with their own times;
        // the rest with their timestamp here.
        match rec {
            Record::Api { .. } | Record::Kernel { .. } | Record::NvtxPush { .. } | Record::NvtxPop { .. } => {}
            Record::ClockSync { .. } => {}
            _ => {
                if let Some(t) = rec.timestamp() {
                    self.at(t);
                }
            }
        }
        match rec {
            Record::ClockSync { .. }
            | Record::ExternalCorrelation { .. }
            | Record::Overhead { .. }
            | Record::StringRef { .. } => {}
            Record::NcclCommInfo { .. }
            | Record::NcclTask { .. }
            | Record::NcclProxy { .. }
            | Record::TopoGpu { .. }
            | Record::TopoNic { .. }
            | Record::TopoGpuPath { .. }
            | Record::NcclSetting { .. } => self.on_nccl_plugin(rec),
            Record::Api { .. } => self.on_api(rec),
            Record::ApiRepeat { .. } => self.on_api_repeat(rec),
            Record::Kernel { .. } => self.on_kernel(rec),
            Record::Memcpy { .. } => self.on_memcpy(rec),
            Record::Memset { .. } => self.on_memset(rec),
            Record::Sync { .. } => self.on_sync(rec),
            Record::Memory { .. } => self.on_memory(rec),
            Record::Collective { .. } => self.on_collective(rec),
            Record::NvtxPush { tid, domain, name, ts } => {
                let ts = self.at(ts);
                self.ranges.push(tid, domain, name, ts);
            }
            Record::NvtxPop { tid, domain, ts } => {
                let end = self.at(ts);
                if let Some(r) = self.ranges.pop(tid, domain) {
                    self.emit_range(r, end);
                }
            }
            Record::NvtxStart { tid, domain, name, id, ts } => {
                let ts = self.clock.ns(ts);
                if let Some((r, end)) = self.ranges.start(tid, domain, name, id, ts) {
                    self.emit_range(r, end);
                }
            }
            Record::NvtxEnd { id, ts, .. } => {
                let end = self.clock.ns(ts);
                if let Some(r) = self.ranges.end(id, end) {
                    self.emit_range(r, end);
                }
            }
            Record::NvtxMark { .. } => self.on_nvtx_mark(rec),
            Record::ThreadName { tid, name } => {
                let name = self.names.get(name);
                self.sink.handle_thread_name(&ThreadName { proc: self.proc, tid, name });
            }
            Record::Counter { .. } => self.on_counter(rec),
            Record::HostSample { scope, id, metric, ts, value } => {
                let ts = self.clock.ns(ts);
                self.sink.handle_host_sample(&HostSample { proc: self.proc, scope, id, metric, ts, value });
            }
            Record::HostEntity { scope, id, parent, ts, name } => {
                let (ts, name) = (self.clock.ns(ts), self.names.get(name));
                self.sink.handle_host_entity(&HostEntity { proc: self.proc, scope, id, parent, ts, name });
            }
            Record::Marker { kind, ts, value, name } => {
                let (ts, name) = (self.clock.ns(ts), self.names.opt(name));
                self.sink.handle_marker(&Marker { proc: self.proc, kind, ts, value, name });
            }
        }
    }

    /// A GPU record's times on the global clock; None, counted, for a record without times.
    #[inline]
    fn gpu_times(&mut self, start: u64, end: u64) -> Option<(Ns, Ns)> {
        if start == 0 && end == 0 {
            self.skipped.placeholders += 1;
            return None;
        }
        Some((self.clock.ns(start), self.clock.ns(end)))
    }

    /// An API call, handed over in the struct reused for its launched kernel's name.
    #[inline(always)]
    fn on_api(&mut self, rec: Record) {
        let Record::Api { tid, domain, name, start, end, result, correlation, detail, stream, arg } = rec else {
            return;
        };
        let (start, end) = (self.at(start), self.clock.ns(end));
        let (proc, names) = (self.proc, &mut self.names);
        // (What the maker needs moved into it, so that nothing of the call has to be in memory
        // when it is not made.)
        let make = {
            let names = &mut *names;
            move || new_api(proc, names, name, detail, domain)
        };
        let (a, name_id, checked) = self.reused.apis.get_or_insert_with(detail.0, make);
        // Another name with this detail, or a string id redefined inline: check that the reused
        // names are current.
        if *name_id != name || *checked != names.defined {
            if !names.is(name, &a.name) {
                a.name = names.get(name);
            }
            if a.detail.as_ref().is_some_and(|d| !names.is(detail, d)) {
                a.detail = names.opt(detail);
            }
            (*name_id, *checked) = (name, names.defined);
        }
        a.tid = tid;
        a.domain = domain;
        a.start = start;
        a.end = end;
        a.result = result;
        a.correlation = correlation as u64;
        a.stream = stream;
        a.arg = arg;
        a.range = self.ranges.innermost(tid);
        a.repeat = None;
        self.sink.handle_api(a);
    }

    /// Identical calls counted by the recorder: one `Api` event standing for all of them.
    fn on_api_repeat(&mut self, rec: Record) {
        let Record::ApiRepeat { tid, domain, name, start, end, result, stream, calls, busy } = rec else {
            return;
        };
        let (start_ns, end_ns) = (self.clock.ns(start), self.clock.ns(end));
        // `busy` is in ticks: convert it as a span from the run's start.
        let busy = self.clock.ns(start.saturating_add(busy)).saturating_sub(start_ns);
        let a = Api {
            proc: self.proc,
            tid,
            domain,
            name: self.names.get(name),
            start: start_ns,
            end: end_ns,
            result,
            correlation: 0,
            detail: None,
            stream,
            arg: 0,
            range: self.ranges.innermost(tid),
            repeat: Some(Repeat { calls, busy }),
        };
        self.sink.handle_api(&a);
    }

    /// A kernel, handed over in the struct reused for its name; one without times is counted.
    #[inline(always)]
    fn on_kernel(&mut self, rec: Record) {
        let Record::Kernel {
            device,
            context,
            stream,
            start,
            end,
            grid,
            block,
            registers,
            shared_mem,
            correlation,
            name,
            graph_id,
        } = rec
        else {
            return;
        };
        let start_ns = self.at(start);
        if start == 0 && end == 0 {
            self.skipped.placeholders += 1;
            return;
        }
        let (start, end) = (start_ns, self.clock.ns(end));
        let (proc, names) = (self.proc, &mut self.names);
        let make = {
            let names = &mut *names;
            move || new_kernel(proc, names, name)
        };
        let (k, checked) = self.reused.kernels.get_or_insert_with(name.0, make);
        // A string id redefined inline since: check that the reused name is current.
        if *checked != names.defined {
            if !names.is(name, &k.name) {
                k.name = names.get(name);
            }
            *checked = names.defined;
        }
        k.device = device;
        k.context = context;
        k.stream = stream;
        k.start = start;
        k.end = end;
        k.grid = grid;
        k.block = block;
        k.registers = registers;
        k.shared_mem = shared_mem;
        k.correlation = correlation as u64;
        k.graph_id = graph_id;
        self.sink.handle_kernel(k);
    }

    #[inline]
    fn on_memcpy(&mut self, rec: Record) {
        let Record::Memcpy { device, context, stream, start, end, bytes, kind, src_kind, dst_kind, correlation } = rec
        else {
            return;
        };
        let Some((start, end)) = self.gpu_times(start, end) else { return };
        self.sink.handle_memcpy(&Memcpy {
            proc: self.proc,
            device,
            context,
            stream,
            start,
            end,
            bytes,
            kind,
            src_kind,
            dst_kind,
            correlation: correlation as u64,
        });
    }

    #[inline]
    fn on_memset(&mut self, rec: Record) {
        let Record::Memset { device, context, stream, start, end, bytes, value, dst_kind, correlation } = rec else {
            return;
        };
        let Some((start, end)) = self.gpu_times(start, end) else { return };
        self.sink.handle_memset(&Memset {
            proc: self.proc,
            device,
            context,
            stream,
            start,
            end,
            bytes,
            value,
            dst_kind,
            correlation: correlation as u64,
        });
    }

    #[inline]
    fn on_sync(&mut self, rec: Record) {
        let Record::Sync { kind, tid, context, stream, event, start, end, correlation, result } = rec else {
            return;
        };
        let (start, end) = (self.clock.ns(start), self.clock.ns(end));
        self.sink.handle_sync(&SyncEvent {
            proc: self.proc,
            kind,
            tid,
            context,
            stream,
            event,
            start,
            end,
            correlation: correlation as u64,
            result,
        });
    }

    #[inline]
    fn on_memory(&mut self, rec: Record) {
        let Record::Memory { op, space, device, address, bytes, reserved, ts, result, correlation, tid } = rec else {
            return;
        };
        let ts = self.clock.ns(ts);
        self.sink.handle_memory(&MemoryEvent {
            proc: self.proc,
            op,
            space,
            device,
            address,
            bytes,
            reserved,
            ts,
            result,
            correlation: correlation as u64,
            tid,
        });
    }

    /// An NCCL call, with the innermost range open on its thread.
    #[inline]
    /// A record of the NCCL profiler plugin: times to ns, names resolved.
    fn on_nccl_plugin(&mut self, rec: Record) {
        let proc = self.proc;
        let ev = match rec {
            Record::NcclCommInfo { comm, name, nnodes, nranks, rank, plugin_version, ts } => {
                NcclPluginEvent::Comm(NcclComm {
                    proc,
                    comm,
                    name: self.names.get(name),
                    nnodes,
                    nranks,
                    rank,
                    plugin_version,
                    ts: self.clock.ns(ts),
                })
            }
            Record::NcclTask {
                comm,
                seq,
                op,
                count,
                datatype,
                algo,
                proto,
                nchannels,
                nwarps,
                peer,
                graph_captured,
                start,
                end,
                gpu_start,
                gpu_end,
                channels_seen,
                correlation,
            } => NcclPluginEvent::Task(NcclTask {
                proc,
                comm,
                seq,
                op,
                count,
                datatype: self.names.get(datatype),
                algo: self.names.get(algo),
                proto: self.names.get(proto),
                nchannels,
                nwarps,
                peer,
                graph_captured: match graph_captured {
                    0 => Some(false),
                    1 => Some(true),
                    _ => None,
                },
                start: self.clock.ns(start),
                end: self.clock.ns(end),
                gpu_start,
                gpu_end,
                channels_seen,
                correlation: correlation as u64,
            }),
            Record::NcclProxy { comm, seq, channel, peer, is_send, steps, bytes, start, end, wire, wait } => {
                NcclPluginEvent::Proxy(NcclProxyOp {
                    proc,
                    comm,
                    seq,
                    channel,
                    peer,
                    is_send: is_send != 0,
                    steps,
                    bytes,
                    start: self.clock.ns(start),
                    end: self.clock.ns(end),
                    wire_ns: self.clock.ns(start.saturating_add(wire)).saturating_sub(self.clock.ns(start)),
                    wait_ns: self.clock.ns(start.saturating_add(wait)).saturating_sub(self.clock.ns(start)),
                })
            }
            Record::TopoGpu { ts, host, device, bus_id, numa_node, nvlinks, nvlink_version, gpus } => {
                NcclPluginEvent::TopoGpu(TopoGpu {
                    proc,
                    ts: self.clock.ns(ts),
                    host: self.names.get(host),
                    device,
                    bus_id: self.names.get(bus_id),
                    numa_node,
                    nvlinks,
                    nvlink_version,
                    gpus,
                })
            }
            Record::TopoNic { ts, name, port, kind, rate_mbps, numa_node, path } => NcclPluginEvent::TopoNic(TopoNic {
                proc,
                ts: self.clock.ns(ts),
                name: self.names.get(name),
                port,
                kind: NicKind::from_u8(kind),
                rate_mbps,
                numa_node,
                path: PathLevel::from_u8(path),
            }),
            Record::TopoGpuPath { ts, device, peer, level, nvlink } => NcclPluginEvent::TopoPath(TopoGpuPath {
                proc,
                ts: self.clock.ns(ts),
                device,
                peer,
                level: PathLevel::from_u8(level),
                nvlink: nvlink == 1,
            }),
            Record::NcclSetting { ts, name, value } => NcclPluginEvent::Setting(NcclSetting {
                proc,
                ts: self.clock.ns(ts),
                name: self.names.get(name),
                value: self.names.get(value),
            }),
            _ => return,
        };
        self.sink.handle_nccl_plugin(&ev);
    }

    fn on_collective(&mut self, rec: Record) {
        let Record::Collective {
            tid,
            op,
            start,
            end,
            comm,
            rank,
            nranks,
            count,
            datatype,
            bytes,
            peer,
            stream,
            seq,
            result,
            correlation,
            device,
        } = rec
        else {
            return;
        };
        let (start, end) = (self.clock.ns(start), self.clock.ns(end));
        self.sink.handle_collective(&Collective {
            proc: self.proc,
            tid,
            op,
            start,
            end,
            comm,
            rank,
            nranks,
            count,
            datatype,
            bytes,
            peer,
            stream,
            seq,
            result,
            correlation: correlation as u64,
            device,
            range: self.ranges.innermost(tid),
        });
    }

    fn on_nvtx_mark(&mut self, rec: Record) {
        let Record::NvtxMark { tid, domain, name, ts } = rec else { return };
        let (domain, name) = (self.names.opt(domain), self.names.get(name));
        let ts = self.clock.ns(ts);
        self.sink.handle_nvtx_mark(&NvtxMark { proc: self.proc, tid, domain, name, ts });
    }

    fn on_counter(&mut self, rec: Record) {
        let Record::Counter { name, device, ts, value } = rec else { return };
        let name = self.names.get(name);
        let ts = self.clock.ns(ts);
        let device = (device != u32::MAX).then_some(device);
        self.sink.handle_counter(&CounterSample { proc: self.proc, name, device, ts, value });
    }

    /// A completed NVTX range.
    /// Handed over in the struct reused for its name, like kernels.
    fn emit_range(&mut self, r: OpenRange, end: Ns) {
        let (proc, names) = (self.proc, &mut self.names);
        let make = {
            let (names, domain, name) = (&mut *names, r.domain, r.name);
            move || new_range(proc, names, domain, name)
        };
        let (x, domain_id, checked) = self.reused.ranges.get_or_insert_with(r.name.0, make);
        // Another domain with this name, or a string id redefined inline: check that the reused
        // names are current.
        if *domain_id != r.domain || *checked != names.defined {
            let same_domain = match &x.domain {
                Some(d) => r.domain.0 != 0 && names.is(r.domain, d),
                None => r.domain.0 == 0,
            };
            if !same_domain {
                x.domain = names.opt(r.domain);
            }
            if !names.is(r.name, &x.name) {
                x.name = names.get(r.name);
            }
            (*domain_id, *checked) = (r.domain, names.defined);
        }
        x.id = r.id;
        x.parent = r.parent;
        x.depth = r.depth;
        x.kind = r.kind;
        x.tid = r.tid;
        x.start = r.start;
        x.end = end.max(r.start);
        self.sink.handle_nvtx_range(x);
    }

    /// The end of the file: ranges still open (crash, hang, capture stopped) close at the last
    /// event; what was lost or skipped becomes notes; the process ends.
    fn finish(mut self, path: &Path, notes: &mut Notes) {
        let open = self.ranges.finish();
        if !open.is_empty() {
            notes.add(
                Some(path),
                format!("{} NVTX ranges were still open at the end; closed at the last event", open.len()),
            );
        }
        for r in open {
            self.emit_range(r, self.last_ts);
        }
        note_range_losses(&self.ranges.losses, path, notes);
        let skipped = &self.skipped;
        if skipped.unknown > 0 {
            notes
                .add(Some(path), format!("{} records of types this tprof does not know were skipped", skipped.unknown));
        }
        if skipped.damaged > DAMAGE_NOTES {
            notes.add(Some(path), format!("... {} damaged chunks in all", skipped.damaged));
        }
        if skipped.placeholders > 0 {
            notes.add(
                Some(path),
                format!("{} GPU records without times (CUPTI activity unavailable)", skipped.placeholders),
            );
        }
        self.sink.handle_process_end(self.proc);
    }
}

/// The struct reused for the API calls with launched kernel name `detail` (its other fields are
/// set per call), with the string id of its name and when its names were checked.
#[cold]
#[inline(never)]
fn new_api(proc: ProcId, names: &mut Names, name: StrId, detail: StrId, domain: ApiDomain) -> (Api, StrId, u64) {
    let a = Api {
        proc,
        tid: 0,
        domain,
        name: names.get(name),
        start: 0,
        end: 0,
        result: 0,
        correlation: 0,
        detail: names.opt(detail),
        stream: 0,
        arg: 0,
        range: None,
        repeat: None,
    };
    (a, name, names.defined)
}

/// The struct reused for the kernels named `name` (its other fields are set per kernel), with when
/// its name was checked.
#[cold]
#[inline(never)]
fn new_kernel(proc: ProcId, names: &mut Names, name: StrId) -> (Kernel, u64) {
    let k = Kernel {
        proc,
        device: 0,
        context: 0,
        stream: 0,
        start: 0,
        end: 0,
        name: names.get(name),
        grid: [0; 3],
        block: [0; 3],
        registers: 0,
        shared_mem: 0,
        correlation: 0,
        graph_id: 0,
        collective: None,
    };
    (k, names.defined)
}

/// The struct reused for the NVTX ranges named `name` (its other fields are set per range), with the
/// string id of its domain and when its names were checked.
#[cold]
#[inline(never)]
fn new_range(proc: ProcId, names: &mut Names, domain: StrId, name: StrId) -> (NvtxRange, StrId, u64) {
    let r = NvtxRange {
        proc,
        id: RangeId(0),
        parent: None,
        depth: 0,
        kind: RangeKind::Nvtx,
        tid: 0,
        domain: names.opt(domain),
        name: names.get(name),
        start: 0,
        end: 0,
    };
    (r, domain, names.defined)
}

/// Notes for the NVTX ranges the pairing could not complete.
fn note_range_losses(losses: &PairingLosses, path: &Path, notes: &mut Notes) {
    if losses.unmatched_ends > 0 {
        notes.add(Some(path), format!("{} NVTX range ends had no matching begin", losses.unmatched_ends));
    }
    if losses.evicted_starts > 0 {
        notes.add(
            Some(path),
            format!(
                "{} NVTX start/end ranges dropped: their end did not come while {} later ranges were waiting",
                losses.evicted_starts,
                super::nvtx_pairing::MAX_PENDING
            ),
        );
    }
    if losses.untracked_pushes > 0 {
        notes.add(
            Some(path),
            format!(
                "{} NVTX push ranges dropped: nested deeper than {} or more than {} open at once",
                losses.untracked_pushes,
                super::nvtx_pairing::MAX_DEPTH,
                super::nvtx_pairing::MAX_OPEN_PUSHES
            ),
        );
    }
    if losses.duplicate_ids > 0 {
        notes.add(
            Some(path),
            format!("{} NVTX range starts or ends repeated a waiting range id; ignored", losses.duplicate_ids),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testkit::{SynthJob, T0};

    #[derive(Default)]
    struct Count {
        apis: u64,
        kernels: Vec<Kernel>,
        colls: Vec<Collective>,
        ranges: Vec<NvtxRange>,
        api_ranges: u64,
    }
    impl TraceSink for Count {
        fn handle_api(&mut self, a: &Api) {
            self.apis += 1;
            self.api_ranges += a.range.is_some() as u64;
        }
        fn handle_kernel(&mut self, k: &Kernel) {
            self.kernels.push(k.clone());
        }
        fn handle_collective(&mut self, c: &Collective) {
            self.colls.push(c.clone());
        }
        fn handle_nvtx_range(&mut self, r: &NvtxRange) {
            self.ranges.push(r.clone());
        }
    }

    #[test]
    fn decodes_every_event() {
        let d = tempfile::tempdir().unwrap();
        let job = SynthJob { ranks: 1, steps: 7, kernels_per_step: 13, ..SynthJob::default() };
        let paths = job.write(d.path()).unwrap();
        let mut c = Count::default();
        let mut notes = Notes::default();
        let info = feed(&paths[0], ProcId(0), 0, &mut c, &mut notes).unwrap();
        assert!(notes.is_empty(), "{notes:?}");
        assert_eq!(info.rank, Some(0));
        assert_eq!(&*info.host, "host0");
        assert_eq!(info.job_id.as_deref(), Some("synth-job"));
        assert_eq!(c.apis, 7 * 13);
        assert_eq!(c.api_ranges, 7 * 13);
        assert_eq!(c.kernels.len(), 7 * 14);
        assert_eq!(c.colls.len(), 7);
        assert_eq!(c.ranges.len(), 7);
        assert_eq!(&*c.ranges[0].name, "step");
        assert_eq!(c.ranges[0].domain.as_deref(), Some("app"));
        // Times are on the wall clock: the first kernel starts 1 ms + 9 us after T0.
        let first = c.kernels.iter().map(|k| k.start).min().unwrap();
        assert_eq!(first, T0 + 1_000_000 + 9_000);
        assert_eq!(c.kernels[0].duration(), 100_000);
        let total = 7 * (2 * 13 + 4);
        assert_eq!(job.events_per_rank(), total);
    }

    #[test]
    fn bad_file_is_named() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x.tprof");
        std::fs::write(&p, b"TPROFRNG garbage").unwrap();
        let err = feed(&p, ProcId(0), 0, &mut Count::default(), &mut Notes::default()).unwrap_err();
        assert!(err.to_string().contains("x.tprof"), "{err}");
    }
}
