//! Format v1 byte for byte. Round trips cannot catch a mistake the encoder and the decoder make alike
//! (a field swapped on both sides, a delta against the wrong base); these tests compare what the code
//! writes with bytes written down once from the v1 encoder, and decode those bytes back:
//! - every record kind, with edge values (0, `u64::MAX`, negative results, deltas that go backwards),
//!   encoded in one chunk's delta state;
//! - inline string definitions: empty, at the last short-frame length, and in the `0xFF` long frame;
//! - the header page, the string dictionary and a committed chunk of a ring file.
//!
//! Hex is written one frame a line: the frame header (`type len`, or `type ff len32`), `|`, then the
//! payload one field a token (a multi-byte varint is one token, an f64 is its 8 little-endian bytes).

use tprof_format::chunk::{CHUNK_HEADER_BYTES, CHUNK_MAGIC};
use tprof_format::codec::{decode_one, encode_string_into, encode_to_vec, DeltaState};
use tprof_format::header::{flags, off, HEADER_BYTES, META_OFFSET};
use tprof_format::*;

/// Bytes from hex pairs; spaces, newlines and `|` are layout, `#` starts a comment to the end of its line.
fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text
        .lines()
        .flat_map(|line| line.split('#').next().unwrap_or("").bytes())
        .filter(|b| !b" |".contains(b))
        .collect();
    assert!(digits.len().is_multiple_of(2), "odd number of hex digits in {text:?}");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).expect("ascii"), 16).expect("hex digit"))
        .collect()
}

/// A frame in the layout of [`hex`] (varint tokens), to show what the code wrote when a test fails.
fn show_frame(frame: &[u8]) -> String {
    let (head, payload) = if frame.len() >= 6 && frame[1] == 0xff { frame.split_at(6) } else { frame.split_at(2) };
    let mut out: Vec<String> = head.iter().map(|b| format!("{b:02x}")).collect();
    out.push("|".into());
    let mut token = String::new();
    for b in payload {
        token.push_str(&format!("{b:02x}"));
        if b & 0x80 == 0 {
            out.push(std::mem::take(&mut token));
        }
    }
    if !token.is_empty() {
        out.push(token);
    }
    out.join(" ")
}

fn assert_frame(what: &str, actual: &[u8], expected: &[u8]) {
    assert!(actual == expected, "{what}:\n  wrote    {}\n  expected {}", show_frame(actual), show_frame(expected));
}

/// Bytes that are not one frame (header fields, dictionary entries, chunks), as plain hex.
fn assert_region(what: &str, actual: &[u8], expected: &[u8]) {
    let show = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<Vec<_>>().join(" ");
    assert!(actual == expected, "{what}:\n  wrote    {}\n  expected {}", show(actual), show(expected));
}

/// The chunk base every record case is encoded against.
const BASE: u64 = 1_000_000;

