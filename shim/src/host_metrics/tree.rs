//! The training process's tree: this process (totals and every thread, with names) and every
//! descendant process, DataLoader workers that never call CUDA included (found through
//! `/proc/<pid>/task/<tid>/children`). Files are opened once per thread / process and read again
//! every round.

use std::collections::HashMap;

use tprof_format::{HostMetric as M, HostScope as S};

use super::cgroup::CgroupMemory;
use super::emit::{Emitter, HostOut};
use super::procfs::{self, ProcFile};

/// Page size for RSS (4 KiB on x86-64; aarch64 kernels with 64 KiB pages report more).
const PAGE: u64 = 4096;
/// Descendants followed at most (a fork bomb must not make the sampler slow).
const MAX_PROCESSES: usize = 256;
/// Threads of this process followed at most.
const MAX_THREADS: usize = 1024;

struct ThreadFiles {
    stat: Option<ProcFile>,
    schedstat: Option<ProcFile>,
    status: Option<ProcFile>,
    children: Option<ProcFile>,
    seen: u64,
    /// The last totals read (run delay, voluntary, involuntary), kept when the thread exits.
    last: [u64; 3],
    /// What the last full read found: schedstat (on CPU, waiting, timeslices), name, user and
    /// system CPU, children. A thread whose schedstat did not move has not run since: its other
    /// files cannot have changed, so they are not read again (most threads sleep most rounds).
    sched: Option<(u64, u64, u64)>,
    comm: Vec<u8>,
    cpu: Option<(u64, u64)>,
    kids: Vec<u32>,
}

struct ProcessFiles {
    stat: Option<ProcFile>,
    schedstat: Option<ProcFile>,
    status: Option<ProcFile>,
    io: Option<ProcFile>,
    children: Option<ProcFile>,
    seen: u64,
    /// A descendant's last full read, written again while its schedstat does not move (a
    /// one-thread process that has not run cannot have changed its CPU, faults, I/O or children).
    cache: Option<Box<Cached>>,
}

struct Cached {
    sched: (u64, u64, u64),
    stat: procfs::Stat,
    comm: Vec<u8>,
    io: Option<[u64; 4]>,
    switches: Option<(u64, u64)>,
    kids: Vec<u32>,
}

impl ProcessFiles {
    fn open(pid: u32) -> ProcessFiles {
        let p = |f: &str| ProcFile::open(&format!("/proc/{pid}/{f}"));
        ProcessFiles {
            stat: p("stat"),
            schedstat: p("schedstat"),
            status: p("status"),
            io: p("io"),
            children: p(&format!("task/{pid}/children")),
            seen: 0,
            cache: None,
        }
    }
}

/// Samples this process and its descendants.
pub struct TreeSampler {
    pid: u32,
    own: ProcessFiles,
    task_dir: String,
    threads: HashMap<u32, ThreadFiles>,
    /// Totals of threads that exited (so the process's sums never go back).
    exited: [u64; 3],
    children: HashMap<u32, ProcessFiles>,
    cpus_allowed: u64,
    round: u64,
    pending: Vec<u32>,
    cgroup: Option<CgroupMemory>,
    /// Threads of this process in its last stat (the task directory is listed again when it differs).
    own_threads: u64,
}

impl TreeSampler {
    pub fn new() -> TreeSampler {
        let pid = std::process::id();
        TreeSampler {
            pid,
            own: ProcessFiles::open(pid),
            task_dir: format!("/proc/{pid}/task"),
            threads: HashMap::new(),
            exited: [0; 3],
            children: HashMap::new(),
            cpus_allowed: std::thread::available_parallelism().map(|n| n.get() as u64).unwrap_or(0),
            round: 0,
            pending: Vec::new(),
            cgroup: CgroupMemory::find(),
            own_threads: 0,
        }
    }

