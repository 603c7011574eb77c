//! `tprof ctl`: start, stop, dump or query capture in running processes through their control sockets
//! (`<out>/tprof-<pid>.sock`, created by libtprof; the line protocol is `tprof_format::control_protocol`).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Args, Subcommand};
use tprof_format::control_protocol::{self, status, Request, Until};
use tprof_format::settings::{self, vars};

const EXAMPLES: &str = "EXAMPLES:
    tprof ctl --all start --duration 5s     capture 5 s on every rank of the job now
    tprof ctl --all start --steps 10        capture the next 10 steps on every rank
    tprof ctl 12345 stop
    tprof ctl --all dump                    flight recorder: make the last events durable now
    tprof ctl --all status
    tprof ctl --out /scratch/run7 --all status";

/// Parsed `tprof ctl` arguments.
#[derive(Debug, Args)]
#[command(after_help = EXAMPLES)]
pub struct CtlCmd {
    /// Output directory the processes write to (their TPROF_OUT): where the sockets are.
    #[arg(long, default_value = settings::DEFAULT_OUT_DIR, global = true)]
    pub out: PathBuf,
    /// Every process with a socket in the output directory (every rank of a job).
    #[arg(long, global = true)]
    pub all: bool,
    /// The process to control (its pid), unless --all.
    pub pid: Option<u32>,
    #[command(subcommand)]
    pub action: CtlAction,
}

/// What to do.
#[derive(Debug, Clone, Subcommand)]
pub enum CtlAction {
    /// Open the capture window now.
    Start {
        /// Close it again after this long (e.g. 5s, 500ms, 2m).
        #[arg(long, value_name = "DURATION", conflicts_with = "steps")]
        duration: Option<String>,
        /// Close it again after this many complete training steps.
        #[arg(long, value_name = "N")]
        steps: Option<u64>,
    },
    /// Close the capture window now.
    Stop,
    /// Commit the ring now with a FlightDump marker (the flight recorder's "save").
    Dump,
    /// Mode, window state, events, drops and ring path.
    Status,
}

/// Parses `5s`, `500ms`, `2m`, `1h`, `7` (seconds); not zero.
pub fn parse_duration(s: &str) -> Option<Duration> {
    settings::parse_duration(s).filter(|d| !d.is_zero())
}

/// The request line for an action.
pub fn request_line(action: &CtlAction) -> Result<String, String> {
    let request = match action {
        CtlAction::Start { duration: Some(d), .. } => {
            let d = parse_duration(d).ok_or_else(|| format!("--duration {d:?}: not a duration like 5s or 500ms"))?;
            Request::Start(Until::Elapsed(d))
        }
        CtlAction::Start { steps: Some(0), .. } => return Err("--steps must be at least 1".into()),
        CtlAction::Start { steps: Some(n), .. } => Request::Start(Until::Steps(*n)),
        CtlAction::Start { .. } => Request::Start(Until::Stopped),
        CtlAction::Stop => Request::Stop,
        CtlAction::Dump => Request::Dump,
        CtlAction::Status => Request::Status,
    };
    Ok(request.line())
}

/// Every `tprof-<pid>.sock` in `dir`, by pid.
pub fn find_sockets(dir: &Path) -> Vec<(u32, PathBuf)> {
    let mut v: Vec<(u32, PathBuf)> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let pid = control_protocol::socket_pid(&name)?;
                    Some((pid, e.path()))
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// The output directory of a running process from its environment (TPROF_OUT, relative to its cwd).
fn out_dir_of(pid: u32) -> Option<PathBuf> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let out = env
        .split(|&b| b == 0)
        .find_map(|kv| {
            let v = kv.strip_prefix(vars::OUT.as_bytes())?.strip_prefix(b"=")?;
            Some(String::from_utf8_lossy(v).into_owned())
        })
        .unwrap_or_else(|| settings::DEFAULT_OUT_DIR.into());
    let out = PathBuf::from(out);
    if out.is_absolute() {
        Some(out)
    } else {
        Some(std::fs::read_link(format!("/proc/{pid}/cwd")).ok()?.join(out))
    }
}

