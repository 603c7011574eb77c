//! The page: HTML + inline SVG drawn here, time-series charts drawn by a little JS from an
//! embedded JSON block. Every input is aggregated to a bounded size first.

use std::fmt::Write as _;

use serde_json::json;

use super::flame;
use super::ReportData;
use crate::gpu_counters::{binned, format_value, short_title};
use crate::summary::{demangle, StepRow};
use crate::units::{byte_size, millis_or_seconds, share_whole};

/// Most ranks drawn one row each (the rest are counted in a note).
const MAX_RANK_ROWS: usize = 64;
/// Most step columns per rank (steps are binned beyond).
const MAX_STEP_BINS: usize = 150;
/// Buckets of the time-series charts.
const TIME_BINS: usize = 300;
/// Most series per time chart.
const MAX_SERIES: usize = 64;

const PARTS: [(&str, &str, &str); 8] = [
    ("compute", "#4e79a7", "useful compute"),
    ("comm", "#f28e2b", "communication"),
    ("wait", "#e15759", "waiting for other ranks"),
    ("memcpy", "#76b7b2", "copies"),
    ("data", "#59a14f", "data loading"),
    ("launch", "#edc948", "launch overhead"),
    ("sync", "#b07aa1", "synchronization"),
    ("idle", "#bab0ac", "idle"),
];

pub fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

pub fn render(d: &ReportData) -> String {
    let mut h = String::with_capacity(1 << 20);
    let s = &d.summary;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>tprof: {}</title><style>{CSS}</style></head><body>\n",
        esc(&d.title)
    );
    let _ = write!(
        h,
        "<header><h1>tprof report</h1><div class=\"sub\">{}</div><div class=\"sub\">{} ranks &middot; span {} &middot; {} events</div></header>",
        esc(&d.title),
        s.totals.ranks,
        millis_or_seconds(s.totals.span_ns),
        s.totals.events
    );
    h.push_str("<nav><a href=\"#verdicts\">Verdicts</a><a href=\"#efficiency\">Efficiency</a><a href=\"#steps\">Steps</a><a href=\"#host\">Host</a><a href=\"#kernels\">Kernels</a><a href=\"#nccl\">NCCL</a><a href=\"#memory\">Memory</a><a href=\"#counters\">Counters</a><a href=\"#flame\">Flame graph</a></nav>\n<main>\n");
    if let Some((base, c)) = &d.baseline {
        super::baseline::section(&mut h, c, base);
    }
    verdicts(&mut h, d);
    efficiency(&mut h, d);
    steps(&mut h, d);
    h.push_str("<section id=\"host\"><h2>Host resources over time</h2><p class=\"hint\">From the host sampler (TPROF_HOST_HZ): CPU of the main process and its DataLoader workers, RSS, input read rate, machine CPU. Pick a chart:</p><select id=\"host-select\"></select><div class=\"chart\" id=\"host-chart\"></div></section>\n");
    kernels(&mut h, d);
    nccl(&mut h, d);
    super::nccl_links::section(&mut h, d);
    h.push_str("<section id=\"memory\"><h2>Device memory over time</h2><p class=\"hint\">Bytes reserved per rank and device (allocations tracked by tprof; max per time bucket).</p><div class=\"chart\" id=\"memory-chart\"></div></section>\n");
    h.push_str("<section id=\"counters\"><h2>GPU counters over time</h2><p class=\"hint\">Sampled from NVML by one process per device (GPM metrics on Hopper and newer). Pick a counter:</p><select id=\"counter-select\"></select><div class=\"chart\" id=\"counter-chart\"></div></section>\n");
    flamegraph(&mut h, d);
    if !d.notes.is_empty() {
        h.push_str("<section id=\"notes\"><h2>Notes</h2><ul>");
        for n in &d.notes {
            let _ = write!(h, "<li>{}</li>", esc(n));
        }
        h.push_str("</ul></section>\n");
    }
    h.push_str("</main>\n<script type=\"application/json\" id=\"report-data\">");
    h.push_str(&series_json(d).replace("</", "<\\/"));
    h.push_str("</script>\n<script>");
    h.push_str(JS);
    h.push_str("</script>\n</body></html>\n");
    h
}

