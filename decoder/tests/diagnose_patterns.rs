//! `tprof diagnose` on synthetic simtrain-shaped jobs (`synth_patterns`): each pathology is the
//! top verdict, names the right rank(s) and steps, and carries the right numbers; the clean job
//! has nothing above 0.05.

use regex_lite::Regex;
use tprof_decoder::convert::ConvertOptions;
use tprof_decoder::diagnose::{diagnose, DiagnoseOptions, Diagnosis, VerdictKind, CLEAN_THRESHOLD};
use tprof_decoder::input::{discover, Notes};
use tprof_decoder::steps::DEFAULT_STEP_PATTERN;
use tprof_decoder::testkit::Scenario;

fn run_with(sc: &Scenario, opts: &DiagnoseOptions) -> Diagnosis {
    let dir = tempfile::tempdir().expect("temp dir");
    sc.write(dir.path()).expect("write rings");
    let mut notes = Notes::default();
    let sources = discover(&[dir.path().display().to_string()], &mut notes).expect("discover");
    let re = Regex::new(DEFAULT_STEP_PATTERN).unwrap();
    let convert = ConvertOptions { threads: 2, progress: false, align_clocks: true };
    let (d, errors) = diagnose(&sources, &re, opts, &convert);
    assert!(errors.is_empty(), "{errors:?}");
    d
}

fn run(sc: &Scenario) -> Diagnosis {
    run_with(sc, &DiagnoseOptions::default())
}

fn table(d: &Diagnosis) -> String {
    let mut s = format!("useful {:.3}\n", d.efficiency.overall.useful);
    for v in &d.verdicts {
        s.push_str(&format!(
            "{:>22} {:.4} ranks {:?} steps {:?}: {}\n",
            v.kind.id(),
            v.severity,
            v.ranks,
            v.steps,
            v.evidence_text()
        ));
    }
    s
}

fn top(d: &Diagnosis, kind: VerdictKind) -> &tprof_decoder::diagnose::Verdict {
    let t = d.top().unwrap_or_else(|| panic!("no verdict at all, expected {}\n{}", kind.id(), table(d)));
    assert_eq!(t.kind, kind, "top verdict\n{}", table(d));
    t
}

/// The evidence as the `--json` document has it.
fn evidence(v: &tprof_decoder::diagnose::Verdict) -> serde_json::Value {
    serde_json::to_value(&v.evidence).expect("evidence serializes")
}

fn num(v: &tprof_decoder::diagnose::Verdict, key: &str) -> f64 {
    let e = evidence(v);
    e.get(key).and_then(|x| x.as_f64()).unwrap_or_else(|| panic!("evidence.{key} missing: {}", e))
}

#[test]
fn clean_job_has_no_alarm() {
    for ranks in [2, 4] {
        let d = run(&Scenario { ranks, ..Scenario::default() });
        let worst = d.verdicts.iter().map(|v| v.severity).fold(0.0, f64::max);
        assert!(worst <= CLEAN_THRESHOLD, "clean {ranks} ranks\n{}", table(&d));
        assert!(d.efficiency.overall.useful > 0.85, "{}", table(&d));
        let b = d.efficiency.overall.breakdown;
        let sum: f64 = b.parts().iter().map(|p| p.1).sum();
        assert!((sum - 1.0).abs() < 1e-9, "shares add up to {sum}");
    }
}

#[test]
fn data_loading() {
    let sc = Scenario { data_ns: 60_000_000, ..Scenario::default() };
    let d = run(&sc);
    let v = top(&d, VerdictKind::DataLoading);
    assert_eq!(v.ranks, vec![0, 1]);
    assert!(v.steps.len() >= 10, "{:?}", v.steps);
    // ~60 ms of host data time per step against ~31 ms of GPU work: ~29 ms idle per step.
    let idle = num(v, "idle_at_step_start_ns");
    assert!((25e6..35e6).contains(&idle), "{idle}");
    assert!(v.severity > 0.3, "{}", table(&d));
    assert!(d.efficiency.overall.breakdown.data > 0.3);
}

#[test]
fn launch_bound() {
    let sc = Scenario {
        fwd_kernels: 400,
        bwd_kernels: 800,
        kernel_ns: 1_500,
        op_overhead_ns: 15_000,
        data_ns: 0,
        ..Scenario::default()
    };
    let d = run(&sc);
    let v = top(&d, VerdictKind::LaunchBound);
    assert!(num(v, "launches_per_step") >= 1200.0, "{}", evidence(v));
    assert_eq!(num(v, "median_kernel_ns"), 1_500.0);
    let gap = num(v, "median_launch_gap_ns");
    assert!((15_000.0..25_000.0).contains(&gap), "{gap}");
    assert!(v.severity > 0.5, "{}", table(&d));
}

