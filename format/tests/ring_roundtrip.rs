//! Writer -> reader round trips: every committed record comes back in order, wrap-around keeps the
//! newest chunks, uncommitted bytes are invisible, and damage of any kind is reported, never fatal.

use std::path::{Path, PathBuf};

use tprof_format::*;

fn header() -> FileHeader {
    FileHeader {
        pid: 42,
        ppid: 1,
        hostname: "testhost".into(),
        cmdline: vec!["prog".into(), "--x".into()],
        rank: Some(2),
        local_rank: Some(0),
        world_size: Some(4),
        start_wall_ns: 1_000_000_000_000,
        start_mono_ns: 1_000,
        start_ticks: 1_000,
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        mode: "full".into(),
        writer: "test".into(),
        ..FileHeader::default()
    }
}

fn api(i: u64) -> Record {
    Record::Api {
        tid: 7,
        domain: ApiDomain::Runtime,
        name: StrId(1),
        start: 10_000 + i * 1000,
        end: 10_000 + i * 1000 + 300 + (i % 7),
        result: 0,
        correlation: i as u32,
        detail: StrId(0),
        stream: 0,
        arg: i,
    }
}

fn path_in(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

fn decode_all(r: &RingReader) -> (Vec<Record>, Vec<Damage>) {
    let mut recs = Vec::new();
    let mut dmg = Vec::new();
    for item in r.records() {
        match item {
            Ok(Decoded::Record(rec)) => recs.push(rec),
            Ok(_) => {}
            Err(d) => dmg.push(d),
        }
    }
    (recs, dmg)
}

fn apis(recs: &[Record]) -> Vec<u64> {
    recs.iter().filter_map(|r| if let Record::Api { arg, .. } = r { Some(*arg) } else { None }).collect()
}

#[test]
fn committed_records_roundtrip_in_order_with_strings_and_header() {
    let dir = tempfile::tempdir().unwrap();
    let p = path_in(dir.path(), "a.tprof");
    let mut w = RingWriter::create(&p, header(), RingGeometry::with_chunk_bytes(1 << 20, 4096)).unwrap();
    w.define_string(StrId(1), "cudaLaunchKernel");
    w.append(&Record::ClockSync { ticks: 1000, mono_ns: 1000, wall_ns: 1_000_000_000_000 });
    for i in 0..10_000 {
        w.append(&api(i));
    }
    w.set_dropped(3);
    w.close(99).unwrap();
    let mode = std::fs::metadata(&p).unwrap();
    assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777, 0o600);
    let r = RingReader::open(&p).unwrap();
    assert_eq!(r.header().hostname, "testhost");
    assert_eq!(r.header().rank, Some(2));
    assert_eq!(r.name(StrId(1)), "cudaLaunchKernel");
    assert!(r.stats().clean_close());
    assert_eq!(r.stats().dropped_events, 3);
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    let (recs, dmg) = decode_all(&r);
    assert!(dmg.is_empty());
    assert_eq!(apis(&recs), (0..10_000).collect::<Vec<_>>());
    // Bytes per API event on disk (payload only).
    let bytes: u64 = r.chunks().iter().map(|c| u64::from(c.len)).sum();
    assert!(bytes / 10_000 <= 24, "{} bytes/event", bytes / 10_000);
}

#[test]
fn create_refuses_existing_files_and_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let p = path_in(dir.path(), "x.tprof");
    std::fs::write(&p, b"keep me").unwrap();
    assert!(RingWriter::create(&p, header(), RingGeometry::for_total_bytes(1 << 20)).is_err());
    assert_eq!(std::fs::read(&p).unwrap(), b"keep me");
    let target = path_in(dir.path(), "target");
    let link = path_in(dir.path(), "link.tprof");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    assert!(RingWriter::create(&link, header(), RingGeometry::for_total_bytes(1 << 20)).is_err());
    assert!(!target.exists());
}

