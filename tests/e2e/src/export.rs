//! Helpers for the export consumer tests: the `tprof` CLI, the repository's Python (`.venv`), and
//! the external consumers (Perfetto's Python package, Holistic Trace Analysis, DuckDB) run on
//! exported files. A missing artifact or package fails with a message naming it.
//!
//! `TPROF_BIN` (default `$CARGO_TARGET_DIR or target`/release/tprof), `TPROF_KINETO_DATA`
//! (default `../shared/data/kineto`), `TPROF_TRACE_PROCESSOR_SHELL` (optional: a
//! `trace_processor_shell` binary; the Perfetto package downloads one on first use, which fails
//! offline, so without it the Perfetto trace is parsed with the package's official protobuf schema).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::programs::repo_root;

/// The `tprof` CLI.
pub fn tprof_bin() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| repo_root().join("target"));
    let p = std::env::var_os("TPROF_BIN").map(PathBuf::from).unwrap_or_else(|| target.join("release/tprof"));
    assert!(
        p.exists(),
        "the tprof CLI not found at {} (cargo build --release -p tprof-decoder, or set TPROF_BIN)",
        p.display()
    );
    p
}

/// The real Kineto traces (shared data).
pub fn kineto_dir() -> PathBuf {
    let d = std::env::var_os("TPROF_KINETO_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/data/kineto"));
    assert!(d.is_dir(), "real Kineto traces not found at {} (set TPROF_KINETO_DATA)", d.display());
    d
}

/// `.venv/bin/python`, checked to import `module` (from PyPI package `package`).
pub fn python_with(module: &str, package: &str) -> PathBuf {
    let py = repo_root().join(".venv/bin/python");
    assert!(py.exists(), "{} missing: run `bash scripts/setup-python.sh`", py.display());
    let ok = Command::new(&py).args(["-c", &format!("import {module}")]).output().expect("run python");
    assert!(
        ok.status.success(),
        "the Python package `{package}` (module {module}) is missing from .venv: run `bash scripts/setup-python.sh` \
         (or .venv/bin/pip install {package}): {}",
        String::from_utf8_lossy(&ok.stderr)
    );
    py
}

