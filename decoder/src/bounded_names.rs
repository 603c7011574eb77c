//! Names from the input are capped: a kernel, API, NVTX or collective name longer than [`NAME_CAP`]
//! bytes is kept as its first bytes, an ellipsis, its original length and a hash of the whole name,
//! so a 200 MB name gives a small report and two names that differ only past the cap stay distinct.
//! Every name passes through here once, when it is interned ([`crate::model::Interner`]); demangled
//! names are capped again ([`crate::summary::demangle`]).

use std::borrow::Cow;

/// The longest name shown or exported, in bytes (the marker included).
pub const NAME_CAP: usize = 4096;

/// FNV-1a over the whole name: stable across runs and machines.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3))
}

/// `name` itself when at most [`NAME_CAP`] bytes, else `<head>… [<len> bytes, #<hash>]`.
pub fn cap(name: &str) -> Cow<'_, str> {
    if name.len() <= NAME_CAP {
        return Cow::Borrowed(name);
    }
    let marker = format!("\u{2026} [{} bytes, #{:016x}]", name.len(), fnv1a(name.as_bytes()));
    let mut head = NAME_CAP - marker.len();
    while !name.is_char_boundary(head) {
        head -= 1;
    }
    Cow::Owned(format!("{}{marker}", &name[..head]))
}

/// Like [`cap`] on raw bytes (inline string definitions), without first copying a huge name whole.
pub fn cap_bytes(bytes: &[u8]) -> Cow<'_, str> {
    if bytes.len() <= NAME_CAP {
        return String::from_utf8_lossy(bytes);
    }
    let marker = format!("\u{2026} [{} bytes, #{:016x}]", bytes.len(), fnv1a(bytes));
    let head = String::from_utf8_lossy(&bytes[..NAME_CAP]);
    let mut end = NAME_CAP.min(head.len()).saturating_sub(marker.len());
    while !head.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}{marker}", &head[..end]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_names_pass_long_ones_are_capped_and_stay_distinct() {
        assert!(matches!(cap("ampere_sgemm_128x64_nn"), Cow::Borrowed(_)));
        let a = "k".repeat(10_000) + "a";
        let b = "k".repeat(10_000) + "b";
        let (ca, cb) = (cap(&a), cap(&b));
        assert_eq!(ca.len(), NAME_CAP);
        assert!(ca.contains("\u{2026} [10001 bytes, #"), "{}", &ca[4000..]);
        assert_ne!(ca, cb, "names differing past the cap must stay distinct");
        assert_eq!(cap(&ca), ca, "capping is idempotent");
        assert_eq!(cap_bytes(a.as_bytes()), ca, "bytes and str agree");
        // Multi-byte characters are never cut.
        let wide = "\u{00e9}".repeat(5000);
        assert!(cap(&wide).len() <= NAME_CAP);
        assert!(cap_bytes(wide.as_bytes()).len() <= NAME_CAP);
    }
}
