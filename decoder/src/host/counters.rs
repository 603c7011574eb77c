//! Host samples as counter tracks for the exports (Perfetto / Chrome counter tracks, the Parquet
//! `counters` table, Kineto counters): [`HostCounters`] wraps an export's sink and turns each
//! rank's running totals into rates ("host cpu cores main 1234", "host read MB/s worker 1240",
//! "host core 3 busy", "host nic eth0 rx MB/s", ...) and its gauges into values; everything else
//! passes through unchanged. Process-wide counters (`device` = None), named `host ...`.

use std::collections::HashMap;

use super::events::{HostEntity, HostMetric as M, HostSample, HostScope as S};
use crate::model::*;

/// What one derived counter shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Shown {
    CpuCores,
    RssMb,
    ReadMbs,
    StorageReadMbs,
    StorageWriteMbs,
    CoreBusy,
    MemAvailableMb,
    RunQueue,
    PsiMemory,
    PsiCpu,
    PsiIo,
    SwapOutPages,
    RxMbs,
    TxMbs,
}

impl Shown {
    fn of(scope: S, metric: M) -> Option<(Shown, usize)> {
        Some(match (scope, metric) {
            (S::Process | S::Thread, M::CpuUserNs) => (Shown::CpuCores, 0),
            (S::Process | S::Thread, M::CpuSysNs) => (Shown::CpuCores, 1),
            (S::Process, M::RssBytes) => (Shown::RssMb, 0),
            (S::Process, M::ReadBytes) => (Shown::ReadMbs, 0),
            (S::Process | S::Disk, M::StorageReadBytes) => (Shown::StorageReadMbs, 0),
            (S::Process | S::Disk, M::StorageWriteBytes) => (Shown::StorageWriteMbs, 0),
            (S::Core, M::CoreBusyNs) => (Shown::CoreBusy, 0),
            (S::Machine, M::MemAvailableBytes) => (Shown::MemAvailableMb, 0),
            (S::Machine, M::RunQueue) => (Shown::RunQueue, 0),
            (S::Machine, M::PsiMemSomeNs) => (Shown::PsiMemory, 0),
            (S::Machine, M::PsiCpuSomeNs) => (Shown::PsiCpu, 0),
            (S::Machine, M::PsiIoSomeNs) => (Shown::PsiIo, 0),
            (S::Machine, M::SwapOutPages) => (Shown::SwapOutPages, 0),
            (S::Nic, M::RxBytes) => (Shown::RxMbs, 0),
            (S::Nic, M::TxBytes) => (Shown::TxMbs, 0),
            _ => return None,
        })
    }

    fn gauge(self) -> bool {
        matches!(self, Shown::RssMb | Shown::MemAvailableMb | Shown::RunQueue)
    }

    /// Factor from the running total's unit per ns (rates) or the gauge's unit to the shown value.
    fn scale(self) -> f64 {
        match self {
            Shown::CpuCores | Shown::CoreBusy | Shown::PsiMemory | Shown::PsiCpu | Shown::PsiIo => 1.0,
            Shown::RssMb | Shown::MemAvailableMb => 1.0 / 1048576.0,
            Shown::RunQueue => 1.0,
            Shown::ReadMbs | Shown::StorageReadMbs | Shown::StorageWriteMbs | Shown::RxMbs | Shown::TxMbs => {
                1e9 / 1048576.0
            }
            Shown::SwapOutPages => 1e9,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Shown::CpuCores => "cpu cores",
            Shown::RssMb => "rss MB",
            Shown::ReadMbs => "read MB/s",
            Shown::StorageReadMbs => "storage read MB/s",
            Shown::StorageWriteMbs => "storage write MB/s",
            Shown::CoreBusy => "busy",
            Shown::MemAvailableMb => "memory available MB",
            Shown::RunQueue => "run queue",
            Shown::PsiMemory => "memory pressure (PSI some)",
            Shown::PsiCpu => "cpu pressure (PSI some)",
            Shown::PsiIo => "io pressure (PSI some)",
            Shown::SwapOutPages => "swap out pages/s",
            Shown::RxMbs => "rx MB/s",
            Shown::TxMbs => "tx MB/s",
        }
    }
}