    /// One round: this process, its threads, its descendants.
    pub fn sample<O: HostOut>(&mut self, e: &mut Emitter<O>, buf: &mut Vec<u8>) {
        self.round += 1;
        self.pending.clear();
        let pid = self.pid;
        let mut sums = [0u64; 3];
        self.sample_threads(e, buf, &mut sums);
        for (i, s) in sums.iter_mut().enumerate() {
            *s += self.exited[i];
        }
        if let Some(st) = process_common(e, buf, &self.own, pid, true) {
            self.own_threads = st.threads;
        }
        e.sample(S::Process, pid, M::RunDelayNs, sums[0]);
        e.sample(S::Process, pid, M::VoluntarySwitches, sums[1]);
        e.sample(S::Process, pid, M::InvoluntarySwitches, sums[2]);
        e.sample(S::Process, pid, M::CpusAllowed, self.cpus_allowed);
        if let Some(cg) = &mut self.cgroup {
            let (limit, usage) = cg.read(buf);
            e.sample(S::Process, pid, M::CgroupMemLimitBytes, limit);
            if let Some(u) = usage {
                e.sample(S::Process, pid, M::CgroupMemUsageBytes, u);
            }
        }
        // Descendants, breadth first.
        let mut i = 0;
        while i < self.pending.len() && i < MAX_PROCESSES {
            let child = self.pending[i];
            i += 1;
            let round = self.round;
            let files = self.children.entry(child).or_insert_with(|| ProcessFiles::open(child));
            files.seen = round;
            let sched = files.schedstat.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_schedstat3);
            let refresh = round % 16 == 1;
            match (&files.cache, sched) {
                (Some(c), Some(now)) if !refresh && c.sched == now && c.stat.threads <= 1 => {
                    emit_process(e, child, false, &c.stat, &c.comm, c.io);
                    e.sample(S::Process, child, M::RunDelayNs, now.1);
                    if let Some((v, n)) = c.switches {
                        e.sample(S::Process, child, M::VoluntarySwitches, v);
                        e.sample(S::Process, child, M::InvoluntarySwitches, n);
                    }
                    self.pending.extend_from_slice(&c.kids);
                    continue;
                }
                _ => {}
            }
            let Some(text) = files.stat.as_ref().and_then(|f| f.read(buf)) else { continue };
            let mut comm: &[u8] = b"";
            let Some(stat) = procfs::parse_stat(text, &mut comm) else { continue };
            let comm = comm.to_vec();
            let io = files.io.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_io);
            emit_process(e, child, false, &stat, &comm, io);
            if let Some(t) = sched {
                e.sample(S::Process, child, M::RunDelayNs, t.1);
            }
            let switches = files.status.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_switches);
            if let Some((v, n)) = switches {
                e.sample(S::Process, child, M::VoluntarySwitches, v);
                e.sample(S::Process, child, M::InvoluntarySwitches, n);
            }
            let mut kids = Vec::new();
            if let Some(text) = files.children.as_ref().and_then(|f| f.read(buf)) {
                procfs::for_each_number(text, |n| kids.push(n as u32));
            }
            self.pending.extend_from_slice(&kids);
            files.cache = sched.map(|sched| Box::new(Cached { sched, stat, comm, io, switches, kids }));
        }
        let round = self.round;
        self.children.retain(|_, f| f.seen == round);
    }

    fn sample_threads<O: HostOut>(&mut self, e: &mut Emitter<O>, buf: &mut Vec<u8>, sums: &mut [u64; 3]) {
        let round = self.round;
        // Every 16th round reads every file (a name set from another thread, say) and lists the
        // task directory; other rounds list it only when the thread count changed.
        let refresh = round % 16 == 1;
        let list = refresh || self.threads.len() as u64 != self.own_threads;
        if !list {
            for t in self.threads.values_mut() {
                t.seen = round;
            }
        } else if let Ok(dir) = std::fs::read_dir(&self.task_dir) {
            for entry in dir.flatten().take(MAX_THREADS) {
                let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
                let task_dir = &self.task_dir;
                let t = self.threads.entry(tid).or_insert_with(|| {
                    let p = |f: &str| ProcFile::open(&format!("{task_dir}/{tid}/{f}"));
                    ThreadFiles {
                        stat: p("stat"),
                        schedstat: p("schedstat"),
                        status: p("status"),
                        children: p("children"),
                        seen: 0,
                        last: [0; 3],
                        sched: None,
                        comm: Vec::new(),
                        cpu: None,
                        kids: Vec::new(),
                    }
                });
                t.seen = round;
            }
        }
        let pid = self.pid;
        let exited = &mut self.exited;
        self.threads.retain(|_, t| {
            if t.seen != round {
                for (i, v) in t.last.iter().enumerate() {
                    exited[i] += v;
                }
            }
            t.seen == round
        });
        for (&tid, t) in self.threads.iter_mut() {
            let sched = t.schedstat.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_schedstat3);
            if sched.is_none() && t.schedstat.is_some() {
                // Gone since the last listing: its last totals move to `exited` below.
                t.seen = 0;
                continue;
            }
            let unchanged = !refresh && sched.is_some() && sched == t.sched;
            if !unchanged {
                t.sched = sched;
                t.cpu = None;
                if let Some(text) = t.stat.as_ref().and_then(|f| f.read(buf)) {
                    let mut comm: &[u8] = b"";
                    if let Some(st) = procfs::parse_stat(text, &mut comm) {
                        t.comm.clear();
                        t.comm.extend_from_slice(comm);
                        t.cpu = Some((st.utime_ns, st.stime_ns));
                    }
                }
                if let Some((v, n)) = t.status.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_switches) {
                    t.last[1] = v;
                    t.last[2] = n;
                }
                t.kids.clear();
                if let Some(text) = t.children.as_ref().and_then(|f| f.read(buf)) {
                    let kids = &mut t.kids;
                    procfs::for_each_number(text, |n| kids.push(n as u32));
                }
            }
            if let Some((user, sys)) = t.cpu {
                e.entity(S::Thread, tid, pid, &t.comm);
                e.sample(S::Thread, tid, M::CpuUserNs, user);
                e.sample(S::Thread, tid, M::CpuSysNs, sys);
            }
            if let Some((run, wait, _)) = sched {
                t.last[0] = wait;
                e.sample(S::Thread, tid, M::OnCpuNs, run);
                e.sample(S::Thread, tid, M::RunDelayNs, wait);
            }
            if t.status.is_some() {
                e.sample(S::Thread, tid, M::VoluntarySwitches, t.last[1]);
                e.sample(S::Thread, tid, M::InvoluntarySwitches, t.last[2]);
            }
            for (s, v) in sums.iter_mut().zip(t.last) {
                *s += v;
            }
            self.pending.extend_from_slice(&t.kids);
        }
        let exited = &mut self.exited;
        self.threads.retain(|_, t| {
            if t.seen != round {
                for (i, v) in t.last.iter().enumerate() {
                    exited[i] += v;
                }
            }
            t.seen == round
        });
    }
}