/// Every record kind with its v1 bytes, in the order they are encoded (timestamp and correlation
/// deltas run against the previous case).
fn record_cases() -> Vec<(Record, Vec<u8>)> {
    vec![
        // ticks mono_ns wall_ns: absolute.
        (Record::ClockSync { ticks: BASE, mono_ns: 0, wall_ns: u64::MAX }, hex("01 0e | c0843d 00 ffffffffffffffffff01")),
        // tid domain name start(+500) end-start result corr(+17) detail stream arg
        (
            Record::Api {
                tid: 4242,
                domain: ApiDomain::Runtime,
                name: StrId(3),
                start: 1_000_500,
                end: 1_002_000,
                result: 0,
                correlation: 17,
                detail: StrId(9),
                stream: 0,
                arg: 65536,
            },
            hex("02 0f | 9221 00 03 e807 b817 00 22 09 00 808004"),
        ),
        // A failed NCCL call that ends before it starts, its correlation going back, a negative result.
        (
            Record::Api {
                tid: u32::MAX,
                domain: ApiDomain::Nccl,
                name: StrId(0),
                start: 1_000_400,
                end: 1_000_300,
                result: -1,
                correlation: 5,
                detail: StrId(u32::MAX),
                stream: u64::MAX,
                arg: 0,
            },
            hex("02 1d | ffffffff0f 04 00 c701 c701 01 17 ffffffff0f ffffffffffffffffff01 00"),
        ),
        (
            Record::Api {
                tid: 0,
                domain: ApiDomain::CuptiDriver,
                name: StrId(1),
                start: 1_000_400,
                end: 1_000_400,
                result: i32::MIN,
                correlation: 5,
                detail: StrId(0),
                stream: 7,
                arg: u64::MAX,
            },
            hex("02 17 | 00 03 01 00 00 ffffffff0f 00 00 07 ffffffffffffffffff01"),
        ),
        // device context stream start end-start grid[3] block[3] registers shared_mem corr name graph_id
        (
            Record::Kernel {
                device: 1,
                context: 2,
                stream: 13,
                start: 1_003_000,
                end: 1_203_000,
                grid: [388, 1, 1],
                block: [256, 1, 1],
                registers: 128,
                shared_mem: 49152,
                correlation: 17,
                name: StrId(9),
                graph_id: 0,
            },
            hex("03 18 | 01 02 0d d028 80b518 8403 01 01 8002 01 01 8001 808003 18 09 00"),
        ),
        // Every field at its widest: start 0 is the largest backwards delta.
        (
            Record::Kernel {
                device: u32::MAX,
                context: u32::MAX,
                stream: u32::MAX,
                start: 0,
                end: u64::MAX,
                grid: [u32::MAX; 3],
                block: [u32::MAX; 3],
                registers: u16::MAX,
                shared_mem: u32::MAX,
                correlation: u32::MAX,
                name: StrId(u32::MAX),
                graph_id: u32::MAX,
            },
            hex("03 48 | ffffffff0f ffffffff0f ffffffff0f efb77a 01 ffffffff0f ffffffff0f ffffffff0f ffffffff0f ffffffff0f ffffffff0f ffff03 ffffffff0f dcffffff1f ffffffff0f ffffffff0f"),
        ),
        // device context stream start end-start bytes kind src_kind dst_kind corr
        (
            Record::Memcpy {
                device: 0,
                context: 1,
                stream: 7,
                start: 1_300_000,
                end: 1_310_000,
                bytes: 1 << 20,
                kind: CopyKind::HtoD,
                src_kind: MemoryKind::Pinned,
                dst_kind: MemoryKind::Device,
                correlation: 18,
            },
            hex("04 15 | 00 01 07 c0d89e01 a09c01 808040 01 02 03 d9ffffff1f"),
        ),
        (
            Record::Memcpy {
                device: 7,
                context: 0,
                stream: 0,
                start: 1_300_000,
                end: 1_300_001,
                bytes: u64::MAX,
                kind: CopyKind::PtoP,
                src_kind: MemoryKind::ManagedStatic,
                dst_kind: MemoryKind::Unknown,
                correlation: 0,
            },
            hex("04 13 | 07 00 00 00 02 ffffffffffffffffff01 0a 07 00 23"),
        ),
        // device context stream start end-start bytes value dst_kind corr
        (
            Record::Memset {
                device: 0,
                context: 1,
                stream: 7,
                start: 1_320_000,
                end: 1_321_000,
                bytes: 4096,
                value: u32::MAX,
                dst_kind: MemoryKind::DeviceStatic,
                correlation: 19,
            },
            hex("05 11 | 00 01 07 c0b802 d00f 8020 ffffffff0f 06 26"),
        ),
        // kind tid context stream event start end-start corr result
        (
            Record::Sync {
                kind: SyncKind::StreamSynchronize,
                tid: 4242,
                context: 1,
                stream: 7,
                event: 0,
                start: 1_330_000,
                end: 1_400_000,
                correlation: 20,
                result: 0,
            },
            hex("06 0e | 03 9221 01 07 00 a09c01 e0c508 02 00"),
        ),
        (
            Record::Sync {
                kind: SyncKind::ContextSynchronize,
                tid: 1,
                context: 0,
                stream: 0,
                event: u64::MAX,
                start: 1_330_000,
                end: 1_330_000,
                correlation: 21,
                result: -700,
            },
            hex("06 13 | 04 01 00 00 ffffffffffffffffff01 00 00 02 f70a"),
        ),
        // op space device address bytes reserved ts result corr tid
        (
            Record::Memory {
                op: MemOp::AllocFailed,
                space: MemSpace::Managed,
                device: 0,
                address: 0,
                bytes: 1 << 34,
                reserved: 79 << 30,
                ts: 1_410_000,
                result: 2,
                correlation: 21,
                tid: 4242,
            },
            hex("07 16 | 02 03 00 00 8080808040 80808080bc02 80e209 04 00 9221"),
        ),
        (
            Record::Memory {
                op: MemOp::Free,
                space: MemSpace::DeviceAsync,
                device: 3,
                address: u64::MAX,
                bytes: 0,
                reserved: u64::MAX,
                ts: 1_410_001,
                result: -2,
                correlation: 22,
                tid: 1,
            },
            hex("07 1c | 01 01 03 ffffffffffffffffff01 00 ffffffffffffffffff01 02 03 02 01"),
        ),
        // tid op start end-start comm rank nranks count datatype bytes peer stream seq result corr device
        (
            Record::Collective {
                tid: 4242,
                op: CollOp::AllReduce,
                start: 1_420_000,
                end: 1_421_000,
                comm: 0xdead_beef_1234_5678,
                rank: 3,
                nranks: 4,
                count: 1 << 22,
                datatype: 7,
                bytes: 1 << 24,
                peer: -1,
                stream: 0x5555_0000,
                seq: 41,
                result: 0,
                correlation: 22,
                device: 3,
            },
            hex("08 27 | 9221 01 9e9c01 d00f f8acd191f1ddefd6de01 03 04 80808002 07 80808008 01 8080d4aa05 29 00 00 03"),
        ),
        (
            Record::Collective {
                tid: 1,
                op: CollOp::WaitSignal,
                start: 1_420_000,
                end: 1_420_000,
                comm: u64::MAX,
                rank: 0,
                nranks: u32::MAX,
                count: 0,
                datatype: u8::MAX,
                bytes: u64::MAX,
                peer: i32::MIN,
                stream: 0,
                seq: u64::MAX,
                result: i32::MIN,
                correlation: u32::MAX,
                device: u32::MAX,
            },
            hex("08 40 | 01 14 00 00 ffffffffffffffffff01 00 ffffffff0f 00 ff01 ffffffffffffffffff01 ffffffff0f 00 ffffffffffffffffff01 ffffffff0f d2ffffff1f ffffffff0f"),
        ),
        // kind external_id corr
        (Record::ExternalCorrelation { kind: u8::MAX, external_id: u64::MAX, correlation: 0 }, hex("09 11 | ff01 ffffffffffffffffff01 fdffffff1f")),
        (Record::ExternalCorrelation { kind: 3, external_id: 99, correlation: 22 }, hex("09 03 | 03 63 2c")),
        // tid domain name ts
        (Record::NvtxPush { tid: 4242, domain: StrId(0), name: StrId(5), ts: 900_000 }, hex("0a 07 | 9221 00 05 ffbc3f")),
        // tid domain ts
        (Record::NvtxPop { tid: 4242, domain: StrId(0), ts: 1_500_000 }, hex("0b 06 | 9221 00 809f49")),
        // tid domain name id ts
        (Record::NvtxStart { tid: 1, domain: StrId(2), name: StrId(6), id: u64::MAX, ts: 1_500_100 }, hex("0c 0f | 01 02 06 ffffffffffffffffff01 c801")),
        // tid id ts
        (Record::NvtxEnd { tid: 2, id: u64::MAX, ts: 1_500_200 }, hex("0d 0d | 02 ffffffffffffffffff01 c801")),
        // tid domain name ts
        (Record::NvtxMark { tid: 1, domain: StrId(2), name: StrId(7), ts: 1_500_300 }, hex("0e 05 | 01 02 07 c801")),
        // tid name
        (Record::ThreadName { tid: 0, name: StrId(0) }, hex("0f 02 | 00 00")),
        (Record::ThreadName { tid: u32::MAX, name: StrId(300) }, hex("0f 07 | ffffffff0f ac02")),
        // name device ts value(f64 LE)
        (Record::Counter { name: StrId(10), device: 0, ts: 1_600_000, value: 87.5 }, hex("10 0d | 0a 00 e8950c 0000000000e05540")),
        (Record::Counter { name: StrId(10), device: u32::MAX, ts: 1_600_000, value: -1.5e300 }, hex("10 0f | 0a ffffffff0f 00 355800662deb41fe")),
        // kind ts value name
        (Record::Marker { kind: MarkerKind::HangSuspected, ts: 1_700_000, value: 300_000_000_000, name: StrId(11) }, hex("11 0b | 05 c09a0c 80f092cbdd08 0b")),
        (Record::Marker { kind: MarkerKind::Note, ts: 1_700_000, value: u64::MAX, name: StrId(0) }, hex("11 0d | 0d 00 ffffffffffffffffff01 00")),
        // kind start end-start tid
        (Record::Overhead { kind: 1, start: 1_800_000, end: 1_800_500, tid: 3 }, hex("12 07 | 01 c09a0c e807 03")),
        (Record::Overhead { kind: 0x81, start: u64::MAX, end: 0, tid: u32::MAX }, hex("12 0c | 8101 81dddb01 02 ffffffff0f")),
        // Back to zero: the largest forwards-then-backwards timestamp delta.
        (Record::ClockSync { ticks: 0, mono_ns: u64::MAX, wall_ns: 0 }, hex("01 0c | 00 ffffffffffffffffff01 00")),
        (Record::NvtxEnd { tid: 0, id: 0, ts: 0 }, hex("0d 03 | 00 00 02")),
        // Added in v1 with a new type code (old readers skip it by its length).
        // tid domain name start end-start result stream calls busy
        (
            Record::ApiRepeat { tid: 7, domain: ApiDomain::Runtime, name: StrId(3), start: 1000, end: 1500, result: 600, stream: 0x1234, calls: 5000, busy: 20000 },
            hex("15 10 | 07 00 03 d00f e807 b009 b424 8827 a09c01"),
        ),
    ]
}

