//! Issue #14 item 12: a `TPROF_OUT` another user could write into (owned by `nobody`, or mode 0777
//! without the sticky bit) is refused with one warning line saying why and what to do; nothing is
//! recorded there (no ring, no control socket) and the program runs on unchanged. A private directory
//! or a sticky one like /tmp is used.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use tprof_e2e::fates;
use tprof_e2e::programs::{exclusive, run, TempDir};

fn entries(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok()).map(|e| e.file_name().to_string_lossy().into_owned()).collect())
        .unwrap_or_default()
}

fn run_in(prog: &Path, out: &Path, cwd: &Path) -> (i32, Vec<String>) {
    let r = run(fates::command(prog, "brief", Some(out), &[], cwd, false), Duration::from_secs(60));
    let lines = r.stderr.lines().filter(|l| l.contains("tprof:")).map(String::from).collect();
    (r.code, lines)
}

#[test]
fn output_directory_writable_by_others_is_refused() {
    let _x = exclusive();
    let tmp = TempDir::new("outdir");
    let prog = fates::build(tmp.path());
    // SAFETY-free uid check: `id -u`.
    let uid = String::from_utf8_lossy(&std::process::Command::new("id").arg("-u").output().unwrap().stdout)
        .trim()
        .to_string();
    let mk = |name: &str, mode: u32| {
        let d = tmp.path().join(name);
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    };
    if uid == "0" {
        // Root and a directory of nobody's, world-writable: the attack of the issue.
        let d = mk("nobodys", 0o777);
        std::os::unix::fs::chown(&d, Some(65534), Some(65534)).unwrap();
        let (code, lines) = run_in(&prog, &d, tmp.path());
        assert_eq!(code, 0, "the program runs on");
        assert_eq!(lines.len(), 1, "one line: {lines:?}");
        assert!(lines[0].contains("belongs to uid 65534, not to you (uid 0)"), "{lines:?}");
        assert!(
            lines[0].contains("profiling is off, the program runs on") && lines[0].contains("mkdir -m 700"),
            "{lines:?}"
        );
        assert_eq!(entries(&d), Vec::<String>::new(), "nothing recorded there");
        // Even private to nobody (0700): root could write, nobody could swap.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let (code, lines) = run_in(&prog, &d, tmp.path());
        assert_eq!((code, lines.len()), (0, 1), "{lines:?}");
        assert_eq!(entries(&d), Vec::<String>::new());
    } else {
        println!("not root: the foreign-owner case is unit-tested (shim/src/lifecycle/out_dir.rs)");
    }
    // The user's own directory, writable by everyone without the sticky bit.
    let d = mk("open", 0o777);
    let (code, lines) = run_in(&prog, &d, tmp.path());
    assert_eq!(code, 0);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("mode 0777, no sticky bit") && lines[0].contains("chmod o-w"), "{lines:?}");
    assert_eq!(entries(&d), Vec::<String>::new());
    // Sticky (like /tmp) and private directories are used: one ring, no warning.
    for (name, mode) in [("sticky", 0o1777), ("private", 0o700), ("shared-read", 0o755)] {
        let d = mk(name, mode);
        let (code, lines) = run_in(&prog, &d, tmp.path());
        assert_eq!(code, 0);
        assert_eq!(lines, Vec::<String>::new(), "{name}");
        assert_eq!(fates::ring_files(&d).len(), 1, "{name}: {:?}", entries(&d));
    }
}
