//! NVTX start/end ranges (`nvtxRangeStartEx` / `nvtxRangeEnd`) that end on another thread: the
//! shim drains per-thread buffers, so the end can reach the ring before the start. The decoder must
//! pair them by range id whatever the ring order, keeping the starting thread and the true times.
mod export_support;

use std::path::{Path, PathBuf};

use export_support::*;
use regex_lite::Regex;
use tprof_decoder::export::select::Selection;
use tprof_decoder::export::ExportFormat;
use tprof_decoder::model::RangeKind;
use tprof_decoder::steps::DEFAULT_STEP_PATTERN;
use tprof_decoder::summary::summarize;
use tprof_format::{ApiDomain, ClockSource, FileHeader, Record, RingGeometry, RingWriter, StrId};

const T0: u64 = 1_700_000_000_000_000_000;
const MONO0: u64 = 5_000_000_000;
const MS: u64 = 1_000_000;
const S_XFER: StrId = StrId(1);
const S_LOAD: StrId = StrId(2);
const S_API: StrId = StrId(3);
const S_DOMAIN: StrId = StrId(4);

/// Thread 11 starts `xfer` at 1 ms (ends on thread 22 at 5 ms) and `load` at 2 ms (ends on thread
/// 22 at 9 ms). In the ring both ends come first; `load`'s end is in an earlier chunk than its start
/// (filler API calls of thread 33 fill the chunk in between). Times are ms after T0.
fn write_ring(dir: &Path) -> PathBuf {
    let header = FileHeader {
        pid: 4242,
        ppid: 1,
        hostname: "hostx".into(),
        cmdline: vec!["crossthread".into()],
        rank: Some(0),
        world_size: Some(1),
        start_wall_ns: T0,
        start_mono_ns: MONO0,
        start_ticks: MONO0,
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        mode: "full".into(),
        writer: "test".into(),
        ..FileHeader::default()
    };
    let path = dir.join("cross.tprof");
    let mut w = RingWriter::create(&path, header, RingGeometry::with_chunk_bytes(1 << 20, 4096)).unwrap();
    for (id, s) in [(S_XFER, "xfer"), (S_LOAD, "load"), (S_API, "cudaMemcpyAsync"), (S_DOMAIN, "io")] {
        w.define_string(id, s);
    }
    let t = |ms_x10: u64| MONO0 + ms_x10 * MS / 10;
    w.append(&Record::ClockSync { ticks: t(0), mono_ns: t(0), wall_ns: T0 });
    // Thread 22's buffer was drained first: both ends.
    w.append(&Record::NvtxEnd { tid: 22, id: 902, ts: t(90) });
    w.append(&Record::NvtxEnd { tid: 22, id: 901, ts: t(50) });
    // Thread 33's calls fill the rest of the chunk and part of the next.
    for i in 0..400u64 {
        let s = t(1) + i * 10_000;
        w.append(&Record::Api {
            tid: 33,
            domain: ApiDomain::Runtime,
            name: S_API,
            start: s,
            end: s + 5_000,
            result: 0,
            correlation: 0,
            detail: StrId::NONE,
            stream: 0,
            arg: 0,
        });
    }
    // Then thread 11's buffer: the starts.
    w.append(&Record::NvtxStart { tid: 11, domain: S_DOMAIN, name: S_XFER, id: 901, ts: t(10) });
    w.append(&Record::NvtxStart { tid: 11, domain: S_DOMAIN, name: S_LOAD, id: 902, ts: t(20) });
    // Something later than every range end, so a range closed "at the last event" would show.
    w.append(&Record::NvtxMark { tid: 33, domain: S_DOMAIN, name: S_API, ts: t(95) });
    w.append(&Record::ClockSync { ticks: t(100), mono_ns: t(100), wall_ns: T0 + 10 * MS });
    w.close(t(100)).unwrap();
    path
}

#[test]
fn range_ended_on_another_thread_before_its_start_in_the_ring() {
    let d = tempfile::tempdir().unwrap();
    let path = write_ring(d.path());
    let files = vec![path];

    // The filler spans chunks, so the end of `load` lies in an earlier chunk than its start.
    let reader = tprof_format::RingReader::open(&files[0]).unwrap();
    assert!(reader.chunks().len() >= 2, "the filler must span chunks");

    // Decoded ranges: starting thread, true start and end.
    let t = truth(&files);
    let mut ranges: Vec<(String, u32, u64, u64, RangeKind)> =
        t.ranges.iter().map(|r| (r.name.to_string(), r.tid, r.start - T0, r.end - T0, r.kind)).collect();
    ranges.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ranges,
        vec![
            ("load".to_string(), 11, 2 * MS, 9 * MS, RangeKind::NvtxStartEnd),
            ("xfer".to_string(), 11, MS, 5 * MS, RangeKind::NvtxStartEnd),
        ]
    );

    // Summary: one range of each name with its own duration, and no "no matching begin" note.
    let args: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
    let mut notes = tprof_decoder::input::Notes::default();
    let sources = tprof_decoder::input::discover(&args, &mut notes).unwrap();
    let pat = Regex::new(DEFAULT_STEP_PATTERN).unwrap();
    let (s, errors) = summarize(&sources, &pat, &convert_opts());
    assert!(errors.is_empty(), "{errors:?}");
    let row = |n: &str| s.nvtx.iter().find(|r| r.name == n).unwrap_or_else(|| panic!("{n} missing: {:?}", s.nvtx));
    assert_eq!((row("xfer").count, row("xfer").range_ns), (1, 4 * MS));
    assert_eq!((row("load").count, row("load").range_ns), (1, 7 * MS));
    let notes: Vec<String> = s.notes.iter().map(|n| n.to_string()).collect();
    assert!(!notes.iter().any(|n| n.contains("NVTX")), "{notes:?}");

    // Chrome export: an async b/e pair per range on the starting thread, 4 ms and 7 ms apart.
    let out = d.path().join("trace.json");
    run_export(&files, ExportFormat::Chrome, &out, Selection::default());
    let (events, _) = json_events(&out);
    for (name, dur_ns) in [("xfer", 4 * MS), ("load", 7 * MS)] {
        let ev = |ph: &str| {
            events
                .iter()
                .find(|e| e["ph"] == ph && e["cat"] == "nvtx" && e["name"] == name)
                .unwrap_or_else(|| panic!("{name} {ph} missing"))
                .clone()
        };
        let (b, e) = (ev("b"), ev("e"));
        assert_eq!(b["tid"], 11, "{name}");
        assert_eq!(b["id"], e["id"], "{name}");
        assert_eq!(us_ns(&e["ts"]) - us_ns(&b["ts"]), dur_ns as i64, "{name}");
    }
}