#[test]
fn every_record_kind_encodes_to_its_v1_bytes() {
    let cases = record_cases();
    let codes: std::collections::BTreeSet<u8> = cases.iter().map(|(r, _)| r.type_code()).collect();
    let known: std::collections::BTreeSet<u8> =
        (type_code::CLOCK_SYNC..=type_code::OVERHEAD).chain([type_code::API_REPEAT]).collect();
    assert_eq!(codes, known, "a record kind has no case");
    let mut st = DeltaState::at_chunk_start(BASE);
    for (rec, expected) in &cases {
        let mut out = Vec::new();
        encode_to_vec(rec, &mut st, &mut out);
        assert_frame(&format!("{rec:?}"), &out, expected);
    }
}

#[test]
fn v1_bytes_decode_to_every_record_kind() {
    let cases = record_cases();
    let stream: Vec<u8> = cases.iter().flat_map(|(_, bytes)| bytes.iter().copied()).collect();
    let mut st = DeltaState::at_chunk_start(BASE);
    let mut pos = 0;
    for (rec, expected) in &cases {
        let (item, size) = decode_one(&stream[pos..], &mut st).expect("v1 frame decodes");
        assert_eq!(size, expected.len(), "frame size of {rec:?}");
        assert_eq!(item, Decoded::Record(*rec));
        pos += size;
    }
    assert_eq!(pos, stream.len());
}

