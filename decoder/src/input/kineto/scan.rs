//! The inner loops of the JSON scanner, written for speed: finding the end of a string eight bytes
//! at a time (noting on the way whether it holds control or non-ASCII bytes), and reading a
//! decimal number exactly without going through text (Clinger's fast path; other numbers are left
//! to the standard parser).

const ONES: u64 = 0x0101_0101_0101_0101;
const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// The high bit of every byte of `x` that is zero (exact: no carries between bytes).
#[inline(always)]
fn zero_bytes(x: u64) -> u64 {
    !(((x & LOW7) + LOW7) | x) & HIGH
}

/// Flags of [`string_span`]: a byte below 0x20 / of 0x80 or above comes before the stop.
pub(super) const CONTROL: u8 = 1;
pub(super) const NON_ASCII: u8 = 2;

#[inline(always)]
fn word(b: &[u8], j: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[j..j + 8]);
    u64::from_le_bytes(w)
}

/// Scans `b` for the first `"` or `\`: its index (`b.len()` when there is none) and the
/// [`CONTROL`] / [`NON_ASCII`] flags of the bytes before it.
#[inline]
pub(super) fn string_span(b: &[u8]) -> (usize, u8) {
    let mut odd = 0u64;
    let mut j = 0;
    while j + 8 <= b.len() {
        let x = word(b, j);
        let stops = zero_bytes(x ^ (ONES * b'"' as u64)) | zero_bytes(x ^ (ONES * b'\\' as u64));
        // Control bytes in the high bit of a byte, non-ASCII in the next lower bit.
        let here = zero_bytes(x & (ONES * 0xe0)) | ((x & HIGH) >> 1);
        if stops != 0 {
            let k = stops.trailing_zeros() as usize / 8;
            odd |= here & ((1u64 << (8 * k)) - 1);
            return (j + k, flags(odd));
        }
        odd |= here;
        j += 8;
    }
    let mut f = flags(odd);
    while j < b.len() {
        let c = b[j];
        if c == b'"' || c == b'\\' {
            break;
        }
        if c < 0x20 {
            f |= CONTROL;
        } else if c >= 0x80 {
            f |= NON_ASCII;
        }
        j += 1;
    }
    (j, f)
}

#[inline(always)]
fn flags(odd: u64) -> u8 {
    (if odd & HIGH != 0 { CONTROL } else { 0 }) | (if odd & (HIGH >> 1) != 0 { NON_ASCII } else { 0 })
}

/// Powers of ten exact as f64.
const POW10: [f64; 23] = [
    1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20,
    1e21, 1e22,
];

/// 10^k as an integer, for k <= 19.
#[inline]
pub(super) fn pow10(k: usize) -> Option<u64> {
    10u64.checked_pow(k as u32).filter(|_| k <= 19)
}

/// `mantissa / 10^frac_digits` correctly rounded, when that can be done exactly in f64: both the
/// mantissa (at most 2^53) and the power of ten (at most 10^22) are exact, so one IEEE division
/// rounds as the decimal text would. None otherwise.
#[inline]
pub(super) fn exact_decimal(mantissa: u64, frac_digits: usize, neg: bool) -> Option<f64> {
    if mantissa > 1 << 53 || frac_digits >= POW10.len() {
        return None;
    }
    let v = mantissa as f64 / POW10[frac_digits];
    Some(if neg { -v } else { v })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_stop_at_quote_or_backslash_and_classify_before_it() {
        let s = |t: &str| string_span(t.as_bytes());
        assert_eq!(s("abc\"x"), (3, 0));
        assert_eq!(s("abcdefghijkl\\n\""), (12, 0));
        assert_eq!(s("abcdefgh"), (8, 0));
        assert_eq!(s("a\tbcdefghij\""), (11, CONTROL));
        assert_eq!(s("abcdefghij\"\t"), (10, 0));
        assert_eq!(s("abcdéfgh\"é"), (9, NON_ASCII));
        assert_eq!(s("abcdefg\"é\t"), (7, 0));
        assert_eq!(s("\tabcdéfgh\""), (10, CONTROL | NON_ASCII));
        // Every position of the stop and of an odd byte, in and out of the 8-byte words.
        for len in 0..20 {
            for at in 0..len {
                let mut v = vec![b'x'; len];
                v[at] = if at % 2 == 0 { b'"' } else { b'\\' };
                assert_eq!(string_span(&v).0, at);
                for c in 0..len {
                    let mut w = v.clone();
                    if c != at {
                        w[c] = 0x1f;
                        assert_eq!(string_span(&w).1, if c < at { CONTROL } else { 0 }, "{len} {at} {c}");
                        w[c] = 0xc3;
                        assert_eq!(string_span(&w).1, if c < at { NON_ASCII } else { 0 }, "{len} {at} {c}");
                    }
                }
            }
        }
    }

    #[test]
    fn exact_decimals_match_the_standard_parser() {
        for (m, k, text) in [(5_000_000_010_125u64, 3, "5000000010.125"), (12_000, 3, "12.000"), (123, 6, "0.000123")] {
            assert_eq!(exact_decimal(m, k, false), Some(text.parse::<f64>().unwrap()));
        }
        assert_eq!(exact_decimal((1 << 53) + 1, 1, false), None);
        assert_eq!(exact_decimal(1, 23, false), None);
        assert_eq!(exact_decimal(0, 1, true).map(f64::to_bits), Some((-0.0f64).to_bits()));
    }
}
