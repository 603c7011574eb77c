//! Compact, framed encoding of [`Record`]s.
//!
//! Frame: `[type u8][len u8][payload]`, or `[type u8][0xFF][len u32 LE][payload]` for payloads of 255
//! bytes or more. Payload fields are LEB128 varints; timestamps are zigzag deltas against the previous
//! timestamp in the same chunk (intervals store `end` relative to `start`), correlation ids are deltas
//! against the previous correlation id. The delta state resets at every chunk start, so every chunk
//! decodes on its own. Readers skip unknown types by their length and ignore trailing payload bytes they
//! do not know (newer writers only ever append fields). Each record type's payload layout is one row
//! of the table below; the encoder and the decoder are both generated from it.

mod fields;

use crate::record::*;
use crate::varint::{get_u64, put_u64};
use fields::{record_codec, PayloadWriter, WindowDecoded, WindowWriter};

/// Room reserved for one record's payload (other than a string): at least the widest the record table
/// allows (checked below the table).
const MAX_RECORD_PAYLOAD: usize = 192;

/// Per-chunk delta state, shared by the encoder and the decoder.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeltaState {
    pub prev_ts: u64,
    pub prev_corr: u32,
}

impl DeltaState {
    /// The state at the start of a chunk whose first timestamp is `base_ts`.
    pub fn at_chunk_start(base_ts: u64) -> DeltaState {
        DeltaState { prev_ts: base_ts, prev_corr: 0 }
    }
}

/// A decoded item: a record, an inline string definition, or a record type this version does not know.
#[derive(Debug, Clone, PartialEq)]
pub enum Decoded<'a> {
    Record(Record),
    String { id: StrId, bytes: &'a [u8] },
    Unknown { code: u8, payload: &'a [u8] },
}

/// Why a frame could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodecError {
    /// The frame header or payload runs past the end of the buffer.
    Truncated { needed: usize, available: usize },
    /// A known record type whose payload is too short or malformed.
    BadPayload { code: u8, what: &'static str },
}

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CodecError::Truncated { needed, available } => {
                write!(f, "record truncated: needs {needed} bytes, {available} available")
            }
            CodecError::BadPayload { code, what } => {
                write!(f, "malformed {} record (type {code}): {what}", type_name(*code))
            }
        }
    }
}

