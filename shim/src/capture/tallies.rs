//! Tallies of GPU work, collectives and steps, for the metrics file ([`observe_written`],
//! [`observe_unrecorded`], [`note_step`], [`collective_unrecorded`]): updated off the application's
//! per-call path (the writer thread, the CUPTI buffer callback, NCCL calls, step ends) with relaxed
//! atomic adds.
//!
//! A record is tallied exactly once: by the writer thread when it goes into the ring, or where it is
//! left out (the CUPTI parser outside a window, NCCL calls outside a window). So in full mode the
//! tallies equal what `tprof summary` finds in the ring.

use std::sync::atomic::{AtomicU64, Ordering};

use tprof_format::bus_bandwidth::bus_factor;
use tprof_format::{CollOp, Record, StrId};

/// Totals since start (ticks are the shim clock's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    pub kernels: u64,
    pub kernel_ticks: u64,
    /// Kernel time of NCCL kernels (name starts with `nccl`): the collectives' GPU time.
    pub nccl_kernel_ticks: u64,
    /// Data-moving NCCL calls.
    pub collectives: u64,
    pub collective_bytes: u64,
    /// Bytes times the nccl-tests bus factor (for bus bandwidth).
    pub collective_bus_bytes: u64,
    pub steps: u64,
    pub step_ticks: u64,
}

struct AtomicTally {
    kernels: AtomicU64,
    kernel_ticks: AtomicU64,
    nccl_kernel_ticks: AtomicU64,
    collectives: AtomicU64,
    collective_bytes: AtomicU64,
    collective_bus_bytes: AtomicU64,
    steps: AtomicU64,
    step_ticks: AtomicU64,
}

static TALLY: AtomicTally = AtomicTally {
    kernels: AtomicU64::new(0),
    kernel_ticks: AtomicU64::new(0),
    nccl_kernel_ticks: AtomicU64::new(0),
    collectives: AtomicU64::new(0),
    collective_bytes: AtomicU64::new(0),
    collective_bus_bytes: AtomicU64::new(0),
    steps: AtomicU64::new(0),
    step_ticks: AtomicU64::new(0),
};

fn is_nccl_kernel(name: StrId) -> bool {
    crate::record::interning::lookup(name).is_some_and(|t| t.starts_with(b"nccl"))
}

fn add(a: &AtomicU64, v: u64) {
    a.fetch_add(v, Ordering::Relaxed);
}

fn tally(rec: &Record) {
    match *rec {
        Record::Kernel { start, end, name, .. } if start != 0 && end >= start => {
            add(&TALLY.kernels, 1);
            add(&TALLY.kernel_ticks, end - start);
            if is_nccl_kernel(name) {
                add(&TALLY.nccl_kernel_ticks, end - start);
            }
        }
        Record::Collective { op, bytes, nranks, .. } if op.moves_data() => {
            collective_unrecorded(op, bytes, nranks);
        }
        _ => {}
    }
}

/// Writer thread: a record that went into the ring.
#[inline]
pub fn observe_written(rec: &Record) {
    tally(rec);
}

/// A record that was produced but left out of the ring (window closed, metrics mode).
pub fn observe_unrecorded(rec: &Record) {
    tally(rec);
}

/// A data-moving NCCL call that was not recorded (or was: called by [`observe_written`]).
pub fn collective_unrecorded(op: CollOp, bytes: u64, nranks: u32) {
    add(&TALLY.collectives, 1);
    add(&TALLY.collective_bytes, bytes);
    add(&TALLY.collective_bus_bytes, (bytes as f64 * bus_factor(op, nranks)) as u64);
}

/// The last step durations (ticks): step `n` (from 0) in slot `n % RECENT_STEPS`, so the metrics
/// file's fail-slow watch can take the median of an interval's steps (one relaxed store per step).
pub const RECENT_STEPS: usize = 64;
static RECENT: [AtomicU64; RECENT_STEPS] = [const { AtomicU64::new(0) }; RECENT_STEPS];

/// A step ended after `ticks`.
pub fn note_step(ticks: u64) {
    let n = TALLY.steps.fetch_add(1, Ordering::Relaxed);
    RECENT[n as usize % RECENT_STEPS].store(ticks, Ordering::Relaxed);
    add(&TALLY.step_ticks, ticks);
}

/// Durations (ticks) of steps `from..to` still held (the newest [`RECENT_STEPS`]); a step that is
/// being noted meanwhile may read as its predecessor in that slot (good enough for a median).
pub fn recent_steps(from: u64, to: u64) -> Vec<u64> {
    let from = from.max(to.saturating_sub(RECENT_STEPS as u64));
    (from..to).map(|n| RECENT[n as usize % RECENT_STEPS].load(Ordering::Relaxed)).collect()
}

/// The tallies now.
pub fn tally_snapshot() -> Tally {
    let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
    Tally {
        kernels: l(&TALLY.kernels),
        kernel_ticks: l(&TALLY.kernel_ticks),
        nccl_kernel_ticks: l(&TALLY.nccl_kernel_ticks),
        collectives: l(&TALLY.collectives),
        collective_bytes: l(&TALLY.collective_bytes),
        collective_bus_bytes: l(&TALLY.collective_bus_bytes),
        steps: l(&TALLY.steps),
        step_ticks: l(&TALLY.step_ticks),
    }
}

/// In a fork child (at its re-initialisation): the parent's tallies are not the child's.
pub fn reset_after_fork() {
    for a in [
        &TALLY.kernels,
        &TALLY.kernel_ticks,
        &TALLY.nccl_kernel_ticks,
        &TALLY.collectives,
        &TALLY.collective_bytes,
        &TALLY.collective_bus_bytes,
        &TALLY.steps,
        &TALLY.step_ticks,
    ] {
        a.store(0, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::launch::LaunchFacts;

    /// The writer skips the tallies for a launch's records (`write_batch`): they must tally nothing.
    /// A launch with GPU time (a CUPTI record) counts, so the test would see a change.
    #[test]
    fn a_launchs_records_tally_nothing() {
        let facts = LaunchFacts {
            start: 10,
            end: 20,
            stream: 7,
            grid: [2, 1, 1],
            block: [64, 1, 1],
            api: StrId(1),
            kernel: crate::record::interning::intern("nccl_like_kernel_for_tally_test"),
            correlation: 0x8000_0001,
            device: 0,
            result: 0,
            smem: 0,
            domain: tprof_format::ApiDomain::Runtime,
        };
        let (api, kernel) = facts.records(1);
        let kernel = kernel.expect("a launched kernel");
        let before = tally_snapshot();
        observe_written(&api);
        observe_written(&kernel);
        assert_eq!(tally_snapshot().kernels, before.kernels);
        assert_eq!(tally_snapshot().nccl_kernel_ticks, before.nccl_kernel_ticks);
        let Record::Kernel { device, context, stream, grid, block, correlation, name, .. } = kernel else {
            unreachable!()
        };
        let timed = Record::Kernel {
            device,
            context,
            stream,
            start: 100,
            end: 150,
            grid,
            block,
            registers: 0,
            shared_mem: 0,
            correlation,
            name,
            graph_id: 0,
        };
        observe_written(&timed);
        let after = tally_snapshot();
        assert_eq!(after.kernels - before.kernels, 1);
        assert_eq!(after.nccl_kernel_ticks - before.nccl_kernel_ticks, 50);
    }
}
