//! Chrome trace-event JSON (`traceEvents`), as chrome://tracing and ui.perfetto.dev open it.
//!
//! One `pid` per process (rank), named by `M` metadata ("rank 3 · host7 · pid 1234"); `tid` per host
//! thread (API calls, NCCL calls, NVTX ranges) and per GPU stream (kernels, copies, memsets; tids
//! from [`stream_tid`], named "GPU 0 stream 7"). Slices are `ph:X`; NVTX start/end ranges (which need
//! not nest) are async `b`/`e` pairs; launches link to their GPU work with flow events `s` -> `f`;
//! counters and memory reservations are `C` events. Written as events arrive; times are
//! microseconds (with nanosecond digits) relative to the export origin, kept in
//! `otherData.tprof_origin_ns`.

use std::collections::HashSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::display_names::{
    flow_id, launches_gpu_work, memcpy_name, memset_name, process_label, stream_label, DisplayNames,
};
use super::json::{write_str, write_u64, EventStream};
use super::{Exporter, Written};
use crate::model::*;

/// The JSON `tid` of a GPU stream: far above OS thread ids so the two never collide.
pub fn stream_tid(device: u32, stream: u32) -> u64 {
    1_000_000_000 + (device as u64 % 200) * 10_000_000 + stream as u64 % 10_000_000
}

/// The JSON `pid` of a process: its index in the decode, from 1.
pub fn json_pid(p: ProcId) -> u64 {
    p.0 as u64 + 1
}

pub struct ChromeExporter {
    out: Option<EventStream>,
    path: PathBuf,
    error: Option<io::Error>,
    names: DisplayNames,
    pid: u64,
    /// Streams already named in this process.
    streams: HashSet<(u32, u32)>,
    /// GPU records without GPU times (CUPTI off): not on the timeline.
    skipped_no_gpu_time: u64,
    events: u64,
}

impl ChromeExporter {
    pub fn create(path: &Path, origin: Ns) -> io::Result<ChromeExporter> {
        // The producer mark first: a directory search knows the file for tprof's own (`EXPORT_MARK`).
        let mark = crate::input::EXPORT_MARK;
        let head = format!("{mark},\"tprof_origin_ns\":{origin}}},\"displayTimeUnit\":\"ns\",");
        let out = EventStream::create(path, origin, &head)?;
        Ok(ChromeExporter {
            out: Some(out),
            path: path.to_path_buf(),
            error: None,
            names: DisplayNames::default(),
            pid: 0,
            streams: HashSet::new(),
            skipped_no_gpu_time: 0,
            events: 0,
        })
    }

    fn guard(&mut self, r: io::Result<()>) {
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
    }

    fn stream(&mut self) -> io::Result<&mut EventStream> {
        self.out.as_mut().ok_or_else(|| io::Error::other("export already finished"))
    }

    /// Metadata naming a thread-like row.
    fn thread_meta(&mut self, tid: u64, name: &str, sort: Option<u64>) -> io::Result<()> {
        let pid = self.pid;
        let s = self.stream()?;
        let w = s.meta()?;
        write!(w, "\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"name\":")?;
        write_str(w, name)?;
        w.write_all(b"}")?;
        s.end()?;
        if let Some(sort) = sort {
            let w = s.meta()?;
            write!(
                w,
                "\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":{pid},\"tid\":{tid},\"args\":{{\"sort_index\":{sort}}}"
            )?;
            s.end()?;
        }
        Ok(())
    }

    /// The tid of a stream, naming it the first time it appears.
    fn stream_row(&mut self, device: u32, stream: u32) -> io::Result<u64> {
        let tid = stream_tid(device, stream);
        if self.streams.insert((device, stream)) {
            self.thread_meta(tid, &stream_label(device, stream), Some(tid))?;
        }
        Ok(tid)
    }

