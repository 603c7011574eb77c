//! The `topology` verdict's causes that NCCL's own choices give (see `nccl_topology`): for one
//! communicator, operation and size bucket (>= 1 MiB) whose bus bandwidth is below half of what the
//! links allow, what the plugin recorded NCCL chose and the NCCL settings the ranks had:
//!
//! - `p2p_disabled`: ranks share a node whose GPUs have NVLink P2P, but `NCCL_P2P_DISABLE` (a number, not 0)
//!   or `NCCL_P2P_LEVEL=LOC` turned the P2P transport off: NCCL falls back to SHM through host memory.
//! - `protocol_mismatch`: the LL or LL128 protocol on messages where NCCL's tuning picks Simple (LL
//!   moves 4 bytes of data per 8-byte line, and NCCL's model gives it a quarter of the bandwidth).
//! - `too_few_channels`: each channel reached `busbw / nchannels`; at that rate the links need more
//!   channels (allowed / that, rounded) than NCCL used, and no more than its 32 (a far lower rate
//!   is not the channels' doing), e.g. `NCCL_MAX_NCHANNELS` set low.

use super::nccl_network::NetworkView;
use super::nccl_topology::{excess, Candidate, TopologyEvidence};
use crate::nccl_plugin::analysis::BucketLink;
use crate::nccl_plugin::table::OpRow;
use crate::nccl_plugin::topology::TopologySummary;

/// "Far below what the links allow": busbw under this share of the allowed rate.
pub const FAR_BELOW: f64 = 0.5;
/// NCCL's most channels per communicator (MAXCHANNELS).
const MAX_CHANNELS: f64 = 32.0;

/// The settings of `names` any rank had, as `NAME=value`.
pub(super) fn settings(topo: &TopologySummary, names: &[&str]) -> Vec<String> {
    topo.nccl_settings
        .iter()
        .filter(|s| names.contains(&s.name.as_str()))
        .map(|s| format!("{}={}", s.name, s.value))
        .collect()
}

fn p2p_off(topo: &TopologySummary) -> Vec<String> {
    let off = |name: &str, value: &str| match name {
        "NCCL_P2P_DISABLE" => value.trim().parse::<i64>().is_ok_and(|v| v != 0),
        "NCCL_P2P_LEVEL" => value.trim().eq_ignore_ascii_case("LOC") || value.trim() == "0",
        _ => false,
    };
    topo.nccl_settings.iter().filter(|s| off(&s.name, &s.value)).map(|s| format!("{}={}", s.name, s.value)).collect()
}

fn base(b: &BucketLink, op: Option<&OpRow>, cause: &str) -> TopologyEvidence {
    TopologyEvidence {
        algo: op.map(|o| o.algo.clone()).unwrap_or_default(),
        allowed_gbps: b.allowed_gbps.unwrap_or(0.0),
        busbw_gbps: b.busbw_gbps,
        cause: cause.into(),
        comm: b.comm.clone(),
        nchannels: op.map_or(0, |o| o.nchannels as u32),
        nodes: b.nodes,
        nodes_needed: b.nodes_needed,
        op: b.op.clone(),
        proto: op.map(|o| o.proto.clone()).unwrap_or_default(),
        ..Default::default()
    }
}

