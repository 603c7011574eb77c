//! Issue #14 item 9: damage to the fixed header fields (bytes 0..60: magic, version, sizes, geometry,
//! checksums) does not lose the file. Every single-bit flip there is reported as damage at an offset in
//! the header, and every record of every intact chunk still decodes, in a ring that wrapped and in one
//! that did not; a file with no intact chunk, and a genuine newer version, are still refused.

use tprof_format::header::{off, HEADER_BYTES};
use tprof_format::*;

fn header() -> FileHeader {
    FileHeader {
        pid: 42,
        hostname: "testhost".into(),
        cmdline: vec!["prog".into()],
        rank: Some(3),
        world_size: Some(4),
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        mode: "full".into(),
        writer: "test".into(),
        ..FileHeader::default()
    }
}

/// A ring of `total` bytes with 4 KiB chunks and `n` API records, as file bytes.
fn ring(total: u64, n: u64) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("r.tprof");
    let mut w = RingWriter::create(&p, header(), RingGeometry::with_chunk_bytes(total, 4096)).unwrap();
    w.define_string(StrId(1), "cudaLaunchKernel");
    for i in 0..n {
        w.append(&Record::Api {
            tid: 7,
            domain: ApiDomain::Runtime,
            name: StrId(1),
            start: 10_000 + i * 1000,
            end: 10_300 + i * 1000,
            result: 0,
            correlation: i as u32,
            detail: StrId(0),
            stream: 0,
            arg: i,
        });
    }
    w.close(99).unwrap();
    std::fs::read(&p).unwrap()
}

/// Every decoded record and the damage found (opening and decoding).
fn decode(bytes: Vec<u8>) -> Result<(Vec<Record>, Vec<Damage>, String), FileError> {
    let r = RingReader::from_bytes(std::path::Path::new("r.tprof"), bytes)?;
    let mut damage = r.damage().to_vec();
    let mut recs = Vec::new();
    for item in r.records() {
        match item {
            Ok(Decoded::Record(rec)) => recs.push(rec),
            Ok(_) => {}
            Err(d) => damage.push(d),
        }
    }
    Ok((recs, damage, r.name(StrId(1)).into_owned()))
}

fn every_bit_flip_keeps_every_record(total: u64, n: u64) {
    let original = ring(total, n);
    let (want, clean, _) = decode(original.clone()).unwrap();
    assert!(clean.is_empty(), "{clean:?}");
    assert!(want.len() > 1000, "{} records", want.len());
    for bit in 0..60 * 8 {
        let mut bytes = original.clone();
        bytes[bit / 8] ^= 1 << (bit % 8);
        let (got, damage, name) =
            decode(bytes).unwrap_or_else(|e| panic!("bit {bit} (byte {}): file lost: {e}", bit / 8));
        assert_eq!(got.len(), want.len(), "bit {bit}: records lost");
        assert!(got == want, "bit {bit}: records differ");
        assert_eq!(name, "cudaLaunchKernel", "bit {bit}: dictionary lost");
        let first = damage.first().unwrap_or_else(|| panic!("bit {bit}: damage not reported"));
        assert!(first.offset < 64, "bit {bit}: damage reported at {}: {}", first.offset, first.what);
        assert!(first.what.contains("header damaged"), "bit {bit}: {}", first.what);
    }
}

#[test]
fn header_bit_flips_lose_no_record_in_a_ring_that_did_not_wrap() {
    every_bit_flip_keeps_every_record(1 << 20, 6_000);
}

#[test]
fn header_bit_flips_lose_no_record_in_a_wrapped_ring() {
    // 64 KiB dictionary + 8 chunks of 4 KiB; 20,000 records wrap it several times.
    every_bit_flip_keeps_every_record(HEADER_BYTES as u64 + (64 << 10) + 8 * 4096, 20_000);
}

#[test]
fn damaged_geometry_field_is_named() {
    let mut bytes = ring(1 << 20, 3_000);
    bytes[off::CHUNK_BYTES + 1] ^= 0x02;
    let (_, damage, _) = decode(bytes).unwrap();
    assert_eq!(damage[0].offset, off::CHUNK_BYTES as u64, "{}", damage[0].what);
    assert!(damage[0].what.contains("chunk bytes"), "{}", damage[0].what);
}

#[test]
fn no_intact_chunk_or_a_real_newer_version_is_still_refused() {
    // Bad magic and no chunk anywhere: not a ring.
    let mut junk = vec![0x5au8; 64 << 10];
    junk[..8].copy_from_slice(b"NOTARING");
    assert!(matches!(decode(junk).unwrap_err().source, FormatError::BadMagic { .. }));
    // A header from a newer version, checksum intact: "upgrade tprof", not recovered.
    let mut newer = ring(1 << 20, 100);
    newer[off::VERSION..off::VERSION + 2].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    let crc = crc32fast::hash(&newer[..off::FIXED_CRC]);
    newer[off::FIXED_CRC..off::FIXED_CRC + 4].copy_from_slice(&crc.to_le_bytes());
    assert!(matches!(decode(newer).unwrap_err().source, FormatError::UnsupportedVersion { .. }));
}
