//! Machine-wide counters, sampled by one process per host (see `samples_machine`): per-core CPU
//! time (`/proc/stat`, cores named with their NUMA node), the run queue, memory and swap
//! (`/proc/meminfo`, `/proc/vmstat`), PSI stall time (`/proc/pressure/*` where the kernel has it),
//! block devices (`/proc/diskstats`, whole disks only) and network interfaces (NIC statistics in
//! /sys/class/net, InfiniBand port counters in /sys/class/infiniband).

use std::path::{Path, PathBuf};

use tprof_format::{HostMetric as M, HostScope as S};

use super::emit::{Emitter, HostOut};
use super::procfs::{self, ProcFile, NS_PER_USER_HZ_TICK};

struct Interface {
    name: Vec<u8>,
    /// rx bytes, tx bytes, rx packets, tx packets.
    files: [Option<ProcFile>; 4],
    /// InfiniBand data counters count 4-byte words.
    word_bytes: u64,
}

pub struct MachineSampler {
    stat: Option<ProcFile>,
    meminfo: Option<ProcFile>,
    vmstat: Option<ProcFile>,
    psi: [Option<ProcFile>; 3],
    diskstats: Option<ProcFile>,
    disks: Vec<Vec<u8>>,
    interfaces: Vec<Interface>,
    /// NUMA node of each CPU (index = CPU number).
    node_of: Vec<u32>,
}

impl MachineSampler {
    /// `root`: where the NIC counters are read (`/`, or `TPROF_SYSROOT`); /proc is the real one.
    pub fn new(root: &Path) -> MachineSampler {
        MachineSampler::with_roots(Path::new("/"), root)
    }

    /// /proc files under `proc_root`, NIC counters under `sys_root` (tests give both).
    fn with_roots(proc_root: &Path, sys_root: &Path) -> MachineSampler {
        let mut disks: Vec<Vec<u8>> = std::fs::read_dir("/sys/block")
            .map(|d| d.flatten().map(|e| e.file_name().into_encoded_bytes()).collect())
            .unwrap_or_default();
        disks.retain(|d| !(d.starts_with(b"loop") || d.starts_with(b"ram") || d.starts_with(b"zram")));
        disks.sort();
        let proc = |f: &str| proc_root.join("proc").join(f).to_str().and_then(ProcFile::open);
        MachineSampler {
            stat: proc("stat"),
            meminfo: proc("meminfo"),
            vmstat: proc("vmstat"),
            psi: ["cpu", "memory", "io"].map(|k| proc(&format!("pressure/{k}"))),
            diskstats: proc("diskstats"),
            disks,
            interfaces: interfaces(sys_root),
            node_of: numa_nodes(),
        }
    }

    pub fn sample<O: HostOut>(&mut self, e: &mut Emitter<O>, buf: &mut Vec<u8>) {
        self.sample_proc(e, buf);
        self.sample_interfaces(e, buf);
    }

    /// NICs and InfiniBand ports followed.
    pub fn interfaces(&self) -> usize {
        self.interfaces.len()
    }

