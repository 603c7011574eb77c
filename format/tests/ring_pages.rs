//! A ring's pages leave the process's resident set once a pass over the chunks is done with them:
//! opening (dictionary and chunk scan, clock syncs), the inline strings and a walk over every record
//! each leave no more than a batch of the ring mapped, where reading the chunks one by one
//! (which releases nothing) leaves the whole ring resident. Measured from `/proc/self/smaps`.

use std::path::Path;

use tprof_format::*;

/// Resident KiB of the mappings of `path` in this process (None where /proc is not there).
fn resident_kib(path: &Path) -> Option<u64> {
    let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
    let name = path.to_str()?;
    let mut inside = false;
    let mut kib = 0;
    for line in smaps.lines() {
        // A mapping's first line: "start-end perms offset dev inode   path".
        if line
            .split_whitespace()
            .next()
            .is_some_and(|f| f.contains('-') && f.chars().all(|c| c.is_ascii_hexdigit() || c == '-'))
        {
            inside = line.ends_with(name);
        } else if inside {
            if let Some(v) = line.strip_prefix("Rss:") {
                kib += v.trim().trim_end_matches("kB").trim().parse::<u64>().ok()?;
            }
        }
    }
    Some(kib)
}

fn write_ring(path: &Path) {
    let header = FileHeader {
        pid: 42,
        hostname: "pages".into(),
        start_wall_ns: 1_000_000_000_000,
        start_mono_ns: 1_000,
        start_ticks: 1_000,
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        ..FileHeader::default()
    };
    let mut w = RingWriter::create(path, header, RingGeometry::with_chunk_bytes(16 << 20, 64 << 10)).unwrap();
    w.define_string(StrId(1), "cudaLaunchKernel");
    for i in 0..1_500_000u64 {
        if i % 10_000 == 0 {
            w.append(&Record::ClockSync {
                ticks: 1000 + i * 1000,
                mono_ns: 1000 + i * 1000,
                wall_ns: 1_000_000_000_000 + i * 1000,
            });
        }
        let start = 10_000 + i * 1000;
        w.append(&Record::Api {
            tid: 7,
            domain: ApiDomain::Runtime,
            name: StrId(1),
            start,
            end: start + 300 + (i % 7),
            result: 0,
            correlation: i as u32,
            detail: StrId(0),
            stream: 0,
            arg: i,
        });
    }
    w.close(0).unwrap();
}

#[test]
fn passes_over_the_chunks_leave_no_ring_resident() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("pages.tprof");
    write_ring(&path);
    let r = RingReader::open(&path).unwrap();
    let Some(after_open) = resident_kib(&path) else { return };
    let ring_kib = r.chunks().len() as u64 * 64;
    assert!(ring_kib >= 14 << 10, "{ring_kib} KiB of chunks");
    // A batch (1 MiB) and the granules at its ends, and the header page.
    let bound = 1024 + 3 * 64 + 4;
    assert!(after_open <= bound, "{after_open} KiB resident after open, of {ring_kib} KiB of chunks");

    // Reading the chunks one by one releases nothing: the whole ring is resident (the measure works).
    let read_all = || r.chunks().iter().map(|c| r.chunk_records(c).count()).sum::<usize>();
    let items = read_all();
    assert!(resident_kib(&path).unwrap() >= ring_kib * 9 / 10);
    assert!(r.all_strings().get(StrId(1)).is_some());
    assert!(resident_kib(&path).unwrap() <= bound, "after all_strings");

    read_all();
    // The clock syncs were read at open, as a walk over the records finds them.
    let syncs: Vec<_> = r
        .records()
        .filter_map(|i| match i {
            Ok(Decoded::Record(Record::ClockSync { ticks, mono_ns, wall_ns })) => Some((ticks, mono_ns, wall_ns)),
            _ => None,
        })
        .collect();
    assert!(syncs.len() > 50);
    assert_eq!(r.clock_syncs(), syncs);
    assert!(resident_kib(&path).unwrap() <= bound, "after records()");

    read_all();
    assert_eq!(r.records().count(), items);
    let after_records = resident_kib(&path).unwrap();
    assert!(after_records <= bound, "{after_records} KiB resident after records()");

    // A walk stopped half-way releases what it read.
    read_all();
    let mut pass = r.chunk_pass();
    let half: usize = pass.by_ref().take(r.chunks().len() / 2).map(|(_, items)| items.count()).sum();
    drop(pass);
    assert!(half > 0);
    let rest = resident_kib(&path).unwrap();
    assert!(rest <= ring_kib / 2 + bound, "{rest} KiB resident after half a walk, of {ring_kib} KiB");
    assert!(rest >= ring_kib / 2 - bound, "{rest} KiB resident after half a walk, of {ring_kib} KiB");
}
