//! How record fields go on the wire, in both directions: the payload writers ([`PayloadOut`]), the
//! payload reader ([`PayloadReader`]), and `record_codec!`, which turns the record table in
//! [`crate::codec`] (each record's type code and its fields in wire order, each with its encoding) into
//! the payload encoder, the payload decoder, `Record::type_code` and the widest payload. Each encoding
//! is written once here as a pair (put, get) plus its widest size, so the two directions cannot disagree.
//!
//! | encoding   | field type | on the wire                                                          |
//! |------------|------------|----------------------------------------------------------------------|
//! | `u64`      | `u64`      | varint                                                               |
//! | `u32` `u16` `u8` | same | varint, range-checked when read                                     |
//! | `i32`      | `i32`      | zigzag varint                                                        |
//! | `str`      | `StrId`    | varint id                                                            |
//! | `byte(E)`  | `E`        | a `wire_enum!` byte as a varint (unknown bytes read as the default)  |
//! | `f64`      | `f64`      | 8 bytes, little-endian IEEE 754                                      |
//! | `[u32; 3]` | `[u32; 3]` | three `u32`                                                          |
//! | `tick`     | `u64`      | zigzag delta against the chunk's previous timestamp, which it becomes |
//! | `since(f)` | `u64`      | zigzag delta against field `f` of the same record                    |
//! | `corr`     | `u32`      | zigzag delta against the chunk's previous correlation id, which it becomes |

use super::{CodecError, DeltaState, WINDOW};
use crate::record::StrId;
use crate::varint::{delta, get_u64, put_u64, undelta};

/// Where the payload encoder writes: a bounds-checked slice ([`PayloadWriter`]) or, when the output has
/// room for any record, a fixed window with no per-byte checks ([`WindowWriter`]). Both write the same
/// bytes.
pub(super) trait PayloadOut {
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

pub(super) struct PayloadWriter<'a> {
    pub(super) buf: &'a mut [u8],
    pub(super) pos: usize,
    pub(super) ok: bool,
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
pub(super) struct WindowWriter<'a> {
    pub(super) buf: &'a mut [u8; WINDOW],
    pub(super) pos: usize,
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

pub(super) struct PayloadReader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    pub(super) code: u8,
}

impl PayloadReader<'_> {
    #[inline(always)]
    pub(super) fn u(&mut self) -> Result<u64, CodecError> {
        get_u64(self.buf, &mut self.pos)
            .ok_or(CodecError::BadPayload { code: self.code, what: "field missing or malformed" })
    }
    #[inline(always)]
    pub(super) fn u32(&mut self) -> Result<u32, CodecError> {
        let v = self.u()?;
        u32::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for u32" })
    }
    #[inline(always)]
    pub(super) fn u16(&mut self) -> Result<u16, CodecError> {
        let v = self.u()?;
        u16::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for u16" })
    }
    #[inline(always)]
    pub(super) fn u8(&mut self) -> Result<u8, CodecError> {
        let v = self.u()?;
        u8::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for u8" })
    }
    #[inline(always)]
    pub(super) fn i32(&mut self) -> Result<i32, CodecError> {
        let v = crate::varint::unzigzag(self.u()?);
        i32::try_from(v).map_err(|_| CodecError::BadPayload { code: self.code, what: "value out of range for i32" })
    }
    #[inline(always)]
    pub(super) fn ts(&mut self, st: &mut DeltaState) -> Result<u64, CodecError> {
        let v = undelta(self.u()?, st.prev_ts);
        st.prev_ts = v;
        Ok(v)
    }
    #[inline(always)]
    pub(super) fn end(&mut self, start: u64) -> Result<u64, CodecError> {
        Ok(undelta(self.u()?, start))
    }
    #[inline(always)]
    pub(super) fn corr(&mut self, st: &mut DeltaState) -> Result<u32, CodecError> {
        let v = undelta(self.u()?, u64::from(st.prev_corr));
        let c = u32::try_from(v)
            .map_err(|_| CodecError::BadPayload { code: self.code, what: "correlation out of range" })?;
        st.prev_corr = c;
        Ok(c)
    }
    #[inline(always)]
    pub(super) fn sid(&mut self) -> Result<StrId, CodecError> {
        Ok(StrId(self.u32()?))
    }
    pub(super) fn f64(&mut self) -> Result<f64, CodecError> {
        let b = self
            .buf
            .get(self.pos..self.pos + 8)
            .ok_or(CodecError::BadPayload { code: self.code, what: "counter value missing" })?;
        self.pos += 8;
        Ok(f64::from_bits(u64::from_le_bytes(b.try_into().expect("8 bytes"))))
    }
}

