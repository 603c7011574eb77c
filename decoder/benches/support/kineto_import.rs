//! The Kineto import's own figures: MB/s of JSON per CPU-second and peak RSS of `tprof summary
//! --threads 1` on the real traces (gunzipped to plain JSON first) and on a generated trace of
//! `--kineto-mb` MB (written at bench time, deleted after unless `--keep`), each next to HTA's
//! load + temporal breakdown of the same file in the same run. Goals (issue #19):
//! >= 300 MB/s of JSON per core, peak RSS bounded independently of the trace size, >= 20x HTA.

use std::io::Write;
use std::path::{Path, PathBuf};

use tprof_decoder::testkit::kineto_trace::write_kineto_trace;

use super::hta_bounded::{self, HtaOutcome};
use super::{children_cpu, mb, measure, run_hta};

/// HTA on files above `HTA_MAX_BYTES`: `budget_s` wall seconds (0: not run) and `max_rss_mb`.
pub struct HtaLimits {
    pub budget_s: u64,
    pub max_rss_mb: u64,
}

/// HTA / tprof: measured (HTA finished), or a lower bound (HTA stopped before finishing).
#[derive(Clone, Copy)]
enum Ratio {
    Measured(f64),
    AtLeast(f64),
}

impl Ratio {
    fn show(self) -> String {
        match self {
            Ratio::Measured(r) => format!("{r:.1}x"),
            Ratio::AtLeast(r) => format!("> {r:.0}x"),
        }
    }

    fn value(self) -> f64 {
        match self {
            Ratio::Measured(r) | Ratio::AtLeast(r) => r,
        }
    }
}

