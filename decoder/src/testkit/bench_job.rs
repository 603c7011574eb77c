//! The decode benchmark's job: a realistic multi-rank job of ring files (8 ranks on 2 hosts by
//! default, ~200 distinct kernel names on two compute streams, launch API calls, H2D/D2H copies,
//! memsets, NCCL AllReduce/AllGather calls with their kernels on a communication stream, stream
//! syncs, NVTX step / forward / backward / layer ranges; GPU records arrive in CUPTI-like batches
//! after the launches), about 1,300 events per step.

use std::path::{Path, PathBuf};

use tprof_format::{ApiDomain, CollOp, CopyKind, MemoryKind, Record, RingWriter, StrId, SyncKind};

use super::{create_ring, RankIdentity, T0};
use crate::xorshift::XorShift;

const DISTINCT_KERNELS: u32 = 200;

// String ids.
const S_STEP: u32 = 1;
const S_FWD: u32 = 2;
const S_BWD: u32 = 3;
const S_OPT: u32 = 4;
const S_LAYER: u32 = 5;
const S_DOMAIN: u32 = 6;
const S_LAUNCH: u32 = 7;
const S_MEMCPY: u32 = 8;
const S_MEMSET: u32 = 9;
const S_SYNC: u32 = 10;
const S_AR_KERNEL: u32 = 11;
const S_AG_KERNEL: u32 = 12;
const S_THREAD: u32 = 13;
const S_KERNEL0: u32 = 100;

/// Per-rank generation state.
struct Gen<'w> {
    w: &'w mut RingWriter,
    rng: XorShift,
    mono0: u64,
    /// Host time (true ns).
    host: u64,
    /// Compute streams' GPU cursors, comm stream cursor.
    gpu: [u64; 2],
    comm: u64,
    corr: u32,
    pending: Vec<Record>,
    events: u64,
    last_sync: u64,
    kernel_ns: Vec<u64>,
    seq: [u64; 2],
    rank: u32,
    ranks: u32,
}

