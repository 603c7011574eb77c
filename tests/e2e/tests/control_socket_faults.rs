//! Issue #14 item 11: the control socket under hostile and unlucky clients. 100 idle connections and a
//! client sending a byte every 1.5 s do not keep `tprof ctl PID status` from its answer; the server
//! closes each idle connection at its deadline; the socket file goes away on SIGTERM (SIGSEGV and abort:
//! `signal_fates.rs`), a socket left by a SIGKILLed process of this host is removed by the next process
//! starting in the directory, and `tprof ctl --all` ignores and names the stale sockets it finds.

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use tprof_e2e::fates::{self, death, send, socket_files, start_ready};
use tprof_e2e::production::ctl;
use tprof_e2e::programs::{exclusive, TempDir};

const SIGTERM: i32 = 15;
/// The shim closes a connection that has not sent its request line within this long.
const READ_DEADLINE: Duration = Duration::from_secs(2);
/// Slack for a loaded 2-core machine.
const SLACK: Duration = Duration::from_millis(1500);

/// Reads until the server closes the connection; when that happened (None: not within `limit`).
fn closed_by_server(s: &mut UnixStream, limit: Duration) -> Option<Instant> {
    s.set_read_timeout(Some(limit)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(Instant::now()),
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Some(Instant::now()),
            Err(_) => return None,
        }
    }
}

#[test]
fn status_answers_while_slow_and_idle_clients_hold_connections() {
    let _x = exclusive();
    let tmp = TempDir::new("ctl-load");
    let prog = fates::build(tmp.path());
    let out = tmp.path().join("out");
    let mut run = start_ready(fates::command(&prog, "wait", Some(&out), &[], tmp.path(), false));
    let pid = run.pid();
    let sock = out.join(format!("tprof-{pid}.sock"));
    // A client that sends one byte every 1.5 s and never a newline.
    let slow_path = sock.clone();
    let slow = std::thread::spawn(move || {
        let mut s = UnixStream::connect(&slow_path).expect("slow client connects");
        let t0 = Instant::now();
        for _ in 0..6 {
            if s.write_all(b"s").is_err() {
                return t0.elapsed();
            }
            std::thread::sleep(Duration::from_millis(1500));
        }
        t0.elapsed()
    });
    std::thread::sleep(Duration::from_millis(200));
    let status_took = |what: &str| {
        let t0 = Instant::now();
        let (code, text) = ctl(&out, &[&pid.to_string(), "status"]);
        let took = t0.elapsed();
        assert_eq!(code, 0, "status {what}: {text}");
        assert!(text.contains(&format!("pid {pid}")) && text.contains("window=open"), "{text}");
        // ctl gives up after 5 s; the old one-at-a-time server answered EAGAIN then.
        assert!(took < Duration::from_secs(3), "status took {took:?} {what}");
        took
    };
    let beside_slow = status_took("beside a slow client");
    // The slow client is cut off at its deadline: its byte at 3 s fails (the server closed at 2 s).
    let slow_for = slow.join().unwrap();
    assert!(slow_for <= READ_DEADLINE + Duration::from_millis(1500) + SLACK, "slow client served for {slow_for:?}");
    assert!(slow_for >= READ_DEADLINE, "slow client cut before its deadline: {slow_for:?}");
    // 100 idle connections: past the table's cap the oldest idle ones are dropped.
    let t_idle = Instant::now();
    let mut idle: Vec<UnixStream> = (0..100).map(|_| UnixStream::connect(&sock).expect("idle connect")).collect();
    let took = status_took("beside 100 idle clients");
    // Several owners at once are served too.
    let many: Vec<_> = (0..6)
        .map(|_| {
            let out = out.clone();
            std::thread::spawn(move || ctl(&out, &[&pid.to_string(), "status"]))
        })
        .collect();
    for h in many {
        let (code, text) = h.join().unwrap();
        assert_eq!(code, 0, "concurrent status: {text}");
    }
    // The last idle connection (still in the server's table) is closed at its deadline.
    let last = idle.last_mut().unwrap();
    let closed =
        closed_by_server(last, READ_DEADLINE + SLACK + Duration::from_secs(1)).expect("idle connection closed");
    let held = closed.duration_since(t_idle);
    assert!(held <= READ_DEADLINE + SLACK, "idle connection held {held:?}");
    drop(idle);
    // The program ran on untouched; SIGTERM ends it as bare, and the socket file is gone.
    assert!(!run.wait_for_stderr("tprof:", Duration::from_millis(100)), "no tprof line");
    send(pid, "TERM");
    let done = run.finish(Duration::from_secs(20));
    assert_eq!(death(&done).0, Some(SIGTERM), "{}", done.describe());
    assert_eq!(socket_files(&out), Vec::<String>::new(), "socket removed on SIGTERM");
    println!(
        "status in {beside_slow:?} beside a slow client (cut after {slow_for:?}), in {took:?} beside 100 idle \
         clients (the last closed after {held:?})"
    );
}

