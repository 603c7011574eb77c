//! JSON tokens on a byte slice that may end anywhere: each function either parses a whole token or
//! says it needs more bytes ([`Fail::More`]) or that the bytes are not JSON ([`Fail::Bad`], with
//! the position). The caller holds a window of the text and retries from a token boundary.

use std::borrow::Cow;

use super::scan;

/// Why a token did not parse.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Fail {
    /// The slice ended inside the token.
    More,
    /// Not JSON at this position (index into the slice), and what was wrong.
    Bad(usize, &'static str),
}

pub(super) type R<T> = Result<T, Fail>;

/// Deepest nesting of arrays and objects skipped inside an event.
const MAX_DEPTH: u32 = 64;

/// A number as `serde_json` would hold it: non-negative integers as u64, negative ones as i64,
/// the rest (fractions, exponents, integers out of range, and the NaN/Infinity tokens) as f64.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Num {
    U(u64),
    I(i64),
    F(f64),
}

impl Num {
    pub fn as_u64(self) -> Option<u64> {
        match self {
            Num::U(u) => Some(u),
            _ => None,
        }
    }
    pub fn as_f64(self) -> f64 {
        match self {
            Num::U(u) => u as f64,
            Num::I(i) => i as f64,
            Num::F(f) => f,
        }
    }
    /// `as_u64`, else the value as f64 cast (saturating) to u64: how the importer reads an id.
    pub fn to_u64(self) -> u64 {
        self.as_u64().unwrap_or_else(|| self.as_f64() as u64)
    }
}

#[inline(always)]
pub(super) fn ws(b: &[u8], i: &mut usize) {
    // Most tokens follow the last with no whitespace between: one compare; or one space (as
    // after the commas and colons of indented JSON): two.
    match b.get(*i) {
        Some(&c) if c > b' ' => return,
        Some(b' ') if b.get(*i + 1).is_some_and(|&c| c > b' ') => {
            *i += 1;
            return;
        }
        _ => {}
    }
    ws_run(b, i);
}

fn ws_run(b: &[u8], i: &mut usize) {
    while *i < b.len() && matches!(b[*i], b' ' | b'\n' | b'\r' | b'\t') {
        *i += 1;
    }
}

/// The byte at `i` after whitespace (not consumed).
#[inline]
pub(super) fn peek(b: &[u8], i: &mut usize) -> R<u8> {
    ws(b, i);
    b.get(*i).copied().ok_or(Fail::More)
}

#[inline]
pub(super) fn expect(b: &[u8], i: &mut usize, c: u8, what: &'static str) -> R<()> {
    if peek(b, i)? == c {
        *i += 1;
        Ok(())
    } else {
        Err(Fail::Bad(*i, what))
    }
}

/// A string starting at the `"` at `i`.
pub(super) fn string<'a>(b: &'a [u8], i: &mut usize) -> R<Cow<'a, str>> {
    let at = *i + 1;
    let bad = |_| Fail::Bad(at, "invalid UTF-8 in a string");
    Ok(match string_bytes(b, i)? {
        Cow::Borrowed(raw) => Cow::Borrowed(std::str::from_utf8(raw).map_err(bad)?),
        Cow::Owned(v) => Cow::Owned(String::from_utf8(v).map_err(|e| bad(e.utf8_error()))?),
    })
}

/// The string starting at the `"` at `i` as its bytes (escapes decoded), checked as [`string`]
/// checks it (UTF-8, no control characters) but without building a `str`: keys and skipped values.
#[inline]
pub(super) fn string_bytes<'a>(b: &'a [u8], i: &mut usize) -> R<Cow<'a, [u8]>> {
    let start = *i + 1;
    let rest = b.get(start..).unwrap_or_default();
    let (k, flags) = scan::string_span(rest);
    match rest.get(k) {
        None => Err(Fail::More),
        Some(b'"') => {
            let raw = &rest[..k];
            if flags != 0 {
                if flags & scan::CONTROL != 0 {
                    return Err(Fail::Bad(start, "control character in a string"));
                }
                if std::str::from_utf8(raw).is_err() {
                    return Err(Fail::Bad(start, "invalid UTF-8 in a string"));
                }
            }
            *i = start + k + 1;
            Ok(Cow::Borrowed(raw))
        }
        // An escape: decode the whole string the slow way.
        Some(_) => escaped_string(b, i).map(Cow::Owned),
    }
}

