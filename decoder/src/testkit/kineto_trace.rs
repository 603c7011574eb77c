//! A large Kineto trace with known truth, written fast: the memory test of the streaming import
//! and the benchmark generate it at run time (it is never committed).
//!
//! Shaped as Kineto writes a trace: `deviceProperties` first, then `traceEvents` with every CPU
//! event (steps, CPU ops, launches) before every GPU kernel (so the events are far out of time
//! order), then `distributedInfo` after the events.

use std::io::{BufWriter, Write};
use std::path::Path;

/// What the generated trace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KinetoTruth {
    pub steps: u64,
    pub cpu_ops: u64,
    pub launches: u64,
    pub kernels: u64,
    /// Sum of the kernels' durations (they never overlap).
    pub kernel_ns: u64,
    /// Bytes of JSON written.
    pub bytes: u64,
}

impl KinetoTruth {
    /// Events the importer delivers: steps and CPU ops (ranges), launches, kernels.
    pub fn events(&self) -> u64 {
        self.steps + self.cpu_ops + self.launches + self.kernels
    }
}

/// Kernels (and launches) per step.
const OPS_PER_STEP: u64 = 64;
const KERNEL_NAMES: [&str; 8] = [
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>",
    "ampere_sgemm_128x64_tn",
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_16x6_tn_align4>",
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float>>>",
    "void at::native::(anonymous namespace)::softmax_warp_forward<float, float, float, 10, false>",
    "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
    "void at::native::unrolled_elementwise_kernel<at::native::MulFunctor<float>>",
    "void at::native::layer_norm_kernel<float, float>",
];
/// Start of the trace (us): small enough that nanosecond times stay exact as f64 in the analyses.
const T0_US: u64 = 5_000_000_000;

/// Writes a trace of about `target_bytes` of JSON to `path`.
pub fn write_kineto_trace(path: &Path, target_bytes: u64) -> std::io::Result<KinetoTruth> {
    let f = std::fs::File::create(path)?;
    let mut w = Counting { inner: BufWriter::with_capacity(1 << 20, f), bytes: 0 };
    write!(
        w,
        "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {{\"id\": 0, \"name\": \"NVIDIA A100\", \"totalGlobalMem\": 42297524224, \"numSms\": 108}}\n  ],\n  \"traceEvents\": ["
    )?;
    // About 1.05 KB of JSON per op (CPU op, launch and kernel).
    let steps = (target_bytes / (OPS_PER_STEP * 1050)).max(1);
    let step_us = OPS_PER_STEP * 20 + 100;
    let mut t = KinetoTruth { steps, ..KinetoTruth::default() };
    let mut first = true;
    let mut sep = |w: &mut Counting| -> std::io::Result<()> {
        if !first {
            w.write_all(b",")?;
        }
        first = false;
        Ok(())
    };
    for s in 0..steps {
        let base = T0_US + s * step_us;
        sep(&mut w)?;
        write!(
            w,
            "\n  {{\n    \"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{s}\", \"pid\": 4037, \"tid\": 4037,\n    \"ts\": {base}.250, \"dur\": {}.5,\n    \"args\": {{\"External id\": {}}}\n  }}",
            step_us - 50,
            s * 1000
        )?;
        for k in 0..OPS_PER_STEP {
            let c = s * OPS_PER_STEP + k;
            let ts = base + 10 + k * 20;
            write!(
                w,
                ",\n  {{\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::op{}\", \"pid\": 4037, \"tid\": 4037,\n    \"ts\": {ts}.125, \"dur\": 12.000,\n    \"args\": {{\"External id\": {}, \"Ev Idx\": {c}, \"Input Dims\": [[2048, 1024], [1024]], \"Input type\": [\"float\", \"float\"], \"Sequence number\": {c}, \"Fwd thread id\": 1}}\n  }}",
                k % 16,
                c + 1
            )?;
            write!(
                w,
                ",\n  {{\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 4037, \"tid\": 4037,\n    \"ts\": {}.500, \"dur\": 4.250,\n    \"args\": {{\"External id\": {}, \"cbid\": 211, \"correlation\": {c}}}\n  }}",
                ts + 2,
                c + 1
            )?;
        }
        t.cpu_ops += OPS_PER_STEP;
        t.launches += OPS_PER_STEP;
    }
    for s in 0..steps {
        let base = T0_US + s * step_us;
        for k in 0..OPS_PER_STEP {
            let c = s * OPS_PER_STEP + k;
            let ts = base + 15 + k * 20;
            let dur = 3 + (c % 7);
            write!(
                w,
                ",\n  {{\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{}\", \"pid\": 0, \"tid\": 7,\n    \"ts\": {ts}, \"dur\": {dur},\n    \"args\": {{\"External id\": {}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {c}, \"registers per thread\": 32, \"shared memory\": 0, \"blocks per SM\": 0.5, \"warps per SM\": 2.0, \"grid\": [64, 1, 1], \"block\": [128, 1, 1], \"est. achieved occupancy %\": 6}}\n  }}",
                KERNEL_NAMES[(c % 8) as usize],
                c + 1
            )?;
            t.kernels += 1;
            t.kernel_ns += dur * 1000;
        }
    }
    write!(
        w,
        "\n  ],\n  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": 0, \"world_size\": 1}},\n  \"traceName\": \"generated\",\n  \"displayTimeUnit\": \"ms\"\n}}\n"
    )?;
    w.inner.flush()?;
    t.bytes = w.bytes;
    Ok(t)
}

struct Counting {
    inner: BufWriter<std::fs::File>,
    bytes: u64,
}

impl Write for Counting {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(b)?;
        self.bytes += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}
