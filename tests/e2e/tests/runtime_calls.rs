//! The CUDA runtime calls a PyTorch step makes besides launches and copies, under the shim on the
//! simulated GPU: event records and completion queries, host functions and stream callbacks, stream
//! capture into graphs and their replay, kernels of libraries (`cudaLibraryLoadData` /
//! `cudaLibraryGetKernel`). Checked: every call is an `Api` record of the runtime domain with its
//! name (not left to CUPTI), launches made while a stream captures are not counted as kernel
//! executions (with CUPTI and with `TPROF_CUPTI=0`, where graph replays get one estimated kernel per
//! captured kernel, also for graphs captured before the capture window opened), library kernels are
//! named, host functions ran after the work queued before them.
//!
//! Needs: `cargo build --release -p tprof-shim -p tprof-decoder`, `make -C tests/simgpu`,
//! `make -C tests/programs` (`rt12_rtcalls`, `simtrain`).

use std::collections::BTreeMap;
use std::time::Duration;

use tprof_e2e::production::{simtrain_under_tprof, tprof_bin, tprof_lib};
use tprof_e2e::programs::simtrain_kernels as K;
use tprof_e2e::programs::{exclusive, require_mock_libs, require_program, run, sim_command, RunOutput, TempDir, Truth};
use tprof_e2e::shim::{read_rings, Ring};
use tprof_format::{ApiDomain, Record};

/// Kernels `rt12_rtcalls` executes (tests/programs/cuda/rtcalls.c): captured ones only by replays.
const EXECUTED: &[(&str, usize)] = &[
    ("_Z8rtc_slowPfi", 1),
    ("_Z8rtc_fillPfi", 7),
    ("_Z9rtc_scalePfi", 3),
    ("_Z10rtc_ptsz_kPfi", 4),
    ("_Z8rtc_intoPfi", 1),
    ("_Z9rtc_outerPfi", 2),
    ("_Z9lib_scalePfi", 2),
    ("lib_plain", 1),
];

struct Run {
    out: RunOutput,
    truth: Truth,
    rings: Vec<Ring>,
    ring_dir: TempDir,
    _truth_dir: TempDir,
}

fn rtcalls(tag: &str, cupti: bool) -> Run {
    require_mock_libs(&["libcudart.so.12", "libcupti.so.12"]);
    let exe = require_program("rt12_rtcalls");
    let truth_dir = TempDir::new(&format!("rtcalls-truth-{tag}"));
    let ring_dir = TempDir::new(&format!("rtcalls-rings-{tag}"));
    let mut cmd = sim_command(&exe, &[], truth_dir.path());
    cmd.env("LD_PRELOAD", tprof_lib())
        .env("TPROF_OUT", ring_dir.path())
        .env("TPROF_RING_MB", "4")
        .env("TPROF_QUIET", "1")
        .env("SIMGPU_KERNEL_NS", "rtc_slow=20000000");
    if !cupti {
        cmd.env("TPROF_CUPTI", "0");
    }
    let _guard = exclusive();
    let out = run(cmd, Duration::from_secs(120));
    out.assert_ok();
    let truth = Truth::load(truth_dir.path());
    let rings = read_rings(ring_dir.path());
    assert_eq!(rings.len(), 1, "one ring file: {}", out.describe());
    Run { out, truth, rings, ring_dir, _truth_dir: truth_dir }
}

/// `key=value` of the program's summary line.
fn field(out: &RunOutput, key: &str) -> u64 {
    let line = out.stdout.lines().find(|l| l.starts_with("rtcalls:")).expect("rtcalls summary line");
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{key} in {line}"))
}

fn truth_kernels(t: &Truth) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for k in t.of_kind("kernel") {
        *m.entry(k.name().to_string()).or_default() += 1;
    }
    m
}

/// Kernel records of the ring by name (CUPTI's, or the shim's estimates without CUPTI).
fn ring_kernels(rings: &[Ring]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for ring in rings {
        for r in &ring.records {
            if let Record::Kernel { name, .. } = r {
                *m.entry(ring.name(*name).to_string()).or_default() += 1;
            }
        }
    }
    m
}