fn escaped_string(b: &[u8], i: &mut usize) -> R<Vec<u8>> {
    let mut out: Vec<u8> = Vec::new();
    let mut j = *i + 1;
    loop {
        let c = *b.get(j).ok_or(Fail::More)?;
        match c {
            b'"' => break,
            b'\\' => {
                let e = *b.get(j + 1).ok_or(Fail::More)?;
                j += 2;
                match e {
                    b'"' => out.push(b'"'),
                    b'\\' => out.push(b'\\'),
                    b'/' => out.push(b'/'),
                    b'b' => out.push(8),
                    b'f' => out.push(12),
                    b'n' => out.push(b'\n'),
                    b'r' => out.push(b'\r'),
                    b't' => out.push(b'\t'),
                    b'u' => {
                        let hi = hex4(b, j)?;
                        j += 4;
                        let cp = if (0xD800..0xDC00).contains(&hi) {
                            if b.get(j) != Some(&b'\\') || b.get(j + 1) != Some(&b'u') {
                                if j + 1 >= b.len() {
                                    return Err(Fail::More);
                                }
                                return Err(Fail::Bad(j, "lone surrogate in a \\u escape"));
                            }
                            let lo = hex4(b, j + 2)?;
                            if !(0xDC00..0xE000).contains(&lo) {
                                return Err(Fail::Bad(j, "lone surrogate in a \\u escape"));
                            }
                            j += 6;
                            0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                        } else if (0xDC00..0xE000).contains(&hi) {
                            return Err(Fail::Bad(j, "lone surrogate in a \\u escape"));
                        } else {
                            hi
                        };
                        let ch = char::from_u32(cp).ok_or(Fail::Bad(j, "bad \\u escape"))?;
                        let mut buf = [0u8; 4];
                        out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                    }
                    _ => return Err(Fail::Bad(j - 1, "bad escape in a string")),
                }
            }
            c if c < 0x20 => return Err(Fail::Bad(j, "control character in a string")),
            _ => {
                out.push(c);
                j += 1;
            }
        }
    }
    if std::str::from_utf8(&out).is_err() {
        return Err(Fail::Bad(*i, "invalid UTF-8 in a string"));
    }
    *i = j + 1;
    Ok(out)
}

fn hex4(b: &[u8], j: usize) -> R<u32> {
    let h = b.get(j..j + 4).ok_or(Fail::More)?;
    let mut v = 0u32;
    for &c in h {
        let d = (c as char).to_digit(16).ok_or(Fail::Bad(j, "bad \\u escape"))?;
        v = v * 16 + d;
    }
    Ok(v)
}

/// Where a number starting at `start` has its digits (past a leading '-'), and whether it had one.
#[inline(always)]
fn sign(b: &[u8], start: usize) -> (usize, bool) {
    let neg = b.get(start) == Some(&b'-');
    (start + neg as usize, neg)
}

/// A number at `i`; also the non-standard tokens `NaN`, `Infinity` and `-Infinity`.
#[inline]
pub(super) fn number(b: &[u8], i: &mut usize) -> R<Num> {
    plain_number(b, i).map_or_else(|| any_number(b, i), Ok)
}

/// The digits at `b[*j..]`: moves `j` past them and returns their value (wrapping).
#[inline(always)]
fn digits(b: &[u8], j: &mut usize) -> u64 {
    let mut v = 0u64;
    while let Some(&c) = b.get(*j) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        v = v.wrapping_mul(10).wrapping_add(d as u64);
        *j += 1;
    }
    v
}

/// [`number`] for the common numbers, without a call: a non-negative integer, or decimal without
/// an exponent, of 19 digits at most, followed by a byte in the slice. None for the rest (and
/// for what is not a number), which [`any_number`] reads.
#[inline(always)]
fn plain_number(b: &[u8], i: &mut usize) -> Option<Num> {
    let start = *i;
    let mut j = start;
    let int = digits(b, &mut j);
    let n = j - start;
    if n == 0 || n > 19 || (n > 1 && b[start] == b'0') {
        return None;
    }
    match *b.get(j)? {
        b'.' => {
            j += 1;
            let f0 = j;
            let m = digits(b, &mut j);
            let k = j - f0;
            if k == 0 || n + k > 19 || matches!(b.get(j)?, b'e' | b'E') {
                return None;
            }
            // The mantissa as any_number builds it (the digits before and after the point).
            let v = scan::exact_decimal(int.wrapping_mul(scan::pow10(k)?).wrapping_add(m), k, false)?;
            *i = j;
            Some(Num::F(v))
        }
        b'e' | b'E' => None,
        _ => {
            *i = j;
            Some(Num::U(int))
        }
    }
}