#[test]
fn wrap_around_keeps_the_newest_contiguous_events() {
    let dir = tempfile::tempdir().unwrap();
    let p = path_in(dir.path(), "w.tprof");
    let geom = RingGeometry { chunk_bytes: 4096, chunk_count: 8, dict_bytes: 65536 };
    let mut w = RingWriter::create(&p, header(), geom).unwrap();
    let n = 20_000u64;
    for i in 0..n {
        w.append(&api(i));
        if i % 100 == 0 {
            w.commit(i);
        }
    }
    w.close(0).unwrap();
    let r = RingReader::open(&p).unwrap();
    assert!(r.stats().wrapped());
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    let (recs, _) = decode_all(&r);
    let got = apis(&recs);
    assert!(got.len() > 1000 && got.len() < n as usize);
    let first = got[0];
    assert_eq!(got, (first..n).collect::<Vec<_>>(), "newest events, contiguous, ending with the last");
}

#[test]
fn uncommitted_tail_is_invisible_and_committed_part_survives() {
    let dir = tempfile::tempdir().unwrap();
    let p = path_in(dir.path(), "c.tprof");
    let mut w = RingWriter::create(&p, header(), RingGeometry::with_chunk_bytes(1 << 20, 4096)).unwrap();
    for i in 0..1000 {
        w.append(&api(i));
    }
    w.commit(1);
    for i in 1000..1010 {
        w.append(&api(i));
    }
    // Simulate a crash: copy the file as it is now, without close().
    let image = std::fs::read(&p).unwrap();
    drop(w);
    let r = RingReader::from_bytes(&p, image).unwrap();
    assert!(!r.stats().clean_close());
    let (recs, dmg) = decode_all(&r);
    assert!(dmg.is_empty());
    let got = apis(&recs);
    // Sealed chunks are committed when the next opens; the open chunk only up to commit().
    assert!(got.len() >= 1000, "{}", got.len());
    assert_eq!(got, (0..got.len() as u64).collect::<Vec<_>>());
}

/// xorshift64*: deterministic randomness without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

fn sample_file(dir: &Path) -> (PathBuf, Vec<u8>) {
    let p = path_in(dir, "f.tprof");
    let geom = RingGeometry { chunk_bytes: 4096, chunk_count: 16, dict_bytes: 65536 };
    let mut w = RingWriter::create(&p, header(), geom).unwrap();
    w.define_string(StrId(1), "cudaLaunchKernel");
    for i in 0..3000 {
        w.append(&api(i));
    }
    w.close(0).unwrap();
    let image = std::fs::read(&p).unwrap();
    (p, image)
}

#[test]
fn flipped_bytes_in_a_chunk_lose_only_that_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let (p, mut image) = sample_file(dir.path());
    let r = RingReader::from_bytes(&p, image.clone()).unwrap();
    let c = r.chunks()[3];
    let (all, _) = decode_all(&r);
    let all = apis(&all);
    let per_chunk: Vec<usize> =
        r.chunks().iter().map(|c| r.chunk_records(c).filter(|x| matches!(x, Ok(Decoded::Record(_)))).count()).collect();
    image[c.offset as usize + 100] ^= 0xff;
    let r2 = RingReader::from_bytes(&p, image).unwrap();
    assert_eq!(r2.damage().len(), 2, "{:?}", r2.damage()); // the bad chunk, and the gap it leaves
    assert_eq!(r2.damage()[0].offset, c.offset);
    assert!(r2.damage()[0].what.contains("checksum mismatch"));
    let (recs, _) = decode_all(&r2);
    assert_eq!(apis(&recs).len(), all.len() - per_chunk[3]);
}

#[test]
fn truncation_anywhere_decodes_up_to_the_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (p, image) = sample_file(dir.path());
    let full = apis(&decode_all(&RingReader::from_bytes(&p, image.clone()).unwrap()).0);
    let mut rng = Rng(0x1234_5678);
    for _ in 0..64 {
        let cut = (rng.next() % image.len() as u64) as usize;
        match RingReader::from_bytes(&p, image[..cut].to_vec()) {
            Ok(r) => {
                assert!(!r.damage().is_empty(), "cut at {cut} must be reported");
                let got = apis(&decode_all(&r).0);
                assert_eq!(got, full[..got.len()].to_vec(), "prefix of the events survives (cut {cut})");
            }
            Err(e) => assert!(cut < 4096, "only a cut header may be fatal (cut {cut}: {e})"),
        }
    }
}

