//! Parquet: one table per record kind in the output directory (`kernels.parquet`, `api.parquet`,
//! `memcpy.parquet`, `memset.parquet`, `collectives.parquet`, `nvtx.parquet`, `steps.parquet`,
//! `counters.parquet`, `sync.parquet`, `memory.parquet`), each row with `rank` (null when unknown),
//! `host` and `pid`, times as `*_ns` INT64 on the global timebase. Many ranks' directories can be
//! queried together by DuckDB / Spark / pyarrow (`SELECT ... FROM 'run/*/kernels.parquet'`).
//! Rows are written in row groups as they arrive; steps are written when their process ends.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};

use parquet::data_type::ByteArray;
use parquet::errors::ParquetError;
use regex_lite::Regex;

use super::columns::{ColType, ColType::*, Row, Table};
use super::display_names::DisplayNames;
use super::{Exporter, Written};
use crate::model::*;
use crate::steps::StepFinder;

/// Columns every table starts with.
const IDENTITY: [(&str, ColType); 3] = [("rank", OptI32), ("host", Str), ("pid", I64)];

/// A table's columns: (name, type) in order.
type Schema = Vec<(&'static str, ColType)>;

fn schema(cols: &[(&'static str, ColType)]) -> Schema {
    IDENTITY.iter().chain(cols).copied().collect()
}

fn kernels() -> Schema {
    schema(&[
        ("device", I32),
        ("context", I32),
        ("stream", I64),
        ("start_ns", I64),
        ("end_ns", I64),
        ("dur_ns", I64),
        ("name", Str),
        ("demangled", Str),
        ("work", Str),
        ("grid_x", I32),
        ("grid_y", I32),
        ("grid_z", I32),
        ("block_x", I32),
        ("block_y", I32),
        ("block_z", I32),
        ("registers", I32),
        ("shared_mem", I32),
        ("correlation", I64),
        ("graph_id", I64),
    ])
}

fn api() -> Schema {
    schema(&[
        ("tid", I64),
        ("domain", Str),
        ("name", Str),
        ("start_ns", I64),
        ("end_ns", I64),
        ("dur_ns", I64),
        ("result", I32),
        ("correlation", I64),
        ("kernel", Str),
        ("stream", I64),
        ("arg", I64),
        ("range_id", I64),
    ])
}

fn memcpy() -> Schema {
    schema(&[
        ("device", I32),
        ("context", I32),
        ("stream", I64),
        ("start_ns", I64),
        ("end_ns", I64),
        ("dur_ns", I64),
        ("bytes", I64),
        ("kind", Str),
        ("src_kind", Str),
        ("dst_kind", Str),
        ("correlation", I64),
    ])
}

fn memset() -> Schema {
    schema(&[
        ("device", I32),
        ("context", I32),
        ("stream", I64),
        ("start_ns", I64),
        ("end_ns", I64),
        ("dur_ns", I64),
        ("bytes", I64),
        ("value", I64),
        ("dst_kind", Str),
        ("correlation", I64),
    ])
}

fn collectives() -> Schema {
    schema(&[
        ("tid", I64),
        ("op", Str),
        ("start_ns", I64),
        ("end_ns", I64),
        ("dur_ns", I64),
        ("comm", I64),
        ("comm_rank", I32),
        ("nranks", I32),
        ("count", I64),
        ("datatype", I32),
        ("bytes", I64),
        ("peer", I32),
        ("stream", I64),
        ("seq", I64),
        ("result", I32),
        ("correlation", I64),
        ("device", I32),
    ])
}

fn nvtx() -> Schema {
    schema(&[
        ("tid", I64),
        ("id", I64),
        ("parent_id", I64),
        ("depth", I32),
        ("kind", Str),
        ("domain", Str),
        ("name", Str),
        ("start_ns", I64),
        ("end_ns", I64),
        ("dur_ns", I64),
    ])
}

fn steps() -> Schema {
    schema(&[("step", I64), ("name", Str), ("source", Str), ("start_ns", I64), ("end_ns", I64), ("dur_ns", I64)])
}

fn counters() -> Schema {
    schema(&[("name", Str), ("device", OptI32), ("ts_ns", I64), ("value", F64)])
}

fn sync() -> Schema {
    schema(&[
        ("kind", Str),
        ("tid", I64),
        ("context", I32),
        ("stream", I64),
        ("event", I64),
        ("start_ns", I64),
        ("end_ns", I64),
        ("dur_ns", I64),
        ("correlation", I64),
        ("result", I32),
    ])
}

fn memory() -> Schema {
    schema(&[
        ("op", Str),
        ("space", Str),
        ("device", I32),
        ("address", I64),
        ("bytes", I64),
        ("reserved", I64),
        ("ts_ns", I64),
        ("result", I32),
        ("correlation", I64),
        ("tid", I64),
    ])
}

/// The tables, by file stem.
/// Makes a table's schema.
type SchemaFn = fn() -> Schema;

const TABLES: [(&str, SchemaFn); 10] = [
    ("kernels", kernels),
    ("api", api),
    ("memcpy", memcpy),
    ("memset", memset),
    ("collectives", collectives),
    ("nvtx", nvtx),
    ("steps", steps),
    ("counters", counters),
    ("sync", sync),
    ("memory", memory),
];

const T_KERNELS: usize = 0;
const T_API: usize = 1;
const T_MEMCPY: usize = 2;
const T_MEMSET: usize = 3;
const T_COLLECTIVES: usize = 4;
const T_NVTX: usize = 5;
const T_STEPS: usize = 6;
const T_COUNTERS: usize = 7;
const T_SYNC: usize = 8;
const T_MEMORY: usize = 9;

fn bytes_of(s: &str) -> ByteArray {
    ByteArray::from(s.as_bytes().to_vec())
}

pub struct ParquetExporter {
    dir: PathBuf,
    tables: Vec<Table>,
    error: Option<ParquetError>,
    /// Name -> its bytes (cheap to clone), per process.
    strings: HashMap<Name, ByteArray>,
    display: DisplayNames,
    rank: Option<i32>,
    host: ByteArray,
    pid: i64,
    step_pattern: Regex,
    finder: Option<StepFinder>,
    span: Option<(Ns, Ns)>,
}

impl ParquetExporter {
    pub fn create(dir: &Path, step_pattern: &Regex) -> io::Result<ParquetExporter> {
        crate::output::create_dir(dir)?;
        let mut tables = Vec::new();
        for (stem, cols) in TABLES {
            let t = Table::create(&dir.join(format!("{stem}.parquet")), stem, &cols()).map_err(io::Error::other)?;
            tables.push(t);
        }
        Ok(ParquetExporter {
            dir: dir.to_path_buf(),
            tables,
            error: None,
            strings: HashMap::new(),
            display: DisplayNames::default(),
            rank: None,
            host: bytes_of(""),
            pid: 0,
            step_pattern: step_pattern.clone(),
            finder: None,
            span: None,
        })
    }

    fn s(&mut self, n: &Name) -> ByteArray {
        if let Some(b) = self.strings.get(n) {
            return b.clone();
        }
        let b = bytes_of(n);
        self.strings.insert(n.clone(), b.clone());
        b
    }

    fn see(&mut self, start: Ns, end: Ns) {
        if start == 0 && end == 0 {
            return;
        }
        self.span = Some(match self.span {
            None => (start, end.max(start)),
            Some((a, b)) => (a.min(start), b.max(end)),
        });
    }

    /// Append a row to table `t` after the identity columns.
    fn row(&mut self, t: usize, f: impl FnOnce(&mut Row)) {
        let (rank, host, pid) = (self.rank, self.host.clone(), self.pid);
        let r = self.tables[t].row(|r| {
            r.opt_i32(rank).str(host).i64(pid);
            f(r);
        });
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
    }
}

fn span(r: &mut Row, start: Ns, end: Ns) {
    r.u64(start).u64(end).u64(end.saturating_sub(start));
}

impl TraceSink for ParquetExporter {
    fn handle_process(&mut self, info: &ProcessInfo) {
        self.rank = info.rank.map(|r| r as i32);
        self.host = bytes_of(&info.host);
        self.pid = info.pid as i64;
        self.finder = Some(StepFinder::new(&self.step_pattern));
        self.span = None;
    }

    fn handle_kernel(&mut self, k: &Kernel) {
        self.see(k.start, k.end);
        if let Some(f) = &mut self.finder {
            f.kernel(k);
        }
        let name = self.s(&k.name);
        let d = self.display.get(&k.name);
        let demangled = self.s(&d);
        let work = bytes_of(match k.work_kind() {
            GpuWorkKind::Communication => "communication",
            GpuWorkKind::Memory => "memory",
            GpuWorkKind::Compute => "compute",
        });
        self.row(T_KERNELS, |r| {
            r.u32(k.device).u32(k.context).u64(k.stream as u64);
            span(r, k.start, k.end);
            r.str(name).str(demangled).str(work);
            for v in k.grid.iter().chain(&k.block) {
                r.u32(*v);
            }
            r.i32(k.registers as i32).u32(k.shared_mem).u64(k.correlation).u64(k.graph_id as u64);
        });
    }

    fn handle_api(&mut self, a: &Api) {
        self.see(a.start, a.end);
        let name = self.s(&a.name);
        let kernel = match &a.detail {
            Some(d) => {
                let d = self.display.get(d);
                self.s(&d)
            }
            None => bytes_of(""),
        };
        self.row(T_API, |r| {
            r.i64(a.tid as i64).str(bytes_of(a.domain.name())).str(name);
            span(r, a.start, a.end);
            r.i32(a.result).u64(a.correlation).str(kernel).u64(a.stream).u64(a.arg);
            r.i64(a.range.map_or(-1, |x| x.0 as i64));
        });
    }

    fn handle_memcpy(&mut self, m: &Memcpy) {
        self.see(m.start, m.end);
        self.row(T_MEMCPY, |r| {
            r.u32(m.device).u32(m.context).u64(m.stream as u64);
            span(r, m.start, m.end);
            r.u64(m.bytes).str(bytes_of(m.kind.name())).str(bytes_of(m.src_kind.name()));
            r.str(bytes_of(m.dst_kind.name())).u64(m.correlation);
        });
    }

    fn handle_memset(&mut self, m: &Memset) {
        self.see(m.start, m.end);
        self.row(T_MEMSET, |r| {
            r.u32(m.device).u32(m.context).u64(m.stream as u64);
            span(r, m.start, m.end);
            r.u64(m.bytes).u64(m.value as u64).str(bytes_of(m.dst_kind.name())).u64(m.correlation);
        });
    }

    fn handle_collective(&mut self, c: &Collective) {
        self.see(c.start, c.end);
        self.row(T_COLLECTIVES, |r| {
            r.i64(c.tid as i64).str(bytes_of(c.op.name()));
            span(r, c.start, c.end);
            r.u64(c.comm).u32(c.rank).u32(c.nranks).u64(c.count).i32(c.datatype as i32).u64(c.bytes).i32(c.peer);
            r.u64(c.stream).u64(c.seq).i32(c.result).u64(c.correlation).u32(c.device);
        });
    }

    fn handle_nvtx_range(&mut self, n: &NvtxRange) {
        self.see(n.start, n.end);
        if let Some(f) = &mut self.finder {
            f.range(n);
        }
        let name = self.s(&n.name);
        let domain = match &n.domain {
            Some(d) => self.s(d),
            None => bytes_of(""),
        };
        let kind = match n.kind {
            RangeKind::Nvtx => "nvtx",
            RangeKind::NvtxStartEnd => "nvtx_start_end",
            RangeKind::Annotation => "annotation",
            RangeKind::CpuOp => "cpu_op",
        };
        self.row(T_NVTX, |r| {
            r.i64(n.tid as i64).u64(n.id.0).i64(n.parent.map_or(-1, |p| p.0 as i64)).u32(n.depth);
            r.str(bytes_of(kind)).str(domain).str(name);
            span(r, n.start, n.end);
        });
    }

    fn handle_counter(&mut self, c: &CounterSample) {
        self.see(c.ts, c.ts);
        let name = self.s(&c.name);
        self.row(T_COUNTERS, |r| {
            r.str(name).opt_i32(c.device.map(|d| d as i32)).u64(c.ts).f64(c.value);
        });
    }

    fn handle_sync(&mut self, s: &SyncEvent) {
        self.see(s.start, s.end);
        self.row(T_SYNC, |r| {
            r.str(bytes_of(s.kind.name())).i64(s.tid as i64).u32(s.context).u64(s.stream as u64).u64(s.event);
            span(r, s.start, s.end);
            r.u64(s.correlation).i32(s.result);
        });
    }

    fn handle_memory(&mut self, m: &MemoryEvent) {
        self.see(m.ts, m.ts);
        self.row(T_MEMORY, |r| {
            r.str(bytes_of(m.op.name())).str(bytes_of(m.space.name())).u32(m.device);
            r.u64(m.address).u64(m.bytes).u64(m.reserved).u64(m.ts).i32(m.result).u64(m.correlation).i64(m.tid as i64);
        });
    }

    fn handle_marker(&mut self, m: &Marker) {
        self.see(m.ts, m.ts);
        if let Some(f) = &mut self.finder {
            f.marker(m);
        }
    }

    fn handle_process_end(&mut self, _p: ProcId) {
        if let Some(f) = self.finder.take() {
            let (source, windows) = f.finish(self.span.unwrap_or((0, 0)));
            let source = format!("{source:?}").to_lowercase();
            for w in windows {
                let name = bytes_of(&w.name);
                let src = bytes_of(&source);
                self.row(T_STEPS, |r| {
                    r.u64(w.index).str(name).str(src);
                    span(r, w.start, w.end);
                });
            }
        }
        self.strings.clear();
        self.display.clear();
    }

    fn finish(&mut self) -> Result<(), SinkError> {
        if let Some(e) = self.error.take() {
            return Err(SinkError::Other(e.to_string()));
        }
        for t in &mut self.tables {
            t.close().map_err(|e| SinkError::Other(format!("{}: {e}", t.path.display())))?;
        }
        Ok(())
    }
}

impl Exporter for ParquetExporter {
    fn written(&self) -> Written {
        Written {
            files: self.tables.iter().map(|t| t.path.clone()).collect(),
            events: self.tables.iter().map(|t| t.rows).sum(),
        }
    }
}

impl ParquetExporter {
    /// The output directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
