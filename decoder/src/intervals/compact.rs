//! [`CompactIntervals`]: a sorted disjoint interval list delta-encoded in prefix varints (a few
//! bytes per disjoint busy period), the committed part of a [`super::StreamingUnion`], and its
//! iterator.

use crate::model::Ns;

/// A sorted disjoint interval list, delta-encoded: (start - previous end, length), each value a
/// prefix varint (7 bits a byte, as many bytes as LEB128 takes, see [`prefix_word`]).
#[derive(Debug, Default, Clone)]
pub struct CompactIntervals {
    /// The encoding in `bytes[..used]`, and at least 8 bytes after it once anything was pushed (room
    /// for the next word; the iterator reads a word at any value's start).
    bytes: Vec<u8>,
    used: usize,
    prev_end: Ns,
    len: usize,
}

/// A value below 2^56 as a prefix varint in the low bytes of a word, and its length in bytes `n`
/// (1-8): the value shifted up by `n` bits under a one at bit `n - 1` (so the first byte's trailing
/// zeros say how many bytes follow it).
#[inline(always)]
fn prefix_word(v: u64) -> (u64, u32) {
    // The bytes a value of `ilog2 + 1` bits takes: (ilog2 + 1).div_ceil(7).
    const BYTES: [u8; 64] = {
        let mut t = [0u8; 64];
        let mut i = 0;
        while i < 64 {
            t[i] = (i as u8 + 7) / 7;
            i += 1;
        }
        t
    };
    let n = BYTES[(v | 1).ilog2() as usize] as u32;
    (v << n | 1 << (n - 1), n)
}

/// Appends `v` as a prefix varint: [`prefix_word`]'s bytes, or a zero byte and the value's eight
/// bytes for values of 2^56 and above.
fn put_prefix(out: &mut Vec<u8>, v: u64) {
    if v < 1 << 56 {
        let (w, n) = prefix_word(v);
        out.extend_from_slice(&w.to_le_bytes()[..n as usize]);
    } else {
        out.push(0);
        out.extend_from_slice(&v.to_le_bytes());
    }
}

impl CompactIntervals {
    /// Appends an interval starting at or after the end of the last one.
    #[inline(always)]
    pub(super) fn push(&mut self, (s, e): (Ns, Ns)) {
        debug_assert!(s >= self.prev_end && e > s);
        let (gap, len) = (s - self.prev_end, e - s);
        let at = self.used;
        if gap < 1 << 28 && len < 1 << 28 && self.bytes.len() >= at + 16 {
            // Both in one word (four bytes each at most): its eight bytes written, theirs kept.
            let (a, n) = prefix_word(gap);
            let (b, m) = prefix_word(len);
            self.bytes[at..at + 8].copy_from_slice(&(a | b << (8 * n)).to_le_bytes());
            self.used = at + (n + m) as usize;
        } else {
            self.push_rare(gap, len);
        }
        self.prev_end = e;
        self.len += 1;
    }

    /// Extends `tail` (the last interval of the union, not pushed yet) by `ivs`, in start order and
    /// none starting before `tail`: each that touches `tail` extends it, else `tail` is pushed and
    /// the interval becomes it. Equal to [`extend_tail`] of each in turn; the encoder's state is
    /// kept in locals while the intervals and the room last.
    #[inline(always)]
    pub(super) fn extend_union(&mut self, tail: &mut Option<(Ns, Ns)>, ivs: &mut impl Iterator<Item = (Ns, Ns)>) {
        let Some((mut ts, mut te)) = tail.take().or_else(|| ivs.next()) else { return };
        loop {
            let (mut used, mut prev_end, mut len) = (self.used, self.prev_end, self.len);
            // Room for a word at `used` while `used + 16 <= room`.
            let room = self.bytes.len();
            let bytes = &mut self.bytes[..];
            let mut stopped = None;
            for (s, e) in ivs.by_ref() {
                if s <= te {
                    te = te.max(e);
                    continue;
                }
                let (gap, l) = (ts - prev_end, te - ts);
                if gap >= 1 << 28 || l >= 1 << 28 || used + 16 > room {
                    stopped = Some((s, e));
                    break;
                }
                let (a, n) = prefix_word(gap);
                let (b, m) = prefix_word(l);
                bytes[used..][..8].copy_from_slice(&(a | b << (8 * n)).to_le_bytes());
                used += (n + m) as usize;
                prev_end = te;
                len += 1;
                (ts, te) = (s, e);
            }
            (self.used, self.prev_end, self.len) = (used, prev_end, len);
            match stopped {
                Some(iv) => {
                    self.push((ts, te));
                    (ts, te) = iv;
                }
                None => break,
            }
        }
        *tail = Some((ts, te));
    }

    /// [`CompactIntervals::push`] of a long gap or length, or with no room left for a word.
    #[inline(never)]
    fn push_rare(&mut self, gap: u64, len: u64) {
        self.bytes.truncate(self.used);
        put_prefix(&mut self.bytes, gap);
        put_prefix(&mut self.bytes, len);
        self.used = self.bytes.len();
        self.grow();
    }

    /// Room for two words after the encoding, and a page more: only that much is written (and made
    /// resident) ahead; the capacity doubles as a `Vec`'s does.
    pub(super) fn grow(&mut self) {
        self.bytes.resize(self.used + 16 + 4096, 0);
    }

    /// The encoding and one word after it, the rest given back (no more pushes).
    pub(super) fn shrink(&mut self) {
        if self.used > 0 {
            self.bytes.truncate(self.used + 8);
        }
        self.bytes.shrink_to_fit();
    }

