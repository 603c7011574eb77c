//! Synthetic ring-file jobs shaped like `simtrain` (data loading, H2D copy, forward, backward
//! with bucketed all-reduces overlapping it, AMP check, fused AdamW), with each pathology as a
//! switch, for the diagnosis tests. All ranks are simulated together so collectives complete at
//! the same instant on every rank (the last arrival plus the transfer time).

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use tprof_format::{ApiDomain, CollOp, CopyKind, MarkerKind, MemOp, MemSpace, MemoryKind, Record, StrId};

use super::{create_ring, RankIdentity, T0};
/// Communicator of the gradient all-reduce.
pub const COMM: u64 = 0xD1A6;
const MONO0: u64 = 1_000_000_000_000;
const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// A job and its pathologies (all off by default: a clean, overlapped data-parallel job).
#[derive(Debug, Clone)]
pub struct Scenario {
    pub ranks: u32,
    pub steps: u64,
    /// Forward / backward compute kernels per step and their duration.
    pub fwd_kernels: u32,
    pub bwd_kernels: u32,
    pub kernel_ns: u64,
    /// Host time inside each launch call, and outside CUDA before it (Python per-op overhead).
    pub launch_ns: u64,
    pub op_overhead_ns: u64,
    /// Host time in the input pipeline before each step's copy.
    pub data_ns: u64,
    pub batch_bytes: u64,
    pub copy_ns: u64,
    /// The batch comes from pageable memory: the copy is synchronous and 3x slower.
    pub pageable: bool,
    pub buckets: u32,
    pub bucket_bytes: u64,
    /// All-reduce transfer time once every rank has arrived.
    pub allreduce_ns: u64,
    /// All-reduces after backward on the compute stream instead of overlapping it.
    pub no_overlap: bool,
    /// `.item()` halfway through forward: 4-byte D2H copy + cudaStreamSynchronize.
    pub sync_every_step: bool,
    /// `loss.item()` at the end of every step (D2H copy + cudaStreamSynchronize after the optimizer).
    pub item_at_step_end: bool,
    /// (rank, extra host ns per step in its data phase).
    pub straggler: Option<(u32, u64)>,
    /// (step, rank): that rank skips the all-reduces of that step and stops; the others wait.
    pub hang: Option<(u64, u32)>,
    /// Write the watchdog's HangSuspected marker on the waiting ranks.
    pub watchdog: bool,
    /// (rank, seq): that all-reduce's kernel record is missing (as when CUPTI drops a record);
    /// the collective itself ran.
    pub lost_comm_kernel: Option<(u32, u64)>,
    /// (step, rank): that rank all-reduces bucket 0 with half the bytes.
    pub desync: Option<(u64, u32)>,
    /// A cudaMalloc of `oom_growth` bytes each step; it fails at this step and the rank exits.
    pub oom_at: Option<u64>,
    pub oom_growth: u64,
    /// Only this rank grows and fails (default: every rank).
    pub oom_rank: Option<u32>,
    /// (pairs, ns per call, at the step's start): that many cudaMalloc + cudaFree of 1 MiB per step,
    /// either before the input (the GPU has nothing queued and waits) or amid the forward launches
    /// (the GPU still runs the queued kernels).
    pub alloc_churn: Option<(u32, u64, bool)>,
    /// Every Kth step overflows: the AdamW kernels are skipped.
    pub amp_overflow_every: Option<u64>,
    /// Optimizer (fused AdamW) kernels per step and their duration.
    pub optimizer_kernels: u32,
    pub optimizer_ns: u64,
    /// Host may run this many steps ahead of the GPU.
    pub max_inflight: u64,
    pub file_bytes: u64,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario {
            ranks: 2,
            steps: 12,
            fwd_kernels: 40,
            bwd_kernels: 80,
            kernel_ns: 250 * US,
            launch_ns: 5 * US,
            op_overhead_ns: 0,
            data_ns: 2 * MS,
            batch_bytes: 4 << 20,
            copy_ns: 170 * US,
            pageable: false,
            buckets: 4,
            bucket_bytes: 25 << 20,
            allreduce_ns: 300 * US,
            no_overlap: false,
            sync_every_step: false,
            item_at_step_end: false,
            straggler: None,
            hang: None,
            watchdog: false,
            lost_comm_kernel: None,
            desync: None,
            oom_at: None,
            oom_growth: 2 << 30,
            oom_rank: None,
            alloc_churn: None,
            amp_overflow_every: None,
            optimizer_kernels: 4,
            optimizer_ns: 100 * US,
            max_inflight: 2,
            file_bytes: 16 << 20,
        }
    }
}

