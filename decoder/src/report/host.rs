//! The report's host resource timeline (under the step timeline): per rank, over time bins, the
//! CPU cores busy for the main process and its workers, the tree's RSS, the input read rate and
//! the machine's CPU utilisation, from the host samples (`host::usage` per bin).

use serde_json::{json, Map, Value};

use super::collect::ProcReport;
use crate::host::usage::usage;
use crate::model::Ns;

/// The charts: name -> {title, series: [{label, values}]}; empty without host samples.
pub fn host_json(procs: &[ProcReport], lo: Ns, hi: Ns, bins: usize) -> Value {
    type Pick = fn(&crate::host::HostUsage) -> Option<f64>;
    let charts: [(&str, &str, Pick); 5] = [
        ("cpu_main", "CPU cores busy: main process", |u| Some(u.main_cores)),
        ("cpu_workers", "CPU cores busy: workers", |u| (u.workers > 0).then_some(u.worker_cores)),
        ("rss", "RSS of the process tree, GiB", |u| Some(u.rss_bytes as f64 / (1u64 << 30) as f64)),
        ("input", "input read, MB/s", |u| Some(u.input_read_bytes / 1048576.0 / (u.duration_ns.max(1) as f64 / 1e9))),
        ("machine_cpu", "machine CPU busy, %", |u| u.machine_cpu_util.map(|x| x * 100.0)),
    ];
    let mut out = Map::new();
    if hi <= lo || bins == 0 {
        return Value::Object(out);
    }
    let width = (hi - lo).div_ceil(bins as u64).max(1);
    for (key, title, pick) in charts {
        let mut series = Vec::new();
        for p in procs.iter().filter(|p| !p.host.is_empty()) {
            let span = p.host.span().unwrap_or((0, 0));
            let values: Vec<Option<f64>> = (0..bins as u64)
                .map(|i| {
                    let (a, b) = (lo + i * width, lo + (i + 1) * width);
                    if b <= span.0 || a >= span.1 {
                        return None;
                    }
                    pick(&usage(&p.host, p.pid, a.max(span.0), b.min(span.1))).map(|v| (v * 1000.0).round() / 1000.0)
                })
                .collect();
            if values.iter().any(Option::is_some) {
                series.push(json!({"label": p.label, "values": values}));
            }
        }
        if !series.is_empty() {
            out.insert(key.to_string(), json!({"title": title, "series": series}));
        }
    }
    Value::Object(out)
}