    /// A complete slice with its args (already JSON members, without braces; may be empty).
    fn slice(&mut self, cat: &str, name: &str, tid: u64, start: Ns, end: Ns, args: &str) -> io::Result<()> {
        let pid = self.pid;
        let s = self.stream()?;
        let w = s.event()?;
        // Pieces written directly: no fmt machinery per event.
        w.write_all(b"\"ph\":\"X\",\"cat\":\"")?;
        w.write_all(cat.as_bytes())?;
        w.write_all(b"\",\"name\":")?;
        write_str(w, name)?;
        w.write_all(b",\"pid\":")?;
        write_u64(w, pid)?;
        w.write_all(b",\"tid\":")?;
        write_u64(w, tid)?;
        w.write_all(b",")?;
        s.ts_dur(start, end)?;
        if !args.is_empty() {
            let w = s.w();
            w.write_all(b",\"args\":{")?;
            w.write_all(args.as_bytes())?;
            w.write_all(b"}")?;
        }
        s.end()
    }

    /// Flow event: `s` at the launch, `f` (bound to the enclosing slice) at the GPU work.
    fn flow(&mut self, start: bool, id: u64, tid: u64, ts: Ns) -> io::Result<()> {
        let pid = self.pid;
        let s = self.stream()?;
        let w = s.meta()?;
        let ph = if start { "\"ph\":\"s\"" } else { "\"ph\":\"f\",\"bp\":\"e\"" };
        w.write_all(ph.as_bytes())?;
        w.write_all(b",\"cat\":\"launch\",\"name\":\"launch\",\"id\":")?;
        write_u64(w, id)?;
        w.write_all(b",\"pid\":")?;
        write_u64(w, pid)?;
        w.write_all(b",\"tid\":")?;
        write_u64(w, tid)?;
        w.write_all(b",")?;
        s.ts(ts)?;
        s.end()
    }

    fn counter(&mut self, name: &str, ts: Ns, value: f64) -> io::Result<()> {
        let pid = self.pid;
        let s = self.stream()?;
        let w = s.event()?;
        w.write_all(b"\"ph\":\"C\",\"name\":")?;
        write_str(w, name)?;
        write!(w, ",\"pid\":{pid},")?;
        s.ts(ts)?;
        let v = if value.is_finite() { value } else { 0.0 };
        write!(s.w(), ",\"args\":{{\"value\":{v}}}")?;
        s.end()
    }

    #[allow(clippy::too_many_arguments)]
    fn gpu_work(
        &mut self,
        cat: &str,
        name: &str,
        proc: ProcId,
        dev_stream: (u32, u32),
        span: (Ns, Ns),
        corr: u64,
        args: &str,
    ) -> io::Result<()> {
        let tid = self.stream_row(dev_stream.0, dev_stream.1)?;
        self.slice(cat, name, tid, span.0, span.1, args)?;
        if corr != 0 {
            self.flow(false, flow_id(proc, corr), tid, span.0)?;
        }
        Ok(())
    }

    /// A copy or a memset: one slice on its stream's row (`at`: device, stream, start, end) with
    /// its bytes, unless it carries no GPU time.
    fn transfer(&mut self, cat: &str, name: &str, proc: ProcId, at: (u32, u32, Ns, Ns), corr: u64, bytes: u64) {
        let (device, stream, start, end) = at;
        if start == 0 && end == 0 {
            self.skipped_no_gpu_time += 1;
            return;
        }
        let args = format!("\"correlation\":{corr},\"bytes\":{bytes},\"device\":{device},\"stream\":{stream}");
        let r = self.gpu_work(cat, name, proc, (device, stream), (start, end), corr, &args);
        self.guard(r);
    }

