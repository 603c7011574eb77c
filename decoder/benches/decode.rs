//! Decoder benchmark: generated jobs of N events, timed side by side.
//!
//! ```text
//! cargo bench -p tprof-decoder --bench decode -- [--events 10M,100M] [--ranks 8] [--dir DIR]
//!     [--exports chrome,perfetto,kineto,parquet,folded] [--no-exports] [--hta-events 1M] [--no-hta]
//!     [--kineto-mb 1024] [--hta-budget SECS] [--hta-max-rss MB] [--keep] [--commands summary1,summary,diagnose,report,report1]
//!     [--previous PATH/TO/OLD/tprof] [--rounds N]
//! cargo bench -p tprof-decoder --bench decode -- --ranks 4096 --events 81.92M --commands summary1,diagnose \
//!     --no-exports --no-hta       # the multi-rank scale run: 4096 ranks x 20k events
//! ```
//!
//! For each size it writes a realistic multi-rank job of ring files (`testkit::bench_job`: 8 ranks on 2 hosts, ~200
//! distinct kernel names on two compute streams, launch API calls, H2D/D2H copies, memsets,
//! NCCL AllReduce/AllGather calls with their kernels on a communication stream, stream syncs, NVTX
//! step / forward / backward / layer ranges; GPU records arrive in CUPTI-like batches after the
//! launches), then runs the `tprof` binary on it as a child process and measures wall time and peak
//! RSS (`/usr/bin/time -v` when present, else by polling the child's VmHWM):
//!
//! - `tprof summary --threads 1` (goal: >= 20 M events/s on one core, peak RSS < 500 MB at 100 M),
//! - `tprof summary` (all cores),
//! - `tprof diagnose` and `tprof report -o PAGE` (all cores; goal for report: a 100 M-event job in
//!   under a minute),
//! - `tprof export --format F` for each format the CLI has (output to a scratch directory that
//!   is deleted right after; at sizes where the output would not fit `--max-export-bytes`, the
//!   JSON formats are skipped and said so).
//!
//! Then, on one Kineto trace (the generated job of `--hta-events`, exported with `--format
//! kineto`), `tprof summary --threads 1` vs Holistic Trace Analysis' `TraceAnalysis(trace_dir)` +
//! `get_temporal_breakdown()` in the same run (python from `.venv/bin/python` or `$PYTHON`), and
//! the same on the real traces in `$TPROF_KINETO_DATA` (default `../shared/data/kineto/`) when
//! present: put HTA's own `tests/data/trace_diff/control/control.json.gz` there for the
//! `trace_diff_control_control` comparison of issue #19. The ratio is HTA time / tprof time
//! (goal: >= 20).
//!
//! Last, the Kineto import alone (`support/kineto_import.rs`): the real traces (gunzipped) and a
//! generated trace of `--kineto-mb` MB (default 1024; 0 skips it), MB/s of JSON per CPU-second
//! (goal >= 300) and peak RSS, each next to HTA on the same file. HTA runs on files above 50 MB only
//! with `--hta-budget SECS` (wall clock; `--hta-max-rss MB` caps its memory, default 8192): stopped
//! before it finishes, the CPU time it had spent gives a lower bound on the ratio (`> Nx`).
//!
//! With `--previous`, `summary --threads 1`, `diagnose` and `report` also run a previous `tprof` binary on the
//! same job, alternating with this one (`--rounds N` runs each, the least CPU time counts), and each
//! row's note gives the previous build's events per CPU-second and this build's speed-up over it.
//!
//! "Events" are the ring records written (API calls, kernels, copies, memsets, syncs, collectives,
//! NVTX push/pop/marks, markers), excluding clock pairs and string definitions.
//! Everything generated lives under `--dir` (default `$CARGO_TARGET_DIR/bench-decode` or
//! `target/bench-decode`) and is deleted at the end unless `--keep`.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tprof_decoder::testkit::bench_job::generate;

#[path = "support/hta_bounded.rs"]
mod hta_bounded;
#[path = "support/kineto_import.rs"]
mod kineto_import;