/// (domain, name, detail, result) of every call: one per Api record, `calls` per ApiRepeat record
/// (identical repeats of the call before it).
fn apis(rings: &[Ring]) -> Vec<(ApiDomain, String, String, i32)> {
    let mut v = Vec::new();
    for ring in rings {
        for r in &ring.records {
            match *r {
                Record::Api { domain, name, detail, result, .. } => {
                    v.push((domain, ring.name(name).to_string(), ring.name(detail).to_string(), result))
                }
                Record::ApiRepeat { domain, name, result, calls, .. } => {
                    v.extend((0..calls).map(|_| (domain, ring.name(name).to_string(), String::new(), result)))
                }
                _ => {}
            }
        }
    }
    v
}

fn expected() -> BTreeMap<String, usize> {
    EXECUTED.iter().map(|(n, c)| (n.to_string(), *c)).collect()
}

#[test]
fn every_runtime_call_is_an_api_record_with_its_name() {
    let r = rtcalls("names", true);
    let all = apis(&r.rings);
    let count = |name: &str| all.iter().filter(|a| a.0 == ApiDomain::Runtime && a.1 == name).count();
    let not_ready = field(&r.out, "event_not_ready") as usize;
    let stream_not_ready = field(&r.out, "stream_not_ready") as usize;
    let calls: &[(&str, usize)] = &[
        ("cudaEventRecord", 3),
        ("cudaEventRecord_ptsz", 1),
        ("cudaEventRecordWithFlags", 1),
        ("cudaEventRecordWithFlags_ptsz", 1),
        ("cudaEventQuery", not_ready + 1),
        ("cudaStreamQuery", stream_not_ready + 1),
        ("cudaLaunchHostFunc", 5),
        ("cudaLaunchHostFunc_ptsz", 1),
        ("cudaStreamAddCallback", 1),
        ("cudaStreamAddCallback_ptsz", 1),
        ("cudaStreamBeginCapture", 2),
        ("cudaStreamBeginCapture_ptsz", 1),
        ("cudaStreamBeginCaptureToGraph", 1),
        ("cudaStreamEndCapture", 3),
        ("cudaStreamEndCapture_ptsz", 1),
        ("cudaStreamIsCapturing", 1),
        ("cudaStreamIsCapturing_ptsz", 1),
        ("cudaStreamGetCaptureInfo_v2", 1),
        ("cudaGraphInstantiate", 3),
        ("cudaGraphInstantiateWithFlags", 1),
        ("cudaGraphLaunch", 7),
        ("cudaGraphLaunch_ptsz", 2),
        ("cudaGraphExecDestroy", 4),
        ("cudaGraphDestroy", 4),
        ("cudaLibraryLoadData", 1),
        ("cudaLibraryLoadFromFile", 1),
        ("cudaLibraryGetKernel", 2),
        ("cudaLibraryUnload", 2),
    ];
    for (name, n) in calls {
        assert_eq!(count(name), *n, "{name}: interposed Api records");
        let from_cupti = all.iter().filter(|a| a.0 == ApiDomain::CuptiRuntime && a.1 == *name).count();
        assert_eq!(from_cupti, 0, "{name}: CUPTI's record of an interposed call is a duplicate");
    }
    assert!(count("cudaStreamQuery_ptsz") >= 1, "cudaStreamQuery_ptsz");
    // a query answering cudaErrorNotReady (600) is recorded with that result, one per poll
    let polls = all.iter().filter(|a| a.1 == "cudaEventQuery" && a.3 == 600).count();
    assert_eq!(polls, not_ready, "cudaEventQuery answered NotReady {not_ready} times");
    assert!(not_ready > 0, "the slow kernel kept the event pending at least once");
    drop(r.ring_dir);
}

#[test]
fn captured_launches_are_not_kernel_executions_with_cupti() {
    let r = rtcalls("cupti", true);
    let truth = truth_kernels(&r.truth);
    assert_eq!(truth, expected(), "ground truth: kernels run only when they execute");
    assert_eq!(ring_kernels(&r.rings), truth, "CUPTI kernel records by name");
    let summary = std::process::Command::new(tprof_bin())
        .args(["summary", "--json"])
        .arg(r.ring_dir.path())
        .output()
        .expect("run tprof summary");
    assert!(summary.status.success(), "{}", String::from_utf8_lossy(&summary.stderr));
    let s: serde_json::Value = serde_json::from_slice(&summary.stdout).expect("summary JSON");
    let counted: u64 = s["kernels"].as_array().unwrap().iter().map(|k| k["count"].as_u64().unwrap()).sum();
    assert_eq!(counted, truth.values().sum::<usize>() as u64, "kernels counted by tprof summary");
}