#[derive(Debug)]
struct Track {
    name: Name,
    /// The round being gathered: its time and the parts of the total (user + sys for CPU).
    pending: Option<Ns>,
    parts: [u64; 2],
    last: Option<(Ns, u64)>,
    gauge: bool,
    scale: f64,
}

/// The per-process state.
#[derive(Debug, Default)]
struct ProcState {
    pid: u32,
    names: HashMap<(S, u32), String>,
    tracks: HashMap<(S, u32, Shown), Track>,
}

/// Wraps an export sink: host samples become counter samples.
pub struct HostCounters<T: TraceSink> {
    pub inner: T,
    procs: HashMap<ProcId, ProcState>,
    interner: Interner,
}

impl<T: TraceSink> HostCounters<T> {
    pub fn new(inner: T) -> HostCounters<T> {
        HostCounters { inner, procs: HashMap::new(), interner: Interner::new() }
    }

    fn flush(inner: &mut T, proc: ProcId, t: &mut Track) {
        let Some(ts) = t.pending.take() else { return };
        let total = t.parts[0] + t.parts[1];
        let value = if t.gauge {
            Some(total as f64 * t.scale)
        } else {
            t.last.filter(|l| ts > l.0).map(|l| total.saturating_sub(l.1) as f64 / (ts - l.0) as f64 * t.scale)
        };
        t.last = Some((ts, total));
        if let Some(value) = value {
            inner.handle_counter(&CounterSample { proc, name: t.name.clone(), device: None, ts, value });
        }
    }
}

