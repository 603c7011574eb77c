//! Counters that stay on when the capture window is closed (production modes).
//!
//! - Per-call counters ([`count_call`]): every interposed CUDA call bumps its own thread's counter
//!   block, a cache line the thread alone writes (relaxed load + store, no `lock` prefix, no shared
//!   cache line, no allocation after the thread's first call). Readers sum the blocks.
//! - Tallies of GPU work and steps ([`observe_written`], [`observe_unrecorded`], [`note_step`],
//!   [`collective_unrecorded`]): updated off the application's per-call path (the writer thread, the
//!   CUPTI buffer callback, NCCL calls, step ends) with relaxed atomic adds.
//!
//! A record is tallied exactly once: by the writer thread when it goes into the ring, or where it is
//! left out (the CUPTI parser outside a window, NCCL calls outside a window). So in full mode the
//! tallies equal what `tprof summary` finds in the ring.

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use tprof_format::bus_bandwidth::bus_factor;
use tprof_format::{CollOp, Record, StrId};

/// One thread's call counters, alone on its cache line.
#[repr(align(64))]
pub struct CallCounters {
    /// Interposed calls seen by this thread while the window was open.
    open: AtomicU64,
    /// Interposed calls seen by this thread while the window was closed.
    closed: AtomicU64,
    /// 0 = free, 1 = owned by a live thread.
    owned: AtomicU32,
    next: AtomicPtr<CallCounters>,
}

static HEAD: AtomicPtr<CallCounters> = AtomicPtr::new(std::ptr::null_mut());
/// Counts of threads that exited (and of calls made without a block, during thread teardown).
static RETIRED_CALLS: AtomicU64 = AtomicU64::new(0);
static RETIRED_CLOSED: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Retires the block when the thread exits.
    static RETIRE: Retire = const { Retire };
}

struct Retire;

impl Drop for Retire {
    fn drop(&mut self) {
        let ctx = crate::thread::ctx();
        let p = ctx.counters.replace(std::ptr::null());
        if !p.is_null() {
            // SAFETY: blocks are never freed.
            let c = unsafe { &*p };
            let open = c.open.swap(0, Ordering::Relaxed);
            let closed = c.closed.swap(0, Ordering::Relaxed);
            RETIRED_CALLS.fetch_add(open + closed, Ordering::Relaxed);
            RETIRED_CLOSED.fetch_add(closed, Ordering::Relaxed);
            c.owned.store(0, Ordering::Release);
        }
        // Calls made by later destructors of this thread are counted globally.
        ctx.counters.set(RETIRED_BLOCK);
    }
}

/// Marks a thread whose block was retired: its calls go to the global counters.
const RETIRED_BLOCK: *const CallCounters = std::ptr::dangling();

/// Counts one interposed call on this thread. `recording`: whether the window was open for it.
#[inline]
pub fn count_call(recording: bool) {
    count_call_in(crate::thread::ctx(), recording);
}

/// [`count_call`] with the calling thread's context: one relaxed load and store of a counter only this
/// thread writes (no `lock` prefix, no shared cache line).
#[inline(always)]
pub fn count_call_in(ctx: &crate::thread::ThreadCtx, recording: bool) {
    let p = ctx.counters.get();
    if p.is_null() || p == RETIRED_BLOCK {
        count_slow(ctx, recording);
        return;
    }
    // SAFETY: blocks are never freed, and only this thread writes its block.
    let c = unsafe { &*p };
    let a = if recording { &c.open } else { &c.closed };
    a.store(a.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
}

#[cold]
#[inline(never)]
fn count_slow(ctx: &crate::thread::ThreadCtx, recording: bool) {
    let p = if ctx.counters.get().is_null() { register(ctx) } else { std::ptr::null() };
    if p.is_null() {
        RETIRED_CALLS.fetch_add(1, Ordering::Relaxed);
        if !recording {
            RETIRED_CLOSED.fetch_add(1, Ordering::Relaxed);
        }
        return;
    }
    count_call_in(ctx, recording);
}

fn register(ctx: &crate::thread::ThreadCtx) -> *const CallCounters {
    // Arm the retire token first; during thread teardown this fails and the call is counted globally.
    if RETIRE.try_with(|_| ()).is_err() {
        ctx.counters.set(RETIRED_BLOCK);
        return std::ptr::null();
    }
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: blocks are never freed.
        let c = unsafe { &*p };
        if c.owned.compare_exchange(0, 1, Ordering::AcqRel, Ordering::Relaxed).is_ok() {
            ctx.counters.set(p);
            return p;
        }
        p = c.next.load(Ordering::Acquire);
    }
    let node = Box::into_raw(Box::new(CallCounters {
        open: AtomicU64::new(0),
        closed: AtomicU64::new(0),
        owned: AtomicU32::new(1),
        next: AtomicPtr::new(std::ptr::null_mut()),
    }));
    let mut head = HEAD.load(Ordering::Acquire);
    loop {
        // SAFETY: `node` is ours until the CAS publishes it.
        unsafe { &*node }.next.store(head, Ordering::Relaxed);
        match HEAD.compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(h) => head = h,
        }
    }
    ctx.counters.set(node);
    node
}

/// (interposed calls, of which while the window was closed), over the process's threads.
pub fn calls() -> (u64, u64) {
    let mut calls = RETIRED_CALLS.load(Ordering::Relaxed);
    let mut closed = RETIRED_CLOSED.load(Ordering::Relaxed);
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: blocks are never freed.
        let c = unsafe { &*p };
        let z = c.closed.load(Ordering::Relaxed);
        calls += c.open.load(Ordering::Relaxed).wrapping_add(z);
        closed += z;
        p = c.next.load(Ordering::Acquire);
    }
    (calls, closed)
}

// ------------------------------------------------------------------ tallies

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
    crate::strings::lookup(name).is_some_and(|t| t.starts_with(b"nccl"))
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

/// A step ended after `ticks`.
pub fn note_step(ticks: u64) {
    add(&TALLY.steps, 1);
    add(&TALLY.step_ticks, ticks);
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

/// In a fork child (at its re-initialisation): the parent's counts are not the child's. Blocks of
/// the parent's other threads (which do not exist here) become free; the forking thread keeps its own.
pub fn reset_after_fork() {
    let mine = crate::thread::ctx().counters.get();
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: blocks are never freed.
        let c = unsafe { &*p };
        c.open.store(0, Ordering::Relaxed);
        c.closed.store(0, Ordering::Relaxed);
        if !std::ptr::eq(p, mine) {
            c.owned.store(0, Ordering::Release);
        }
        p = c.next.load(Ordering::Acquire);
    }
    RETIRED_CALLS.store(0, Ordering::Relaxed);
    RETIRED_CLOSED.store(0, Ordering::Relaxed);
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

    #[test]
    fn per_thread_counts_add_up_and_survive_thread_exit() {
        let (c0, z0) = calls();
        let handles: Vec<_> = (0..4)
            .map(|i| {
                std::thread::spawn(move || {
                    for k in 0..1000 {
                        count_call(k % 4 != i);
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        count_call(true);
        let (c1, z1) = calls();
        assert_eq!(c1 - c0, 4001);
        assert_eq!(z1 - z0, 1000);
    }
}
