//! `tprof diagnose` end to end: simtrain on the simulated GPU stack, profiled by the shim, one
//! pathology at a time with 2 and 4 ranks; its verdict must be the top one and name the right
//! rank(s) and steps; the clean run has no verdict above 0.05.
//!
//! Run: `make -C tests/simgpu && make -C tests/programs &&
//!       CARGO_TARGET_DIR=/work/targets/diagnose cargo build --release -p tprof-shim -p tprof-decoder &&
//!       CARGO_TARGET_DIR=/work/targets/diagnose cargo test -p tprof-e2e --release --test diagnose_simtrain`

use std::time::Duration;

use tprof_e2e::diagnose::*;

const STEPS: u64 = 16;

/// Profiles `simtrain --ranks N --steps 16 --quiet ARGS` and diagnoses it.
fn diagnose_run(ranks: u32, args: &[&str], extra: &[&str]) -> serde_json::Value {
    let r = ranks.to_string();
    let steps = STEPS.to_string();
    let mut all = vec!["--ranks", r.as_str(), "--steps", steps.as_str(), "--quiet"];
    all.extend_from_slice(args);
    let run = profile_simtrain(&all, None, Duration::from_secs(120));
    assert!(run.out.code == 0 || args.contains(&"--oom-at"), "simtrain {all:?}: {}", run.out.describe());
    let files = run.ring_files();
    assert_eq!(files.len(), ranks as usize, "simtrain {all:?} left {} ring files (shim not recording?)", files.len());
    diagnose_json(run.rings.path(), extra)
}

fn all_ranks(n: u32) -> Vec<u64> {
    (0..n as u64).collect()
}

#[test]
fn clean_run_has_no_alarm() {
    for n in [2, 4] {
        let d = diagnose_run(n, &[], &[]);
        let worst = d["verdicts"].as_array().unwrap().iter().filter_map(|v| v["severity"].as_f64()).fold(0.0, f64::max);
        assert!(worst <= 0.05, "clean {n} ranks\n{}", verdict_table(&d));
        assert_eq!(d["efficiency"]["ranks"].as_array().unwrap().len(), n as usize);
    }
}

#[test]
fn data_stall() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--data-stall", "60"], &[]);
        let v = assert_top(&d, "data_loading", &format!("--data-stall 60, {n} ranks"));
        assert_eq!(ranks(v), all_ranks(n), "{}", verdict_table(&d));
        assert!(steps(v).len() as u64 >= STEPS - 3, "{}", verdict_table(&d));
    }
}

#[test]
fn launch_bound() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--launch-bound"], &[]);
        let v = assert_top(&d, "launch_bound", &format!("--launch-bound, {n} ranks"));
        assert_eq!(ranks(v), all_ranks(n), "{}", verdict_table(&d));
        assert!(v["evidence"]["launches_per_step"].as_u64().unwrap_or(0) >= 1000, "{}", v["evidence"]);
    }
}

#[test]
fn sync_every_step() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--sync-every-step"], &[]);
        let v = assert_top(&d, "sync_bound", &format!("--sync-every-step, {n} ranks"));
        let calls = v["where"]["calls"].to_string();
        assert!(calls.contains("cudaStreamSynchronize"), "{calls}\n{}", verdict_table(&d));
    }
}

#[test]
fn pageable() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--pageable"], &[]);
        let v = assert_top(&d, "sync_bound", &format!("--pageable, {n} ranks"));
        assert!(v["evidence"]["pageable_copies"].as_u64().unwrap_or(0) >= STEPS * n as u64, "{}", v["evidence"]);
    }
}

#[test]
fn no_overlap() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--no-overlap"], &[]);
        let v = assert_top(&d, "exposed_communication", &format!("--no-overlap, {n} ranks"));
        assert_eq!(ranks(v), all_ranks(n), "{}", verdict_table(&d));
    }
}

#[test]
fn slow_link() {
    for n in [2, 4] {
        // The mock's links run at 100 GB/s; --slow-link at a tenth.
        let d = diagnose_run(n, &["--slow-link"], &["--peak-busbw", "80"]);
        let v = assert_top(&d, "slow_collective", &format!("--slow-link, {n} ranks"));
        let bw = v["evidence"]["busbw_gbps"].as_f64().unwrap_or(0.0);
        assert!(bw < 15.0, "busbw {bw}\n{}", verdict_table(&d));
    }
}

#[test]
fn straggler() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--straggler", "1", "--straggler-ms", "60"], &[]);
        let v = assert_top(&d, "straggler", &format!("--straggler 1, {n} ranks"));
        assert_eq!(ranks(v), vec![1], "{}", verdict_table(&d));
    }
}

#[test]
fn hang() {
    for n in [2, 4] {
        let r = n.to_string();
        let args = ["--ranks", r.as_str(), "--steps", "16", "--quiet", "--hang-at", "5", "--hang-rank", "1"];
        let run = profile_simtrain(&args, Some(Duration::from_secs(4)), Duration::from_secs(30));
        assert!(run.out.terminated, "the hung run should have been stopped: {}", run.out.describe());
        let d = diagnose_json(run.rings.path(), &[]);
        let v = assert_top(&d, "hang", &format!("--hang-at 5 --hang-rank 1, {n} ranks"));
        assert_eq!(ranks(v), vec![1], "{}", verdict_table(&d));
        assert_eq!(steps(v), vec![5], "{}", verdict_table(&d));
        // 4 buckets per step: step 5's first all-reduce is seq 20.
        assert_eq!(v["where"]["collective"]["seq"].as_u64(), Some(20), "{}", v["where"]);
    }
}

#[test]
fn desync() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--desync-at", "3", "--desync-rank", "1"], &[]);
        let v = assert_top(&d, "desync", &format!("--desync-at 3, {n} ranks"));
        assert_eq!(ranks(v), vec![1], "{}", verdict_table(&d));
        assert_eq!(steps(v), vec![3], "{}", verdict_table(&d));
    }
}

#[test]
fn oom() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--oom-at", "6"], &[]);
        let v = assert_top(&d, "oom", &format!("--oom-at 6, {n} ranks"));
        assert!(steps(v).contains(&6), "{}", verdict_table(&d));
        assert!(v["evidence"]["requested_bytes"].as_u64().unwrap_or(0) > 0, "{}", v["evidence"]);
    }
}

#[test]
fn amp_overflow() {
    for n in [2, 4] {
        let d = diagnose_run(n, &["--amp-overflow-every", "4"], &[]);
        let v = assert_top(&d, "amp_overflow", &format!("--amp-overflow-every 4, {n} ranks"));
        assert_eq!(steps(v), vec![3, 7, 11, 15], "{}", verdict_table(&d));
        assert_eq!(ranks(v), all_ranks(n), "{}", verdict_table(&d));
    }
}
