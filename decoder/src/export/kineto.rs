//! Kineto (PyTorch profiler) JSON, one file per process (rank), as Holistic Trace Analysis reads it.
//!
//! Each file: `schemaVersion`, `distributedInfo {backend, rank, world_size}`, `baseTimeNanoseconds`
//! (the export origin; `ts` are microseconds after it), `traceEvents`, and `deviceProperties` (the
//! devices seen, written last). Events follow Kineto's conventions: GPU work has `pid` = device and
//! `tid` = stream with `cat` kernel / gpu_memcpy / gpu_memset and `args` {correlation, External id,
//! device, context, stream, grid, block, ...}; NCCL kernels carry Kineto's collective metadata
//! ("Collective name", "In msg nelems", "dtype", "Group size", "Process Group Name"); host calls are
//! cuda_runtime / cuda_driver on the process's `pid` / thread `tid`; NVTX ranges are
//! user_annotation (cpu_op for imported operators), step ranges renamed `ProfilerStep#N`; NCCL
//! calls are `record_param_comms` cpu_ops (with the correlation of their kernel); `ac2g` flow events
//! link each launch (API call or NCCL call) to its GPU work.
//! Each file is streamed while its process is decoded.
//!
//! Correlation ids are written with bit 32 set ([`wide_id`]): HTA downcasts integer columns to the
//! narrowest type and then stores row indices into the correlation column's type, which fails when
//! every id is small (synthetic jobs, short traces). The low 32 bits are the id tprof decoded.

use std::collections::{BTreeSet, HashMap};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use regex_lite::Regex;

use super::display_names::{launches_gpu_work, memcpy_name, memset_name, process_file_stem, DisplayNames};
use super::json::{write_str, write_u64, EventStream};
use super::{Exporter, Written};
use crate::model::*;

/// The correlation id as written: bit 32 set, so the column is 64-bit wide in HTA (one-to-one on
/// 32-bit ids, which is what CUPTI and the shim produce).
pub fn wide_id(id: u64) -> u64 {
    if id == 0 {
        0
    } else {
        id | 1 << 32
    }
}

/// Kineto's "Collective name" for an op. (`distributedInfo` is written with Kineto's spacing,
/// `"rank": 3`: HTA finds the rank with a regex that wants the space.)
pub fn kineto_collective_name(op: CollOp) -> &'static str {
    match op {
        CollOp::AllReduce => "allreduce",
        CollOp::AllGather => "allgather",
        CollOp::ReduceScatter => "reduce_scatter",
        CollOp::Broadcast => "broadcast",
        CollOp::Reduce => "reduce",
        CollOp::AllToAll => "all_to_all",
        CollOp::Send => "send",
        CollOp::Recv => "recv",
        CollOp::Gather => "gather",
        CollOp::Scatter => "scatter",
        _ => "unknown",
    }
}

/// PyTorch's dtype name for an NCCL datatype code, with its size.
fn nccl_dtype(code: u8) -> (&'static str, u64) {
    match code {
        0 => ("Char", 1),
        1 => ("Byte", 1),
        2 => ("Int", 4),
        3 => ("UInt32", 4),
        4 => ("Long", 8),
        5 => ("UInt64", 8),
        6 => ("Half", 2),
        7 => ("Float", 4),
        8 => ("Double", 8),
        9 => ("BFloat16", 2),
        _ => ("Byte", 1),
    }
}

/// Collective facts written on an NCCL kernel.
#[derive(Debug, Clone)]
struct CollArgs {
    op: CollOp,
    nelems: u64,
    dtype: &'static str,
    nranks: u32,
    group: String,
}

impl CollArgs {
    fn from_call(c: &Collective) -> CollArgs {
        let (dtype, size) = nccl_dtype(c.datatype);
        let nelems = if c.count > 0 { c.count } else { c.bytes / size };
        CollArgs { op: c.op, nelems, dtype, nranks: c.nranks, group: format!("{:#x}", c.comm) }
    }

    fn write(&self, w: &mut dyn Write) -> io::Result<()> {
        write!(
            w,
            ",\"Collective name\":\"{}\",\"In msg nelems\":{},\"Out msg nelems\":{},\"Group size\":{},\"dtype\":\"{}\",\"Process Group Name\":\"{}\",\"Process Group Description\":\"tprof\"",
            kineto_collective_name(self.op),
            self.nelems,
            self.nelems,
            self.nranks,
            self.dtype,
            self.group
        )
    }
}