// ---------------------------------------------------------------------------------------------
// Measuring child processes

struct Run {
    secs: f64,
    /// User + system CPU seconds (from `/usr/bin/time -v`), when known.
    cpu: Option<f64>,
    peak_rss_kb: Option<u64>,
    ok: bool,
    stderr: String,
}

fn time_v() -> Option<PathBuf> {
    let p = PathBuf::from("/usr/bin/time");
    let ok = Command::new(&p)
        .args(["-v", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    ok.then_some(p)
}

/// A field of `/proc/PID/status` in kB (`VmHWM:`, `VmRSS:`).
fn proc_status_kb(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Runs `prog args`, stdout discarded; wall time and peak RSS.
fn measure(prog: &Path, args: &[String], env: &[(&str, &str)]) -> Run {
    let tv = time_v();
    let mut cmd = match &tv {
        Some(t) => {
            let mut c = Command::new(t);
            c.arg("-v").arg(prog);
            c
        }
        None => Command::new(prog),
    };
    cmd.args(args).stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let t0 = Instant::now();
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return Run { secs: 0.0, cpu: None, peak_rss_kb: None, ok: false, stderr: e.to_string() },
    };
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut polled: Option<u64> = None;
    let status = loop {
        if let Ok(Some(st)) = child.try_wait() {
            break st;
        }
        if tv.is_none() {
            if let Some(kb) = proc_status_kb(child.id(), "VmHWM:") {
                polled = Some(polled.unwrap_or(0).max(kb));
            }
        }
        std::thread::sleep(Duration::from_millis(if tv.is_some() { 2 } else { 5 }));
    };
    let secs = t0.elapsed().as_secs_f64();
    let err = reader.join().unwrap_or_default();
    let peak = match tv {
        Some(_) => err
            .lines()
            .find_map(|l| l.trim().strip_prefix("Maximum resident set size (kbytes):"))
            .and_then(|v| v.trim().parse().ok()),
        None => polled,
    };
    let ok = status.success() && !err.contains("Command exited with non-zero status");
    let field = |name: &str| -> Option<f64> {
        err.lines().find_map(|l| l.trim().strip_prefix(name)).and_then(|v| v.trim().parse().ok())
    };
    let cpu = match (field("User time (seconds):"), field("System time (seconds):")) {
        (Some(u), Some(s)) => Some(u + s),
        _ => None,
    };
    Run { secs, cpu, peak_rss_kb: peak, ok, stderr: err }
}

// ---------------------------------------------------------------------------------------------
// Options and main

struct Opts {
    sizes: Vec<u64>,
    ranks: u32,
    dir: PathBuf,
    exports: Option<Vec<String>>,
    hta_events: u64,
    hta: bool,
    /// MB of the generated Kineto trace of the import bench (0: skipped).
    kineto_mb: u64,
    /// HTA on the import bench's files above 50 MB: wall-clock budget (0: skipped) and memory cap.
    hta_limits: kineto_import::HtaLimits,
    keep: bool,
    max_export_bytes: u64,
    /// Which analyses to time: summary1 (`--threads 1`), summary, diagnose, report, report1 (`--threads 1`).
    commands: Vec<String>,
    /// A previous `tprof` binary timed on the same job, alternating with this one (`--previous`).
    previous: Option<PathBuf>,
    /// Runs of each analysis (of each binary); the best CPU time counts (`--rounds`).
    rounds: u32,
}

/// The analyses `--commands` can name (all are timed by default).
const COMMANDS: [&str; 5] = ["summary1", "summary", "diagnose", "report", "report1"];

fn parse_count(s: &str) -> u64 {
    let s = s.trim();
    let (num, mul) = match s.chars().last() {
        Some('k' | 'K') => (&s[..s.len() - 1], 1e3),
        Some('m' | 'M') => (&s[..s.len() - 1], 1e6),
        Some('g' | 'G') => (&s[..s.len() - 1], 1e9),
        _ => (s, 1.0),
    };
    (num.parse::<f64>().unwrap_or_else(|_| panic!("bad count '{s}'")) * mul) as u64
}

fn parse_opts() -> Opts {
    let target = std::env::var_os("CARGO_TARGET_DIR").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("target"));
    let mut o = Opts {
        sizes: vec![10_000_000],
        ranks: 8,
        dir: target.join("bench-decode"),
        exports: None,
        hta_events: 1_000_000,
        hta: true,
        kineto_mb: 1024,
        hta_limits: kineto_import::HtaLimits { budget_s: 0, max_rss_mb: 8192 },
        keep: false,
        max_export_bytes: 4 << 30,
        commands: COMMANDS.map(String::from).to_vec(),
        previous: None,
        rounds: 1,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| panic!("{a} needs a value"));
        match a.as_str() {
            "--events" => o.sizes = val().split(',').map(parse_count).collect(),
            "--ranks" => o.ranks = val().parse().expect("--ranks N"),
            "--dir" => o.dir = PathBuf::from(val()),
            "--exports" => o.exports = Some(val().split(',').map(str::to_string).collect()),
            "--no-exports" => o.exports = Some(Vec::new()),
            "--hta-events" => o.hta_events = parse_count(&val()),
            "--no-hta" => o.hta = false,
            "--kineto-mb" => o.kineto_mb = val().parse().expect("--kineto-mb MB"),
            "--hta-budget" => o.hta_limits.budget_s = val().parse().expect("--hta-budget SECS"),
            "--hta-max-rss" => o.hta_limits.max_rss_mb = val().parse().expect("--hta-max-rss MB"),
            "--keep" => o.keep = true,
            "--max-export-bytes" => o.max_export_bytes = parse_count(&val()),
            "--commands" => {
                o.commands = val().split(',').map(str::to_string).collect();
                // A misspelt name would time nothing and say nothing.
                if let Some(bad) = o.commands.iter().find(|c| !COMMANDS.contains(&c.as_str())) {
                    panic!("unknown --commands name '{bad}' (known: {})", COMMANDS.join(","));
                }
            }
            "--previous" => o.previous = Some(PathBuf::from(val())),
            "--rounds" => o.rounds = val().parse::<u32>().expect("--rounds N").max(1),
            "--bench" => {}
            other => panic!("unknown argument {other} (see the header of decoder/benches/decode.rs)"),
        }
    }
    o
}

