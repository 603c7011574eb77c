//! On-demand control: a Unix socket `<TPROF_OUT>/tprof-<pid>.sock` served by one thread
//! (`control_server`: several connections at once, each with a deadline). The line protocol is
//! `tprof_format::control_protocol`.
//!
//! The socket is made owner-only (0600) in the output directory (created 0700 by `lifecycle`, refused
//! there when another user could write to it), and every connection's peer uid (`SO_PEERCRED`) must
//! equal this process's effective uid: anyone else gets one `error:` line and the connection is closed.
//!
//! The socket file goes away with the process: at exit (the writer's stop hook) and, through
//! [`unlink_from_signal`], in the fatal- and termination-signal handlers (`signals`). A socket left by
//! a process of this host that died without either (SIGKILL) is removed by the next process that
//! starts in the directory: one with our own pid (pid reuse) before we bind, the others once their pid
//! is gone, nobody listens and a ring of this host with that pid sits beside it (a shared output
//! directory also holds the live sockets of other hosts' processes, which are left alone).
//!
//! The listener holds no lock; a fork child has no listener thread and re-creates its own socket when
//! it re-initialises (the inherited listening descriptor is closed there).

use std::ffi::{c_char, CString};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};

use tprof_format::control_protocol::{self, status, Request};

use crate::base::config::config;
use crate::base::messages::warn_line;
use crate::base::panic_fence::ffi_guard;
use crate::base::{process, switch};
use crate::capture::{self, Reason};
use crate::record::call_counters;
use crate::record::reentrancy::Reentrancy;

use super::control_server::{self, Handlers, Outcome};
use super::writer_thread;

/// The listening descriptor and the pid that created it.
static LISTEN_FD: AtomicI32 = AtomicI32::new(-1);
static LISTEN_PID: AtomicU32 = AtomicU32::new(0);
/// The socket path of the process in `LISTEN_PID` (leaked per process; never freed), and the same as a
/// C string for the signal handlers.
static SOCKET_PATH: AtomicPtr<PathBuf> = AtomicPtr::new(std::ptr::null_mut());
static SOCKET_CPATH: AtomicPtr<c_char> = AtomicPtr::new(std::ptr::null_mut());

/// Starts the listener for this process. Never fails the host program: problems are one warning line.
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
    SOCKET_CPATH.store(std::ptr::null_mut(), Ordering::Release);
    SOCKET_PATH.store(std::ptr::null_mut(), Ordering::Release);
    if let Err(e) = listen(pid) {
        warn_line(&format!("no control socket ({e}); `tprof ctl` cannot reach this process"));
    }
}

fn listen(pid: u32) -> std::io::Result<()> {
    let dir = &config().out_dir;
    std::fs::metadata(dir)?;
    let path = control_protocol::socket_path(dir, pid);
    if path.as_os_str().len() >= 108 {
        return Err(std::io::Error::other(format!("{} is longer than a socket path may be", path.display())));
    }
    // A socket with our pid is stale (a dead process of this host, pid reused) unless someone listens
    // on it (a process with the same pid on another host sharing the directory).
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket()) {
        if UnixStream::connect(&path).is_ok() {
            return Err(std::io::Error::other(format!("{} is in use by another live process", path.display())));
        }
        let _ = std::fs::remove_file(&path);
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    LISTEN_FD.store(listener.as_raw_fd(), Ordering::Release);
    let cpath = CString::new(path.as_os_str().as_bytes()).map_err(std::io::Error::other)?;
    SOCKET_PATH.store(Box::into_raw(Box::new(path.clone())), Ordering::Release);
    SOCKET_CPATH.store(cpath.into_raw(), Ordering::Release);
    let dir = dir.clone();
    let spawned = std::thread::Builder::new().name("tprof-ctl".into()).spawn(move || {
        let _inside = Reentrancy::enter();
        ffi_guard((), || {
            remove_stale_sockets(&dir, pid);
            control_server::serve(listener, Handlers { refuse, execute, dumps_done: capture::dumps_done })
        });
    });
    if let Err(e) = spawned {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok(())
}

/// Removes the sockets in `dir` left by dead processes of this host (see the module notes).
fn remove_stale_sockets(dir: &Path, own_pid: u32) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let names: Vec<String> =
        entries.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
    let host = process::hostname();
    for name in &names {
        let Some(pid) = control_protocol::socket_pid(name).filter(|&p| p != own_pid) else { continue };
        if process_exists(pid) || !names.iter().any(|n| is_ring_of(n, &host, pid)) {
            continue;
        }
        let path = dir.join(name);
        let is_socket = std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket());
        if is_socket && UnixStream::connect(&path).is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Whether `name` is a ring file this host's process `pid` wrote (`<host>-r<rank>-p<pid>[-N].tprof`).
fn is_ring_of(name: &str, host: &str, pid: u32) -> bool {
    let own = tprof_format::ring_file_name(host, None, pid);
    let Some(prefix) = own.strip_suffix(&format!("rNA-p{pid}.tprof")) else { return false };
    let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_suffix(".tprof")) else { return false };
    let tail = format!("-p{pid}");
    rest.ends_with(&tail)
        || rest.rsplit_once('-').is_some_and(|(head, n)| head.ends_with(&tail) && n.bytes().all(|b| b.is_ascii_digit()))
}

fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else { return false };
    // SAFETY: signal 0 only checks that the process exists; nothing is delivered.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Removes this process's socket file from a signal handler: async-signal-safe (atomic loads,
/// `getpid`, `unlink`); does nothing in a process that has no socket of its own (a fork child that did
/// not re-initialise).
pub fn unlink_from_signal() {
    let path = SOCKET_CPATH.load(Ordering::Acquire);
    // SAFETY: getpid has no preconditions and is async-signal-safe.
    let me = unsafe { libc::getpid() } as u32;
    if path.is_null() || LISTEN_PID.load(Ordering::Acquire) != me {
        return;
    }
    // SAFETY: `path` is a leaked, never-freed NUL-terminated string; unlink is async-signal-safe.
    unsafe { libc::unlink(path) };
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

/// The refusal a connection gets when its peer is not this process's user (None: allowed).
fn refuse(stream: &UnixStream) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let owner = unsafe { libc::geteuid() };
    match peer_uid(stream) {
        Ok(peer) if peer_allowed(peer, owner) => None,
        Ok(peer) => {
            Some(format!("error: permission denied: uid {peer} may not control this process (owner uid {owner})\n"))
        }
        Err(e) => Some(format!("error: cannot identify the peer ({e})\n")),
    }
}

fn window_word(open: bool) -> &'static str {
    if open {
        "open"
    } else {
        "closed"
    }
}

/// Runs one request: its reply, or the dump to wait for.
fn execute(line: &str) -> Outcome {
    match Request::parse(line) {
        Ok(Request::Dump) if switch::state() == switch::ENABLED => {
            if writer_thread::running() {
                Outcome::AwaitDump(capture::request_dump_for(Reason::Control))
            } else {
                Outcome::Reply("error: the ring writer is not running\n".into())
            }
        }
        _ => Outcome::Reply(reply_text(line)),
    }
}

/// The reply to a request that needs no waiting.
pub fn reply_text(line: &str) -> String {
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
        Request::Dump => "error: dump is served by the control thread\n".into(),
        Request::Status => status_text(),
    }
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
