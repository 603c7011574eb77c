//! Parquet export: one table per record kind with rank / host, read back with the parquet crate.
mod export_support;

use std::collections::HashMap;
use std::path::Path;

use export_support::*;
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::record::RowAccessor;
use tprof_decoder::export::select::{IdSet, Selection};
use tprof_decoder::export::ExportFormat;

/// (rank, dur_ns) of every row of a table.
fn rows(path: &Path, dur_col: &str) -> Vec<(Option<i32>, i64)> {
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let schema = r.metadata().file_metadata().schema_descr();
    let idx = |n: &str| schema.columns().iter().position(|c| c.name() == n).unwrap();
    let (ri, di) = (idx("rank"), idx(dur_col));
    r.get_row_iter(None)
        .unwrap()
        .map(|row| {
            let row = row.unwrap();
            (row.get_int(ri).ok(), row.get_long(di).unwrap())
        })
        .collect()
}

#[test]
fn tables_hold_every_record_with_rank_and_host() {
    let d = tempfile::tempdir().unwrap();
    let (job, files) = synth_job(d.path());
    let t = truth(&files);
    let out = d.path().join("pq");
    let report = run_export(&files, ExportFormat::Parquet, &out, Selection::default());
    for stem in ["kernels", "api", "memcpy", "memset", "collectives", "nvtx", "steps", "counters", "sync", "memory"] {
        assert!(out.join(format!("{stem}.parquet")).is_file(), "{stem}");
    }
    let k = rows(&out.join("kernels.parquet"), "dur_ns");
    assert_eq!(k.len(), t.kernels().count());
    assert_eq!(k.iter().map(|r| r.1 as u64).sum::<u64>(), t.kernel_total_ns());
    let mut per_rank: HashMap<Option<i32>, usize> = HashMap::new();
    for r in &k {
        *per_rank.entry(r.0).or_default() += 1;
    }
    assert_eq!(per_rank.len(), 4);
    assert_eq!(rows(&out.join("api.parquet"), "dur_ns").len(), t.apis.len());
    assert_eq!(rows(&out.join("collectives.parquet"), "dur_ns").len(), t.collectives.len());
    assert_eq!(rows(&out.join("nvtx.parquet"), "dur_ns").len(), t.ranges.len());
    assert_eq!(rows(&out.join("steps.parquet"), "dur_ns").len() as u32, job.ranks * job.steps);
    assert!(report.written.events > 0);

    // Only ranks 0 and 2.
    let out = d.path().join("pq2");
    run_export(
        &files,
        ExportFormat::Parquet,
        &out,
        Selection { ranks: Some(IdSet::parse("0,2").unwrap()), ..Selection::default() },
    );
    let k = rows(&out.join("kernels.parquet"), "dur_ns");
    assert!(k.iter().all(|r| matches!(r.0, Some(0 | 2))));
    assert_eq!(k.len(), t.kernels().filter(|g| matches!(g.rank, Some(0 | 2))).count());
}

#[test]
fn real_kineto_trace_kernel_total() {
    let path = kineto_dir().join("trace_filter_sampled_rank-1.json.gz");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("pq");
    run_export(std::slice::from_ref(&path), ExportFormat::Parquet, &out, Selection::default());
    let t = truth(&[path]);
    let k = rows(&out.join("kernels.parquet"), "dur_ns");
    assert_eq!(k.len(), t.kernels().count());
    assert_eq!(k.iter().map(|r| r.1 as u64).sum::<u64>(), t.kernel_total_ns());
    assert!(k.iter().all(|r| r.0 == Some(1)));
}
