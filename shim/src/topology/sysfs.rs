//! What the topology probe reads from sysfs and procfs, under a root (`TPROF_SYSROOT`, default `/`):
//! the host name, network ports with their line rates, NUMA nodes of PCI devices, and the PCIe path
//! between the GPU and each port. Plain file reads; nothing here runs on a hot path.

use std::fs;
use std::path::{Path, PathBuf};

use tprof_format::topology::{parse_ib_rate, parse_net_speed, NicKind, PathLevel};

/// One network port as sysfs describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Port {
    /// `mlx5_0` (InfiniBand device) or `eth0` (interface).
    pub name: String,
    /// InfiniBand port number (1 ...); 0 for Ethernet interfaces.
    pub port: u32,
    pub kind: NicKind,
    /// Line rate, Mbit/s (0: down or unknown).
    pub rate_mbps: u64,
    /// The PCI device behind it (canonical sysfs path), when there is one.
    pub pci_path: Option<PathBuf>,
}

fn read(p: &Path) -> Option<String> {
    fs::read_to_string(p).ok()
}

fn sorted_dir(p: &Path) -> Vec<(String, PathBuf)> {
    let mut v: Vec<(String, PathBuf)> = fs::read_dir(p)
        .map(|d| d.flatten().map(|e| (e.file_name().to_string_lossy().into_owned(), e.path())).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// The host name under `root` (`proc/sys/kernel/hostname`), else None.
pub fn hostname(root: &Path) -> Option<String> {
    read(&root.join("proc/sys/kernel/hostname")).map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

/// Every InfiniBand port and every Ethernet interface with a PCI device (virtual interfaces and
/// loopback have none), sorted by name.
pub fn ports(root: &Path) -> Vec<Port> {
    let mut out = Vec::new();
    for (dev, path) in sorted_dir(&root.join("sys/class/infiniband")) {
        let pci_path = fs::canonicalize(path.join("device")).ok();
        for (port, ppath) in sorted_dir(&path.join("ports")) {
            let rate = read(&ppath.join("rate")).and_then(|t| parse_ib_rate(&t)).unwrap_or(0);
            out.push(Port {
                name: dev.clone(),
                port: port.parse().unwrap_or(0),
                kind: NicKind::Infiniband,
                rate_mbps: rate,
                pci_path: pci_path.clone(),
            });
        }
    }
    for (ifname, path) in sorted_dir(&root.join("sys/class/net")) {
        let Ok(pci_path) = fs::canonicalize(path.join("device")) else { continue };
        let rate = read(&path.join("speed")).and_then(|t| parse_net_speed(&t)).unwrap_or(0);
        out.push(Port { name: ifname, port: 0, kind: NicKind::Ethernet, rate_mbps: rate, pci_path: Some(pci_path) });
    }
    out
}

/// NVML's bus id ("00000000:3B:00.0") as sysfs names the device ("0000:3b:00.0").
pub fn sysfs_bus_id(nvml_bus_id: &str) -> String {
    let lower = nvml_bus_id.trim().to_ascii_lowercase();
    match lower.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => format!("{}:{rest}", &domain[domain.len() - 4..]),
        _ => lower,
    }
}

/// The canonical sysfs path of the PCI device with this (sysfs) bus id.
pub fn pci_device_path(root: &Path, bus_id: &str) -> Option<PathBuf> {
    fs::canonicalize(root.join("sys/bus/pci/devices").join(bus_id)).ok()
}

/// The NUMA node of a PCI device (its `numa_node` file; -1 when absent or unknown).
pub fn numa_node(pci_path: Option<&Path>) -> i32 {
    pci_path.and_then(|p| read(&p.join("numa_node"))).and_then(|t| t.trim().parse().ok()).unwrap_or(-1)
}

/// The PCIe path between two devices from their sysfs paths (`.../devices/pci0000:00/<bridge>/.../<dev>`):
/// different root complexes: `NODE` on one NUMA node, else `SYS`; one root complex: `PHB` when only
/// the root is shared, `PXB` when the root port is, `PIX` when a switch below it is.
pub fn path_level(a: &Path, b: &Path, numa_a: i32, numa_b: i32) -> PathLevel {
    fn pci_parts(p: &Path) -> Vec<String> {
        let parts: Vec<String> = p.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
        match parts.iter().position(|c| c.starts_with("pci")) {
            Some(i) => parts[i..].to_vec(),
            None => Vec::new(),
        }
    }
    let (pa, pb) = (pci_parts(a), pci_parts(b));
    if pa.is_empty() || pb.is_empty() {
        return PathLevel::Unknown;
    }
    let shared = pa.iter().zip(&pb).take_while(|(x, y)| x == y).count();
    match shared {
        0 if numa_a >= 0 && numa_a == numa_b => PathLevel::Node,
        0 => PathLevel::System,
        1 => PathLevel::HostBridge,
        2 => PathLevel::Multiple,
        _ => PathLevel::Single,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn write(p: &Path, text: &str) {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    #[test]
    fn reads_ports_rates_numa_and_paths_under_a_root() {
        let root = std::env::temp_dir().join(format!("tprof-sysfs-test-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        let dev = root.join("sys/devices");
        let gpu = dev.join("pci0000:00/0000:00:01.0/0000:10:00.0");
        let nic_near = dev.join("pci0000:00/0000:00:01.0/0000:11:00.0");
        let nic_far = dev.join("pci0000:80/0000:80:01.0/0000:81:00.0");
        write(&gpu.join("numa_node"), "0\n");
        write(&nic_near.join("numa_node"), "0\n");
        write(&nic_far.join("numa_node"), "1\n");
        fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        symlink(&gpu, root.join("sys/bus/pci/devices/0000:10:00.0")).unwrap();
        write(&root.join("sys/class/infiniband/mlx5_0/ports/1/rate"), "200 Gb/sec (4X HDR)\n");
        symlink(&nic_near, root.join("sys/class/infiniband/mlx5_0/device")).unwrap();
        write(&root.join("sys/class/net/eth0/speed"), "25000\n");
        symlink(&nic_far, root.join("sys/class/net/eth0/device")).unwrap();
        write(&root.join("sys/class/net/lo/speed"), "-1\n");
        write(&root.join("proc/sys/kernel/hostname"), "node-a\n");

        assert_eq!(hostname(&root).as_deref(), Some("node-a"));
        let p = ports(&root);
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(
            (p[0].name.as_str(), p[0].port, p[0].kind, p[0].rate_mbps),
            ("mlx5_0", 1, NicKind::Infiniband, 200_000)
        );
        assert_eq!((p[1].name.as_str(), p[1].kind, p[1].rate_mbps), ("eth0", NicKind::Ethernet, 25_000));
        let g = pci_device_path(&root, &sysfs_bus_id("00000000:10:00.0")).unwrap();
        assert_eq!(numa_node(Some(&g)), 0);
        let near = p[0].pci_path.as_deref().unwrap();
        let far = p[1].pci_path.as_deref().unwrap();
        assert_eq!(path_level(&g, near, 0, numa_node(Some(near))), PathLevel::Multiple);
        assert_eq!(path_level(&g, far, 0, numa_node(Some(far))), PathLevel::System);
        assert_eq!(path_level(&g, far, 0, 0), PathLevel::Node);
        let _ = fs::remove_dir_all(&root);
    }

    #[test]
    fn bus_ids_convert_from_nvml_to_sysfs() {
        assert_eq!(sysfs_bus_id("00000000:3B:00.0"), "0000:3b:00.0");
        assert_eq!(sysfs_bus_id("0000:3b:00.0"), "0000:3b:00.0");
    }
}
