//! `tprof summary`.

use regex_lite::Regex;

use super::table::{dur, pct, short, Table};
use crate::convert::ConvertOptions;
use crate::input::{discover, Notes};
use crate::steps::DEFAULT_STEP_PATTERN;
use crate::summary::{human_bytes, summarize, Summary};

/// Parsed arguments of `tprof summary`.
#[derive(Debug, Clone)]
pub struct SummaryArgs {
    pub paths: Vec<String>,
    pub json: bool,
    pub step_marker: Option<String>,
    pub top: usize,
    pub threads: usize,
}

pub fn run(a: &SummaryArgs) -> i32 {
    let pattern = match Regex::new(a.step_marker.as_deref().unwrap_or(DEFAULT_STEP_PATTERN)) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("tprof: --step-marker: bad regex: {e}");
            return 2;
        }
    };
    let mut notes = Notes::default();
    let sources = match discover(&a.paths, &mut notes) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("tprof: {e}");
            return 2;
        }
    };
    let opts = ConvertOptions { threads: a.threads, progress: true, align_clocks: false };
    let t0 = std::time::Instant::now();
    let (mut summary, errors) = summarize(&sources, &pattern, &opts);
    let mut pre: Vec<String> = notes.iter().map(|n| n.to_string()).collect();
    pre.extend(errors.iter().map(|e| format!("not used: {e}")));
    pre.append(&mut summary.notes);
    summary.notes = pre;
    if summary.ranks.is_empty() {
        for n in &summary.notes {
            eprintln!("tprof: {n}");
        }
        eprintln!("tprof: nothing could be decoded");
        return 1;
    }
    if a.json {
        match serde_json::to_string_pretty(&summary) {
            Ok(s) => {
                if let Err(code) = super::stdout::println(&s) {
                    return code;
                }
            }
            Err(e) => {
                eprintln!("tprof: {e}");
                return 1;
            }
        }
    } else {
        if let Err(code) = super::stdout::print(&render(&summary, a.top)) {
            return code;
        }
        eprintln!(
            "tprof: summarized {} events from {} files in {:.2} s",
            summary.totals.events,
            summary.ranks.len(),
            t0.elapsed().as_secs_f64()
        );
    }
    0
}

/// The human-readable report.
/// "top 15 of 40", or "all 12" when every row is shown.
fn shown_of(top: usize, total: usize) -> String {
    if top >= total {
        format!("all {total}")
    } else {
        format!("top {top} of {total}")
    }
}