impl Gen<'_> {
    fn mono(&self, t: u64) -> u64 {
        t - T0 + self.mono0
    }
    fn emit(&mut self, r: Record) {
        self.w.append(&r);
        self.events += 1;
    }
    fn clock(&mut self) {
        if self.host - self.last_sync >= 100_000_000 {
            let m = self.mono(self.host);
            self.w.append(&Record::ClockSync { ticks: m, mono_ns: m, wall_ns: self.host });
            self.last_sync = self.host;
        }
    }
    fn push(&mut self, name: u32) {
        let ts = self.mono(self.host);
        self.emit(Record::NvtxPush { tid: 1, domain: StrId(S_DOMAIN), name: StrId(name), ts });
        self.host += 300;
    }
    fn pop(&mut self) {
        let ts = self.mono(self.host);
        self.emit(Record::NvtxPop { tid: 1, domain: StrId(S_DOMAIN), ts });
        self.host += 300;
    }
    /// Flush GPU records as a CUPTI buffer would (batches, after the launches).
    fn flush_gpu(&mut self, force: bool) {
        if force || self.pending.len() >= 256 {
            for r in std::mem::take(&mut self.pending) {
                self.emit(r);
            }
            self.clock();
        }
    }
    fn launch(&mut self, kernel: u32, stream: usize) {
        let api_ns = 3_000 + self.rng.below(3_000);
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let (s, e) = (self.mono(self.host), self.mono(self.host + api_ns));
        let name = StrId(S_KERNEL0 + kernel);
        self.emit(Record::Api {
            tid: 1,
            domain: ApiDomain::Runtime,
            name: StrId(S_LAUNCH),
            start: s,
            end: e,
            result: 0,
            correlation: corr,
            detail: name,
            stream: 7 + stream as u64,
            arg: 0,
        });
        let base = self.kernel_ns[kernel as usize];
        let dur = base + self.rng.below(base / 8 + 1);
        let start = self.gpu[stream].max(self.host + api_ns / 2) + 1_000;
        self.gpu[stream] = start + dur;
        let (ks, ke) = (self.mono(start), self.mono(start + dur));
        self.pending.push(Record::Kernel {
            device: self.rank % 8,
            context: 1,
            stream: 7 + stream as u32,
            start: ks,
            end: ke,
            grid: [128 + kernel, 1, 1],
            block: [256, 1, 1],
            registers: 64,
            shared_mem: 4096,
            correlation: corr,
            name,
            graph_id: 0,
        });
        self.host += api_ns + 500 + self.rng.below(2_000);
        self.flush_gpu(false);
    }
    fn memcpy(&mut self, kind: CopyKind, bytes: u64) {
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let api_ns = 5_000;
        let (s, e) = (self.mono(self.host), self.mono(self.host + api_ns));
        self.emit(Record::Api {
            tid: 1,
            domain: ApiDomain::Runtime,
            name: StrId(S_MEMCPY),
            start: s,
            end: e,
            result: 0,
            correlation: corr,
            detail: StrId(0),
            stream: 7,
            arg: bytes,
        });
        let dur = bytes / 20 + 2_000; // ~20 GB/s
        let start = self.gpu[0].max(self.host) + 1_000;
        self.gpu[0] = start + dur;
        let (gs, ge) = (self.mono(start), self.mono(start + dur));
        self.pending.push(Record::Memcpy {
            device: self.rank % 8,
            context: 1,
            stream: 7,
            start: gs,
            end: ge,
            bytes,
            kind,
            src_kind: if kind == CopyKind::HtoD { MemoryKind::Pinned } else { MemoryKind::Device },
            dst_kind: if kind == CopyKind::HtoD { MemoryKind::Device } else { MemoryKind::Pinned },
            correlation: corr,
        });
        self.host += api_ns + 1_000;
    }
    fn memset(&mut self, bytes: u64) {
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let (s, e) = (self.mono(self.host), self.mono(self.host + 2_000));
        self.emit(Record::Api {
            tid: 1,
            domain: ApiDomain::Runtime,
            name: StrId(S_MEMSET),
            start: s,
            end: e,
            result: 0,
            correlation: corr,
            detail: StrId(0),
            stream: 8,
            arg: bytes,
        });
        let start = self.gpu[1].max(self.host) + 1_000;
        let dur = bytes / 200 + 1_000;
        self.gpu[1] = start + dur;
        let (gs, ge) = (self.mono(start), self.mono(start + dur));
        self.pending.push(Record::Memset {
            device: self.rank % 8,
            context: 1,
            stream: 8,
            start: gs,
            end: ge,
            bytes,
            value: 0,
            dst_kind: MemoryKind::Device,
            correlation: corr,
        });
        self.host += 3_000;
    }
    fn collective(&mut self, op: CollOp, bytes: u64) {
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        let which = (op == CollOp::AllGather) as usize;
        let seq = self.seq[which];
        self.seq[which] += 1;
        let (s, e) = (self.mono(self.host), self.mono(self.host + 8_000));
        self.emit(Record::Collective {
            tid: 1,
            op,
            start: s,
            end: e,
            comm: 0xC0FFEE + which as u64,
            rank: self.rank,
            nranks: self.ranks,
            count: bytes / 2,
            datatype: 6,
            bytes,
            peer: -1,
            stream: 9,
            seq,
            result: 0,
            correlation: corr,
            device: self.rank % 8,
        });
        // Waits for the compute stream that produced the gradients, then moves the bytes at ~100 GB/s.
        let dur = bytes / 100 + 10_000;
        let start = self.comm.max(self.gpu[0]).max(self.host + 4_000);
        self.comm = start + dur;
        let (gs, ge) = (self.mono(start), self.mono(start + dur));
        let name = if op == CollOp::AllGather { S_AG_KERNEL } else { S_AR_KERNEL };
        self.pending.push(Record::Kernel {
            device: self.rank % 8,
            context: 1,
            stream: 9,
            start: gs,
            end: ge,
            grid: [16, 1, 1],
            block: [512, 1, 1],
            registers: 96,
            shared_mem: 0,
            correlation: corr,
            name: StrId(name),
            graph_id: 0,
        });
        self.host += 9_000;
    }
    fn sync(&mut self) {
        let end = self.gpu[0].max(self.gpu[1]).max(self.comm).max(self.host + 2_000);
        let (s, e) = (self.mono(self.host), self.mono(end));
        let corr = self.corr;
        self.corr = self.corr.wrapping_add(1);
        self.emit(Record::Sync {
            kind: SyncKind::StreamSynchronize,
            tid: 1,
            context: 1,
            stream: 7,
            event: 0,
            start: s,
            end: e,
            correlation: corr,
            result: 0,
        });
        self.host = end + 1_000;
        let _ = S_SYNC;
    }

    /// One training step: ~1,300 events.
    fn step(&mut self) {
        const LAYERS: u32 = 12;
        const PER_LAYER: u32 = 8;
        self.clock();
        self.push(S_STEP);
        self.memcpy(CopyKind::HtoD, 8 << 20);
        self.push(S_FWD);
        for l in 0..LAYERS {
            self.push(S_LAYER);
            for k in 0..PER_LAYER {
                let kernel = (l * PER_LAYER + k) % 96;
                self.launch(kernel, 0);
            }
            self.pop();
        }
        self.pop();
        self.push(S_BWD);
        for l in (0..LAYERS).rev() {
            self.push(S_LAYER);
            for k in 0..2 * PER_LAYER {
                let kernel = 96 + (l * 2 * PER_LAYER + k) % 96;
                self.launch(kernel, (k % 4 == 3) as usize);
            }
            self.pop();
            if l % 3 == 0 {
                self.collective(CollOp::AllReduce, 32 << 20);
            }
        }
        self.pop();
        self.push(S_OPT);
        for k in 0..8 {
            self.launch(192 + k, 0);
        }
        self.memset(1 << 20);
        self.collective(CollOp::AllGather, 4 << 20);
        self.pop();
        self.memcpy(CopyKind::DtoH, 4096);
        self.flush_gpu(true);
        self.sync();
        self.pop();
        let m = self.mono(self.host);
        self.w.commit(m);
    }
}