// Each record type's payload: its fields in wire order, each with its encoding (the encodings are
// described in `fields`). The payload encoder and decoder, `Record::type_code` and the widest payload
// come from this table. A row that misses a field of its variant, or an encoding that does not fit
// the field's type, does not compile. Version 1 is on disk: never reorder or change a row; a newer version only
// appends fields at the end of a row (old readers ignore them) or adds rows with new type codes.
record_codec! {
    records {
        // Absolute, not a delta: readers pick clock pairs out of a chunk without decoding the rest.
        ClockSync = CLOCK_SYNC { ticks: u64, mono_ns: u64, wall_ns: u64 }
        Api = API {
            tid: u32, domain: byte(ApiDomain), name: str, start: tick, end: since(start), result: i32,
            correlation: corr, detail: str, stream: u64, arg: u64,
        }
        Kernel = KERNEL {
            device: u32, context: u32, stream: u32, start: tick, end: since(start), grid: [u32; 3],
            block: [u32; 3], registers: u16, shared_mem: u32, correlation: corr, name: str, graph_id: u32,
        }
        Memcpy = MEMCPY {
            device: u32, context: u32, stream: u32, start: tick, end: since(start), bytes: u64,
            kind: byte(CopyKind), src_kind: byte(MemoryKind), dst_kind: byte(MemoryKind), correlation: corr,
        }
        Memset = MEMSET {
            device: u32, context: u32, stream: u32, start: tick, end: since(start), bytes: u64, value: u32,
            dst_kind: byte(MemoryKind), correlation: corr,
        }
        Sync = SYNC {
            kind: byte(SyncKind), tid: u32, context: u32, stream: u32, event: u64, start: tick,
            end: since(start), correlation: corr, result: i32,
        }
        Memory = MEMORY {
            op: byte(MemOp), space: byte(MemSpace), device: u32, address: u64, bytes: u64, reserved: u64,
            ts: tick, result: i32, correlation: corr, tid: u32,
        }
        Collective = COLLECTIVE {
            tid: u32, op: byte(CollOp), start: tick, end: since(start), comm: u64, rank: u32, nranks: u32,
            count: u64, datatype: u8, bytes: u64, peer: i32, stream: u64, seq: u64, result: i32,
            correlation: corr, device: u32,
        }
        ExternalCorrelation = EXTERNAL_CORRELATION { kind: u8, external_id: u64, correlation: corr }
        NvtxPush = NVTX_PUSH { tid: u32, domain: str, name: str, ts: tick }
        NvtxPop = NVTX_POP { tid: u32, domain: str, ts: tick }
        NvtxStart = NVTX_START { tid: u32, domain: str, name: str, id: u64, ts: tick }
        NvtxEnd = NVTX_END { tid: u32, id: u64, ts: tick }
        NvtxMark = NVTX_MARK { tid: u32, domain: str, name: str, ts: tick }
        ThreadName = THREAD_NAME { tid: u32, name: str }
        Counter = COUNTER { name: str, device: u32, ts: tick, value: f64 }
        Marker = MARKER { kind: byte(MarkerKind), ts: tick, value: u64, name: str }
        Overhead = OVERHEAD { kind: u8, start: tick, end: since(start), tid: u32 }
        ApiRepeat = API_REPEAT {
            tid: u32, domain: byte(ApiDomain), name: str, start: tick, end: since(start), result: i32,
            stream: u64, calls: u64, busy: u64,
        }
        NcclCommInfo = NCCL_COMM_INFO {
            comm: u64, name: str, nnodes: u32, nranks: u32, rank: u32, plugin_version: u8, ts: tick,
        }
        NcclTask = NCCL_TASK {
            comm: u64, seq: u64, op: byte(CollOp), count: u64, datatype: str, algo: str, proto: str,
            nchannels: u8, nwarps: u8, peer: i32, graph_captured: u8, start: tick, end: since(start),
            gpu_start: u64, gpu_end: since(gpu_start), channels_seen: u8, correlation: corr,
        }
        NcclProxy = NCCL_PROXY {
            comm: u64, seq: u64, channel: u8, peer: i32, is_send: u8, steps: u32, bytes: u64, start: tick,
            end: since(start), wire: u64, wait: u64,
        }
        TopoGpu = TOPO_GPU {
            ts: tick, host: str, device: u32, bus_id: str, numa_node: i32, nvlinks: u32, nvlink_version: u32,
            gpus: u32,
        }
        TopoNic = TOPO_NIC { ts: tick, name: str, port: u32, kind: u8, rate_mbps: u64, numa_node: i32, path: u8 }
        TopoGpuPath = TOPO_GPU_PATH { ts: tick, device: u32, peer: u32, level: u8, nvlink: u8 }
        NcclSetting = NCCL_SETTING { ts: tick, name: str, value: str }
        HostSample = HOST_SAMPLE { scope: byte(HostScope), id: u32, metric: byte(HostMetric), ts: tick, value: u64 }
        HostEntity = HOST_ENTITY { scope: byte(HostScope), id: u32, parent: u32, ts: tick, name: str }
    }
    encode_only {
        // The string id alone; decoders read type STRING as `Decoded::String` (see `encode_string_into`).
        StringRef = STRING { id: str }
    }
}

const _: () = assert!(WIDEST_PAYLOAD <= MAX_RECORD_PAYLOAD);

/// Writes the frame header for `code` and a payload of `len` bytes at `out[0..]`; returns its size.
fn put_frame(out: &mut [u8], code: u8, len: usize) -> Option<usize> {
    if len < 255 {
        if out.len() < 2 + len {
            return None;
        }
        out[0] = code;
        out[1] = len as u8;
        Some(2)
    } else {
        if out.len() < 6 + len || len > u32::MAX as usize {
            return None;
        }
        out[0] = code;
        out[1] = 0xff;
        out[2..6].copy_from_slice(&(len as u32).to_le_bytes());
        Some(6)
    }
}

/// Encodes one record into `out`. Returns the bytes written, or None (state untouched) when it does not fit.
pub fn encode_into(rec: &Record, st: &mut DeltaState, out: &mut [u8]) -> Option<usize> {
    if let Some(window) = out.first_chunk_mut::<WINDOW>() {
        return Some(encode_window(rec, st, window));
    }
    encode_checked(rec, st, out)
}

