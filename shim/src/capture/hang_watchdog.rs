//! The hang watchdog: when a synchronizing CUDA call or an NCCL call has been pending longer than
//! `TPROF_HANG_TIMEOUT` (default 300 s), write a `HangSuspected` marker naming the pending call and
//! the last collective issued, make sure CUPTI and the ring are flushed and committed, and print one
//! line — so a job killed afterwards (by the scheduler's timeout) still leaves the evidence.
//!
//! Threads publish their blocking call in their recorder buffer ([`crate::record::recorder::set_pending`]);
//! the writer thread polls [`poll`] on every iteration. Nothing here runs on the hot path.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use tprof_format::{CollOp, MarkerKind, Record};

use crate::base::{messages, process, ticks};
use crate::record::{interning, recorder};

static LAST_OP: AtomicU8 = AtomicU8::new(0);
static LAST_COMM: AtomicU64 = AtomicU64::new(0);
static LAST_SEQ: AtomicU64 = AtomicU64::new(0);
/// `since` ticks of the pending call already reported (one report per stuck call).
static REPORTED_SINCE: AtomicU64 = AtomicU64::new(0);
static TICKS_PER_SEC: AtomicU64 = AtomicU64::new(0);

/// Records the last data-moving collective this process issued (called by the NCCL interposers).
#[inline]
pub fn note_collective(op: CollOp, comm: u64, seq: u64) {
    LAST_OP.store(op as u8, Ordering::Relaxed);
    LAST_COMM.store(comm, Ordering::Relaxed);
    LAST_SEQ.store(seq, Ordering::Relaxed);
}

/// Tells the watchdog how fast ticks run (set at init).
pub fn set_ticks_per_sec(hz: f64) {
    TICKS_PER_SEC.store(hz.max(1.0) as u64, Ordering::Relaxed);
}

/// A description of the last collective, e.g. `AllReduce seq 41 on communicator 0x1a2b...`.
pub fn last_collective() -> Option<String> {
    let op = CollOp::from_u8(LAST_OP.load(Ordering::Relaxed));
    if op == CollOp::Unknown {
        return None;
    }
    Some(format!(
        "{} seq {} on communicator {:#018x}",
        op.name(),
        LAST_SEQ.load(Ordering::Relaxed),
        LAST_COMM.load(Ordering::Relaxed)
    ))
}

/// Checks the pending calls; returns true when it reported a hang now (the caller then commits).
pub fn poll() -> bool {
    let timeout = crate::base::config::config().hang_timeout;
    let hz = TICKS_PER_SEC.load(Ordering::Relaxed);
    if hz == 0 {
        return false;
    }
    let Some((tid, name, since)) = recorder::oldest_pending() else { return false };
    let now = ticks::now();
    let pending_ticks = now.saturating_sub(since);
    let pending_ns = (pending_ticks as f64 * 1e9 / hz as f64) as u64;
    if pending_ns < timeout.as_nanos() as u64 || REPORTED_SINCE.load(Ordering::Relaxed) == since {
        return false;
    }
    REPORTED_SINCE.store(since, Ordering::Relaxed);
    let call = interning::lookup(name)
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .unwrap_or_else(|| "a CUDA call".into());
    let last = last_collective().map(|c| format!("; last collective issued: {c}")).unwrap_or_default();
    let what = format!("{call} pending for {:.0} s on thread {tid}{last}", pending_ns as f64 / 1e9);
    recorder::emit(Record::Marker {
        kind: MarkerKind::HangSuspected,
        ts: now,
        value: pending_ns,
        name: interning::intern(&what),
    });
    let ring = process::ring_path().map(|p| p.display().to_string()).unwrap_or_default();
    messages::stderr_line(&format!("tprof: hang suspected: {what}; evidence flushed to {ring}"));
    true
}
