//! Hostile and odd inputs, run through the built `tprof` binary: memory stays bounded by what the
//! file really holds (under an address-space limit), damaged fields are not trusted, and every
//! problem is named (file, offset, what) with a failing exit status.

mod ring_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use ring_support::{launch, result, MONO0, T0};
use tprof_format::{FileHeader, Record, RingGeometry, RingWriter, StrId};
/// Address-space limit for the commands under test: a decoder that sizes anything by a string id
/// or a world size asks for gigabytes and aborts.
const AS_LIMIT: &str = "1073741824";

/// Runs `tprof args...` under the address-space limit; (exit code, stdout, stderr).
fn tprof_limited(args: &[&str]) -> (i32, String, String) {
    let out = Command::new("prlimit")
        .arg(format!("--as={AS_LIMIT}"))
        .arg(env!("CARGO_BIN_EXE_tprof"))
        .args(args)
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .expect("prlimit (util-linux) runs tprof");
    result(out)
}

fn header(rank: u32, world: u32) -> FileHeader {
    FileHeader { cmdline: vec!["hostile".into()], ..ring_support::header(500 + rank, "hosty", rank, world) }
}

const BOMB_STRINGS: u32 = 600;

/// The string id of bomb kernel `k`: ids step by 2^20.
fn bomb_id(k: u32) -> StrId {
    StrId(1 + (k << 20))
}

/// The mangled name of bomb kernel `k` (`kernel<k>()`).
fn bomb_name(k: u32) -> String {
    let name = format!("kernel{k}");
    format!("_Z{}{name}v", name.len())
}

/// A valid ring whose `BOMB_STRINGS` kernel names have ids 2^20 apart, defined in the dictionary
/// or (`inline`) in the chunks; one launch API call and one kernel per name.
fn string_id_bomb(dir: &Path, inline: bool) -> PathBuf {
    let path = dir.join(if inline { "inline-ids.tprof" } else { "dict-ids.tprof" });
    let geom = RingGeometry { chunk_bytes: 65536, chunk_count: 16, dict_bytes: 65536 };
    let mut w = RingWriter::create(&path, header(0, 1), geom).unwrap();
    if inline {
        // Longer than the dictionary region: it and every later string go inline.
        w.define_string(StrId(2), &"x".repeat(70_000));
    }
    w.define_string(StrId(3), "cudaLaunchKernel");
    for k in 0..BOMB_STRINGS {
        w.define_string(bomb_id(k), &bomb_name(k));
    }
    w.append(&Record::ClockSync { ticks: MONO0, mono_ns: MONO0, wall_ns: T0 });
    for k in 0..BOMB_STRINGS {
        let t = MONO0 + 1_000_000 + u64::from(k) * 10_000;
        launch(&mut w, StrId(3), bomb_id(k), t, 5_000, k + 1);
    }
    let end = MONO0 + 1_000_000 + u64::from(BOMB_STRINGS) * 10_000;
    w.append(&Record::ClockSync { ticks: end, mono_ns: end, wall_ns: T0 + end - MONO0 });
    w.close(end).unwrap();
    path
}

/// A small valid ring of rank `rank` in a world of `world`: one kernel.
fn small_ring(dir: &Path, name: &str, rank: u32, world: u32) -> PathBuf {
    let path = dir.join(name);
    let geom = RingGeometry { chunk_bytes: 4096, chunk_count: 8, dict_bytes: 65536 };
    let mut w = RingWriter::create(&path, header(rank, world), geom).unwrap();
    w.define_string(StrId(1), "_Z4gemmv");
    w.append(&Record::ClockSync { ticks: MONO0, mono_ns: MONO0, wall_ns: T0 });
    w.append(&Record::Kernel {
        device: 0,
        context: 1,
        stream: 7,
        start: MONO0 + 1_000,
        end: MONO0 + 501_000,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        registers: 16,
        shared_mem: 0,
        correlation: 1,
        name: StrId(1),
        graph_id: 0,
    });
    w.close(MONO0 + 600_000).unwrap();
    path
}

