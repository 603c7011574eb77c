//! Compact, framed encoding of [`Record`]s.
//!
//! Frame: `[type u8][len u8][payload]`, or `[type u8][0xFF][len u32 LE][payload]` for payloads of 255
//! bytes or more. Payload fields are LEB128 varints; timestamps are zigzag deltas against the previous
//! timestamp in the same chunk (intervals store `end` relative to `start`), correlation ids are deltas
//! against the previous correlation id. The delta state resets at every chunk start, so every chunk
//! decodes on its own. Readers skip unknown types by their length and ignore trailing payload bytes they
//! do not know (newer writers only ever append fields).

use crate::record::*;
use crate::varint::{delta, get_u64, put_u64, undelta};

/// Largest payload a record (other than a string) can need.
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

/// Where [`encode_payload`] writes: a bounds-checked slice ([`PayloadWriter`]) or, when the output has
/// room for any record, a fixed window with no per-byte checks ([`WindowWriter`]). Both write the same
/// bytes.
trait PayloadOut {
    fn u(&mut self, v: u64);
    fn raw(&mut self, bytes: &[u8]);
    #[inline(always)]
    fn ts(&mut self, st: &mut DeltaState, ts: u64) {
        self.u(delta(ts, st.prev_ts));
        st.prev_ts = ts;
    }
    #[inline(always)]
    fn end(&mut self, start: u64, end: u64) {
        self.u(delta(end, start));
    }
    #[inline(always)]
    fn corr(&mut self, st: &mut DeltaState, c: u32) {
        self.u(delta(u64::from(c), u64::from(st.prev_corr)));
        st.prev_corr = c;
    }
    #[inline(always)]
    fn i(&mut self, v: i64) {
        self.u(crate::varint::zigzag(v));
    }
}

struct PayloadWriter<'a> {
    buf: &'a mut [u8],
    pos: usize,
    ok: bool,
}

impl PayloadOut for PayloadWriter<'_> {
    #[inline]
    fn u(&mut self, v: u64) {
        self.ok &= put_u64(self.buf, &mut self.pos, v);
    }
    #[inline]
    fn raw(&mut self, bytes: &[u8]) {
        if self.pos + bytes.len() <= self.buf.len() {
            self.buf[self.pos..self.pos + bytes.len()].copy_from_slice(bytes);
            self.pos += bytes.len();
        } else {
            self.ok = false;
        }
    }
}

/// Writes into a window of [`WINDOW`] bytes known to hold the whole record: positions are masked
/// into the window (no bounds check or failure path per byte; the mask never bites, since no payload
/// reaches the window's end).
struct WindowWriter<'a> {
    buf: &'a mut [u8; WINDOW],
    pos: usize,
}

impl PayloadOut for WindowWriter<'_> {
    #[inline(always)]
    fn u(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.buf[self.pos & (WINDOW - 1)] = v as u8 | 0x80;
            self.pos += 1;
            v >>= 7;
        }
        self.buf[self.pos & (WINDOW - 1)] = v as u8;
        self.pos += 1;
    }
    #[inline(always)]
    fn raw(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.buf[self.pos & (WINDOW - 1)] = b;
            self.pos += 1;
        }
    }
}

