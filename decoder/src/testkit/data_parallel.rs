//! A synthetic data-parallel job with known truth.
//!
//! Every rank runs `steps` steps; a step is an NVTX range `step` holding `kernels_per_step` compute
//! kernels (launch API + kernel) and one AllReduce (NCCL call + NCCL kernel whose end is the same
//! true instant on every rank). Each host's wall clock can be given an error (`host_skew_ns`), which
//! clock alignment should recover.

use std::path::{Path, PathBuf};

use tprof_format::{CollOp, Record, StrId};

use super::{create_ring, RankIdentity, T0};

/// What to generate.
#[derive(Debug, Clone)]
pub struct SynthJob {
    pub ranks: u32,
    pub ranks_per_host: u32,
    pub steps: u32,
    pub kernels_per_step: u32,
    /// Compute kernel duration (ns).
    pub kernel_ns: u64,
    /// Gap between compute kernels (ns): GPU idle.
    pub gap_ns: u64,
    /// AllReduce kernel duration (ns) and message size.
    pub allreduce_ns: u64,
    pub allreduce_bytes: u64,
    /// Wall-clock error per host (ns); missing entries are 0.
    pub host_skew_ns: Vec<i64>,
    /// Write NVTX `step` ranges (else StepBegin/StepEnd markers).
    pub nvtx_steps: bool,
    /// Ring file size (bytes) per rank.
    pub file_bytes: u64,
}

impl Default for SynthJob {
    fn default() -> Self {
        SynthJob {
            ranks: 2,
            ranks_per_host: 1,
            steps: 5,
            kernels_per_step: 10,
            kernel_ns: 100_000,
            gap_ns: 10_000,
            allreduce_ns: 500_000,
            allreduce_bytes: 64 << 20,
            host_skew_ns: Vec::new(),
            nvtx_steps: true,
            file_bytes: 8 << 20,
        }
    }
}

/// Communicator id used for the AllReduce.
pub const COMM: u64 = 0xC0FFEE;

const S_STEP: StrId = StrId(1);
const S_LAUNCH: StrId = StrId(2);
const S_GEMM: StrId = StrId(3);
const S_NCCL: StrId = StrId(4);
const S_NCCL_API: StrId = StrId(5);
const S_DOMAIN: StrId = StrId(6);

impl SynthJob {
    /// Duration of one step (ns) in true time.
    pub fn step_ns(&self) -> u64 {
        self.kernels_per_step as u64 * (self.kernel_ns + self.gap_ns) + self.allreduce_ns + 50_000
    }

    /// Events written per rank (API + kernels + collectives + NVTX + markers, excluding clock syncs).
    pub fn events_per_rank(&self) -> u64 {
        self.steps as u64 * (2 * self.kernels_per_step as u64 + 2 + 2)
    }

    /// Writes every rank's file into `dir`; returns the paths in rank order.
    pub fn write(&self, dir: &Path) -> std::io::Result<Vec<PathBuf>> {
        (0..self.ranks).map(|r| self.write_rank(dir, r)).collect()
    }