/// The analyses (and ring commands) every hostile file is run through, with what must be printed.
fn analyses(ring: &str, out_dir: &Path) -> Vec<Vec<String>> {
    let o = |n: &str| out_dir.join(n).display().to_string();
    [
        vec!["summary", ring, "--json"],
        vec!["diagnose", ring, "--json"],
        vec!["export", ring, "-f", "chrome", "-o", &o("t.json")],
        vec!["report", ring, "-o", &o("r.html")],
    ]
    .into_iter()
    .map(|v| v.into_iter().map(String::from).collect())
    .collect()
}

fn run_all(cmds: &[Vec<String>]) -> Vec<(String, i32, String, String)> {
    cmds.iter()
        .map(|c| {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            let (rc, out, err) = tprof_limited(&args);
            (c[0].clone(), rc, out, err)
        })
        .collect()
}

/// Every command on a string-id bomb, under the memory limit: all succeed and name the kernels.
fn string_id_bomb_decodes(inline: bool) {
    let d = tempfile::tempdir().unwrap();
    let ring = string_id_bomb(d.path(), inline);
    let rs = ring.display().to_string();
    let (rc, out, err) = tprof_limited(&["check", &rs]);
    assert_eq!(rc, 0, "check: {out}{err}");
    let (rc, out, err) = tprof_limited(&["info", &rs]);
    assert_eq!(rc, 0, "info: {out}{err}");
    assert!(out.contains(&format!("kernel                 {BOMB_STRINGS}")), "{out}");
    let (rc, out, err) = tprof_limited(&["dump", "--json", &rs]);
    assert_eq!(rc, 0, "dump: {err}");
    let last = bomb_name(BOMB_STRINGS - 1);
    assert!(out.lines().any(|l| l.contains("\"type\":\"kernel\"") && l.contains(&last)), "dump names the kernel");
    for (cmd, rc, out, err) in run_all(&analyses(&rs, d.path())) {
        assert_eq!(rc, 0, "{cmd} under a {AS_LIMIT}-byte address space: {err}");
        if cmd == "summary" {
            let s: serde_json::Value = serde_json::from_str(&out).unwrap();
            let kernels = s["kernels"].as_array().unwrap();
            assert!(kernels.iter().any(|k| k["name"] == format!("kernel{}()", BOMB_STRINGS - 1)), "{out}");
            let count: u64 = kernels.iter().map(|k| k["count"].as_u64().unwrap()).sum();
            assert_eq!((kernels.len(), count), (BOMB_STRINGS as usize, u64::from(BOMB_STRINGS)), "{out}");
        }
    }
}

#[test]
fn string_ids_far_apart_in_the_dictionary_decode_within_a_memory_limit() {
    string_id_bomb_decodes(false);
}

#[test]
fn string_ids_far_apart_inline_decode_within_a_memory_limit() {
    string_id_bomb_decodes(true);
}