/// Any number [`number`] reads, digit by digit.
fn any_number(b: &[u8], i: &mut usize) -> R<Num> {
    let start = *i;
    let (mut j, neg) = sign(b, start);
    if matches!(b.get(j), Some(b'I' | b'N')) {
        return special_number(b, i, j, neg);
    }
    let int_start = j;
    // Up to 19 digits cannot overflow: accumulate without checks, and redo a longer run checked.
    let mut int: u64 = 0;
    while j < b.len() && b[j].is_ascii_digit() {
        int = int.wrapping_mul(10).wrapping_add((b[j] - b'0') as u64);
        j += 1;
    }
    let mut overflow = false;
    if j - int_start > 19 {
        int = 0;
        for &c in &b[int_start..j] {
            match int.checked_mul(10).and_then(|v| v.checked_add((c - b'0') as u64)) {
                Some(v) => int = v,
                None => overflow = true,
            }
        }
    }
    if j == int_start {
        return Err(if j >= b.len() { Fail::More } else { Fail::Bad(start, "not a number") });
    }
    if b[int_start] == b'0' && j - int_start > 1 {
        return Err(Fail::Bad(start, "number with a leading zero"));
    }
    let mut float = overflow;
    // The digits without the point, while they fit (then the value may be exact: see below).
    let mut mantissa = Some(int).filter(|_| !overflow);
    let mut frac_digits = 0;
    if b.get(j) == Some(&b'.') {
        float = true;
        j += 1;
        let f0 = j;
        let mut m = mantissa.unwrap_or(0);
        while j < b.len() && b[j].is_ascii_digit() {
            m = m.wrapping_mul(10).wrapping_add((b[j] - b'0') as u64);
            j += 1;
        }
        // Exact while the digits before and after the point are 19 at most; past that the value
        // is parsed from its text (as it would be when the mantissa does not fit 2^53 anyway).
        mantissa = mantissa.filter(|_| (f0 - 1 - int_start) + (j - f0) <= 19).map(|_| m);
        if j == f0 {
            return Err(if j >= b.len() { Fail::More } else { Fail::Bad(start, "number without digits after '.'") });
        }
        frac_digits = j - f0;
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        float = true;
        mantissa = None;
        j += 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let e0 = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j == e0 {
            return Err(if j >= b.len() { Fail::More } else { Fail::Bad(start, "number without exponent digits") });
        }
    }
    if j >= b.len() {
        // The number may go on in the next bytes.
        return Err(Fail::More);
    }
    *i = j;
    if !float {
        if !neg {
            return Ok(Num::U(int));
        }
        if int <= i64::MAX as u64 + 1 {
            return Ok(Num::I((int as i128).wrapping_neg() as i64));
        }
    }
    if let Some(v) = mantissa.and_then(|m| scan::exact_decimal(m, frac_digits, neg)) {
        return Ok(Num::F(v));
    }
    let text = std::str::from_utf8(&b[start..j]).map_err(|_| Fail::Bad(start, "not a number"))?;
    text.parse::<f64>().map(Num::F).map_err(|_| Fail::Bad(start, "not a number"))
}

/// `Infinity` or `NaN` at `j` (after the sign, if any, of the number at `i`).
fn special_number(b: &[u8], i: &mut usize, j: usize, neg: bool) -> R<Num> {
    let start = *i;
    for (word, v) in [(&b"Infinity"[..], f64::INFINITY), (&b"NaN"[..], f64::NAN)] {
        if b.get(j).is_some_and(|&c| c == word[0]) {
            let have = &b[j..b.len().min(j + word.len())];
            if !word.starts_with(have) {
                return Err(Fail::Bad(start, "not a number"));
            }
            if have.len() < word.len() {
                return Err(Fail::More);
            }
            *i = j + word.len();
            return Ok(Num::F(if neg { -v } else { v }));
        }
    }
    Err(Fail::Bad(start, "not a number"))
}