pub struct KinetoExporter {
    output: PathBuf,
    origin: Ns,
    step_pattern: Regex,
    out: Option<EventStream>,
    files: Vec<PathBuf>,
    events: u64,
    error: Option<io::Error>,
    names: DisplayNames,
    pid: u32,
    devices: BTreeSet<u32>,
    streams: BTreeSet<(u32, u32)>,
    /// NCCL calls waiting for their kernel (by correlation): bounded by calls in flight.
    calls: HashMap<u64, CollArgs>,
    steps_seen: u64,
}

impl KinetoExporter {
    /// `output`: a directory (one `rank-<r>.json` per process), or a `.json` / `.json.gz` file
    /// for the first process (later ones go beside it as `<stem>.rank-<r>.json`).
    pub fn new(output: &Path, origin: Ns, step_pattern: &Regex) -> KinetoExporter {
        KinetoExporter {
            output: output.to_path_buf(),
            origin,
            step_pattern: step_pattern.clone(),
            out: None,
            files: Vec::new(),
            events: 0,
            error: None,
            names: DisplayNames::default(),
            pid: 0,
            devices: BTreeSet::new(),
            streams: BTreeSet::new(),
            calls: HashMap::new(),
            steps_seen: 0,
        }
    }

    fn path_for(&self, info: &ProcessInfo) -> PathBuf {
        let name = self.output.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let stem = process_file_stem(info);
        if let Some(base) = name.strip_suffix(".json.gz").or_else(|| name.strip_suffix(".json")) {
            if self.files.is_empty() {
                return self.output.clone();
            }
            let ext = if name.ends_with(".gz") { "json.gz" } else { "json" };
            return self.output.with_file_name(format!("{base}.{stem}.{ext}"));
        }
        let mut p = self.output.join(format!("{stem}.json"));
        let mut n = 1;
        while self.files.contains(&p) {
            n += 1;
            p = self.output.join(format!("{stem}-{n}.json"));
        }
        p
    }

    fn guard(&mut self, r: io::Result<()>) {
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
    }

    fn stream(&mut self) -> io::Result<&mut EventStream> {
        self.out.as_mut().ok_or_else(|| io::Error::other("no process open"))
    }

    /// `{"ph":"X","cat":..,"name":..,"pid":..,"tid":..,"ts":..,"dur":..,"args":{` — the caller
    /// writes the args and calls `close_args`.
    fn open_slice(&mut self, cat: &str, name: &str, pid: u32, tid: u64, start: Ns, end: Ns) -> io::Result<()> {
        let s = self.stream()?;
        let w = s.event()?;
        // Pieces written directly: no fmt machinery per event.
        w.write_all(b"\"ph\":\"X\",\"cat\":\"")?;
        w.write_all(cat.as_bytes())?;
        w.write_all(b"\",\"name\":")?;
        write_str(w, name)?;
        w.write_all(b",\"pid\":")?;
        write_u64(w, pid.into())?;
        w.write_all(b",\"tid\":")?;
        write_u64(w, tid)?;
        w.write_all(b",")?;
        s.ts_dur(start, end)?;
        s.w().write_all(b",\"args\":{")
    }

    fn close_args(&mut self) -> io::Result<()> {
        let s = self.stream()?;
        s.w().write_all(b"}")?;
        s.end()
    }

    fn flow(&mut self, start: bool, id: u64, pid: u32, tid: u64, ts: Ns) -> io::Result<()> {
        let s = self.stream()?;
        let w = s.meta()?;
        let ph = if start { "s" } else { "f" };
        w.write_all(b"\"ph\":\"")?;
        w.write_all(ph.as_bytes())?;
        w.write_all(b"\",\"id\":")?;
        write_u64(w, id)?;
        w.write_all(b",\"pid\":")?;
        write_u64(w, pid.into())?;
        w.write_all(b",\"tid\":")?;
        write_u64(w, tid)?;
        w.write_all(b",")?;
        s.ts(ts)?;
        s.w().write_all(b",\"cat\":\"ac2g\",\"name\":\"ac2g\"")?;
        if !start {
            s.w().write_all(b",\"bp\":\"e\"")?;
        }
        s.end()
    }

    fn gpu_row(&mut self, device: u32, stream: u32) {
        self.devices.insert(device);
        self.streams.insert((device, stream));
    }

