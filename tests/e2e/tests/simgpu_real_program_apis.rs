//! Programs that call what NVIDIA's samples and PyTorch's allocator call beyond launches and copies
//! (profiler ranges, peer access, mapped pinned memory, module variables and symbol copies, graphs
//! built node by node, memory pools, driver calls of JAX-style start-up) run on the simulated GPU,
//! unchanged under `LD_PRELOAD=libtprof.so`: same exit code and stdout as without it, and every
//! kernel, copy and memset of the ground truth has its record in the ring (same correlation, name or
//! bytes, graph id, times).
//!
//! Needs: `cargo build --release -p tprof-shim`, `make -C tests/simgpu`, `make -C tests/programs`
//! (`rt12_real_apis`; `cu13_module_vars` needs the CUDA 13 nvcc wheel).

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use tprof_e2e::gpu_trace::{gpu_ops, load_rings, tprof_lib, GpuOp};
use tprof_e2e::programs::{exclusive, require_mock_libs, require_program, run, sim_command, RunOutput, TempDir, Truth};
use tprof_format::Record;

/// Kernels `rt12_real_apis` executes (tests/programs/cuda/real_apis.c).
const REAL_APIS_KERNELS: &[(&str, usize)] = &[
    ("_Z9p2p_scalePfi", 1),
    ("_Z13zero_copy_addPfi", 1),
    ("_Z9lut_applyPfi", 1),
    ("_Z12graph_reducePKfPfi", 6),
    ("_Z11graph_finalPfi", 6),
    ("_Z9pool_stepPfi", 10),
    ("jit_saxpy", 1),
];

/// Kernels `cu13_module_vars` executes (tests/programs/cuda/module_vars.cu).
const MODULE_VARS_KERNELS: &[(&str, usize)] = &[("_Z11apply_tablePfi", 2), ("_Z10bump_countv", 1)];

/// Ring and truth times may differ by the clock conversion (ticks <-> ns), no more.
const TIME_TOLERANCE_NS: u64 = 20_000;

struct Runs {
    bare: RunOutput,
    traced: RunOutput,
    truth: Truth,
    ops: Vec<GpuOp>,
    /// Api records by name (interposed or from CUPTI's callbacks).
    api_names: BTreeMap<String, usize>,
    _dirs: Vec<TempDir>,
}

/// Runs `program` on the simulated stack twice: without the shim, then with it preloaded.
fn run_both(program: &str, tag: &str) -> Runs {
    require_mock_libs(&["libcudart.so.12", "libcudart.so.13", "libcuda.so.1", "libcupti.so.12"]);
    let exe = require_program(program);
    let bare_truth = TempDir::new(&format!("{tag}-bare-truth"));
    let truth_dir = TempDir::new(&format!("{tag}-truth"));
    let ring_dir = TempDir::new(&format!("{tag}-rings"));
    let _guard = exclusive();
    let bare = run(sim_command(&exe, &[], bare_truth.path()), Duration::from_secs(120));
    let mut cmd = sim_command(&exe, &[], truth_dir.path());
    cmd.env("LD_PRELOAD", tprof_lib()).env("TPROF_OUT", ring_dir.path()).env("TPROF_RING_MB", "4");
    let traced = run(cmd, Duration::from_secs(120));
    let truth = Truth::load(truth_dir.path());
    let rings = load_rings(ring_dir.path());
    assert_eq!(rings.len(), 1, "one ring: {}", traced.describe());
    let ops = gpu_ops(&rings[0]);
    let mut api_names = BTreeMap::new();
    for rec in &rings[0].records {
        if let Record::Api { name, .. } = *rec {
            *api_names.entry(rings[0].name(name)).or_default() += 1;
        }
    }
    Runs { bare, traced, truth, ops, api_names, _dirs: vec![bare_truth, truth_dir, ring_dir] }
}

/// The program's output does not change under the shim.
fn assert_unchanged(r: &Runs) {
    r.bare.assert_ok();
    r.traced.assert_ok();
    assert_eq!(r.bare.stdout, r.traced.stdout, "stdout changed under the shim:\n{}", r.traced.describe());
}

fn truth_kernels(t: &Truth) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for k in t.of_kind("kernel") {
        *m.entry(k.name().to_string()).or_default() += 1;
    }
    m
}

/// Every kernel, memcpy and memset of the truth has one ring record of the same kind, device,
/// stream and name (kernels) or bytes (copies), within the time tolerance (ring correlations are the
/// shim's ids of the interposed calls, not CUPTI's). Returns the matches per kind.
fn assert_every_op_recorded(r: &Runs) -> BTreeMap<&'static str, usize> {
    let mut used = vec![false; r.ops.len()];
    let mut matched: BTreeMap<&'static str, usize> = BTreeMap::new();
    for kind in ["kernel", "memcpy", "memset"] {
        for t in r.truth.of_kind(kind) {
            let found = r.ops.iter().enumerate().position(|(i, o)| {
                !used[i]
                    && o.kind == kind
                    && Some(i64::from(o.device)) == t.device
                    && Some(u64::from(o.stream)) == t.stream
                    && (kind != "kernel" || o.name == t.name())
                    && (kind == "kernel" || Some(o.bytes) == t.bytes)
                    && o.start.abs_diff(t.start()) <= TIME_TOLERANCE_NS
                    && o.end.abs_diff(t.end()) <= TIME_TOLERANCE_NS
            });
            let i = found.unwrap_or_else(|| panic!("truth {kind} without its ring record: {t:?}\nring: {:?}", r.ops));
            used[i] = true;
            *matched.entry(kind).or_default() += 1;
        }
    }
    matched
}