fn tprof_bin() -> PathBuf {
    std::env::var_os("TPROF_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_tprof")))
}

/// Export formats the CLI knows (from `tprof export --help`).
fn cli_formats(bin: &Path) -> Vec<String> {
    let out = Command::new(bin).args(["export", "--help"]).output();
    let text = out.map(|o| String::from_utf8_lossy(&o.stdout).to_string()).unwrap_or_default();
    ["chrome", "perfetto", "kineto", "parquet", "folded"]
        .iter()
        .filter(|f| text.contains(*f))
        .map(|f| f.to_string())
        .collect()
}

fn dir_bytes(p: &Path) -> u64 {
    if p.is_file() {
        return std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    }
    std::fs::read_dir(p).map(|rd| rd.flatten().map(|e| dir_bytes(&e.path())).sum()).unwrap_or(0)
}

fn mb(kb: Option<u64>) -> String {
    kb.map(|k| format!("{:.0} MB", k as f64 / 1024.0)).unwrap_or_else(|| "?".into())
}

struct Row {
    what: String,
    events: u64,
    run: Run,
    note: String,
}

fn print_row(r: &Row) {
    let rate = |t: f64| if r.run.ok && t > 0.0 { format!("{:.1}", r.events as f64 / t / 1e6) } else { "-".into() };
    println!(
        "| {:<38} | {:>9.1} M | {:>8.2} s | {:>8} | {:>9} | {:>12} | {:>9} | {}",
        r.what,
        r.events as f64 / 1e6,
        r.run.secs,
        r.run.cpu.map(|c| format!("{c:.2} s")).unwrap_or_else(|| "?".into()),
        rate(r.run.secs),
        rate(r.run.cpu.unwrap_or(0.0)),
        mb(r.run.peak_rss_kb),
        if r.run.ok { r.note.clone() } else { format!("FAILED: {}", last_line(&r.run.stderr)) }
    );
}

