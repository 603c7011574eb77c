//! The shim's CUDA runtime / driver interposition under the simulated GPU stack and against NVIDIA's
//! real runtime (no driver). Needs: `cargo build --release -p tprof-shim`, `make -C tests/simgpu`,
//! `make -C tests/programs`, `cc`, and the pip wheels (`bash scripts/setup-python.sh`).

use std::collections::HashSet;
use std::path::Path;

use serde_json::Value;
use tprof_e2e::shim::*;
use tprof_format::{ApiDomain, MemOp, MemSpace, Record, SyncKind};

/// Every kernel, copy and memset of the ground truth has the `Api` record that launched it.
fn assert_truth_covered(what: &str, rings: &[Ring], truth: &[Value]) {
    assert!(!rings.is_empty(), "{what}: no ring file written");
    let mut used: HashSet<(usize, usize)> = HashSet::new();
    let api_corr: HashSet<u32> = rings.iter().flat_map(|r| r.apis().into_iter().map(|a| a.2)).collect();
    let mut kernels = 0;
    for t in truth.iter().filter(|t| t["type"] == "kernel") {
        let name = t["name"].as_str().unwrap_or_default();
        if name.starts_with("nccl") {
            continue; // launched inside the (simulated) NCCL, not through an interposed call
        }
        let grid: Vec<u32> = t["grid"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let block: Vec<u32> = t["block"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap() as u32).collect();
        let found = rings.iter().enumerate().find_map(|(ri, ring)| {
            ring.records.iter().enumerate().find_map(|(i, r)| match r {
                Record::Kernel { name: n, grid: g, block: b, correlation, .. }
                    if ring.name(*n) == name
                        && g.as_slice() == grid.as_slice()
                        && b.as_slice() == block.as_slice()
                        && !used.contains(&(ri, i)) =>
                {
                    Some((ri, i, *correlation))
                }
                _ => None,
            })
        });
        let (ri, i, corr) =
            found.unwrap_or_else(|| panic!("{what}: truth kernel {name} {grid:?}x{block:?} not in the ring"));
        used.insert((ri, i));
        assert!(
            api_corr.contains(&corr),
            "{what}: kernel {name} (correlation {corr:#x}) has no Api record that launched it"
        );
        kernels += 1;
    }
    for (kind, api_word) in [("memcpy", "Memcpy"), ("memset", "Memset")] {
        let mut apis: Vec<u64> =
            rings.iter().flat_map(|r| r.apis()).filter(|a| a.0.contains(api_word) && a.3 == 0).map(|a| a.4).collect();
        for t in truth.iter().filter(|t| t["type"] == kind) {
            let bytes = t["bytes"].as_u64().unwrap();
            let pos = apis
                .iter()
                .position(|&b| b == bytes)
                .unwrap_or_else(|| panic!("{what}: truth {kind} of {bytes} bytes has no launching Api record"));
            apis.swap_remove(pos);
        }
    }
    assert!(kernels > 0 || truth.iter().all(|t| t["type"] != "kernel"), "{what}: no kernel checked");
}

fn sim_run(program: &Path, args: &[&str], tag: &str) -> RunResult {
    let r = RunSpec::new(program, args, simgpu_dir()).run(tag);
    assert_eq!(r.code(), Some(0), "{tag}: exit code; stderr:\n{}", r.stderr());
    r
}

#[test]
fn every_truth_kernel_copy_and_memset_has_its_api_record() {
    let dir = temp_dir("bin");
    let cuda_paths = compile("cuda_paths", &dir, Link::SimCudart);
    let r = sim_run(&cuda_paths, &["basic"], "basic");
    assert_truth_covered("cuda_paths basic", &read_rings(&r.out_dir), &read_truth(&r.truth_dir));
    for prog in ["cu13_vector_add", "cu13_templated", "cu13_streams", "rt12_memory"] {
        let p = require(&programs_dir().join(prog), &format!("tests/programs/build/{prog} (make -C tests/programs)"));
        let r = sim_run(&p, &[], prog);
        let rings = read_rings(&r.out_dir);
        assert_truth_covered(prog, &rings, &read_truth(&r.truth_dir));
    }
}

#[test]
fn launches_are_named_from_registration() {
    let dir = temp_dir("bin");
    let cuda_paths = compile("cuda_paths", &dir, Link::SimCudart);
    let r = sim_run(&cuda_paths, &["basic"], "names");
    let rings = read_rings(&r.out_dir);
    let apis = rings[0].apis();
    let launched: Vec<(&str, &str)> =
        apis.iter().filter(|a| a.0.starts_with("cudaLaunch")).map(|a| (a.0.as_str(), a.1.as_str())).collect();
    assert_eq!(
        launched,
        vec![
            ("cudaLaunchKernel", "_Z8kernel_aPfi"),
            ("cudaLaunchKernelExC", "_ZN5tprof8kernel_bIiEEvPT_i"),
            ("cudaLaunchKernel", "_Z8kernel_cv")
        ]
    );
    let syncs = rings[0].records.iter().filter(|r| matches!(r, Record::Sync { .. })).count();
    assert_eq!(syncs, 4, "stream wait, event, stream and device synchronize each give a Sync record");
}

#[test]
fn ptsz_paths_are_recorded() {
    let dir = temp_dir("bin");
    let cuda_paths = compile("cuda_paths", &dir, Link::SimCudart);
    let r = sim_run(&cuda_paths, &["ptsz"], "ptsz");
    let rings = read_rings(&r.out_dir);
    assert_truth_covered("ptsz", &rings, &read_truth(&r.truth_dir));
    let names: HashSet<String> = rings[0].apis().into_iter().map(|a| a.0).collect();
    for n in [
        "cudaMemcpy_ptds",
        "cudaMemsetAsync_ptsz",
        "cudaLaunchKernel_ptsz",
        "cudaMemcpyAsync_ptsz",
        "cudaStreamSynchronize_ptsz",
    ] {
        assert!(names.contains(n), "{n} not recorded: {names:?}");
    }
}

#[test]
fn oom_records_requested_size_and_reservation() {
    let dir = temp_dir("bin");
    let cuda_paths = compile("cuda_paths", &dir, Link::SimCudart);
    let r = sim_run(&cuda_paths, &["oom"], "oom");
    let rings = read_rings(&r.out_dir);
    let failed: Vec<(u32, u64, u64, i32)> = rings[0]
        .records
        .iter()
        .filter_map(|r| match *r {
            Record::Memory { op: MemOp::AllocFailed, device, bytes, reserved, result, .. } => {
                Some((device, bytes, reserved, result))
            }
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "one failed allocation: {failed:?}");
    let (device, bytes, reserved, result) = failed[0];
    assert_eq!(device, 1);
    assert_eq!(bytes, 1 << 50, "requested size");
    assert_eq!(reserved, 1 << 30, "reservation at the failure");
    assert_ne!(result, 0);
}

/// A driver-only program (JAX / Triton start-up through cuGetProcAddress): every call it makes is an
/// `Api` record of the driver domain, in the order made, from `cuInit` on; none is left to CUPTI.
#[test]
fn driver_only_module_loader_start_up_is_recorded_in_order() {
    let dir = temp_dir("bin");
    let prog = compile("drv_module_loader", &dir, Link::SimDriver);
    let r = sim_run(&prog, &[], "modloader");
    assert!(r.stdout().contains("drv_module_loader: ok"), "{}{}", r.stdout(), r.stderr());
    let rings = read_rings(&r.out_dir);
    assert_truth_covered("drv_module_loader", &rings, &read_truth(&r.truth_dir));
    let mut calls: Vec<(u64, ApiDomain, String, u64)> = rings[0]
        .records
        .iter()
        .filter_map(|rec| match *rec {
            Record::Api { domain, name, start, arg, .. } => Some((start, domain, rings[0].name(name).to_string(), arg)),
            _ => None,
        })
        .collect();
    calls.sort_by_key(|c| c.0);
    let names: Vec<&str> = calls.iter().map(|c| c.2.as_str()).collect();
    let mut expected = vec!["cuInit"];
    expected.extend(std::iter::repeat_n("cuGetProcAddress_v2", 11));
    expected.extend([
        "cuDeviceGet",
        "cuDevicePrimaryCtxRetain",
        "cuCtxSetCurrent",
        "cuModuleLoadData",
        "cuModuleGetFunction",
        "cuStreamCreate",
        "cuMemAlloc_v2",
        "cuLaunchKernel",
        "cuStreamQuery",
        "cuStreamSynchronize",
        "cuModuleUnload",
    ]);
    assert_eq!(names, expected, "driver calls in the order made");
    assert!(calls.iter().all(|c| c.1 == ApiDomain::Driver), "recorded by the interposers, not CUPTI: {calls:?}");
    assert!(
        calls.iter().filter(|c| c.2 == "cuGetProcAddress_v2").all(|c| c.3 == 12000),
        "cuGetProcAddress records carry the version asked for"
    );
}

#[test]
fn cu_get_proc_address_launches_are_recorded() {
    let dir = temp_dir("bin");
    let prog = compile("drv_procaddr", &dir, Link::SimDriver);
    let r = sim_run(&prog, &[], "procaddr");
    let rings = read_rings(&r.out_dir);
    assert_truth_covered("drv_procaddr", &rings, &read_truth(&r.truth_dir));
    let apis = rings[0].apis();
    let launches: Vec<(&str, &str)> =
        apis.iter().filter(|a| a.0.starts_with("cuLaunch")).map(|a| (a.0.as_str(), a.1.as_str())).collect();
    assert_eq!(launches, vec![("cuLaunchKernel", "_Z10drv_kernelPi"), ("cuLaunchKernel_ptsz", "_Z10drv_kernelPi")]);
    for n in ["cuMemAlloc_v2", "cuMemcpyHtoD_v2", "cuCtxSynchronize"] {
        assert!(apis.iter().any(|a| a.0 == n), "{n} resolved through cuGetProcAddress not recorded");
    }
}

/// CUDA 13's two ABIs of `cuCtxSynchronize`, resolved by version through `cuGetProcAddress` and the
/// runtime's entry-point calls: each caller gets the wrapper of the ABI it asked for, the CUcontext
/// one forwards its context (a bogus one fails with 201 in the driver, recorded as such).
#[test]
fn each_abi_of_a_driver_function_gets_its_own_wrapper() {
    let dir = temp_dir("bin");
    let prog = compile("drv_abi_versions", &dir, Link::SimDriver);
    let r = sim_run(&prog, &[], "abi-versions");
    assert!(r.stdout().ends_with("drv_abi_versions: ok\n"), "stdout:\n{}", r.stdout());
    let rings = read_rings(&r.out_dir);
    let syncs: Vec<(String, i32)> =
        rings[0].apis().into_iter().filter(|a| a.0.starts_with("cuCtxSynchronize")).map(|a| (a.0, a.3)).collect();
    let old = || ("cuCtxSynchronize".to_string(), 0);
    let ctx_calls = || [0, 201, 0].map(|res| ("cuCtxSynchronize_v2".to_string(), res));
    let mut expected = vec![old()];
    expected.extend(ctx_calls()); // cuGetProcAddress 13000
    expected.extend(ctx_calls()); // cudaGetDriverEntryPointByVersion 13000
    expected.push(old()); // cudaGetDriverEntryPointByVersion 12000
    expected.extend(ctx_calls()); // cudaGetDriverEntryPoint of libcudart 13
    assert_eq!(syncs, expected, "driver calls recorded (name, result)");
    let sync_records = rings[0]
        .records
        .iter()
        .filter(|r| matches!(r, Record::Sync { kind: SyncKind::ContextSynchronize, .. }))
        .count();
    assert_eq!(sync_records, expected.len(), "one Sync record per context synchronisation");
    let _ = std::fs::remove_dir_all(r.out_dir.parent().unwrap());
}

/// PyTorch's expandable segments (and the NVIDIA-sample and NCCL ways of freeing) on the driver's
/// VMM calls resolved through cudaGetDriverEntryPointByVersion: the Memory records, and the memory
/// timeline the decoder exports from them, follow the physical memory in use (peak 12 MiB, back to
/// 0), not the 128 MiB of reserved address space.
#[test]
fn driver_vmm_memory_timeline_is_the_physical_memory_in_use() {
    const SEG: u64 = 2 << 20;
    let dir = temp_dir("bin");
    let prog = compile("drv_vmm_segments", &dir, Link::None);
    let r = sim_run(&prog, &[], "vmm-segments");
    assert_eq!(r.stdout(), format!("drv_vmm_segments: ok peak={}\n", 6 * SEG));
    let rings = read_rings(&r.out_dir);
    assert_eq!(rings.len(), 1);
    let mems: Vec<(MemOp, MemSpace, u32, u64, u64)> = rings[0]
        .records
        .iter()
        .filter_map(|r| match *r {
            Record::Memory { op, space, device, bytes, reserved, .. } => Some((op, space, device, bytes, reserved)),
            _ => None,
        })
        .collect();
    // Segments in use after each change (see drv_vmm_segments.c).
    let in_use = [1, 2, 3, 4, 3, 2, 1, 2, 3, 4, 5, 6, 5, 4, 3, 2, 1, 0];
    let mut expected = Vec::new();
    let mut prev = 0;
    for n in in_use {
        let op = if n > prev { MemOp::Alloc } else { MemOp::Free };
        expected.push((op, MemSpace::Device, 0, SEG, n * SEG));
        prev = n;
    }
    assert_eq!(mems, expected, "Memory records (op, space, device, bytes, reserved)");
    // Each free names the allocation (its handle) an earlier alloc record named; none twice.
    let mut live: HashSet<u64> = HashSet::new();
    for r in &rings[0].records {
        if let Record::Memory { op, address, .. } = *r {
            match op {
                MemOp::Alloc => assert!(live.insert(address), "handle {address:#x} allocated twice"),
                _ => assert!(live.remove(&address), "free of {address:#x}, not a live allocation"),
            }
        }
    }
    assert!(live.is_empty(), "never freed: {live:x?}");
    let apis = rings[0].apis();
    let count = |n: &str| apis.iter().filter(|a| a.0 == n && a.3 == 0).count();
    for (name, n) in [
        ("cuMemAddressReserve", 1),
        ("cuMemCreate", 9),
        ("cuMemMap", 9),
        ("cuMemSetAccess", 3),
        ("cuMemRetainAllocationHandle", 1),
        ("cuMemUnmap", 5),
        ("cuMemRelease", 10),
        ("cuMemAddressFree", 1),
    ] {
        assert_eq!(count(name), n, "{name} calls recorded");
    }
    let reserve = apis.iter().find(|a| a.0 == "cuMemAddressReserve").unwrap();
    assert_eq!(reserve.4, 64 * SEG, "the reservation's size is the call's argument");

    // The decoder's memory timeline (Chrome export counter track) is the same sequence.
    let chrome = r.out_dir.parent().unwrap().join("trace.json");
    let o = std::process::Command::new(tprof_e2e::export::tprof_bin())
        .args(["export", "-f", "chrome", "-o"])
        .arg(&chrome)
        .arg(&r.out_dir)
        .output()
        .unwrap();
    assert!(o.status.success(), "tprof export: {}", String::from_utf8_lossy(&o.stderr));
    let trace: Value = serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    let events = trace["traceEvents"].as_array().or(trace.as_array()).expect("Chrome trace events");
    let timeline: Vec<u64> = events
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "GPU 0 memory reserved (bytes)")
        .map(|e| e["args"]["value"].as_f64().unwrap() as u64)
        .collect();
    let want: Vec<u64> = in_use.iter().map(|n| n * SEG).collect();
    assert_eq!(timeline, want, "exported memory timeline");
    assert_eq!(timeline.iter().max(), Some(&(6 * SEG)), "memory peak = physical peak");
    let _ = std::fs::remove_dir_all(r.out_dir.parent().unwrap());
}

#[test]
fn late_dlopen_of_libcudart_is_covered() {
    let dir = temp_dir("bin");
    let prog = compile("late_dlopen", &dir, Link::None);
    let r = sim_run(&prog, &[], "late");
    assert_eq!(r.stdout(), "late_dlopen: ok\n");
    let rings = read_rings(&r.out_dir);
    assert_truth_covered("late_dlopen", &rings, &read_truth(&r.truth_dir));
    assert!(rings[0].apis().iter().any(|a| a.0 == "cudaLaunchKernel" && a.1 == "_Z11late_kernelPf"));
}

#[test]
fn injection_with_preload_does_not_double_count() {
    let dir = temp_dir("bin");
    let prog = compile("cuda_paths", &dir, Link::SimCudart);
    let mut spec = RunSpec::new(&prog, &["basic"], simgpu_dir());
    spec.inject = true;
    let r = spec.run("inject-preload");
    assert_eq!(r.code(), Some(0), "stderr:\n{}", r.stderr());
    let rings = read_rings(&r.out_dir);
    assert_eq!(rings.len(), 1, "one ring per process");
    let truth = read_truth(&r.truth_dir);
    assert_truth_covered("inject+preload", &rings, &truth);
    let launches = rings[0].apis().iter().filter(|a| a.0.starts_with("cudaLaunch")).count();
    let truth_kernels = truth.iter().filter(|t| t["type"] == "kernel").count();
    assert_eq!(launches, truth_kernels, "each launch recorded once");
}

#[test]
fn injection_alone_records_through_cupti() {
    let dir = temp_dir("bin");
    let prog = compile("cuda_paths", &dir, Link::SimCudart);
    let mut spec = RunSpec::new(&prog, &["basic"], simgpu_dir());
    spec.preload = false;
    spec.inject = true;
    let r = spec.run("inject-alone");
    assert_eq!(r.code(), Some(0), "stderr:\n{}", r.stderr());
    assert_eq!(r.stdout(), "cuda_paths basic: ok\n");
    let rings = read_rings(&r.out_dir);
    assert_eq!(rings.len(), 1, "InitializeInjection alone must create the ring");
    let truth = read_truth(&r.truth_dir);
    let kernels = rings[0].records.iter().filter(|r| matches!(r, Record::Kernel { start, .. } if *start != 0)).count();
    assert_eq!(
        kernels,
        truth.iter().filter(|t| t["type"] == "kernel").count(),
        "injected without LD_PRELOAD, kernels come from CUPTI (prerequisite: the shim's CUPTI module and \
         the simulated libcupti)"
    );
}

#[test]
fn real_cudart_without_driver_behaves_identically_and_records_failures() {
    let dir = temp_dir("bin");
    let prog = compile("realrt", &dir, Link::RealCudart);
    let mut bare = RunSpec::new(&prog, &[], real_cudart_dir());
    bare.preload = false;
    let bare = bare.run("real-bare");
    let shim = RunSpec::new(&prog, &[], real_cudart_dir()).run("real-shim");
    assert_eq!(bare.stdout(), shim.stdout());
    assert_eq!(bare.code(), shim.code());
    assert_eq!(bare.code(), Some(3), "real libcudart without a driver: {}", bare.stdout());
    let stderr = shim.stderr();
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("tprof:")).collect();
    assert_eq!(lines.len(), 1, "one accurate line about the missing driver, got:\n{stderr}");
    assert!(lines[0].contains("no usable CUDA driver") && lines[0].contains("cudaMalloc returned 35"), "{stderr}");
    let rest: Vec<&str> = stderr.lines().filter(|l| !l.starts_with("tprof:") && !l.is_empty()).collect();
    let bare_err = bare.stderr();
    assert_eq!(rest, bare_err.lines().filter(|l| !l.is_empty()).collect::<Vec<_>>(), "stderr otherwise unchanged");
    let rings = read_rings(&shim.out_dir);
    let failed: Vec<String> = rings[0].apis().into_iter().filter(|a| a.3 == 35).map(|a| a.0).collect();
    for n in ["cudaMalloc", "cudaMemset", "cudaDeviceSynchronize", "cudaLaunchKernel"] {
        assert!(failed.iter().any(|f| f == n), "{n} failure (35) not recorded: {failed:?}");
    }
    assert!(rings[0]
        .records
        .iter()
        .any(|r| matches!(r, Record::Memory { op: MemOp::AllocFailed, bytes: 1048576, .. })));
}

