//! In-process: tprof initialised in metrics mode (window closed), driven through its own control
//! socket: owner-only permissions, start/stop/status/dump, and the exit flush with the last metrics.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::Path;

fn send(sock: &Path, line: &str) -> String {
    let mut s = UnixStream::connect(sock).expect("connect");
    s.write_all(format!("{line}\n").as_bytes()).unwrap();
    let mut reply = String::new();
    s.read_to_string(&mut reply).unwrap();
    reply
}

#[test]
fn control_socket_drives_the_capture_window() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::env::set_var("TPROF_OUT", &out);
    std::env::set_var("TPROF_MODE", "metrics");
    std::env::set_var("TPROF_RING_MB", "4");
    std::env::set_var("TPROF_QUIET", "1");
    std::env::set_var("TPROF_METRICS_FILE", dir.path().join("m-%p.prom"));
    std::env::set_var("TPROF_METRICS_INTERVAL", "100ms");
    tprof::lifecycle::ensure_init();
    assert_eq!(tprof::base::switch::state(), tprof::base::switch::ENABLED);
    assert!(!tprof::base::switch::is_recording(), "metrics mode starts closed");

    let sock = out.join(format!("tprof-{}.sock", std::process::id()));
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&sock), 0o600);
    assert_eq!(mode(&out), 0o700);

    let status = send(&sock, "status");
    assert!(
        status.starts_with("ok\n") && status.contains("mode=metrics") && status.contains("window=closed"),
        "{status}"
    );
    assert_eq!(send(&sock, "start"), "ok window=open\n");
    assert!(tprof::base::switch::is_recording());
    assert_eq!(send(&sock, "start"), "ok window=open was=open\n");
    assert_eq!(send(&sock, "stop"), "ok window=closed\n");
    assert!(!tprof::base::switch::is_recording());
    assert_eq!(send(&sock, "dump"), "ok dumped\n");
    assert!(send(&sock, "bogus").starts_with("error: unknown command"));

    // Counters stay on with the window closed.
    let (calls0, closed0) = tprof::record::call_counters::calls();
    tprof::record::call_counters::count_call(false);
    let (calls1, closed1) = tprof::record::call_counters::calls();
    assert_eq!((calls1 - calls0, closed1 - closed0), (1, 1));

    std::thread::sleep(std::time::Duration::from_millis(300));
    tprof::lifecycle::shutdown_for_tests();
    assert!(!sock.exists(), "the socket is removed at exit");
    let metrics = std::fs::read_to_string(dir.path().join(format!("m-{}.prom", std::process::id()))).unwrap();
    assert!(metrics.contains("# TYPE tprof_intercepted_calls_total counter"), "{metrics}");
    assert!(metrics.contains("tprof_capture_window_open{"), "{metrics}");
}