    /// Number of disjoint intervals.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.bytes.capacity()
    }

    pub fn iter(&self) -> CompactIter<'_> {
        CompactIter { bytes: &self.bytes, end: self.used, pos: 0, prev_end: 0 }
    }
}

/// Iterator over a [`CompactIntervals`].
#[derive(Debug, Clone)]
pub struct CompactIter<'a> {
    /// The encoding, `bytes[..end]`, and at least a word after it.
    bytes: &'a [u8],
    end: usize,
    pos: usize,
    prev_end: Ns,
}

impl CompactIter<'_> {
    /// The eight bytes at `at`, a value's start (or after a nine-byte value's zero byte).
    #[inline(always)]
    fn word(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.bytes[at..at + 8].try_into().expect("8 bytes"))
    }

    #[inline(always)]
    fn value(&mut self) -> u64 {
        let w = self.word(self.pos);
        if w & 0xff == 0 {
            let v = self.word(self.pos + 1);
            self.pos += 9;
            return v;
        }
        let n = w.trailing_zeros() + 1;
        self.pos += n as usize;
        w >> n & ((1 << (7 * n)) - 1)
    }
}

impl CompactIter<'_> {
    /// The interval at `pos` (below `end`) after one ending at `prev_end`, and the position after
    /// it.
    #[inline(always)]
    fn decode(&self, pos: usize, prev_end: Ns) -> (Ns, Ns, usize) {
        // Mostly both values lie in the word at `pos` (as `CompactIntervals::push` wrote them).
        let w = self.word(pos);
        let n = w.trailing_zeros() + 1;
        if n < 8 {
            let rest = w >> (8 * n);
            let m = rest.trailing_zeros() + 1;
            if n + m <= 8 {
                // The gap's 7n bits lie at [n, 8n) of the word, the length's 7m bits at
                // [8n + m, 8n + 8m): each shifted up to the top, then down (no masks).
                let gap = w << (64 - 8 * n) >> (64 - 7 * n);
                let len = w << (64 - 8 * (n + m)) >> (64 - 7 * m);
                let s = prev_end + gap;
                return (s, s + len, pos + (n + m) as usize);
            }
        }
        self.decode_long(pos, prev_end)
    }

    /// [`CompactIter::decode`] of values not both in one word.
    #[inline(never)]
    fn decode_long(&self, pos: usize, prev_end: Ns) -> (Ns, Ns, usize) {
        let mut it = CompactIter { bytes: self.bytes, end: self.end, pos, prev_end };
        let s = it.prev_end + it.value();
        let e = s + it.value();
        (s, e, it.pos)
    }

    /// The intervals that end by `limit`, taken: the sum of their lengths and the last end (`from`
    /// when none did), and the first interval that ends after `limit`, taken too (None at the end).
    /// As [`Iterator::next`] one by one, with the state in registers.
    #[inline]
    pub fn sum_run(&mut self, from: Ns, limit: Ns) -> (Ns, Ns, Option<(Ns, Ns)>) {
        let (mut pos, mut prev_end) = (self.pos, self.prev_end);
        let (mut lens, mut last) = (0, from);
        let first_after = loop {
            if pos >= self.end {
                break None;
            }
            let (s, e, next) = self.decode(pos, prev_end);
            (pos, prev_end) = (next, e);
            if e > limit {
                break Some((s, e));
            }
            lens += e - s;
            last = e;
        };
        (self.pos, self.prev_end) = (pos, prev_end);
        (lens, last, first_after)
    }
}

impl Iterator for CompactIter<'_> {
    type Item = (Ns, Ns);
    #[inline(always)]
    fn next(&mut self) -> Option<(Ns, Ns)> {
        if self.pos >= self.end {
            return None;
        }
        let (s, e, pos) = self.decode(self.pos, self.prev_end);
        (self.pos, self.prev_end) = (pos, e);
        Some((s, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prefix varints take the bytes LEB128 would, and intervals of any size read back as pushed.
    #[test]
    fn compact_prefix_varints() {
        let mut x = 99u64;
        let mut vals = vec![0u64, u64::MAX];
        for k in 0..64 {
            vals.extend([1 << k, (1 << k) - 1, (1 << k) + 1]);
        }
        for _ in 0..2000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            vals.push(x >> (x % 64));
        }
        for &v in &vals {
            let mut p = Vec::new();
            put_prefix(&mut p, v);
            let leb = (64 - (v | 1).leading_zeros()).div_ceil(7) as usize;
            let n = p.len();
            assert_eq!(n, if v < 1 << 56 { leb } else { 9 }, "{v}");
            p.extend_from_slice(&[0xff; 8]);
            let mut it = CompactIter { bytes: &p, end: n, pos: 0, prev_end: 0 };
            assert_eq!((it.value(), it.pos), (v, n), "{v}");
        }
        let mut c = CompactIntervals::default();
        let mut ivs =
            vec![(5, 6), (300, 20_000), (1 << 30, (1 << 30) + 1), ((1 << 31) + 7, 1 << 40), ((1 << 60) + 1, 1 << 61)];
        let mut t = 1u64 << 61;
        for _ in 0..5000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (gap, len) = (x % (1 << (x % 30)), 1 + (x >> 32) % (1 << (x % 25)));
            ivs.push((t + gap, t + gap + len));
            t += gap + len;
        }
        for &iv in &ivs {
            c.push(iv);
        }
        assert_eq!(c.iter().collect::<Vec<_>>(), ivs);
        c.shrink();
        assert_eq!(c.iter().collect::<Vec<_>>(), ivs);
    }
}
