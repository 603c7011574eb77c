//! On-demand control: a Unix socket `<TPROF_OUT>/tprof-<pid>.sock` served by a listener thread, and
//! SIGUSR2 as a fallback (see `signals`). The line protocol is `tprof_format::control_protocol`.
//!
//! The socket is made owner-only (0600) in the output directory (created 0700 by `lifecycle`), and
//! every connection's peer uid (`SO_PEERCRED`) must equal this process's effective uid: anyone else
//! gets one `error:` line and the connection is closed.
//!
//! The listener holds no lock; a fork child has no listener thread and re-creates its own socket when
//! it re-initialises (the inherited listening descriptor is closed there).

use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::time::Duration;

use tprof_format::control_protocol::{self, status, Request};

use crate::base::config::config;
use crate::base::messages::{stderr_line, warn_line};
use crate::base::panic_fence::ffi_guard;
use crate::base::{process, switch};
use crate::capture::{self, Reason};
use crate::record::call_counters;
use crate::record::reentrancy::Reentrancy;

use super::{signals, writer_thread};

/// The listening descriptor and the pid that created it.
static LISTEN_FD: AtomicI32 = AtomicI32::new(-1);
static LISTEN_PID: AtomicU32 = AtomicU32::new(0);
/// The socket path of the process in `LISTEN_PID` (leaked per process; never freed).
static SOCKET_PATH: AtomicPtr<PathBuf> = AtomicPtr::new(std::ptr::null_mut());
static SAID_SIGUSR2: AtomicBool = AtomicBool::new(false);

/// Starts the listener (and SIGUSR2) for this process. Never fails the host program: problems are one
/// warning line.
pub fn start() {
    let pid = std::process::id();
    let previous = LISTEN_PID.swap(pid, Ordering::AcqRel);
    if previous == pid {
        return;
    }
    // A fork child inherits the parent's listening descriptor but not its thread: close it.
    let inherited = LISTEN_FD.swap(-1, Ordering::AcqRel);
    if inherited >= 0 && previous != 0 {
        // SAFETY: the descriptor was the parent's listener, duplicated into this child by fork; nothing
        // in the child uses it.
        unsafe { libc::close(inherited) };
    }
    SOCKET_PATH.store(std::ptr::null_mut(), Ordering::Release);
    let sig = signals::install_toggle();
    if sig == signals::Sigusr2::ApplicationOwns && !config().quiet && !SAID_SIGUSR2.swap(true, Ordering::AcqRel) {
        stderr_line("tprof: SIGUSR2 belongs to the application; control tprof with `tprof ctl` instead");
    }
    if let Err(e) = listen(pid) {
        warn_line(&format!("no control socket ({e}); `tprof ctl` cannot reach this process"));
    }
}

fn listen(pid: u32) -> std::io::Result<()> {
    let dir = &config().out_dir;
    // The socket is created 0600 and every connection's peer uid is checked (SO_PEERCRED), so a
    // shared output directory (an existing TPROF_OUT with mode 755) needs no warning.
    std::fs::metadata(dir)?;
    let path = control_protocol::socket_path(dir, pid);
    if path.as_os_str().len() >= 108 {
        return Err(std::io::Error::other(format!("{} is longer than a socket path may be", path.display())));
    }
    // A stale socket of a dead process with our pid (pid reuse) would make bind fail.
    if std::fs::symlink_metadata(&path).is_ok_and(|m| std::os::unix::fs::FileTypeExt::is_socket(&m.file_type())) {
        let _ = std::fs::remove_file(&path);
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    LISTEN_FD.store(listener.as_raw_fd(), Ordering::Release);
    SOCKET_PATH.store(Box::into_raw(Box::new(path.clone())), Ordering::Release);
    let spawned = std::thread::Builder::new().name("tprof-ctl".into()).spawn(move || {
        let _inside = Reentrancy::enter();
        ffi_guard((), || serve(listener));
    });
    if let Err(e) = spawned {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok(())
}

/// This process's socket path, if it has one.
pub fn current_socket() -> Option<&'static Path> {
    if LISTEN_PID.load(Ordering::Acquire) != std::process::id() {
        return None;
    }
    let p = SOCKET_PATH.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: non-null values are leaked boxes that are never freed.
    let path: &'static PathBuf = unsafe { &*p };
    Some(path.as_path())
}

/// Removes this process's socket (exit).
pub fn remove_socket() {
    if let Some(p) = current_socket() {
        let _ = std::fs::remove_file(p);
    }
}

fn serve(listener: UnixListener) {
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                let _ = handle(stream);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// The connecting process's uid (`SO_PEERCRED`).
pub fn peer_uid(stream: &UnixStream) -> std::io::Result<u32> {
    let mut cred = libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: SO_PEERCRED fills a `ucred` of `len` bytes that we own, on a connected Unix socket.
    let rc = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Whether a peer with `peer` uid may control a process running as `owner`.
pub fn peer_allowed(peer: u32, owner: u32) -> bool {
    peer == owner
}

fn handle(stream: UnixStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(2)))?;
    stream.set_write_timeout(Some(Duration::from_secs(2)))?;
    let mut out = &stream;
    // SAFETY: geteuid has no preconditions.
    let owner = unsafe { libc::geteuid() };
    let peer = peer_uid(&stream)?;
    // Read the request first in every case: closing with unread input would reset the connection
    // before the peer reads our answer.
    let mut line = String::new();
    BufReader::new((&stream).take_limited()).read_line(&mut line)?;
    if !peer_allowed(peer, owner) {
        out.write_all(
            format!("error: permission denied: uid {peer} may not control this process (owner uid {owner})\n")
                .as_bytes(),
        )?;
        return Ok(());
    }
    let reply = execute(line.trim());
    out.write_all(reply.as_bytes())
}

/// Bounded reads (a request is one short line).
trait TakeLimited: std::io::Read + Sized {
    fn take_limited(self) -> std::io::Take<Self> {
        self.take(1024)
    }
}
impl<R: std::io::Read> TakeLimited for R {}

fn window_word(open: bool) -> &'static str {
    if open {
        "open"
    } else {
        "closed"
    }
}