#[inline(always)]
fn encode_payload<W: PayloadOut>(rec: &Record, st: &mut DeltaState, w: &mut W) {
    match *rec {
        Record::ClockSync { ticks, mono_ns, wall_ns } => {
            // Absolute, not a delta: readers pick clock pairs out of a chunk without decoding the rest.
            w.u(ticks);
            w.u(mono_ns);
            w.u(wall_ns);
        }
        Record::Api { tid, domain, name, start, end, result, correlation, detail, stream, arg } => {
            w.u(tid.into());
            w.u(domain as u64);
            w.u(name.0.into());
            w.ts(st, start);
            w.end(start, end);
            w.i(result.into());
            w.corr(st, correlation);
            w.u(detail.0.into());
            w.u(stream);
            w.u(arg);
        }
        Record::Kernel {
            device,
            context,
            stream,
            start,
            end,
            grid,
            block,
            registers,
            shared_mem,
            correlation,
            name,
            graph_id,
        } => {
            w.u(device.into());
            w.u(context.into());
            w.u(stream.into());
            w.ts(st, start);
            w.end(start, end);
            for g in grid {
                w.u(g.into());
            }
            for b in block {
                w.u(b.into());
            }
            w.u(registers.into());
            w.u(shared_mem.into());
            w.corr(st, correlation);
            w.u(name.0.into());
            w.u(graph_id.into());
        }
        Record::Memcpy { device, context, stream, start, end, bytes, kind, src_kind, dst_kind, correlation } => {
            w.u(device.into());
            w.u(context.into());
            w.u(stream.into());
            w.ts(st, start);
            w.end(start, end);
            w.u(bytes);
            w.u(kind as u64);
            w.u(src_kind as u64);
            w.u(dst_kind as u64);
            w.corr(st, correlation);
        }
        Record::Memset { device, context, stream, start, end, bytes, value, dst_kind, correlation } => {
            w.u(device.into());
            w.u(context.into());
            w.u(stream.into());
            w.ts(st, start);
            w.end(start, end);
            w.u(bytes);
            w.u(value.into());
            w.u(dst_kind as u64);
            w.corr(st, correlation);
        }
        Record::Sync { kind, tid, context, stream, event, start, end, correlation, result } => {
            w.u(kind as u64);
            w.u(tid.into());
            w.u(context.into());
            w.u(stream.into());
            w.u(event);
            w.ts(st, start);
            w.end(start, end);
            w.corr(st, correlation);
            w.i(result.into());
        }
        Record::Memory { op, space, device, address, bytes, reserved, ts, result, correlation, tid } => {
            w.u(op as u64);
            w.u(space as u64);
            w.u(device.into());
            w.u(address);
            w.u(bytes);
            w.u(reserved);
            w.ts(st, ts);
            w.i(result.into());
            w.corr(st, correlation);
            w.u(tid.into());
        }
        Record::Collective {
            tid,
            op,
            start,
            end,
            comm,
            rank,
            nranks,
            count,
            datatype,
            bytes,
            peer,
            stream,
            seq,
            result,
            correlation,
            device,
        } => {
            w.u(tid.into());
            w.u(op as u64);
            w.ts(st, start);
            w.end(start, end);
            w.u(comm);
            w.u(rank.into());
            w.u(nranks.into());
            w.u(count);
            w.u(datatype.into());
            w.u(bytes);
            w.i(peer.into());
            w.u(stream);
            w.u(seq);
            w.i(result.into());
            w.corr(st, correlation);
            w.u(device.into());
        }
        Record::ExternalCorrelation { kind, external_id, correlation } => {
            w.u(kind.into());
            w.u(external_id);
            w.corr(st, correlation);
        }
        Record::NvtxPush { tid, domain, name, ts } => {
            w.u(tid.into());
            w.u(domain.0.into());
            w.u(name.0.into());
            w.ts(st, ts);
        }
        Record::NvtxPop { tid, domain, ts } => {
            w.u(tid.into());
            w.u(domain.0.into());
            w.ts(st, ts);
        }
        Record::NvtxStart { tid, domain, name, id, ts } => {
            w.u(tid.into());
            w.u(domain.0.into());
            w.u(name.0.into());
            w.u(id);
            w.ts(st, ts);
        }
        Record::NvtxEnd { tid, id, ts } => {
            w.u(tid.into());
            w.u(id);
            w.ts(st, ts);
        }
        Record::NvtxMark { tid, domain, name, ts } => {
            w.u(tid.into());
            w.u(domain.0.into());
            w.u(name.0.into());
            w.ts(st, ts);
        }
        Record::ThreadName { tid, name } => {
            w.u(tid.into());
            w.u(name.0.into());
        }
        Record::Counter { name, device, ts, value } => {
            w.u(name.0.into());
            w.u(device.into());
            w.ts(st, ts);
            w.raw(&value.to_bits().to_le_bytes());
        }
        Record::Marker { kind, ts, value, name } => {
            w.u(kind as u64);
            w.ts(st, ts);
            w.u(value);
            w.u(name.0.into());
        }
        Record::Overhead { kind, start, end, tid } => {
            w.u(kind.into());
            w.ts(st, start);
            w.end(start, end);
            w.u(tid.into());
        }
        Record::StringRef { id } => {
            w.u(id.0.into());
        }
    }
}

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

struct PayloadReader<'a> {
    buf: &'a [u8],
    pos: usize,
    code: u8,
}

