//! tprof's one warning line is whole however long it is: a long `TPROF_OUT` no longer cuts the line
//! at 1,023 bytes and loses the reason at its end.

use tprof_e2e::programs::programs_dir;
use tprof_e2e::shim::*;

#[test]
fn a_long_tprof_out_keeps_the_reason_at_the_end_of_the_line() {
    let prog = programs_dir().join("cu13_vector_add");
    assert!(prog.exists(), "missing {}: make -C tests/programs", prog.display());
    let base = temp_dir("long-out");
    let blocker = base.join("a-file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    // A 1,500-byte path below a regular file: creating it fails with ENOTDIR.
    let long = blocker.join("d".repeat(200)).join("e".repeat(200)).join("f".repeat(200)).join("g".repeat(200));
    let long = long.join("h".repeat(200)).join("i".repeat(200)).join("j".repeat(200));
    assert!(long.as_os_str().len() > 1400);
    let run = RunSpec::new(&prog, &[], simgpu_dir()).env("TPROF_OUT", long.to_str().unwrap()).run("long-out");
    assert_eq!(run.code(), Some(0), "{}", run.stderr());
    let stderr = run.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("tprof:")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].len() > 1500, "the line is whole: {} bytes", lines[0].len());
    assert!(lines[0].contains("Not a directory"), "the reason is kept: ...{}", &lines[0][lines[0].len() - 120..]);
    let _ = std::fs::remove_dir_all(&base);
}