pub const K_GEMM: &str = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_kernel__5x_cublas";
pub const K_TINY: &str =
    "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_";
pub const K_AMP: &str = "_ZN2at6native48_amp_foreach_non_finite_check_and_unscale_kernelIfEEvPPfPfPKfi";
pub const K_ADAM: &str = "_ZN2at6native12_GLOBAL__N_125multi_tensor_apply_kernelINS1_18TensorListMetadataILi4EEENS1_10FusedAdamWIfLi4EEEJffffbEEEvT_T0_DpT1_";
pub const K_SCALE: &str = "_ZN2at6native29_amp_update_scale_cuda_kernelEPfPiPKfiddi";
pub const K_NCCL: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

/// Records of one rank, with string ids.
struct RankLog {
    rank: u32,
    recs: Vec<Record>,
    gpu: Vec<Record>,
    strings: HashMap<String, StrId>,
    host: u64,
    compute: u64,
    comm: u64,
    corr: u32,
    step_done: Vec<u64>,
    reserved: u64,
    stopped: bool,
}

impl RankLog {
    /// `pairs` cudaMalloc + cudaFree of 1 MiB, `ns` each, on the host's timeline.
    fn alloc_churn(&mut self, rank: u32, step: u64, pairs: u32, ns: u64) {
        for i in 0..pairs {
            let address = 0x7e00_0000_0000 + (step * 1000 + u64::from(i)) * (1 << 20);
            for (name, op) in [("cudaMalloc", MemOp::Alloc), ("cudaFree", MemOp::Free)] {
                let (s, e) = (self.host, self.host + ns);
                let corr = self.api(name, s, e, None, 1 << 20, 0);
                if op == MemOp::Alloc {
                    self.reserved += 1 << 20;
                } else {
                    self.reserved -= 1 << 20;
                }
                self.recs.push(Record::Memory {
                    op,
                    space: MemSpace::Device,
                    device: rank,
                    address,
                    bytes: 1 << 20,
                    reserved: self.reserved,
                    ts: e,
                    result: 0,
                    correlation: corr,
                    tid: 1,
                });
                self.host = e;
            }
        }
    }