/// Reads a payload that lies inside a window of [`WINDOW`] bytes (the frame starts at the window's
/// start, so a payload of under 255 bytes always does): positions are masked into the window, so no
/// read is bounds-checked and none fails. A field that runs past the payload's end, a varint too long
/// (its position is then sent past the window) or a value out of its field's range (its excess bits
/// gather in `over`) only makes [`WindowReader::ok`] false; the caller then decodes the frame again
/// with [`PayloadReader`], which says what is wrong. Fields that decode here have the values
/// [`PayloadReader`] reads.
pub(super) struct WindowReader<'a> {
    pub(super) buf: &'a [u8; WINDOW],
    pub(super) pos: usize,
    /// Where the payload ends in the window.
    pub(super) end: usize,
    /// Nonzero when a value did not fit its field.
    pub(super) over: u64,
}

/// The continuation bits of a varint of `n + 1` bytes, as its bytes added in place count them:
/// `CONT[n]` is 0x80 shifted by 0, 7, ... `7 * (n - 1)` bits, summed.
const CONT: [u64; 4] = [0, 0x80, 0x80 + (0x80 << 7), 0x80 + (0x80 << 7) + (0x80 << 14)];

/// Where [`long_varint`] sends the position of a varint it refuses: past any payload's end.
const REFUSED: usize = 4 * WINDOW;