/// Inline string definitions: `[19][len][varint id][bytes]`, the long frame from 255 payload bytes on.
fn string_cases() -> Vec<(u32, Vec<u8>, Vec<u8>)> {
    let at_short_limit: Vec<u8> = (0..253u32).map(|i| b'a' + (i % 26) as u8).collect();
    let at_long_start: Vec<u8> = vec![b'y'; 254];
    let long: Vec<u8> = "_Z17ampere_bf16_gemm_ntILi128EEvPKT_S2_PS0_".repeat(30).into_bytes();
    vec![
        (0, Vec::new(), hex("13 01 | 00")),
        (5, b"gemm".to_vec(), hex("13 05 | 05 67 65 6d 6d")),
        (u32::MAX, "mémoire".as_bytes().to_vec(), hex("13 0d | ffffffff0f 6d c3a9 6d 6f 69 72 65")),
        (1, at_short_limit.clone(), [hex("13 fe | 01"), at_short_limit].concat()),
        (1, at_long_start.clone(), [hex("13 ff ff000000 | 01"), at_long_start].concat()),
        (70_000, long.clone(), [hex("13 ff 0d050000 | f0a204"), long].concat()),
    ]
}

#[test]
fn inline_strings_encode_to_their_v1_bytes_and_back() {
    for (id, text, expected) in string_cases() {
        let mut out = vec![0u8; text.len() + 16];
        let n = encode_string_into(StrId(id), &text, &mut out).expect("fits");
        assert_frame(&format!("string {id} of {} bytes", text.len()), &out[..n], &expected);
        let mut st = DeltaState::default();
        let (item, size) = decode_one(&expected, &mut st).expect("v1 string frame decodes");
        assert_eq!((item, size), (Decoded::String { id: StrId(id), bytes: &text[..] }, expected.len()));
    }
    // A string reference record is the same frame with no bytes.
    let mut out = Vec::new();
    encode_to_vec(&Record::StringRef { id: StrId(300) }, &mut DeltaState::default(), &mut out);
    assert_frame("StringRef", &out, &hex("13 02 | ac02"));
}

