//! Names from the input are capped: a kernel, API, NVTX or collective name longer than [`NAME_CAP`]
//! bytes is kept as its first bytes, an ellipsis, its original length and a hash of the whole name,
//! so a 200 MB name gives a small report and two names that differ only past the cap stay distinct.
//! Every name passes through here once, when it is interned ([`crate::model::Interner`]); demangled
//! names are built under the same cap ([`demangle`]): a short mangled name can stand for an
//! exponentially long demangled one (nested template substitutions), so the demangler writes into a
//! bounded buffer and stops at the cap instead of building the whole text first.

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

/// Where the demangler's output goes: at most `NAME_CAP` bytes kept; writing past that fails, which
/// stops the demangler.
struct CappedWriter {
    out: String,
    overflowed: bool,
}

impl std::fmt::Write for CappedWriter {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        if self.out.len() + s.len() <= NAME_CAP {
            self.out.push_str(s);
            return Ok(());
        }
        let mut room = NAME_CAP - self.out.len();
        while !s.is_char_boundary(room) {
            room -= 1;
        }
        self.out.push_str(&s[..room]);
        self.overflowed = true;
        Err(std::fmt::Error)
    }
}

/// A C++ kernel name demangled when it is mangled, capped like every name: a demangled text over
/// [`NAME_CAP`] bytes is never built whole; it is shown as its first bytes and a marker with a hash of
/// the mangled name (so two such names stay distinct).
pub fn demangle(name: &str) -> String {
    if name.starts_with("_Z") {
        if let Ok(sym) = cpp_demangle::Symbol::new(name) {
            let mut w = CappedWriter { out: String::new(), overflowed: false };
            let done = sym.structured_demangle(&mut w, &cpp_demangle::DemangleOptions::default());
            if w.overflowed {
                let marker = format!("\u{2026} [demangled over {NAME_CAP} bytes, #{:016x}]", fnv1a(name.as_bytes()));
                let mut head = NAME_CAP - marker.len();
                while !w.out.is_char_boundary(head) {
                    head -= 1;
                }
                w.out.truncate(head);
                w.out.push_str(&marker);
                return w.out;
            }
            if done.is_ok() {
                return w.out;
            }
        }
    }
    cap(name).into_owned()
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

    /// `_Z1f1BI1AS0_E` then `S_I<ref><ref>E` per level: each parameter is a template of the previous
    /// one twice, so the demangled text doubles per level (c++filt: 163 bytes -> 852 KB at 16 levels;
    /// 40 levels would be ~10^13 bytes).
    fn doubling_name(levels: u32) -> String {
        let digits = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
        let sid = |n: u32| {
            let mut n = n - 1;
            let mut s = Vec::new();
            loop {
                s.push(digits[(n % 36) as usize]);
                n /= 36;
                if n == 0 {
                    break;
                }
            }
            s.reverse();
            format!("S{}_", String::from_utf8(s).unwrap())
        };
        let mut name = String::from("_Z1f1BI1AS0_E");
        for k in 1..levels {
            let r = sid(k + 1);
            name.push_str(&format!("S_I{r}{r}E"));
        }
        name
    }

    #[test]
    fn demangling_stops_at_the_cap_without_building_the_whole_text() {
        assert_eq!(demangle("_Z4gemmPfS_S_i"), "gemm(float*, float*, float*, int)");
        assert_eq!(demangle("_Z1f1BI1AS0_E"), "f(B<A, A>)");
        assert_eq!(demangle("not_mangled"), "not_mangled");
        // 403 bytes of mangled name for ~10^13 bytes of text: this returns at once, capped.
        let a = doubling_name(40);
        assert!(a.len() < 500, "{}", a.len());
        let d = demangle(&a);
        assert_eq!(d.len(), NAME_CAP, "capped exactly");
        assert!(d.starts_with("f(B<A, A>, B<B<A, A>, B<A, A> >, "), "{}", &d[..80]);
        assert!(d.contains("\u{2026} [demangled over 4096 bytes, #"), "{}", &d[4000..]);
        // Two such names that differ stay distinct.
        let b = doubling_name(41);
        assert_ne!(demangle(&b), d);
        // A name whose text fits is not marked.
        let small = demangle(&doubling_name(5));
        assert_eq!(small.len(), 384, "the length c++filt gives");
        assert!(!small.contains('\u{2026}'));
    }
}
