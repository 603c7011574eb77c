//! The report's NCCL section from the profiler plugin and the topology records: per communicator
//! its ranks, nodes and scope, per operation and size what NCCL chose, the bus bandwidth against
//! what the links allow, the nodes' sends against their line rate, and the network verdicts.

use std::fmt::Write as _;

use super::html::esc;
use super::ReportData;
use crate::units::{byte_size, millis_or_seconds, share_whole};

const KINDS: [&str; 3] = ["network_bound", "topology", "cross_node_latency"];

pub fn section(h: &mut String, d: &ReportData) {
    let Some(p) = &d.summary.nccl_plugin else { return };
    h.push_str("<section id=\"nccl-links\"><h2>NCCL: communicators, links and topology</h2><p class=\"hint\">From NCCL's profiler plugin (libtprof as NCCL_PROFILER_PLUGIN) and the topology probe. Allowed = NVLink inside a node, the nodes' NIC line rates summed across nodes.</p>");
    if let Some(t) = &p.topology {
        h.push_str("<table><thead><tr><th class=\"l\">node</th><th class=\"l\">ranks</th><th>GPUs</th><th class=\"l\">NICs</th><th>NIC GB/s</th><th>NVLink GB/s</th></tr></thead><tbody>");
        for n in &t.nodes {
            let nics: Vec<String> = n.nics.iter().map(|c| format!("{} {:.1} GB/s", c.name, c.rate_gbps)).collect();
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td class=\"l\">r{}</td><td>{}</td><td class=\"l\">{}</td><td>{:.1}</td><td>{:.1}</td></tr>",
                esc(&n.host),
                crate::convert::compress_ranges(&n.ranks),
                n.gpus,
                esc(&nics.join(", ")),
                n.nic_gbps,
                n.nvlink_gbps
            );
        }
        h.push_str("</tbody></table>");
    }
    for c in &p.comms {
        let _ = write!(
            h,
            "<h3>communicator {}{} &middot; {} ranks on {} nodes &middot; {}</h3>",
            &c.comm[..8],
            if c.name.is_empty() { String::new() } else { format!(" ({})", esc(&c.name)) },
            c.nranks.map_or("?".into(), |v| v.to_string()),
            c.nnodes.map_or("?".into(), |v| v.to_string()),
            c.scope
        );
        h.push_str("<table><thead><tr><th class=\"l\">op</th><th>size &le;</th><th>tasks</th><th class=\"l\">algo / proto / channels</th><th>mean time</th><th>busbw GB/s</th><th>allowed GB/s</th><th>of link</th><th>bandwidth part of time</th></tr></thead><tbody>");
        for o in p.ops.iter().filter(|o| o.comm == c.comm) {
            let a = p.analysis.iter().find(|b| b.comm == o.comm && b.op == o.op && b.size_bucket == o.size_bucket);
            let pct = |x: Option<f64>| x.map_or("-".to_string(), share_whole);
            let _ = write!(
                h,
                "<tr><td class=\"l\">{}</td><td>{}</td><td>{}</td><td class=\"l\">{} / {} / {}</td><td>{}</td><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&o.op),
                byte_size(o.size_bucket),
                o.calls,
                esc(&o.algo),
                esc(&o.proto),
                o.nchannels,
                millis_or_seconds(o.mean_gpu_ns),
                o.busbw_gbps.map_or("-".into(), |v| format!("{v:.1}")),
                a.and_then(|a| a.allowed_gbps).map_or("-".into(), |x| format!("{x:.1} ({})", a.map_or("-", |a| a.limit))),
                pct(a.and_then(|a| a.link_share)),
                pct(a.and_then(|a| a.bandwidth_time_share)),
            );
        }
        h.push_str("</tbody></table>");
        let links: Vec<_> = p.node_links.iter().filter(|l| l.comm == c.comm).collect();
        if !links.is_empty() {
            h.push_str("<table><thead><tr><th class=\"l\">node</th><th class=\"l\">ranks</th><th>sent</th><th>send GB/s</th><th>line GB/s</th></tr></thead><tbody>");
            for l in links {
                let _ = write!(
                    h,
                    "<tr><td class=\"l\">{}</td><td class=\"l\">r{}</td><td>{}</td><td><b>{:.1}</b></td><td>{:.1}</td></tr>",
                    esc(&l.host),
                    crate::convert::compress_ranges(&l.ranks),
                    byte_size(l.bytes),
                    l.send_gbps,
                    l.line_gbps
                );
            }
            h.push_str("</tbody></table>");
        }
    }
    if let Some(dv) = &d.diagnosis {
        let found: Vec<_> = dv.verdicts.iter().filter(|v| KINDS.contains(&v.kind.as_str())).collect();
        if found.is_empty() {
            h.push_str("<p>No network verdict (network_bound, topology, cross_node_latency).</p>");
        }
        for v in found {
            let _ = write!(
                h,
                "<p class=\"nccl-verdict\"><b>{}</b> ({}): {}<br>{}</p>",
                esc(&v.kind),
                share_whole(v.severity),
                esc(&v.summary),
                esc(&v.evidence)
            );
        }
    }
    h.push_str("</section>\n");
}