/// The goal of a row next to its figure: `goal` M events per CPU-second (the one-core rate).
fn goal_note(r: &Run, events: u64, goal: f64) -> String {
    match r.cpu {
        Some(c) if r.ok && c > 0.0 => {
            let got = events as f64 / c / 1e6;
            let verdict = if got >= goal { "met" } else { "NOT met" };
            format!("goal >= {goal:.0} M ev/cpu-s: {got:.1} ({verdict})")
        }
        _ => format!("goal >= {goal:.0} M ev/cpu-s: no CPU time measured"),
    }
}

/// Runs `args` on this build and, when given, on the previous one, alternating which goes first,
/// `rounds` times each; the run with the least CPU time of each binary (wall time without it).
fn measure_side_by_side(bin: &Path, previous: Option<&Path>, args: &[String], rounds: u32) -> (Run, Option<Run>) {
    let cost = |r: &Run| if r.ok { r.cpu.unwrap_or(r.secs) } else { f64::INFINITY };
    let keep_best = |best: &mut Option<Run>, r: Run| {
        if best.as_ref().is_none_or(|b| cost(&r) < cost(b)) {
            *best = Some(r);
        }
    };
    let (mut new, mut old) = (None, None);
    for round in 0..rounds {
        let old_first = round % 2 == 1;
        if let (true, Some(p)) = (old_first, previous) {
            keep_best(&mut old, measure(p, args, &[]));
        }
        keep_best(&mut new, measure(bin, args, &[]));
        if let (false, Some(p)) = (old_first, previous) {
            keep_best(&mut old, measure(p, args, &[]));
        }
    }
    (new.expect("at least one round"), old)
}

/// The previous build's rate on the same job in the same run, and this build's speed-up over it.
fn previous_note(new: &Run, old: Option<&Run>, events: u64) -> String {
    let Some(old) = old else { return String::new() };
    match (new.cpu, old.cpu) {
        (Some(n), Some(p)) if old.ok && n > 0.0 && p > 0.0 => format!(
            "; previous build {:.1} M ev/cpu-s, {} MB (this build x{:.2})",
            events as f64 / p / 1e6,
            old.peak_rss_kb.map(|k| format!("{:.0}", k as f64 / 1024.0)).unwrap_or_else(|| "?".into()),
            p / n
        ),
        _ if !old.ok => format!("; previous build FAILED: {}", last_line(&old.stderr)),
        _ => "; previous build: no CPU time measured".into(),
    }
}

fn last_line(s: &str) -> String {
    s.lines()
        .rfind(|l| l.starts_with("tprof") || l.contains("error") || l.contains("panicked"))
        .unwrap_or("")
        .to_string()
}

/// Estimated output bytes per event of each format (to skip exports that would not fit on disk).
fn export_bytes_per_event(f: &str) -> u64 {
    match f {
        "chrome" | "kineto" => 260,
        "perfetto" => 40,
        "parquet" => 12,
        _ => 0,
    }
}

fn hta_python() -> Option<PathBuf> {
    let cands: Vec<PathBuf> = std::env::var_os("PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.venv/bin/python")), PathBuf::from("python3")])
        .collect();
    cands.into_iter().find(|p| {
        Command::new(p)
            .args(["-c", "import hta"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
    })
}

const HTA_SCRIPT: &str = r#"
import sys, time, logging, json
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t0 = time.perf_counter()
a = TraceAnalysis(trace_dir=sys.argv[1], include_last_profiler_step=True)
t1 = time.perf_counter()
df = a.get_temporal_breakdown(visualize=False)
t2 = time.perf_counter()
print(json.dumps({"load": t1 - t0, "breakdown": t2 - t1, "ranks": len(df)}), file=sys.stderr, flush=True)
"#;

/// User + system CPU seconds of this process's waited-for descendants (`cutime` + `cstime` of
/// /proc/self/stat, in clock ticks of 1/100 s).
fn children_cpu() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // Fields 16 and 17 of the line; `after` starts at field 3.
    let ticks: u64 = f.get(13)?.parse::<u64>().ok()? + f.get(14)?.parse::<u64>().ok()?;
    Some(ticks as f64 / 100.0)
}

