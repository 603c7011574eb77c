//! Folded stacks / flame graph: NVTX stacks -> kernel, weights sum to the GPU time.
mod export_support;

use export_support::*;
use tprof_decoder::export::select::Selection;
use tprof_decoder::export::ExportFormat;

fn folded(path: &std::path::Path) -> Vec<(String, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').unwrap();
            (s.to_string(), n.parse().unwrap())
        })
        .collect()
}

#[test]
fn synthetic_stacks_weighted_by_gpu_time() {
    let d = tempfile::tempdir().unwrap();
    let (_, files) = synth_job(d.path());
    let t = truth(&files);
    let out = d.path().join("gpu.folded");
    run_export(&files, ExportFormat::Folded, &out, Selection::default());
    let lines = folded(&out);
    let gemm = t.kernels().filter(|k| k.name.contains("gemm")).map(|k| k.end - k.start).sum::<u64>();
    assert!(lines.contains(&("step;gemm(float*, float*, float*, int)".to_string(), gemm)), "{lines:?}");
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), t.kernel_total_ns());
    let svg = d.path().join("gpu.svg");
    run_export(&files, ExportFormat::Flamegraph, &svg, Selection::default());
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.starts_with("<?xml") && text.contains("gemm(float*, float*, float*, int)"));
}

#[test]
fn real_kineto_trace_stacks_cover_all_gpu_time() {
    let path = kineto_dir().join("nccl_parser_config_nccl_data.json.gz");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("k.folded");
    run_export(std::slice::from_ref(&path), ExportFormat::Folded, &out, Selection::default());
    let t = truth(&[path]);
    let lines = folded(&out);
    let total: u64 = t.gpu.iter().map(|g| g.end - g.start).sum();
    assert_eq!(lines.iter().map(|l| l.1).sum::<u64>(), total);
    assert!(lines.iter().all(|(s, _)| !s.contains('\n')));
    assert!(lines.iter().any(|(s, _)| s.starts_with("ProfilerStep#") && s.contains("ncclKernel_Broadcast")));
    assert!(lines.iter().any(|(s, _)| s.contains("c10d::allreduce_;ncclKernel_AllReduce")));
}