fn verdicts(h: &mut String, d: &ReportData) {
    h.push_str("<section id=\"verdicts\"><h2>Verdicts</h2>\n");
    let Some(diag) = &d.diagnosis else {
        h.push_str("<p class=\"warn\">Diagnoses are unavailable for this input; the summary below still applies.</p></section>\n");
        return;
    };
    if let Some(o) = diag.efficiency.first() {
        let _ = write!(
            h,
            "<p class=\"headline\">Useful GPU compute: <b>{}</b> of wall time across ranks.</p>",
            share_whole(o.useful)
        );
    }
    if diag.verdicts.is_empty() {
        h.push_str("<p class=\"ok\">No problem found above 0.1% of wall time.</p>");
    }
    for v in &diag.verdicts {
        let class = if v.severity >= 0.2 {
            "high"
        } else if v.severity >= 0.05 {
            "mid"
        } else {
            "low"
        };
        let _ = write!(
            h,
            "<div class=\"verdict {class}\"><div class=\"vhead\"><span class=\"kind\">{}</span><span class=\"sev\">{} of wall time</span></div><div class=\"vsum\">{}</div>",
            esc(&v.kind.replace('_', " ")),
            share_whole(v.severity),
            esc(&v.summary)
        );
        if !v.evidence.is_empty() {
            let _ = write!(h, "<div class=\"evidence\">{}</div>", esc(&v.evidence));
        }
        if !v.ranks.is_empty() || !v.steps.is_empty() {
            let _ = write!(
                h,
                "<div class=\"where\">ranks {} {}</div>",
                esc(&v.ranks),
                if v.steps.is_empty() { String::new() } else { format!("&middot; steps {}", esc(&v.steps)) }
            );
        }
        if !v.advice.is_empty() {
            h.push_str("<ul class=\"advice\">");
            for a in &v.advice {
                let _ = write!(h, "<li>{}</li>", esc(a));
            }
            h.push_str("</ul>");
        }
        h.push_str("</div>\n");
    }
    h.push_str("</section>\n");
}

fn legend(h: &mut String, parts: &[(&str, &str, &str)]) {
    h.push_str("<div class=\"legend\">");
    for (_, color, label) in parts {
        let _ = write!(h, "<span><i style=\"background:{color}\"></i>{}</span>", esc(label));
    }
    h.push_str("</div>");
}

