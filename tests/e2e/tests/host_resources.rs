//! Host resources end to end: simtrain's real input pipelines (forked workers computing, reading
//! a slowed file, too few of them, the main thread making batches) profiled with the host sampler
//! on this machine's real /proc counters; `tprof diagnose` must name the kind of `data_loading`
//! with evidence from the samples, a clean run none of it; `tprof summary --json` carries the
//! samples per rank and per step, and the Chrome export their counter tracks.
//!
//! Thresholds are relative (pathology against clean in one test) and wide: the machine is shared.

use std::process::Command;
use std::time::Duration;

use tprof_e2e::diagnose::*;

fn run(args: &[&str]) -> ProfiledRun {
    let mut all = vec!["--steps", "24", "--quiet"];
    all.extend_from_slice(args);
    let r = profile_simtrain(&all, None, Duration::from_secs(120));
    assert_eq!(r.out.code, 0, "simtrain {all:?}: {}", r.out.describe());
    assert_eq!(r.ring_files().len(), 1, "simtrain {all:?}: one ring");
    r
}

fn data_loading(d: &serde_json::Value) -> Option<&serde_json::Value> {
    d["verdicts"].as_array().unwrap().iter().find(|v| v["kind"] == "data_loading")
}

fn kind_of(args: &[&str]) -> (String, serde_json::Value) {
    let r = run(args);
    let d = diagnose_json(r.rings.path(), &["--all"]);
    let v = data_loading(&d).unwrap_or_else(|| panic!("{args:?}: no data_loading\n{}", verdict_table(&d)));
    (v["evidence"]["kind"].as_str().unwrap_or("").to_string(), v["evidence"]["host"].clone())
}

#[test]
fn input_pipeline_kinds_from_real_host_counters() {
    let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
    let all = cpus.to_string();
    // One worker per core, each batch 80 ms of CPU against a 30 ms step: even with every core to
    // themselves the workers deliver a batch every 80 / cpus ms (40 ms on 2 cores), so the GPU waits
    // while every core is busy making batches. (At 30 ms per batch two workers kept up on an idle
    // machine and there was no stall.)
    let (k, h) = kind_of(&["--workers", &all, "--batch-work", "cpu", "--batch-ms", &(40 * cpus).to_string()]);
    assert_eq!(k, "workers_cpu_saturated", "{h}");
    assert_eq!(h["workers"].as_u64(), Some(cpus as u64), "{h}");
    assert!(h["worker_demand_each"].as_f64().unwrap() >= 0.6, "{h}");

    let (k, h) = kind_of(&["--workers", "1", "--batch-work", "cpu", "--batch-ms", "60"]);
    assert_eq!(k, "too_few_workers", "{h}");
    assert!(h["worker_demand_each"].as_f64().unwrap() >= 0.6, "{h}");

    let (k, h) = kind_of(&["--workers", "1", "--batch-work", "io", "--batch-ms", "60"]);
    assert_eq!(k, "io_bound", "{h}");
    // 1 MiB per 60 ms batch: well above 2 MB/s.
    assert!(h["input_read_bytes_per_s"].as_f64().unwrap() >= 4.0 * 1048576.0, "{h}");
    assert!(h["worker_demand_each"].as_f64().unwrap() < 0.5, "{h}");

    let (k, h) = kind_of(&["--batch-work", "cpu", "--batch-ms", "30"]);
    assert_eq!(k, "main_thread_bound", "{h}");
    assert!(h["main_thread_demand"].as_f64().unwrap() >= 0.6, "{h}");

    // Clean: no data_loading, no host memory verdict.
    let r = run(&[]);
    let d = diagnose_json(r.rings.path(), &["--all"]);
    assert!(data_loading(&d).is_none_or(|v| v["severity"].as_f64().unwrap() < 0.05), "{}", verdict_table(&d));
    assert!(
        d["verdicts"].as_array().unwrap().iter().all(|v| v["kind"] != "host_memory_pressure"),
        "{}",
        verdict_table(&d)
    );
}

