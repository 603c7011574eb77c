//! Process-level behaviour of the recording core, in child processes (`shim/src/bin/tprof-recording-child.rs`):
//! a SIGKILLed writer leaves a valid ring holding everything committed more than 100 ms before the
//! kill, and a fork with both sides recording yields two valid rings without deadlock.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use tprof_format::{Decoded, MarkerKind, Record, RingReader};

fn monotonic_ns() -> u64 {
    tprof::base::ticks::monotonic_ns()
}

/// The child program (`shim/src/bin/tprof-recording-child.rs`, built by Cargo for these tests).
fn child_program() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_tprof-recording-child"))
}

fn spawn_child(role: &str, out: &Path) -> std::process::Child {
    Command::new(child_program())
        .arg(role)
        .env("TPROF_OUT", out)
        .env("TPROF_RING_MB", "8")
        .env("TPROF_CUPTI", "0")
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

fn rings(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tprof"))
        .collect();
    v.sort();
    v
}

fn api_args(r: &RingReader) -> Vec<(u64, u64)> {
    let conv = r.tick_converter();
    r.records()
        .filter_map(|x| match x {
            Ok(Decoded::Record(Record::Api { arg, start, .. })) => Some((arg, conv.to_mono_ns(start))),
            _ => None,
        })
        .collect()
}

#[test]
fn sigkill_keeps_everything_committed_100ms_before_the_kill() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("steady", dir.path());
    std::thread::sleep(Duration::from_millis(1500));
    let kill_at = monotonic_ns();
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let files = rings(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    let r = RingReader::open(&files[0]).unwrap();
    assert!(r.damage().is_empty(), "a killed writer leaves no damage: {:?}", r.damage());
    assert!(!r.stats().clean_close());
    let events = api_args(&r);
    assert!(events.len() > 1000, "{} events", events.len());
    // Contiguous from 0: nothing lost in the middle.
    for (i, (arg, _)) in events.iter().enumerate() {
        assert_eq!(*arg, i as u64);
    }
    let last_ts = events.last().unwrap().1;
    let lag_ms = (kill_at.saturating_sub(last_ts)) as f64 / 1e6;
    eprintln!("{} events survived; newest committed event {lag_ms:.1} ms before the kill", events.len());
    assert!(lag_ms <= 100.0, "events older than 100 ms before the kill were lost (newest is {lag_ms:.1} ms old)");
}

#[test]
fn fork_with_both_sides_recording_gives_two_valid_rings() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = spawn_child("forker", dir.path());
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("fork test deadlocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success());
    let files = rings(dir.path());
    assert_eq!(files.len(), 2, "parent and child rings: {files:?}");
    let mut by_pid: Vec<(u32, u32, Vec<u64>, bool)> = files
        .iter()
        .map(|f| {
            let r = RingReader::open(f).unwrap();
            assert!(r.damage().is_empty(), "{}: {:?}", f.display(), r.damage());
            assert!(r.stats().clean_close(), "{} closed cleanly", f.display());
            let exit = r
                .records()
                .any(|x| matches!(x, Ok(Decoded::Record(Record::Marker { kind: MarkerKind::ProcessExit, .. }))));
            (r.header().pid, r.header().ppid, api_args(&r).into_iter().map(|a| a.0).collect(), exit)
        })
        .collect();
    by_pid.sort_by_key(|x| x.0);
    let (parent, child): (Vec<_>, Vec<_>) = by_pid.into_iter().partition(|x| x.2.first() == Some(&0));
    let (ppid, _, pargs, pexit) = &parent[0];
    let (_, cppid, cargs, cexit) = &child[0];
    assert_eq!(cppid, ppid, "the child's ring names its parent");
    assert_eq!(pargs, &(0..2000).collect::<Vec<_>>(), "parent has exactly its own events");
    assert_eq!(cargs, &(100_000..100_500).collect::<Vec<_>>(), "child has exactly its own events");
    assert!(*pexit, "parent ring has the exit marker");
    assert!(*cexit, "child ring has the exit marker");
}
