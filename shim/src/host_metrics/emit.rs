//! Where host samples go, and how they are kept compact: a value unchanged since the previous
//! sample is held back; when it changes, the held value is written first with the previous
//! sample's time, so a reader interpolating between written samples gets the same curve. Every
//! `full_every` rounds everything is written (a wrapped ring still holds every gauge).

use std::collections::HashMap;

use tprof_format::{HostMetric, HostScope};

/// The sink of host samples: the ring in the library ([`RecorderOut`]), a counter in tests and
/// the benchmark.
pub trait HostOut {
    fn sample(&mut self, scope: HostScope, id: u32, metric: HostMetric, ts: u64, value: u64);
    fn entity(&mut self, scope: HostScope, id: u32, parent: u32, ts: u64, name: &[u8]);
}

/// Writes into the recording pipeline (the sampler thread's own buffer).
pub struct RecorderOut;

impl HostOut for RecorderOut {
    fn sample(&mut self, scope: HostScope, id: u32, metric: HostMetric, ts: u64, value: u64) {
        crate::record::recorder::emit(tprof_format::Record::HostSample { scope, id, metric, ts, value });
    }
    fn entity(&mut self, scope: HostScope, id: u32, parent: u32, ts: u64, name: &[u8]) {
        let name = crate::record::interning::intern_bytes(name);
        crate::record::recorder::emit(tprof_format::Record::HostEntity { scope, id, parent, ts, name });
    }
}

#[derive(Debug, Clone, Copy)]
struct Held {
    value: u64,
    /// The previous round had this value and did not write it.
    held: bool,
    /// Round of the last sight (entries not seen for a while are forgotten).
    seen: u64,
}

/// One sampling round after another: the hold compression and entity names.
pub struct Emitter<O: HostOut> {
    pub out: O,
    values: HashMap<(HostScope, u32, HostMetric), Held>,
    names: HashMap<(HostScope, u32), (u64, u32)>,
    round: u64,
    ts: u64,
    prev_ts: u64,
    full: bool,
    full_every: u64,
    /// Samples and entities written (for the benchmark and tests).
    pub written: u64,
}

impl<O: HostOut> Emitter<O> {
    pub fn new(out: O, full_every: u64) -> Emitter<O> {
        Emitter {
            out,
            values: HashMap::new(),
            names: HashMap::new(),
            round: 0,
            ts: 0,
            prev_ts: 0,
            full: true,
            full_every: full_every.max(1),
            written: 0,
        }
    }

    /// Starts a round at `ts` (ticks).
    pub fn begin(&mut self, ts: u64) {
        self.prev_ts = self.ts;
        self.ts = ts;
        self.round += 1;
        self.full = self.round % self.full_every == 1 || self.full_every == 1;
    }

    /// Ends a round: forgets what was not seen for two full intervals (exited threads, processes).
    pub fn end(&mut self) {
        if self.round.is_multiple_of(self.full_every) {
            let horizon = self.round.saturating_sub(2 * self.full_every);
            self.values.retain(|_, h| h.seen > horizon);
            self.names.retain(|_, n| n.1 as u64 > horizon);
        }
    }

    pub fn sample(&mut self, scope: HostScope, id: u32, metric: HostMetric, value: u64) {
        let (ts, prev_ts, round, full) = (self.ts, self.prev_ts, self.round, self.full);
        match self.values.get_mut(&(scope, id, metric)) {
            Some(h) if h.value == value && !full => {
                h.held = true;
                h.seen = round;
            }
            Some(h) => {
                if h.held && h.value != value {
                    self.out.sample(scope, id, metric, prev_ts, h.value);
                    self.written += 1;
                }
                *h = Held { value, held: false, seen: round };
                self.out.sample(scope, id, metric, ts, value);
                self.written += 1;
            }
            None => {
                self.values.insert((scope, id, metric), Held { value, held: false, seen: round });
                self.out.sample(scope, id, metric, ts, value);
                self.written += 1;
            }
        }
    }

    /// Names an entity when it is new or its name changed.
    pub fn entity(&mut self, scope: HostScope, id: u32, parent: u32, name: &[u8]) {
        let hash = name_hash(name, parent);
        let round = self.round as u32;
        match self.names.get_mut(&(scope, id)) {
            Some(n) if n.0 == hash => n.1 = round,
            _ => {
                self.names.insert((scope, id), (hash, round));
                self.out.entity(scope, id, parent, self.ts, name);
                self.written += 1;
            }
        }
    }
}

fn name_hash(name: &[u8], parent: u32) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ parent as u64;
    for &b in name {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Rows(Vec<(u64, u64)>, usize);
    impl HostOut for Rows {
        fn sample(&mut self, _: HostScope, _: u32, _: HostMetric, ts: u64, value: u64) {
            self.0.push((ts, value));
        }
        fn entity(&mut self, _: HostScope, _: u32, _: u32, _: u64, _: &[u8]) {
            self.1 += 1;
        }
    }

    #[test]
    fn unchanged_values_are_held_and_written_before_the_change() {
        let mut e = Emitter::new(Rows::default(), 100);
        for (t, v) in [(10, 5), (20, 5), (30, 5), (40, 9), (50, 9)] {
            e.begin(t);
            e.sample(HostScope::Process, 1, HostMetric::CpuUserNs, v);
            e.entity(HostScope::Process, 1, 0, b"python");
            e.end();
        }
        // 10:5 first, 30:5 (held until the change), 40:9; 50:9 is held.
        assert_eq!(e.out.0, vec![(10, 5), (30, 5), (40, 9)]);
        assert_eq!(e.out.1, 1, "the name is written once");
        e.begin(60);
        e.entity(HostScope::Process, 1, 0, b"renamed");
        assert_eq!(e.out.1, 2);
    }

    #[test]
    fn a_full_round_writes_everything() {
        let mut e = Emitter::new(Rows::default(), 3);
        for t in 1..=7 {
            e.begin(t);
            e.sample(HostScope::Machine, 0, HostMetric::MemAvailableBytes, 42);
            e.end();
        }
        // Rounds 1, 4, 7 are full.
        assert_eq!(e.out.0, vec![(1, 42), (4, 42), (7, 42)]);
    }
}