#[test]
fn samples_in_summary_json_and_exports() {
    let r = run(&["--workers", "2", "--batch-work", "cpu", "--batch-ms", "20"]);
    let out = Command::new(tprof_bin()).arg("summary").arg(r.rings.path()).arg("--json").output().unwrap();
    assert!(out.status.success());
    let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let h = &s["ranks"][0]["host_resources"];
    assert_eq!(h["run"]["workers"].as_u64(), Some(2), "{h}");
    // The two computing workers used more CPU than the main process that waits for them.
    assert!(h["run"]["worker_cores"].as_f64().unwrap() > h["run"]["main_cores"].as_f64().unwrap(), "{}", h["run"]);
    assert!(h["run"]["rss_bytes"].as_u64().unwrap() > 1 << 20);
    assert_eq!(h["steps"].as_array().unwrap().len(), s["ranks"][0]["steps"].as_array().unwrap().len());
    assert!(h["sampler_rounds"].as_u64().unwrap() >= 3, "{h}");
    assert!(h["threads"].as_array().unwrap().iter().any(|t| t["name"] == "tprof-host"), "{h}");
    // Outputs beside, not among, the rings: `tprof report DIR` would read a trace.json in DIR as a
    // Kineto trace (a second process on another timebase).
    let outputs = tprof_e2e::programs::TempDir::new("host-resources-out");
    let trace = outputs.path().join("trace.json");
    let out = Command::new(tprof_bin())
        .args(["export", "--format", "chrome", "-o"])
        .arg(&trace)
        .arg(r.rings.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let t: serde_json::Value = serde_json::from_slice(&std::fs::read(&trace).unwrap()).unwrap();
    let events = t["traceEvents"].as_array().cloned().or_else(|| t.as_array().cloned()).unwrap();
    let worker_cpu: Vec<f64> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"].as_str().is_some_and(|n| n.starts_with("host cpu cores worker")))
        .filter_map(|e| e["args"].as_object().and_then(|a| a.values().next()).and_then(|v| v.as_f64()))
        .collect();
    assert!(!worker_cpu.is_empty(), "no host worker CPU counter track");
    assert!(worker_cpu.iter().all(|v| (0.0..=1.05).contains(v)), "one worker uses at most one core: {worker_cpu:?}");
    let report = outputs.path().join("report.html");
    let out = Command::new(tprof_bin()).arg("report").arg(r.rings.path()).arg("-o").arg(&report).output().unwrap();
    assert!(out.status.success());
    let html = std::fs::read_to_string(&report).unwrap();
    assert!(html.contains("id=\"host-chart\"") && html.contains("\"cpu_workers\""), "report has the host timeline");
    host_timeline_in_chromium(&html, outputs.path(), &h["run"]);
}

/// The report's host timeline drawn by headless Chromium: every chart the selector offers (picked
/// through the page's own `<select>`, its SVG copied out by a script added to a copy of the page)
/// has one line per rank with a point per time bin, and the values drawn (read back through the
/// chart's own grid: the 0 and top lines and their labels) agree with `summary`'s run figures.
fn host_timeline_in_chromium(html: &str, dir: &std::path::Path, run: &serde_json::Value) {
    let browser = tprof_e2e::report::chromium();
    let copy = r#"<script>(function(){var s=document.getElementById("host-select");
for(var i=0;i<s.options.length;i++){s.value=s.options[i].value;s.dispatchEvent(new Event("change"));
var d=document.createElement("div");d.id="drawn-"+s.value;d.innerHTML=document.getElementById("host-chart").innerHTML;
document.body.appendChild(d);}})();</script></body>"#;
    let page = dir.join("report-host.html");
    std::fs::write(&page, html.replacen("</body>", copy, 1)).unwrap();
    let o = tprof_e2e::report::chromium_run(
        &page,
        &dir.join("chromium-profile"),
        &["--dump-dom", "--virtual-time-budget=5000"],
    );
    let dom = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        dom.contains("id=\"report-ok\""),
        "{} did not finish the page: {}",
        browser.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let mut drawn = std::collections::BTreeMap::new();
    for key in ["cpu_main", "cpu_workers", "rss", "input", "machine_cpu"] {
        let Some(at) = dom.find(&format!("id=\"drawn-{key}\"")) else { continue };
        let svg = &dom[at..at + dom[at..].find("</svg>").expect("an svg")];
        drawn.insert(key, chart_values(svg));
    }
    for key in ["cpu_main", "cpu_workers", "rss", "machine_cpu"] {
        assert!(drawn.contains_key(key), "host chart {key} not drawn: {:?}", drawn.keys());
    }
    let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len().max(1) as f64;
    let max = |v: &Vec<f64>| v.iter().copied().fold(0.0, f64::max);
    for (key, values) in &drawn {
        assert!(values.len() >= 20, "{key}: {} points drawn: {values:?}", values.len());
        assert!(values.iter().all(|v| *v >= -1e-6), "{key}: {values:?}");
    }
    // The drawn lines carry the samples: means over the bins near the run's figures.
    let near = |key: &str, got: f64, want: f64| {
        assert!((got - want).abs() <= 0.25 * want.abs() + 0.05, "{key}: drawn mean {got:.3}, summary {want:.3}");
    };
    near("cpu_workers", mean(&drawn["cpu_workers"]), run["worker_cores"].as_f64().unwrap());
    near("cpu_main", mean(&drawn["cpu_main"]), run["main_cores"].as_f64().unwrap());
    let rss_gib = run["rss_bytes"].as_u64().unwrap() as f64 / (1u64 << 30) as f64;
    // (The top grid label has two decimals: 0.005 GiB of rounding.)
    let rss_max = max(&drawn["rss"]);
    assert!(
        rss_max <= rss_gib * 1.01 + 0.005 && rss_max >= 0.5 * rss_gib,
        "rss drawn up to {rss_max} GiB, summary {rss_gib}"
    );
    let util = run["machine_cpu_util"].as_f64().unwrap() * 100.0;
    near("machine_cpu", mean(&drawn["machine_cpu"]), util);
}

/// The values of the first line of a drawn chart, through its grid: the lines at 0 and at the top
/// value (labelled) give the mapping from y back to values.
fn chart_values(svg: &str) -> Vec<f64> {
    let attr = |tag: &str, name: &str| -> Option<String> {
        let at = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        Some(tag[at..at + tag[at..].find('"')?].to_string())
    };
    let tags: Vec<&str> = svg.split('<').collect();
    let lines: Vec<f64> =
        tags.iter().filter(|t| t.starts_with("line ")).filter_map(|t| attr(t, "y1")?.parse().ok()).collect();
    // Grid labels follow their lines: the first <text> after the last grid line is the top value.
    let labels: Vec<f64> = tags
        .iter()
        .filter(|t| t.starts_with("text ") && t.contains("text-anchor=\"end\"") && !t.contains("class=\"axis\""))
        .filter_map(|t| t.split('>').nth(1)?.trim().parse().ok())
        .collect();
    assert!(lines.len() >= 5 && labels.len() >= 5, "grid of the chart: {svg}");
    let (y0, ytop, top) = (lines[0], lines[4], labels[4]);
    let path = tags.iter().find(|t| t.starts_with("path ")).expect("a drawn line");
    let d = attr(path, "d").expect("path data");
    d.split(['M', 'L'])
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.split_whitespace().nth(1)?.parse::<f64>().ok())
        .map(|y| (y0 - y) / (y0 - ytop) * top)
        .collect()
}