    fn s(&mut self, text: &str) -> StrId {
        let n = self.strings.len() as u32 + 1;
        *self.strings.entry(text.to_string()).or_insert(StrId(n))
    }
    fn api(&mut self, name: &str, start: u64, end: u64, detail: Option<&str>, arg: u64, result: i32) -> u32 {
        self.corr += 1;
        let name = self.s(name);
        let detail = detail.map(|d| self.s(d)).unwrap_or(StrId(0));
        self.recs.push(Record::Api {
            tid: 1,
            domain: ApiDomain::Runtime,
            name,
            start,
            end,
            result,
            correlation: self.corr,
            detail,
            stream: 7,
            arg,
        });
        self.corr
    }
    fn kernel(&mut self, name: &str, stream: u32, start: u64, end: u64, corr: u32) {
        let name = self.s(name);
        self.gpu.push(Record::Kernel {
            device: self.rank,
            context: 1,
            stream,
            start,
            end,
            grid: [128, 1, 1],
            block: [256, 1, 1],
            registers: 32,
            shared_mem: 0,
            correlation: corr,
            name,
            graph_id: 0,
        });
    }
    /// Launch a kernel on the compute stream: per-op host overhead, the launch call, the kernel.
    fn launch(&mut self, sc: &Scenario, name: &str, dur: u64) {
        self.host += sc.op_overhead_ns;
        let (s, e) = (self.host, self.host + sc.launch_ns);
        let corr = self.api("cudaLaunchKernel", s, e, Some(name), 0, 0);
        let start = self.compute.max(e + 2 * US);
        self.kernel(name, 7, start, start + dur, corr);
        self.compute = start + dur;
        self.host = e;
    }
    fn memcpy(&mut self, kind: CopyKind, bytes: u64, dur: u64, pageable: bool) {
        let s = self.host;
        let start = self.compute.max(s + 3 * US);
        let end = start + dur;
        let api_end = if pageable { end + 2 * US } else { s + 5 * US };
        let corr = self.api("cudaMemcpyAsync", s, api_end, None, bytes, 0);
        let host_kind = if pageable { MemoryKind::Pageable } else { MemoryKind::Pinned };
        let (src_kind, dst_kind) =
            if kind == CopyKind::HtoD { (host_kind, MemoryKind::Device) } else { (MemoryKind::Device, host_kind) };
        self.gpu.push(Record::Memcpy {
            device: self.rank,
            context: 1,
            stream: 7,
            start,
            end,
            bytes,
            kind,
            src_kind,
            dst_kind,
            correlation: corr,
        });
        self.compute = end;
        self.host = api_end;
    }
}

/// A collective call waiting for its kernel (phase B).
struct Pending {
    rank: usize,
    bucket: u32,
    call_end: u64,
    ready: u64,
    corr: u32,
    bytes: u64,
    hung: bool,
}

impl Scenario {
    /// GPU time of one step of the clean job (compute only).
    pub fn gpu_step_ns(&self) -> u64 {
        (self.fwd_kernels + self.bwd_kernels) as u64 * self.kernel_ns
            + self.copy_ns
            + self.optimizer_kernels as u64 * self.optimizer_ns
    }

