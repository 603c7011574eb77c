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
        process_common(e, buf, &self.own, pid, true);
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
            if !process_common(e, buf, files, child, false) {
                continue;
            }
            if let Some(t) = files.schedstat.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_schedstat) {
                e.sample(S::Process, child, M::RunDelayNs, t.1);
            }
            if let Some((v, n)) = files.status.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_switches) {
                e.sample(S::Process, child, M::VoluntarySwitches, v);
                e.sample(S::Process, child, M::InvoluntarySwitches, n);
            }
            if let Some(text) = files.children.as_ref().and_then(|f| f.read(buf)) {
                let pending = &mut self.pending;
                procfs::for_each_number(text, |n| pending.push(n as u32));
            }
        }
        let round = self.round;
        self.children.retain(|_, f| f.seen == round);
    }

    fn sample_threads<O: HostOut>(&mut self, e: &mut Emitter<O>, buf: &mut Vec<u8>, sums: &mut [u64; 3]) {
        let round = self.round;
        if let Ok(dir) = std::fs::read_dir(&self.task_dir) {
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
        // Every 16th round reads every file (a name set from another thread, say).
        let refresh = round % 16 == 1;
        for (&tid, t) in self.threads.iter_mut() {
            let sched = t.schedstat.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_schedstat3);
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
    }
}

impl Default for TreeSampler {
    fn default() -> Self {
        TreeSampler::new()
    }
}

/// stat and io of one process; false when it is gone.
fn process_common<O: HostOut>(e: &mut Emitter<O>, buf: &mut Vec<u8>, f: &ProcessFiles, pid: u32, own: bool) -> bool {
    let Some(text) = f.stat.as_ref().and_then(|f| f.read(buf)) else { return false };
    let mut comm: &[u8] = b"";
    let Some(st) = procfs::parse_stat(text, &mut comm) else { return false };
    e.entity(S::Process, pid, st.ppid, comm);
    e.sample(S::Process, pid, M::CpuUserNs, st.utime_ns);
    e.sample(S::Process, pid, M::CpuSysNs, st.stime_ns);
    e.sample(S::Process, pid, M::MinorFaults, st.minflt);
    e.sample(S::Process, pid, M::MajorFaults, st.majflt);
    e.sample(S::Process, pid, M::RssBytes, st.rss_pages * PAGE);
    if own || st.threads > 1 {
        e.sample(S::Process, pid, M::Threads, st.threads);
    }
    if let Some([rchar, wchar, rb, wb]) = f.io.as_ref().and_then(|f| f.read(buf)).and_then(procfs::parse_io) {
        e.sample(S::Process, pid, M::ReadBytes, rchar);
        e.sample(S::Process, pid, M::WriteBytes, wchar);
        e.sample(S::Process, pid, M::StorageReadBytes, rb);
        e.sample(S::Process, pid, M::StorageWriteBytes, wb);
    }
    true
}