/// Sends one request line to a socket and returns the reply.
pub fn send(socket: &Path, line: &str, timeout: Duration) -> std::io::Result<String> {
    let mut s = UnixStream::connect(socket)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.write_all(format!("{line}\n").as_bytes())?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    Ok(reply)
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// A socket nobody serves: its process is gone, or nothing listens on it (a socket file left by a
/// killed process, whose pid may have been reused since).
fn is_stale(pid: u32, e: &std::io::Error) -> bool {
    matches!(e.kind(), std::io::ErrorKind::ConnectionRefused | std::io::ErrorKind::NotFound) || !process_alive(pid)
}

/// Runs `tprof ctl`; returns the exit status (0 when every process answered `ok`).
pub fn run(c: &CtlCmd) -> i32 {
    let line = match request_line(&c.action) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("tprof ctl: {e}");
            return 2;
        }
    };
    let targets: Vec<(u32, PathBuf)> = match (c.all, c.pid) {
        (true, Some(_)) => {
            eprintln!("tprof ctl: give a PID or --all, not both");
            return 2;
        }
        (false, None) => {
            eprintln!("tprof ctl: which process? give its PID or --all (every process in {})", c.out.display());
            return 2;
        }
        (true, None) => {
            let found = find_sockets(&c.out);
            if found.is_empty() {
                eprintln!(
                    "tprof ctl: no control sockets in {} (is the job running under tprof with TPROF_OUT={0}? \
                     pass --out DIR otherwise)",
                    c.out.display()
                );
                return 1;
            }
            found
        }
        (false, Some(pid)) => {
            let mut p = control_protocol::socket_path(&c.out, pid);
            if !p.exists() {
                if let Some(dir) = out_dir_of(pid) {
                    p = control_protocol::socket_path(&dir, pid);
                }
            }
            if !p.exists() {
                let why = if process_alive(pid) { "is it running under tprof?" } else { "no such process" };
                eprintln!("tprof ctl: no control socket for pid {pid} in {} ({why})", c.out.display());
                return 1;
            }
            vec![(pid, p)]
        }
    };
    let mut failures = 0;
    let mut stale: Vec<String> = Vec::new();
    // Every process gets the request even when stdout is gone: printing stops, acting does not.
    let mut out = Output::default();
    for (pid, path) in &targets {
        match send(path, &line, Duration::from_secs(5)) {
            Ok(reply) => {
                let ok = reply.starts_with("ok");
                if !ok {
                    failures += 1;
                }
                out.line(&reply_line(*pid, &c.action, &reply));
            }
            Err(e) if c.all && is_stale(*pid, &e) => {
                stale.push(path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default());
            }
            Err(e) => {
                failures += 1;
                let advice = match e.kind() {
                    std::io::ErrorKind::PermissionDenied => " (the socket belongs to another user)",
                    std::io::ErrorKind::ConnectionRefused if !process_alive(*pid) => " (the process is gone)",
                    std::io::ErrorKind::ConnectionRefused => " (nobody listens: a stale socket)",
                    _ => "",
                };
                out.line(&format!("pid {pid}: error: {e}{advice}"));
            }
        }
    }
    if !stale.is_empty() {
        eprintln!(
            "tprof ctl: ignored {} stale socket(s) in {} (no process listens): {}",
            stale.len(),
            c.out.display(),
            stale.join(" ")
        );
        if stale.len() == targets.len() {
            return 1;
        }
    }
    if failures > 0 || out.failed == Some(1) {
        1
    } else {
        0
    }
}

/// Lines to stdout until a write fails (then the exit status it calls for).
#[derive(Default)]
struct Output {
    failed: Option<i32>,
}

impl Output {
    fn line(&mut self, text: &str) {
        if self.failed.is_none() {
            self.failed = super::stdout::println(text).err();
        }
    }
}

fn reply_line(pid: u32, action: &CtlAction, reply: &str) -> String {
    let mut lines = reply.lines();
    let first = lines.next().unwrap_or("error: empty reply");
    match action {
        CtlAction::Status if first == "ok" => {
            let kv: Vec<(String, String)> =
                lines.filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_string(), v.to_string()))).collect();
            let get = |k: &str| kv.iter().find(|(n, _)| n == k).map(|(_, v)| v.as_str()).unwrap_or("-");
            format!(
                "pid {pid} rank {}: mode={} window={} manual={} windows={} events={} dropped={} calls={} \
                 (unrecorded {}) ring={}",
                get(status::RANK),
                get(status::MODE),
                get(status::WINDOW),
                get(status::MANUAL),
                get(status::WINDOWS),
                get(status::EVENTS),
                get(status::DROPPED),
                get(status::CALLS),
                get(status::CALLS_UNRECORDED),
                get(status::RING)
            )
        }
        _ => format!("pid {pid}: {first}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_lines() {
        let start = |duration: Option<&str>, steps| CtlAction::Start { duration: duration.map(String::from), steps };
        assert_eq!(request_line(&start(Some("5s"), None)).unwrap(), "start duration_ms=5000");
        assert_eq!(request_line(&start(Some("250ms"), None)).unwrap(), "start duration_ms=250");
        assert_eq!(request_line(&start(None, Some(10))).unwrap(), "start steps=10");
        assert_eq!(request_line(&start(None, None)).unwrap(), "start");
        assert!(request_line(&start(Some("soon"), None)).is_err());
        assert!(request_line(&start(None, Some(0))).is_err());
        assert_eq!(request_line(&CtlAction::Status).unwrap(), "status");
    }

    #[test]
    fn sockets_are_found_by_name() {
        let d = tempfile::tempdir().unwrap();
        for n in ["tprof-12.sock", "tprof-7.sock", "tprof-x.sock", "host-r0-p12.tprof"] {
            std::fs::write(d.path().join(n), b"").unwrap();
        }
        let pids: Vec<u32> = find_sockets(d.path()).into_iter().map(|(p, _)| p).collect();
        assert_eq!(pids, vec![7, 12]);
    }
}