    /// The machine-wide /proc files: cores, run queue, memory, swap, PSI, disks.
    pub fn sample_proc<O: HostOut>(&mut self, e: &mut Emitter<O>, buf: &mut Vec<u8>) {
        if let Some(text) = self.stat.as_ref().and_then(|f| f.read(buf)) {
            for line in text.split(|&b| b == b'\n') {
                if let Some(rest) = line.strip_prefix(b"cpu") {
                    let Some(cpu) = procfs::number(rest).filter(|_| rest.first().is_some_and(u8::is_ascii_digit))
                    else {
                        continue;
                    };
                    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
                    let mut v = [0u64; 8];
                    let mut f = rest[digits..].split(|b| b.is_ascii_whitespace()).filter(|s| !s.is_empty());
                    for slot in v.iter_mut() {
                        *slot = f.next().and_then(procfs::number).unwrap_or(0);
                    }
                    // user nice system idle iowait irq softirq steal
                    let busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
                    let cpu = cpu as u32;
                    let node = self.node_of.get(cpu as usize).copied().unwrap_or(0);
                    e.entity(S::Core, cpu, node, b"");
                    e.sample(S::Core, cpu, M::CoreBusyNs, busy * NS_PER_USER_HZ_TICK);
                    e.sample(S::Core, cpu, M::CoreIdleNs, (v[3] + v[4]) * NS_PER_USER_HZ_TICK);
                    e.sample(S::Core, cpu, M::CoreIowaitNs, v[4] * NS_PER_USER_HZ_TICK);
                } else if let Some(rest) = line.strip_prefix(b"procs_running") {
                    if let Some(n) = procfs::number(rest) {
                        e.sample(S::Machine, 0, M::RunQueue, n);
                    }
                }
            }
        }
        let mut swap = false;
        if let Some(text) = self.meminfo.as_ref().and_then(|f| f.read(buf)) {
            swap = procfs::keyed(text, b"SwapTotal:").is_some_and(|kb| kb > 0);
            for (key, metric) in [
                (&b"MemTotal:"[..], M::MemTotalBytes),
                (b"MemAvailable:", M::MemAvailableBytes),
                (b"SwapTotal:", M::SwapTotalBytes),
                (b"SwapFree:", M::SwapFreeBytes),
            ] {
                if let Some(kb) = procfs::keyed(text, key) {
                    e.sample(S::Machine, 0, metric, kb * 1024);
                }
            }
        }
        // /proc/vmstat is the dearest file of the round (~25 us): read only where there is swap.
        if let Some(text) = self.vmstat.as_ref().filter(|_| swap).and_then(|f| f.read(buf)) {
            for (key, metric) in [(&b"pswpin "[..], M::SwapInPages), (b"pswpout ", M::SwapOutPages)] {
                if let Some(n) = procfs::keyed(text, key) {
                    e.sample(S::Machine, 0, metric, n);
                }
            }
        }
        let psi: [&[(&[u8], M)]; 3] = [
            &[(b"some", M::PsiCpuSomeNs)],
            &[(b"some", M::PsiMemSomeNs), (b"full", M::PsiMemFullNs)],
            &[(b"some", M::PsiIoSomeNs), (b"full", M::PsiIoFullNs)],
        ];
        for (file, lines) in self.psi.iter().zip(psi) {
            if let Some(text) = file.as_ref().and_then(|f| f.read(buf)) {
                for &(which, metric) in lines {
                    if let Some(ns) = procfs::psi_total_ns(text, which) {
                        e.sample(S::Machine, 0, metric, ns);
                    }
                }
            }
        }
        self.sample_disks(e, buf);
    }

    fn sample_disks<O: HostOut>(&mut self, e: &mut Emitter<O>, buf: &mut Vec<u8>) {
        let Some(text) = self.diskstats.as_ref().and_then(|f| f.read(buf)) else { return };
        for line in text.split(|&b| b == b'\n') {
            let mut f = line.split(|b| b.is_ascii_whitespace()).filter(|s| !s.is_empty());
            let (Some(_), Some(_), Some(name)) = (f.next(), f.next(), f.next()) else { continue };
            let Some(index) = self.disks.iter().position(|d| d == name) else { continue };
            // reads, reads merged, sectors read, ms reading, writes, writes merged, sectors written
            let v: Vec<u64> = f.take(7).map(|x| procfs::number(x).unwrap_or(0)).collect();
            if v.len() < 7 {
                continue;
            }
            let id = index as u32;
            e.entity(S::Disk, id, 0, name);
            e.sample(S::Disk, id, M::StorageReadBytes, v[2] * 512);
            e.sample(S::Disk, id, M::StorageWriteBytes, v[6] * 512);
        }
    }

    /// The sysfs NIC and InfiniBand port counters.
    pub fn sample_interfaces<O: HostOut>(&mut self, e: &mut Emitter<O>, buf: &mut Vec<u8>) {
        let metrics = [M::RxBytes, M::TxBytes, M::RxPackets, M::TxPackets];
        for (i, nic) in self.interfaces.iter().enumerate() {
            let id = i as u32;
            e.entity(S::Nic, id, 0, &nic.name);
            for (k, (file, metric)) in nic.files.iter().zip(metrics).enumerate() {
                if let Some(v) = file.as_ref().and_then(|f| f.read(buf)).and_then(procfs::number) {
                    let scale = if k < 2 { nic.word_bytes } else { 1 };
                    e.sample(S::Nic, id, metric, v.saturating_mul(scale));
                }
            }
        }
    }
}

impl Default for MachineSampler {
    fn default() -> Self {
        MachineSampler::new(Path::new("/"))
    }
}

