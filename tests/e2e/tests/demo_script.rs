//! The README's main job, `bash scripts/demo.sh`, as a new user runs it: it finishes, writes its
//! report and timelines, and prints no loader error (a relative LD_PRELOAD path reaching processes
//! with another working directory printed three `cannot be preloaded` lines).

use std::process::Command;

use tprof_e2e::shim::{repo_root, temp_dir};

#[test]
fn demo_runs_end_to_end_without_loader_errors() {
    let out = temp_dir("demo");
    let o = Command::new("bash")
        .arg("scripts/demo.sh")
        .arg(&out)
        .current_dir(repo_root())
        .output()
        .expect("bash scripts/demo.sh");
    let all = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "demo failed:\n{all}");
    assert!(!all.contains("cannot be preloaded") && !all.contains("ERROR: ld.so"), "loader errors:\n{all}");
    for f in ["report.html", "trace.pftrace", "trace.json", "flame.svg"] {
        let p = out.join(f);
        assert!(p.metadata().map(|m| m.len() > 0).unwrap_or(false), "{} missing or empty:\n{all}", p.display());
    }
    let _ = std::fs::remove_dir_all(&out);
}
