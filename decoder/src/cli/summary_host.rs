//! The host section of `tprof summary`'s text: per rank, CPU cores busy for the main process,
//! its main thread and its workers, RSS, input read, network, machine CPU and memory; then the
//! per-step host table of each rank (at most `top` steps).

use super::table::Table;
use crate::summary::RankSummary;
use crate::units::byte_size;

pub fn render(ranks: &[RankSummary], top: usize) -> String {
    let with: Vec<&RankSummary> = ranks.iter().filter(|r| r.host_resources.is_some()).collect();
    if with.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n== Host resources (process tree; machine where sampled)\n");
    let mut tb = Table::new(&[
        "rank",
        "main cores",
        "main thread",
        "workers",
        "worker cores",
        "RSS",
        "input read",
        "net rx/tx",
        "machine CPU",
        "mem avail",
        "sampler/round",
    ])
    .left(0);
    for r in &with {
        let Some(h) = &r.host_resources else { continue };
        let u = &h.run;
        tb.row(vec![
            r.label.clone(),
            format!("{:.2}", u.main_cores),
            format!("{:.2}", u.main_thread_cores),
            u.workers.to_string(),
            format!("{:.2}", u.worker_cores),
            byte_size(u.rss_bytes),
            byte_size(u.input_read_bytes as u64),
            format!("{}/{}", byte_size(u.net_rx_bytes as u64), byte_size(u.net_tx_bytes as u64)),
            u.machine_cpu_util
                .map(|x| format!("{:.0}% of {}", x * 100.0, u.machine_cores))
                .unwrap_or_else(|| "-".into()),
            u.mem_available_min_bytes.map(byte_size).unwrap_or_else(|| "-".into()),
            format!("{} us CPU", h.sampler_cpu_ns_per_round / 1000),
        ]);
    }
    out.push_str(&tb.render());
    for r in &with {
        let Some(h) = &r.host_resources else { continue };
        if h.steps.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\n== Host per step, {} (first {} of {})\n",
            r.label,
            top.min(h.steps.len()),
            h.steps.len()
        ));
        let mut tb = Table::new(&[
            "step",
            "main cores",
            "worker cores",
            "RSS",
            "input read",
            "storage read",
            "net rx",
            "net tx",
        ])
        .left(0);
        for s in h.steps.iter().take(top) {
            tb.row(vec![
                s.index.to_string(),
                format!("{:.2}", s.main_cores),
                format!("{:.2}", s.worker_cores),
                byte_size(s.rss_bytes),
                byte_size(s.input_read_bytes as u64),
                byte_size(s.storage_read_bytes as u64),
                byte_size(s.net_rx_bytes as u64),
                byte_size(s.net_tx_bytes as u64),
            ]);
        }
        out.push_str(&tb.render());
    }
    out
}