fn efficiency(h: &mut String, d: &ReportData) {
    h.push_str("<section id=\"efficiency\"><h2>Efficiency pipeline</h2><p class=\"hint\">Where each rank's wall time went.</p>\n");
    // (label, parts) rows: from the diagnosis, else the summary's busy split.
    let rows: Vec<(String, Vec<(&str, f64)>)> = match &d.diagnosis {
        Some(diag) if !diag.efficiency.is_empty() => {
            diag.efficiency.iter().map(|e| (e.label.clone(), e.parts.clone())).collect()
        }
        _ => d
            .summary
            .ranks
            .iter()
            .map(|r| {
                let t = r.observed_ns.max(1) as f64;
                (
                    r.label.clone(),
                    vec![
                        ("compute", r.compute_ns as f64 / t),
                        ("comm", r.communication_ns as f64 / t),
                        ("memcpy", r.memory_ns as f64 / t),
                        ("idle", r.idle_ns as f64 / t),
                    ],
                )
            })
            .collect(),
    };
    legend(h, &PARTS);
    let shown = rows.len().min(MAX_RANK_ROWS + 1);
    let (w, lw, rh) = (900.0, 70.0, 22.0);
    let _ = write!(
        h,
        "<svg class=\"pipeline\" viewBox=\"0 0 {w} {}\" width=\"{w}\" height=\"{}\">",
        shown as f64 * rh + 4.0,
        shown as f64 * rh + 4.0
    );
    for (i, (label, parts)) in rows.iter().take(shown).enumerate() {
        let y = i as f64 * rh + 2.0;
        let _ = write!(h, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", lw - 6.0, y + 15.0, esc(label));
        let mut x = lw;
        for (name, share) in parts {
            let color = PARTS.iter().find(|p| p.0 == *name).map(|p| p.1).unwrap_or("#999");
            let bw = (w - lw - 4.0) * share.clamp(0.0, 1.0);
            if bw > 0.0 {
                let _ = write!(
                    h,
                    "<rect x=\"{x:.1}\" y=\"{y}\" width=\"{bw:.1}\" height=\"{}\" fill=\"{color}\"><title>{}: {} {}</title></rect>",
                    rh - 4.0,
                    esc(label),
                    name,
                    share_whole(*share)
                );
                if bw > 34.0 {
                    let _ = write!(
                        h,
                        "<text class=\"in\" x=\"{:.1}\" y=\"{}\">{}</text>",
                        x + 4.0,
                        y + 14.0,
                        share_whole(*share)
                    );
                }
            }
            x += bw;
        }
    }
    h.push_str("</svg>");
    if rows.len() > shown {
        let _ = write!(h, "<p class=\"hint\">{} more ranks not drawn.</p>", rows.len() - shown);
    }
    h.push_str("</section>\n");
}

/// Steps of one rank merged into at most `bins` columns: (first step, last step, duration,
/// compute, exposed comm, other busy).
fn step_bins(steps: &[StepRow], bins: usize) -> Vec<(u64, u64, u64, u64, u64, u64)> {
    if steps.is_empty() {
        return Vec::new();
    }
    let per = steps.len().div_ceil(bins.max(1));
    steps
        .chunks(per)
        .map(|c| {
            let mut b = (c[0].index, c[c.len() - 1].index, 0, 0, 0, 0);
            for s in c {
                b.2 += s.duration_ns;
                b.3 += s.compute_ns.min(s.duration_ns);
                b.4 += s.exposed_comm_ns;
                b.5 += s.gpu_busy_ns.saturating_sub(s.compute_ns + s.exposed_comm_ns);
            }
            let n = c.len() as u64;
            (b.0, b.1, b.2 / n, b.3 / n, b.4 / n, b.5 / n)
        })
        .collect()
}

fn steps(h: &mut String, d: &ReportData) {
    h.push_str("<section id=\"steps\"><h2>Step timeline per rank</h2><p class=\"hint\">One column per step (consecutive steps averaged when there are many); height = step time, split into GPU compute, communication not hidden behind compute, other GPU work (copies, overlapped comm) and GPU idle.</p>\n");
    let parts = [
        ("compute", "#4e79a7", "GPU compute"),
        ("comm", "#f28e2b", "exposed communication"),
        ("memcpy", "#76b7b2", "other GPU work"),
        ("idle", "#bab0ac", "GPU idle"),
    ];
    legend(h, &parts);
    let ranks: Vec<_> = d.summary.ranks.iter().filter(|r| !r.steps.is_empty()).collect();
    if ranks.is_empty() {
        h.push_str("<p>No steps found.</p></section>\n");
        return;
    }
    let max_steps = ranks.iter().map(|r| r.steps.len()).max().unwrap_or(1);
    let bins = max_steps.min(MAX_STEP_BINS);
    let binned: Vec<_> =
        ranks.iter().take(MAX_RANK_ROWS).map(|r| (r.label.clone(), step_bins(&r.steps, bins))).collect();
    let tallest = binned.iter().flat_map(|(_, b)| b.iter().map(|x| x.2)).max().unwrap_or(1).max(1) as f64;
    let (w, lw, lane) = (900.0, 70.0, 46.0);
    let cw = (w - lw - 4.0) / bins as f64;
    let height = binned.len() as f64 * lane + 16.0;
    let _ = write!(h, "<svg class=\"steps\" viewBox=\"0 0 {w} {height}\" width=\"{w}\" height=\"{height}\">");
    for (i, (label, cols)) in binned.iter().enumerate() {
        let base = i as f64 * lane + lane - 4.0;
        let _ = write!(h, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", lw - 6.0, base - 14.0, esc(label));
        for (j, c) in cols.iter().enumerate() {
            let x = lw + j as f64 * cw;
            let scale = (lane - 8.0) / tallest;
            let idle = c.2.saturating_sub(c.3 + c.4 + c.5);
            let mut y = base;
            let title = format!(
                "{label} step {}{}: {} (compute {}, exposed comm {}, other {}, idle {})",
                c.0,
                if c.1 != c.0 { format!("-{}", c.1) } else { String::new() },
                millis_or_seconds(c.2),
                millis_or_seconds(c.3),
                millis_or_seconds(c.4),
                millis_or_seconds(c.5),
                millis_or_seconds(idle)
            );
            let _ = write!(h, "<g><title>{}</title>", esc(&title));
            for (v, color) in [(c.3, parts[0].1), (c.4, parts[1].1), (c.5, parts[2].1), (idle, parts[3].1)] {
                let bh = v as f64 * scale;
                if bh > 0.05 {
                    y -= bh;
                    let _ = write!(
                        h,
                        "<rect x=\"{x:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{bh:.2}\" fill=\"{color}\"/>",
                        (cw - 0.6).max(0.4)
                    );
                }
            }
            h.push_str("</g>");
        }
    }
    let _ = write!(
        h,
        "<text x=\"{lw}\" y=\"{}\" class=\"axis\">step {} &#8594; {} (tallest column {})</text>",
        height - 2.0,
        ranks[0].steps.first().map(|s| s.index).unwrap_or(0),
        max_steps,
        millis_or_seconds(tallest as u64)
    );
    h.push_str("</svg>");
    if ranks.len() > MAX_RANK_ROWS {
        let _ = write!(h, "<p class=\"hint\">{} more ranks not drawn.</p>", ranks.len() - MAX_RANK_ROWS);
    }
    h.push_str("</section>\n");
}

fn kernels(h: &mut String, d: &ReportData) {
    let s = &d.summary;
    let _ = write!(
        h,
        "<section id=\"kernels\"><h2>Top kernels</h2><p class=\"hint\">{} distinct kernels, {} of GPU kernel time in all.</p><table><thead><tr><th>share</th><th>total</th><th>count</th><th>avg</th><th>max</th><th class=\"l\">kernel</th></tr></thead><tbody>",
        s.kernels.len(),
        millis_or_seconds(s.totals.kernel_ns)
    );
    for k in s.kernels.iter().take(20) {
        let name = demangle(&k.name);
        let short: String = name.chars().take(120).collect();
        let _ = write!(
            h,
            "<tr><td><span class=\"bar\" style=\"width:{:.0}px\"></span>{:.1}%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l\" title=\"{}\">{}</td></tr>",
            k.pct.clamp(0.0, 100.0) * 0.6,
            k.pct,
            millis_or_seconds(k.total_ns),
            k.count,
            millis_or_seconds(k.avg_ns),
            millis_or_seconds(k.max_ns),
            esc(&name),
            esc(&short)
        );
    }
    h.push_str("</tbody></table></section>\n");
}

fn nccl(h: &mut String, d: &ReportData) {
    let s = &d.summary;
    h.push_str("<section id=\"nccl\"><h2>NCCL collectives</h2>");
    if s.collectives.is_empty() {
        h.push_str("<p>No collective was recorded.</p></section>\n");
        return;
    }
    h.push_str("<p class=\"hint\">Bus bandwidth as nccl-tests computes it; time is the GPU kernel's when known.</p><table><thead><tr><th class=\"l\">op</th><th>size &le;</th><th>ranks</th><th>count</th><th>bytes</th><th>time</th><th>algbw GB/s</th><th>busbw GB/s</th></tr></thead><tbody>");
    // Sizes and bandwidths are unknown ("-") for communication kernels seen without their NCCL call.
    let known = |v: u64, text: String| if v == 0 { "-".to_string() } else { text };
    for c in &s.collectives {
        let _ = write!(
            h,
            "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td></tr>",
            esc(&c.op),
            known(c.bytes, byte_size(c.size_bucket)),
            known(c.nranks as u64, c.nranks.to_string()),
            c.count,
            known(c.bytes, byte_size(c.bytes)),
            millis_or_seconds(c.time_ns),
            known(c.bytes, format!("{:.1}", c.algbw_gbps)),
            known(c.bytes * c.nranks as u64, format!("{:.1}", c.busbw_gbps))
        );
    }
    h.push_str("</tbody></table></section>\n");
}

fn flamegraph(h: &mut String, d: &ReportData) {
    h.push_str("<section id=\"flame\"><h2>Flame graph</h2><p class=\"hint\">GPU kernel time by the NVTX ranges that launched it, all ranks merged (hover a frame for its time).</p>");
    match flame::svg(&d.procs, 1200) {
        Some(svg) => {
            h.push_str("<div class=\"flame\">");
            h.push_str(&svg);
            h.push_str("</div>");
        }
        None => h.push_str("<p>No kernel with a GPU time was recorded.</p>"),
    }
    h.push_str("</section>\n");
}

/// The time series for the JS charts, binned over the job's span.
fn series_json(d: &ReportData) -> String {
    let (lo, hi) = d.summary.ranks.iter().fold((u64::MAX, 0u64), |a, r| (a.0.min(r.start_ns), a.1.max(r.end_ns)));
    let (lo, hi) = if lo >= hi { (0, 1) } else { (lo, hi) };
    let round = |v: Option<f64>| v.map(|x| (x * 100.0).round() / 100.0);
    // Memory: max reserved per bucket, carried forward.
    let width = (hi - lo).div_ceil(TIME_BINS as u64).max(1);
    let mut memory = Vec::new();
    for p in &d.procs {
        for (dev, pts) in &p.memory {
            if memory.len() >= MAX_SERIES {
                break;
            }
            let mut vals: Vec<Option<f64>> = vec![None; TIME_BINS];
            let mut last = 0u64;
            let mut it = pts.iter().peekable();
            for (b, slot) in vals.iter_mut().enumerate() {
                let end = lo + (b as u64 + 1) * width;
                let mut mx = last;
                while let Some(&&(t, v)) = it.peek() {
                    if t >= end {
                        break;
                    }
                    mx = mx.max(v);
                    last = v;
                    it.next();
                }
                *slot = Some(mx as f64 / (1u64 << 30) as f64);
            }
            memory.push(json!({"label": format!("{} GPU {dev}", p.label), "values": vals.into_iter().map(round).collect::<Vec<_>>()}));
        }
    }
    // Counters: one chart per name, one series per (rank, device).
    let mut counters = serde_json::Map::new();
    for name in &d.summary.counters.names {
        let mut series = Vec::new();
        for p in &d.procs {
            for (key, s) in p.counters.series.iter().filter(|(k, _)| &*k.0 == name.as_str()) {
                if series.len() >= MAX_SERIES {
                    break;
                }
                let scale = if name.ends_with("_bytes") { 1.0 / (1u64 << 30) as f64 } else { 1.0 };
                let vals: Vec<Option<f64>> =
                    binned(s, lo, hi, TIME_BINS).into_iter().map(|v| round(v.map(|x| x * scale))).collect();
                let dev = key.1.map(|d| format!(" GPU {d}")).unwrap_or_default();
                series.push(json!({"label": format!("{}{dev}", p.label), "values": vals}));
            }
        }
        let mean = d.summary.counters.overall(name).map(|st| format_value(name, st.mean)).unwrap_or_default();
        counters.insert(name.clone(), json!({"title": short_title(name), "mean": mean, "series": series}));
    }
    json!({
        "t0_ns": lo, "t1_ns": hi, "bins": TIME_BINS,
        "memory": {"title": "reserved GiB", "series": memory},
        "counters": counters,
        "host": super::host::host_json(&d.procs, lo, hi, TIME_BINS),
    })
    .to_string()
}

const CSS: &str = r##"
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2d3d;color:#fff;padding:14px 24px}header h1{margin:0;font-size:22px}
.sub{color:#cfd8e3;font-size:13px;margin-top:4px;word-break:break-all}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #ddd;padding:6px 24px;z-index:2}
nav a{margin-right:16px;color:#1f5fa8;text-decoration:none;font-size:14px}
main{padding:8px 24px 40px;max-width:1280px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:6px;padding:12px 18px;margin:14px 0;overflow-x:auto}
h2{font-size:18px;margin:4px 0 8px}.hint{color:#666;font-size:13px;margin:4px 0 8px}
.headline{font-size:16px}.ok{color:#2e7d32}.warn{color:#b26a00;font-weight:600}
.verdict{border-left:6px solid #999;padding:8px 12px;margin:10px 0;background:#fcfcfc}
.verdict.high{border-color:#d32f2f}.verdict.mid{border-color:#f57c00}.verdict.low{border-color:#fbc02d}
.vhead{display:flex;justify-content:space-between;font-weight:600}.kind{text-transform:capitalize}
.sev{color:#555;font-weight:400}.vsum{margin:4px 0}.evidence{color:#444;font-size:13px}
.where{color:#666;font-size:12px;margin-top:2px}.advice{margin:6px 0 0 0;font-size:14px}.advice li{margin:2px 0}
.legend{font-size:12px;margin:4px 0 6px}.legend span{margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:10px;height:10px;margin-right:4px;vertical-align:middle}
svg text{font-size:12px;fill:#333}svg text.in{fill:#fff;font-size:11px}svg text.axis{fill:#777;font-size:11px}
table{border-collapse:collapse;font-size:13px;width:100%}th,td{padding:3px 8px;text-align:right;border-bottom:1px solid #eee;white-space:nowrap}
th{background:#f3f5f7;cursor:pointer}.l{text-align:left;white-space:normal;word-break:break-all}
.bar{display:inline-block;height:9px;background:#4e79a7;margin-right:6px;vertical-align:middle}
.chart{min-height:60px}.chart svg{display:block}select{margin-bottom:6px}
.flame svg{max-width:100%;height:auto}
"##;

const JS: &str = r##"
window.addEventListener("error",function(e){var d=document.createElement("div");d.id="report-"+"error";d.textContent=String(e.message);document.body.appendChild(d);});
(function(){
"use strict";
var palette=["#4e79a7","#f28e2b","#e15759","#76b7b2","#59a14f","#edc948","#b07aa1","#ff9da7","#9c755f","#bab0ac"];
var NS="http://www.w3.org/2000/svg";
function el(tag,attrs,parent){var e=document.createElementNS(NS,tag);for(var k in attrs){e.setAttribute(k,attrs[k]);}if(parent){parent.appendChild(e);}return e;}
function fmt(v){if(v===null||v===undefined){return "-";}var a=Math.abs(v);return a>=1000?v.toFixed(0):a>=10?v.toFixed(1):v.toFixed(2);}
function lineChart(box,title,series,t0,t1){
  box.textContent="";
  if(!series||!series.length){box.textContent="No samples.";return;}
  var W=900,H=220,L=60,R=150,T=10,B=28,bins=series[0].values.length,max=0;
  series.forEach(function(s){s.values.forEach(function(v){if(v!==null&&v>max){max=v;}});});
  if(max<=0){max=1;}
  var svg=el("svg",{viewBox:"0 0 "+W+" "+H,width:W,height:H},box);
  var x=function(i){return L+(W-L-R)*(i+0.5)/bins;},y=function(v){return T+(H-T-B)*(1-v/max);};
  for(var g=0;g<=4;g++){var gv=max*g/4;el("line",{x1:L,x2:W-R,y1:y(gv),y2:y(gv),stroke:"#eee"},svg);var tx=el("text",{x:L-6,y:y(gv)+4,"text-anchor":"end"},svg);tx.textContent=fmt(gv);}
  var secs=(t1-t0)/1e9,ax=el("text",{x:L,y:H-8,"class":"axis"},svg);ax.textContent="0 s";
  var ax2=el("text",{x:W-R,y:H-8,"class":"axis","text-anchor":"end"},svg);ax2.textContent=secs.toFixed(1)+" s";
  var yl=el("text",{x:4,y:T+10,"class":"axis"},svg);yl.textContent=title;
  series.forEach(function(s,i){
    var d="",pen=false;
    s.values.forEach(function(v,j){if(v===null){pen=false;return;}d+=(pen?"L":"M")+x(j).toFixed(1)+" "+y(v).toFixed(1);pen=true;});
    var c=palette[i%palette.length];
    var p=el("path",{d:d,fill:"none",stroke:c,"stroke-width":1.5},svg);
    var tt=el("title",{},p);tt.textContent=s.label;
    if(i<12){var lt=el("text",{x:W-R+8,y:T+12+i*14},svg);lt.textContent=s.label;lt.setAttribute("fill",c);}
  });
}
function sortable(table){
  var ths=table.querySelectorAll("th");
  ths.forEach(function(th,col){th.addEventListener("click",function(){
    var body=table.tBodies[0],rows=Array.prototype.slice.call(body.rows),asc=th.getAttribute("data-asc")!=="1";
    th.setAttribute("data-asc",asc?"1":"0");
    var key=function(r){var t=r.cells[col].textContent,n=parseFloat(t);return isNaN(n)?t:n;};
    rows.sort(function(a,b){var x=key(a),y=key(b);return (x<y?-1:x>y?1:0)*(asc?1:-1);});
    rows.forEach(function(r){body.appendChild(r);});
  });});
}
var data=JSON.parse(document.getElementById("report-data").textContent);
lineChart(document.getElementById("memory-chart"),data.memory.title,data.memory.series,data.t0_ns,data.t1_ns);
var sel=document.getElementById("counter-select"),names=Object.keys(data.counters);
var prefer=["gpu.tensor_active_pct","gpu.sm_active_pct","gpu.util_pct"];
names.forEach(function(n){var o=document.createElement("option");o.value=n;o.textContent=n+" (mean "+data.counters[n].mean+")";sel.appendChild(o);});
var first=prefer.filter(function(n){return names.indexOf(n)>=0;})[0]||names[0];
function showCounter(n){var c=data.counters[n];lineChart(document.getElementById("counter-chart"),c.title,c.series,data.t0_ns,data.t1_ns);}
if(first){sel.value=first;showCounter(first);sel.addEventListener("change",function(){showCounter(sel.value);});}
else{sel.style.display="none";document.getElementById("counter-chart").textContent="No GPU counters were sampled (NVML unavailable, or TPROF_GPU_METRICS_HZ=0).";}
var hsel=document.getElementById("host-select"),hnames=Object.keys(data.host||{});
hnames.forEach(function(n){var o=document.createElement("option");o.value=n;o.textContent=data.host[n].title;hsel.appendChild(o);});
function showHost(n){var c=data.host[n];lineChart(document.getElementById("host-chart"),c.title,c.series,data.t0_ns,data.t1_ns);}
if(hnames.length){hsel.value=hnames[0];showHost(hnames[0]);hsel.addEventListener("change",function(){showHost(hsel.value);});}
else{hsel.style.display="none";document.getElementById("host-chart").textContent="No host samples (TPROF_HOST_HZ=0, or an imported trace).";}
document.querySelectorAll("table").forEach(sortable);
var ok=document.createElement("div");ok.id="report-"+"ok";ok.hidden=true;ok.textContent="rendered "+names.length+" counters, "+hnames.length+" host charts";document.body.appendChild(ok);
})();
"##;