/// Skips the literal `word` (true, false, null) at `i`.
pub(super) fn literal(b: &[u8], i: &mut usize, word: &'static [u8]) -> R<()> {
    let have = &b[*i..b.len().min(*i + word.len())];
    if !word.starts_with(have) {
        return Err(Fail::Bad(*i, "not a JSON value"));
    }
    if have.len() < word.len() {
        return Err(Fail::More);
    }
    *i += word.len();
    Ok(())
}

/// Skips one value at `i` (after whitespace).
pub(super) fn skip_value(b: &[u8], i: &mut usize, depth: u32) -> R<()> {
    if depth > MAX_DEPTH {
        return Err(Fail::Bad(*i, "nested too deep"));
    }
    match peek(b, i)? {
        b'"' => string_bytes(b, i).map(|_| ()),
        b'{' => {
            *i += 1;
            if peek(b, i)? == b'}' {
                *i += 1;
                return Ok(());
            }
            loop {
                if peek(b, i)? != b'"' {
                    return Err(Fail::Bad(*i, "expected a key"));
                }
                string_bytes(b, i)?;
                expect(b, i, b':', "expected ':' after a key")?;
                skip_value(b, i, depth + 1)?;
                match peek(b, i)? {
                    b',' => *i += 1,
                    b'}' => {
                        *i += 1;
                        return Ok(());
                    }
                    _ => return Err(Fail::Bad(*i, "expected ',' or '}' in an object")),
                }
            }
        }
        b'[' => {
            *i += 1;
            if peek(b, i)? == b']' {
                *i += 1;
                return Ok(());
            }
            loop {
                skip_value(b, i, depth + 1)?;
                match peek(b, i)? {
                    b',' => *i += 1,
                    b']' => {
                        *i += 1;
                        return Ok(());
                    }
                    _ => return Err(Fail::Bad(*i, "expected ',' or ']' in an array")),
                }
            }
        }
        b't' => literal(b, i, b"true"),
        b'f' => literal(b, i, b"false"),
        b'n' => literal(b, i, b"null"),
        _ => skip_number(b, i),
    }
}

