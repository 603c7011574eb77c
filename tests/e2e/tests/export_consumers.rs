//! `tprof export` validated by the real consumers: Perfetto's official schema (and trace processor
//! when a binary is available), Holistic Trace Analysis, DuckDB, and a JSON viewer's parse, on the
//! real two-rank Kineto traces. Their answers must match `tprof summary --json`.

use serde_json::Value;
use tprof_e2e::export::*;

fn inputs() -> Vec<String> {
    let d = kineto_dir();
    ["trace_filter_sampled_rank-0.json.gz", "trace_filter_sampled_rank-1.json.gz"]
        .iter()
        .map(|f| d.join(f).display().to_string())
        .collect()
}

/// tprof's own numbers: summary JSON.
fn summary() -> Value {
    let mut args = vec!["summary", "--json"];
    let inp = inputs();
    args.extend(inp.iter().map(String::as_str));
    serde_json::from_str(&tprof(&args)).expect("summary JSON")
}

fn kernel_totals(s: &Value) -> (u64, u64) {
    let k = s["kernels"].as_array().unwrap();
    (k.iter().map(|k| k["count"].as_u64().unwrap()).sum(), k.iter().map(|k| k["total_ns"].as_u64().unwrap()).sum())
}

fn export(format: &str, out: &std::path::Path) -> String {
    let inp = inputs();
    let o = out.display().to_string();
    let mut args = vec!["export", "--format", format, "-o", &o];
    args.extend(inp.iter().map(String::as_str));
    let stdout = tprof(&args);
    let last = stdout.lines().last().unwrap_or("").to_string();
    assert!(last.starts_with("tprof: wrote ") && last.contains(&o), "last line: {last}");
    last
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1.0)
}

#[test]
fn perfetto_official_schema_reads_every_kernel_and_flow() {
    let py = python_with("perfetto", "perfetto");
    let d = tempfile_dir("perfetto");
    let out = d.join("run.perfetto-trace");
    let line = export("perfetto", &out);
    assert!(line.contains("ui.perfetto.dev"), "{line}");
    let r = run_python(&py, PERFETTO_CHECK, &[out.to_str().unwrap()]);
    let (count, total) = kernel_totals(&summary());
    eprintln!("perfetto: {r}");
    assert_eq!(r["kernel_count"].as_u64(), Some(count));
    assert_eq!(r["kernel_total_ns"].as_u64(), Some(total));
    assert_eq!(r["unclosed"], 0);
    assert!(r["flows"].as_u64().unwrap() > 2000, "{r}");
    assert_eq!(r["processes"].as_array().unwrap().len(), 2);
    if let Some(tp) = r["trace_processor"].as_object() {
        assert_eq!(tp["kernel_count"].as_u64(), Some(count));
        assert_eq!(tp["kernel_total_ns"].as_u64(), Some(total));
        assert_eq!(tp["flows"], r["flows"]);
    }
}

#[test]
fn hta_temporal_breakdown_matches_tprof() {
    let py = python_with("hta", "HolisticTraceAnalysis");
    let d = tempfile_dir("kineto");
    let out = d.join("traces");
    export("kineto", &out);
    let r = run_python(&py, HTA_CHECK, &[out.to_str().unwrap()]);
    eprintln!("hta: {r}");
    let s = summary();
    for rank in s["ranks"].as_array().unwrap() {
        let id = rank["rank"].as_u64().unwrap().to_string();
        let h = &r["ranks"][&id];
        assert!(h.is_object(), "HTA has no rank {id}: {r}");
        let us = |k: &str| h[k].as_f64().unwrap();
        let ns = |k: &str| rank[k].as_f64().unwrap() / 1000.0;
        // HTA: kernel_time = first GPU start .. last GPU end, idle = gaps; busy = kernel - idle.
        let busy = us("kernel_time(us)") - us("idle_time(us)");
        assert!(close(busy, ns("gpu_busy_ns"), 0.01), "rank {id}: HTA busy {busy} us vs tprof {}", ns("gpu_busy_ns"));
        assert!(
            close(us("compute_time(us)"), ns("compute_ns"), 0.01),
            "rank {id}: HTA compute {} us vs tprof {}",
            us("compute_time(us)"),
            ns("compute_ns")
        );
    }
}

#[test]
fn duckdb_reads_the_parquet_tables() {
    let py = python_with("duckdb", "duckdb");
    let d = tempfile_dir("parquet");
    let out = d.join("tables");
    export("parquet", &out);
    let r = run_python(&py, DUCKDB_CHECK, &[out.to_str().unwrap()]);
    eprintln!("duckdb: {r}");
    let (count, total) = kernel_totals(&summary());
    let per_rank = r["per_rank"].as_object().unwrap();
    assert_eq!(per_rank.len(), 2);
    let n: u64 = per_rank.values().map(|v| v[0].as_u64().unwrap()).sum();
    let t: u64 = per_rank.values().map(|v| v[1].as_u64().unwrap()).sum();
    assert_eq!((n, t), (count, total));
    assert!(r["tables"]["api"].as_u64().unwrap() > 0 && r["tables"]["nvtx"].as_u64().unwrap() > 0);
    assert!(r["tables"]["steps"].as_u64().unwrap() > 0);
}

#[test]
fn chrome_json_parses_with_every_kernel() {
    let py = python_with("json", "python3");
    let d = tempfile_dir("chrome");
    let out = d.join("run.json.gz");
    export("chrome", &out);
    let r = run_python(&py, CHROME_CHECK, &[out.to_str().unwrap()]);
    eprintln!("chrome: {r}");
    let (count, total) = kernel_totals(&summary());
    assert_eq!(r["kernel_count"].as_u64(), Some(count));
    // Durations are written in us with ns digits; the JSON reader sums doubles.
    assert!(close(r["kernel_total_ns"].as_f64().unwrap(), total as f64, 1e-9), "{r} vs {total}");
    assert_eq!(r["pids"], 2);
    assert!(r["flows"].as_u64().unwrap() > 2000);
}

/// A fresh directory under the system temp dir for one test.
fn tempfile_dir(what: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("tprof-export-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