#[test]
fn captured_launches_are_not_kernel_executions_without_cupti() {
    let r = rtcalls("nocupti", false);
    let truth = truth_kernels(&r.truth);
    assert_eq!(truth, expected(), "ground truth: kernels run only when they execute");
    // no GPU times: one estimated Kernel record per execution, graph replays included
    assert_eq!(ring_kernels(&r.rings), truth, "estimated kernel records by name");
    let summary = std::process::Command::new(tprof_bin())
        .args(["summary", "--json"])
        .arg(r.ring_dir.path())
        .output()
        .expect("run tprof summary");
    let s: serde_json::Value = serde_json::from_slice(&summary.stdout).expect("summary JSON");
    let executed = truth.values().sum::<usize>();
    let note = format!("{executed} GPU records without times");
    assert!(
        s["notes"].as_array().unwrap().iter().any(|n| n.as_str().unwrap_or_default().contains(&note)),
        "summary notes {} should say `{note}`",
        s["notes"]
    );
}

#[test]
fn library_kernels_are_named() {
    let r = rtcalls("library", true);
    let all = apis(&r.rings);
    let launches = |api: &str, kernel: &str| all.iter().filter(|a| a.1 == api && a.2 == kernel).count();
    assert_eq!(launches("cudaLaunchKernel", "_Z9lib_scalePfi"), 2, "launches through the cudaKernel_t");
    assert_eq!(launches("cudaLaunchKernelExC", "lib_plain"), 1);
    let unnamed = all.iter().filter(|a| a.1.starts_with("cudaLaunchKernel") && a.2.is_empty()).count();
    assert_eq!(unnamed, 0, "every launch is named");
}

#[test]
fn host_functions_and_callbacks_ran_after_the_work_before_them() {
    let r = rtcalls("host", true);
    assert_eq!(field(&r.out, "host_funcs"), 5);
    assert_eq!(field(&r.out, "host_callbacks"), 2);
    assert_eq!(field(&r.out, "graph_host_funcs"), 3, "the captured host function runs with each replay");
    let slow = r.truth.of_kind("kernel").find(|k| k.name() == "_Z8rtc_slowPfi").expect("slow kernel in the truth");
    let started = field(&r.out, "host_fn_start_ns");
    assert!(
        started >= slow.end(),
        "host function started {} ns before the kernel queued before it ended",
        slow.end() - started
    );
}

/// simtrain `--graphs` captures the forward pass once and replays it every step; without CUPTI each
/// replay gets the captured kernels as estimated records, so forward and backward flash kernels
/// (the backward is launched eagerly) are counted alike: over the whole run, and in a steps window
/// that opens after the capture.
#[test]
fn simtrain_graph_replays_are_counted_without_cupti() {
    let layers = 4;
    for (mode, window_steps) in [(&["--mode", "full"][..], 5), (&["--mode", "steps", "--steps", "2-3"][..], 2)] {
        let out = TempDir::new("rtcalls-simtrain-rings");
        let truth = TempDir::new("rtcalls-simtrain-truth");
        let mut cmd = simtrain_under_tprof(
            mode,
            &["--steps", "5", "--layers", &layers.to_string(), "--graphs", "--quiet"],
            out.path(),
            truth.path(),
        );
        cmd.env("TPROF_CUPTI", "0").env("TPROF_RING_MB", "4");
        let _guard = exclusive();
        run(cmd, Duration::from_secs(120)).assert_ok();
        let t = Truth::load(truth.path());
        let in_truth = |prefix: &str| t.of_kind("kernel").filter(|k| k.name().starts_with(prefix)).count();
        assert_eq!(in_truth(K::FLASH_FWD), 5 * layers, "truth: one forward per step");
        let rings = read_rings(out.path());
        let estimated = |prefix: &str| -> usize {
            ring_kernels(&rings).iter().filter(|(n, _)| n.starts_with(prefix)).map(|(_, c)| c).sum()
        };
        assert_eq!(estimated(K::FLASH_BWD), window_steps * layers, "{mode:?}: eager backward kernels");
        assert_eq!(estimated(K::FLASH_FWD), window_steps * layers, "{mode:?}: forward kernels replayed by the graph");
    }
}
