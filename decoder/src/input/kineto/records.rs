//! The flat record a converted Kineto event waits in until delivery (names as ids into the
//! importer's name table), its compact encoding for spilling, and the two orders it is sorted in.

use super::spill::Record;

/// What a [`Rec`] becomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(u8)]
pub(super) enum Kind {
    #[default]
    Kernel = 0,
    Memcpy = 1,
    Memset = 2,
    Api = 3,
    Collective = 4,
    Range = 5,
    Counter = 6,
}

impl Kind {
    fn from_u8(v: u8) -> Kind {
        match v {
            1 => Kind::Memcpy,
            2 => Kind::Memset,
            3 => Kind::Api,
            4 => Kind::Collective,
            5 => Kind::Range,
            6 => Kind::Counter,
            _ => Kind::Kernel,
        }
    }
}

/// No range / no parent.
pub(super) const NONE: u64 = u64::MAX;

/// One model event before delivery. Fields mean what the model's field of the same name means;
/// `tid` is the stream of GPU records; `flag` is "driver" for API calls, "CPU op" for ranges,
/// "has collective info" for kernels; `id` is a range's id, a collective's External id.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Rec {
    pub kind: Kind,
    pub flag: bool,
    /// A collective's External id is known (`id` holds it).
    pub has_ext: bool,
    pub op: u8,
    pub registers: u16,
    pub tid: u32,
    pub device: u32,
    pub context: u32,
    pub name: u32,
    pub shared_mem: u32,
    pub nranks: u32,
    pub depth: u32,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub start: u64,
    pub end: u64,
    pub correlation: u64,
    pub bytes: u64,
    pub comm: u64,
    pub seq_comm: u64,
    pub id: u64,
    pub parent: u64,
    pub range: u64,
    pub value: f64,
    /// Order of creation (ties in both sorts keep it).
    pub seq: u64,
}

impl Rec {
    fn u64s(&self) -> [u64; 11] {
        [
            self.start,
            self.end,
            self.correlation,
            self.bytes,
            self.comm,
            self.seq_comm,
            self.id,
            self.parent,
            self.range,
            self.value.to_bits(),
            self.seq,
        ]
    }
    fn u32s(&self) -> [u32; 13] {
        let (g, b) = (self.grid, self.block);
        [
            self.tid,
            self.device,
            self.context,
            self.name,
            self.shared_mem,
            self.nranks,
            self.depth,
            g[0],
            g[1],
            g[2],
            b[0],
            b[1],
            b[2],
        ]
    }
}

/// Writes `v` as a LEB128 varint (7 bits a byte, low first) at `out[*n..]` (room for 10 bytes).
#[inline]
fn put(out: &mut [u8], n: &mut usize, mut v: u64) {
    while v >= 0x80 {
        out[*n] = v as u8 | 0x80;
        *n += 1;
        v >>= 7;
    }
    out[*n] = v as u8;
    *n += 1;
}

/// The varint at `at` (a damaged or short one reads as what its bytes hold).
#[inline]
fn get(b: &[u8], at: &mut usize) -> u64 {
    // Most fields fit one byte.
    match b.get(*at) {
        Some(&c) if c < 0x80 => {
            *at += 1;
            c as u64
        }
        _ => get_long(b, at),
    }
}

fn get_long(b: &[u8], at: &mut usize) -> u64 {
    let mut v = 0u64;
    let mut shift = 0;
    while let Some(&c) = b.get(*at) {
        *at += 1;
        if shift < 64 {
            v |= ((c & 0x7f) as u64) << shift;
        }
        shift += 7;
        if c & 0x80 == 0 {
            break;
        }
    }
    v
}

/// Fields of a [`Rec`] past its three single bytes, as spilled.
const FIELDS: usize = 1 + 13 + 11;

/// The fields as numbers that are small or zero for most kinds: the end as the duration,
/// `parent` and `range` plus one (their [`NONE`] is then zero).
fn fields(r: &Rec) -> [u64; FIELDS] {
    let mut f = [0u64; FIELDS];
    f[0] = r.registers as u64;
    for (k, v) in r.u32s().into_iter().enumerate() {
        f[1 + k] = v as u64;
    }
    let u = r.u64s();
    f[14..].copy_from_slice(&u);
    f[15] = u[1].wrapping_sub(u[0]);
    f[21] = u[7].wrapping_add(1);
    f[22] = u[8].wrapping_add(1);
    f
}

/// A [`Rec`] for spilling: three bytes (kind, the two flags, op), a mask of the [`fields`] that
/// are not zero (4 bytes), and those as varints. About 30 bytes where the fields take 146.
fn encode(r: &Rec, out: &mut Vec<u8>) {
    let f = fields(r);
    let mut buf = [0u8; 7 + 10 * FIELDS];
    buf[..3].copy_from_slice(&[r.kind as u8, r.flag as u8 | (r.has_ext as u8) << 1, r.op]);
    let mut mask = 0u32;
    let mut n = 7;
    for (k, &v) in f.iter().enumerate() {
        if v != 0 {
            mask |= 1 << k;
            put(&mut buf, &mut n, v);
        }
    }
    buf[3..7].copy_from_slice(&mask.to_le_bytes());
    out.extend_from_slice(&buf[..n]);
}