pub fn render(s: &Summary, top: usize) -> String {
    let mut out = String::new();
    let t = &s.totals;
    out.push_str(&format!("== Overall: {} ranks, span {}, {} events\n", t.ranks, dur(t.span_ns), t.events));
    let mut tb =
        Table::new(&["rank", "host", "span", "GPU busy", "compute", "comm", "memory", "idle", "steps"]).left(1);
    for r in &s.ranks {
        let busy = if r.gpu_times_missing { "missing".to_string() } else { pct(r.gpu_busy_ns, r.observed_ns) };
        tb.row(vec![
            r.label.clone(),
            r.host.clone(),
            dur(r.span_ns),
            busy,
            pct(r.compute_ns, r.observed_ns),
            pct(r.communication_ns, r.observed_ns),
            pct(r.memory_ns, r.observed_ns),
            pct(r.idle_ns, r.observed_ns),
            format!(
                "{} ({})",
                r.steps.len(),
                r.step_source.map(|s| format!("{s:?}").to_lowercase()).unwrap_or_default()
            ),
        ]);
    }
    out.push_str(&tb.render());
    for r in s.ranks.iter().filter(|r| r.observed_ns < r.span_ns) {
        out.push_str(&format!(
            "note: {} was recorded in capture windows: {} observed of its {} span; the shares are of the observed time\n",
            r.label,
            dur(r.observed_ns),
            dur(r.span_ns)
        ));
    }

    out.push_str(&format!("\n== GPU kernels ({}, by total time)\n", shown_of(top, s.kernels.len())));
    let mut tb = Table::new(&["time %", "total", "count", "avg", "min", "max", "name"]).left(6);
    for k in s.kernels.iter().take(top) {
        tb.row(vec![
            format!("{:.1}", k.pct),
            dur(k.total_ns),
            k.count.to_string(),
            dur(k.avg_ns),
            dur(k.min_ns),
            dur(k.max_ns),
            short(&k.name, 90),
        ]);
    }
    out.push_str(&tb.render());

    out.push_str(&format!("\n== CUDA API ({})\n", shown_of(top, s.api.len())));
    let mut tb = Table::new(&["time %", "total", "count", "avg", "min", "max", "name"]).left(6);
    for k in s.api.iter().take(top) {
        tb.row(vec![
            format!("{:.1}", k.pct),
            dur(k.total_ns),
            k.count.to_string(),
            dur(k.avg_ns),
            dur(k.min_ns),
            dur(k.max_ns),
            k.name.clone(),
        ]);
    }
    out.push_str(&tb.render());

    if !s.memcpy.is_empty() {
        out.push_str("\n== Memory operations\n");
        let mut tb = Table::new(&["kind", "count", "bytes", "time", "GB/s"]).left(0);
        for m in &s.memcpy {
            tb.row(vec![
                m.kind.clone(),
                m.count.to_string(),
                human_bytes(m.bytes),
                dur(m.total_ns),
                format!("{:.2}", m.bandwidth_gbps),
            ]);
        }
        out.push_str(&tb.render());
    }

    if !s.collectives.is_empty() {
        out.push_str("\n== NCCL collectives (time = kernel duration when known)\n");
        let mut tb =
            Table::new(&["op", "size <=", "ranks", "count", "bytes", "time", "algbw GB/s", "busbw GB/s", "gpu-timed"])
                .left(0);
        // Message sizes (and so bandwidths) are unknown for communication kernels seen without
        // their NCCL call (some Kineto traces): "-", not 0.
        let known = |v: u64, text: String| if v == 0 { "-".to_string() } else { text };
        for c in &s.collectives {
            tb.row(vec![
                c.op.clone(),
                known(c.bytes, human_bytes(c.size_bucket)),
                known(c.nranks as u64, c.nranks.to_string()),
                c.count.to_string(),
                known(c.bytes, human_bytes(c.bytes)),
                dur(c.time_ns),
                known(c.bytes, format!("{:.2}", c.algbw_gbps)),
                known(c.bytes * c.nranks as u64, format!("{:.2}", c.busbw_gbps)),
                c.gpu_timed.to_string(),
            ]);
        }
        out.push_str(&tb.render());
    }

    if !s.steps.is_empty() {
        let shown = s.steps.len().min(top.max(1) * 2);
        out.push_str(&format!("\n== Steps ({} of {}; time = slowest rank)\n", shown, s.steps.len()));
        let mut tb = Table::new(&["step", "ranks", "time", "mean time", "GPU busy", "exposed comm"]).left(0);
        for st in s.steps.iter().take(shown) {
            // NVTX steps are all called "step": show the index, and the name when it says more.
            let label = if st.name.is_empty() || st.name == "step" || st.name.ends_with(&format!("#{}", st.index)) {
                st.index.to_string()
            } else {
                format!("{} {}", st.index, st.name)
            };
            tb.row(vec![
                label,
                st.ranks.to_string(),
                dur(st.duration_ns),
                dur(st.mean_duration_ns),
                pct(st.mean_gpu_busy_ns, st.mean_duration_ns),
                dur(st.mean_exposed_comm_ns),
            ]);
        }
        out.push_str(&tb.render());
    }

    let nv: Vec<_> = s.nvtx.iter().filter(|n| n.gpu_ns > 0).take(top).collect();
    if !nv.is_empty() {
        out.push_str("\n== Ranges by projected GPU time (work launched inside them)\n");
        let mut tb = Table::new(&["GPU time", "range time", "count", "name"]).left(3);
        for n in nv {
            tb.row(vec![dur(n.gpu_ns), dur(n.range_ns), n.count.to_string(), short(&n.name, 90)]);
        }
        out.push_str(&tb.render());
    }

    out.push_str(&crate::counters::render_table(&s.counters, top));

    if let Some(c) = &s.clock {
        out.push_str(&format!(
            "\n== Clocks: {} collectives matched across ranks; residual skew median {} / max {} (before alignment: max {})\n",
            c.matched_collectives,
            dur(c.residual_median_ns),
            dur(c.residual_max_ns),
            dur(c.before_max_ns)
        ));
        for h in &c.hosts {
            out.push_str(&format!("  {}: offset {} ns ({} samples)\n", h.host, h.offset_ns, h.samples));
        }
    }
    if !s.notes.is_empty() {
        out.push_str("\n== Notes\n");
        for n in &s.notes {
            out.push_str(&format!("  {n}\n"));
        }
    }
    out
}