#[test]
fn item_at_step_end() {
    // loss.item() after the optimizer: the host waits for the GPU to finish the step, then loads
    // the next batch (2 ms) while the GPU has nothing queued.
    let d = run(&Scenario { item_at_step_end: true, ..Scenario::default() });
    let v = top(&d, VerdictKind::SyncBound);
    assert_eq!(v.location.calls.first().map(String::as_str), Some("cudaStreamSynchronize"), "{}", evidence(v));
    assert!(num(v, "small_d2h_copies") >= 20.0);
    assert!(v.steps.len() >= 10, "{:?}", v.steps);
    // 11 steps per rank after the warm-up step.
    let idle = num(v, "gpu_idle_after_sync_ns") / 22.0;
    assert!((1.7e6..2.3e6).contains(&idle), "{idle}");
}

#[test]
fn sync_mid_forward_is_named() {
    // .item() halfway through forward with a host far ahead of the GPU costs only the refill gap:
    // named, but cheap (below the clean threshold).
    let d = run(&Scenario { sync_every_step: true, ..Scenario::default() });
    let v = d.find(VerdictKind::SyncBound).unwrap_or_else(|| panic!("{}", table(&d)));
    assert_eq!(v.location.calls.first().map(String::as_str), Some("cudaStreamSynchronize"));
    assert!(v.severity < CLEAN_THRESHOLD, "{}", table(&d));
}

#[test]
fn pageable_copies() {
    let sc = Scenario { pageable: true, copy_ns: 2_000_000, ..Scenario::default() };
    let d = run(&sc);
    let v = top(&d, VerdictKind::SyncBound);
    assert_eq!(num(v, "pageable_copies"), 24.0);
    assert!(v.location.calls.contains(&"cudaMemcpyAsync".to_string()), "{:?}", v.location.calls);
}

#[test]
fn exposed_communication() {
    let sc = Scenario { no_overlap: true, allreduce_ns: 2_000_000, ..Scenario::default() };
    let d = run(&sc);
    let v = top(&d, VerdictKind::ExposedCommunication);
    assert_eq!(v.ranks, vec![0, 1]);
    let per_step = num(v, "exposed_per_step_ns");
    assert!((7.5e6..8.5e6).contains(&per_step), "{per_step}");
    assert_eq!(v.location.collective.as_ref().map(|c| c.op.as_str()), Some("AllReduce"));
}

#[test]
fn slow_collective_against_peak() {
    // 25 MiB all-reduce on 2 ranks in 3 ms = 8.7 GB/s busbw; the fabric should do 80.
    let sc = Scenario { allreduce_ns: 3_000_000, ..Scenario::default() };
    let d = run_with(&sc, &DiagnoseOptions { peak_busbw_gbps: Some(80.0) });
    let v = top(&d, VerdictKind::SlowCollective);
    let bw = num(v, "busbw_gbps");
    assert!((8.0..9.5).contains(&bw), "{bw}");
    assert_eq!(num(v, "reference_busbw_gbps"), 80.0);
    // Without a peak, the best in the run is the same speed: nothing is slow.
    let d = run(&sc);
    assert!(d.find(VerdictKind::SlowCollective).is_none(), "{}", table(&d));
}

#[test]
fn straggler() {
    for ranks in [2, 4] {
        let sc = Scenario { ranks, straggler: Some((1, 50_000_000)), ..Scenario::default() };
        let d = run(&sc);
        let v = top(&d, VerdictKind::Straggler);
        assert_eq!(v.ranks, vec![1], "{}", table(&d));
        let late = num(v, "median_lateness_ns");
        assert!((15e6..55e6).contains(&late), "{late}");
        assert!(v.evidence_text().contains("outside CUDA"), "{}", v.evidence_text());
        assert!(d.find(VerdictKind::DataLoading).is_none_or(|x| x.severity < CLEAN_THRESHOLD), "{}", table(&d));
    }
}

#[test]
fn hang() {
    for watchdog in [false, true] {
        let sc = Scenario { ranks: 4, hang: Some((5, 2)), watchdog, ..Scenario::default() };
        let d = run(&sc);
        let v = top(&d, VerdictKind::Hang);
        assert_eq!(v.ranks, vec![2], "{}", table(&d));
        assert_eq!(v.steps, vec![5]);
        let c = v.location.collective.as_ref().expect("collective");
        assert_eq!(c.seq, Some(20));
        assert_eq!(c.op, "AllReduce");
        let ev = evidence(v);
        let comm = &ev["communicators"][0];
        assert_eq!(comm["missing_ranks"], serde_json::json!([2]));
        assert_eq!(comm["waiting_ranks"], serde_json::json!([0, 1, 3]));
        let r2 = ev["ranks"].as_array().unwrap().iter().find(|r| r["rank"] == 2).unwrap();
        assert_eq!(r2["state"], "did_not_arrive");
        assert_eq!(r2["last_cuda_call"], "cudaLaunchKernel");
    }
}

