//! The real-GPU validation kit (`scripts/gpu-validate.sh`) without a GPU: its dry run must
//! find the kit complete, run the comparison code's self-check on fixtures (synthetic traces, tprof
//! on a Kineto fixture, a simulated-GPU run recorded by libtprof.so) and skip the GPU steps with a
//! clear message; and the comparison must catch a wrong profile, not pass everything.

use std::path::{Path, PathBuf};
use std::process::Command;

use tprof_e2e::shim::{programs_dir, repo_root, require, simgpu_dir, temp_dir, tprof_lib};

/// The tprof CLI: `TPROF_BIN`, else beside libtprof.so.
fn tprof_bin(lib: &Path) -> PathBuf {
    let p = std::env::var_os("TPROF_BIN").map(PathBuf::from).unwrap_or_else(|| lib.with_file_name("tprof"));
    require(&p, "the tprof CLI (cargo build --release -p tprof-decoder, or set TPROF_BIN)")
}

fn read_json(p: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

#[test]
fn dry_run_checks_the_kit_and_skips_the_gpu_steps() {
    let root = repo_root();
    let lib = tprof_lib();
    let bin = tprof_bin(&lib);
    // The simulated-GPU fixture needs these; without them the self-check would only skip it.
    let sim = simgpu_dir();
    let simtrain = require(&programs_dir().join("simtrain"), "simtrain (make -C tests/programs)");
    let out = temp_dir("gpu-validate");
    let o = Command::new("bash")
        .current_dir(&root)
        .arg("scripts/gpu-validate.sh")
        .arg("--dry-run")
        .arg("--out")
        .arg(&out)
        .arg("--tprof-bin")
        .arg(&bin)
        .arg("--lib")
        .arg(&lib)
        .env("SIMGPU_LIB_DIR", &sim)
        .env("SIMGPU_PROGRAMS_DIR", simtrain.parent().unwrap())
        .output()
        .expect("run bash scripts/gpu-validate.sh");
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    let all = format!("--- stdout\n{stdout}\n--- stderr\n{stderr}");
    assert!(o.status.success(), "dry run failed ({:?}):\n{all}", o.status);
    assert!(stdout.contains("gpu-validate: skipping GPU steps (dry run: --dry-run)"), "no skip message:\n{all}");
    assert!(stdout.contains("comparison self-check: PASS"), "self-check did not pass:\n{all}");

    let sc = read_json(&out.join("selfcheck.json"));
    assert_eq!(sc["status"], "PASS", "{sc}");
    let fixtures = sc["fixtures"].as_array().expect("fixtures");
    for name in ["synthetic traces", "Kineto fixture", "simulated GPU run"] {
        let f = fixtures.iter().find(|f| f["name"] == name).unwrap_or_else(|| panic!("no fixture {name}: {sc}"));
        assert_eq!(f["status"], "PASS", "fixture {name}: {f}\n{all}");
    }

    // The table: Markdown and JSON, the kit rows passed, the GPU steps skipped.
    let res = read_json(&out.join("results.json"));
    let rows = res["results"].as_array().expect("results");
    let status =
        |check: &str| rows.iter().find(|r| r["check"] == check).map(|r| r["status"].as_str().unwrap_or("").to_string());
    for check in ["kit: files", "kit: scripts parse", "kit: tprof CLI", "kit: libtprof.so"] {
        assert_eq!(status(check).as_deref(), Some("PASS"), "{check}: {res}");
    }
    assert_eq!(status("GPU steps").as_deref(), Some("SKIP"), "{res}");
    assert!(rows.iter().all(|r| r["status"] != "FAIL"), "a FAIL in a passing dry run: {res}");
    let md = std::fs::read_to_string(out.join("results.md")).expect("results.md");
    assert!(md.contains("| check | expected | measured | result |"), "{md}");
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn comparison_catches_a_wrong_profile() {
    let root = repo_root();
    let bin = tprof_bin(&tprof_lib());
    let kit = root.join("scripts/gpu-validate");
    let fixture = kit.join("fixtures/kineto_small.json");
    let dir = temp_dir("gpu-validate-wrong");
    let o = Command::new(&bin).arg("summary").arg(&fixture).arg("--json").output().expect("tprof summary");
    assert!(o.status.success(), "tprof summary: {}", String::from_utf8_lossy(&o.stderr));
    let mut summary: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary JSON");

    let compare = |summary: &serde_json::Value, tag: &str| {
        let p = dir.join(format!("summary-{tag}.json"));
        std::fs::write(&p, serde_json::to_vec(summary).unwrap()).unwrap();
        let o = Command::new("python3")
            .arg(kit.join("compare.py"))
            .args(["kernels", "--summary"])
            .arg(&p)
            .arg("--kineto")
            .arg(&fixture)
            .output()
            .expect("python3 compare.py");
        (o.status.success(), String::from_utf8_lossy(&o.stdout).to_string())
    };
    let (ok, text) = compare(&summary, "right");
    assert!(ok, "the right profile must pass:\n{text}");

    // 5% more GPU time in the biggest kernel: outside the 2% tolerance.
    let t = summary["kernels"][0]["total_ns"].as_u64().unwrap();
    summary["kernels"][0]["total_ns"] = serde_json::json!(t + t / 20);
    let (ok, text) = compare(&summary, "slow");
    assert!(!ok, "a 5% GPU-time error must fail:\n{text}");
    assert!(text.contains("[FAIL] kernels: GPU time per kernel"), "{text}");

    // A kernel tprof missed.
    summary["kernels"][0]["total_ns"] = serde_json::json!(t);
    summary["kernels"].as_array_mut().unwrap().remove(1);
    let (ok, text) = compare(&summary, "missing");
    assert!(!ok, "a missing kernel must fail:\n{text}");
    assert!(text.contains("[FAIL] kernels: names"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}
