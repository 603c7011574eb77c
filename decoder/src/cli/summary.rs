//! `tprof summary`: arguments -> [`crate::summary::summarize`] -> tables, or the
//! [`crate::summary::Summary`] document (`--json`).

use clap::Args;

use super::input::{leading_notes, nothing_decoded, print_json, InputArgs};
use super::table::{short, Table};
use crate::gpu_counters::{self, CountersSummary};
use crate::summary::{summarize, NameRow, Summary};
use crate::units::{byte_size, duration, percent_of};

/// Arguments of `tprof summary`.
#[derive(Debug, Clone, Args)]
pub struct SummaryCmd {
    #[command(flatten)]
    pub input: InputArgs,
    /// Print JSON (stable keys) instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Rows per table.
    #[arg(long, default_value_t = 15)]
    pub top: usize,
}

pub fn run(a: &SummaryCmd) -> i32 {
    let inputs = match a.input.open() {
        Ok(i) => i,
        Err(code) => return code,
    };
    let opts = a.input.convert(true, false);
    let t0 = std::time::Instant::now();
    let (mut summary, errors) = summarize(&inputs.sources, &inputs.step_pattern, &opts);
    summary.notes = leading_notes(&inputs.notes, &errors, &mut summary.notes);
    if summary.ranks.is_empty() {
        return nothing_decoded(&summary.notes);
    }
    if a.json {
        return print_json(&summary);
    }
    if let Err(code) = super::stdout::print(&render(&summary, a.top)) {
        return code;
    }
    eprintln!(
        "tprof: summarized {} events from {} files in {:.2} s",
        summary.totals.events,
        summary.ranks.len(),
        t0.elapsed().as_secs_f64()
    );
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
    out.push_str(&format!("== Overall: {} ranks, span {}, {} events\n", t.ranks, duration(t.span_ns), t.events));
    let mut tb =
        Table::new(&["rank", "host", "span", "GPU busy", "compute", "comm", "memory", "idle", "steps"]).left(1);
    for r in &s.ranks {
        let busy = if r.gpu_times_missing { "missing".to_string() } else { percent_of(r.gpu_busy_ns, r.observed_ns) };
        tb.row(vec![
            r.label.clone(),
            r.host.clone(),
            duration(r.span_ns),
            busy,
            percent_of(r.compute_ns, r.observed_ns),
            percent_of(r.communication_ns, r.observed_ns),
            percent_of(r.memory_ns, r.observed_ns),
            percent_of(r.idle_ns, r.observed_ns),
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
            duration(r.observed_ns),
            duration(r.span_ns)
        ));
    }

    out.push_str(&format!("\n== GPU kernels ({}, by total time)\n", shown_of(top, s.kernels.len())));
    out.push_str(&name_table(&s.kernels, top, 90));
    out.push_str(&format!("\n== CUDA API ({})\n", shown_of(top, s.api.len())));
    out.push_str(&name_table(&s.api, top, usize::MAX));

    if !s.memcpy.is_empty() {
        out.push_str("\n== Memory operations\n");
        let mut tb = Table::new(&["kind", "count", "bytes", "time", "GB/s"]).left(0);
        for m in &s.memcpy {
            tb.row(vec![
                m.kind.clone(),
                m.count.to_string(),
                byte_size(m.bytes),
                duration(m.total_ns),
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
                known(c.bytes, byte_size(c.size_bucket)),
                known(c.nranks as u64, c.nranks.to_string()),
                c.count.to_string(),
                known(c.bytes, byte_size(c.bytes)),
                duration(c.time_ns),
                known(c.bytes, format!("{:.2}", c.algbw_gbps)),
                known(c.bytes * c.nranks as u64, format!("{:.2}", c.busbw_gbps)),
                c.gpu_timed.to_string(),
            ]);
        }
        out.push_str(&tb.render());
    }

    if let Some(p) = &s.nccl_plugin {
        out.push_str(&crate::nccl_plugin::render::render(p, top));
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
                duration(st.duration_ns),
                duration(st.mean_duration_ns),
                percent_of(st.mean_gpu_busy_ns, st.mean_duration_ns),
                duration(st.mean_exposed_comm_ns),
            ]);
        }
        out.push_str(&tb.render());
    }

    let nv: Vec<_> = s.nvtx.iter().filter(|n| n.gpu_ns > 0).take(top).collect();
    if !nv.is_empty() {
        out.push_str("\n== Ranges by projected GPU time (work launched inside them)\n");
        let mut tb = Table::new(&["GPU time", "range time", "count", "name"]).left(3);
        for n in nv {
            tb.row(vec![duration(n.gpu_ns), duration(n.range_ns), n.count.to_string(), short(&n.name, 90)]);
        }
        out.push_str(&tb.render());
    }

    out.push_str(&render_counters(&s.counters, top));
    out.push_str(&super::summary_host::render(&s.ranks, top));

    if let Some(c) = &s.clock {
        out.push_str(&format!(
            "\n== Clocks: {} collectives matched across ranks; residual skew median {} / max {} (before alignment: max {})\n",
            c.matched_collectives,
            duration(c.residual_median_ns),
            duration(c.residual_max_ns),
            duration(c.before_max_ns)
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

/// The first `top` rows of a kernel or API table, names cut to `name_width` characters.
fn name_table(rows: &[NameRow], top: usize, name_width: usize) -> String {
    let mut tb = Table::new(&["time %", "total", "count", "avg", "min", "max", "name"]).left(6);
    for k in rows.iter().take(top) {
        tb.row(vec![
            format!("{:.1}", k.pct),
            duration(k.total_ns),
            k.count.to_string(),
            duration(k.avg_ns),
            duration(k.min_ns),
            duration(k.max_ns),
            short(&k.name, name_width),
        ]);
    }
    tb.render()
}

/// The summary's text tables: per-step means (across ranks) of the main counters, then each
/// counter's run mean / min / max. Empty when no counter was sampled.
fn render_counters(c: &CountersSummary, top: usize) -> String {
    if c.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    let cols: Vec<&str> =
        gpu_counters::names::TABLE.iter().copied().filter(|n| c.names.iter().any(|x| x == n)).collect();
    if !c.steps.is_empty() && !cols.is_empty() {
        let shown = c.steps.len().min(top.max(1) * 2);
        out.push_str(&format!("\n== GPU counters per step ({shown} of {}; mean over ranks)\n", c.steps.len()));
        let mut header = vec!["step".to_string(), "ranks".to_string()];
        header.extend(cols.iter().map(|n| gpu_counters::short_title(n)));
        let refs: Vec<&str> = header.iter().map(|s| s.as_str()).collect();
        let mut tb = Table::new(&refs).left(0);
        for st in c.steps.iter().take(shown) {
            let mut row = vec![st.index.to_string(), st.ranks.to_string()];
            row.extend(
                cols.iter()
                    .map(|n| st.means.get(*n).map(|v| gpu_counters::format_value(n, *v)).unwrap_or_else(|| "-".into())),
            );
            tb.row(row);
        }
        out.push_str(&tb.render());
    }
    out.push_str("\n== GPU counters over the run (all sampled devices)\n");
    let mut tb = Table::new(&["counter", "mean", "min", "max", "samples"]).left(0);
    for n in &c.names {
        if let Some(st) = c.overall(n) {
            tb.row(vec![
                n.clone(),
                gpu_counters::format_value(n, st.mean),
                gpu_counters::format_value(n, st.min),
                gpu_counters::format_value(n, st.max),
                st.samples.to_string(),
            ]);
        }
    }
    out.push_str(&tb.render());
    out
}