/// Runs one request; returns the reply text.
pub fn execute(line: &str) -> String {
    let req = match Request::parse(line) {
        Ok(r) => r,
        Err(e) => return format!("error: {e}\n"),
    };
    if switch::state() != switch::ENABLED {
        return "error: tprof is not recording in this process\n".into();
    }
    match req {
        Request::Start(until) => {
            let changed = capture::start_manual(until, Reason::Control);
            let was = if changed { "" } else { " was=open" };
            format!("ok window={}{was}\n", window_word(switch::is_recording()))
        }
        Request::Stop => {
            let changed = capture::stop_manual(Reason::Control);
            let was = if changed { "" } else { " was=closed" };
            format!("ok window={}{was}\n", window_word(switch::is_recording()))
        }
        Request::Dump => {
            if dump_and_wait(Reason::Control, Duration::from_secs(2)) {
                "ok dumped\n".into()
            } else {
                "error: the ring writer did not commit within 2 s\n".into()
            }
        }
        Request::Status => status_text(),
    }
}

/// Requests a dump and waits until the writer committed it (false after `timeout` or without writer).
fn dump_and_wait(reason: Reason, timeout: Duration) -> bool {
    if !writer_thread::running() {
        return false;
    }
    let seq = capture::request_dump_for(reason);
    let deadline = std::time::Instant::now() + timeout;
    while capture::dumps_done() < seq {
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

fn status_text() -> String {
    let st = capture::status();
    let (calls, closed) = call_counters::calls();
    let (rank, _, _, _) = process::job_identity();
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").map(|h| h.trim().to_string()).unwrap_or_default();
    let ring = process::ring_path().map(|p| p.display().to_string()).unwrap_or_default();
    let mut s = String::from("ok\n");
    let mut kv = |k: &str, v: String| {
        s.push_str(k);
        s.push('=');
        s.push_str(&v);
        s.push('\n');
    };
    kv(status::PID, std::process::id().to_string());
    kv(status::RANK, rank.map(|r| r.to_string()).unwrap_or_else(|| "-".into()));
    kv(status::HOST, host);
    kv(status::MODE, st.mode.name().into());
    kv(status::WINDOW, window_word(st.open).into());
    kv(status::MANUAL, st.manual);
    kv(status::WINDOWS, st.windows.to_string());
    kv(status::EVENTS, st.events.to_string());
    kv(status::DROPPED, st.dropped.to_string());
    kv(status::CALLS, calls.to_string());
    kv(status::CALLS_UNRECORDED, closed.to_string());
    kv(status::RING, ring);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_uid_is_allowed() {
        assert!(peer_allowed(1000, 1000));
        assert!(!peer_allowed(65534, 1000));
        assert!(!peer_allowed(0, 1000));
    }

    #[test]
    fn peer_uid_is_read_from_the_kernel() {
        let (a, _b) = UnixStream::pair().unwrap();
        // SAFETY: geteuid has no preconditions.
        assert_eq!(peer_uid(&a).unwrap(), unsafe { libc::geteuid() });
    }
}
