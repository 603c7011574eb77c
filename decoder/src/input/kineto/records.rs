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

/// Fields of a [`Rec`] past its kind, flags and op, as spilled.
const FIELDS: usize = 1 + 13 + 11;

/// Zigzag: a signed difference as a small unsigned number (0, -1, 1, -2... -> 0, 1, 2, 3...).
#[inline]
fn zigzag(d: u64) -> u64 {
    (d << 1) ^ ((d as i64) >> 63) as u64
}

#[inline]
fn unzigzag(z: u64) -> u64 {
    (z >> 1) ^ (z & 1).wrapping_neg()
}

/// The fields as numbers that are small or zero for most kinds: the start and the sequence
/// number as their differences from the previous record's (records are spilled in key order, so
/// both move by little), the end as the duration, `parent` and `range` plus one (their [`NONE`]
/// is then zero).
#[inline]
fn fields(r: &Rec, prev: &Rec) -> [u64; FIELDS] {
    let (g, b) = (r.grid, r.block);
    [
        r.registers as u64,
        r.tid as u64,
        r.device as u64,
        r.context as u64,
        r.name as u64,
        r.shared_mem as u64,
        r.nranks as u64,
        r.depth as u64,
        g[0] as u64,
        g[1] as u64,
        g[2] as u64,
        b[0] as u64,
        b[1] as u64,
        b[2] as u64,
        zigzag(r.start.wrapping_sub(prev.start)),
        r.end.wrapping_sub(r.start),
        r.correlation,
        r.bytes,
        r.comm,
        r.seq_comm,
        r.id,
        r.parent.wrapping_add(1),
        r.range.wrapping_add(1),
        r.value.to_bits(),
        zigzag(r.seq.wrapping_sub(prev.seq)),
    ]
}

/// Header bytes: kind and flags, op, the mask of the fields that are not zero.
const HEAD: usize = 6;
/// The most bytes [`encode`] writes: the header, a nibble and 8 bytes a field.
const MAX_LEN: usize = HEAD + FIELDS.div_ceil(2) + 8 * FIELDS;

/// A [`Rec`] for spilling after `prev` (the record spilled before it in the run, or the default
/// one first): two bytes (kind and the two flags, op), a mask of the [`fields`] that are not zero
/// (4 bytes), their lengths in bytes (1..=8, a nibble each), and their bytes, low first. About 30
/// bytes where the fields take 146; fixed-width stores, no loop per byte.
fn encode(r: &Rec, prev: &Rec, out: &mut Vec<u8>) {
    let f = fields(r, prev);
    let mut mask = 0u32;
    for (k, &v) in f.iter().enumerate() {
        mask |= ((v != 0) as u32) << k;
    }
    // Written in place (every field at 8 bytes fits), then cut to the length used.
    let old = out.len();
    out.resize(old + MAX_LEN, 0);
    let w: &mut [u8; MAX_LEN] = (&mut out[old..]).try_into().expect("MAX_LEN bytes");
    w[0] = r.kind as u8 | (r.flag as u8) << 3 | (r.has_ext as u8) << 4;
    w[1] = r.op;
    w[2..HEAD].copy_from_slice(&mask.to_le_bytes());
    let mut at = HEAD + (mask.count_ones() as usize).div_ceil(2);
    let (mut m, mut j) = (mask, 0);
    while m != 0 {
        let v = f[m.trailing_zeros() as usize];
        m &= m - 1;
        let len = 8 - (v.leading_zeros() / 8) as usize;
        w[HEAD + (j / 2) % 16] |= ((len - 1) as u8) << (4 * (j % 2));
        w[at..at + 8].copy_from_slice(&v.to_le_bytes());
        at += len;
        j += 1;
    }
    out.truncate(old + at);
}

/// `N` bytes of `b` from `at` as a little-endian number, the bytes past its end read as zeros.
#[inline]
fn load<const N: usize>(b: &[u8], at: usize) -> [u8; N] {
    match b.get(at..at + N) {
        Some(w) => w.try_into().expect("N bytes"),
        None => {
            let mut w = [0u8; N];
            let tail = b.get(at..).unwrap_or(&[]);
            w[..tail.len()].copy_from_slice(tail);
            w
        }
    }
}

/// Replaces `prev` by the record [`encode`] wrote after it at the start of `b` (which may hold
/// more bytes after it; damaged or short bytes read as zeros).
fn decode(b: &[u8], prev: &mut Rec) {
    let head: [u8; HEAD] = load(b, 0);
    let mut mask = u32::from_le_bytes([head[2], head[3], head[4], head[5]]) & ((1 << FIELDS) - 1);
    let nibble_bytes = (mask.count_ones() as usize).div_ceil(2);
    // The lengths, a nibble each (the bytes after them are read too, never used).
    let mut lens = u128::from_le_bytes(load(b, HEAD));
    let mut f = [0u64; FIELDS];
    let mut at = HEAD + nibble_bytes;
    while mask != 0 {
        let len = (lens & 7) as usize + 1;
        lens >>= 4;
        let word = u64::from_le_bytes(load(b, at));
        f[mask.trailing_zeros() as usize] = word & (u64::MAX >> (64 - 8 * len));
        mask &= mask - 1;
        at += len;
    }
    let w = |k: usize| f[1 + k] as u32;
    let start = prev.start.wrapping_add(unzigzag(f[14]));
    *prev = Rec {
        kind: Kind::from_u8(head[0] & 7),
        flag: head[0] & 8 != 0,
        has_ext: head[0] & 16 != 0,
        op: head[1],
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
        start,
        end: f[15].wrapping_add(start),
        correlation: f[16],
        bytes: f[17],
        comm: f[18],
        seq_comm: f[19],
        id: f[20],
        parent: f[21].wrapping_sub(1),
        range: f[22].wrapping_sub(1),
        value: f64::from_bits(f[23]),
        seq: prev.seq.wrapping_add(unzigzag(f[24])),
    };
}