impl Default for TreeSampler {
    fn default() -> Self {
        TreeSampler::new()
    }
}

/// stat and io of one process; None when it is gone.
fn process_common<O: HostOut>(
    e: &mut Emitter<O>,
    buf: &mut Vec<u8>,
    f: &ProcessFiles,
    pid: u32,
    own: bool,
) -> Option<procfs::Stat> {
    let text = f.stat.as_ref().and_then(|f| f.read(buf))?;
    let mut comm: &[u8] = b"";
    let st = procfs::parse_stat(text, &mut comm)?;
    let comm = comm.to_vec();
    let io = f.io.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_io);
    emit_process(e, pid, own, &st, &comm, io);
    Some(st)
}

fn emit_process<O: HostOut>(
    e: &mut Emitter<O>,
    pid: u32,
    own: bool,
    st: &procfs::Stat,
    comm: &[u8],
    io: Option<[u64; 4]>,
) {
    e.entity(S::Process, pid, st.ppid, comm);
    e.sample(S::Process, pid, M::CpuUserNs, st.utime_ns);
    e.sample(S::Process, pid, M::CpuSysNs, st.stime_ns);
    e.sample(S::Process, pid, M::MinorFaults, st.minflt);
    e.sample(S::Process, pid, M::MajorFaults, st.majflt);
    e.sample(S::Process, pid, M::RssBytes, st.rss_pages * PAGE);
    if own || st.threads > 1 {
        e.sample(S::Process, pid, M::Threads, st.threads);
    }
    if let Some([rchar, wchar, rb, wb]) = io {
        e.sample(S::Process, pid, M::ReadBytes, rchar);
        e.sample(S::Process, pid, M::WriteBytes, wchar);
        e.sample(S::Process, pid, M::StorageReadBytes, rb);
        e.sample(S::Process, pid, M::StorageWriteBytes, wb);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Every value, every round (full_every 1 passes all through the emitter).
    #[derive(Default)]
    struct All(Vec<(u64, S, u32, M, u64)>, u64);
    impl HostOut for All {
        fn sample(&mut self, scope: S, id: u32, metric: M, ts: u64, value: u64) {
            self.0.push((ts, scope, id, metric, value));
        }
        fn entity(&mut self, _: S, _: u32, _: u32, _: u64, _: &[u8]) {
            self.1 += 1;
        }
    }

    #[test]
    fn skipped_reads_still_write_every_value_and_sums_never_go_back() {
        let mut child = std::process::Command::new("sleep").arg("5").spawn().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        let mut tree = TreeSampler::new();
        let mut e = Emitter::new(All::default(), 1);
        let mut buf = Vec::new();
        for round in 1..=6u64 {
            if round == 3 {
                // A thread that runs, is preempted or sleeps, and exits between rounds.
                std::thread::spawn(|| std::thread::sleep(Duration::from_millis(5))).join().unwrap();
            }
            e.begin(round);
            tree.sample(&mut e, &mut buf);
            e.end();
        }
        child.kill().ok();
        child.wait().ok();
        let of = |id: u32, m: M| -> Vec<(u64, u64)> {
            e.out.0.iter().filter(|r| r.1 == S::Process && r.2 == id && r.3 == m).map(|r| (r.0, r.4)).collect()
        };
        // The sleeping child: read in full in round 1, from its cache after, written in every round.
        let cpu = of(child.id(), M::CpuUserNs);
        assert_eq!(cpu.iter().map(|c| c.0).collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6], "{cpu:?}");
        assert!(cpu.windows(2).all(|w| w[0].1 == w[1].1), "a sleeping child's CPU does not move: {cpu:?}");
        assert_eq!(of(child.id(), M::RssBytes).len(), 6);
        let pid = std::process::id();
        for m in [M::VoluntarySwitches, M::RunDelayNs] {
            let v = of(pid, m);
            assert_eq!(v.len(), 6, "{m:?}");
            assert!(v.windows(2).all(|w| w[0].1 <= w[1].1), "{m:?} went back: {v:?}");
        }
        // The exited thread's voluntary switch (its sleep) stays in the process's sum.
        let vol = of(pid, M::VoluntarySwitches);
        assert!(vol[5].1 > vol[1].1, "{vol:?}");
    }
}