/// The first of the three causes that explains `b`, if any.
pub fn find(v: &NetworkView, b: &BucketLink) -> Option<Candidate> {
    let topo = v.summary.topology.as_ref()?;
    let allowed = b.allowed_gbps?;
    if b.busbw_gbps <= 0.0 || b.busbw_gbps >= FAR_BELOW * allowed {
        return None;
    }
    let op = v.summary.ops.iter().find(|o| o.comm == b.comm && o.op == b.op && o.size_bucket == b.size_bucket);
    let label = &b.comm[..8.min(b.comm.len())];
    let shares_node = b.nranks > b.nodes;
    let nvlink_p2p = topo.gpus.iter().any(|g| g.nvlink_peers > 0);
    let off = p2p_off(topo);
    let mut ev;
    if shares_node && nvlink_p2p && !off.is_empty() {
        ev = base(b, op, "p2p_disabled");
        ev.link_gbps = b.nvlink_gbps.unwrap_or(0.0);
        ev.text = format!(
            "communicator {label}: {} is set, so NCCL moves data between the GPUs of a node through host memory (SHM) although they have NVLink P2P: {} runs at {:.1} GB/s bus bandwidth of the {:.1} GB/s the links allow.",
            off.join(", "),
            b.op,
            b.busbw_gbps,
            allowed
        );
        ev.settings = off;
    } else if op.is_some_and(|o| o.proto == "LL" || o.proto == "LL128") {
        ev = base(b, op, "protocol_mismatch");
        ev.settings = settings(topo, &["NCCL_PROTO", "NCCL_ALGO"]);
        let why = if ev.settings.is_empty() {
            "NCCL chose".to_string()
        } else {
            format!("{} forces", ev.settings.join(", "))
        };
        ev.text = format!(
            "communicator {label}: {why} the {} protocol ({}) on {} of {} bytes, where NCCL's tuning picks Simple: it runs at {:.1} GB/s bus bandwidth of the {:.1} GB/s the links allow.",
            ev.proto, ev.algo, b.op, b.size_bucket, b.busbw_gbps, allowed
        );
    } else {
        let nch = op.map_or(0, |o| o.nchannels) as f64;
        if nch <= 0.0 {
            return None;
        }
        let per_channel = b.busbw_gbps / nch;
        // Rounded: the kernel times include waiting for the last rank, so each channel's rate reads a little low.
        let needed = (allowed / per_channel).round();
        if needed > MAX_CHANNELS || nch >= needed {
            return None;
        }
        ev = base(b, op, "too_few_channels");
        ev.per_channel_gbps = per_channel;
        ev.channels_needed = needed as u32;
        ev.settings = settings(topo, &["NCCL_MAX_NCHANNELS", "NCCL_MIN_NCHANNELS", "NCCL_MAX_CTAS", "NCCL_MIN_CTAS"]);
        let why = if ev.settings.is_empty() { String::new() } else { format!(" ({} is set)", ev.settings.join(", ")) };
        ev.text = format!(
            "communicator {label}: {} of {} bytes uses {} channels{why} at {:.1} GB/s each: {:.1} GB/s bus bandwidth where the links allow {:.1} GB/s, which takes {} channels.",
            b.op, b.size_bucket, nch as u32, per_channel, b.busbw_gbps, allowed, ev.channels_needed
        );
    }
    ev.line_rate_gbps = allowed;
    ev.excess_ns = excess(b, allowed);
    Some(Candidate { cost: ev.excess_ns, ev, ranks: Vec::new() })
}

/// What to do about a cause of this module.
pub fn advice(ev: &TopologyEvidence) -> Vec<String> {
    match ev.cause.as_str() {
        "p2p_disabled" => vec![
            format!("unset {} so that NCCL uses NVLink P2P inside the node", ev.settings.join(" and ")),
            "if P2P was disabled for a hang or an IOMMU / ACS problem, fix that instead (ACS off on the PCIe switches, iommu=pt)".into(),
        ],
        "protocol_mismatch" if !ev.settings.is_empty() => vec![
            format!("unset {} and let NCCL's tuner pick the protocol per size (Simple for large messages)", ev.settings.join(" and ")),
            "to keep LL for small messages only, restrict it by size with a tuner plugin rather than NCCL_PROTO".into(),
        ],
        "protocol_mismatch" => vec![
            "set NCCL_PROTO=^LL (or ^LL,LL128) so that large messages use Simple".into(),
            "check for a tuner plugin (NCCL_TUNER_PLUGIN) that forces the protocol".into(),
        ],
        _ if !ev.settings.is_empty() => vec![
            format!("raise or unset {} (the links need {} channels)", ev.settings.join(" and "), ev.channels_needed),
            "NCCL_MIN_NCHANNELS can raise the channel count when NCCL picks few".into(),
        ],
        _ => vec![
            format!("set NCCL_MIN_NCHANNELS={} so that large collectives use enough channels", ev.channels_needed),
            "check that other kernels do not hold the SMs NCCL needs for its channels (NCCL_MAX_CTAS, CUDA MPS limits)".into(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nccl_plugin::topology::SettingRow;

    #[test]
    fn p2p_is_off_as_nccl_reads_the_settings() {
        let topo = |name: &str, value: &str| TopologySummary {
            nccl_settings: vec![SettingRow { name: name.into(), value: value.into(), ranks: vec![0] }],
            ..Default::default()
        };
        assert_eq!(p2p_off(&topo("NCCL_P2P_DISABLE", "1")), ["NCCL_P2P_DISABLE=1"]);
        assert_eq!(p2p_off(&topo("NCCL_P2P_LEVEL", "loc")), ["NCCL_P2P_LEVEL=loc"]);
        assert_eq!(p2p_off(&topo("NCCL_P2P_LEVEL", "0")), ["NCCL_P2P_LEVEL=0"]);
        // 0 keeps P2P; a non-number is ignored by NCCL (default 0); any other level allows NVLink.
        for (n, v) in [("NCCL_P2P_DISABLE", "0"), ("NCCL_P2P_DISABLE", "yes"), ("NCCL_P2P_LEVEL", "NVL")] {
            assert!(p2p_off(&topo(n, v)).is_empty(), "{n}={v}");
        }
    }
}
