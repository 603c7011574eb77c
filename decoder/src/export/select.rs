//! What to export from a huge run: ranks (`--ranks 0,2-3`), a time window relative to the start
//! (`--from 1.5s --to 2s`), and steps (`--steps 10-12`).

use crate::model::Ns;

/// A set of ids given as a list of numbers and inclusive ranges: "0,2-3,8".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdSet(Vec<(u64, u64)>);

impl IdSet {
    pub fn parse(s: &str) -> Result<IdSet, String> {
        let mut out = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let num = |t: &str| t.trim().parse::<u64>().map_err(|_| format!("'{t}' in '{s}' is not a number"));
            let (a, b) = match part.split_once('-') {
                Some((a, b)) => (num(a)?, num(b)?),
                None => (num(part)?, num(part)?),
            };
            if a > b {
                return Err(format!("range '{part}' runs backwards"));
            }
            out.push((a, b));
        }
        if out.is_empty() {
            return Err(format!("'{s}' names nothing (expected e.g. 0,2-3)"));
        }
        out.sort_unstable();
        Ok(IdSet(out))
    }

    pub fn contains(&self, v: u64) -> bool {
        self.0.iter().any(|&(a, b)| a <= v && v <= b)
    }
}

impl std::fmt::Display for IdSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> =
            self.0.iter().map(|&(a, b)| if a == b { a.to_string() } else { format!("{a}-{b}") }).collect();
        f.write_str(&parts.join(","))
    }
}

/// A time offset: a number of seconds ("1.5"), or with a unit ("1.5s", "200ms", "40us", "1000ns").
pub fn parse_offset(s: &str) -> Result<Ns, String> {
    let t = s.trim();
    let (num, scale) = [("ns", 1.0), ("us", 1e3), ("µs", 1e3), ("ms", 1e6), ("s", 1e9)]
        .iter()
        .find_map(|(u, k)| t.strip_suffix(u).map(|n| (n, *k)))
        .unwrap_or((t, 1e9));
    let v: f64 =
        num.trim().parse().map_err(|_| format!("'{s}' is not a time (e.g. 1.5, 1.5s, 200ms, 40us, 1000ns)"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!("'{s}': times are offsets from the start of the trace, 0 or more"));
    }
    Ok((v * scale).round() as Ns)
}

/// The parsed filters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selection {
    pub ranks: Option<IdSet>,
    /// Window start / end, relative to the first event of the selected processes.
    pub from: Option<Ns>,
    pub to: Option<Ns>,
    /// Step indexes (as `tprof summary` numbers them).
    pub steps: Option<IdSet>,
}

impl Selection {
    /// True when the time of events matters (a first pass is needed to place the window).
    pub fn needs_window(&self) -> bool {
        self.from.is_some() || self.to.is_some() || self.steps.is_some()
    }

    pub fn rank_selected(&self, rank: Option<u32>) -> bool {
        match (&self.ranks, rank) {
            (None, _) => true,
            (Some(set), Some(r)) => set.contains(r as u64),
            (Some(_), None) => false,
        }
    }
}

/// A closed time window on the global timebase; an event is kept when it overlaps it
/// (slices: `start <= hi && end >= lo`; instants: `lo <= ts <= hi`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub lo: Ns,
    pub hi: Ns,
}

impl Window {
    pub const ALL: Window = Window { lo: 0, hi: Ns::MAX };

    pub fn keeps(&self, start: Ns, end: Ns) -> bool {
        start <= self.hi && end.max(start) >= self.lo
    }

    pub fn intersect(self, o: Window) -> Window {
        Window { lo: self.lo.max(o.lo), hi: self.hi.min(o.hi) }
    }

    pub fn is_empty(&self) -> bool {
        self.lo > self.hi
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_sets() {
        let s = IdSet::parse("0,2-3, 8").unwrap();
        assert!(s.contains(0) && s.contains(2) && s.contains(3) && s.contains(8));
        assert!(!s.contains(1) && !s.contains(4));
        assert_eq!(s.to_string(), "0,2-3,8");
        assert!(IdSet::parse("3-1").is_err());
        assert!(IdSet::parse("x").is_err());
        assert!(IdSet::parse("").is_err());
    }

    #[test]
    fn offsets() {
        assert_eq!(parse_offset("1.5").unwrap(), 1_500_000_000);
        assert_eq!(parse_offset("1.5s").unwrap(), 1_500_000_000);
        assert_eq!(parse_offset("200ms").unwrap(), 200_000_000);
        assert_eq!(parse_offset("40us").unwrap(), 40_000);
        assert_eq!(parse_offset("1000ns").unwrap(), 1000);
        assert!(parse_offset("-1").is_err());
        assert!(parse_offset("abc").is_err());
    }

    #[test]
    fn windows() {
        let w = Window { lo: 10, hi: 20 };
        assert!(w.keeps(5, 10) && w.keeps(20, 30) && w.keeps(12, 13));
        assert!(!w.keeps(0, 9) && !w.keeps(21, 30));
        assert!(w.keeps(15, 0), "instant-like (end before start) is judged by its start");
        assert!(w.intersect(Window { lo: 25, hi: 30 }).is_empty());
    }
}