fn warning_lines(stderr: &str) -> usize {
    stderr.lines().filter(|l| l.starts_with("tprof:")).count()
}

fn hostile(mode: &str, tag: &str, tweak: impl FnOnce(&mut RunSpec)) -> (RunResult, RunResult) {
    let dir = temp_dir("bin");
    let prog = compile("hostile", &dir, Link::SimCudart);
    let mut bare = RunSpec::new(&prog, &[], simgpu_dir());
    let args = [mode];
    bare.args = &args;
    bare.preload = false;
    let bare = bare.run(&format!("{tag}-bare"));
    let mut spec = RunSpec::new(&prog, &args, simgpu_dir());
    tweak(&mut spec);
    let shim = spec.run(tag);
    assert_eq!(bare.code(), Some(0), "baseline without the shim failed: {}", bare.stderr());
    assert_eq!(shim.stdout(), bare.stdout(), "{tag}: program output changed");
    assert_eq!(shim.code(), bare.code(), "{tag}: exit code changed; stderr:\n{}", shim.stderr());
    (bare, shim)
}

#[test]
fn unwritable_tprof_out_gives_one_warning() {
    let blocker = temp_dir("blocker").join("a-file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let out = blocker.join("out");
    let (_, shim) = hostile("plain", "unwritable", |s| {
        s.env.push(("TPROF_OUT".into(), out.display().to_string()));
    });
    assert_eq!(warning_lines(&shim.stderr()), 1, "exactly one tprof line:\n{}", shim.stderr());
}

#[test]
fn file_size_limit_gives_one_warning() {
    let (_, shim) = hostile("plain", "ulimit", |s| s.ulimit_f = Some(64));
    assert_eq!(warning_lines(&shim.stderr()), 1, "exactly one tprof line:\n{}", shim.stderr());
}

#[test]
fn cuda_from_a_signal_handler() {
    let (_, shim) = hostile("signal", "signal", |_| {});
    assert_eq!(warning_lines(&shim.stderr()), 0, "{}", shim.stderr());
    let rings = read_rings(&shim.out_dir);
    let launches = rings[0].apis().iter().filter(|a| a.0 == "cudaLaunchKernel").count();
    assert_eq!(launches, 3000, "every launch of the main loop recorded");
}

#[test]
fn cuda_from_a_thread_destructor() {
    let (_, shim) = hostile("dtor", "dtor", |_| {});
    assert_eq!(warning_lines(&shim.stderr()), 0, "{}", shim.stderr());
}

#[test]
fn missing_real_symbol_warns_once_and_returns_the_no_driver_error() {
    let dir = temp_dir("bin");
    let prog = compile("cuda_paths", &dir, Link::SimCudart);
    let r = sim_run(&prog, &["missing"], "missing");
    let stderr = r.stderr();
    assert_eq!(warning_lines(&stderr), 1, "one warning for two calls:\n{stderr}");
    assert!(stderr.contains("cudaMemset2D_ptds"), "{stderr}");
    assert!(stderr.contains("results 35 35"), "{stderr}");
}

/// Names of the calls CUPTI recorded (tprof injected, no interposer bound), sorted, with or
/// without CUPTI's own `cuptiGetCallbackName`.
fn cupti_api_names(callback_names: bool) -> Vec<String> {
    let dir = temp_dir("bin");
    let prog = compile("cupti_named_calls", &dir, Link::SimCudart);
    let mut spec = RunSpec::new(&prog, &[], simgpu_dir())
        .env("TPROF_RING_MB", "4")
        .env("SIMGPU_CUPTI_CALLBACK_NAMES", if callback_names { "1" } else { "0" });
    spec.preload = false;
    spec.inject = true;
    let r = spec.run("cupti-names");
    assert_eq!(r.code(), Some(0), "stderr:\n{}", r.stderr());
    assert_eq!(r.stdout(), "cupti_named_calls: ok\n");
    let rings = read_rings(&r.out_dir);
    assert_eq!(rings.len(), 1);
    let mut names: Vec<String> = rings[0]
        .records
        .iter()
        .filter_map(|rec| match *rec {
            Record::Api { domain: ApiDomain::CuptiRuntime | ApiDomain::CuptiDriver, name, .. } => {
                Some(rings[0].name(name).to_string())
            }
            _ => None,
        })
        .collect();
    names.sort();
    names.dedup();
    let _ = std::fs::remove_dir_all(r.out_dir.parent().unwrap());
    names
}

/// Calls only CUPTI sees are named as CUPTI names them (without the `_v<digits>` ABI suffix), also
/// when CUPTI's `cuptiGetCallbackName` fails (a CUPTI older than the runtime): the callback id tables
/// generated from NVIDIA's headers name every id.
#[test]
fn calls_only_cupti_sees_are_named_with_or_without_cupti_callback_names() {
    let from_table = cupti_api_names(false);
    for name in [
        "cudaGraphInstantiate",
        "cudaGraphExecDestroy",
        "cudaGraphDestroy",
        "cudaGraphGetNodes",
        "cudaDeviceGetAttribute",
        "cudaMemGetInfo",
        "cudaGetLastError",
        "cudaStreamDestroy",
        "cuModuleLoadData",
        "cuModuleUnload",
    ] {
        assert!(from_table.iter().any(|n| n == name), "{name} not named: {from_table:?}");
    }
    assert!(!from_table.iter().any(|n| n.contains("_cbid_")), "unnamed callback ids: {from_table:?}");
    assert_eq!(cupti_api_names(true), from_table, "CUPTI's names and the table's agree");
}