/// Ranges, API calls and collectives in the order they are nested in: per thread by start, at
/// equal starts calls first, then ranges longest first.
#[derive(Clone, Copy, Default)]
pub(super) struct NestOrder(pub Rec);

impl Record for NestOrder {
    type Key = (u32, u64, u64, u64);
    fn key(&self) -> Self::Key {
        let r = &self.0;
        let third = if r.kind == Kind::Range { u64::MAX - r.end.wrapping_sub(r.start) } else { 0 };
        (r.tid, r.start, third, r.seq)
    }
    fn encode(&self, prev: &Self, out: &mut Vec<u8>) {
        encode(&self.0, &prev.0, out)
    }
    fn decode(b: &[u8], prev: &mut Self) {
        decode(b, &mut prev.0)
    }
}

/// Everything in delivery order: by time (ranges at their end, deeper first on ties, other
/// events at their start), then creation order.
#[derive(Clone, Copy, Default)]
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
    fn encode(&self, prev: &Self, out: &mut Vec<u8>) {
        encode(&self.0, &prev.0, out)
    }
    fn decode(b: &[u8], prev: &mut Self) {
        decode(b, &mut prev.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(b: &[u8], prev: &Rec) -> Rec {
        let mut r = *prev;
        decode(b, &mut r);
        r
    }

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
        let none = Rec::default();
        let mut b = Vec::new();
        encode(&r, &none, &mut b);
        assert_eq!(decoded(&b, &none), r);
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
        for prev in [none, r, max] {
            b.clear();
            encode(&max, &prev, &mut b);
            let back = decoded(&b, &prev);
            assert_eq!(
                (back.value.to_bits(), Rec { value: 0.0, ..back }),
                (max.value.to_bits(), Rec { value: 0.0, ..max })
            );
        }
        // A kernel's record is small: 6 bytes of header, the lengths of its 6 fields (3 bytes),
        // its tid, name, start (from the previous kernel's), duration, correlation and seq.
        let kernel = Rec {
            kind: Kind::Kernel,
            start: 5_000_000_010_125_000,
            end: 5_000_000_010_137_000,
            correlation: 70_000,
            name: 3,
            tid: 7,
            parent: NONE,
            range: NONE,
            seq: 123_456,
            ..Rec::default()
        };
        let before = Rec { start: kernel.start - 20_000, seq: kernel.seq - 1, ..kernel };
        b.clear();
        encode(&kernel, &before, &mut b);
        assert_eq!(decoded(&b, &before), kernel);
        assert_eq!(b.len(), 6 + 3 + 1 + 1 + 2 + 2 + 3 + 1, "{b:?}");
    }

    /// Random records of every kind, spilled one after the other and read back as a run is.
    #[test]
    fn random_runs_round_trip() {
        let mut rng = crate::xorshift::XorShift(0x9e37_79b9_7f4a_7c15);
        // A value of 0 to 64 bits, mostly small.
        fn num(rng: &mut crate::xorshift::XorShift) -> u64 {
            match [0u32, 1, 7, 8, 16, 33, 56, 63, 64][rng.index(9)] {
                0 => 0,
                bits => rng.next_u64() >> (64 - bits),
            }
        }
        let mut recs = Vec::new();
        for _ in 0..20_000 {
            let mut n = || num(&mut rng);
            let r = Rec {
                kind: Kind::from_u8((n() % 7) as u8),
                flag: n() & 1 != 0,
                has_ext: n() & 1 != 0,
                op: n() as u8,
                registers: n() as u16,
                tid: n() as u32,
                device: n() as u32,
                context: n() as u32,
                name: n() as u32,
                shared_mem: n() as u32,
                nranks: n() as u32,
                depth: n() as u32,
                grid: [n() as u32, n() as u32, n() as u32],
                block: [n() as u32, n() as u32, n() as u32],
                start: n(),
                end: n(),
                correlation: n(),
                bytes: n(),
                comm: n(),
                seq_comm: n(),
                id: n(),
                parent: n(),
                range: n(),
                value: f64::from_bits(n()),
                seq: n(),
            };
            recs.push(r);
        }
        let mut b = Vec::new();
        let mut ends = Vec::new();
        let mut prev = Rec::default();
        for r in &recs {
            encode(r, &prev, &mut b);
            ends.push(b.len());
            prev = *r;
        }
        let mut prev = Rec::default();
        let mut at = 0;
        for (r, &end) in recs.iter().zip(&ends) {
            let back = decoded(&b[at..end], &prev);
            assert_eq!(back.value.to_bits(), r.value.to_bits());
            assert_eq!(Rec { value: 0.0, ..back }, Rec { value: 0.0, ..*r });
            prev = back;
            at = end;
        }
    }
}
