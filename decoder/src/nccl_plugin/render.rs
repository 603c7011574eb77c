//! The plugin's part of `tprof summary`: communicators, what NCCL chose per operation and size,
//! and the network links.

use super::table::NcclPluginSummary;
use crate::cli::table::Table;
use crate::units::{byte_size, duration};

pub fn render(p: &NcclPluginSummary, top: usize) -> String {
    let mut out = format!(
        "\n== NCCL profiler plugin: {} communicators; {:.1}% of collective GPU time in communicators spanning nodes\n",
        p.comms.len(),
        p.inter_node_share * 100.0
    );
    let mut tb = Table::new(&["comm", "name", "ranks", "nodes", "scope", "ranks seen", "plugin"]).left(0).left(1);
    for c in &p.comms {
        tb.row(vec![
            c.comm.clone(),
            if c.name.is_empty() { "-".into() } else { c.name.clone() },
            c.nranks.map_or("-".into(), |v| v.to_string()),
            c.nnodes.map_or("-".into(), |v| v.to_string()),
            c.scope.to_string(),
            c.ranks_seen.to_string(),
            format!("v{}", c.plugin_version),
        ]);
    }
    out.push_str(&tb.render());
    out.push_str("\n== NCCL choices per communicator, op and size (time = kernel-channel GPU timers)\n");
    let mut tb = Table::new(&[
        "comm",
        "op",
        "size <=",
        "scope",
        "tasks",
        "algo",
        "proto",
        "channels",
        "mean time",
        "algbw GB/s",
        "busbw GB/s",
    ])
    .left(0)
    .left(1);
    for o in &p.ops {
        tb.row(vec![
            o.comm[..8].to_string(),
            o.op.clone(),
            byte_size(o.size_bucket),
            o.scope.to_string(),
            o.calls.to_string(),
            if o.algo.is_empty() { "-".into() } else { o.algo.clone() },
            if o.proto.is_empty() { "-".into() } else { o.proto.clone() },
            o.nchannels.to_string(),
            if o.gpu_timed > 0 { duration(o.mean_gpu_ns) } else { "-".into() },
            o.algbw_gbps.map_or("-".into(), |v| format!("{v:.2}")),
            o.busbw_gbps.map_or("-".into(), |v| format!("{v:.2}")),
        ]);
    }
    out.push_str(&tb.render());
    if let Some(t) = &p.topology {
        out.push_str(&format!("\n== Topology: {} nodes, {} GPUs recorded\n", t.nodes.len(), t.gpus.len()));
        let mut tb = Table::new(&["host", "ranks", "GPUs", "NICs", "NIC GB/s", "NVLink GB/s"]).left(0).left(3);
        for n in &t.nodes {
            let nics: Vec<String> =
                n.nics.iter().map(|c| format!("{}:{} {} {:.1} GB/s", c.name, c.port, c.kind, c.rate_gbps)).collect();
            tb.row(vec![
                n.host.clone(),
                format!("r{}", crate::convert::compress_ranges(&n.ranks)),
                n.gpus.to_string(),
                if nics.is_empty() { "-".into() } else { nics.join(", ") },
                format!("{:.1}", n.nic_gbps),
                format!("{:.1}", n.nvlink_gbps),
            ]);
        }
        out.push_str(&tb.render());
        for s in &t.nccl_settings {
            out.push_str(&format!("  {}={} (r{})\n", s.name, s.value, crate::convert::compress_ranges(&s.ranks)));
        }
    }
    if p.analysis.iter().any(|b| b.allowed_gbps.is_some()) {
        out.push_str("\n== NCCL bandwidth against the links (busbw / what NVLink or the nodes' NICs allow)\n");
        let mut tb = Table::new(&[
            "comm",
            "op",
            "size <=",
            "nodes",
            "needed",
            "busbw GB/s",
            "allowed GB/s",
            "link",
            "of link",
            "bw time",
        ])
        .left(0)
        .left(1);
        for b in &p.analysis {
            tb.row(vec![
                b.comm[..8].to_string(),
                b.op.clone(),
                byte_size(b.size_bucket),
                b.nodes.to_string(),
                b.nodes_needed.to_string(),
                format!("{:.2}", b.busbw_gbps),
                b.allowed_gbps.map_or("-".into(), |a| format!("{a:.1}")),
                b.limit.to_string(),
                b.link_share.map_or("-".into(), |x| format!("{:.0}%", x * 100.0)),
                b.bandwidth_time_share.map_or("-".into(), |x| format!("{:.0}%", x * 100.0)),
            ]);
        }
        out.push_str(&tb.render());
    }
    if !p.node_links.is_empty() {
        out.push_str("\n== Node sends across nodes (proxy operations) against the line rate\n");
        let mut tb = Table::new(&["comm", "host", "ranks", "bytes", "send GB/s", "line GB/s"]).left(0).left(1);
        for l in &p.node_links {
            tb.row(vec![
                l.comm[..8].to_string(),
                l.host.clone(),
                format!("r{}", crate::convert::compress_ranges(&l.ranks)),
                byte_size(l.bytes),
                format!("{:.2}", l.send_gbps),
                format!("{:.1}", l.line_gbps),
            ]);
        }
        out.push_str(&tb.render());
    }
    if !p.links.is_empty() {
        let shown = p.links.len().min(top.max(1) * 4);
        out.push_str(&format!("\n== Network links from proxy operations ({shown} of {})\n", p.links.len()));
        let mut tb = Table::new(&["comm", "rank", "peer", "dir", "ops", "bytes", "link GB/s", "on wire"]).left(0);
        for l in p.links.iter().take(shown) {
            tb.row(vec![
                l.comm[..8].to_string(),
                l.rank.map_or("-".into(), |v| v.to_string()),
                l.peer.to_string(),
                l.direction.to_string(),
                l.ops.to_string(),
                byte_size(l.bytes),
                format!("{:.2}", l.link_gbps),
                format!("{:.0}%", l.wire_share * 100.0),
            ]);
        }
        out.push_str(&tb.render());
    }
    out
}
