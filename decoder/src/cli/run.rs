//! `tprof run`: run a command (and its children) under libtprof, pass its exit status through, then say
//! where the rings are and what to run next.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use clap::{Args, ValueEnum};
use tprof_format::settings::{self, vars, DutyCycle, Mode, StepRange};

const EXAMPLES: &str = "EXAMPLES:
    tprof run -- python train.py                          full trace of every rank
    tprof run --mode steps --steps 100-110 -- torchrun --nproc-per-node 8 train.py
    tprof run --mode sample --sample 2s/60s -- python train.py
    tprof run --mode flight --out /scratch/flight -- python train.py
    tprof run --mode metrics --metrics-file /var/lib/node_exporter/tprof.prom -- python train.py";

/// Capture modes (TPROF_MODE).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RunMode {
    /// Everything from the start.
    Full,
    /// Only the steps given with --steps.
    Steps,
    /// A duty cycle given with --sample.
    Sample,
    /// Always on, the ring wraps; saved on `tprof ctl dump`, `TPROF_DUMP_SIGNAL`, a crash and at exit.
    Flight,
    /// Counters only (with --metrics-file).
    Metrics,
}

impl RunMode {
    fn mode(self) -> Mode {
        match self {
            RunMode::Full => Mode::Full,
            RunMode::Steps => Mode::Steps,
            RunMode::Sample => Mode::Sample,
            RunMode::Flight => Mode::Flight,
            RunMode::Metrics => Mode::Metrics,
        }
    }

    fn name(self) -> &'static str {
        self.mode().name()
    }
}

/// Parsed `tprof run` arguments.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct RunCmd {
    /// Capture mode.
    #[arg(long, value_enum, default_value = "full")]
    pub mode: RunMode,
    /// Where the ring files (one per process) and control sockets go.
    #[arg(long, default_value = settings::DEFAULT_OUT_DIR)]
    pub out: PathBuf,
    /// Steps to capture in steps mode: A-B, optionally :every=N (implies --mode steps).
    #[arg(long, value_name = "A-B[:every=N]")]
    pub steps: Option<String>,
    /// Duty cycle in sample mode: ON/PERIOD, e.g. 2s/60s (implies --mode sample).
    #[arg(long, value_name = "ON/PERIOD")]
    pub sample: Option<String>,
    /// Ring size per process in MiB (flight mode: how much history is kept).
    #[arg(long, value_name = "MIB")]
    pub ring_mb: Option<u64>,
    /// Write Prometheus metrics (textfile-collector format) to this file.
    #[arg(long, value_name = "FILE")]
    pub metrics_file: Option<PathBuf>,
    /// How often the metrics file is rewritten (default 10s).
    #[arg(long, value_name = "DURATION")]
    pub metrics_interval: Option<String>,
    /// libtprof.so to use (default: the one next to this tprof binary).
    #[arg(long, value_name = "PATH")]
    pub lib: Option<PathBuf>,
    /// The command to run, after `--`.
    #[arg(required = true, last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

fn valid_steps(s: &str) -> bool {
    StepRange::parse(s).is_some()
}

fn valid_sample(s: &str) -> bool {
    DutyCycle::parse(s).is_some()
}

/// The libtprof.so next to the running tprof binary.
fn default_lib() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.join("libtprof.so");
    p.exists().then_some(p)
}

/// The environment the command gets: (name, value) pairs to set.
pub fn environment(c: &RunCmd, lib: &Path, out: &Path, ld_preload: Option<&str>) -> Vec<(String, String)> {
    let mode = match (c.mode, &c.steps, &c.sample) {
        (RunMode::Full, Some(_), _) => RunMode::Steps,
        (RunMode::Full, None, Some(_)) => RunMode::Sample,
        (m, _, _) => m,
    };
    let lib_s = lib.display().to_string();
    let preload = match ld_preload.map(str::trim).filter(|p| !p.is_empty()) {
        Some(existing) if existing.split([':', ' ']).any(|p| p == lib_s) => existing.to_string(),
        Some(existing) => format!("{lib_s}:{existing}"),
        None => lib_s.clone(),
    };
    let mut env = vec![
        ("LD_PRELOAD".to_string(), preload),
        ("NVTX_INJECTION64_PATH".to_string(), lib_s),
        (vars::OUT.to_string(), out.display().to_string()),
        (vars::MODE.to_string(), mode.name().to_string()),
    ];
    let mut set = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            env.push((k.to_string(), v));
        }
    };
    set(vars::STEPS, c.steps.clone());
    set(vars::SAMPLE, c.sample.clone());
    let ring_var = if mode == RunMode::Flight { vars::FLIGHT_MB } else { vars::RING_MB };
    set(ring_var, c.ring_mb.map(|m| m.to_string()));
    set(vars::METRICS_FILE, c.metrics_file.as_ref().map(|p| absolute(p).display().to_string()));
    set(vars::METRICS_INTERVAL, c.metrics_interval.clone());
    env
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().map(|d| d.join(p)).unwrap_or_else(|_| p.to_path_buf())
    }
}

/// Ring files in `out` written since `since`.
fn rings_since(out: &Path, since: SystemTime) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(out)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "tprof"))
                .filter(|e| e.metadata().and_then(|m| m.modified()).is_ok_and(|t| t + Duration::from_secs(1) >= since))
                .map(|e| e.path())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        15 => "SIGTERM",
        _ => "signal",
    }
}

