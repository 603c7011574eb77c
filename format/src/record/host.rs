//! The vocabulary of host samples (`Record::HostSample`, `Record::HostEntity`): what a sample
//! describes (its scope and id) and which counter it is. The shim's host sampler writes them from
//! /proc and sysfs; the decoder turns them into rates (`decoder/src/host/`).
//!
//! Cumulative counters (CPU time, switches, faults, bytes, packets, PSI stall time) are written as
//! their running total, so a lost sample loses no time; gauges (RSS, memory available, run queue)
//! as their value. A value unchanged since the previous sample is not written again, except in a
//! full sample every few seconds (see the sampler); a reader holds the last value between samples.

use super::wire_enum::wire_enum;

wire_enum! {
    /// What a host sample describes; `id` names the instance.
    pub enum HostScope {
        /// A process of the training process's tree: `id` = pid.
        #[default]
        Process = 0 => "process",
        /// A thread of the training process: `id` = tid.
        Thread = 1 => "thread",
        /// The whole machine: `id` = 0.
        Machine = 2 => "machine",
        /// One CPU: `id` = its number (the entity's `parent` = its NUMA node).
        Core = 3 => "core",
        /// A block device: `id` = index (the entity names it).
        Disk = 4 => "disk",
        /// A network interface (NIC, or an InfiniBand port named `device/port`): `id` = index.
        Nic = 5 => "nic",
    }
}

wire_enum! {
    /// Which counter a host sample carries (cumulative unless marked as a gauge).
    pub enum HostMetric {
        #[default]
        Unknown = 0 => "unknown",
        /// CPU time in user mode, ns (process, thread).
        CpuUserNs = 1 => "cpu_user_ns",
        /// CPU time in kernel mode, ns (process, thread).
        CpuSysNs = 2 => "cpu_sys_ns",
        /// Time runnable but waiting for a CPU (run-queue delay, /proc/.../schedstat), ns.
        RunDelayNs = 3 => "run_delay_ns",
        /// Voluntary context switches (blocked: I/O, locks, sleeps).
        VoluntarySwitches = 4 => "voluntary_switches",
        /// Involuntary context switches (preempted).
        InvoluntarySwitches = 5 => "involuntary_switches",
        /// Resident set size, bytes (gauge).
        RssBytes = 6 => "rss_bytes",
        MinorFaults = 7 => "minor_faults",
        MajorFaults = 8 => "major_faults",
        /// Bytes read through read-like system calls (`rchar`: files, pipes, sockets; page cache hits too).
        ReadBytes = 9 => "read_bytes",
        /// Bytes written through write-like system calls (`wchar`).
        WriteBytes = 10 => "write_bytes",
        /// Bytes fetched from storage (`read_bytes` of /proc/.../io; disks: sectors read x 512).
        StorageReadBytes = 11 => "storage_read_bytes",
        /// Bytes sent to storage.
        StorageWriteBytes = 12 => "storage_write_bytes",
        /// Threads of the process (gauge).
        Threads = 13 => "threads",
        /// CPUs the process may run on (sched affinity; gauge).
        CpusAllowed = 14 => "cpus_allowed",
        /// Sampling rounds the host sampler made (this process only).
        SamplerRounds = 15 => "sampler_rounds",
        /// Wall time the host sampler spent in its rounds, ns (this process only).
        SamplerNs = 16 => "sampler_ns",
        /// Time on a CPU, ns precision (schedstat; threads and worker processes' main threads).
        OnCpuNs = 17 => "on_cpu_ns",
        /// Busy CPU time of a core (user, nice, system, irq, softirq, steal), ns.
        CoreBusyNs = 20 => "core_busy_ns",
        /// Idle CPU time of a core (idle + iowait), ns.
        CoreIdleNs = 21 => "core_idle_ns",
        /// Of the idle time, waiting for I/O, ns.
        CoreIowaitNs = 22 => "core_iowait_ns",
        /// Runnable tasks on the machine (gauge, `procs_running`).
        RunQueue = 30 => "run_queue",
        MemTotalBytes = 31 => "mem_total_bytes",
        /// MemAvailable (gauge).
        MemAvailableBytes = 32 => "mem_available_bytes",
        SwapTotalBytes = 33 => "swap_total_bytes",
        SwapFreeBytes = 34 => "swap_free_bytes",
        /// Pages swapped in / out (/proc/vmstat `pswpin`, `pswpout`).
        SwapInPages = 35 => "swap_in_pages",
        SwapOutPages = 36 => "swap_out_pages",
        /// The memory limit of the process's memory cgroup (v2 `memory.max`, v1
        /// `memory.limit_in_bytes`), bytes (gauge; written only when the cgroup has a limit).
        CgroupMemLimitBytes = 37 => "cgroup_memory_limit_bytes",
        /// That cgroup's charged memory (`memory.current` / `memory.usage_in_bytes`: anonymous and
        /// page cache), bytes (gauge).
        CgroupMemUsageBytes = 38 => "cgroup_memory_usage_bytes",
        /// PSI stall time (/proc/pressure: `some` / `full` `total`), ns.
        PsiCpuSomeNs = 40 => "psi_cpu_some_ns",
        PsiMemSomeNs = 41 => "psi_memory_some_ns",
        PsiMemFullNs = 42 => "psi_memory_full_ns",
        PsiIoSomeNs = 43 => "psi_io_some_ns",
        PsiIoFullNs = 44 => "psi_io_full_ns",
        /// Network interface counters (NIC: /sys/class/net statistics; InfiniBand: port counters).
        RxBytes = 50 => "rx_bytes",
        TxBytes = 51 => "tx_bytes",
        RxPackets = 52 => "rx_packets",
        TxPackets = 53 => "tx_packets",
    }
}

impl HostMetric {
    /// True for gauges (a value now), false for running totals.
    pub fn is_gauge(self) -> bool {
        use HostMetric::*;
        matches!(
            self,
            RssBytes
                | Threads
                | CpusAllowed
                | RunQueue
                | MemTotalBytes
                | MemAvailableBytes
                | SwapTotalBytes
                | SwapFreeBytes
                | CgroupMemLimitBytes
                | CgroupMemUsageBytes
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_tables_read_back_and_unknown_bytes_are_defaults() {
        for &m in HostMetric::ALL {
            assert_eq!(HostMetric::from_u8(m as u8), m);
        }
        for &s in HostScope::ALL {
            assert_eq!(HostScope::from_u8(s as u8), s);
        }
        assert_eq!(HostMetric::from_u8(200), HostMetric::Unknown);
        assert_eq!(HostScope::from_u8(200), HostScope::Process);
        let mut names: Vec<&str> = HostMetric::ALL.iter().map(|m| m.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), HostMetric::ALL.len());
        assert!(HostMetric::RssBytes.is_gauge() && !HostMetric::CpuUserNs.is_gauge());
    }
}
