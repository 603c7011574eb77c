//! Issue #14 item 13: tprof does not change what a signal does to the program. SIGUSR2 keeps its
//! default disposition (the program dies, as bare) unless `TPROF_DUMP_SIGNAL=USR2` asks for it; then
//! a program's earlier handler is chained, a later one wins; SIGSEGV and abort end the program with the
//! same signal and core dump as bare, and the control socket file is gone.

use std::path::Path;
use std::time::Duration;

use tprof_e2e::fates::{self, death, send, socket_files, start_ready};
use tprof_e2e::production::ProdRing;
use tprof_e2e::programs::{exclusive, TempDir};
use tprof_format::MarkerKind;

const REASON_SIGNAL: u64 = 4;
// Linux signal numbers.
const SIGABRT: i32 = 6;
const SIGSEGV: i32 = 11;
const SIGUSR2: i32 = 12;
const SIGTERM: i32 = 15;

/// Whether `pid` is still running (not exited, not a zombie waiting to be reaped).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// Window edges caused by the dump signal in the one ring of `out`.
fn signal_edges(out: &Path) -> Vec<MarkerKind> {
    let rings = fates::ring_files(out);
    assert_eq!(rings.len(), 1, "rings in {}: {rings:?}", out.display());
    ProdRing::open(&rings[0]).edges().into_iter().filter(|e| e.reason == REASON_SIGNAL).map(|e| e.kind).collect()
}

#[test]
fn sigusr2_keeps_its_default_disposition_unless_opted_in() {
    let _x = exclusive();
    let tmp = TempDir::new("fates-usr2");
    let prog = fates::build(tmp.path());
    let cwd = tmp.path();
    // Bare: SIGUSR2's default action ends the program.
    let run = start_ready(fates::command(&prog, "wait", None, &[], cwd, false));
    send(run.pid(), "USR2");
    let bare = run.finish(Duration::from_secs(20));
    assert_eq!(death(&bare).0, Some(SIGUSR2), "bare: {}", bare.describe());
    // Under tprof by default: the same.
    let out = tmp.path().join("default");
    let run = start_ready(fates::command(&prog, "wait", Some(&out), &[], cwd, false));
    assert_eq!(socket_files(&out).len(), 1, "socket while running");
    send(run.pid(), "USR2");
    let under = run.finish(Duration::from_secs(20));
    assert_eq!(death(&under).0, Some(SIGUSR2), "under tprof: {}", under.describe());
    assert!(!under.stderr.contains("tprof:"), "no tprof line: {}", under.stderr);
    // Opted in: the signal closes the window (a CaptureStop by signal) and the program runs on; then
    // SIGTERM ends it as bare, and its socket file is gone.
    let out = tmp.path().join("optin");
    let run = start_ready(fates::command(&prog, "wait", Some(&out), &[("TPROF_DUMP_SIGNAL", "USR2")], cwd, false));
    send(run.pid(), "USR2");
    std::thread::sleep(Duration::from_millis(600));
    assert!(alive(run.pid()), "the opted-in signal must not end the program");
    send(run.pid(), "TERM");
    let opted = run.finish(Duration::from_secs(20));
    assert_eq!(death(&opted).0, Some(SIGTERM), "{}", opted.describe());
    assert_eq!(socket_files(&out), Vec::<String>::new(), "socket removed on SIGTERM");
    assert_eq!(signal_edges(&out), vec![MarkerKind::CaptureStop], "one toggle, by the signal");
}

#[test]
fn a_programs_own_sigusr2_handler_is_chained_or_wins() {
    let _x = exclusive();
    let tmp = TempDir::new("fates-own");
    let prog = fates::build(tmp.path());
    let optin = [("TPROF_DUMP_SIGNAL", "USR2")];
    for (mode, env, toggles) in [
        // Installed before tprof took the signal: both run.
        ("own_before", &optin[..], vec![MarkerKind::CaptureStop]),
        // Installed after: theirs replaces ours.
        ("own_after", &optin[..], vec![]),
        // Not opted in: tprof never touches SIGUSR2.
        ("own_before", &[][..], vec![]),
    ] {
        let out = tmp.path().join(format!("{mode}-{}", env.len()));
        let run = start_ready(fates::command(&prog, mode, Some(&out), env, tmp.path(), false));
        send(run.pid(), "USR2");
        let done = run.finish(Duration::from_secs(20));
        assert_eq!(done.code, 0, "{mode} {env:?}: {}", done.describe());
        assert!(done.stderr.contains("app-usr2"), "{mode} {env:?}: the program's handler ran: {}", done.stderr);
        assert_eq!(signal_edges(&out), toggles, "{mode} {env:?}: tprof's toggles");
        assert_eq!(socket_files(&out), Vec::<String>::new(), "{mode}: socket removed at exit");
    }
}

fn core_files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default();
    v.retain(|n| n == "core" || n.starts_with("core."));
    v
}

#[test]
fn fatal_signals_end_the_program_with_the_bare_status_and_core_dump() {
    let _x = exclusive();
    let tmp = TempDir::new("fates-fatal");
    let prog = fates::build(tmp.path());
    for (mode, sig) in [("segv", SIGSEGV), ("abort", SIGABRT)] {
        let cwd = tmp.path().join(format!("{mode}-bare"));
        std::fs::create_dir_all(&cwd).unwrap();
        let bare =
            tprof_e2e::programs::run(fates::command(&prog, mode, None, &[], &cwd, true), Duration::from_secs(30));
        let (bare_sig, bare_core) = death(&bare);
        assert_eq!(bare_sig, Some(sig), "bare {mode}: {}", bare.describe());
        assert_eq!(core_files(&cwd).is_empty(), !bare_core, "bare {mode}: core file iff WCOREDUMP");
        let _ = std::fs::remove_dir_all(&cwd);
        for tprof_mode in ["full", "flight"] {
            let cwd = tmp.path().join(format!("{mode}-{tprof_mode}"));
            std::fs::create_dir_all(&cwd).unwrap();
            let out = cwd.join("out");
            let env = [("TPROF_MODE", tprof_mode)];
            let run = tprof_e2e::programs::run(
                fates::command(&prog, mode, Some(&out), &env, &cwd, true),
                Duration::from_secs(30),
            );
            assert_eq!(death(&run), (bare_sig, bare_core), "{mode} under tprof {tprof_mode}: {}", run.describe());
            assert_eq!(core_files(&cwd).is_empty(), !bare_core, "{mode} {tprof_mode}: core file as bare");
            assert_eq!(fates::ring_files(&out).len(), 1, "{mode} {tprof_mode}: the ring was written");
            assert_eq!(socket_files(&out), Vec::<String>::new(), "{mode} {tprof_mode}: socket removed");
            let _ = std::fs::remove_dir_all(&cwd);
        }
        println!("{mode}: signal {sig}, core dumped: {bare_core}, bare and under tprof (full, flight)");
    }
}
