//! Codec benchmark: ns per record to encode (the writer's window path and the checked path) and to
//! decode, on a mix like a training step's (launches and kernels most, then copies, syncs, NVTX,
//! collectives), every record kind present. The best of several rounds, so that a busy machine
//! disturbs it less; compare two builds by running each on the same machine one after the other.
//! Run: `cargo bench -p tprof-format --bench codec [-- RECORDS ROUNDS]`.

use std::hint::black_box;
use std::time::Instant;

use tprof_format::codec::{decode_one, encode_into, encode_window, DeltaState, WINDOW};
use tprof_format::*;

/// A well-mixed 64-bit value from `i` (the same mix every run).
fn spread(i: u64) -> u64 {
    let x = (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    x ^ (x >> 29)
}

fn mix(n: usize) -> Vec<Record> {
    let mut ts = 1_000_000_000u64;
    let mut corr = 1u32;
    let mut out = Vec::with_capacity(n);
    for i in 0..n as u64 {
        let r = spread(i);
        ts += 200 + (r >> 40) % 5000;
        corr += 1;
        let name = StrId(100 + (r % 200) as u32);
        let start = ts;
        let end = ts + 1000 + (r >> 8) % 100_000;
        out.push(match r % 20 {
            0..=6 => Record::Api {
                tid: 4242,
                domain: ApiDomain::Runtime,
                name: StrId(7),
                start,
                end: start + 3000,
                result: 0,
                correlation: corr,
                detail: name,
                stream: 0x5555_0000,
                arg: 388 * 256,
            },
            7..=12 => Record::Kernel {
                device: 0,
                context: 1,
                stream: 13,
                start,
                end,
                grid: [388, 1, 1],
                block: [256, 1, 1],
                registers: 128,
                shared_mem: 49152,
                correlation: corr,
                name,
                graph_id: 0,
            },
            13 => Record::Memcpy {
                device: 0,
                context: 1,
                stream: 7,
                start,
                end,
                bytes: 1 << 20,
                kind: CopyKind::HtoD,
                src_kind: MemoryKind::Pinned,
                dst_kind: MemoryKind::Device,
                correlation: corr,
            },
            14 => Record::Memset {
                device: 0,
                context: 1,
                stream: 7,
                start,
                end,
                bytes: 4096,
                value: 0,
                dst_kind: MemoryKind::Device,
                correlation: corr,
            },
            15 => Record::Sync {
                kind: SyncKind::StreamSynchronize,
                tid: 4242,
                context: 1,
                stream: 7,
                event: 0,
                start,
                end,
                correlation: corr,
                result: 0,
            },
            16 => Record::Collective {
                tid: 4242,
                op: CollOp::AllReduce,
                start,
                end,
                comm: 0xdead_beef_1234_5678,
                rank: 3,
                nranks: 8,
                count: 1 << 22,
                datatype: 7,
                bytes: 1 << 24,
                peer: -1,
                stream: 0x5555_0000,
                seq: u64::from(corr),
                result: 0,
                correlation: corr,
                device: 3,
            },
            17 => Record::NvtxPush { tid: 4242, domain: StrId(6), name: StrId(2), ts },
            18 => Record::NvtxPop { tid: 4242, domain: StrId(6), ts },
            _ => match (r >> 16) % 10 {
                0 => Record::ClockSync { ticks: ts, mono_ns: ts, wall_ns: ts + 1_700_000_000_000_000_000 },
                1 => Record::Memory {
                    op: MemOp::Alloc,
                    space: MemSpace::Device,
                    device: 0,
                    address: 0x7f00_0000_0000 + (r & 0xffff_f000),
                    bytes: 1 << 20,
                    reserved: 1 << 30,
                    ts,
                    result: 0,
                    correlation: corr,
                    tid: 4242,
                },
                2 => Record::ExternalCorrelation { kind: 1, external_id: u64::from(corr), correlation: corr },
                3 => Record::NvtxStart { tid: 4242, domain: StrId(6), name: StrId(3), id: u64::from(corr), ts },
                4 => Record::NvtxEnd { tid: 4242, id: u64::from(corr), ts },
                5 => Record::NvtxMark { tid: 4242, domain: StrId(6), name: StrId(4), ts },
                6 => Record::ThreadName { tid: 4242, name: StrId(13) },
                7 => Record::Counter { name: StrId(20), device: 0, ts, value: 87.5 },
                8 => Record::Marker { kind: MarkerKind::StepBegin, ts, value: u64::from(corr), name: StrId(0) },
                _ => Record::Overhead { kind: 1, start, end, tid: 4242 },
            },
        });
    }
    out
}

/// Best ns per record of `rounds` runs of `f`, which handles `n` records.
fn best(rounds: usize, n: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64 / n as f64
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(15);
    let recs = mix(n);
    let mut buf = vec![0u8; n * 80 + WINDOW];
    let base = 1_000_000_000u64;

    let mut len = 0;
    let window = best(rounds, n, || {
        let mut st = DeltaState::at_chunk_start(base);
        let mut pos = 0;
        for r in &recs {
            let w = buf[pos..].first_chunk_mut::<WINDOW>().expect("room");
            pos += encode_window(black_box(r), &mut st, w);
        }
        len = black_box(pos);
    });
    let bytes = buf[..len].to_vec();
    let checked = best(rounds, n, || {
        let mut st = DeltaState::at_chunk_start(base);
        let mut pos = 0;
        for r in &recs {
            // A window-less slice: the per-byte checked encoder.
            let end = (pos + 200).min(buf.len()).min(pos + WINDOW - 1);
            pos += encode_into(black_box(r), &mut st, &mut buf[pos..end]).expect("fits");
        }
        black_box(pos);
    });
    assert_eq!(&buf[..len], &bytes[..], "both encoders write the same bytes");
    let mut decoded = 0usize;
    let decode = best(rounds, n, || {
        let mut st = DeltaState::at_chunk_start(base);
        let mut pos = 0;
        let mut count = 0;
        while pos < bytes.len() {
            let (item, size) = decode_one(black_box(&bytes[pos..]), &mut st).expect("decodes");
            if let Decoded::Record(r) = item {
                black_box(r);
                count += 1;
            }
            pos += size;
        }
        decoded = count;
    });
    assert_eq!(decoded, n);
    println!("codec, {n} records ({:.1} B/record), best of {rounds}:", len as f64 / n as f64);
    println!("  encode (window)  {window:6.2} ns/record");
    println!("  encode (checked) {checked:6.2} ns/record");
    println!("  decode           {decode:6.2} ns/record");
}