impl WindowReader<'_> {
    /// True when every field read lay inside the payload and was well-formed.
    #[inline(always)]
    pub(super) fn ok(&self) -> bool {
        self.over == 0 && self.pos <= self.end
    }
    /// A varint: one byte inline, two and three bytes (four for 64-bit fields) unrolled, longer ones out of line.
    #[inline(always)]
    pub(super) fn u(&mut self) -> u64 {
        self.bounded::<64>()
    }
    /// A varint whose value must fit in `BITS` bits: excess bits go to `over`, tested only on the
    /// paths whose bytes can hold more than `BITS` bits (a one-byte varint fits any field). Each byte
    /// is added in place whole, and the continuation bits of the bytes before the last are taken back
    /// out in one constant (they are known set on that path): `b0 + b1 << 7 - 0x80` is
    /// `b0 & 0x7f | (b1 & 0x7f) << 7` when `b0 >= 0x80 > b1`.
    #[inline(always)]
    fn bounded<const BITS: u32>(&mut self) -> u64 {
        let (buf, p) = (self.buf, self.pos);
        let b0 = u64::from(buf[p & (WINDOW - 1)]);
        if b0 < 0x80 {
            self.pos = p + 1;
            return b0;
        }
        let b1 = u64::from(buf[(p + 1) & (WINDOW - 1)]);
        if b1 < 0x80 {
            self.pos = p + 2;
            let v = b0 + (b1 << 7) - CONT[1];
            if BITS < 14 {
                self.over |= v >> BITS;
            }
            return v;
        }
        let b2 = u64::from(buf[(p + 2) & (WINDOW - 1)]);
        if b2 < 0x80 {
            self.pos = p + 3;
            let v = b0 + (b1 << 7) + (b2 << 14) - CONT[2];
            if BITS < 21 {
                self.over |= v >> BITS;
            }
            return v;
        }
        // Four bytes (a timestamp delta of 2 ms or more) inline only for the 64-bit fields.
        if BITS == 64 {
            let b3 = u64::from(buf[(p + 3) & (WINDOW - 1)]);
            if b3 < 0x80 {
                self.pos = p + 4;
                return b0 + (b1 << 7) + (b2 << 14) + (b3 << 21) - CONT[3];
            }
        }
        let (v, p) = long_varint(buf, p);
        self.pos = p;
        if BITS < 64 {
            self.over |= v >> (BITS % 64);
        }
        v
    }
    #[inline(always)]
    pub(super) fn u32(&mut self) -> u32 {
        self.bounded::<32>() as u32
    }
    #[inline(always)]
    pub(super) fn u16(&mut self) -> u16 {
        self.bounded::<16>() as u16
    }
    #[inline(always)]
    pub(super) fn u8(&mut self) -> u8 {
        self.bounded::<8>() as u8
    }
    #[inline(always)]
    pub(super) fn i32(&mut self) -> i32 {
        // Zigzag maps i32's range onto exactly the 32-bit values.
        crate::varint::unzigzag(self.bounded::<32>()) as i32
    }
    #[inline(always)]
    pub(super) fn ts(&mut self, st: &mut DeltaState) -> u64 {
        let v = undelta(self.u(), st.prev_ts);
        st.prev_ts = v;
        v
    }
    #[inline(always)]
    pub(super) fn end(&mut self, start: u64) -> u64 {
        undelta(self.u(), start)
    }
    #[inline(always)]
    pub(super) fn corr(&mut self, st: &mut DeltaState) -> u32 {
        let v = undelta(self.u(), u64::from(st.prev_corr));
        self.over |= v >> 32;
        st.prev_corr = v as u32;
        v as u32
    }
    #[inline(always)]
    pub(super) fn sid(&mut self) -> StrId {
        StrId(self.u32())
    }
    pub(super) fn f64(&mut self) -> f64 {
        let mut b = [0u8; 8];
        for (i, x) in b.iter_mut().enumerate() {
            *x = self.buf[(self.pos + i) & (WINDOW - 1)];
        }
        self.pos += 8;
        f64::from_bits(u64::from_le_bytes(b))
    }
}

/// A varint of four bytes or more at `p` in `buf`, as [`crate::varint::get_u64`] reads it: the value
/// and the position after it, or [`REFUSED`] for one it refuses.
#[inline(never)]
fn long_varint(buf: &[u8; WINDOW], mut p: usize) -> (u64, usize) {
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let byte = buf[p & (WINDOW - 1)];
        p += 1;
        if shift == 63 && byte > 1 {
            return (0, REFUSED);
        }
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return (v, p);
        }
        shift += 7;
        if shift > 63 {
            return (0, REFUSED);
        }
    }
}

/// How [`decode_window_with`](super::decode_window_with) ended.
pub(super) enum WindowDecoded<T> {
    /// The record, handed to the visitor.
    Visited(T),
    /// Not a record type this version reads (the visitor not called).
    Unknown,
    /// Something did not decode: the checked decoder must say what (the visitor not called).
    Retry,
}