    fn write_kernel(&mut self, k: &Kernel) -> io::Result<()> {
        if k.start == 0 && k.end == 0 {
            self.skipped_no_gpu_time += 1;
            return Ok(());
        }
        let name = self.names.get(&k.name);
        let g = k.grid;
        let b = k.block;
        let mut args = format!(
            "\"correlation\":{},\"device\":{},\"stream\":{},\"grid\":[{},{},{}],\"block\":[{},{},{}]",
            k.correlation, k.device, k.stream, g[0], g[1], g[2], b[0], b[1], b[2]
        );
        if let Some(c) = &k.collective {
            args.push_str(&format!(
                ",\"collective\":\"{}\",\"bytes\":{},\"nranks\":{}",
                c.op.name(),
                c.bytes,
                c.nranks
            ));
        }
        self.gpu_work("kernel", &name, k.proc, (k.device, k.stream), (k.start, k.end), k.correlation, &args)
    }

    fn write_api(&mut self, a: &Api) -> io::Result<()> {
        let cat = match a.domain {
            ApiDomain::Driver | ApiDomain::CuptiDriver => "cuda_driver",
            ApiDomain::Nccl => "nccl",
            _ => "cuda_runtime",
        };
        let mut args = format!("\"correlation\":{}", a.correlation);
        if a.result != 0 {
            args.push_str(&format!(",\"result\":{}", a.result));
        }
        if let Some(d) = &a.detail {
            let d = self.names.get(d);
            let mut v = Vec::new();
            write_str(&mut v, &d)?;
            args.push_str(",\"kernel\":");
            args.push_str(&String::from_utf8_lossy(&v));
        }
        self.slice(cat, &a.name, a.tid as u64, a.start, a.end, &args)?;
        if launches_gpu_work(a) {
            self.flow(true, flow_id(a.proc, a.correlation), a.tid as u64, a.start)?;
        }
        Ok(())
    }
}