impl PayloadReader<'_> {
    #[inline(always)]
    fn u(&mut self) -> Result<u64, CodecError> {
        get_u64(self.buf, &mut self.pos)
            .ok_or(CodecError::BadPayload { code: self.code, what: "field missing or malformed" })
    }
    #[inline(always)]
    fn u32(&mut self) -> Result<u32, CodecError> {
        let v = self.u()?;
        u32::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for u32" })
    }
    #[inline(always)]
    fn u16(&mut self) -> Result<u16, CodecError> {
        let v = self.u()?;
        u16::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for u16" })
    }
    #[inline(always)]
    fn u8(&mut self) -> Result<u8, CodecError> {
        let v = self.u()?;
        u8::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for u8" })
    }
    #[inline(always)]
    fn i32(&mut self) -> Result<i32, CodecError> {
        let v = crate::varint::unzigzag(self.u()?);
        i32::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for i32" })
    }
    #[inline(always)]
    fn ts(&mut self, st: &mut DeltaState) -> Result<u64, CodecError> {
        let v = undelta(self.u()?, st.prev_ts);
        st.prev_ts = v;
        Ok(v)
    }
    #[inline(always)]
    fn end(&mut self, start: u64) -> Result<u64, CodecError> {
        Ok(undelta(self.u()?, start))
    }
    #[inline(always)]
    fn corr(&mut self, st: &mut DeltaState) -> Result<u32, CodecError> {
        let v = undelta(self.u()?, u64::from(st.prev_corr));
        let c = u32::try_from(v)
            .map_err(|_| CodecError::BadPayload { code: self.code, what: "correlation out of range" })?;
        st.prev_corr = c;
        Ok(c)
    }
    #[inline(always)]
    fn sid(&mut self) -> Result<StrId, CodecError> {
        Ok(StrId(self.u32()?))
    }
    fn f64(&mut self) -> Result<f64, CodecError> {
        let b = self
            .buf
            .get(self.pos..self.pos + 8)
            .ok_or(CodecError::BadPayload { code: self.code, what: "counter value missing" })?;
        self.pos += 8;
        Ok(f64::from_bits(u64::from_le_bytes(b.try_into().expect("8 bytes"))))
    }
}

