//! The control protocol between `tprof ctl` and a running process: where its socket is, the request
//! lines and the keys of the status reply. The shim serves it (its `service::control_socket`), the
//! decoder's `tprof ctl` speaks it.
//!
//! One request line per connection, then the reply, then the server closes the connection:
//!
//! ```text
//! start [duration_ms=N] [steps=N]   -> ok window=open [was=open]
//! stop                              -> ok window=closed [was=closed]
//! dump                              -> ok dumped | error: ...
//! status                            -> ok, then key=value lines (the keys in [`status`])
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The socket of process `pid` in its output directory `dir` (`<TPROF_OUT>/tprof-<pid>.sock`).
pub fn socket_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("tprof-{pid}.sock"))
}

/// The pid in a control socket's file name (`tprof-<pid>.sock`), None for any other name.
pub fn socket_pid(file_name: &str) -> Option<u32> {
    file_name.strip_prefix("tprof-")?.strip_suffix(".sock")?.parse::<u32>().ok()
}

/// How a window opened on demand ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Until {
    /// At `stop` (or SIGUSR2).
    Stopped,
    /// After this long.
    Elapsed(Duration),
    /// After this many complete steps.
    Steps(u64),
}

/// One request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    Start(Until),
    Stop,
    Dump,
    Status,
}

impl Request {
    /// Parses one request line.
    pub fn parse(line: &str) -> Result<Request, String> {
        let mut words = line.split_whitespace();
        let verb = words.next().ok_or("empty request")?;
        let mut until = Until::Stopped;
        for w in words {
            let (k, v) = w.split_once('=').ok_or_else(|| format!("bad argument {w:?}"))?;
            let n: u64 = v.parse().map_err(|_| format!("bad number in {w:?}"))?;
            until = match k {
                "duration_ms" if n > 0 => Until::Elapsed(Duration::from_millis(n)),
                "steps" if n > 0 => Until::Steps(n),
                _ => return Err(format!("bad argument {w:?}")),
            };
        }
        match verb {
            "start" => Ok(Request::Start(until)),
            "stop" | "dump" | "status" if until != Until::Stopped => Err(format!("{verb} takes no arguments")),
            "stop" => Ok(Request::Stop),
            "dump" => Ok(Request::Dump),
            "status" => Ok(Request::Status),
            _ => Err(format!("unknown command {verb:?} (start, stop, dump, status)")),
        }
    }

    /// The request line (without its newline). A duration is sent in whole milliseconds, at least 1.
    pub fn line(&self) -> String {
        match self {
            Request::Start(Until::Stopped) => "start".into(),
            Request::Start(Until::Elapsed(d)) => format!("start duration_ms={}", d.as_millis().max(1)),
            Request::Start(Until::Steps(n)) => format!("start steps={n}"),
            Request::Stop => "stop".into(),
            Request::Dump => "dump".into(),
            Request::Status => "status".into(),
        }
    }
}

/// The keys of the status reply, in the order the shim writes them.
pub mod status {
    pub const PID: &str = "pid";
    pub const RANK: &str = "rank";
    pub const HOST: &str = "host";
    pub const MODE: &str = "mode";
    pub const WINDOW: &str = "window";
    pub const MANUAL: &str = "manual";
    pub const WINDOWS: &str = "windows";
    pub const EVENTS: &str = "events";
    pub const DROPPED: &str = "dropped";
    pub const CALLS: &str = "calls";
    pub const CALLS_UNRECORDED: &str = "calls_unrecorded";
    pub const RING: &str = "ring";
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let parse = Request::parse;
        assert_eq!(parse("start"), Ok(Request::Start(Until::Stopped)));
        assert_eq!(parse("start duration_ms=5000"), Ok(Request::Start(Until::Elapsed(Duration::from_secs(5)))));
        assert_eq!(parse("start steps=10"), Ok(Request::Start(Until::Steps(10))));
        assert_eq!(parse(" stop "), Ok(Request::Stop));
        assert_eq!(parse("dump"), Ok(Request::Dump));
        assert_eq!(parse("status"), Ok(Request::Status));
        for bad in ["", "go", "start steps=0", "start steps=x", "stop steps=3", "start when=now"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn lines_parse_back() {
        for r in [
            Request::Start(Until::Stopped),
            Request::Start(Until::Elapsed(Duration::from_millis(250))),
            Request::Start(Until::Steps(3)),
            Request::Stop,
            Request::Dump,
            Request::Status,
        ] {
            assert_eq!(Request::parse(&r.line()), Ok(r.clone()), "{}", r.line());
        }
        assert_eq!(Request::Start(Until::Elapsed(Duration::from_micros(10))).line(), "start duration_ms=1");
    }

    #[test]
    fn socket_names() {
        let p = socket_path(Path::new("/o"), 12);
        assert_eq!(p, Path::new("/o/tprof-12.sock"));
        assert_eq!(socket_pid("tprof-12.sock"), Some(12));
        assert_eq!(socket_pid("tprof-x.sock"), None);
        assert_eq!(socket_pid("host-r0-p12.tprof"), None);
    }
}