/// Run `tprof args...`; panics with its output unless it succeeds. Returns stdout.
pub fn tprof(args: &[&str]) -> String {
    let out = Command::new(tprof_bin()).args(args).output().expect("run tprof");
    assert!(
        out.status.success(),
        "tprof {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Run a Python script (with `args` as `sys.argv[1:]`) that prints one JSON object last.
pub fn run_python(py: &Path, script: &str, args: &[&str]) -> serde_json::Value {
    let out = Command::new(py).arg("-c").arg(script).args(args).output().expect("run python");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "python failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let last = stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or("");
    serde_json::from_str(last).unwrap_or_else(|e| panic!("no JSON result ({e}):\n{stdout}"))
}

/// Reads a Perfetto trace with the official schema (`perfetto.protos...perfetto_trace_pb2`) and
/// rebuilds slices per track as trace processor does (sorted by time, END closes the innermost open
/// slice); with `TPROF_TRACE_PROCESSOR_SHELL` set, asks trace processor itself too.
pub const PERFETTO_CHECK: &str = r#"
import json, os, sys, collections
from perfetto.protos.perfetto.trace import perfetto_trace_pb2 as pb
path = sys.argv[1]
t = pb.Trace()
t.ParseFromString(open(path, 'rb').read())
names, cats, tracks, procs = {}, {}, {}, []
evs, flow_out, flow_in, counters = [], set(), set(), 0
for i, p in enumerate(t.packet):
    for n in p.interned_data.event_names: names[n.iid] = n.name
    for c in p.interned_data.event_categories: cats[c.iid] = c.name
    if p.HasField('track_descriptor'):
        d = p.track_descriptor
        tracks[d.uuid] = d
        if d.HasField('process'): procs.append(d.process.process_name)
    if p.HasField('track_event'):
        e = p.track_event
        if e.type == pb.TrackEvent.TYPE_SLICE_BEGIN:
            evs.append((p.timestamp, i, e.track_uuid, 1, names[e.name_iid], [cats[c] for c in e.category_iids]))
            flow_out.update(e.flow_ids); flow_in.update(e.terminating_flow_ids)
        elif e.type == pb.TrackEvent.TYPE_SLICE_END:
            evs.append((p.timestamp, i, e.track_uuid, 0, None, None))
        elif e.type == pb.TrackEvent.TYPE_COUNTER:
            counters += 1
evs.sort(key=lambda e: (e[0], e[1]))
stack, slices = collections.defaultdict(list), []
for ts, _, track, begin, name, cat in evs:
    if begin: stack[track].append((ts, name, cat))
    else:
        s, name, cat = stack[track].pop()
        slices.append((track, name, cat, s, ts))
kernels = [s for s in slices if 'kernel' in s[2]]
res = {
    'processes': procs,
    'kernel_count': len(kernels),
    'kernel_total_ns': sum(s[4] - s[3] for s in kernels),
    'gpu_tracks': sorted({tracks[s[0]].name for s in kernels}),
    'flows': len(flow_out & flow_in),
    'counters': counters,
    'unclosed': sum(len(v) for v in stack.values()),
    'trace_processor': None,
}
shell = os.environ.get('TPROF_TRACE_PROCESSOR_SHELL')
if shell:
    from perfetto.trace_processor import TraceProcessor, TraceProcessorConfig
    tp = TraceProcessor(trace=path, config=TraceProcessorConfig(bin_path=shell))
    q = lambda s: list(tp.query(s))
    k = q("select count(*) n, sum(dur) d from slice where category = 'kernel'")[0]
    f = q("select count(*) n from flow")[0]
    res['trace_processor'] = {'kernel_count': k.n, 'kernel_total_ns': k.d, 'flows': f.n}
print(json.dumps(res))
"#;

/// HTA: load a directory of Kineto traces and run the temporal breakdown.
pub const HTA_CHECK: &str = r#"
import json, sys, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
df = a.get_temporal_breakdown(visualize=False)
rows = {int(r['rank']): {k: float(r[k]) for k in ['idle_time(us)', 'compute_time(us)', 'non_compute_time(us)', 'kernel_time(us)']} for _, r in df.iterrows()}
print(json.dumps({'ranks': rows}))
"#;

/// DuckDB: kernel count and total per rank from `kernels.parquet`, and row counts of every table.
pub const DUCKDB_CHECK: &str = r#"
import json, sys, duckdb
d = sys.argv[1]
per_rank = {str(r): [n, int(s or 0)] for r, n, s in duckdb.sql(f"select rank, count(*), sum(dur_ns) from '{d}/kernels.parquet' group by rank").fetchall()}
tables = {}
for t in ['kernels', 'api', 'memcpy', 'memset', 'collectives', 'nvtx', 'steps', 'counters', 'sync', 'memory']:
    tables[t] = duckdb.sql(f"select count(*) from '{d}/{t}.parquet'").fetchall()[0][0]
hosts = [h for (h,) in duckdb.sql(f"select distinct host from '{d}/kernels.parquet'").fetchall()]
print(json.dumps({'per_rank': per_rank, 'tables': tables, 'hosts': hosts}))
"#;

/// Chrome JSON: parse it as a viewer would (json module) and count what it holds.
pub const CHROME_CHECK: &str = r#"
import json, sys, gzip
p = sys.argv[1]
raw = open(p, 'rb').read()
if raw[:2] == b'\x1f\x8b': raw = gzip.decompress(raw)
d = json.loads(raw)
ev = d['traceEvents']
k = [e for e in ev if e.get('ph') == 'X' and e.get('cat') == 'kernel']
s = {e['id'] for e in ev if e.get('ph') == 's'}
f = {e['id'] for e in ev if e.get('ph') == 'f'}
pids = {e['pid'] for e in ev if e.get('ph') == 'X'}
print(json.dumps({'kernel_count': len(k), 'kernel_total_ns': round(sum(e['dur'] for e in k) * 1000), 'flows': len(s & f), 'pids': len(pids)}))
"#;
