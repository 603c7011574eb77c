//! `tprof info`, `dump` and `check` on ring files: intact files, a flipped byte inside a chunk, a
//! truncated file, a directory, a non-ring file. Damage is reported with file and byte offset, and
//! everything intact is still decoded.

mod ring_support;

use std::path::{Path, PathBuf};

use ring_support::tprof;

use tprof_format::{ApiDomain, ClockSource, Decoded, FileHeader, Record, RingGeometry, RingReader, RingWriter, StrId};

fn write_ring(dir: &Path) -> PathBuf {
    let path = dir.join("host-r3-p77.tprof");
    let header = FileHeader {
        pid: 77,
        hostname: "host".into(),
        rank: Some(3),
        world_size: Some(4),
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        start_mono_ns: 1_000,
        start_wall_ns: 1_700_000_000_000_000_000,
        mode: "full".into(),
        ..FileHeader::default()
    };
    let mut w =
        RingWriter::create(&path, header, RingGeometry { chunk_bytes: 4096, chunk_count: 64, dict_bytes: 65536 })
            .unwrap();
    w.define_string(StrId(1), "cudaLaunchKernel");
    w.define_string(StrId(2), "_Z6kernelv");
    w.append(&Record::ClockSync { ticks: 1_000, mono_ns: 1_000, wall_ns: 1_700_000_000_000_000_000 });
    for i in 0..5000u64 {
        w.append(&Record::Api {
            tid: 9,
            domain: ApiDomain::Runtime,
            name: StrId(1),
            start: 2_000 + i * 1000,
            end: 2_500 + i * 1000,
            result: 0,
            correlation: i as u32,
            detail: StrId(2),
            stream: 0,
            arg: 256,
        });
    }
    w.close(0).unwrap();
    path
}

#[test]
fn intact_file_info_dump_check() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_ring(dir.path());
    let ps = p.to_str().unwrap();
    let (rc, out, _) = tprof(&["check", ps]);
    assert_eq!(rc, 0, "{out}");
    // 5000 API records plus the clock pair that opens each chunk.
    let chunks = RingReader::open(&p).unwrap().chunks().len();
    assert!(out.contains(&format!("ok ({} records, {chunks} chunks)", 5000 + chunks)), "{out}");
    let (rc, out, _) = tprof(&["info", ps]);
    assert_eq!(rc, 0);
    assert!(out.contains("rank:        3"), "{out}");
    assert!(out.contains("api                    5000"), "{out}");
    assert!(out.contains("damage:      none"), "{out}");
    let (rc, out, _) = tprof(&["dump", "--json", ps]);
    assert_eq!(rc, 0);
    let lines: Vec<serde_json::Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let apis: Vec<&serde_json::Value> = lines.iter().filter(|v| v["type"] == "api").collect();
    assert_eq!(apis.len(), 5000);
    assert_eq!(apis[7]["name"], "cudaLaunchKernel");
    assert_eq!(apis[7]["detail"], "_Z6kernelv");
    assert_eq!(apis[7]["correlation"], 7);
    assert_eq!(apis[7]["end"].as_u64().unwrap() - apis[7]["start"].as_u64().unwrap(), 500);
}

#[test]
fn flipped_byte_is_reported_with_offset_and_the_rest_decodes() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_ring(dir.path());
    let r = RingReader::open(&p).unwrap();
    let victim = r.chunks()[2];
    let total: usize = r.records().filter(|x| x.is_ok()).count();
    let in_victim = r.chunk_records(&victim).count();
    drop(r);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[victim.offset as usize + 500] ^= 0x5a;
    std::fs::write(&p, &bytes).unwrap();
    let (rc, out, err) = tprof(&["check", p.to_str().unwrap()]);
    assert_eq!(rc, 1, "{out}{err}");
    let report = format!("{out}{err}");
    assert!(report.contains(&format!("offset {}", victim.offset)), "{report}");
    assert!(report.contains("checksum mismatch"), "{report}");
    assert!(report.contains(&format!("{} records readable", total - in_victim)), "{report}");
}

