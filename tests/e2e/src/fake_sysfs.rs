//! A fake sysfs per simulated node, as the topology probe and the host sampler read it under
//! `TPROF_SYSROOT=<dir>/r%r`: the node's host name `simnode<k>`, 8 GPUs on PCI bus 0x10 + device
//! and one 200 Gb/s InfiniBand port `mlx5_0` port 1 (25 GB/s, the simulated NIC's default rate)
//! behind the GPUs' PCIe bridge (NUMA node 0), and `r<rank>` links to its node's tree.
//! Options: one node's NIC under another host bridge on NUMA node 1 (path SYS from its GPUs), and
//! the port's `counters/port_{xmit,rcv}_{data,packets}` files, which the simulated NCCL updates
//! (`SIMGPU_NIC_COUNTERS`, see [`counters_pattern`]).

use std::os::unix::fs::symlink;
use std::path::Path;

#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// This node's NIC sits on the other socket.
    pub cross_socket_node: Option<u32>,
    /// The port has its counters files.
    pub counters: bool,
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// Builds `nodes` node trees of `ranks_per_node` ranks each under `base`; returns the
/// `TPROF_SYSROOT` pattern.
pub fn build(base: &Path, nodes: u32, ranks_per_node: u32, opts: Options) -> String {
    for node in 0..nodes {
        let root = base.join(format!("node{node}"));
        write(&root.join("proc/sys/kernel/hostname"), &format!("simnode{node}\n"));
        let bridge = root.join("sys/devices/pci0000:00/0000:00:01.0");
        std::fs::create_dir_all(root.join("sys/bus/pci/devices")).unwrap();
        for dev in 0..8 {
            let id = format!("0000:{:02x}:00.0", 0x10 + dev);
            write(&bridge.join(&id).join("numa_node"), "0\n");
            symlink(bridge.join(&id), root.join("sys/bus/pci/devices").join(&id)).unwrap();
        }
        let (nic, numa) = if opts.cross_socket_node == Some(node) {
            (root.join("sys/devices/pci0000:80/0000:80:01.0/0000:b0:00.0"), "1\n")
        } else {
            (bridge.join("0000:30:00.0"), "0\n")
        };
        write(&nic.join("numa_node"), numa);
        let port = root.join("sys/class/infiniband/mlx5_0/ports/1");
        write(&port.join("rate"), "200 Gb/sec (4X HDR)\n");
        if opts.counters {
            for f in ["port_xmit_data", "port_rcv_data", "port_xmit_packets", "port_rcv_packets"] {
                write(&port.join("counters").join(f), "0\n");
            }
        }
        symlink(&nic, root.join("sys/class/infiniband/mlx5_0/device")).unwrap();
    }
    for r in 0..nodes * ranks_per_node {
        symlink(base.join(format!("node{}", r / ranks_per_node)), base.join(format!("r{r}"))).unwrap();
    }
    base.join("r%r").display().to_string()
}

/// `SIMGPU_NIC_COUNTERS` for the trees of `build`: node %n's port counters.
pub fn counters_pattern(base: &Path) -> String {
    base.join("node%n/sys/class/infiniband/mlx5_0/ports/1/counters").display().to_string()
}