fn decode_payload(code: u8, payload: &[u8], st: &mut DeltaState) -> Result<Record, CodecError> {
    use type_code::*;
    let mut r = PayloadReader { buf: payload, pos: 0, code };
    let rec = match code {
        CLOCK_SYNC => Record::ClockSync { ticks: r.u()?, mono_ns: r.u()?, wall_ns: r.u()? },
        API => {
            let tid = r.u32()?;
            let domain = ApiDomain::from_u8(r.u8()?);
            let name = r.sid()?;
            let start = r.ts(st)?;
            let end = r.end(start)?;
            Record::Api {
                tid,
                domain,
                name,
                start,
                end,
                result: r.i32()?,
                correlation: r.corr(st)?,
                detail: r.sid()?,
                stream: r.u()?,
                arg: r.u()?,
            }
        }
        KERNEL => {
            let device = r.u32()?;
            let context = r.u32()?;
            let stream = r.u32()?;
            let start = r.ts(st)?;
            let end = r.end(start)?;
            let grid = [r.u32()?, r.u32()?, r.u32()?];
            let block = [r.u32()?, r.u32()?, r.u32()?];
            Record::Kernel {
                device,
                context,
                stream,
                start,
                end,
                grid,
                block,
                registers: r.u16()?,
                shared_mem: r.u32()?,
                correlation: r.corr(st)?,
                name: r.sid()?,
                graph_id: r.u32()?,
            }
        }
        MEMCPY => {
            let device = r.u32()?;
            let context = r.u32()?;
            let stream = r.u32()?;
            let start = r.ts(st)?;
            let end = r.end(start)?;
            Record::Memcpy {
                device,
                context,
                stream,
                start,
                end,
                bytes: r.u()?,
                kind: CopyKind::from_u8(r.u8()?),
                src_kind: MemoryKind::from_u8(r.u8()?),
                dst_kind: MemoryKind::from_u8(r.u8()?),
                correlation: r.corr(st)?,
            }
        }
        MEMSET => {
            let device = r.u32()?;
            let context = r.u32()?;
            let stream = r.u32()?;
            let start = r.ts(st)?;
            let end = r.end(start)?;
            Record::Memset {
                device,
                context,
                stream,
                start,
                end,
                bytes: r.u()?,
                value: r.u32()?,
                dst_kind: MemoryKind::from_u8(r.u8()?),
                correlation: r.corr(st)?,
            }
        }
        SYNC => {
            let kind = SyncKind::from_u8(r.u8()?);
            let tid = r.u32()?;
            let context = r.u32()?;
            let stream = r.u32()?;
            let event = r.u()?;
            let start = r.ts(st)?;
            let end = r.end(start)?;
            Record::Sync { kind, tid, context, stream, event, start, end, correlation: r.corr(st)?, result: r.i32()? }
        }
        MEMORY => Record::Memory {
            op: MemOp::from_u8(r.u8()?),
            space: MemSpace::from_u8(r.u8()?),
            device: r.u32()?,
            address: r.u()?,
            bytes: r.u()?,
            reserved: r.u()?,
            ts: r.ts(st)?,
            result: r.i32()?,
            correlation: r.corr(st)?,
            tid: r.u32()?,
        },
        COLLECTIVE => {
            let tid = r.u32()?;
            let op = CollOp::from_u8(r.u8()?);
            let start = r.ts(st)?;
            let end = r.end(start)?;
            Record::Collective {
                tid,
                op,
                start,
                end,
                comm: r.u()?,
                rank: r.u32()?,
                nranks: r.u32()?,
                count: r.u()?,
                datatype: r.u8()?,
                bytes: r.u()?,
                peer: r.i32()?,
                stream: r.u()?,
                seq: r.u()?,
                result: r.i32()?,
                correlation: r.corr(st)?,
                device: r.u32()?,
            }
        }
        EXTERNAL_CORRELATION => {
            Record::ExternalCorrelation { kind: r.u8()?, external_id: r.u()?, correlation: r.corr(st)? }
        }
        NVTX_PUSH => Record::NvtxPush { tid: r.u32()?, domain: r.sid()?, name: r.sid()?, ts: r.ts(st)? },
        NVTX_POP => Record::NvtxPop { tid: r.u32()?, domain: r.sid()?, ts: r.ts(st)? },
        NVTX_START => Record::NvtxStart { tid: r.u32()?, domain: r.sid()?, name: r.sid()?, id: r.u()?, ts: r.ts(st)? },
        NVTX_END => Record::NvtxEnd { tid: r.u32()?, id: r.u()?, ts: r.ts(st)? },
        NVTX_MARK => Record::NvtxMark { tid: r.u32()?, domain: r.sid()?, name: r.sid()?, ts: r.ts(st)? },
        THREAD_NAME => Record::ThreadName { tid: r.u32()?, name: r.sid()? },
        COUNTER => Record::Counter { name: r.sid()?, device: r.u32()?, ts: r.ts(st)?, value: r.f64()? },
        MARKER => Record::Marker { kind: MarkerKind::from_u8(r.u8()?), ts: r.ts(st)?, value: r.u()?, name: r.sid()? },
        OVERHEAD => {
            let kind = r.u8()?;
            let start = r.ts(st)?;
            let end = r.end(start)?;
            Record::Overhead { kind, start, end, tid: r.u32()? }
        }
        _ => return Err(CodecError::BadPayload { code, what: "not a record type" }),
    };
    Ok(rec)
}

/// Decodes the frame at the start of `buf`. Returns the item and the frame size.
pub fn decode_one<'a>(buf: &'a [u8], st: &mut DeltaState) -> Result<(Decoded<'a>, usize), CodecError> {
    let (code, payload, total) = split_frame(buf)?;
    if code == type_code::STRING {
        let mut pos = 0;
        let id = get_u64(payload, &mut pos)
            .and_then(|v| u32::try_from(v).ok())
            .ok_or(CodecError::BadPayload { code, what: "string id missing" })?;
        return Ok((Decoded::String { id: StrId(id), bytes: &payload[pos..] }, total));
    }
    if !(type_code::CLOCK_SYNC..=type_code::OVERHEAD).contains(&code) {
        return Ok((Decoded::Unknown { code, payload }, total));
    }
    let mut next = *st;
    let rec = decode_payload(code, payload, &mut next)?;
    *st = next;
    Ok((Decoded::Record(rec), total))
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
                    assert!(n - 2 <= MAX_RECORD_PAYLOAD, "{r:?}: {n} bytes");
                    // One byte short: the checked path refuses and leaves the state alone.
                    let mut short = vec![0u8; n - 1];
                    let mut st = before;
                    assert_eq!(encode_into(r, &mut st, &mut short), None);
                    assert_eq!((st.prev_ts, st.prev_corr), (before.prev_ts, before.prev_corr));
                }
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