/// Bytes of output with which [`encode_window`] cannot fail.
pub const WINDOW: usize = 256;
const _: () = assert!(2 + MAX_RECORD_PAYLOAD < WINDOW && WINDOW.is_power_of_two());

/// Encodes one record at the start of `window`, which holds any record: the payload goes after the short
/// frame header with no per-byte checks. Returns the bytes written (the same bytes as [`encode_into`]).
#[inline]
pub fn encode_window(rec: &Record, st: &mut DeltaState, window: &mut [u8; WINDOW]) -> usize {
    // The delta state in registers while the fields go out.
    let mut next = *st;
    let mut w = WindowWriter { buf: window, pos: 2 };
    encode_payload(rec, &mut next, &mut w);
    *st = next;
    let len = w.pos - 2;
    w.buf[0] = rec.type_code();
    w.buf[1] = len as u8;
    w.pos
}

/// [`encode_into`] near the end of the output: every byte checked.
#[inline(never)]
fn encode_checked(rec: &Record, st: &mut DeltaState, out: &mut [u8]) -> Option<usize> {
    if out.len() < 2 {
        return None;
    }
    // Encode the payload in place after a short frame header; records are almost always < 255 bytes.
    let mut next = *st;
    let room = out.len().min(2 + 254);
    let (head, body) = out[..room].split_at_mut(2);
    let mut w = PayloadWriter { buf: body, pos: 0, ok: true };
    encode_payload(rec, &mut next, &mut w);
    if w.ok {
        let len = w.pos;
        head[0] = rec.type_code();
        head[1] = len as u8;
        *st = next;
        return Some(2 + len);
    }
    if room == out.len() && out.len() < 2 + 254 {
        // Did not fit in what is left of the buffer.
        return None;
    }
    // Rare: a payload of 255 bytes or more (not produced by v1 records) goes through a scratch buffer.
    let mut scratch = [0u8; MAX_RECORD_PAYLOAD * 2];
    let mut next = *st;
    let mut w = PayloadWriter { buf: &mut scratch, pos: 0, ok: true };
    encode_payload(rec, &mut next, &mut w);
    if !w.ok {
        return None;
    }
    let len = w.pos;
    let head = put_frame(out, rec.type_code(), len)?;
    out[head..head + len].copy_from_slice(&scratch[..len]);
    *st = next;
    Some(head + len)
}

/// Encodes an inline string definition (type [`type_code::STRING`]): varint id, then the bytes.
pub fn encode_string_into(id: StrId, text: &[u8], out: &mut [u8]) -> Option<usize> {
    let mut idbuf = [0u8; 10];
    let mut n = 0;
    put_u64(&mut idbuf, &mut n, id.0.into());
    let len = n + text.len();
    let head = put_frame(out, type_code::STRING, len)?;
    out[head..head + n].copy_from_slice(&idbuf[..n]);
    out[head + n..head + len].copy_from_slice(text);
    Some(head + len)
}

/// Encodes into a growable vector (convenience for tests and tools).
pub fn encode_to_vec(rec: &Record, st: &mut DeltaState, out: &mut Vec<u8>) {
    let mut buf = [0u8; MAX_RECORD_PAYLOAD + 6];
    let n = encode_into(rec, st, &mut buf).expect("record fits the scratch buffer");
    out.extend_from_slice(&buf[..n]);
}

/// Splits the frame at the start of `buf`: returns (type code, payload, total frame size).
pub fn split_frame(buf: &[u8]) -> Result<(u8, &[u8], usize), CodecError> {
    if buf.len() < 2 {
        return Err(CodecError::Truncated { needed: 2, available: buf.len() });
    }
    let code = buf[0];
    let (head, len) = if buf[1] == 0xff {
        if buf.len() < 6 {
            return Err(CodecError::Truncated { needed: 6, available: buf.len() });
        }
        (6usize, u32::from_le_bytes([buf[2], buf[3], buf[4], buf[5]]) as usize)
    } else {
        (2usize, buf[1] as usize)
    };
    let total = head.checked_add(len).ok_or(CodecError::Truncated { needed: usize::MAX, available: buf.len() })?;
    if buf.len() < total {
        return Err(CodecError::Truncated { needed: total, available: buf.len() });
    }
    Ok((code, &buf[head..total], total))
}

