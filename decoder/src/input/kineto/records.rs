//! The flat record a converted Kineto event waits in until delivery (names as ids into the
//! importer's name table), its fixed-size encoding for spilling, and the two orders it is sorted in.

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

/// Bytes of an encoded [`Rec`]: 4 single bytes, the registers, 13 u32 and 11 u64.
const REC_SIZE: usize = 4 + 2 + 13 * 4 + 11 * 8;

fn encode(r: &Rec, out: &mut [u8]) {
    out[0] = r.kind as u8;
    out[1] = r.flag as u8;
    out[2] = r.has_ext as u8;
    out[3] = r.op;
    out[4..6].copy_from_slice(&r.registers.to_le_bytes());
    let mut at = 6;
    for v in r.u32s() {
        out[at..at + 4].copy_from_slice(&v.to_le_bytes());
        at += 4;
    }
    for v in r.u64s() {
        out[at..at + 8].copy_from_slice(&v.to_le_bytes());
        at += 8;
    }
}

fn decode(b: &[u8]) -> Rec {
    let u32_at = |k: usize| u32::from_le_bytes([b[6 + 4 * k], b[7 + 4 * k], b[8 + 4 * k], b[9 + 4 * k]]);
    let u64_at = |k: usize| {
        let at = 6 + 13 * 4 + 8 * k;
        let mut w = [0u8; 8];
        w.copy_from_slice(&b[at..at + 8]);
        u64::from_le_bytes(w)
    };
    Rec {
        kind: Kind::from_u8(b[0]),
        flag: b[1] != 0,
        has_ext: b[2] != 0,
        op: b[3],
        registers: u16::from_le_bytes([b[4], b[5]]),
        tid: u32_at(0),
        device: u32_at(1),
        context: u32_at(2),
        name: u32_at(3),
        shared_mem: u32_at(4),
        nranks: u32_at(5),
        depth: u32_at(6),
        grid: [u32_at(7), u32_at(8), u32_at(9)],
        block: [u32_at(10), u32_at(11), u32_at(12)],
        start: u64_at(0),
        end: u64_at(1),
        correlation: u64_at(2),
        bytes: u64_at(3),
        comm: u64_at(4),
        seq_comm: u64_at(5),
        id: u64_at(6),
        parent: u64_at(7),
        range: u64_at(8),
        value: f64::from_bits(u64_at(9)),
        seq: u64_at(10),
    }
}

/// Ranges, API calls and collectives in the order they are nested in: per thread by start, at
/// equal starts calls first, then ranges longest first.
pub(super) struct NestOrder(pub Rec);

impl Record for NestOrder {
    type Key = (u32, u64, u64, u64);
    const SIZE: usize = REC_SIZE;
    fn key(&self) -> Self::Key {
        let r = &self.0;
        let third = if r.kind == Kind::Range { u64::MAX - r.end.wrapping_sub(r.start) } else { 0 };
        (r.tid, r.start, third, r.seq)
    }
    fn encode(&self, out: &mut [u8]) {
        encode(&self.0, out)
    }
    fn decode(b: &[u8]) -> Self {
        NestOrder(decode(b))
    }
}

/// Everything in delivery order: by time (ranges at their end, deeper first on ties, other
/// events at their start), then creation order.
pub(super) struct TimeOrder(pub Rec);

impl Record for TimeOrder {
    type Key = (u64, u32, u64);
    const SIZE: usize = REC_SIZE;
    fn key(&self) -> Self::Key {
        let r = &self.0;
        if r.kind == Kind::Range {
            (r.end, u32::MAX - r.depth, r.seq)
        } else {
            (r.start, 0, r.seq)
        }
    }
    fn encode(&self, out: &mut [u8]) {
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
        let mut b = vec![0u8; REC_SIZE];
        encode(&r, &mut b);
        assert_eq!(decode(&b), r);
    }
}