impl TraceSink for ChromeExporter {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.pid = json_pid(info.id);
        self.streams.clear();
        let pid = self.pid;
        let label = process_label(info);
        let sort = info.rank.map(|r| r as u64).unwrap_or(1_000_000 + info.id.0 as u64);
        let r = (|| -> io::Result<()> {
            let s = self.stream()?;
            let w = s.meta()?;
            write!(w, "\"ph\":\"M\",\"name\":\"process_name\",\"pid\":{pid},\"tid\":0,\"args\":{{\"name\":")?;
            write_str(w, &label)?;
            w.write_all(b"}")?;
            s.end()?;
            let w = s.meta()?;
            write!(w, "\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":{pid},\"tid\":0,\"args\":{{\"sort_index\":{sort}}}")?;
            s.end()?;
            let w = s.meta()?;
            write!(w, "\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":{pid},\"tid\":0,\"args\":{{\"labels\":")?;
            write_str(w, &format!("host {}", info.host))?;
            w.write_all(b"}")?;
            s.end()
        })();
        self.guard(r);
    }

    fn handle_thread_name(&mut self, t: &ThreadName) {
        let r = self.thread_meta(t.tid as u64, &t.name, None);
        self.guard(r);
    }

    fn handle_kernel(&mut self, k: &Kernel) {
        let r = self.write_kernel(k);
        self.guard(r);
    }

    fn handle_memcpy(&mut self, m: &Memcpy) {
        let at = (m.device, m.stream, m.start, m.end);
        self.transfer("gpu_memcpy", &memcpy_name(m), m.proc, at, m.correlation, m.bytes);
    }

    fn handle_memset(&mut self, m: &Memset) {
        let at = (m.device, m.stream, m.start, m.end);
        self.transfer("gpu_memset", &memset_name(m), m.proc, at, m.correlation, m.bytes);
    }

    fn handle_api(&mut self, a: &Api) {
        let r = self.write_api(a);
        self.guard(r);
    }

    fn handle_collective(&mut self, c: &Collective) {
        let name = format!("nccl{}", c.op.name());
        let args = format!(
            "\"op\":\"{}\",\"bytes\":{},\"nranks\":{},\"rank\":{},\"comm\":\"{:#x}\",\"seq\":{},\"peer\":{},\"correlation\":{}",
            c.op.name(),
            c.bytes,
            c.nranks,
            c.rank,
            c.comm,
            c.seq,
            c.peer,
            c.correlation
        );
        let mut r = self.slice("nccl", &name, c.tid as u64, c.start, c.end, &args);
        if r.is_ok() && c.correlation != 0 {
            r = self.flow(true, flow_id(c.proc, c.correlation), c.tid as u64, c.start);
        }
        self.guard(r);
    }

    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        let res = (|| -> io::Result<()> {
            match r.kind {
                RangeKind::NvtxStartEnd => {
                    // Async pair: start/end ranges may overlap without nesting.
                    let pid = self.pid;
                    let id = r.id.0;
                    for (ph, t) in [("b", r.start), ("e", r.end)] {
                        let s = self.stream()?;
                        let w = if ph == "b" { s.event()? } else { s.meta()? };
                        write!(w, "\"ph\":\"{ph}\",\"cat\":\"nvtx\",\"name\":")?;
                        write_str(w, &r.name)?;
                        write!(w, ",\"id\":{id},\"pid\":{pid},\"tid\":{},", r.tid)?;
                        s.ts(t)?;
                        s.end()?;
                    }
                    Ok(())
                }
                kind => {
                    let cat = match kind {
                        RangeKind::CpuOp => "cpu_op",
                        RangeKind::Annotation => "user_annotation",
                        _ => "nvtx",
                    };
                    let args = match &r.domain {
                        Some(d) => {
                            let mut v = b"\"domain\":".to_vec();
                            write_str(&mut v, d)?;
                            String::from_utf8_lossy(&v).into_owned()
                        }
                        None => String::new(),
                    };
                    self.slice(cat, &r.name, r.tid as u64, r.start, r.end, &args)
                }
            }
        })();
        self.guard(res);
    }

    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        let pid = self.pid;
        let res = (|| -> io::Result<()> {
            let s = self.stream()?;
            let w = s.event()?;
            w.write_all(b"\"ph\":\"i\",\"s\":\"t\",\"cat\":\"nvtx\",\"name\":")?;
            write_str(w, &m.name)?;
            write!(w, ",\"pid\":{pid},\"tid\":{},", m.tid)?;
            s.ts(m.ts)?;
            s.end()
        })();
        self.guard(res);
    }

    fn handle_counter(&mut self, c: &CounterSample) {
        let name = match c.device {
            Some(d) => format!("{} (GPU {d})", c.name),
            None => c.name.to_string(),
        };
        let r = self.counter(&name, c.ts, c.value);
        self.guard(r);
    }

    fn handle_memory(&mut self, m: &MemoryEvent) {
        let name = match m.space {
            MemSpace::Device => format!("GPU {} memory reserved (bytes)", m.device),
            other => format!("{} memory reserved (bytes)", other.name()),
        };
        let r = self.counter(&name, m.ts, m.reserved as f64);
        self.guard(r);
    }

    fn handle_marker(&mut self, m: &Marker) {
        let pid = self.pid;
        let name = match &m.name {
            Some(n) => format!("{}: {n}", m.kind.name()),
            None => format!("{} {}", m.kind.name(), m.value),
        };
        let res = (|| -> io::Result<()> {
            let s = self.stream()?;
            let w = s.event()?;
            w.write_all(b"\"ph\":\"i\",\"s\":\"p\",\"cat\":\"marker\",\"name\":")?;
            write_str(w, &name)?;
            write!(w, ",\"pid\":{pid},\"tid\":0,")?;
            s.ts(m.ts)?;
            s.end()
        })();
        self.guard(res);
    }

    fn handle_process_end(&mut self, _p: ProcId) {
        self.names.clear();
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        if let Some(e) = self.error.take() {
            return Err(e.into());
        }
        if let Some(out) = self.out.take() {
            self.events = out.events;
            let tail = format!(",\"tprofSkippedWithoutGpuTime\":{}", self.skipped_no_gpu_time);
            out.close(&tail)?;
        }
        Ok(())
    }
}

impl Exporter for ChromeExporter {
    fn written(&self) -> Written {
        Written { files: vec![self.path.clone()], events: self.events }
    }
}
