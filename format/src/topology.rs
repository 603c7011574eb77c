//! The vocabulary of the topology records (`TopoGpu`, `TopoNic`, `TopoGpuPath`) both sides speak:
//! PCIe path levels as NVML and `nvidia-smi topo -m` name them, NIC kinds, and what a link carries
//! (NVLink per version, a NIC's line rate) in GB/s (1e9 bytes/s, one direction).

/// How far apart two devices sit on the PCIe tree (NVML's `nvmlGpuTopologyLevel_t`, in our own bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[repr(u8)]
pub enum PathLevel {
    #[default]
    Unknown = 0,
    /// The same board (NVML `INTERNAL`).
    Internal = 1,
    /// One PCIe switch (`PIX`).
    Single = 2,
    /// Several PCIe switches, no host bridge (`PXB`).
    Multiple = 3,
    /// Through a host bridge (`PHB`).
    HostBridge = 4,
    /// Across host bridges within one NUMA node (`NODE`).
    Node = 5,
    /// Across NUMA nodes / sockets (`SYS`).
    System = 6,
}

impl PathLevel {
    pub const ALL: [PathLevel; 7] = [
        PathLevel::Unknown,
        PathLevel::Internal,
        PathLevel::Single,
        PathLevel::Multiple,
        PathLevel::HostBridge,
        PathLevel::Node,
        PathLevel::System,
    ];
    pub fn from_u8(b: u8) -> PathLevel {
        PathLevel::ALL.get(b as usize).copied().unwrap_or_default()
    }
    /// From NVML's `nvmlGpuTopologyLevel_t` (0, 10, 20 ... 50).
    pub fn from_nvml(level: u32) -> PathLevel {
        match level {
            0 => PathLevel::Internal,
            10 => PathLevel::Single,
            20 => PathLevel::Multiple,
            30 => PathLevel::HostBridge,
            40 => PathLevel::Node,
            50 => PathLevel::System,
            _ => PathLevel::Unknown,
        }
    }
    /// The name `nvidia-smi topo -m` prints.
    pub fn name(self) -> &'static str {
        match self {
            PathLevel::Unknown => "?",
            PathLevel::Internal => "SELF",
            PathLevel::Single => "PIX",
            PathLevel::Multiple => "PXB",
            PathLevel::HostBridge => "PHB",
            PathLevel::Node => "NODE",
            PathLevel::System => "SYS",
        }
    }
}

/// What kind of network port a `TopoNic` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum NicKind {
    #[default]
    Unknown = 0,
    /// An InfiniBand / RoCE port (`/sys/class/infiniband/*/ports/*`).
    Infiniband = 1,
    /// An Ethernet interface (`/sys/class/net/*`).
    Ethernet = 2,
}

impl NicKind {
    pub fn from_u8(b: u8) -> NicKind {
        match b {
            1 => NicKind::Infiniband,
            2 => NicKind::Ethernet,
            _ => NicKind::Unknown,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            NicKind::Unknown => "?",
            NicKind::Infiniband => "ib",
            NicKind::Ethernet => "eth",
        }
    }
}

/// GB/s one NVLink carries in one direction, by NVML's `nvmlNvlinkVersion_t` (1 = NVLink 1.0,
/// 2-6 = 2.0 .. 4.0, 7 = 5.0, 8 = 6.0); 0 when unknown.
pub fn nvlink_gbps_per_link(version: u32) -> f64 {
    match version {
        1 => 20.0,
        2..=6 => 25.0,
        7 => 50.0,
        8 => 100.0,
        _ => 0.0,
    }
}

/// The NCCL environment settings the shim records (`NcclSetting`, once per process, those set): the
/// ones that change which transport, algorithm, protocol or how many channels NCCL uses.
pub const NCCL_SETTINGS: &[&str] = &[
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_CTAS",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_NET_GDR_READ",
    "NCCL_CROSS_NIC",
    "NCCL_SOCKET_IFNAME",
    "NCCL_TOPO_FILE",
    "NCCL_NCHANNELS_PER_NET_PEER",
    "NCCL_BUFFSIZE",
];

/// A line rate in Mbit/s as GB/s (1e9 bytes/s).
pub fn mbps_to_gbps(mbps: u64) -> f64 {
    mbps as f64 / 8000.0
}

/// Parses an InfiniBand port's `rate` file ("200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)") to Mbit/s.
pub fn parse_ib_rate(text: &str) -> Option<u64> {
    let mut it = text.split_whitespace();
    let num: f64 = it.next()?.parse().ok()?;
    let unit = it.next()?;
    let mult = match unit {
        "Gb/sec" | "Gb/s" => 1000.0,
        "Mb/sec" | "Mb/s" => 1.0,
        _ => return None,
    };
    (num.is_finite() && num >= 0.0).then(|| (num * mult).round() as u64)
}

/// Parses an Ethernet interface's `speed` file (Mbit/s; "-1" or unreadable when down) to Mbit/s.
pub fn parse_net_speed(text: &str) -> Option<u64> {
    let v: i64 = text.trim().parse().ok()?;
    (v > 0).then_some(v as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_and_rates() {
        for l in PathLevel::ALL {
            assert_eq!(PathLevel::from_u8(l as u8), l);
        }
        assert_eq!(PathLevel::from_u8(99), PathLevel::Unknown);
        assert_eq!(PathLevel::from_nvml(50), PathLevel::System);
        assert_eq!(PathLevel::from_nvml(10).name(), "PIX");
        assert_eq!(NicKind::from_u8(1), NicKind::Infiniband);
        assert_eq!(nvlink_gbps_per_link(6) * 18.0, 450.0);
        assert_eq!(parse_ib_rate("200 Gb/sec (4X HDR)\n"), Some(200_000));
        assert_eq!(parse_ib_rate("2.5 Gb/sec (1X SDR)"), Some(2500));
        assert_eq!(parse_ib_rate("garbage"), None);
        assert_eq!(parse_net_speed("25000\n"), Some(25000));
        assert_eq!(parse_net_speed("-1"), None);
        assert_eq!(mbps_to_gbps(200_000), 25.0);
    }
}
