//! Correlation ids in 32 bits, for the compact records the fact collector keeps: ids below 2^31
//! (all of them, in practice: CUPTI counts from 1 per process) stand for themselves; larger ones
//! are numbered from 2^31 up in order of first sight. Distinct ids stay distinct, 0 stays 0 (no
//! correlation), so any lookup by the compact id finds what a lookup by the full id would.

use crate::intervals::FastMap;

/// The first compact id of the ids that do not fit.
const WIDE: u64 = 1 << 31;

#[derive(Debug, Default)]
pub struct CorrIds {
    /// Full id -> compact id, for the ids from [`WIDE`] up.
    wide: FastMap<u64, u32>,
}

impl CorrIds {
    #[inline]
    pub fn compact(&mut self, corr: u64) -> u32 {
        if corr < WIDE {
            corr as u32
        } else {
            self.compact_wide(corr)
        }
    }

    /// The compact id `corr` was given (None for a wide one never compacted).
    pub fn get(&self, corr: u64) -> Option<u32> {
        if corr < WIDE {
            Some(corr as u32)
        } else {
            self.wide.get(&corr).copied()
        }
    }

    #[inline(never)]
    fn compact_wide(&mut self, corr: u64) -> u32 {
        let next = WIDE + self.wide.len() as u64;
        // 2^31 distinct ids of 2^31 or more would take far more memory than the process has.
        let next = u32::try_from(next).expect("fewer than 2^31 distinct wide correlation ids");
        *self.wide.entry(corr).or_insert(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;

    #[test]
    fn distinct_ids_stay_distinct() {
        let mut rng = XorShift(0xc0ff_ee00_1234_5678);
        let mut ids = CorrIds::default();
        let mut seen: FastMap<u64, u32> = FastMap::default();
        let mut back: FastMap<u32, u64> = FastMap::default();
        for _ in 0..20_000 {
            let corr = match rng.below(4) {
                0 => rng.below(1000),
                1 => WIDE - 1 - rng.below(10),
                2 => WIDE + rng.below(1000),
                _ => rng.next_u64(),
            };
            let c = ids.compact(corr);
            assert_eq!(*seen.entry(corr).or_insert(c), c, "{corr} compacts the same each time");
            assert_eq!(*back.entry(c).or_insert(corr), corr, "{corr} and another share {c}");
            assert_eq!(corr == 0, c == 0);
            assert_eq!(ids.get(corr), Some(c));
        }
    }
}