#[test]
fn huge_world_size_is_counted_not_listed() {
    let d = tempfile::tempdir().unwrap();
    let ring = small_ring(d.path(), "world.tprof", 3, u32::MAX);
    let rs = ring.display().to_string();
    for (cmd, rc, out, err) in run_all(&analyses(&rs, d.path())) {
        assert_eq!(rc, 0, "{cmd} with world_size {}: {err}", u32::MAX);
        if cmd == "summary" {
            let s: serde_json::Value = serde_json::from_str(&out).unwrap();
            let notes: Vec<&str> = s["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
            let want = format!("missing ranks ({} of {}): 0-2,4-{}", u32::MAX - 1, u32::MAX, u32::MAX - 1);
            assert!(notes.iter().any(|n| n.contains(&want)), "{notes:?}");
        }
    }
}

#[test]
fn world_size_behind_a_stale_metadata_checksum_is_reported_and_not_used() {
    let d = tempfile::tempdir().unwrap();
    let ring = small_ring(d.path(), "stale.tprof", 3, 1_000_000_000);
    let mut bytes = std::fs::read(&ring).unwrap();
    let at = bytes.windows(21).position(|w| w == b"world_size=1000000000").expect("metadata");
    bytes[at + 11..at + 21].copy_from_slice(b"4294967295");
    std::fs::write(&ring, &bytes).unwrap();
    let rs = ring.display().to_string();
    for (cmd, rc, out, err) in run_all(&analyses(&rs, d.path())) {
        assert_eq!(rc, 0, "{cmd} with a damaged world_size: {err}");
        if cmd == "summary" {
            let s: serde_json::Value = serde_json::from_str(&out).unwrap();
            let notes: Vec<&str> = s["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
            assert!(notes.iter().any(|n| n.contains("damage at offset 128: metadata checksum mismatch")), "{notes:?}");
            assert!(
                notes.iter().any(|n| n.contains("world size 4294967295 not used: the metadata holding it is damaged")),
                "{notes:?}"
            );
            assert!(!notes.iter().any(|n| n.contains("missing ranks")), "{notes:?}");
        }
    }
}

#[test]
fn links_back_up_an_input_directory_count_each_ring_once() {
    let d = tempfile::tempdir().unwrap();
    let job = tprof_decoder::testkit::SynthJob { ranks: 2, steps: 2, file_bytes: 1 << 20, ..Default::default() };
    job.write(d.path()).unwrap();
    std::os::unix::fs::symlink(".", d.path().join("self")).unwrap();
    std::os::unix::fs::symlink(".", d.path().join("self2")).unwrap();
    let ds = d.path().display().to_string();
    let out = Command::new("timeout")
        .args(["60", "prlimit", &format!("--as={AS_LIMIT}"), env!("CARGO_BIN_EXE_tprof"), "summary", &ds, "--json"])
        .env("MALLOC_ARENA_MAX", "2")
        .output()
        .unwrap();
    let (rc, out, err) = result(out);
    assert_eq!(rc, 0, "exit status (124: still running after 60 s): {err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["totals"]["ranks"], 2, "{}", s["notes"]);
    assert_eq!(s["ranks"].as_array().unwrap().len(), 2);
}

/// Runs `tprof args...` with stdout going to `stdout`; (exit code, stderr).
fn tprof_to(args: &[&str], stdout: std::process::Stdio) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tprof")).args(args).stdout(stdout).output().unwrap();
    let (rc, _, err) = result(out);
    (rc, err)
}

#[test]
fn closed_pipe_is_quiet_and_a_full_device_is_one_line() {
    let d = tempfile::tempdir().unwrap();
    let ring = small_ring(d.path(), "r.tprof", 0, 1);
    let rs = ring.display().to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["info", &rs],
        vec!["dump", &rs],
        vec!["dump", "--json", &rs],
        vec!["check", &rs],
        vec!["summary", &rs],
        vec!["summary", "--json", &rs],
        vec!["diagnose", &rs],
        vec!["diagnose", "--json", &rs],
    ];
    for args in &commands {
        // A pipe whose reader has gone (`| head -1` after its line): no message, status 0.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let (rc, err) = tprof_to(args, writer.into());
        assert_eq!(rc, 0, "{args:?} into a closed pipe: {err}");
        assert!(!err.contains("panicked") && !err.contains("Broken pipe"), "{args:?}: {err}");
        // A full device: status 1 and one line saying so.
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let (rc, err) = tprof_to(args, full.into());
        assert_eq!(rc, 1, "{args:?} into /dev/full: {err}");
        let said: Vec<&str> = err.lines().filter(|l| l.contains("cannot write")).collect();
        assert_eq!(
            said,
            vec!["tprof: cannot write the output: No space left on device (os error 28)"],
            "{args:?}: {err}"
        );
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// Runs `tprof args...` with a 20 s limit; (exit code, stdout, stderr). 124: still running.
fn tprof_timed(args: &[&str]) -> (i32, String, String) {
    result(Command::new("timeout").arg("20").arg(env!("CARGO_BIN_EXE_tprof")).args(args).output().unwrap())
}

#[test]
fn fifos_and_devices_are_refused_by_name_not_waited_on() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("ring.tprof");
    let made = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo (coreutils)");
    assert!(made.success());
    let fs = fifo.display().to_string();
    for cmd in ["check", "info", "dump"] {
        let (rc, out, err) = tprof_timed(&[cmd, &fs]);
        assert_eq!(rc, 1, "{cmd} on a FIFO (124: it waited for a writer): {out}{err}");
        let want = format!("{fs}: is a FIFO (named pipe), not a regular file");
        assert!(format!("{out}{err}").contains(&want), "{cmd}: {out}{err}");
    }
    for (path, kind) in [(fs.as_str(), "a FIFO (named pipe)"), ("/dev/zero", "a character device")] {
        let (rc, _, err) = tprof_timed(&["summary", path]);
        assert_eq!(rc, 2, "summary {path}: {err}");
        assert!(err.contains(&format!("{path}: is {kind}, not a regular file")), "{err}");
        assert!(!err.contains("no such file"), "{err}");
    }
    // In a directory, a FIFO is skipped with a note and the rings are used.
    small_ring(d.path(), "r0.tprof", 0, 1);
    let (rc, out, err) = tprof_timed(&["summary", "--json", d.path().to_str().unwrap()]);
    assert_eq!(rc, 0, "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["totals"]["ranks"], 1);
    let note = format!("{fs}: skipped: a FIFO (named pipe), not a regular file");
    assert!(s["notes"].as_array().unwrap().iter().any(|n| n == note.as_str()), "{}", s["notes"]);
}

#[test]
fn an_unreadable_subdirectory_is_skipped_with_a_note() {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("out");
    std::fs::create_dir_all(root.join("locked")).unwrap();
    let ring = small_ring(&root, "r0.tprof", 0, 2);
    small_ring(&root.join("locked"), "r1.tprof", 1, 2);
    // Root reads any directory: run tprof as nobody then, with everything else readable to it.
    let as_root = String::from_utf8_lossy(&Command::new("id").arg("-u").output().unwrap().stdout).trim() == "0";
    for p in [d.path(), root.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&ring, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::set_permissions(root.join("locked"), std::fs::Permissions::from_mode(0o000)).unwrap();
    let rs = root.display().to_string();
    let bin = env!("CARGO_BIN_EXE_tprof");
    let mut cmd = if as_root {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", bin]);
        c
    } else {
        Command::new(bin)
    };
    let out = cmd.args(["summary", "--json", &rs]).output().unwrap();
    std::fs::set_permissions(root.join("locked"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let (rc, out, err) = result(out);
    assert_eq!(rc, 0, "{err}");
    let s: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(s["totals"]["ranks"], 1);
    let note = format!("{rs}/locked: skipped: cannot read this directory: Permission denied (os error 13)");
    assert!(s["notes"].as_array().unwrap().iter().any(|n| n == note.as_str()), "{}", s["notes"]);
}

#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_kept() {
    // `-o` naming the ring being read (directly, or through a link) would truncate it first.
    let dir = tempfile::tempdir().unwrap();
    let ring = small_ring(dir.path(), "r0.tprof", 0, 1);
    let link = dir.path().join("alias.json");
    std::os::unix::fs::symlink(&ring, &link).unwrap();
    let before = std::fs::read(&ring).unwrap();
    let r = ring.to_str().unwrap();
    for args in [
        vec!["export", r, "--format", "perfetto", "-o", r],
        vec!["export", r, "--format", "chrome", "-o", link.to_str().unwrap()],
        vec!["export", r, "--format", "folded", "-o", r],
        vec!["export", r, "--format", "flamegraph", "-o", r],
        vec!["report", r, "-o", r],
    ] {
        let (code, _, err) = tprof_limited(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains("refusing to write") && err.contains("it is the input"), "{args:?}: {err}");
        assert_eq!(std::fs::read(&ring).unwrap(), before, "{args:?} changed the input");
    }
}