    fn write_kernel(&mut self, k: &Kernel) -> io::Result<()> {
        if k.start == 0 && k.end == 0 {
            return Ok(());
        }
        self.gpu_row(k.device, k.stream);
        let name = self.names.get(&k.name);
        let coll = match &k.collective {
            Some(c) => Some(CollArgs { op: c.op, nelems: c.bytes, dtype: "Byte", nranks: c.nranks, group: "0".into() }),
            None => self.calls.remove(&k.correlation).filter(|_| k.work_kind() == GpuWorkKind::Communication),
        };
        self.open_slice("kernel", &name, k.device, k.stream as u64, k.start, k.end)?;
        let (g, b) = (k.grid, k.block);
        let w = self.stream()?.w();
        write!(
            w,
            "\"External id\":{c},\"queued\":0,\"device\":{},\"context\":{},\"stream\":{},\"correlation\":{c},\"registers per thread\":{},\"shared memory\":{},\"grid\":[{},{},{}],\"block\":[{},{},{}]",
            k.device,
            k.context,
            k.stream,
            k.registers,
            k.shared_mem,
            g[0],
            g[1],
            g[2],
            b[0],
            b[1],
            b[2],
            c = wide_id(k.correlation)
        )?;
        if let Some(c) = coll {
            c.write(w)?;
        }
        self.close_args()?;
        if k.correlation != 0 {
            self.flow(false, wide_id(k.correlation), k.device, k.stream as u64, k.start)?;
        }
        Ok(())
    }

    #[allow(clippy::too_many_arguments)]
    fn write_copy(
        &mut self,
        cat: &str,
        name: &str,
        (device, context, stream): (u32, u32, u32),
        (start, end): (Ns, Ns),
        bytes: u64,
        corr: u64,
    ) -> io::Result<()> {
        if start == 0 && end == 0 {
            return Ok(());
        }
        self.gpu_row(device, stream);
        self.open_slice(cat, name, device, stream as u64, start, end)?;
        let dur = end.saturating_sub(start).max(1) as f64;
        let corr = wide_id(corr);
        let w = self.stream()?.w();
        write!(
            w,
            "\"External id\":{corr},\"device\":{device},\"context\":{context},\"stream\":{stream},\"correlation\":{corr},\"bytes\":{bytes},\"memory bandwidth (GB/s)\":{}",
            bytes as f64 / dur
        )?;
        self.close_args()?;
        if corr != 0 {
            self.flow(false, corr, device, stream as u64, start)?;
        }
        Ok(())
    }

    fn write_api(&mut self, a: &Api) -> io::Result<()> {
        let cat = match a.domain {
            ApiDomain::Driver | ApiDomain::CuptiDriver => "cuda_driver",
            _ => "cuda_runtime",
        };
        let pid = self.pid;
        self.open_slice(cat, &a.name, pid, a.tid as u64, a.start, a.end)?;
        let w = self.stream()?.w();
        write!(w, "\"External id\":{c},\"cbid\":0,\"correlation\":{c}", c = wide_id(a.correlation))?;
        self.close_args()?;
        if launches_gpu_work(a) {
            self.flow(true, wide_id(a.correlation), pid, a.tid as u64, a.start)?;
        }
        Ok(())
    }

    fn write_collective(&mut self, c: &Collective) -> io::Result<()> {
        let args = CollArgs::from_call(c);
        if c.correlation != 0 && c.op.moves_data() {
            self.calls.insert(c.correlation, args.clone());
        }
        let pid = self.pid;
        self.open_slice("cpu_op", "record_param_comms", pid, c.tid as u64, c.start, c.end)?;
        let w = self.stream()?.w();
        let c_id = wide_id(c.correlation);
        write!(w, "\"External id\":{c_id},\"Global rank start\":0,\"Global rank stride\":1")?;
        if c.correlation != 0 {
            // The NCCL call launched the NCCL kernel (same correlation): HTA keeps GPU kernels
            // only when a CPU event carries their correlation.
            write!(w, ",\"correlation\":{c_id}")?;
        }
        args.write(w)?;
        self.close_args()?;
        if c.correlation != 0 {
            self.flow(true, c_id, pid, c.tid as u64, c.start)?;
        }
        Ok(())
    }

    fn write_range(&mut self, r: &NvtxRange) -> io::Result<()> {
        let cat = if r.kind == RangeKind::CpuOp { "cpu_op" } else { "user_annotation" };
        let is_step = r.depth == 0 && r.kind != RangeKind::CpuOp && self.step_pattern.is_match(&r.name);
        let name: String = if is_step && !r.name.starts_with("ProfilerStep#") {
            let n = r
                .name
                .rsplit(|c: char| !c.is_ascii_digit())
                .next()
                .and_then(|d| d.parse::<u64>().ok())
                .unwrap_or(self.steps_seen);
            self.steps_seen += 1;
            format!("ProfilerStep#{n}")
        } else {
            r.name.to_string()
        };
        let pid = self.pid;
        self.open_slice(cat, &name, pid, r.tid as u64, r.start, r.end)?;
        let w = self.stream()?.w();
        write!(w, "\"External id\":{}", r.id.0)?;
        if name != *r.name {
            w.write_all(b",\"tprof name\":")?;
            write_str(w, &r.name)?;
        }
        self.close_args()
    }