#[test]
fn real_apis_program_runs_unchanged_and_every_op_is_in_the_ring() {
    let r = run_both("rt12_real_apis", "real-apis");
    assert_unchanged(&r);
    let expected: BTreeMap<String, usize> = REAL_APIS_KERNELS.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    assert_eq!(truth_kernels(&r.truth), expected, "kernels that execute: {}", r.truth.summary());
    let matched = assert_every_op_recorded(&r);
    assert_eq!(matched["kernel"], 26);
    // copies: peer + its check, symbol in and out, 2 per graph launch + a check; memsets: 1 + 6 + 10
    assert_eq!((matched["memcpy"], matched["memset"]), (17, 17), "{matched:?}");
    // graph kernels: 6 launches of the node-built graph carry a graph id in the truth
    let graph_kernels = r.truth.of_kind("kernel").filter(|k| k.graph_id.unwrap_or(0) > 0).count();
    assert_eq!(graph_kernels, 12, "{}", r.truth.summary());
    // every pool allocation is freed in the program, the pool trimmed at the end
    let pool = |op: &str| r.truth.of_kind("mempool").filter(|m| m.op.as_deref() == Some(op)).count();
    assert_eq!((pool("alloc"), pool("free")), (20, 20), "{}", r.truth.summary());
    assert_eq!(r.truth.of_kind("profiler").count(), 2, "one profiler range");
    assert!(r.traced.stdout.contains("peer=1 "), "{}", r.traced.stdout);
    // every call is an Api record under its own name, whether the shim interposes it or not
    let calls: &[(&str, usize)] = &[
        ("cudaProfilerStart", 1),
        ("cudaProfilerStop", 1),
        ("cudaDeviceEnablePeerAccess", 2),
        ("cudaDeviceDisablePeerAccess", 2),
        ("cudaHostGetDevicePointer", 1),
        ("cudaMemcpyToSymbol", 1),
        ("cudaMemcpyFromSymbol", 1),
        ("cudaGraphCreate", 1),
        ("cudaGraphAddMemsetNode", 1),
        ("cudaGraphAddMemcpyNode", 1),
        ("cudaGraphAddKernelNode", 2),
        ("cudaGraphAddMemcpyNode1D", 1),
        ("cudaGraphAddHostNode", 1),
        ("cudaGraphUpload", 1),
        ("cudaGraphClone", 1),
        ("cudaGraphExecKernelNodeSetParams", 1),
        ("cudaGraphExecUpdate", 1),
        ("cudaGraphLaunch", 6),
        ("cudaDeviceGetDefaultMemPool", 1),
        ("cudaMemPoolSetAttribute", 1),
        ("cudaMemPoolTrimTo", 1),
        ("cudaMallocAsync", 20),
        ("cudaFreeAsync", 20),
        ("cuCtxCreate_v4", 1),
        ("cuModuleLoadDataEx", 1),
        ("cuFuncSetAttribute", 1),
        ("cuFuncGetAttribute", 1),
        ("cuPointerGetAttribute", 1),
    ];
    for (name, n) in calls {
        assert_eq!(r.api_names.get(*name).copied().unwrap_or(0), *n, "{name}: Api records {:?}", r.api_names);
    }
}

#[test]
fn nvcc_module_variables_program_runs_unchanged_and_every_copy_is_in_the_ring() {
    let r = run_both("cu13_module_vars", "module-vars");
    assert_unchanged(&r);
    let expected: BTreeMap<String, usize> = MODULE_VARS_KERNELS.iter().map(|(n, c)| (n.to_string(), *c)).collect();
    assert_eq!(truth_kernels(&r.truth), expected, "{}", r.truth.summary());
    let matched = assert_every_op_recorded(&r);
    assert_eq!(matched["kernel"], 3);
    // symbol copies: table and coeffs in, half the table by address (DtoD), both read back
    assert_eq!(matched["memcpy"], 5, "{}", r.truth.summary());
    let dtod: Vec<_> = r.truth.of_kind("memcpy").filter(|c| c.copy_kind.as_deref() == Some("DtoD")).collect();
    assert_eq!(dtod.len(), 1);
    assert_eq!(dtod[0].bytes, Some(128));
}

/// The truth of a run is what it is whether or not the shim watches: the same kernels and copies.
#[test]
fn the_shim_does_not_change_the_simulated_work() {
    let r = run_both("rt12_real_apis", "real-apis-work");
    let bare_dir = r._dirs[0].path();
    let bare = Truth::load(Path::new(bare_dir));
    assert_eq!(truth_kernels(&bare), truth_kernels(&r.truth));
    for kind in ["memcpy", "memset", "mempool", "profiler"] {
        assert_eq!(bare.of_kind(kind).count(), r.truth.of_kind(kind).count(), "{kind}");
    }
}
