//! How durations, shares and sizes are written for people. Each output keeps the form it has
//! always printed (the summary's tables, the diagnoses' sentences and the report page round
//! differently); they all come from here.

use crate::model::Ns;

/// "1.234 ms": the unit that fits (s, ms, us, ns), three decimals (the summary's tables).
pub fn duration(ns: Ns) -> String {
    let f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.3} s", f / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.3} ms", f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.3} us", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// "12.3 ms": milliseconds, no decimal from 100 ms, one below, whole microseconds under 1 ms (the
/// diagnoses' sentences and tables).
pub fn millis(ns: Ns) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0} ms")
    } else if v >= 1.0 {
        format!("{v:.1} ms")
    } else {
        format!("{:.0} us", ns as f64 / 1e3)
    }
}

/// "1.23 s" from a second, "12.3 ms" from a millisecond, whole microseconds below (the report page).
pub fn millis_or_seconds(ns: Ns) -> String {
    let v = ns as f64 / 1e6;
    if v >= 1000.0 {
        format!("{:.2} s", v / 1000.0)
    } else if v >= 1.0 {
        format!("{v:.1} ms")
    } else {
        format!("{:.0} us", ns as f64 / 1e3)
    }
}

/// "12.3%": `x` as a percentage of `of`, one decimal; "-" when `of` is 0 (the summary's tables).
pub fn percent_of(x: u64, of: u64) -> String {
    if of == 0 {
        "-".into()
    } else {
        format!("{:.1}%", 100.0 * x as f64 / of as f64)
    }
}

/// "37%": a share (0..1) in whole percent, one decimal under 1% ("0.4%") so a small share is not
/// written as 0 (the diagnoses).
pub fn share(x: f64) -> String {
    if x < 0.01 && x > 0.0 {
        format!("{:.1}%", 100.0 * x)
    } else {
        format!("{:.0}%", 100.0 * x)
    }
}

/// "37%": a share (0..1) in whole percent (the report page).
pub fn share_whole(x: f64) -> String {
    format!("{:.0}%", 100.0 * x)
}

/// "64 MiB", "1.5 GiB", "512 B": binary units, one decimal unless whole.
pub fn byte_size(b: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", U[i])
    } else {
        format!("{v:.1} {}", U[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_output_keeps_its_form() {
        assert_eq!(duration(999), "999 ns");
        assert_eq!(duration(1_234_567), "1.235 ms");
        assert_eq!(duration(2_500_000_000), "2.500 s");
        assert_eq!(millis(123_456_789), "123 ms");
        assert_eq!(millis(12_345_678), "12.3 ms");
        assert_eq!(millis(456_789), "457 us");
        assert_eq!(millis_or_seconds(123_456_789), "123.5 ms");
        assert_eq!(millis_or_seconds(2_345_678_901), "2.35 s");
        assert_eq!(percent_of(1, 3), "33.3%");
        assert_eq!(percent_of(1, 0), "-");
        assert_eq!(share(0.372), "37%");
        assert_eq!(share(0.004), "0.4%");
        assert_eq!(share_whole(0.004), "0%");
        assert_eq!(byte_size(64 << 20), "64 MiB");
        assert_eq!(byte_size(3 << 29), "1.5 GiB");
        assert_eq!(byte_size(512), "512 B");
    }
}