/// Runs `tprof run`; returns the command's exit status (128+n when a signal ended it).
pub fn run(c: &RunCmd) -> i32 {
    if let Some(s) = &c.steps {
        if !valid_steps(s) {
            eprintln!("tprof run: --steps {s:?}: expected A-B or A-B:every=N (e.g. 100-110)");
            return 2;
        }
    }
    if let Some(s) = &c.sample {
        if !valid_sample(s) {
            eprintln!("tprof run: --sample {s:?}: expected ON/PERIOD (e.g. 2s/60s)");
            return 2;
        }
    }
    let lib = match c.lib.clone().or_else(default_lib) {
        Some(l) if l.exists() => absolute(&l),
        Some(l) => {
            eprintln!("tprof run: {} does not exist", l.display());
            return 2;
        }
        None => {
            eprintln!(
                "tprof run: libtprof.so is not next to this tprof binary; build it with \
                 `cargo build --release -p tprof-shim` or pass --lib PATH"
            );
            return 2;
        }
    };
    let out = absolute(&c.out);
    if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode_0700().create(&out) {
        eprintln!("tprof run: cannot create {} ({e})", out.display());
        return 2;
    }
    let env = environment(c, &lib, &out, std::env::var("LD_PRELOAD").ok().as_deref());
    let mut cmd = Command::new(&c.command[0]);
    cmd.args(&c.command[1..]);
    for (k, v) in &env {
        cmd.env(k, v);
    }
    // While the command runs, terminal signals reach it directly (same process group); tprof stays
    // alive to report, and forwards SIGTERM / SIGHUP sent to it alone.
    let received = Arc::new(AtomicUsize::new(0));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGQUIT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        let _ = signal_hook::flag::register_usize(sig, Arc::clone(&received), sig as usize);
    }
    let started = SystemTime::now();
    let mut child = match cmd.spawn() {
        Ok(ch) => ch,
        Err(e) => {
            eprintln!("tprof run: cannot run {:?}: {e}", c.command[0]);
            return if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
        }
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Ok(st),
            Ok(None) => {}
            Err(e) => break Err(e),
        }
        let sig = received.swap(0, Ordering::AcqRel) as i32;
        if sig == signal_hook::consts::SIGTERM || sig == signal_hook::consts::SIGHUP {
            let _ = Command::new("kill").arg(format!("-{sig}")).arg(child.id().to_string()).status();
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let code = match status {
        Ok(st) => {
            use std::os::unix::process::ExitStatusExt;
            match (st.code(), st.signal()) {
                (Some(code), _) => code,
                (None, Some(sig)) => {
                    eprintln!("tprof run: the command was killed by {} ({sig})", signal_name(sig));
                    128 + sig
                }
                _ => 1,
            }
        }
        Err(e) => {
            eprintln!("tprof run: waiting for the command failed: {e}");
            1
        }
    };
    report(&out, started, c.mode);
    code
}

fn report(out: &Path, since: SystemTime, mode: RunMode) {
    let rings = rings_since(out, since);
    let shown = out.display();
    if rings.is_empty() {
        eprintln!(
            "tprof: no ring file was written in {shown} (the command made no CUDA call, or TPROF_DISABLE was set)"
        );
        return;
    }
    eprintln!("tprof: {} ring file(s) in {shown} ({} mode):", rings.len(), mode.name());
    for r in rings.iter().take(8) {
        eprintln!("  {}", r.display());
    }
    if rings.len() > 8 {
        eprintln!("  ... and {} more", rings.len() - 8);
    }
    eprintln!("next:");
    eprintln!("  tprof summary {shown}");
    eprintln!("  tprof diagnose {shown}");
    eprintln!("  tprof export {shown} --format perfetto -o trace.pftrace");
}

trait DirMode {
    fn mode_0700(&mut self) -> &mut Self;
}

impl DirMode for std::fs::DirBuilder {
    fn mode_0700(&mut self) -> &mut Self {
        std::os::unix::fs::DirBuilderExt::mode(self, 0o700)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(args: &[&str]) -> RunCmd {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            run: RunCmd,
        }
        let mut v = vec!["tprof-run"];
        v.extend_from_slice(args);
        T::parse_from(v).run
    }

    #[test]
    fn environment_for_the_command() {
        let c = cmd(&["--steps", "10-12", "--", "simtrain", "--ranks", "2"]);
        assert_eq!(c.command, vec!["simtrain", "--ranks", "2"]);
        let env = environment(&c, Path::new("/l/libtprof.so"), Path::new("/o"), Some("/x/libfoo.so"));
        let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        assert_eq!(get("LD_PRELOAD").as_deref(), Some("/l/libtprof.so:/x/libfoo.so"));
        assert_eq!(get("NVTX_INJECTION64_PATH").as_deref(), Some("/l/libtprof.so"));
        assert_eq!(get("TPROF_MODE").as_deref(), Some("steps"));
        assert_eq!(get("TPROF_STEPS").as_deref(), Some("10-12"));
        assert_eq!(get("TPROF_OUT").as_deref(), Some("/o"));
        let c = cmd(&["--mode", "flight", "--ring-mb", "32", "--", "x"]);
        let env = environment(&c, Path::new("/l/libtprof.so"), Path::new("/o"), None);
        assert!(env.contains(&("TPROF_FLIGHT_MB".into(), "32".into())));
        assert!(env.contains(&("LD_PRELOAD".into(), "/l/libtprof.so".into())));
    }

    #[test]
    fn validation() {
        assert!(valid_steps("100-110") && valid_steps("100-110:every=1000") && valid_steps("7"));
        assert!(!valid_steps("110-100") && !valid_steps("a-b") && !valid_steps("1-2:often=3"));
        assert!(valid_sample("2s/60s") && !valid_sample("2s") && !valid_sample("x/1s"));
    }
}