fn file_header() -> FileHeader {
    FileHeader {
        version: FORMAT_VERSION,
        little_endian: true,
        pointer_size: 8,
        pid: 1234,
        ppid: 1,
        hostname: "node-07".into(),
        cmdline: vec!["python".into(), "train.py".into(), "--lr=1e-3\nx\\y".into(), "".into()],
        rank: Some(3),
        local_rank: Some(0),
        world_size: None,
        job_id: Some("job42".into()),
        start_wall_ns: 1_700_000_000_000_000_000,
        start_mono_ns: 123_456_789,
        start_ticks: u64::MAX,
        clock_source: ClockSource::Tsc,
        ticks_per_sec: 2.5e9,
        mode: "full".into(),
        writer: "tprof 0.1.0".into(),
        chunk_bytes: 4096,
        chunk_count: 2,
        dict_offset: 4096,
        dict_bytes: 256,
        ring_offset: 4096 + 256,
        extra: vec![("future_key".into(), "v=1".into())],
    }
}

/// The fixed fields of [`file_header`]'s page (bytes 0..64), one field a line.
fn header_fixed_bytes() -> Vec<u8> {
    hex("54 50 52 4f 46 52 4e 47  # magic TPROFRNG
         01 00                    # version 1
         01                       # little-endian
         08                       # pointer size
         00 10 00 00              # header bytes 4096
         00 10 00 00              # chunk bytes 4096
         02 00 00 00              # chunk count 2
         00 10 00 00 00 00 00 00  # dictionary at 4096
         00 01 00 00 00 00 00 00  # dictionary bytes 256
         00 11 00 00 00 00 00 00  # ring at 4352
         28 01 00 00              # metadata length 296
         e2 f8 b4 78              # metadata CRC32
         da ff 8d 29              # CRC32 of bytes 0..56
         00 00 00 00              # zero up to the live counters")
}

/// [`file_header`]'s metadata block (at byte 128 of the page).
const HEADER_META: &[u8] = b"pid=1234
ppid=1
hostname=node-07
rank=3
local_rank=0
world_size=
job_id=job42
start_wall_ns=1700000000000000000
start_mono_ns=123456789
start_ticks=18446744073709551615
clock_source=tsc
ticks_per_sec=2500000000
mode=full
writer=tprof 0.1.0
future_key=v=1
cmdline=python\x1ftrain.py\x1f--lr=1e-3\\nx\\\\y\x1f
";

#[test]
fn header_page_is_written_as_v1() {
    let mut page = vec![0xAAu8; HEADER_BYTES];
    file_header().write_page(&mut page);
    assert_region("fixed fields", &page[..off::LIVE_DROPPED], &header_fixed_bytes());
    assert!(page[off::LIVE_DROPPED..META_OFFSET].iter().all(|&b| b == 0), "live counters start at zero");
    let meta_end = META_OFFSET + HEADER_META.len();
    assert_eq!(
        String::from_utf8_lossy(&page[META_OFFSET..meta_end]),
        String::from_utf8_lossy(HEADER_META),
        "metadata block"
    );
    assert!(page[meta_end..].iter().all(|&b| b == 0), "the page is zero after the metadata");
    let (back, _, problems) = header::FileHeader::parse(&page, 0).expect("v1 header parses");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(back, file_header());
}

/// The records of the ring file test (timestamps in one chunk).
fn ring_records() -> Vec<Record> {
    vec![
        Record::ClockSync { ticks: 5000, mono_ns: 6000, wall_ns: 7000 },
        Record::Api {
            tid: 9,
            domain: ApiDomain::Driver,
            name: StrId(1),
            start: 5100,
            end: 5300,
            result: 0,
            correlation: 1,
            detail: StrId(2),
            stream: 0,
            arg: 4,
        },
        Record::Marker { kind: MarkerKind::StepBegin, ts: 5050, value: 1, name: StrId(0) },
    ]
}

#[test]
fn ring_file_regions_are_written_as_v1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("golden.tprof");
    let geom = RingGeometry { chunk_bytes: 4096, chunk_count: 2, dict_bytes: 256 };
    let mut w = RingWriter::create(&path, file_header(), geom).unwrap();
    // Two strings fit the 256-byte dictionary; the third fills it and goes inline into the ring.
    w.define_string(StrId(1), "cuLaunchKernel");
    w.define_string(StrId(2), "");
    w.append_all(&ring_records()[..2]);
    w.define_string(StrId(3), &"k".repeat(250));
    w.append(&ring_records()[2]);
    w.commit(5400);
    w.close(5500).unwrap();
    let data = std::fs::read(&path).unwrap();
    assert_eq!(data.len() as u64, geom.file_bytes());

    // The writer's header: the fixed fields with its geometry, the live counters it left.
    assert_region("ring header fixed fields", &data[..off::LIVE_DROPPED], &header_fixed_bytes());
    assert_region(
        "live counters",
        &data[off::LIVE_DROPPED..META_OFFSET],
        &hex("00 00 00 00 00 00 00 00  # dropped events
             01 00 00 00 00 00 00 00  # next sequence number
             24 00 00 00 00 00 00 00  # dictionary bytes used
             05 00 00 00 00 00 00 00  # flags: clean close, dictionary full
             7c 15 00 00 00 00 00 00  # last commit at tick 5500
             00 00 00 00 00 00 00 00  # CUPTI dropped records
             03 00 00 00 00 00 00 00  # records written
             00 00 00 00 00 00 00 00  # reserved"),
    );
    assert_eq!(flags::CLEAN_CLOSE | flags::DICT_FULL, u64::from_le_bytes(data[88..96].try_into().unwrap()));

    // Dictionary entries `[len u32][crc u32][varint id + bytes]`, padded to 4, then zeros.
    let dict = &data[HEADER_BYTES..HEADER_BYTES + 256];
    let dict_expected =
        hex("0f 00 00 00  ed 81 3c 14  01 63 75 4c 61 75 6e 63 68 4b 65 72 6e 65 6c  00  # 1 cuLaunchKernel
         01 00 00 00  a1 8e 0c 3c  02  00 00 00                                       # 2 (empty)");
    assert_region("dictionary", &dict[..dict_expected.len()], &dict_expected);
    assert!(dict[dict_expected.len()..].iter().all(|&b| b == 0), "dictionary ends in zeros");

    // Chunk 0: magic, reserved, commit word (len | crc << 32), seq, base ticks; then the frames.
    let chunk = &data[HEADER_BYTES + 256..HEADER_BYTES + 256 + 4096];
    assert_eq!(chunk[..4], CHUNK_MAGIC);
    assert_region(
        "chunk header",
        &chunk[..CHUNK_HEADER_BYTES],
        &hex("54 50 43 4b               # magic TPCK
             00 00 00 00               # reserved
             19 01 00 00  ef b8 0a 33  # commit word: payload 281 bytes, CRC32
             00 00 00 00 00 00 00 00   # sequence number 0
             88 13 00 00 00 00 00 00   # base ticks 5000"),
    );
    let payload_expected = [
        hex("01 06 | 8827 f02e d836                    # ClockSync (absolute)
             02 0c | 09 01 01 c801 9003 00 02 02 00 04  # Api, start 5100 against the clock pair's 5000
             13 fb | 03                                 # string 3, inline: the dictionary is full"),
        vec![b'k'; 250],
        hex("11 04 | 01 63 01 00  # Marker at 5050: a backwards delta"),
    ]
    .concat();
    let payload_end = CHUNK_HEADER_BYTES + payload_expected.len();
    assert_region("chunk payload", &chunk[CHUNK_HEADER_BYTES..payload_end], &payload_expected);
    assert!(chunk[payload_end..].iter().all(|&b| b == 0), "nothing after the committed payload");
    assert!(data[HEADER_BYTES + 256 + 4096..].iter().all(|&b| b == 0), "chunk 1 never written");

    // And the reader sees what was written.
    let r = RingReader::open(&path).unwrap();
    assert!(r.damage().is_empty(), "{:?}", r.damage());
    let strings = r.all_strings();
    assert_eq!(strings.get(StrId(1)), Some("cuLaunchKernel"));
    assert_eq!(strings.get(StrId(3)).map(str::len), Some(250));
    let recs: Vec<Record> = r
        .records()
        .filter_map(|d| match d.unwrap() {
            Decoded::Record(rec) => Some(rec),
            _ => None,
        })
        .collect();
    assert_eq!(recs, ring_records());
}