#[test]
fn random_corruption_never_panics() {
    let dir = tempfile::tempdir().unwrap();
    let (p, image) = sample_file(dir.path());
    let mut rng = Rng(42);
    for round in 0..300 {
        let mut img = image.clone();
        let flips = 1 + rng.next() % 64;
        for _ in 0..flips {
            let i = (rng.next() % img.len() as u64) as usize;
            img[i] = rng.next() as u8;
        }
        if round % 3 == 0 {
            // Corrupt inside chunk payloads while keeping their CRC valid is impossible to fake
            // cheaply; instead scramble headers of the ring region too.
            let i = 4096 + 65536 + (rng.next() % (16 * 4096)) as usize;
            img[i..i + 8].copy_from_slice(&rng.next().to_le_bytes());
        }
        if let Ok(r) = RingReader::from_bytes(&p, img) {
            let _ = decode_all(&r);
            let _ = r.tick_converter().to_mono_ns(12345);
            let _ = r.all_strings();
        }
    }
}

#[test]
fn bad_inputs_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let e = RingReader::open(dir.path()).err().unwrap().to_string();
    assert!(e.contains("is a directory"), "{e}");
    let empty = path_in(dir.path(), "empty.tprof");
    std::fs::write(&empty, b"").unwrap();
    let e = RingReader::open(&empty).err().unwrap().to_string();
    assert!(e.contains("empty file") && e.contains("empty.tprof"), "{e}");
    let junk = path_in(dir.path(), "junk.tprof");
    std::fs::write(&junk, b"{\"traceEvents\": []}").unwrap();
    let e = RingReader::open(&junk).err().unwrap().to_string();
    assert!(e.contains("bad magic at offset 0"), "{e}");
    let (p, mut image) = sample_file(dir.path());
    // A newer writer's header (its checksum intact); with a stale checksum it is header damage,
    // recovered from the chunks (tests/header_damage.rs).
    image[8] = 99;
    let crc = crc32fast::hash(&image[..56]);
    image[56..60].copy_from_slice(&crc.to_le_bytes());
    let e = RingReader::from_bytes(&p, image).err().unwrap().to_string();
    assert!(e.contains("format version 99"), "{e}");
}

#[test]
fn append_all_writes_the_same_file_as_append() {
    let dir = tempfile::tempdir().unwrap();
    let geom = RingGeometry::with_chunk_bytes(1 << 20, 4096);
    let mut recs = Vec::new();
    for i in 0..20_000u64 {
        if i % 997 == 0 {
            recs.push(Record::ClockSync { ticks: 10_000 + i * 1000, mono_ns: i * 3, wall_ns: 1 << 60 });
        }
        if i % 13 == 0 {
            recs.push(Record::Kernel {
                device: 0,
                context: 1,
                stream: 7,
                start: 10_000 + i * 1000,
                end: u64::MAX - i,
                grid: [i as u32, 1, 1],
                block: [256, 1, 1],
                registers: 32,
                shared_mem: 0,
                correlation: u32::MAX - i as u32,
                name: StrId(3),
                graph_id: 0,
            });
        }
        recs.push(api(i));
    }
    let one = path_in(dir.path(), "one.tprof");
    let all = path_in(dir.path(), "all.tprof");
    let mut a = RingWriter::create(&one, header(), geom).unwrap();
    let mut b = RingWriter::create(&all, header(), geom).unwrap();
    for (k, batch) in recs.chunks(777).enumerate() {
        batch.iter().for_each(|r| a.append(r));
        b.append_all(batch);
        if k % 3 == 0 {
            a.commit(k as u64);
            b.commit(k as u64);
        }
    }
    assert_eq!(a.events_written(), b.events_written());
    a.close(1).unwrap();
    b.close(1).unwrap();
    assert!(std::fs::read(&one).unwrap() == std::fs::read(&all).unwrap(), "the files differ");
    let (got, dmg) = decode_all(&RingReader::open(&all).unwrap());
    assert!(dmg.is_empty(), "{dmg:?}");
    assert_eq!(got.last(), recs.last());
}