fn dead_pid() -> u32 {
    let mut c = std::process::Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    pid
}

/// A socket file nobody listens on, as a killed process leaves it.
fn stale_socket(path: &Path) {
    drop(UnixListener::bind(path).unwrap());
    assert!(path.exists());
}

#[test]
fn stale_sockets_are_removed_when_ours_and_ignored_by_ctl_all() {
    let _x = exclusive();
    let tmp = TempDir::new("ctl-stale");
    let prog = fates::build(tmp.path());
    let out = tmp.path().join("out");
    // A process of this host killed with SIGKILL leaves its socket beside its ring.
    let run = start_ready(fates::command(&prog, "wait", Some(&out), &[], tmp.path(), false));
    let killed = run.pid();
    send(killed, "KILL");
    let _ = run.finish(Duration::from_secs(20));
    let killed_sock = format!("tprof-{killed}.sock");
    assert_eq!(socket_files(&out), vec![killed_sock.clone()], "SIGKILL leaves the socket");
    // A stale socket without a ring of this host (another host's, in a shared directory): kept.
    let foreign = dead_pid();
    let foreign_sock = format!("tprof-{foreign}.sock");
    stale_socket(&out.join(&foreign_sock));
    // The next process starting in the directory removes the first.
    let run = start_ready(fates::command(&prog, "wait", Some(&out), &[], tmp.path(), false));
    let live = run.pid();
    let live_sock = format!("tprof-{live}.sock");
    let deadline = Instant::now() + Duration::from_secs(5);
    while socket_files(&out).contains(&killed_sock) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut want = vec![foreign_sock.clone(), live_sock.clone()];
    want.sort();
    assert_eq!(socket_files(&out), want, "the killed process's socket removed, the foreign one kept");
    // ctl --all answers for the live process and names the stale one it ignored.
    let (code, text) = ctl(&out, &["--all", "status"]);
    assert_eq!(code, 0, "{text}");
    assert_eq!(text.lines().filter(|l| l.starts_with("pid ")).count(), 1, "{text}");
    assert!(text.contains(&format!("pid {live} rank")), "{text}");
    assert!(
        text.contains(&format!("ignored 1 stale socket(s) in {}", out.display())) && text.contains(&foreign_sock),
        "{text}"
    );
    send(live, "TERM");
    let done = run.finish(Duration::from_secs(20));
    assert_eq!(death(&done).0, Some(SIGTERM), "{}", done.describe());
    assert_eq!(socket_files(&out), vec![foreign_sock.clone()]);
    // With only stale sockets left, ctl --all says so and fails.
    let (code, text) = ctl(&out, &["--all", "status"]);
    assert_eq!(code, 1, "{text}");
    assert!(text.contains("ignored 1 stale socket(s)"), "{text}");
}