/// Writes `ranks` ring files holding about `events` events in all; returns (paths, events, bytes).
pub fn generate(dir: &Path, events: u64, ranks: u32, threads: usize) -> (Vec<PathBuf>, u64, u64) {
    std::fs::create_dir_all(dir).expect("create the bench directory");
    let per_rank = events / ranks as u64;
    let work: Vec<u32> = (0..ranks).collect();
    let results: Vec<(PathBuf, u64, u64)> = std::thread::scope(|s| {
        let chunks: Vec<Vec<u32>> =
            (0..threads).map(|t| work.iter().copied().skip(t).step_by(threads).collect()).collect();
        let handles: Vec<_> = chunks
            .into_iter()
            .map(|mine| {
                s.spawn(move || mine.into_iter().map(|r| write_rank(dir, r, ranks, per_rank)).collect::<Vec<_>>())
            })
            .collect();
        handles.into_iter().flat_map(|h| h.join().expect("generator thread")).collect()
    });
    let mut out = results;
    out.sort();
    let total = out.iter().map(|r| r.1).sum();
    let bytes = out.iter().map(|r| r.2).sum();
    (out.into_iter().map(|r| r.0).collect(), total, bytes)
}

fn write_rank(dir: &Path, rank: u32, ranks: u32, events: u64) -> (PathBuf, u64, u64) {
    let host = rank / 4;
    let mono0 = 1_000_000_000_000u64 * (host as u64 + 1);
    let id = RankIdentity {
        pid: 2000 + rank,
        hostname: format!("node{host}"),
        cmdline: vec!["train.py".into(), format!("--rank={rank}")],
        rank,
        local_rank: rank % 4,
        world_size: ranks,
        job_id: "bench-job",
        start_wall_ns: T0,
        start_mono_ns: mono0,
        writer: "bench",
    };
    let strings = [
        (S_STEP, "step"),
        (S_FWD, "forward"),
        (S_BWD, "backward"),
        (S_OPT, "optimizer"),
        (S_LAYER, "transformer_layer"),
        (S_DOMAIN, "app"),
        (S_LAUNCH, "cudaLaunchKernel"),
        (S_MEMCPY, "cudaMemcpyAsync"),
        (S_MEMSET, "cudaMemsetAsync"),
        (S_SYNC, "cudaStreamSynchronize"),
        (S_AR_KERNEL, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"),
        (S_AG_KERNEL, "ncclDevKernel_AllGather_RING_LL(ncclDevComm*, unsigned long, ncclWork*)"),
        (S_THREAD, "pt_main_thread"),
    ]
    .map(|(id, s)| (StrId(id), s));
    // ~14.5 B/event measured; room so the ring never wraps, and small files for many small ranks
    // (4096 ranks of 20k events: 0.6 MB each instead of 4.3 MB).
    let room = events * 17 + (4 << 20).min((256 << 10) + events * 2);
    let (path, mut w) = create_ring(dir, id, room, strings).expect("create ring file");
    let mut rng = XorShift(0x9E37_79B9_7F4A_7C15 ^ (rank as u64 + 1));
    let families =
        ["gemm_bf16_tn", "flash_fwd", "flash_bwd", "layer_norm", "softmax", "gelu", "adam_step", "elementwise"];
    let mut kernel_ns = Vec::new();
    for k in 0..DISTINCT_KERNELS {
        let f = families[(k % families.len() as u32) as usize];
        let name = format!("_ZN7cutlass6KernelI{}{}_{}_kernelEEvNT_6ParamsE", 12 + f.len() + 5, f, k);
        w.define_string(StrId(S_KERNEL0 + k), &name);
        kernel_ns.push(2_000 + rng.below(60_000));
    }
    w.append(&Record::ThreadName { tid: 1, name: StrId(S_THREAD) });
    let m0 = mono0;
    w.append(&Record::ClockSync { ticks: m0, mono_ns: m0, wall_ns: T0 });
    let start = T0 + 1_000_000 + rank as u64 * 700;
    let mut g = Gen {
        w: &mut w,
        rng,
        mono0,
        host: start,
        gpu: [start; 2],
        comm: start,
        corr: 1,
        pending: Vec::with_capacity(512),
        events: 1,
        last_sync: start,
        kernel_ns,
        seq: [0; 2],
        rank,
        ranks,
    };
    while g.events < events {
        g.step();
    }
    let (written, end) = (g.events, g.host);
    let m = end - T0 + mono0;
    w.append(&Record::ClockSync { ticks: m, mono_ns: m, wall_ns: end });
    w.close(m).expect("close ring file");
    let bytes = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
    (path, written, bytes)
}
