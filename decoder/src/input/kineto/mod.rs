//! Import a PyTorch-profiler / Kineto JSON trace (`.json` or `.json.gz`) into the model, streaming:
//! the text is parsed as it is read (a `.json.gz` gunzipped on another thread), each event is
//! converted when parsed and nothing of the document is held, so memory does not grow with the
//! trace (only with distinct names, threads, communicators and NCCL kernels); the sorting that
//! delivery in time order needs spills to temporary files past a fixed budget.
//!
//! Mapping: `kernel` -> [`Kernel`] (NCCL metadata such as "Collective name" -> `Kernel::collective`),
//! `gpu_memcpy` / `gpu_memset` -> [`Memcpy`] / [`Memset`], `cuda_runtime` / `cuda_driver` -> [`Api`],
//! `user_annotation` / `cpu_op` -> [`NvtxRange`] (kinds `Annotation` / `CpuOp`, nested per thread
//! by containment), `record_param_comms` with a collective name -> [`Collective`] (linked to its
//! kernel through the shared "External id"), `ph:"C"` -> counters, `thread_name` metadata ->
//! [`ThreadName`]. Times are microseconds in the file, nanoseconds in the model.
//!
//! Damage (see [`document`]): a damaged event is skipped and counted, the rest kept; the notes name
//! the first damaged places by byte offset in the JSON text.
//!
//! Files: `source` (bytes in), `json` (tokens), `event` (one event's fields), `document` (the
//! document and salvage), `convert` (events -> records -> sink), `records` + `spill` (the sorts).

mod convert;
mod document;
mod event;
mod json;
mod records;
#[cfg(test)]
mod salvage_tests;
mod scan;
mod source;
mod spill;
mod words;

use std::path::Path;

use serde_json::Value;

use super::Notes;
use crate::error::InputError;
use crate::model::*;
use event::{NumArg, RawEvent};

fn us_to_ns(us: f64) -> Ns {
    if us.is_finite() && us > 0.0 {
        (us * 1000.0).round() as u64
    } else {
        0
    }
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
    let name = e.collective_name.as_deref()?;
    let op = coll_op_from_name(name);
    if op == CollOp::Unknown {
        return None;
    }
    let elem = dtype_bytes(e.dtype.as_deref().unwrap_or("float"));
    let nelems = e.arg_or0(NumArg::InNelems).max(e.arg_or0(NumArg::OutNelems));
    let nranks = e.arg_or0(NumArg::GroupSize) as u32;
    let pg = e.process_group.clone().unwrap_or_default();
    Some((op, nelems.wrapping_mul(elem), nranks, pg))
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

/// Decode one Kineto trace into `sink` as process `id`. Returns the process info it announced.
pub fn feed(path: &Path, id: ProcId, sink: &mut dyn TraceSink, notes: &mut Notes) -> Result<ProcessInfo, InputError> {
    let mut win = source::Window::open(path)?;
    let mut conv = convert::KinetoConverter::new();
    let walked = document::walk(path, &mut win, &mut |e, index, bytes| conv.on_event(e, index, bytes))?;
    let gz = win.gzipped;
    let place = |offset: u64| {
        if gz {
            format!("offset {offset} of the gunzipped JSON")
        } else {
            format!("offset {offset}")
        }
    };
    if let Some(e) = &win.gzip_error {
        if win.bytes_seen() == 0 {
            return Err(InputError::BadJson { path: path.to_path_buf(), message: format!("gzip: {e}") });
        }
        notes.add(Some(path), format!("gzip stream damaged ({e}); using the {} bytes before it", win.bytes_seen()));
    }
    let damaged = walked.skipped > 0 || walked.truncated_at.is_some() || walked.stopped.is_some();
    if conv.events == 0 && damaged {
        let (offset, what) = match (&walked.stopped, walked.damage.first(), walked.truncated_at) {
            (Some(d), _, _) | (None, Some(d), _) => (d.offset, d.what.clone()),
            (None, None, Some(at)) => (at, "the JSON ends early".to_string()),
            _ => (0, String::new()),
        };
        return Err(InputError::BadJson { path: path.to_path_buf(), message: format!("{what} at {}", place(offset)) });
    }
    if conv.events == 0 {
        notes.add(Some(path), "trace has no events");
    }
    damage_notes(path, &walked, conv.events, &place, notes);
    let di = walked.distributed_info.as_ref();
    let get = |k: &str| di.and_then(|d| d.get(k)).and_then(Value::as_u64).map(|v| v as u32);
    let rank = get("rank");
    let info = ProcessInfo {
        id,
        origin: Origin::Kineto,
        path: path.to_path_buf(),
        host: Name::from("unknown"),
        pid: conv.ident.pid,
        ppid: 0,
        cmdline: conv.ident.process_name(),
        rank,
        local_rank: None,
        world_size: get("world_size"),
        job_id: None,
        clock_offset_ns: 0,
        gpu_activity: conv.ident.gpu_activity,
        dropped_events: 0,
    };
    sink.handle_process(&info);
    conv.finish(path, id, rank, sink, notes)?;
    Ok(info)
}

/// Notes on what was skipped: the first damaged places one by one, then the count.
fn damage_notes(path: &Path, w: &document::Walked, used: usize, place: &dyn Fn(u64) -> String, notes: &mut Notes) {
    for d in &w.damage {
        notes.add(Some(path), format!("damage at {}: {}; skipped", place(d.offset), d.what));
    }
    if w.skipped > w.damage.len() {
        notes.add(Some(path), format!("... {} damaged events skipped in all", w.skipped));
    }
    if w.repaired > 0 {
        let first = place(w.first_repaired.unwrap_or(0));
        notes.add(
            Some(path),
            format!(
                "{} events with a time or duration written as a string, read as a number (the first at {first})",
                w.repaired
            ),
        );
    }
    if let Some(d) = &w.stopped {
        notes.add(
            Some(path),
            format!(
                "damage at {}: {}; the document after it is not used ({used} events used)",
                place(d.offset),
                d.what
            ),
        );
    } else if let Some(at) = w.truncated_at {
        notes.add(
            Some(path),
            format!("the JSON ends early at {} (truncated?); the {used} events before it are used", place(at)),
        );
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
        assert!(notes.0[0].message.contains("the JSON ends early at offset 153"), "{:?}", notes);
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