/// HTA load + temporal breakdown (seconds, measured inside python, import time excluded) and the
/// whole process (wall, peak RSS).
fn run_hta(py: &Path, dir: &Path) -> Option<(f64, Run)> {
    let script = std::env::temp_dir().join(format!("tprof-bench-hta-{}.py", std::process::id()));
    std::fs::write(&script, HTA_SCRIPT).ok()?;
    // One run: the script's figures come on stderr, before /usr/bin/time's.
    let r = measure(py, &[script.display().to_string(), dir.display().to_string()], &[]);
    let _ = std::fs::remove_file(&script);
    let line = r.stderr.lines().find(|l| l.starts_with("{\"load\""))?;
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let inner = v["load"].as_f64()? + v["breakdown"].as_f64()?;
    Some((inner, r))
}

fn main() {
    let o = parse_opts();
    let bin = tprof_bin();
    assert!(bin.is_file(), "tprof binary not found at {} (set TPROF_BIN)", bin.display());
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let formats = match &o.exports {
        Some(v) => v.clone(),
        None => cli_formats(&bin),
    };
    println!(
        "tprof decoder bench: {} ({} cores), {} ranks per job, dir {}",
        bin.display(),
        cores,
        o.ranks,
        o.dir.display()
    );
    println!("peak RSS: {}", if time_v().is_some() { "/usr/bin/time -v" } else { "VmHWM polling" });
    println!();
    println!(
        "| {:<38} | {:>11} | {:>10} | {:>8} | {:>9} | {:>12} | {:>9} | note",
        "command", "events", "wall", "cpu", "M ev/s", "M ev/cpu-s", "peak RSS"
    );
    println!("|{:-<40}|{:-<13}|{:-<12}|{:-<10}|{:-<11}|{:-<14}|{:-<11}|------", "", "", "", "", "", "", "");
    println!("(M ev/s = events / wall seconds; M ev/cpu-s = events / (user + sys) seconds, the one-core rate on a shared machine)");
    let mut rows = Vec::new();
    for &n in &o.sizes {
        let job = o.dir.join(format!("job-{}", n));
        let _ = std::fs::remove_dir_all(&job);
        let t0 = Instant::now();
        let (_paths, events, bytes) = generate(&job, n, o.ranks, cores.min(o.ranks as usize));
        let gen_secs = t0.elapsed().as_secs_f64();
        println!(
            "| {:<38} | {:>9.1} M | {:>8.2} s | {:>8} | {:>9.1} | {:>12} | {:>9} | {:.0} MB of rings, {:.1} B/event",
            format!("generate ({} ranks)", o.ranks),
            events as f64 / 1e6,
            gen_secs,
            "",
            events as f64 / gen_secs / 1e6,
            "",
            "",
            bytes as f64 / 1e6,
            bytes as f64 / events as f64
        );
        let jobs = job.display().to_string();
        // Drop the page cache's advantage of the freshly written files? No: a user summarizes files
        // that were just written too; both runs see warm files.
        let wants = |c: &str| o.commands.iter().any(|w| w == c);
        if wants("summary1") {
            let args = ["summary".into(), jobs.clone(), "--threads".into(), "1".into()];
            let (r, prev) = measure_side_by_side(&bin, o.previous.as_deref(), &args, o.rounds);
            let note = goal_note(&r, events, 20.0) + &previous_note(&r, prev.as_ref(), events);
            let row = Row { what: "summary --threads 1".into(), events, run: r, note };
            print_row(&row);
            rows.push((n, row));
        }
        if wants("summary") {
            let r = measure(&bin, &["summary".into(), jobs.clone()], &[]);
            let row = Row { what: format!("summary (--threads 0 = {cores})"), events, run: r, note: String::new() };
            print_row(&row);
            rows.push((n, row));
        }
        if wants("diagnose") {
            let args = ["diagnose".into(), jobs.clone()];
            let (r, prev) = measure_side_by_side(&bin, o.previous.as_deref(), &args, o.rounds);
            let note = goal_note(&r, events, 10.0) + &previous_note(&r, prev.as_ref(), events);
            let row = Row { what: format!("diagnose (--threads 0 = {cores})"), events, run: r, note };
            print_row(&row);
            rows.push((n, row));
        }
        // The report with the default worker threads, and on one core (`report1`): two workers hold
        // two ranks' state at once, so their CPU time includes the faults of the higher peak.
        for (command, threads) in [("report", None), ("report1", Some("1"))] {
            if !wants(command) {
                continue;
            }
            let page = o.dir.join("report.html");
            let mut args = vec!["report".into(), jobs.clone(), "-o".into(), page.display().to_string()];
            if let Some(t) = threads {
                args.extend(["--threads".into(), t.into()]);
            }
            let (r, prev) = measure_side_by_side(&bin, o.previous.as_deref(), &args, o.rounds);
            let size = dir_bytes(&page);
            let _ = std::fs::remove_file(&page);
            let note = format!(
                "{:.1} MB page; {}{}",
                size as f64 / 1e6,
                goal_note(&r, events, 10.0),
                previous_note(&r, prev.as_ref(), events)
            );
            let what = match threads {
                Some(t) => format!("report --threads {t}"),
                None => format!("report (--threads 0 = {cores})"),
            };
            let row = Row { what, events, run: r, note };
            print_row(&row);
            rows.push((n, row));
        }
        for f in &formats {
            let est = export_bytes_per_event(f) * events;
            if est > o.max_export_bytes {
                println!(
                    "| {:<38} | {:>9.1} M | {:>10} | {:>8} | {:>9} | {:>12} | {:>9} | skipped: ~{:.1} GB of output > --max-export-bytes",
                    format!("export --format {f}"),
                    events as f64 / 1e6,
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    est as f64 / 1e9
                );
                continue;
            }
            let out = o.dir.join(format!("out-{f}"));
            let _ = std::fs::remove_dir_all(&out);
            let _ = std::fs::remove_file(&out);
            let out_arg = match f.as_str() {
                "kineto" | "parquet" => out.clone(),
                "chrome" => out.with_extension("json"),
                _ => out.clone(),
            };
            let r = measure(
                &bin,
                &[
                    "export".into(),
                    jobs.clone(),
                    "--format".into(),
                    f.clone(),
                    "-o".into(),
                    out_arg.display().to_string(),
                ],
                &[],
            );
            let size = dir_bytes(&out_arg);
            let _ = std::fs::remove_dir_all(&out_arg);
            let _ = std::fs::remove_file(&out_arg);
            let row = Row {
                what: format!("export --format {f}"),
                events,
                run: r,
                note: format!("{:.0} MB written", size as f64 / 1e6),
            };
            print_row(&row);
            rows.push((n, row));
        }
        if !o.keep {
            let _ = std::fs::remove_dir_all(&job);
        }
    }

    if o.hta {
        println!();
        match hta_python() {
            None => println!("HTA: not installed (pip install HolisticTraceAnalysis into .venv); comparison skipped"),
            Some(py) => hta_compare(&o, &bin, &py, cores),
        }
    }
    {
        let py = if o.hta { hta_python() } else { None };
        kineto_import::bench(&o.dir, &bin, py.as_deref(), o.kineto_mb, o.keep, &real_traces(), &o.hta_limits);
    }
    if !o.keep {
        let _ = std::fs::remove_dir_all(&o.dir);
    }
}

