//! Strings the importer expects (keys such as `"ts"`, values such as `"kernel"`) recognised straight
//! in the JSON text: the bytes after the opening quote are compared with each expected word of the
//! same first byte, closing quote included, so a known word needs no scan for its end, no checks
//! and no second compare. Anything else (an unknown word, an escape) goes the ordinary way
//! ([`string_bytes`]) and is then looked up decoded, so the answer is the same either way.

use super::json::{string_bytes, R};

/// A set of at most 254 words, each with what it stands for, those of the same first byte next
/// to each other.
pub(super) struct Words<T: Copy, const N: usize> {
    words: [(&'static [u8], T); N],
    /// The first 8 bytes of each word and its closing quote (little-endian), and which of them
    /// count (the word with its quote may be shorter).
    heads: [(u64, u64); N],
    /// For each first byte, the index of the first word with it (`N` when none has it).
    first: [u8; 256],
}

impl<T: Copy, const N: usize> Words<T, N> {
    /// Panics (at compile time, in a `const`) when the words are not grouped by first byte, are
    /// empty, or are too many.
    pub const fn new(words: [(&'static [u8], T); N]) -> Words<T, N> {
        assert!(N < 255);
        let mut first = [N as u8; 256];
        let mut heads = [(0u64, 0u64); N];
        let mut k = 0;
        while k < N {
            let w = words[k].0;
            let mut j = 0;
            while j < 8 && j <= w.len() {
                let c = if j < w.len() { w[j] } else { b'"' };
                heads[k].0 |= (c as u64) << (8 * j);
                heads[k].1 |= 0xff << (8 * j);
                j += 1;
            }
            assert!(!words[k].0.is_empty());
            let c = words[k].0[0] as usize;
            if first[c] as usize == N {
                first[c] = k as u8;
            } else {
                assert!(words[k - 1].0[0] as usize == c, "words of one first byte must be next to each other");
            }
            k += 1;
        }
        Words { words, heads, first }
    }

    /// The string at `i` (at its opening quote), moved past: what the word it is stands for, if
    /// it is one.
    #[inline]
    pub fn find(&self, b: &[u8], i: &mut usize) -> R<Option<T>> {
        let s = *i + 1;
        if let Some(x) = b.get(s..s + 8) {
            let x = u64::from_le_bytes(x.try_into().expect("8 bytes"));
            let c = x as u8;
            let mut k = self.first[c as usize] as usize;
            while k < N && self.heads[k].0 as u8 == c {
                let (head, mask) = self.heads[k];
                if x & mask == head {
                    let (w, v) = self.words[k];
                    let end = s + w.len();
                    if w.len() < 8 || (b.get(s + 8..end) == Some(&w[8..]) && b.get(end) == Some(&b'"')) {
                        *i = end + 1;
                        return Ok(Some(v));
                    }
                }
                k += 1;
            }
        }
        let raw = string_bytes(b, i)?;
        Ok(self.words.iter().find(|w| *w.0 == *raw).map(|w| w.1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::input::kineto::json::Fail;

    const W: Words<usize, 6> =
        Words::new([(b"ts", 0), (b"tid", 1), (b"name", 2), (b"block", 3), (b"External id", 4), (b"Extern", 5)]);

    fn find(s: &str) -> (R<Option<usize>>, usize) {
        let mut i = 0;
        let r = W.find(s.as_bytes(), &mut i);
        (r, i)
    }

    #[test]
    fn words_found_as_string_bytes_reads_them() {
        assert_eq!(find(r#""ts":1"#), (Ok(Some(0)), 4));
        assert_eq!(find(r#""tid":1"#), (Ok(Some(1)), 5));
        assert_eq!(find(r#""block":1"#), (Ok(Some(3)), 7));
        assert_eq!(find(r#""blocks per SM":1"#), (Ok(None), 15));
        assert_eq!(find(r#""t":1"#), (Ok(None), 3));
        assert_eq!(find(r#""":1"#), (Ok(None), 2));
        // Escaped: decoded, then looked up.
        assert_eq!(find(r#""n\u0061me":1"#), (Ok(Some(2)), 11));
        // Cut short or damaged: as string_bytes says.
        assert_eq!(find(r#""ti"#).0, Err(Fail::More));
        assert_eq!(find(r#""ts"#).0, Err(Fail::More));
        assert!(matches!(find("\"t\ts\":1").0, Err(Fail::Bad(..))));
        // Every prefix of every word, cut anywhere, against string_bytes and a plain lookup.
        for text in [
            r#""ts","#,
            r#""tid","#,
            r#""name","#,
            r#""nam","#,
            r#""blockx","#,
            r#""x","#,
            r#""External id","#,
            r#""External ic","#,
            r#""External id2","#,
            r#""Extern","#,
            r#""Externa","#,
            r#""Extern\u0061l id","#,
        ] {
            // Also with the bytes after the string, as the window usually has them.
            let long = format!("{text}{}", " ".repeat(16));
            for cut in (0..=text.len()).chain([long.len()]) {
                let b = &long.as_bytes()[..cut];
                let (mut i, mut j) = (0, 0);
                let got = W.find(b, &mut i);
                let want = string_bytes(b, &mut j).map(|s| W.words.iter().position(|w| *w.0 == *s));
                assert_eq!((got, i), (want, j), "{:?}", String::from_utf8_lossy(b));
            }
        }
    }
}