    /// Simulates the job and writes one ring file per rank into `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        let mut logs: Vec<RankLog> = (0..self.ranks)
            .map(|rank| RankLog {
                rank,
                recs: Vec::new(),
                gpu: Vec::new(),
                strings: HashMap::new(),
                host: MONO0 + MS,
                compute: MONO0 + MS,
                comm: MONO0 + MS,
                corr: 0,
                step_done: Vec::new(),
                reserved: 1 << 30,
                stopped: false,
            })
            .collect();
        let mut flushed: Vec<Vec<Vec<Record>>> = (0..self.ranks).map(|_| Vec::new()).collect();
        for step in 0..self.steps {
            let mut pending: Vec<Pending> = Vec::new();
            for (ri, l) in logs.iter_mut().enumerate() {
                if l.stopped {
                    continue;
                }
                self.phase_a(step, ri, l, &mut pending);
            }
            self.phase_b(step, &mut logs, &pending);
            for (ri, l) in logs.iter_mut().enumerate() {
                if !l.stopped {
                    self.phase_c(step, l);
                }
                if l.recs.is_empty() && l.gpu.is_empty() {
                    continue;
                }
                let mut chunk = std::mem::take(&mut l.recs);
                chunk.append(&mut l.gpu);
                flushed[ri].push(chunk);
            }
        }
        let mut paths = Vec::new();
        for (ri, l) in logs.iter_mut().enumerate() {
            paths.push(self.write_rank(dir, l, &flushed[ri])?);
        }
        Ok(paths)
    }

    /// Host work up to the all-reduce calls, and the compute kernels.
    fn phase_a(&self, step: u64, ri: usize, l: &mut RankLog, pending: &mut Vec<Pending>) {
        let rank = ri as u32;
        let step_name = l.s("step");
        let dom = l.s("app");
        l.recs.push(Record::ClockSync { ticks: l.host, mono_ns: l.host, wall_ns: l.host - MONO0 + T0 });
        l.recs.push(Record::NvtxPush { tid: 1, domain: dom, name: step_name, ts: l.host });
        if step >= self.max_inflight {
            let wait = l.step_done[(step - self.max_inflight) as usize];
            let (s, e) = (l.host, l.host.max(wait) + 2 * US);
            l.api("cudaEventSynchronize", s, e, None, 0, 0);
            l.host = e;
        }
        if let Some(at) = self.oom_at.filter(|_| self.oom_rank.is_none_or(|r| r == rank)) {
            let (s, e) = (l.host, l.host + 20 * US);
            let fail = step == at;
            let corr = l.api("cudaMalloc", s, e, None, self.oom_growth, if fail { 2 } else { 0 });
            if !fail {
                l.reserved += self.oom_growth;
            }
            l.recs.push(Record::Memory {
                op: if fail { MemOp::AllocFailed } else { MemOp::Alloc },
                space: MemSpace::Device,
                device: rank,
                address: if fail { 0 } else { 0x7f00_0000_0000 + step * self.oom_growth },
                bytes: self.oom_growth,
                reserved: l.reserved,
                ts: e,
                result: if fail { 2 } else { 0 },
                correlation: corr,
                tid: 1,
            });
            l.host = e;
            if fail {
                l.recs.push(Record::Marker {
                    kind: MarkerKind::ProcessExit,
                    ts: e + 50 * US,
                    value: 1,
                    name: StrId(0),
                });
                l.stopped = true;
                return;
            }
        }
        if let Some((pairs, ns, true)) = self.alloc_churn {
            l.alloc_churn(rank, step, pairs, ns);
        }
        l.host += self.data_ns;
        if let Some((r, extra)) = self.straggler {
            if r == rank {
                l.host += extra;
            }
        }
        let copy = if self.pageable { 3 * self.copy_ns } else { self.copy_ns };
        l.memcpy(CopyKind::HtoD, self.batch_bytes, copy, self.pageable);
        for i in 0..self.fwd_kernels {
            l.launch(self, K_GEMM, self.kernel_ns);
            if let (Some((pairs, ns, false)), true) = (self.alloc_churn, i == self.fwd_kernels / 2) {
                l.alloc_churn(rank, step, pairs, ns);
            }
            if self.sync_every_step && i == self.fwd_kernels / 2 {
                l.memcpy(CopyKind::DtoH, 4, 2 * US, false);
                let (s, e) = (l.host, l.host.max(l.compute) + 3 * US);
                l.api("cudaStreamSynchronize", s, e, None, 0, 0);
                l.host = e;
            }
        }
        let per_bucket = (self.bwd_kernels / self.buckets.max(1)).max(1);
        let hung = self.hang.is_some_and(|(s, r)| s == step && r == rank);
        for b in 0..self.buckets {
            for _ in 0..per_bucket {
                l.launch(self, K_GEMM, self.kernel_ns);
            }
            if !self.no_overlap {
                self.call(step, rank, b, l, pending, hung);
            }
        }
        if self.no_overlap {
            for b in 0..self.buckets {
                self.call(step, rank, b, l, pending, hung);
            }
        }
        if hung {
            l.stopped = true;
        }
    }

    fn call(&self, step: u64, rank: u32, b: u32, l: &mut RankLog, pending: &mut Vec<Pending>, hung: bool) {
        if hung {
            return;
        }
        let mut bytes = self.bucket_bytes;
        if self.desync.is_some_and(|(s, r)| s == step && r == rank) && b == 0 {
            bytes /= 2;
        }
        l.corr += 1;
        let (s, e) = (l.host, l.host + 8 * US);
        l.recs.push(Record::Collective {
            tid: 1,
            op: CollOp::AllReduce,
            start: s,
            end: e,
            comm: COMM,
            rank,
            nranks: self.ranks,
            count: bytes / 4,
            datatype: 7,
            bytes,
            peer: -1,
            stream: 9,
            seq: step * self.buckets as u64 + b as u64,
            result: 0,
            correlation: l.corr,
            device: rank,
        });
        l.host = e;
        pending.push(Pending {
            rank: rank as usize,
            bucket: b,
            call_end: e,
            ready: l.compute,
            corr: l.corr,
            bytes,
            hung: false,
        });
    }

    /// The all-reduce kernels: each starts when its rank arrives, all end together.
    fn phase_b(&self, step: u64, logs: &mut [RankLog], pending: &[Pending]) {
        let hang = self.hang.is_some_and(|(s, _)| s == step);
        for b in 0..self.buckets {
            let calls: Vec<&Pending> = pending.iter().filter(|p| p.bucket == b && !p.hung).collect();
            let mut arrivals = Vec::new();
            for p in &calls {
                let l = &logs[p.rank];
                let stream_free = if self.no_overlap { l.compute } else { l.comm };
                arrivals.push(stream_free.max(p.ready).max(p.call_end + 2 * US));
            }
            if hang {
                if self.watchdog {
                    for p in &calls {
                        let l = &mut logs[p.rank];
                        let what = l.s("ncclAllReduce comm 0xd1a6 seq pending");
                        let ts = p.call_end + 5_000 * MS;
                        l.gpu.push(Record::Marker {
                            kind: MarkerKind::HangSuspected,
                            ts,
                            value: 5_000 * MS,
                            name: what,
                        });
                    }
                }
                continue;
            }
            let end = arrivals.iter().copied().max().unwrap_or(0) + self.allreduce_ns;
            for (p, &a) in calls.iter().zip(&arrivals) {
                let l = &mut logs[p.rank];
                let seq = step * self.buckets as u64 + b as u64;
                if self.lost_comm_kernel != Some((p.rank as u32, seq)) {
                    l.kernel(K_NCCL, if self.no_overlap { 7 } else { 9 }, a, end, p.corr);
                }
                let _ = p.bytes;
                if self.no_overlap {
                    l.compute = end;
                } else {
                    l.comm = end;
                }
            }
        }
        if hang {
            for l in logs.iter_mut() {
                l.stopped = true;
            }
        }
    }

    /// Compute waits for the all-reduces; AMP check, AdamW (unless overflow), scale update.
    fn phase_c(&self, step: u64, l: &mut RankLog) {
        l.compute = l.compute.max(l.comm);
        l.launch(self, K_AMP, 20 * US);
        let overflow = self.amp_overflow_every.is_some_and(|k| (step + 1).is_multiple_of(k));
        if !overflow {
            for _ in 0..self.optimizer_kernels {
                l.launch(self, K_ADAM, self.optimizer_ns);
            }
        }
        l.launch(self, K_SCALE, 5 * US);
        if self.item_at_step_end {
            l.memcpy(CopyKind::DtoH, 4, 2 * US, false);
            let (s, e) = (l.host, l.host.max(l.compute) + 3 * US);
            l.api("cudaStreamSynchronize", s, e, None, 0, 0);
            l.host = e;
        }
        l.step_done.push(l.compute);
        let dom = l.s("app");
        l.host += 10 * US;
        l.recs.push(Record::NvtxPop { tid: 1, domain: dom, ts: l.host });
    }

    fn write_rank(&self, dir: &Path, l: &RankLog, chunks: &[Vec<Record>]) -> std::io::Result<PathBuf> {
        let id = RankIdentity {
            pid: 2000 + l.rank,
            hostname: "host0".into(),
            cmdline: vec!["synth-simtrain".into()],
            rank: l.rank,
            local_rank: l.rank,
            world_size: self.ranks,
            job_id: "synth-patterns",
            start_wall_ns: T0,
            start_mono_ns: MONO0,
            writer: "synth",
        };
        let strings = l.strings.iter().map(|(text, id)| (*id, text.as_str()));
        let (path, mut w) = create_ring(dir, id, self.file_bytes, strings)?;
        let mut last = MONO0;
        for chunk in chunks {
            for r in chunk {
                if let Some(t) = r.timestamp() {
                    last = last.max(t);
                }
                w.append(r);
            }
            w.commit(last);
        }
        w.append(&Record::ClockSync { ticks: last, mono_ns: last, wall_ns: last - MONO0 + T0 });
        w.close(last)?;
        Ok(path)
    }
}