/// Decodes the frame at the start of `buf`. Returns the item and the frame size.
pub fn decode_one<'a>(buf: &'a [u8], st: &mut DeltaState) -> Result<(Decoded<'a>, usize), CodecError> {
    decode_one_with(buf, st, &mut TakeItem)
}

/// Where [`decode_one_with`] hands the item it decoded. Mark `visit` `#[inline(always)]`: it is
/// then inlined into the code of each record type, where its match on the record's type folds away.
pub trait DecodedVisitor<'a> {
    type Out;
    fn visit(&mut self, item: Decoded<'a>) -> Self::Out;
}

/// The visitor of [`decode_one`]: the item itself.
struct TakeItem;

impl<'a> DecodedVisitor<'a> for TakeItem {
    type Out = Decoded<'a>;
    #[inline(always)]
    fn visit(&mut self, item: Decoded<'a>) -> Decoded<'a> {
        item
    }
}

/// [`decode_one`], handing the item to `visit` where it is made: a record goes from its fields to
/// the visitor in the code of its own type, with no copy through a returned [`Decoded`]. Returns
/// what the visitor returned and the frame size; the visitor is not called on an error.
#[inline(always)]
pub fn decode_one_with<'a, V: DecodedVisitor<'a>>(
    buf: &'a [u8],
    st: &mut DeltaState,
    visit: &mut V,
) -> Result<(V::Out, usize), CodecError> {
    // Most frames: a record with a short header, and the chunk goes on for a window past its start.
    if let Some(window) = buf.first_chunk::<WINDOW>() {
        if let Some(done) = decode_window_frame(window, st, visit) {
            return Ok(done);
        }
    }
    decode_checked_with(buf, st, visit)
}

/// [`decode_one_with`]'s fast path, for a frame at the start of `window` (the chunk goes on for a
/// window past the frame's start): what the visitor returned and the frame size; None, with `st`
/// untouched and the visitor not called, for a frame [`decode_checked_with`] must decode (a long
/// frame, a string definition, or one in which something did not decode).
#[inline(always)]
pub(crate) fn decode_window_frame<'a, V: DecodedVisitor<'a>>(
    window: &'a [u8; WINDOW],
    st: &mut DeltaState,
    visit: &mut V,
) -> Option<(V::Out, usize)> {
    let (code, len) = (window[0], usize::from(window[1]));
    if len == 0xff || code == type_code::STRING {
        return None;
    }
    let mut next = *st;
    match decode_window_with(code, window, len, &mut next, visit) {
        WindowDecoded::Visited(out) => {
            *st = next;
            Some((out, 2 + len))
        }
        WindowDecoded::Unknown => Some((visit.visit(Decoded::Unknown { code, payload: &window[2..2 + len] }), 2 + len)),
        WindowDecoded::Retry => None,
    }
}

/// [`decode_one_with`] with every read checked: frames near the end of a chunk, long frames, string
/// definitions, and frames the window decoder found something wrong in (this says what).
#[inline(always)]
pub(crate) fn decode_checked_with<'a, V: DecodedVisitor<'a>>(
    buf: &'a [u8],
    st: &mut DeltaState,
    visit: &mut V,
) -> Result<(V::Out, usize), CodecError> {
    let (code, payload, total) = split_frame(buf)?;
    if code == type_code::STRING {
        let mut pos = 0;
        let id = get_u64(payload, &mut pos)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or(CodecError::BadPayload { code, what: "string id missing" })?;
        return Ok((visit.visit(Decoded::String { id: StrId(id), bytes: &payload[pos..] }), total));
    }
    // The delta state moves on only when the whole record decoded.
    let mut next = *st;
    match decode_payload_with(code, payload, &mut next, visit)? {
        Some(out) => {
            *st = next;
            Ok((out, total))
        }
        None => Ok((visit.visit(Decoded::Unknown { code, payload }), total)),
    }
}

/// Returns the type code and frame size at the start of `buf` without decoding the payload.
pub fn peek_frame(buf: &[u8]) -> Result<(u8, usize), CodecError> {
    split_frame(buf).map(|(code, _, total)| (code, total))
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample_records() -> Vec<Record> {
        vec![
            Record::ClockSync { ticks: 1_000_000, mono_ns: 5_000_000_000, wall_ns: 1_700_000_000_000_000_000 },
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
            Record::Memset {
                device: 0,
                context: 1,
                stream: 7,
                start: 1_320_000,
                end: 1_321_000,
                bytes: 4096,
                value: 0,
                dst_kind: MemoryKind::Device,
                correlation: 19,
            },
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
            Record::Memory {
                op: MemOp::AllocFailed,
                space: MemSpace::Device,
                device: 0,
                address: 0,
                bytes: 1 << 34,
                reserved: 79 << 30,
                ts: 1_410_000,
                result: 2,
                correlation: 21,
                tid: 4242,
            },
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
            Record::ExternalCorrelation { kind: 3, external_id: 99, correlation: 22 },
            Record::NvtxPush { tid: 4242, domain: StrId(0), name: StrId(5), ts: 900_000 },
            Record::NvtxPop { tid: 4242, domain: StrId(0), ts: 1_500_000 },
            Record::NvtxStart { tid: 1, domain: StrId(2), name: StrId(6), id: 77, ts: 1_500_100 },
            Record::NvtxEnd { tid: 2, id: 77, ts: 1_500_200 },
            Record::NvtxMark { tid: 1, domain: StrId(2), name: StrId(7), ts: 1_500_300 },
            Record::ThreadName { tid: 1, name: StrId(8) },
            Record::Counter { name: StrId(10), device: 0, ts: 1_600_000, value: 87.5 },
            Record::Marker { kind: MarkerKind::HangSuspected, ts: 1_700_000, value: 300_000_000_000, name: StrId(11) },
            Record::Overhead { kind: 1, start: 1_800_000, end: 1_800_500, tid: 3 },
            Record::NcclCommInfo {
                comm: 0xfeed_0000_0001,
                name: StrId(12),
                nnodes: 2,
                nranks: 8,
                rank: 5,
                plugin_version: 6,
                ts: 1_900_000,
            },
            Record::NcclTask {
                comm: 0xfeed_0000_0001,
                seq: 17,
                op: CollOp::AllReduce,
                count: 1 << 21,
                datatype: StrId(13),
                algo: StrId(14),
                proto: StrId(15),
                nchannels: 8,
                nwarps: 16,
                peer: -1,
                graph_captured: 1,
                start: 1_900_100,
                end: 1_900_200,
                gpu_start: 1_700_000_000_000_000_000,
                gpu_end: 1_700_000_000_001_500_000,
                channels_seen: 8,
                correlation: 23,
            },
            Record::NcclProxy {
                comm: 0xfeed_0000_0001,
                seq: 17,
                channel: 3,
                peer: 4,
                is_send: 1,
                steps: 4,
                bytes: 1 << 20,
                start: 1_900_300,
                end: 1_950_000,
                wire: 40_000,
                wait: 9_000,
            },
            Record::HostEntity { scope: HostScope::Thread, id: 4243, parent: 4242, ts: 1_900_000, name: StrId(12) },
            Record::TopoGpu {
                ts: 1_000_100,
                host: StrId(16),
                device: 3,
                bus_id: StrId(17),
                numa_node: 1,
                nvlinks: 18,
                nvlink_version: 6,
                gpus: 8,
            },
            Record::TopoNic {
                ts: 1_000_200,
                name: StrId(18),
                port: 1,
                kind: 1,
                rate_mbps: 400_000,
                numa_node: -1,
                path: 3,
            },
            Record::TopoGpuPath { ts: 1_000_300, device: 3, peer: 7, level: 5, nvlink: 1 },
            Record::NcclSetting { ts: 1_000_400, name: StrId(19), value: StrId(20) },
            Record::HostSample {
                scope: HostScope::Thread,
                id: 4243,
                metric: HostMetric::CpuUserNs,
                ts: 1_900_000,
                value: 12_340_000_000,
            },
        ]
    }

    #[test]
    fn every_record_type_roundtrips() {
        let recs = sample_records();
        let mut st = DeltaState::at_chunk_start(1_000_000);
        let mut buf = Vec::new();
        for r in &recs {
            encode_to_vec(r, &mut st, &mut buf);
        }
        let mut st = DeltaState::at_chunk_start(1_000_000);
        let mut pos = 0;
        let mut out = Vec::new();
        while pos < buf.len() {
            let (d, n) = decode_one(&buf[pos..], &mut st).unwrap();
            pos += n;
            match d {
                Decoded::Record(r) => out.push(r),
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(out, recs);
    }

    #[test]
    fn api_and_kernel_records_are_compact() {
        let recs = sample_records();
        let mut st = DeltaState::at_chunk_start(1_000_000);
        let mut api = Vec::new();
        encode_to_vec(&recs[1], &mut st, &mut api);
        let mut kern = Vec::new();
        encode_to_vec(&recs[2], &mut st, &mut kern);
        assert!(api.len() <= 24, "api record is {} bytes", api.len());
        assert!(kern.len() <= 28, "kernel record is {} bytes", kern.len());
        assert!((api.len() + kern.len()) / 2 <= 24);
    }

    /// Records with every field at its widest (longest varints, largest deltas).
    fn widest_records() -> Vec<Record> {
        sample_records()
            .into_iter()
            .map(|r| match r {
                Record::Collective { op, .. } => Record::Collective {
                    tid: u32::MAX,
                    op,
                    start: u64::MAX,
                    end: 0,
                    comm: u64::MAX,
                    rank: u32::MAX,
                    nranks: u32::MAX,
                    count: u64::MAX,
                    datatype: u8::MAX,
                    bytes: u64::MAX,
                    peer: i32::MIN,
                    stream: u64::MAX,
                    seq: u64::MAX,
                    result: i32::MIN,
                    correlation: u32::MAX,
                    device: u32::MAX,
                },
                Record::Kernel { .. } => Record::Kernel {
                    device: u32::MAX,
                    context: u32::MAX,
                    stream: u32::MAX,
                    start: 0,
                    end: u64::MAX,
                    grid: [u32::MAX; 3],
                    block: [u32::MAX; 3],
                    registers: u16::MAX,
                    shared_mem: u32::MAX,
                    correlation: 0,
                    name: StrId(u32::MAX),
                    graph_id: u32::MAX,
                },
                other => other,
            })
            .collect()
    }

    #[test]
    fn window_and_checked_encoders_write_the_same_bytes() {
        for recs in [sample_records(), widest_records()] {
            for base in [0u64, 1_000_000, u64::MAX] {
                let mut st_fast = DeltaState { prev_ts: base, prev_corr: u32::MAX };
                let mut st_checked = st_fast;
                for r in &recs {
                    let before = st_checked;
                    let mut window = [0u8; WINDOW];
                    let n = encode_window(r, &mut st_fast, &mut window);
                    // Exactly the frame's size: the checked path, with no spare room.
                    let mut exact = vec![0u8; n];
                    let m = encode_checked(r, &mut st_checked, &mut exact).expect("fits its own size");
                    assert_eq!((n, &window[..n]), (m, &exact[..]), "{r:?}");
                    assert_eq!((st_fast.prev_ts, st_fast.prev_corr), (st_checked.prev_ts, st_checked.prev_corr));
                    assert!(n - 2 <= WIDEST_PAYLOAD, "{r:?}: {n} bytes");
                    // One byte short: the checked path refuses and leaves the state alone.
                    let mut short = vec![0u8; n - 1];
                    let mut st = before;
                    assert_eq!(encode_into(r, &mut st, &mut short), None);
                    assert_eq!((st.prev_ts, st.prev_corr), (before.prev_ts, before.prev_corr));
                }
            }
        }
    }

    /// The window decoder reads what the checked one reads, on valid records (each alone, as the
    /// first frame of a chunk tail) and on random bytes, damaged payloads and overlong varints.
    #[test]
    fn window_and_checked_decoders_agree() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut frames: Vec<Vec<u8>> = Vec::new();
        for recs in [sample_records(), widest_records()] {
            let mut st = DeltaState { prev_ts: 1_000_000, prev_corr: 7 };
            for r in &recs {
                let mut f = Vec::new();
                encode_to_vec(r, &mut st, &mut f);
                // As written; cut short (its length byte kept); one byte flipped; continuation bits set.
                frames.push(f.clone());
                for _ in 0..40 {
                    let mut g = f.clone();
                    match rnd() % 4 {
                        0 => {
                            let cut = 2 + (rnd() as usize % (g.len() - 1).max(1)).min(g.len() - 2);
                            g[1] = (cut - 2) as u8;
                            g.truncate(cut);
                        }
                        1 => {
                            let i = 2 + rnd() as usize % (g.len() - 2).max(1);
                            if i < g.len() {
                                g[i] = rnd() as u8;
                            }
                        }
                        2 => {
                            for b in g.iter_mut().skip(2) {
                                if rnd() % 3 == 0 {
                                    *b |= 0x80;
                                }
                            }
                        }
                        _ => g.extend((0..rnd() % 12).map(|_| 0xff)),
                    }
                    g[1] = g[1].min((g.len() - 2) as u8);
                    frames.push(g);
                }
            }
        }
        for _ in 0..2000 {
            let len = rnd() as usize % 40;
            let mut g: Vec<u8> = (0..len + 2).map(|_| rnd() as u8).collect();
            g[0] = (rnd() % 32) as u8;
            g[1] = len as u8;
            frames.push(g);
        }
        for f in &frames {
            // Followed by bytes that continue any varint, so a read past the payload would be seen.
            let mut buf = f.clone();
            buf.resize(f.len() + WINDOW, 0x80);
            for base in [0u64, 1_000_000, u64::MAX] {
                let st0 = DeltaState { prev_ts: base, prev_corr: 3 };
                let (mut a, mut b) = (st0, st0);
                let fast = decode_one(&buf, &mut a);
                let checked = decode_checked_with(&buf, &mut b, &mut TakeItem);
                assert_eq!(fast, checked, "{f:?}");
                assert_eq!((a.prev_ts, a.prev_corr), (b.prev_ts, b.prev_corr), "{f:?}");
            }
        }
    }

    #[test]
    fn unknown_types_are_skipped_by_length() {
        let mut buf = vec![200u8, 3, 1, 2, 3];
        let mut st = DeltaState::default();
        encode_to_vec(&Record::ThreadName { tid: 1, name: StrId(2) }, &mut st, &mut buf);
        let mut st = DeltaState::default();
        let (d, n) = decode_one(&buf, &mut st).unwrap();
        assert_eq!(d, Decoded::Unknown { code: 200, payload: &[1, 2, 3] });
        let (d, _) = decode_one(&buf[n..], &mut st).unwrap();
        assert_eq!(d, Decoded::Record(Record::ThreadName { tid: 1, name: StrId(2) }));
    }

    #[test]
    fn trailing_fields_from_newer_writers_are_ignored() {
        let mut st = DeltaState::default();
        let mut buf = Vec::new();
        encode_to_vec(&Record::ThreadName { tid: 1, name: StrId(2) }, &mut st, &mut buf);
        buf[1] += 2;
        buf.extend_from_slice(&[0x05, 0x06]);
        let mut st = DeltaState::default();
        let (d, n) = decode_one(&buf, &mut st).unwrap();
        assert_eq!(n, buf.len());
        assert_eq!(d, Decoded::Record(Record::ThreadName { tid: 1, name: StrId(2) }));
    }

    #[test]
    fn truncated_frames_and_payloads_are_errors_not_panics() {
        let mut st = DeltaState::default();
        let mut buf = Vec::new();
        encode_to_vec(&sample_records()[2], &mut st, &mut buf);
        for cut in 0..buf.len() {
            let mut st = DeltaState::default();
            assert!(decode_one(&buf[..cut], &mut st).is_err(), "cut at {cut}");
        }
        // A frame whose declared length hides a short payload.
        let mut st = DeltaState::default();
        assert!(matches!(decode_one(&[type_code::KERNEL, 2, 1, 1], &mut st), Err(CodecError::BadPayload { .. })));
    }

    #[test]
    fn long_strings_use_the_extended_frame() {
        let text = vec![b'x'; 1000];
        let mut buf = vec![0u8; 1100];
        let n = encode_string_into(StrId(300), &text, &mut buf).unwrap();
        let mut st = DeltaState::default();
        let (d, m) = decode_one(&buf[..n], &mut st).unwrap();
        assert_eq!(m, n);
        assert_eq!(d, Decoded::String { id: StrId(300), bytes: &text[..] });
    }
}