    /// Writes one rank's ring file.
    pub fn write_rank(&self, dir: &Path, rank: u32) -> std::io::Result<PathBuf> {
        let host = rank / self.ranks_per_host.max(1);
        let skew = self.host_skew_ns.get(host as usize).copied().unwrap_or(0);
        // Each host has its own monotonic epoch.
        let mono0 = 1_000_000_000_000u64 * (host as u64 + 1);
        let mono = |t: u64| t - T0 + mono0; // true time -> this host's monotonic ns (= ticks)
        let id = RankIdentity {
            pid: 1000 + rank,
            hostname: format!("host{host}"),
            cmdline: vec!["synth".into(), format!("--rank={rank}")],
            rank,
            local_rank: rank % self.ranks_per_host.max(1),
            world_size: self.ranks,
            job_id: "synth-job",
            start_wall_ns: (T0 as i64 + skew) as u64,
            start_mono_ns: mono0,
            writer: "synth",
        };
        let strings = [
            (S_STEP, "step"),
            (S_LAUNCH, "cudaLaunchKernel"),
            (S_GEMM, "_Z4gemmPfS_S_i"),
            (S_NCCL, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
            (S_NCCL_API, "ncclAllReduce"),
            (S_DOMAIN, "app"),
        ];
        let (path, mut w) = create_ring(dir, id, self.file_bytes, strings)?;
        let wall = |t: u64| (t as i64 + skew) as u64;
        let mut corr = 1u32;
        let mut last_sync = 0u64;
        // Rank-dependent host-side jitter so hosts do not launch in lockstep.
        let host_jitter = 1_000 * rank as u64;
        for s in 0..self.steps as u64 {
            let t_step = T0 + 1_000_000 + s * self.step_ns();
            if t_step - last_sync >= 100_000_000 || s == 0 {
                w.append(&Record::ClockSync { ticks: mono(t_step), mono_ns: mono(t_step), wall_ns: wall(t_step) });
                last_sync = t_step;
            }
            let begin = t_step + host_jitter;
            if self.nvtx_steps {
                w.append(&Record::NvtxPush { tid: 1, domain: S_DOMAIN, name: S_STEP, ts: mono(begin) });
            } else {
                w.append(&Record::Marker {
                    kind: tprof_format::MarkerKind::StepBegin,
                    ts: mono(begin),
                    value: s,
                    name: StrId(0),
                });
            }
            let mut kernels = Vec::with_capacity(self.kernels_per_step as usize + 1);
            let mut t = begin + 5_000;
            for _ in 0..self.kernels_per_step {
                w.append(&Record::Api {
                    tid: 1,
                    domain: tprof_format::ApiDomain::Runtime,
                    name: S_LAUNCH,
                    start: mono(t),
                    end: mono(t + 3_000),
                    result: 0,
                    correlation: corr,
                    detail: S_GEMM,
                    stream: 7,
                    arg: 0,
                });
                kernels.push(Record::Kernel {
                    device: 0,
                    context: 1,
                    stream: 7,
                    start: mono(t + 4_000),
                    end: mono(t + 4_000 + self.kernel_ns),
                    grid: [128, 1, 1],
                    block: [256, 1, 1],
                    registers: 32,
                    shared_mem: 0,
                    correlation: corr,
                    name: S_GEMM,
                    graph_id: 0,
                });
                corr += 1;
                t += self.kernel_ns + self.gap_ns;
            }
            // AllReduce: the kernel ends at the same true instant on every rank.
            let ar_end =
                t_step + 20_000 + self.kernels_per_step as u64 * (self.kernel_ns + self.gap_ns) + self.allreduce_ns;
            let ar_start = ar_end - self.allreduce_ns + host_jitter;
            w.append(&Record::Collective {
                tid: 1,
                op: CollOp::AllReduce,
                start: mono(t),
                end: mono(t + 8_000),
                comm: COMM,
                rank,
                nranks: self.ranks,
                count: self.allreduce_bytes / 4,
                datatype: 7,
                bytes: self.allreduce_bytes,
                peer: -1,
                stream: 9,
                seq: s,
                result: 0,
                correlation: corr,
                device: 0,
            });
            kernels.push(Record::Kernel {
                device: 0,
                context: 1,
                stream: 9,
                start: mono(ar_start.max(t + 9_000)),
                end: mono(ar_end),
                grid: [8, 1, 1],
                block: [512, 1, 1],
                registers: 96,
                shared_mem: 0,
                correlation: corr,
                name: S_NCCL,
                graph_id: 0,
            });
            corr += 1;
            let end = t_step + self.step_ns() - 1;
            if self.nvtx_steps {
                w.append(&Record::NvtxPop { tid: 1, domain: S_DOMAIN, ts: mono(end) });
            } else {
                w.append(&Record::Marker {
                    kind: tprof_format::MarkerKind::StepEnd,
                    ts: mono(end),
                    value: s,
                    name: StrId(0),
                });
            }
            // GPU activity arrives after the host side, as a CUPTI buffer flush would.
            for k in &kernels {
                w.append(k);
            }
            w.commit(mono(end));
        }
        let t_end = T0 + 1_000_000 + self.steps as u64 * self.step_ns();
        w.append(&Record::ClockSync { ticks: mono(t_end), mono_ns: mono(t_end), wall_ns: wall(t_end) });
        w.close(mono(t_end))?;
        Ok(path)
    }
}