impl<T: TraceSink> TraceSink for HostCounters<T> {
    fn handle_process(&mut self, i: &ProcessInfo) {
        self.procs.insert(i.id, ProcState { pid: i.pid, ..Default::default() });
        self.inner.handle_process(i)
    }
    fn handle_host_entity(&mut self, e: &HostEntity) {
        if let Some(p) = self.procs.get_mut(&e.proc) {
            p.names.insert((e.scope, e.id), e.name.to_string());
        }
        self.inner.handle_host_entity(e)
    }
    fn handle_host_sample(&mut self, s: &HostSample) {
        self.inner.handle_host_sample(s);
        let Some((shown, part)) = Shown::of(s.scope, s.metric) else { return };
        let Some(p) = self.procs.get_mut(&s.proc) else { return };
        let interner = &mut self.interner;
        let (pid, names) = (p.pid, &p.names);
        let t = p.tracks.entry((s.scope, s.id, shown)).or_insert_with(|| {
            let who = names.get(&(s.scope, s.id)).cloned().unwrap_or_default();
            let name = match s.scope {
                S::Process if s.id == pid => format!("host {} main {}", shown.title(), s.id),
                S::Process => format!("host {} worker {} {}", shown.title(), who, s.id),
                S::Thread => format!("host {} thread {} {}", shown.title(), who, s.id),
                S::Core => format!("host core {} {}", s.id, shown.title()),
                S::Disk => format!("host disk {who} {}", shown.title()),
                S::Nic => format!("host nic {who} {}", shown.title()),
                S::Machine => format!("host {}", shown.title()),
            };
            Track {
                name: interner.intern(&name),
                pending: None,
                parts: [0; 2],
                last: None,
                gauge: shown.gauge(),
                scale: shown.scale(),
            }
        });
        if t.pending.is_some_and(|ts| ts != s.ts) {
            Self::flush(&mut self.inner, s.proc, t);
        }
        t.pending = Some(s.ts);
        t.parts[part] = s.value;
    }
    fn handle_ranges_close_in_order(&mut self, proc: ProcId) {
        self.inner.handle_ranges_close_in_order(proc)
    }
    fn handle_no_collective_calls(&mut self, proc: ProcId) {
        self.inner.handle_no_collective_calls(proc)
    }
    fn handle_process_end(&mut self, proc: ProcId) {
        if let Some(mut p) = self.procs.remove(&proc) {
            let mut tracks: Vec<&mut Track> = p.tracks.values_mut().collect();
            tracks.sort_by(|a, b| a.name.cmp(&b.name));
            for t in tracks {
                Self::flush(&mut self.inner, proc, t);
            }
        }
        self.inner.handle_process_end(proc)
    }
    fn handle_thread_name(&mut self, t: &ThreadName) {
        self.inner.handle_thread_name(t)
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        self.inner.handle_kernel(k)
    }
    fn handle_memcpy(&mut self, m: &Memcpy) {
        self.inner.handle_memcpy(m)
    }
    fn handle_memset(&mut self, m: &Memset) {
        self.inner.handle_memset(m)
    }
    fn handle_api(&mut self, a: &Api) {
        self.inner.handle_api(a)
    }
    fn handle_sync(&mut self, s: &SyncEvent) {
        self.inner.handle_sync(s)
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        self.inner.handle_memory(m)
    }
    fn handle_collective(&mut self, c: &Collective) {
        self.inner.handle_collective(c)
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        self.inner.handle_nvtx_range(r)
    }
    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        self.inner.handle_nvtx_mark(m)
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        self.inner.handle_counter(c)
    }
    fn handle_marker(&mut self, m: &Marker) {
        self.inner.handle_marker(m)
    }
    fn finish(&mut self) -> Result<(), SinkError> {
        self.inner.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Seen(Vec<(String, Ns, f64)>);
    impl TraceSink for Seen {
        fn handle_counter(&mut self, c: &CounterSample) {
            self.0.push((c.name.to_string(), c.ts, c.value));
        }
    }

    #[test]
    fn cpu_totals_become_cores_and_gauges_values() {
        let mut h = HostCounters::new(Seen::default());
        let info = test_info(10);
        h.handle_process(&info);
        let s = |scope, id, metric, ts, value| HostSample { proc: info.id, scope, id, metric, ts, value };
        h.handle_host_entity(&HostEntity {
            proc: info.id,
            scope: S::Process,
            id: 11,
            parent: 10,
            ts: 0,
            name: "w".into(),
        });
        for (ts, user, sys) in
            [(0u64, 0u64, 0u64), (1_000_000_000, 600_000_000, 200_000_000), (2_000_000_000, 1_100_000_000, 200_000_000)]
        {
            h.handle_host_sample(&s(S::Process, 11, M::CpuUserNs, ts, user));
            h.handle_host_sample(&s(S::Process, 11, M::CpuSysNs, ts, sys));
            h.handle_host_sample(&s(S::Process, 10, M::RssBytes, ts, 8 << 20));
        }
        h.handle_process_end(info.id);
        let cpu: Vec<(Ns, f64)> =
            h.inner.0.iter().filter(|c| c.0 == "host cpu cores worker w 11").map(|c| (c.1, c.2)).collect();
        assert_eq!(cpu, vec![(1_000_000_000, 0.8), (2_000_000_000, 0.5)]);
        let rss: Vec<f64> = h.inner.0.iter().filter(|c| c.0 == "host rss MB main 10").map(|c| c.2).collect();
        assert_eq!(rss, vec![8.0, 8.0, 8.0]);
    }

    fn test_info(pid: u32) -> ProcessInfo {
        ProcessInfo {
            id: ProcId(0),
            origin: Origin::Ring,
            path: "r0.tprof".into(),
            host: "h".into(),
            pid,
            ppid: 1,
            cmdline: String::new(),
            rank: Some(0),
            local_rank: Some(0),
            world_size: Some(1),
            job_id: None,
            clock_offset_ns: 0,
            gpu_activity: true,
            dropped_events: 0,
        }
    }
}