#[test]
fn info_and_dump_name_a_skipped_chunk_and_fail_but_print_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_ring(dir.path());
    let r = RingReader::open(&p).unwrap();
    let victim = r.chunks()[2];
    let apis_in_victim =
        r.chunk_records(&victim).filter(|x| matches!(x, Ok(Decoded::Record(Record::Api { .. })))).count();
    drop(r);
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[victim.offset as usize + 500] ^= 0x5a;
    std::fs::write(&p, &bytes).unwrap();
    let ps = p.to_str().unwrap();
    let named = format!("{ps}: damage at offset {}: chunk in slot {} (seq {})", victim.offset, victim.slot, victim.seq);

    let (rc, out, err) = tprof(&["dump", "--json", ps]);
    assert_eq!(rc, 1, "{err}");
    assert!(err.contains(&named) && err.contains("checksum mismatch"), "{err}");
    let apis = out.lines().filter(|l| l.contains("\"type\":\"api\"")).count();
    assert_eq!(apis, 5000 - apis_in_victim, "every intact record is still dumped");
    let (rc, out, err) = tprof(&["dump", ps]);
    assert_eq!((rc, out.lines().filter(|l| l.contains(" Api {")).count()), (1, 5000 - apis_in_victim));
    assert!(err.contains(&named), "{err}");

    let (rc, out, err) = tprof(&["info", ps]);
    assert_eq!(rc, 1, "{out}{err}");
    assert!(err.contains(&named), "{err}");
    assert!(out.contains(&format!("api                    {}", 5000 - apis_in_victim)), "{out}");
    assert!(out.contains("damage:      2"), "{out}"); // the chunk, and the gap in the sequence it leaves
}

#[test]
fn check_of_a_directory_verifies_every_ring_under_it() {
    let dir = tempfile::tempdir().unwrap();
    let out_dir = dir.path().join("tprof-out");
    std::fs::create_dir_all(out_dir.join("node1")).unwrap();
    let good = write_ring(&out_dir);
    let bad = write_ring(&out_dir.join("node1"));
    std::fs::write(out_dir.join("notes.txt"), b"not a ring").unwrap();
    let (rc, out, err) = tprof(&["check", out_dir.to_str().unwrap()]);
    assert_eq!(rc, 0, "{out}{err}");
    assert!(out.contains(&format!("{}: ok", good.display())), "{out}");
    assert!(out.contains(&format!("{}: ok", bad.display())), "{out}");
    assert_eq!(out.lines().count(), 2, "{out}");

    // One damaged ring below: exit 1, named with its offset; the other still reported ok.
    let r = RingReader::open(&bad).unwrap();
    let victim = r.chunks()[1];
    drop(r);
    let mut bytes = std::fs::read(&bad).unwrap();
    bytes[victim.offset as usize + 300] ^= 0x11;
    std::fs::write(&bad, &bytes).unwrap();
    let (rc, out, _) = tprof(&["check", out_dir.to_str().unwrap()]);
    assert_eq!(rc, 1, "{out}");
    assert!(out.contains(&format!("{}: ok", good.display())), "{out}");
    assert!(out.contains(&format!("{}: offset {}", bad.display(), victim.offset)), "{out}");

    // A directory with no ring in it fails, saying so.
    let other = dir.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("x.txt"), b"x").unwrap();
    let (rc, out, err) = tprof(&["check", other.to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(out.contains(&format!("no input files found in {}", other.display())), "{out}{err}");
    std::fs::write(other.join("t.json"), b"{\"traceEvents\": []}").unwrap();
    let (rc, out, err) = tprof(&["check", other.to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(out.contains(&format!("{}: no ring files in this directory", other.display())), "{out}{err}");
}

#[test]
fn truncated_directory_and_foreign_files_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let p = write_ring(dir.path());
    let bytes = std::fs::read(&p).unwrap();
    let cut = dir.path().join("cut.tprof");
    std::fs::write(&cut, &bytes[..4096 + 65536 + 4096 * 3 + 100]).unwrap();
    let (rc, out, err) = tprof(&["check", cut.to_str().unwrap()]);
    assert_eq!(rc, 1);
    let report = format!("{out}{err}");
    assert!(report.contains("truncated"), "{report}");
    assert!(report.contains("cut.tprof"), "{report}");
    let (rc, _, err) = tprof(&["info", dir.path().to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(err.contains("is a directory"), "{err}");
    let json = dir.path().join("trace.json");
    std::fs::write(&json, b"{\"traceEvents\": []}").unwrap();
    let (rc, out, err) = tprof(&["check", json.to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(format!("{out}{err}").contains("bad magic at offset 0"), "{out}{err}");
    let empty = dir.path().join("empty.tprof");
    std::fs::write(&empty, b"").unwrap();
    let (rc, out, err) = tprof(&["check", empty.to_str().unwrap()]);
    assert_eq!(rc, 1);
    assert!(format!("{out}{err}").contains("empty file"), "{out}{err}");
}
