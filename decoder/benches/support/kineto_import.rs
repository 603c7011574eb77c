//! The Kineto import's own figures: MB/s of JSON per core and peak RSS of `tprof summary
//! --threads 1` on a generated trace of `--kineto-mb` MB (written at bench time, deleted after),
//! next to HTA's load + temporal breakdown of the same file in the same run. Goals (issue #19):
//! >= 300 MB/s of JSON per core, peak RSS bounded independently of the trace size, >= 20x HTA.

use std::path::Path;

use tprof_decoder::testkit::kineto_trace::write_kineto_trace;

use super::{mb, measure, run_hta};

pub fn bench(dir: &Path, bin: &Path, py: Option<&Path>, size_mb: u64, keep: bool) {
    println!();
    println!("Kineto import (streaming): tprof summary --threads 1 on a generated trace, HTA on the same file");
    println!(
        "| {:<34} | {:>9} | {:>9} | {:>9} | {:>14} | {:>10} | {:>12} | {:>9} | {:>8}",
        "trace", "JSON MB", "events", "wall", "MB/s per core", "peak RSS", "HTA load+tb", "HTA RSS", "HTA/tprof"
    );
    println!(
        "|{:-<36}|{:-<11}|{:-<11}|{:-<11}|{:-<16}|{:-<12}|{:-<14}|{:-<11}|{:-<10}",
        "", "", "", "", "", "", "", "", ""
    );
    let d = dir.join("kineto-import");
    let _ = std::fs::remove_dir_all(&d);
    if std::fs::create_dir_all(&d).is_err() {
        println!("cannot create {}", d.display());
        return;
    }
    let file = d.join("generated.json");
    let truth = match write_kineto_trace(&file, size_mb << 20) {
        Ok(t) => t,
        Err(e) => {
            println!("cannot write {}: {e}", file.display());
            return;
        }
    };
    let t = measure(bin, &["summary".into(), file.display().to_string(), "--threads".into(), "1".into()], &[]);
    let cpu = t.cpu.unwrap_or(t.secs).max(1e-9);
    let json_mb = truth.bytes as f64 / 1e6;
    let hta = py.and_then(|py| run_hta(py, &d));
    let (hta_s, hta_rss, ratio) = match &hta {
        Some((inner, h)) if h.ok => {
            (format!("{inner:.2} s"), mb(h.peak_rss_kb), format!("{:.1}x", inner / t.secs.max(1e-9)))
        }
        Some(_) => ("failed".into(), "-".into(), "-".into()),
        None => ("not run".into(), "-".into(), "-".into()),
    };
    println!(
        "| {:<34} | {:>9.0} | {:>7.2} M | {:>7.2} s | {:>14.0} | {:>10} | {:>12} | {:>9} | {:>8}",
        format!("generated ({} steps){}", truth.steps, if t.ok { "" } else { " FAILED" }),
        json_mb,
        truth.events() as f64 / 1e6,
        t.secs,
        json_mb / cpu,
        mb(t.peak_rss_kb),
        hta_s,
        hta_rss,
        ratio
    );
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    let per_core = json_mb / cpu;
    // The memory bound: what a trace four times this size would need if RSS grew with the size
    // (it should not: the sorts spill past a fixed budget); the test kineto_memory checks it.
    let rss_mb = t.peak_rss_kb.unwrap_or(0) as f64 / 1024.0;
    println!(
        "goals: {per_core:.0} MB/s of JSON per CPU-second (bytes / (user+sys) s) vs >= 300: {}; peak RSS {rss_mb:.0} MB at {json_mb:.0} MB of JSON vs < 300 MB at 4 GB: {}; HTA/tprof {} vs >= 20: {}",
        verdict(per_core >= 300.0),
        verdict(rss_mb < 300.0),
        ratio,
        match &hta {
            Some((inner, h)) if h.ok => verdict(inner / t.secs.max(1e-9) >= 20.0),
            _ => "not measured",
        }
    );
    if keep {
        println!("kept {}", file.display());
    } else {
        let _ = std::fs::remove_dir_all(&d);
    }
}