fn decode(b: &[u8]) -> Rec {
    let byte = |k: usize| b.get(k).copied().unwrap_or(0);
    let mut mask = u32::from_le_bytes([byte(3), byte(4), byte(5), byte(6)]) & ((1 << FIELDS) - 1);
    let mut f = [0u64; FIELDS];
    let mut at = 7;
    while mask != 0 {
        f[mask.trailing_zeros() as usize] = get(b, &mut at);
        mask &= mask - 1;
    }
    let w = |k: usize| f[1 + k] as u32;
    Rec {
        kind: Kind::from_u8(byte(0)),
        flag: byte(1) & 1 != 0,
        has_ext: byte(1) & 2 != 0,
        op: byte(2),
        registers: f[0] as u16,
        tid: w(0),
        device: w(1),
        context: w(2),
        name: w(3),
        shared_mem: w(4),
        nranks: w(5),
        depth: w(6),
        grid: [w(7), w(8), w(9)],
        block: [w(10), w(11), w(12)],
        start: f[14],
        end: f[15].wrapping_add(f[14]),
        correlation: f[16],
        bytes: f[17],
        comm: f[18],
        seq_comm: f[19],
        id: f[20],
        parent: f[21].wrapping_sub(1),
        range: f[22].wrapping_sub(1),
        value: f64::from_bits(f[23]),
        seq: f[24],
    }
}

/// Ranges, API calls and collectives in the order they are nested in: per thread by start, at
/// equal starts calls first, then ranges longest first.
#[derive(Clone, Copy)]
pub(super) struct NestOrder(pub Rec);

impl Record for NestOrder {
    type Key = (u32, u64, u64, u64);
    fn key(&self) -> Self::Key {
        let r = &self.0;
        let third = if r.kind == Kind::Range { u64::MAX - r.end.wrapping_sub(r.start) } else { 0 };
        (r.tid, r.start, third, r.seq)
    }
    fn encode(&self, out: &mut Vec<u8>) {
        encode(&self.0, out)
    }
    fn decode(b: &[u8]) -> Self {
        NestOrder(decode(b))
    }
}

/// Everything in delivery order: by time (ranges at their end, deeper first on ties, other
/// events at their start), then creation order.
#[derive(Clone, Copy)]
pub(super) struct TimeOrder(pub Rec);

impl Record for TimeOrder {
    type Key = (u64, u32, u64);
    fn key(&self) -> Self::Key {
        let r = &self.0;
        if r.kind == Kind::Range {
            (r.end, u32::MAX - r.depth, r.seq)
        } else {
            (r.start, 0, r.seq)
        }
    }
    fn encode(&self, out: &mut Vec<u8>) {
        encode(&self.0, out)
    }
    fn decode(b: &[u8]) -> Self {
        TimeOrder(decode(b))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_round_trips() {
        let r = Rec {
            kind: Kind::Collective,
            flag: true,
            has_ext: true,
            op: 3,
            registers: 65535,
            tid: 1,
            device: 2,
            context: 3,
            name: 4,
            shared_mem: 5,
            nranks: 6,
            depth: 7,
            grid: [8, 9, 10],
            block: [11, 12, 13],
            start: 14,
            end: u64::MAX,
            correlation: 16,
            bytes: 17,
            comm: 18,
            seq_comm: 19,
            id: 20,
            parent: NONE,
            range: 22,
            value: -1.5,
            seq: 23,
        };
        let mut b = Vec::new();
        encode(&r, &mut b);
        assert_eq!(decode(&b), r);
        // Every field at its extremes, and a range whose end is before its start.
        let max = Rec {
            registers: u16::MAX,
            tid: u32::MAX,
            grid: [u32::MAX; 3],
            start: u64::MAX,
            end: 3,
            correlation: u64::MAX,
            parent: 0,
            range: u64::MAX - 1,
            value: f64::NAN,
            seq: u64::MAX,
            ..r
        };
        b.clear();
        encode(&max, &mut b);
        let back = decode(&b);
        assert_eq!(
            (back.value.to_bits(), Rec { value: 0.0, ..back }),
            (max.value.to_bits(), Rec { value: 0.0, ..max })
        );
        // A kernel's record is small: 3 bytes, the mask, and its tid, name, start, duration,
        // correlation, parent and range (0 + 1: 1 byte each) and seq.
        let kernel = Rec {
            kind: Kind::Kernel,
            start: 5_000_000_010_125_000,
            end: 5_000_000_010_137_000,
            correlation: 7,
            name: 3,
            tid: 7,
            seq: 123_456,
            ..Rec::default()
        };
        b.clear();
        encode(&kernel, &mut b);
        assert_eq!(decode(&b), kernel);
        assert_eq!(b.len(), 3 + 4 + 1 + 1 + 8 + 2 + 1 + 1 + 1 + 3, "{b:?}");
    }
}
