//! The streaming Kineto import works in bounded memory: a ~400 MB trace generated at run time
//! (CPU events before GPU events, far out of time order, as Kineto writes them) is summarised
//! under an address-space limit (`prlimit --as`) that the old whole-document importer (~1.6 KB
//! per event, ~3.5 GB here) could not meet, and the summary's numbers match the generated truth.

use std::process::Command;

use tprof_decoder::testkit::kineto_trace::write_kineto_trace;

/// Address space allowed to `tprof summary` (RSS stays well below it; see the README's bound).
/// 2026-12-02: a 966 MB generated trace is summarised under 240 MiB; main before the compact range
/// table needed more than 320 MiB for it.
const AS_LIMIT: u64 = 320 << 20;

#[test]
fn summary_of_a_400_mb_trace_fits_the_memory_limit() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join("big.json");
    let truth = write_kineto_trace(&path, 400 << 20).unwrap();
    assert!(truth.bytes > 350 << 20, "{truth:?}");
    let out = Command::new("timeout")
        .args([
            "120",
            "prlimit",
            &format!("--as={AS_LIMIT}"),
            env!("CARGO_BIN_EXE_tprof"),
            "summary",
            "--json",
            "--threads",
            "1",
        ])
        .arg(&path)
        .env("MALLOC_ARENA_MAX", "2")
        .env("TMPDIR", d.path())
        .output()
        .expect("timeout and prlimit (coreutils, util-linux) run tprof");
    std::fs::remove_file(&path).unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "tprof summary under {} MiB of address space: {:?} {err}",
        AS_LIMIT >> 20,
        out.status
    );
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(s["totals"]["events"].as_u64(), Some(truth.events()), "{}", s["notes"]);
    assert_eq!(s["totals"]["kernel_ns"].as_u64(), Some(truth.kernel_ns));
    assert_eq!(s["ranks"][0]["steps"].as_array().map(|v| v.len() as u64), Some(truth.steps));
    assert_eq!(s["notes"].as_array().map(Vec::len), Some(0), "{}", s["notes"]);
    // The sorts spilled to TMPDIR and removed their files.
    assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
}
