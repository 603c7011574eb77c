//! LEB128 varints and zigzag encoding: the building blocks of the compact record payloads.

/// Writes `v` as an unsigned LEB128 varint at `out[*pos..]`. Returns false if it does not fit.
#[inline]
pub fn put_u64(out: &mut [u8], pos: &mut usize, mut v: u64) -> bool {
    let mut p = *pos;
    // Most fields (ids, small deltas, flags) fit one byte.
    if v < 0x80 {
        if let Some(b) = out.get_mut(p) {
            *b = v as u8;
            *pos = p + 1;
            return true;
        }
        return false;
    }
    loop {
        if p >= out.len() {
            return false;
        }
        let byte = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out[p] = byte;
            p += 1;
            break;
        }
        out[p] = byte | 0x80;
        p += 1;
    }
    *pos = p;
    true
}

/// Reads an unsigned LEB128 varint from `buf[*pos..]`. None when truncated or longer than 10 bytes.
#[inline]
pub fn get_u64(buf: &[u8], pos: &mut usize) -> Option<u64> {
    // Most fields (ids, small deltas, flags) are one byte.
    if let Some(&b) = buf.get(*pos) {
        if b < 0x80 {
            *pos += 1;
            return Some(u64::from(b));
        }
    }
    get_u64_long(buf, pos)
}

#[inline(never)]
fn get_u64_long(buf: &[u8], pos: &mut usize) -> Option<u64> {
    let mut p = *pos;
    // Two and three bytes (most timestamp deltas) without the loop.
    if let Some(&[b0, b1, ref more @ ..]) = buf.get(p..) {
        let v = u64::from(b0 & 0x7f) | u64::from(b1 & 0x7f) << 7;
        if b0 >= 0x80 {
            if b1 < 0x80 {
                *pos = p + 2;
                return Some(v);
            }
            if let Some(&b2) = more.first() {
                if b2 < 0x80 {
                    *pos = p + 3;
                    return Some(v | u64::from(b2) << 14);
                }
            }
        }
    }
    let mut v: u64 = 0;
    let mut shift = 0u32;
    loop {
        let byte = *buf.get(p)?;
        p += 1;
        if shift == 63 && byte > 1 {
            return None;
        }
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            break;
        }
        shift += 7;
        if shift > 63 {
            return None;
        }
    }
    *pos = p;
    Some(v)
}

/// Zigzag-maps a signed value so small magnitudes encode short.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Encodes `value` relative to `base` losslessly for all u64 pairs (wrapping difference, zigzagged).
#[inline]
pub fn delta(value: u64, base: u64) -> u64 {
    zigzag(value.wrapping_sub(base) as i64)
}

/// Inverse of [`delta`].
#[inline]
pub fn undelta(encoded: u64, base: u64) -> u64 {
    base.wrapping_add(unzigzag(encoded) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_roundtrip_edges() {
        for v in
            [0u64, 1, 127, 128, 300, 16_383, 16_384, (1 << 21) - 1, 1 << 21, u32::MAX as u64, u64::MAX - 1, u64::MAX]
        {
            let mut buf = [0u8; 10];
            let mut p = 0;
            assert!(put_u64(&mut buf, &mut p, v));
            let mut q = 0;
            assert_eq!(get_u64(&buf[..p], &mut q), Some(v));
            assert_eq!(p, q);
        }
    }

    #[test]
    fn varint_does_not_overflow_buffer() {
        let mut buf = [0u8; 2];
        let mut p = 0;
        assert!(!put_u64(&mut buf, &mut p, 1 << 20));
        assert_eq!(p, 0);
    }

    #[test]
    fn truncated_and_overlong_varints_are_rejected() {
        let mut p = 0;
        assert_eq!(get_u64(&[0x80, 0x80], &mut p), None);
        let mut p = 0;
        assert_eq!(get_u64(&[0xff; 11], &mut p), None);
        // A 10th byte with more than bit 63, or with a continuation bit.
        for last in [0x02, 0x7f, 0x81] {
            let mut bytes = [0xffu8; 11];
            bytes[9] = last;
            let mut p = 0;
            assert_eq!(get_u64(&bytes, &mut p), None, "{last:#x}");
        }
        let mut bytes = [0x80u8; 10];
        bytes[9] = 0x01;
        let mut p = 0;
        assert_eq!((get_u64(&bytes, &mut p), p), (Some(1 << 63), 10));
    }

    #[test]
    fn delta_is_lossless_for_extremes() {
        for (v, b) in [(0u64, u64::MAX), (u64::MAX, 0), (5, 7), (7, 5), (1 << 63, 3)] {
            assert_eq!(undelta(delta(v, b), b), v);
        }
    }
}