    fn metadata(&mut self, what: &str, pid: u32, tid: u64, key: &str, value: &str) -> io::Result<()> {
        let s = self.stream()?;
        let w = s.meta()?;
        write!(w, "\"name\":\"{what}\",\"ph\":\"M\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"{key}\":")?;
        write_str(w, value)?;
        w.write_all(b"}")?;
        s.end()
    }

    fn close_process(&mut self) -> io::Result<()> {
        let Some(mut s) = self.out.take() else { return Ok(()) };
        let devices: Vec<u32> = self.devices.iter().copied().collect();
        let streams: Vec<(u32, u32)> = self.streams.iter().copied().collect();
        self.out = Some(s);
        for d in &devices {
            self.metadata("process_name", *d, 0, "name", &format!("GPU {d}"))?;
            self.metadata("process_labels", *d, 0, "labels", &format!("GPU {d}"))?;
        }
        for (d, st) in &streams {
            self.metadata("thread_name", *d, *st as u64, "name", &format!("stream {st}"))?;
        }
        s = self.out.take().ok_or_else(|| io::Error::other("no process open"))?;
        self.events += s.events;
        let props: Vec<String> = devices
            .iter()
            .map(|d| {
                format!(
                    "{{\"id\":{d},\"name\":\"GPU {d} (tprof export)\",\"warpSize\":32,\"maxThreadsPerBlock\":1024}}"
                )
            })
            .collect();
        s.close(&format!(",\"deviceProperties\":[{}]", props.join(",")))?;
        self.calls.clear();
        self.names.clear();
        self.devices.clear();
        self.streams.clear();
        Ok(())
    }
}

impl TraceSink for KinetoExporter {
    fn handle_process(&mut self, info: &ProcessInfo) {
        let r = (|| -> io::Result<()> {
            self.close_process()?;
            let path = self.path_for(info);
            let rank = info.rank.unwrap_or(info.id.0);
            let world = info.world_size.unwrap_or(0).max(rank + 1);
            let head = format!(
                "{}}},\"schemaVersion\":1,\"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {rank}, \"world_size\": {world}}},\"baseTimeNanoseconds\":{},\"displayTimeUnit\":\"ms\",\"traceName\":{},",
                crate::input::EXPORT_MARK,
                self.origin,
                serde_json::to_string(&path.display().to_string()).unwrap_or_else(|_| "\"\"".into())
            );
            self.out = Some(EventStream::create(&path, self.origin, &head)?);
            self.files.push(path);
            self.pid = info.pid;
            self.steps_seen = 0;
            let pid = self.pid;
            let label = format!("{} ({})", info.cmdline.split_whitespace().next().unwrap_or("process"), info.host);
            self.metadata("process_name", pid, 0, "name", &label)?;
            self.metadata("process_labels", pid, 0, "labels", "CPU")
        })();
        self.guard(r);
    }

    fn handle_thread_name(&mut self, t: &ThreadName) {
        let pid = self.pid;
        let r = self.metadata("thread_name", pid, t.tid as u64, "name", &t.name);
        self.guard(r);
    }

    fn handle_kernel(&mut self, k: &Kernel) {
        let r = self.write_kernel(k);
        self.guard(r);
    }

    fn handle_memcpy(&mut self, m: &Memcpy) {
        let r = self.write_copy(
            "gpu_memcpy",
            &memcpy_name(m),
            (m.device, m.context, m.stream),
            (m.start, m.end),
            m.bytes,
            m.correlation,
        );
        self.guard(r);
    }

    fn handle_memset(&mut self, m: &Memset) {
        let r = self.write_copy(
            "gpu_memset",
            &memset_name(m),
            (m.device, m.context, m.stream),
            (m.start, m.end),
            m.bytes,
            m.correlation,
        );
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

    fn handle_counter(&mut self, c: &CounterSample) {
        let pid = self.pid;
        let res = (|| -> io::Result<()> {
            let s = self.stream()?;
            let w = s.event()?;
            w.write_all(b"\"ph\":\"C\",\"name\":")?;
            write_str(w, &c.name)?;
            write!(w, ",\"pid\":{pid},\"tid\":0,")?;
            s.ts(c.ts)?;
            let v = if c.value.is_finite() { c.value } else { 0.0 };
            write!(s.w(), ",\"args\":{{\"value\":{v}}}")?;
            s.end()
        })();
        self.guard(res);
    }

    fn handle_process_end(&mut self, _p: ProcId) {
        let r = self.close_process();
        self.guard(r);
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        let r = self.close_process();
        self.guard(r);
        if let Some(e) = self.error.take() {
            return Err(e.into());
        }
        Ok(())
    }
}

impl Exporter for KinetoExporter {
    fn written(&self) -> Written {
        Written { files: self.files.clone(), events: self.events }
    }
}