/// The record table's code generator. Rows: `Variant = TYPE_CODE { field: encoding, ... }` (fields in
/// wire order, every field of the variant), in `records { }`, and in `encode_only { }` those the
/// decoder does not read back as records. Generates `Record::type_code`, `encode_payload`, `decode_payload_with` and `WIDEST_PAYLOAD`.
macro_rules! record_codec {
    // One field, written: `w` the payload writer, `st` the chunk's delta state.
    (@put $w:ident $st:ident $f:ident u64) => { $w.u($f) };
    (@put $w:ident $st:ident $f:ident u32) => { $w.u($f.into()) };
    (@put $w:ident $st:ident $f:ident u16) => { $w.u($f.into()) };
    (@put $w:ident $st:ident $f:ident u8) => { $w.u($f.into()) };
    (@put $w:ident $st:ident $f:ident i32) => { $w.i($f.into()) };
    (@put $w:ident $st:ident $f:ident str) => { $w.u($f.0.into()) };
    (@put $w:ident $st:ident $f:ident byte($e:ident)) => { $w.u($f as u64) };
    (@put $w:ident $st:ident $f:ident f64) => { $w.raw(&$f.to_bits().to_le_bytes()) };
    (@put $w:ident $st:ident $f:ident [u32; 3]) => {
        for v in $f {
            $w.u(v.into());
        }
    };
    (@put $w:ident $st:ident $f:ident tick) => { $w.ts($st, $f) };
    (@put $w:ident $st:ident $f:ident since($base:ident)) => { $w.end($base, $f) };
    (@put $w:ident $st:ident $f:ident corr) => { $w.corr($st, $f) };

    // One field, read: `r` the payload reader, `st` the chunk's delta state.
    (@get $r:ident $st:ident u64) => { $r.u()? };
    (@get $r:ident $st:ident u32) => { $r.u32()? };
    (@get $r:ident $st:ident u16) => { $r.u16()? };
    (@get $r:ident $st:ident u8) => { $r.u8()? };
    (@get $r:ident $st:ident i32) => { $r.i32()? };
    (@get $r:ident $st:ident str) => { $r.sid()? };
    (@get $r:ident $st:ident byte($e:ident)) => { $e::from_u8($r.u8()?) };
    (@get $r:ident $st:ident f64) => { $r.f64()? };
    (@get $r:ident $st:ident [u32; 3]) => { [$r.u32()?, $r.u32()?, $r.u32()?] };
    (@get $r:ident $st:ident tick) => { $r.ts($st)? };
    (@get $r:ident $st:ident since($base:ident)) => { $r.end($base)? };
    (@get $r:ident $st:ident corr) => { $r.corr($st)? };

    // One field, read inside a window: `r` a [`WindowReader`].
    (@fast $r:ident $st:ident u64) => { $r.u() };
    (@fast $r:ident $st:ident u32) => { $r.u32() };
    (@fast $r:ident $st:ident u16) => { $r.u16() };
    (@fast $r:ident $st:ident u8) => { $r.u8() };
    (@fast $r:ident $st:ident i32) => { $r.i32() };
    (@fast $r:ident $st:ident str) => { $r.sid() };
    (@fast $r:ident $st:ident byte($e:ident)) => { $e::from_u8($r.u8()) };
    (@fast $r:ident $st:ident f64) => { $r.f64() };
    (@fast $r:ident $st:ident [u32; 3]) => { [$r.u32(), $r.u32(), $r.u32()] };
    (@fast $r:ident $st:ident tick) => { $r.ts($st) };
    (@fast $r:ident $st:ident since($base:ident)) => { $r.end($base) };
    (@fast $r:ident $st:ident corr) => { $r.corr($st) };

    // One field's widest encoding, in bytes (varints of 64, 35, 21 and 14 bits; zigzag i32s and u32
    // deltas have 33 and 34 bits).
    (@widest u64) => { 10 };
    (@widest u32) => { 5 };
    (@widest u16) => { 3 };
    (@widest u8) => { 2 };
    (@widest i32) => { 5 };
    (@widest str) => { 5 };
    (@widest byte($e:ident)) => { 2 };
    (@widest f64) => { 8 };
    (@widest [u32; 3]) => { 15 };
    (@widest tick) => { 10 };
    (@widest since($base:ident)) => { 10 };
    (@widest corr) => { 5 };

    (
        records { $( $variant:ident = $code:ident { $( $field:ident : $enc:tt $( ( $($arg:tt)* ) )? ),* $(,)? } )* }
        encode_only { $( $only:ident = $only_code:ident { $( $only_field:ident : $only_enc:tt ),* $(,)? } )* }
    ) => {
        impl $crate::record::Record {
            /// The on-disk type code of this record.
            pub fn type_code(&self) -> u8 {
                match self {
                    $( $crate::record::Record::$variant { .. } => $crate::record::type_code::$code, )*
                    $( $crate::record::Record::$only { .. } => $crate::record::type_code::$only_code, )*
                }
            }
        }

        /// Bytes of the widest payload any row can have.
        const WIDEST_PAYLOAD: usize = {
            let mut widest = 0;
            $(
                let row = 0 $( + record_codec!(@widest $enc $( ( $($arg)* ) )?) )*;
                if row > widest {
                    widest = row;
                }
            )*
            $(
                let row = 0 $( + record_codec!(@widest $only_enc) )*;
                if row > widest {
                    widest = row;
                }
            )*
            widest
        };

        #[inline(always)]
        fn encode_payload<W: $crate::codec::fields::PayloadOut>(
            rec: &$crate::record::Record,
            st: &mut $crate::codec::DeltaState,
            w: &mut W,
        ) {
            match *rec {
                $(
                    $crate::record::Record::$variant { $($field),* } => {
                        $( record_codec!(@put w st $field $enc $( ( $($arg)* ) )?); )*
                    }
                )*
                $(
                    $crate::record::Record::$only { $($only_field),* } => {
                        $( record_codec!(@put w st $only_field $only_enc); )*
                    }
                )*
            }
        }

        /// Decodes the payload of record type `code` and hands the record to `visit`, from the arm
        /// that knows its variant (so that an inlined visitor's match on the record folds away);
        /// None, with `visit` not called, when `code` is not a record type this version reads.
        #[inline(always)]
        fn decode_payload_with<'a, V: $crate::codec::DecodedVisitor<'a>>(
            code: u8,
            payload: &'a [u8],
            st: &mut $crate::codec::DeltaState,
            visit: &mut V,
        ) -> Result<Option<V::Out>, $crate::codec::CodecError> {
            let mut r = $crate::codec::fields::PayloadReader { buf: payload, pos: 0, code };
            match code {
                $(
                    $crate::record::type_code::$code => {
                        $( let $field = record_codec!(@get r st $enc $( ( $($arg)* ) )?); )*
                        let rec = $crate::record::Record::$variant { $($field),* };
                        Ok(Some(visit.visit($crate::codec::Decoded::Record(rec))))
                    }
                )*
                _ => Ok(None),
            }
        }

        /// [`decode_payload_with`] for a frame at the start of `window` whose payload of `len`
        /// bytes lies inside it: no read is checked; anything wrong asks for the checked decoder.
        #[inline(always)]
        fn decode_window_with<'a, V: $crate::codec::DecodedVisitor<'a>>(
            code: u8,
            window: &'a [u8; $crate::codec::WINDOW],
            len: usize,
            st: &mut $crate::codec::DeltaState,
            visit: &mut V,
        ) -> $crate::codec::fields::WindowDecoded<V::Out> {
            use $crate::codec::fields::WindowDecoded;
            match code {
                $(
                    $crate::record::type_code::$code => {
                        // A reader of each type's own, which lives in registers however the others fare.
                        let mut r = $crate::codec::fields::WindowReader { buf: window, pos: 2, end: 2 + len, over: 0 };
                        $( let $field = record_codec!(@fast r st $enc $( ( $($arg)* ) )?); )*
                        if !r.ok() {
                            return WindowDecoded::Retry;
                        }
                        let rec = $crate::record::Record::$variant { $($field),* };
                        WindowDecoded::Visited(visit.visit($crate::codec::Decoded::Record(rec)))
                    }
                )*
                _ => WindowDecoded::Unknown,
            }
        }
    };
}

pub(super) use record_codec;