fn hta_compare(o: &Opts, bin: &Path, py: &Path, cores: usize) {
    println!(
        "tprof summary vs Holistic Trace Analysis (load + temporal breakdown) on the same Kineto traces, python {}",
        py.display()
    );
    println!(
        "| {:<44} | {:>9} | {:>12} | {:>10} | {:>14} | {:>9} | {:>9}",
        "trace", "events", "tprof wall", "tprof RSS", "HTA load+tb", "HTA RSS", "HTA/tprof (wall)"
    );
    println!("|{:-<46}|{:-<11}|{:-<14}|{:-<12}|{:-<16}|{:-<11}|{:-<11}", "", "", "", "", "", "", "");
    let mut traces: Vec<(String, PathBuf, u64)> = Vec::new();
    // The generated job, exported to Kineto JSON (one file per rank).
    let job = o.dir.join("hta-job");
    let _ = std::fs::remove_dir_all(&job);
    let (_, events, _) = generate(&job, o.hta_events, o.ranks, cores.min(o.ranks as usize));
    let kdir = o.dir.join("hta-kineto");
    let _ = std::fs::remove_dir_all(&kdir);
    let r = measure(
        bin,
        &[
            "export".into(),
            job.display().to_string(),
            "--format".into(),
            "kineto".into(),
            "-o".into(),
            kdir.display().to_string(),
        ],
        &[],
    );
    let _ = std::fs::remove_dir_all(&job);
    if r.ok {
        traces.push((format!("generated job exported to kineto ({} ranks)", o.ranks), kdir.clone(), events));
    } else {
        println!("kineto export failed: {}", last_line(&r.stderr));
    }
    {
        for f in real_traces() {
            // HTA wants a directory: link the file into one of its own.
            let d = o.dir.join(format!("hta-{}", f.file_stem().unwrap_or_default().to_string_lossy()));
            let _ = std::fs::remove_dir_all(&d);
            if std::fs::create_dir_all(&d).is_ok()
                && std::fs::copy(&f, d.join(f.file_name().unwrap_or_default())).is_ok()
            {
                traces.push((format!("real: {}", f.file_name().unwrap_or_default().to_string_lossy()), d, 0));
            }
        }
    }
    for (name, dir, events) in traces {
        let t = measure(bin, &["summary".into(), dir.display().to_string(), "--threads".into(), "1".into()], &[]);
        let ev = if events > 0 { format!("{:.2} M", events as f64 / 1e6) } else { summary_events(bin, &dir) };
        match run_hta(py, &dir) {
            Some((inner, h)) => println!(
                "| {:<44} | {:>9} | {:>10.3} s | {:>10} | {:>6.2} s ({:.1}) | {:>9} | {:>8.1}x {}",
                name,
                ev,
                t.secs,
                mb(t.peak_rss_kb),
                inner,
                h.secs,
                mb(h.peak_rss_kb),
                inner / t.secs.max(1e-9),
                if inner / t.secs.max(1e-9) >= 20.0 { "(goal >= 20x: met)" } else { "(goal >= 20x: NOT met)" }
            ),
            None => {
                println!("| {:<44} | {:>9} | {:>10.3} s | {:>10} | HTA failed", name, ev, t.secs, mb(t.peak_rss_kb))
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    println!(
        "(HTA time is measured inside python around TraceAnalysis() + get_temporal_breakdown(), imports excluded;"
    );
    println!(" the number in parentheses is the whole python process. tprof time is the whole process.)");
}

/// The real traces shipped with the project (or wherever TPROF_KINETO_DATA says), `.json.gz`.
fn real_traces() -> Vec<PathBuf> {
    let shared = std::env::var_os("TPROF_KINETO_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/data/kineto")));
    let mut files: Vec<PathBuf> = std::fs::read_dir(&shared)
        .map(|rd| rd.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(".json.gz")).collect())
        .unwrap_or_default();
    files.sort();
    files
}

fn summary_events(bin: &Path, dir: &Path) -> String {
    let out = Command::new(bin).args(["summary", "--json", "--threads", "1"]).arg(dir).output();
    out.ok()
        .and_then(|o| serde_json::from_slice::<serde_json::Value>(&o.stdout).ok())
        .and_then(|v| v["totals"]["events"].as_u64())
        .map(|e| format!("{:.3} M", e as f64 / 1e6))
        .unwrap_or_else(|| "?".into())
}