/// Skips the number at `i`, checked as [`number`] checks it (same errors) but not computed.
fn skip_number(b: &[u8], i: &mut usize) -> R<()> {
    let start = *i;
    let (mut j, neg) = sign(b, start);
    if matches!(b.get(j), Some(b'I' | b'N')) {
        return special_number(b, i, j, neg).map(|_| ());
    }
    let digits = |j: &mut usize| {
        let s = *j;
        while *j < b.len() && b[*j].is_ascii_digit() {
            *j += 1;
        }
        *j - s
    };
    let int_start = j;
    let n = digits(&mut j);
    if n == 0 {
        return Err(if j >= b.len() { Fail::More } else { Fail::Bad(start, "not a number") });
    }
    if b[int_start] == b'0' && n > 1 {
        return Err(Fail::Bad(start, "number with a leading zero"));
    }
    if b.get(j) == Some(&b'.') {
        j += 1;
        if digits(&mut j) == 0 {
            return Err(if j >= b.len() { Fail::More } else { Fail::Bad(start, "number without digits after '.'") });
        }
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        j += 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if digits(&mut j) == 0 {
            return Err(if j >= b.len() { Fail::More } else { Fail::Bad(start, "number without exponent digits") });
        }
    }
    if j >= b.len() {
        return Err(Fail::More);
    }
    *i = j;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn num(s: &str) -> R<Num> {
        let mut i = 0;
        number(s.as_bytes(), &mut i)
    }

    #[test]
    fn numbers_as_serde_json_holds_them() {
        assert_eq!(num("12,"), Ok(Num::U(12)));
        assert_eq!(num("-3}"), Ok(Num::I(-3)));
        assert_eq!(num("1.5 "), Ok(Num::F(1.5)));
        assert_eq!(num("18446744073709551616,"), Ok(Num::F(18446744073709551616.0)));
        assert_eq!(num("12"), Err(Fail::More));
        assert!(matches!(num("NaN,"), Ok(Num::F(f)) if f.is_nan()));
        assert_eq!(num("-Infinity,"), Ok(Num::F(f64::NEG_INFINITY)));
        assert_eq!(num("Inf"), Err(Fail::More));
        assert!(matches!(num("01,"), Err(Fail::Bad(..))));
        assert!(matches!(num("x"), Err(Fail::Bad(..))));
        // Every way through the digit loops against the standard parser.
        for t in [
            "0.5",
            "5000000010.125",
            "1682725898236567",
            "1682725898236567.250",
            "12.000",
            "0.000123",
            "9999999999999999999",
            "18446744073709551615",
            "18446744073709551616",
            "123456789012345678901",
            "1234567890.1234567890",
            "0.00000000000000000001",
            "-0.0",
            "-12.5",
            "9007199254740993.0",
            "1.7976931348623157e308",
            "4.9e-324",
            "3e5",
        ] {
            let want = t.parse::<f64>().unwrap();
            let got = num(&format!("{t},")).unwrap();
            assert_eq!(got.as_f64().to_bits(), want.to_bits(), "{t}");
            if let Ok(u) = t.parse::<u64>() {
                assert_eq!(got, Num::U(u), "{t}");
            }
        }
    }

    #[test]
    fn plain_numbers_read_as_any_number_reads_them() {
        let mut texts: Vec<String> = Vec::new();
        for int in ["0", "7", "00", "01", "4037", "5000000010", "1234567890123456789", "12345678901234567890"] {
            for frac in ["", ".", ".0", ".125", ".000", ".5", ".1234567890", ".123456789012345678901"] {
                for tail in ["", ",", "}", " ", "e5,", "E-1,", "x"] {
                    texts.push(format!("{int}{frac}{tail}"));
                    texts.push(format!("-{int}{frac}{tail}"));
                }
            }
        }
        for t in &texts {
            let b = t.as_bytes();
            let (mut i, mut j) = (0, 0);
            if let Some(v) = plain_number(b, &mut i) {
                let want = any_number(b, &mut j);
                assert_eq!(want.map(|w| (w, j)), Ok((v, i)), "{t}");
                if let Num::F(f) = v {
                    assert_eq!(f.to_bits(), t[..i].parse::<f64>().unwrap().to_bits(), "{t}");
                }
            } else {
                assert_eq!(i, 0, "{t}");
            }
        }
        // The plain ones are the common ones.
        for t in ["4037,", "5000000010.125,", "12.000}", "0 "] {
            assert!(plain_number(t.as_bytes(), &mut 0).is_some(), "{t}");
        }
    }

    #[test]
    fn skipped_numbers_fail_and_end_where_parsed_ones_do() {
        for s in [
            "12,",
            "-3}",
            "1.5 ",
            "0.5e-3]",
            "1E+9,",
            "18446744073709551616,",
            "12",
            "NaN,",
            "-Infinity,",
            "Inf",
            "01,",
            "x",
            "1.,",
            "1.",
            "1e,",
            "-",
            "-,",
            "0,",
        ] {
            let (mut i, mut k) = (0, 0);
            let parsed = number(s.as_bytes(), &mut i).map(|_| ());
            assert_eq!(skip_number(s.as_bytes(), &mut k), parsed, "{s}");
            assert_eq!(i, k, "{s}");
        }
    }

    #[test]
    fn strings_and_skips() {
        let b = br#""a\"b\u00e9\ud83d\ude00" rest"#;
        let mut i = 0;
        assert_eq!(string(b, &mut i).unwrap(), "a\"b\u{e9}\u{1f600}");
        assert_eq!(&b[i..], b" rest");
        let mut i = 0;
        assert_eq!(string(b"\"abc", &mut i), Err(Fail::More));
        let mut i = 0;
        assert!(matches!(string(b"\"a\nb\"", &mut i), Err(Fail::Bad(..))));
        let v = br#"{"a":[1,{"b":null}],"c":true} ,"#;
        let mut i = 0;
        skip_value(v, &mut i, 0).unwrap();
        assert_eq!(&v[i..], b" ,");
        let mut i = 0;
        assert_eq!(skip_value(&v[..10], &mut i, 0), Err(Fail::More));
    }
}