pub fn bench(
    dir: &Path,
    bin: &Path,
    py: Option<&Path>,
    size_mb: u64,
    keep: bool,
    real: &[PathBuf],
    limits: &HtaLimits,
) {
    println!();
    println!("Kineto import (streaming): tprof summary --threads 1 on plain JSON (the real traces gunzipped first), HTA on the same file");
    println!(
        "| {:<40} | {:>9} | {:>9} | {:>9} | {:>9} | {:>14} | {:>10} | {:>12} | {:>9} | {:>8}",
        "trace", "JSON MB", "events", "wall", "CPU", "MB/CPU-s", "peak RSS", "HTA load+tb", "HTA RSS", "HTA/tprof"
    );
    println!(
        "(MB/CPU-s: MB of JSON per CPU-second of the whole process, goal >= 300; in parentheses without the start-up;"
    );
    println!(
        " HTA/tprof by wall time; '> Nx' when HTA was stopped unfinished: the CPU-s it had spent, imports off, / tprof's CPU-s)"
    );
    println!(
        "|{:-<42}|{:-<11}|{:-<11}|{:-<11}|{:-<11}|{:-<16}|{:-<12}|{:-<14}|{:-<11}|{:-<10}",
        "", "", "", "", "", "", "", "", "", ""
    );
    let d = dir.join("kineto-import");
    let _ = std::fs::remove_dir_all(&d);
    if std::fs::create_dir_all(&d).is_err() {
        println!("cannot create {}", d.display());
        return;
    }
    // Start-up: the CPU time of a run on a trace with no events (50 runs), shown once and
    // taken off the figures in parentheses.
    let empty = d.join("empty.json");
    let startup = match std::fs::write(&empty, b"{\"traceEvents\":[]}") {
        Ok(()) => row("start-up (a trace with no events)", &empty, &d, 1, None, bin, None, 0.0, limits).3,
        Err(_) => 0.0,
    };
    // The real traces first (small: whole-process figures, start-up included).
    for f in real {
        let name = f.file_name().unwrap_or_default().to_string_lossy().trim_end_matches(".gz").to_string();
        let rd = d.join(format!("real-{name}"));
        let plain = rd.join(&name);
        let bytes = std::fs::create_dir_all(&rd).and_then(|_| gunzip(f, &plain));
        match bytes {
            Ok(b) => {
                row(&format!("real: {name}"), &plain, &rd, b, None, bin, py, startup, limits);
            }
            Err(e) => println!("cannot gunzip {}: {e}", f.display()),
        }
        let _ = std::fs::remove_dir_all(&rd);
    }
    if size_mb == 0 {
        let _ = std::fs::remove_dir_all(&d);
        return;
    }
    let gd = d.join("generated");
    let file = gd.join("generated.json");
    let truth = match std::fs::create_dir_all(&gd).and_then(|_| write_kineto_trace(&file, size_mb << 20)) {
        Ok(t) => t,
        Err(e) => {
            println!("cannot write {}: {e}", file.display());
            return;
        }
    };
    let what = format!("generated ({} steps)", truth.steps);
    let (per_core, rss_mb, ratio, _) =
        row(&what, &file, &gd, truth.bytes, Some(truth.events()), bin, py, startup, limits);
    let json_mb = truth.bytes as f64 / 1e6;
    let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
    // The memory bound is judged at 4 GB (`--kineto-mb 4096`): a smaller trace under 300 MB says
    // nothing about a bigger one while RSS still grows with the size; the test kineto_memory
    // checks a bound on a generated trace.
    // `--kineto-mb 4096` writes whole steps up to the size: ~3.98 GB (decimal) of JSON.
    let memory = if json_mb >= 3900.0 {
        verdict(rss_mb < 300.0)
    } else if rss_mb >= 300.0 {
        "NOT met"
    } else {
        "not judged below 4 GB (--kineto-mb 4096)"
    };
    println!(
        "goals: {per_core:.0} MB/s of JSON per CPU-second (bytes / (user+sys) s) vs >= 300: {}; peak RSS {rss_mb:.0} MB at {json_mb:.0} MB of JSON vs < 300 MB at 4 GB: {}; HTA/tprof {} vs >= 20: {}",
        verdict(per_core >= 300.0),
        memory,
        ratio.map(Ratio::show).unwrap_or_else(|| "-".into()),
        ratio.map(|r| verdict(r.value() >= 20.0)).unwrap_or("not measured"),
    );
    if keep {
        println!("kept {}", file.display());
    } else {
        let _ = std::fs::remove_dir_all(&d);
    }
}

/// Largest JSON given to HTA without limits: on 193 MB it had not finished after 7 minutes
/// (2026-12-02, a loaded 2-core machine), so a 1 GB trace would take well over half an hour. Bigger
/// files get HTA only with `--hta-budget SECS` (and `--hta-max-rss MB`), stopped when either runs
/// out; a stopped run gives a lower bound on the ratio, by CPU time.
const HTA_MAX_BYTES: u64 = 50_000_000;

/// Gunzips `from` into `to`; the bytes written.
fn gunzip(from: &Path, to: &Path) -> std::io::Result<u64> {
    let mut gz = flate2::read::MultiGzDecoder::new(std::io::BufReader::new(std::fs::File::open(from)?));
    let mut out = std::io::BufWriter::new(std::fs::File::create(to)?);
    let n = std::io::copy(&mut gz, &mut out)?;
    out.flush()?;
    Ok(n)
}

