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
            c.nranks.to_string(),
            c.nnodes.to_string(),
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
            format!("{:.2}", o.algbw_gbps),
            format!("{:.2}", o.busbw_gbps),
        ]);
    }
    out.push_str(&tb.render());
    if !p.links.is_empty() {
        let shown = p.links.len().min(top.max(1) * 4);
        out.push_str(&format!("\n== Network links from proxy operations ({shown} of {})\n", p.links.len()));
        let mut tb = Table::new(&["comm", "rank", "peer", "dir", "ops", "bytes", "link GB/s", "on wire"]).left(0);
        for l in p.links.iter().take(shown) {
            tb.row(vec![
                l.comm[..8].to_string(),
                l.rank.to_string(),
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
