//! Kineto export: one file per rank with Kineto's keys, every GPU activity once, ac2g flows, NCCL
//! metadata; the files import back into tprof with the same kernel totals.
mod export_support;

use std::collections::HashSet;

use export_support::*;
use tprof_decoder::export::select::Selection;
use tprof_decoder::export::ExportFormat;

#[test]
fn one_file_per_rank_that_imports_back() {
    let d = tempfile::tempdir().unwrap();
    let (job, files) = synth_job(d.path());
    let t = truth(&files);
    let out = d.path().join("kineto");
    let report = run_export(&files, ExportFormat::Kineto, &out, Selection::default());
    assert_eq!(report.written.files.len(), 4);
    for r in 0..job.ranks {
        let path = out.join(format!("rank-{r}.json"));
        let (events, top) = json_events(&path);
        assert_eq!(top["distributedInfo"]["rank"], r);
        assert_eq!(top["distributedInfo"]["world_size"], job.ranks);
        assert_eq!(top["schemaVersion"], 1);
        assert!(top["deviceProperties"].as_array().is_some_and(|d| !d.is_empty()));
        let base = top["baseTimeNanoseconds"].as_i64().unwrap();
        let mut got: Vec<(i64, i64)> = events
            .iter()
            .filter(|e| e["cat"] == "kernel")
            .map(|e| {
                assert!(
                    e["args"]["stream"].is_u64() && e["args"]["correlation"].is_u64() && e["args"]["grid"].is_array()
                );
                let s = base + us_ns(&e["ts"]);
                (s, s + us_ns(&e["dur"]))
            })
            .collect();
        got.sort_unstable();
        assert_eq!(got, spans(&t, "kernel", |g| g.rank == Some(r)), "rank {r}");
        let nccl: Vec<_> =
            events.iter().filter(|e| e["cat"] == "kernel" && e["args"]["Collective name"] == "allreduce").collect();
        assert_eq!(nccl.len() as u32, job.steps);
        assert_eq!(nccl[0]["args"]["In msg nelems"], job.allreduce_bytes / 4);
        assert_eq!(nccl[0]["args"]["dtype"], "Float");
        assert_eq!(nccl[0]["args"]["Group size"], job.ranks);
        // ac2g: each flow start has a finish on a kernel.
        let s: HashSet<u64> =
            events.iter().filter(|e| e["ph"] == "s" && e["cat"] == "ac2g").map(|e| e["id"].as_u64().unwrap()).collect();
        let f: HashSet<u64> =
            events.iter().filter(|e| e["ph"] == "f" && e["cat"] == "ac2g").map(|e| e["id"].as_u64().unwrap()).collect();
        assert_eq!(s.intersection(&f).count() as u32, job.steps * (job.kernels_per_step + 1));
        let steps = events
            .iter()
            .filter(|e| e["cat"] == "user_annotation" && e["name"].as_str().unwrap().starts_with("ProfilerStep#"))
            .count();
        assert_eq!(steps as u32, job.steps);
    }
    // Import the export back: same kernels per rank.
    let back = truth(&report.written.files);
    assert_eq!(back.kernels().count(), t.kernels().count());
    assert_eq!(back.kernel_total_ns(), t.kernel_total_ns());
}

#[test]
fn real_kineto_trace_keeps_its_kernels_and_collectives() {
    let path = kineto_dir().join("nccl_parser_config_nccl_data.json.gz");
    let d = tempfile::tempdir().unwrap();
    let out = d.path().join("k.json");
    run_export(std::slice::from_ref(&path), ExportFormat::Kineto, &out, Selection::default());
    let t = truth(&[path]);
    let back = truth(&[out]);
    assert_eq!(back.kernels().count(), 2700);
    // Times on the trace's own timebase (~4.5e12 us) round-trip through doubles within 1 ns per end.
    let diff = back.kernel_total_ns() as i64 - t.kernel_total_ns() as i64;
    assert!(diff.abs() <= 2 * 2700, "{diff}");
    let colls = |t: &Truth| t.collectives.iter().map(|c| (c.op, c.bytes)).collect::<Vec<_>>();
    assert_eq!(colls(&back), colls(&t));
    assert_eq!(t.collectives.len(), 21);
}