#[test]
fn a_lost_kernel_record_mid_run_is_not_a_hang() {
    // Rank 1's kernel record of all-reduce seq 9 is missing, but later ones on the same
    // communicator completed: collectives complete in order, so seq 9 did too (200 steps: seq 9
    // is issued seconds before the end, which alone would make an unfinished collective a hang).
    let sc = Scenario { ranks: 4, steps: 200, lost_comm_kernel: Some((1, 9)), ..Scenario::default() };
    let d = run(&sc);
    assert!(d.find(VerdictKind::Hang).is_none(), "{}", table(&d));
    assert!(d.verdicts.iter().all(|v| v.severity < CLEAN_THRESHOLD), "{}", table(&d));
}

#[test]
fn desync() {
    for ranks in [2, 4] {
        let sc = Scenario { ranks, desync: Some((3, 1)), ..Scenario::default() };
        let d = run(&sc);
        let v = top(&d, VerdictKind::Desync);
        assert_eq!(v.ranks, vec![1], "{ranks} ranks\n{}", table(&d));
        assert_eq!(v.steps, vec![3]);
        assert_eq!(v.location.collective.as_ref().and_then(|c| c.seq), Some(12));
        assert_eq!(evidence(v)["mismatches"], 1);
    }
}

#[test]
fn oom() {
    let sc = Scenario { oom_at: Some(6), ..Scenario::default() };
    let d = run(&sc);
    let v = top(&d, VerdictKind::Oom);
    assert_eq!(v.ranks, vec![0, 1]);
    assert_eq!(v.steps, vec![6]);
    assert_eq!(num(v, "requested_bytes"), (2u64 << 30) as f64);
    assert_eq!(num(v, "growth_per_step_bytes"), (2u64 << 30) as f64);
    assert!(v.advice[0].contains("grows by 2 GiB every step"), "{}", v.advice[0]);
}

#[test]
fn hang_after_an_oom_ranks_after_it() {
    // r2 runs out of memory at step 6 and exits; the others wait for it at step 6's all-reduce.
    for watchdog in [false, true] {
        let sc = Scenario {
            ranks: 4,
            oom_at: Some(6),
            oom_rank: Some(2),
            hang: Some((6, 2)),
            watchdog,
            ..Scenario::default()
        };
        let d = run(&sc);
        let v = top(&d, VerdictKind::Oom);
        assert_eq!(v.ranks, vec![2], "{}", table(&d));
        assert_eq!(v.steps, vec![6]);
        let h = d.find(VerdictKind::Hang).unwrap_or_else(|| panic!("the hang is still reported\n{}", table(&d)));
        assert!(h.severity < v.severity && h.severity > 0.9, "{}", table(&d));
        assert_eq!(evidence(h)["after_oom"]["ranks"], serde_json::json!([2]));
        assert!(h.evidence_text().contains("ran out of device memory (step 6)"), "{}", h.evidence_text());
        assert_eq!(d.verdicts[1].kind, VerdictKind::Hang, "{}", table(&d));
    }
}

#[test]
fn amp_overflow() {
    let sc = Scenario { amp_overflow_every: Some(4), ..Scenario::default() };
    let d = run(&sc);
    let v = top(&d, VerdictKind::AmpOverflow);
    assert_eq!(v.steps, vec![3, 7, 11]);
    assert_eq!(v.ranks, vec![0, 1]);
    assert!((0.15..0.35).contains(&v.severity), "{}", table(&d));
}

#[test]
fn allocation_churn_hidden_behind_queued_work_is_no_memory_pressure() {
    // 49 cudaMalloc/cudaFree pairs per step (20 us each: 2 ms of host time per step) on a device far
    // from full, made while the GPU still runs the queued forward kernels: they cost the step nothing.
    let sc = Scenario { alloc_churn: Some((49, 20_000, false)), ..Scenario::default() };
    let d = run(&sc);
    assert!(
        d.verdicts.iter().all(|v| v.kind != VerdictKind::MemoryPressure),
        "churn the GPU never waited for is no verdict\n{}",
        table(&d)
    );
}

#[test]
fn allocation_churn_the_gpu_waits_for_is_memory_pressure_costed_by_the_wait() {
    // The same churn at the step's start, with nothing queued (the previous step ended with a
    // loss.item() sync): the GPU idles through it.
    let sc = Scenario { alloc_churn: Some((49, 20_000, true)), item_at_step_end: true, ..Scenario::default() };
    let d = run(&sc);
    let v = d
        .verdicts
        .iter()
        .find(|v| v.kind == VerdictKind::MemoryPressure)
        .unwrap_or_else(|| panic!("no memory_pressure\n{}", table(&d)));
    // 1.96 ms of GPU idle per step out of a step of roughly 38 ms.
    assert!(v.severity > 0.03 && v.severity < 0.08, "severity {:.3}\n{}", v.severity, table(&d));
}