fn names_in(dir: impl AsRef<Path>) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .map(|d| d.flatten().filter_map(|e| e.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

/// NICs (not loopback) and InfiniBand ports under `root`.
fn interfaces(root: &Path) -> Vec<Interface> {
    let mut out = Vec::new();
    let open = |p: PathBuf| p.to_str().and_then(ProcFile::open);
    let net = root.join("sys/class/net");
    for name in names_in(&net).into_iter().filter(|n| n != "lo") {
        let p = |f: &str| open(net.join(&name).join("statistics").join(f));
        let files = [p("rx_bytes"), p("tx_bytes"), p("rx_packets"), p("tx_packets")];
        if files.iter().any(Option::is_some) {
            out.push(Interface { name: name.into_bytes(), files, word_bytes: 1 });
        }
    }
    let ib = root.join("sys/class/infiniband");
    for dev in names_in(&ib) {
        for port in names_in(ib.join(&dev).join("ports")) {
            let p = |f: &str| open(ib.join(&dev).join("ports").join(&port).join("counters").join(f));
            let files = [p("port_rcv_data"), p("port_xmit_data"), p("port_rcv_packets"), p("port_xmit_packets")];
            if files.iter().any(Option::is_some) {
                out.push(Interface { name: format!("{dev}/{port}").into_bytes(), files, word_bytes: 4 });
            }
        }
    }
    out
}

/// The NUMA node of each CPU (all 0 without NUMA information).
fn numa_nodes() -> Vec<u32> {
    let mut node_of = Vec::new();
    for name in names_in("/sys/devices/system/node") {
        let Some(node) = name.strip_prefix("node").and_then(|n| n.parse::<u32>().ok()) else { continue };
        let Ok(list) = std::fs::read(format!("/sys/devices/system/node/{name}/cpulist")) else { continue };
        for cpu in procfs::parse_cpu_list(&list) {
            let cpu = cpu as usize;
            if cpu >= node_of.len() {
                node_of.resize(cpu + 1, 0);
            }
            node_of[cpu] = node;
        }
    }
    node_of
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host_metrics::emit::HostOut;
    use tprof_format::{HostMetric, HostScope};

    #[derive(Default)]
    struct Rows(Vec<(HostScope, u32, HostMetric, u64)>);
    impl HostOut for Rows {
        fn sample(&mut self, scope: HostScope, id: u32, metric: HostMetric, _: u64, value: u64) {
            self.0.push((scope, id, metric, value));
        }
        fn entity(&mut self, _: HostScope, _: u32, _: u32, _: u64, _: &[u8]) {}
    }

    fn write(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    /// One round over /proc files of the kernel's own format (swap, PSI) and an InfiniBand port.
    fn round(root: &Path, pswpin: u64, psi_us: u64, words: u64) -> Vec<(HostScope, u32, HostMetric, u64)> {
        write(&root.join("proc/meminfo"), "MemTotal:       24576000 kB\nMemAvailable:    1024000 kB\nSwapTotal:       8388604 kB\nSwapFree:        4194300 kB\n");
        write(&root.join("proc/vmstat"), &format!("nr_free_pages 123\npswpin {pswpin}\npswpout 77\npgfault 5\n"));
        write(
            &root.join("proc/pressure/memory"),
            &format!("some avg10=1.50 avg60=0.80 avg300=0.20 total={psi_us}\nfull avg10=0.50 avg60=0.10 avg300=0.00 total={}\n", psi_us / 3),
        );
        write(&root.join("sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data"), &format!("{words}\n"));
        let mut m = MachineSampler::with_roots(root, root);
        let mut e = Emitter::new(Rows::default(), 1);
        let mut buf = Vec::new();
        e.begin(1);
        m.sample(&mut e, &mut buf);
        e.end();
        e.out.0
    }

    #[test]
    fn swap_psi_and_port_counters_are_read_in_the_kernels_format() {
        let root = tempfile::tempdir().unwrap();
        let got = round(root.path(), 4242, 1_500_000, 1000);
        let find = |metric| got.iter().find(|r| r.2 == metric).map(|r| r.3);
        assert_eq!(find(HostMetric::SwapInPages), Some(4242));
        assert_eq!(find(HostMetric::SwapOutPages), Some(77));
        assert_eq!(find(HostMetric::SwapTotalBytes), Some(8388604 * 1024));
        assert_eq!(find(HostMetric::MemAvailableBytes), Some(1024000 * 1024));
        assert_eq!(find(HostMetric::PsiMemSomeNs), Some(1_500_000_000), "PSI totals are microseconds");
        assert_eq!(find(HostMetric::PsiMemFullNs), Some(500_000_000));
        let tx = got.iter().find(|r| r.0 == HostScope::Nic && r.2 == HostMetric::TxBytes).map(|r| r.3);
        assert_eq!(tx, Some(4000), "InfiniBand data counters count 4-byte words");
    }

    #[test]
    fn without_swap_vmstat_is_not_read() {
        let root = tempfile::tempdir().unwrap();
        round(root.path(), 1, 1, 1);
        write(&root.path().join("proc/meminfo"), "MemTotal:       24576000 kB\nSwapTotal:             0 kB\n");
        let mut m = MachineSampler::with_roots(root.path(), root.path());
        let mut e = Emitter::new(Rows::default(), 1);
        e.begin(1);
        m.sample(&mut e, &mut Vec::new());
        assert!(!e.out.0.iter().any(|r| r.2 == HostMetric::SwapInPages), "{:?}", e.out.0);
    }
}
