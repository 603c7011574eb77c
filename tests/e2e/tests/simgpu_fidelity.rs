//! The simulated GPU stack against itself: its selftests (C programs compiled against NVIDIA's
//! real CUDA 12.9 / CUPTI 12.9 headers, and one nvcc-built CUDA 13 program) run on the mocks and
//! their figures are checked here numerically.

use tprof_e2e::simgpu::{run_selftest, SelftestRun};

fn ok(name: &str, env: &[(&str, &str)]) -> SelftestRun {
    let r = run_selftest(name, env);
    assert!(r.success, "selftest {name} failed\nstdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    assert_eq!(r.num("failures"), 0, "{name}: {}", r.stdout);
    r
}

#[test]
fn cupti_records_match_ground_truth_exactly() {
    let r = ok("fidelity", &[]);
    assert_eq!(r.num("truth_kernels"), 480);
    assert_eq!(r.num("cupti_kernels"), 480);
    assert_eq!(r.num("exact"), 480, "every kernel with identical start/end");
    assert_eq!(r.figures["copies"], "18/18");
    assert_eq!(r.num("api"), 480);
    assert_eq!(r.num("ext"), 480);
    assert_eq!(r.num("memory"), 4);
    assert_eq!(r.num("dropped"), 0);
    assert!(r.num("buffers") > 3);
    let kernels: Vec<_> = r.truth.iter().filter(|v| v["type"] == "kernel").collect();
    assert_eq!(kernels.len(), 480);
    for k in &kernels {
        let (s, e) = (k["start_ns"].as_u64().unwrap(), k["end_ns"].as_u64().unwrap());
        assert!(e > s && k["correlation"].as_u64().unwrap() > 0);
        assert!([7, 13, 14, 15].contains(&k["stream"].as_u64().unwrap()), "stream ids as CUPTI reports: {k}");
    }
    assert_eq!(r.truth.iter().filter(|v| v["type"] == "process").count(), 1);
}

#[test]
fn duration_model_and_default_stream() {
    let r = ok("basics", &[]);
    assert_eq!(r.num("kernels"), 16);
    // model: an sgemm of 128 x 256 threads takes 1500 + 32768 * 2 = 67036 ns
    let gemm =
        r.truth.iter().find(|v| v["type"] == "kernel" && v["grid"][0] == 128).expect("a 128-block gemm in the truth");
    assert_eq!(gemm["end_ns"].as_u64().unwrap() - gemm["start_ns"].as_u64().unwrap(), 67036);
}

#[test]
fn callbacks_one_subscriber_and_correlation() {
    let r = ok("callbacks", &[]);
    assert_eq!(r.num("second_subscriber"), 39);
    assert_eq!(r.num("symbol"), 20);
    assert_eq!(r.num("matched_kernels"), 20);
    assert_eq!(r.num("enter"), r.num("exit"));
}

#[test]
fn timestamp_callback_timebase() {
    let r = ok("tsclock", &[]);
    assert_eq!(r.num("kernels"), 30);
    assert!(r.num("max_error_ticks") < 3000, "{}", r.stdout);
}

#[test]
fn out_of_memory() {
    let r = ok("oom", &[("SIMGPU_MEM_GB", "4")]);
    assert_eq!(r.num("capacity"), 4 << 30);
}

#[test]
fn graphs_carry_graph_ids() {
    let r = ok("graph", &[]);
    assert_eq!(r.num("launches"), 3);
    assert_eq!(r.num("kernels"), 12);
    assert_eq!(r.num("with_graph_id"), 12);
    assert_eq!(r.num("memsets"), 3);
}

#[test]
fn pageable_and_pinned_copies() {
    let r = ok("pinned", &[]);
    assert_eq!(r.num("pinned_ns"), 1500 + (8 << 20) / 25);
    assert_eq!(r.num("pageable_ns"), 1500 + (8 << 20) / 10);
    assert_eq!(r.num("registered_ns"), 1500 + (8 << 20) / 25);
    assert!(r.num("pageable_return_ns") >= r.num("pageable_ns"), "pageable async copy blocks the host");
    let pinned: Vec<_> = r.truth.iter().filter(|v| v["type"] == "memcpy").map(|v| v["host_pinned"].clone()).collect();
    assert_eq!(pinned, vec![true, false, true]);
}

#[test]
fn driver_api() {
    let r = ok("driver", &[]);
    assert_eq!(r.num("kernels"), 3);
    assert_eq!(r.num("launch_records"), 3);
    assert_eq!(r.num("context_id"), 3);
}

/// Entry points by version (cuCtxSynchronize's two ABIs) and the VMM calls' rules and errors.
#[test]
fn driver_vmm_and_versioned_entry_points() {
    let r = ok("vmm", &[]);
    assert_eq!(r.num("granularity_mib"), 2);
    assert_eq!(r.num("failures"), 0);
}

#[test]
fn deferred_kernels_hang_until_resolved() {
    let r = ok("hang", &[]);
    assert_eq!(r.num("collectives"), 2);
    assert_eq!(r.num("unfinished_in_child"), 1);
}

#[test]
fn nvcc_built_program_runs_with_real_mangled_names() {
    let r = run_selftest("nvcc_kernels", &[]);
    assert!(
        r.success,
        "nvcc_kernels failed (built by `make -C tests/simgpu check` with the CUDA 13 nvcc wheel)\n{}\n{}",
        r.stdout, r.stderr
    );
    let names: Vec<&str> =
        r.truth.iter().filter(|v| v["type"] == "kernel").filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(names.iter().filter(|n| **n == "_Z17scale_elementwisePffi").count(), 10, "{names:?}");
    assert_eq!(names.iter().filter(|n| **n == "_Z10tiled_gemmIfEvPKT_S2_PS0_i").count(), 10, "{names:?}");
}

#[test]
fn drop_every_counts_dropped_records() {
    // every 10th record is dropped: the fidelity selftest then fails its exactness checks, but its
    // figures still show the dropped count and the kernels that did arrive
    let r = run_selftest("fidelity", &[("SIMGPU_CUPTI_DROP_EVERY", "10")]);
    assert!(!r.success);
    let dropped = r.num("dropped");
    assert!(dropped > 0, "{}", r.stdout);
    assert!(r.num("cupti_kernels") < 480 && r.num("cupti_kernels") >= 480 - dropped, "{}", r.stdout);
    assert_eq!(r.num("truth_kernels"), 480);
}

#[test]
fn injection_path_is_loaded_at_first_cuinit_and_func_by_symbol_launches() {
    let r = ok("inject", &[]);
    assert_eq!(r.num("injection_calls"), 1, "InitializeInjection exactly once: {}", r.stdout);
    assert_eq!(r.num("devices_from_injection"), 8, "runtime callable from InitializeInjection");
    assert_eq!(r.num("bad_missing"), 0, "a missing CUDA_INJECTION64_PATH file is ignored");
    assert_eq!(r.num("bad_nosym"), 0, "a library without InitializeInjection is ignored");
    assert_eq!(r.num("func_by_symbol_kernels"), 1, "cuLaunchKernel(cudaGetFuncBySymbol(stub))");
    assert_eq!(r.num("rt_handle_kernels"), 1, "cudaLaunchKernel(cudaFunction_t)");
    let names: Vec<&str> =
        r.truth.iter().filter(|v| v["type"] == "kernel").filter_map(|v| v["name"].as_str()).collect();
    assert!(names.contains(&"_Z13func_by_symbolPfi") && names.contains(&"_Z12rt_via_handlePf"), "{names:?}");
}

#[test]
fn cuda_calls_from_a_signal_handler_neither_deadlock_nor_lose_records() {
    let r = ok("signals", &[]);
    assert!(r.num("handler_calls") >= 200, "{}", r.stdout);
    assert_eq!(r.num("setdevice_records") + r.num("dropped"), r.num("handler_calls"), "{}", r.stdout);
}

/// A process that ends with `_exit` right after synchronising keeps every op and line in its truth.
#[test]
fn ground_truth_survives_exit_without_handlers() {
    let r = ok("exit_truth", &[]);
    for (key, n) in [("complete_sync", 8), ("complete_sync_copy", 8), ("complete_sleep", 8)] {
        assert_eq!(r.num(key), n, "{key}: {}", r.stdout);
    }
    let markers = r.truth.iter().filter(|v| v["type"] == "exit_marker").count();
    assert_eq!(markers, 24, "the line written right before _exit, in every child");
}

/// Graphs built node by node, cloned, updated: truth and CUPTI agree on every graph kernel's ids.
#[test]
fn explicit_graph_api_matches_ground_truth() {
    let r = ok("graph_api", &[]);
    assert_eq!(r.num("kernels"), 16);
    assert_eq!(r.num("truth_agree"), 16);
    assert_eq!(r.num("host_calls"), 8);
    assert_eq!(r.figures["mem_records"], "6/6");
    let graph_kernels = r.truth.iter().filter(|v| v["type"] == "kernel" && v["graph_id"].as_u64().unwrap_or(0) > 0);
    assert_eq!(graph_kernels.count(), 16, "every kernel of the graph launches carries its graph id");
}

/// Memory pools: every pool allocation and free is a `mempool` truth line and a CUPTI record.
#[test]
fn memory_pools_match_ground_truth() {
    let r = ok("mempool", &[]);
    assert_eq!(r.num("truth_allocs"), 10);
    assert_eq!(r.num("truth_frees"), 10);
    assert_eq!(r.num("cupti_pool_records"), 20);
    let releases = r.truth.iter().filter(|v| v["type"] == "mempool" && v["op"] == "release").count();
    assert!(releases > 0, "releases are in the truth");
}

#[test]
fn module_variables_and_symbol_copies() {
    let r = ok("symbols", &[]);
    assert_eq!(r.num("truth_copies"), 10);
    assert_eq!(r.num("correlated"), 8);
}

#[test]
fn peer_access_and_mapped_host_memory() {
    let r = ok("access", &[]);
    assert_eq!(r.num("ptop_truth"), 3);
    assert_eq!(r.num("ptop_cupti"), 3);
}

#[test]
fn profiler_start_stop() {
    let r = ok("profiler", &[]);
    assert_eq!(r.num("lines"), 6);
    assert_eq!(r.num("matched"), 6);
    assert_eq!(r.num("kernels"), 3);
}

#[test]
fn driver_context_module_function_and_pointer_calls() {
    let r = ok("driver_apis", &[]);
    assert_eq!(r.num("module_kernels"), 1);
}
