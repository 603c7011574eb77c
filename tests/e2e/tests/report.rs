//! GPU counters and `tprof report` end to end: a 4-rank simtrain under libtprof on the simulated
//! GPU stack (mock NVML with GPM), its counters in the ring / summary / Chrome export, and the
//! HTML report rendered in headless Chromium without script errors. Also: GPM-less devices fall
//! back to basic counters; without libnvidia-ml nothing else changes.
//!
//! Prerequisites (missing -> the test fails naming them): `cargo build --release` (libtprof.so,
//! tprof), `make -C tests/simgpu`, `make -C tests/programs`, /usr/bin/chromium (Debian `chromium`).
//! The screenshot is kept at `<target>/report-e2e/report.png`.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tprof_e2e::programs::{exclusive, TempDir};
use tprof_e2e::report::{chromium, chromium_run, target_dir, tprof_bin, traced_simtrain};

fn summary_json(out: &Path) -> Value {
    let o = Command::new(tprof_bin()).arg("summary").arg(out).arg("--json").output().unwrap();
    assert!(o.status.success(), "tprof summary: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn counter_names(s: &Value) -> BTreeSet<String> {
    s["counters"]["names"].as_array().unwrap().iter().map(|v| v.as_str().unwrap().to_string()).collect()
}

fn kernel_count(s: &Value) -> u64 {
    s["kernels"].as_array().unwrap().iter().map(|k| k["count"].as_u64().unwrap()).sum()
}

#[test]
fn four_rank_simtrain_counters_and_report_in_chromium() {
    let _x = exclusive();
    let browser = chromium();
    let tmp = TempDir::new("report-e2e");
    let out = tmp.path().join("rings");
    traced_simtrain(&["--ranks", "4", "--steps", "20"], &out, &[("TPROF_GPU_METRICS_HZ", "10")]);

    // Counters reached the ring and the summary: GPM and basic ones, one sampler per device.
    let s = summary_json(&out);
    let names = counter_names(&s);
    for n in [
        "gpu.util_pct",
        "gpu.power_w",
        "gpu.sm_active_pct",
        "gpu.tensor_active_pct",
        "gpu.dram_bw_pct",
        "gpu.nvlink_rx_MBps",
    ] {
        assert!(names.contains(n), "{n} missing from the summary's counters: {names:?}");
    }
    let util_rows: Vec<&Value> =
        s["counters"]["per_rank"].as_array().unwrap().iter().filter(|r| r["name"] == "gpu.util_pct").collect();
    assert_eq!(util_rows.len(), 4, "one sampling process per device: {util_rows:?}");
    let devices: BTreeSet<u64> = util_rows.iter().map(|r| r["devices"][0].as_u64().unwrap()).collect();
    assert_eq!(devices, BTreeSet::from([0, 1, 2, 3]));
    assert!(!s["counters"]["steps"].as_array().unwrap().is_empty(), "no per-step counter means");
    // Tensor cores are busy in simtrain (gemm / flash kernels).
    let tensor = s["counters"]["per_rank"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["name"] == "gpu.tensor_active_pct")
        .map(|r| r["max"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!(tensor > 1.0, "tensor activity never above 1%");

    // The Chrome export carries them as counter ("C") events.
    let chrome = tmp.path().join("trace.json");
    let o = Command::new(tprof_bin()).args(["export", "-f", "chrome", "-o"]).arg(&chrome).arg(&out).output().unwrap();
    assert!(o.status.success(), "tprof export: {}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&chrome).unwrap();
    assert!(
        text.contains("gpu.tensor_active_pct") && text.contains("\"ph\":\"C\""),
        "no counter tracks in the Chrome export"
    );

    // The report: last line says where it is.
    let art = target_dir().join("report-e2e");
    std::fs::create_dir_all(&art).unwrap();
    let page = art.join("report.html");
    let t0 = std::time::Instant::now();
    let o = Command::new(tprof_bin()).arg("report").arg(&out).arg("-o").arg(&page).output().unwrap();
    assert!(o.status.success(), "tprof report: {}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let last = stdout.lines().last().unwrap_or("");
    assert!(last.contains("report.html"), "last line does not say where the report is: {last:?}");
    eprintln!("report: {} bytes in {:.2} s", std::fs::metadata(&page).unwrap().len(), t0.elapsed().as_secs_f64());

    // Headless Chromium: the page's script ran to the end (report-ok) without an error.
    let profile = tmp.path().join("chromium-profile");
    let dom = chromium_run(&page, &profile, &["--dump-dom", "--virtual-time-budget=5000"]);
    let html = String::from_utf8_lossy(&dom.stdout);
    assert!(
        html.contains("id=\"report-ok\""),
        "the page's script did not finish ({}); stderr: {}",
        browser.display(),
        String::from_utf8_lossy(&dom.stderr)
    );
    assert!(!html.contains("id=\"report-error\""), "script error in the page");
    let err = String::from_utf8_lossy(&dom.stderr);
    assert!(!err.contains("Uncaught"), "console error: {err}");
    // Verdicts first, then the charts (drawn SVG paths for counters and memory), and the flame graph.
    let v = html.find("id=\"verdicts\"").expect("verdicts section");
    assert!(v < html.find("id=\"efficiency\"").unwrap());
    assert!(html.contains("Useful GPU compute"));
    let counters = &html[html.find("id=\"counter-chart\"").unwrap()..];
    assert!(counters[..counters.find("</section>").unwrap()].contains("<path"), "counter chart not drawn");
    assert!(html.contains("class=\"flame\""), "no flame graph");
    assert!(html.contains("AllReduce"), "no NCCL row");

    // A screenshot for people (and CI artifacts).
    let shot = art.join("report.png");
    let _ = std::fs::remove_file(&shot);
    let o = chromium_run(
        &page,
        &profile,
        &[&format!("--screenshot={}", shot.display()), "--window-size=1300,3800", "--hide-scrollbars"],
    );
    assert!(shot.exists(), "no screenshot: {}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn gpm_less_devices_fall_back_to_basic_counters() {
    let _x = exclusive();
    let tmp = TempDir::new("report-nogpm");
    let out = tmp.path().join("rings");
    traced_simtrain(&["--ranks", "2", "--steps", "10"], &out, &[("SIMGPU_GPM", "0"), ("TPROF_GPU_METRICS_HZ", "10")]);
    let names = counter_names(&summary_json(&out));
    assert!(names.contains("gpu.util_pct") && names.contains("gpu.mem_used_bytes"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.contains("sm_active") || n.contains("tensor")),
        "GPM counters without GPM: {names:?}"
    );
}

#[test]
fn without_nvml_nothing_else_changes() {
    let _x = exclusive();
    let tmp = TempDir::new("report-nonvml");
    // The mock stack minus libnvidia-ml.
    let libs = tmp.path().join("libs");
    std::fs::create_dir_all(&libs).unwrap();
    let src = tprof_e2e::programs::simgpu_lib_dir();
    for e in std::fs::read_dir(&src).unwrap() {
        let p = e.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if (name.ends_with(".so") || name.contains(".so.")) && !name.starts_with("libnvidia-ml") {
            std::os::unix::fs::symlink(&p, libs.join(&name)).unwrap();
        }
    }
    let with = tmp.path().join("with");
    traced_simtrain(&["--ranks", "2", "--steps", "10"], &with, &[]);
    let without = tmp.path().join("without");
    let o =
        traced_simtrain(&["--ranks", "2", "--steps", "10"], &without, &[("SIMGPU_LIB_DIR", libs.to_str().unwrap())]);
    let err = String::from_utf8_lossy(&o.stderr);
    // One line per rank (the launcher samples nothing and says nothing).
    assert_eq!(err.matches("libnvidia-ml.so.1 not found").count(), 2, "{err}");
    let (a, b) = (summary_json(&with), summary_json(&without));
    assert!(counter_names(&b).is_empty());
    assert!(!counter_names(&a).is_empty());
    assert_eq!(kernel_count(&a), kernel_count(&b), "kernels differ without NVML");
    assert_eq!(a["ranks"].as_array().unwrap().len(), b["ranks"].as_array().unwrap().len());
}
