//! Correlation ids in 32 bits, for the compact records the fact collector keeps. Ids below
//! `0xF000_0000` stand for themselves: CUPTI's (counted from 1 per process, below 2^31) and the
//! shim's own (`0x8000_0000 | n`, see the shim's `record/correlation.rs`) both do. The rest, ids
//! that do not fit in 32 bits and the top of the 32-bit range, are numbered from `0xF000_0000` up in
//! order of first sight. Distinct ids stay distinct, 0 stays 0 (no correlation), so any lookup by the
//! compact id finds what a lookup by the full id would (past 2^28 numbered ids, only
//! possible in an import, a new wide id compacts to 0).

use crate::intervals::FastMap;

/// The first compact id of the ids that are numbered (a shim id reaches it only after 1.8 G launches).
const WIDE: u64 = 0xF000_0000;

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

    /// A ring's ids are 32 bits, so its numbered ids always fit; an imported trace with more than
    /// 2^28 distinct wide ids gets 0 (no correlation) for the ones past that, instead of a number
    /// another id has.
    #[inline(never)]
    fn compact_wide(&mut self, corr: u64) -> u32 {
        if let Some(&c) = self.wide.get(&corr) {
            return c;
        }
        let Ok(next) = u32::try_from(WIDE + self.wide.len() as u64) else { return 0 };
        self.wide.insert(corr, next);
        next
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

    #[test]
    fn cupti_and_shim_ids_stand_for_themselves_without_a_map_entry() {
        let mut ids = CorrIds::default();
        for corr in [1u64, 77, (1 << 31) - 1, 0x8000_0000, 0x8000_0000 | 123_456, 0xEFFF_FFFF] {
            assert_eq!(ids.compact(corr), corr as u32);
        }
        assert!(ids.wide.is_empty(), "no id below 0xF000_0000 takes room in the map");
        assert_eq!(ids.compact(1 << 40), WIDE as u32);
        assert_eq!(ids.compact(0xF000_0000), WIDE as u32 + 1, "the top of the 32-bit range is numbered too");
    }
}
