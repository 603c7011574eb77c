//! Per-call counters, on whether or not the capture window is open (production modes): every
//! interposed CUDA call bumps its own thread's counter block ([`count_call`]), a cache line the
//! thread alone writes (relaxed load + store, no `lock` prefix, no shared cache line, no allocation
//! after the thread's first call). Readers sum the blocks ([`calls`]).

use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, Ordering};

use crate::base::panic_fence::ffi_guard;

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
        let ctx = crate::record::thread::ctx();
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
    count_call_in(crate::record::thread::ctx(), recording);
}

/// [`count_call`] with the calling thread's context: one relaxed load and store of a counter only this
/// thread writes (no `lock` prefix, no shared cache line).
#[inline(always)]
pub fn count_call_in(ctx: &crate::record::thread::ThreadCtx, recording: bool) {
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

/// Counts a closed-window call when the thread has its block already (true), else does nothing
/// (false): no call, for the wrappers' shortest path.
#[inline(always)]
pub fn try_count_closed(ctx: &crate::record::thread::ThreadCtx) -> bool {
    let p = ctx.counters.get();
    if p.is_null() || p == RETIRED_BLOCK {
        return false;
    }
    // SAFETY: blocks are never freed, and only this thread writes its block.
    let c = unsafe { &*p };
    c.closed.store(c.closed.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
    true
}

#[cold]
#[inline(never)]
fn count_slow(ctx: &crate::record::thread::ThreadCtx, recording: bool) {
    // The first call of a thread registers its block (allocates): behind the panic fence.
    let p = if ctx.counters.get().is_null() { ffi_guard(std::ptr::null(), || register(ctx)) } else { std::ptr::null() };
    if p.is_null() {
        RETIRED_CALLS.fetch_add(1, Ordering::Relaxed);
        if !recording {
            RETIRED_CLOSED.fetch_add(1, Ordering::Relaxed);
        }
        return;
    }
    count_call_in(ctx, recording);
}

fn register(ctx: &crate::record::thread::ThreadCtx) -> *const CallCounters {
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

/// In a fork child (at its re-initialisation): the parent's counts are not the child's. Blocks of
/// the parent's other threads (which do not exist here) become free; the forking thread keeps its own.
pub fn reset_after_fork() {
    let mine = crate::record::thread::ctx().counters.get();
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