/// One row: `tprof summary --threads 1` on `file` and HTA on its directory `hdir` (when `py`);
/// returns MB/s of JSON per CPU-second, tprof's peak RSS in MB, HTA time / tprof time and the
/// CPU seconds of one run. In parentheses: MB/s once `startup` CPU seconds are taken off.
#[allow(clippy::too_many_arguments)]
fn row(
    what: &str,
    file: &Path,
    hdir: &Path,
    bytes: u64,
    events: Option<u64>,
    bin: &Path,
    py: Option<&Path>,
    startup: f64,
    limits: &HtaLimits,
) -> (f64, f64, Option<Ratio>, f64) {
    // A small file is summarised again until ~200 MB have been read (at most 50 times): one
    // run's CPU time comes in 10 ms steps, the sum over the runs (this process's children's
    // times) is exact to one step. The figures are per run (the mean), start-up included.
    let reps = (200e6 / bytes.max(1) as f64).ceil().clamp(1.0, 50.0) as usize;
    let args = ["summary".into(), file.display().to_string(), "--threads".into(), "1".into()];
    let before = children_cpu();
    let runs: Vec<_> = (0..reps).map(|_| measure(bin, &args, &[])).collect();
    let children = children_cpu().zip(before).map(|(a, b)| a - b);
    let Some(t) = runs.into_iter().reduce(|a, b| super::Run {
        secs: a.secs + b.secs,
        cpu: a.cpu.zip(b.cpu).map(|(x, y)| x + y),
        peak_rss_kb: a.peak_rss_kb.max(b.peak_rss_kb),
        ok: a.ok && b.ok,
        stderr: b.stderr,
    }) else {
        return (0.0, 0.0, None, 0.0);
    };
    let cpu = children.or(t.cpu).unwrap_or(t.secs).max(1e-9) / reps as f64;
    let t = super::Run { secs: t.secs / reps as f64, ..t };
    let json_mb = bytes as f64 / 1e6;
    let per_core = json_mb / cpu;
    let (hta_s, hta_rss, ratio) = match py {
        None => ("not run".to_string(), "-".to_string(), None),
        Some(py) if bytes <= HTA_MAX_BYTES => match run_hta(py, hdir) {
            Some((inner, h)) if h.ok => {
                (format!("{inner:.2} s"), mb(h.peak_rss_kb), Some(Ratio::Measured(inner / t.secs.max(1e-9))))
            }
            _ => ("failed".into(), "-".into(), None),
        },
        Some(_) if limits.budget_s == 0 => (format!("> {} MB: skipped", HTA_MAX_BYTES / 1_000_000), "-".into(), None),
        Some(py) => match hta_bounded::run(py, hdir, limits.budget_s, limits.max_rss_mb) {
            HtaOutcome::Finished { inner_s, peak_rss_kb } => {
                (format!("{inner_s:.2} s"), mb(Some(peak_rss_kb)), Some(Ratio::Measured(inner_s / t.secs.max(1e-9))))
            }
            // Not finished: the CPU time it had spent (imports taken off) is a lower bound on what
            // it needs; against tprof's CPU time per run.
            HtaOutcome::Stopped { why, wall_s, cpu_s, peak_rss_kb } => {
                let spent = (cpu_s - hta_bounded::import_cpu(py)).max(0.0);
                (
                    format!("stopped ({why}) {wall_s:.0} s, {spent:.0} CPU-s"),
                    mb(Some(peak_rss_kb)),
                    Some(Ratio::AtLeast(spent / cpu)),
                )
            }
            HtaOutcome::Failed(why) => (format!("failed: {why}"), "-".into(), None),
        },
    };
    println!(
        "| {:<40} | {:>9.1} | {:>9} | {:>7.3} s | {:>7.4} s | {:>14} | {:>10} | {:>12} | {:>9} | {:>8}",
        format!("{what}{}", if t.ok { "" } else { " FAILED" }),
        json_mb,
        events.map(|e| format!("{:.2} M", e as f64 / 1e6)).unwrap_or_else(|| "-".into()),
        t.secs,
        cpu,
        if bytes <= 1 {
            "-".to_string()
        } else if startup > 0.0 && cpu > startup {
            format!("{per_core:.0} ({:.0})", json_mb / (cpu - startup))
        } else {
            format!("{per_core:.0}")
        },
        mb(t.peak_rss_kb),
        hta_s,
        hta_rss,
        ratio.map(Ratio::show).unwrap_or_else(|| "-".into()),
    );
    (per_core, t.peak_rss_kb.unwrap_or(0) as f64 / 1024.0, ratio, cpu)
}
