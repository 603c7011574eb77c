//! The hot path: [`emit`] stores a record (a kernel launch: its raw facts, [`push_launch_in`]) into
//! the calling thread's own single-producer / single-consumer buffer. No lock, no allocation, no
//! syscall: a TLS read, two atomic loads, a copy, one release store. The writer thread is the only
//! consumer. A full buffer drops the record and counts it (the application is never blocked).
//!
//! Buffers are allocated once per thread (on its first event), linked into a global lock-free list and
//! never freed: a thread that exits marks its buffer for reuse once the writer has drained it.
//!
//! Completion polls (`cudaStreamQuery` until the stream is idle) come by the million per second and
//! would fill the buffer and push out the GPU records behind them: [`emit_repeatable_in`] writes a
//! poll's `Api` record only when it differs from the thread's previous record (another call, handle
//! or result); the identical calls after it are counted in the thread's [`RepeatRun`] and written as
//! one `ApiRepeat` record (count, first start, last end, time inside the calls) before the thread's
//! next record, at thread exit, or when the exiting thread flushes ([`flush_repeats`]).

use std::cell::{Cell, UnsafeCell};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use tprof_format::{ApiDomain, Record, StrId};

use crate::record::launch::LaunchFacts;

/// What a buffer slot holds: a record, or a kernel launch's raw facts that the writer thread turns
/// into the launch's records ([`LaunchFacts::records`]): the launching thread stores one slot of
/// plain fields instead of building two records.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Entry {
    Record(Record),
    Launch(LaunchFacts),
}

// A launch's slot costs no more room than a record's (the facts fit beside the record's tag).
const _: () = assert!(std::mem::size_of::<Entry>() == std::mem::size_of::<Record>());

/// One thread's buffer. The producer's and the consumer's cursors live on separate cache lines, and the
/// producer keeps its own copy of the consumer's cursor: recording an event touches no line the writer
/// thread writes, except the slot itself.
pub struct ThreadBuffer {
    slots: Box<[UnsafeCell<MaybeUninit<Entry>>]>,
    mask: usize,
    /// 0 = free, 1 = owned by a live thread, 2 = owner exited (drain, then free).
    owner_state: AtomicU32,
    /// Fork generation the buffer belongs to.
    generation: AtomicU64,
    tid: AtomicU32,
    next: AtomicPtr<ThreadBuffer>,
    producer: ProducerSide,
    consumer: ConsumerSide,
}

/// Written by the owning thread only.
#[repr(align(64))]
struct ProducerSide {
    /// Next slot the producer writes.
    head: AtomicUsize,
    /// The consumer's `tail` as last read by the producer (never ahead of it): reread only when the
    /// buffer looks full.
    tail_seen: AtomicUsize,
    /// Records dropped because the buffer was full.
    dropped: AtomicU64,
    /// A blocking call in progress on this thread (ticks at its start; 0 = none), for the hang watchdog.
    pending_since: AtomicU64,
    pending_name: AtomicU32,
}

/// Written by the writer thread only.
#[repr(align(64))]
struct ConsumerSide {
    /// Next slot the consumer reads.
    tail: AtomicUsize,
}

// SAFETY: the slots are shared between exactly one producer (the owning thread) and one consumer (the
// writer thread); `head`/`tail` with acquire/release order their accesses so no slot is read while written.
unsafe impl Sync for ThreadBuffer {}
// SAFETY: as above; the buffer holds only `Copy` entries.
unsafe impl Send for ThreadBuffer {}

const FREE: u32 = 0;
const OWNED: u32 = 1;
const EXITED: u32 = 2;

static HEAD: AtomicPtr<ThreadBuffer> = AtomicPtr::new(std::ptr::null_mut());
static GENERATION: AtomicU64 = AtomicU64::new(1);
/// Records dropped without a buffer (thread teardown, registration impossible).
static ORPHAN_DROPS: AtomicU64 = AtomicU64::new(0);
static CAPACITY: AtomicUsize = AtomicUsize::new(16384);

thread_local! {
    /// Marks the buffer exited when the thread ends.
    static OWNER: OwnerToken = const { OwnerToken };
}

struct OwnerToken;

impl Drop for OwnerToken {
    fn drop(&mut self) {
        crate::record::thread::with_ctx(|c| {
            flush_repeats_in(c);
            let buf = c.buffer.get();
            if !buf.is_null() {
                // SAFETY: buffers are never freed; the pointer came from `register`.
                unsafe { &*buf }.owner_state.store(EXITED, Ordering::Release);
            }
            // Events from later destructors of this thread are dropped and counted, never written into a
            // buffer that another thread may reuse.
            c.buffer.set(std::ptr::null());
            c.buffer_generation.set(u64::MAX);
        });
    }
}

/// Sets the per-thread buffer capacity for buffers created from now on (rounded to a power of two).
pub fn set_capacity(events: usize) {
    CAPACITY.store(events.max(64).next_power_of_two(), Ordering::Relaxed);
}

/// Records one event from the calling thread. Never blocks, never allocates after the thread's first
/// event, never fails: when the buffer is full the event is dropped and counted.
#[inline]
pub fn emit(rec: Record) {
    emit_in(crate::record::thread::ctx(), rec);
}

/// The poll a thread may be repeating: the key of its last record when that was a repeatable call
/// ([`emit_repeatable_in`]), and the identical calls made since, not yet written.
pub struct RepeatRun {
    /// The last record was a repeatable call with this key (cleared by every other record).
    armed: Cell<bool>,
    name: Cell<u32>,
    domain: Cell<ApiDomain>,
    handle: Cell<u64>,
    stream: Cell<u64>,
    result: Cell<i32>,
    /// Repeats counted, not yet written (0 = none).
    calls: Cell<u64>,
    start: Cell<u64>,
    end: Cell<u64>,
    busy: Cell<u64>,
}

impl RepeatRun {
    pub const fn new() -> RepeatRun {
        RepeatRun {
            armed: Cell::new(false),
            name: Cell::new(0),
            domain: Cell::new(ApiDomain::Runtime),
            handle: Cell::new(0),
            stream: Cell::new(0),
            result: Cell::new(0),
            calls: Cell::new(0),
            start: Cell::new(0),
            end: Cell::new(0),
            busy: Cell::new(0),
        }
    }
}

impl Default for RepeatRun {
    fn default() -> Self {
        RepeatRun::new()
    }
}

/// Records a call that programs repeat until its answer changes (a completion poll): `rec` is its
/// `Api` record, `handle` what it polls (the stream or the event). A call identical to the thread's
/// previous record (same name, domain, handle and result) is counted, not written; the count goes out
/// as one `ApiRepeat` record before the thread's next other record.
#[inline]
pub fn emit_repeatable_in(ctx: &crate::record::thread::ThreadCtx, rec: Record, handle: u64) {
    let Record::Api { domain, name, start, end, result, stream, .. } = rec else {
        return emit_in(ctx, rec);
    };
    let run = &ctx.repeat;
    if run.armed.get()
        && run.name.get() == name.0
        && run.domain.get() == domain
        && run.handle.get() == handle
        && run.result.get() == result
    {
        let calls = run.calls.get();
        if calls == 0 {
            run.start.set(start);
            run.busy.set(0);
        }
        run.calls.set(calls + 1);
        run.end.set(end);
        run.busy.set(run.busy.get().wrapping_add(end.wrapping_sub(start)));
        return;
    }
    emit_in(ctx, rec);
    run.name.set(name.0);
    run.domain.set(domain);
    run.handle.set(handle);
    run.stream.set(stream);
    run.result.set(result);
    run.armed.set(true);
}

/// Writes the calling thread's counted repeats now (the exiting thread, before the final drain).
pub fn flush_repeats() {
    flush_repeats_in(crate::record::thread::ctx());
}

/// Writes `ctx`'s counted repeats, if any, and disarms its run: the next record is not a repeat.
#[cold]
#[inline(never)]
fn flush_repeats_in(ctx: &crate::record::thread::ThreadCtx) {
    let run = &ctx.repeat;
    run.armed.set(false);
    let calls = run.calls.replace(0);
    if calls == 0 {
        return;
    }
    let domain = run.domain.get();
    push(
        ctx,
        Record::ApiRepeat {
            tid: ctx.tid(),
            domain,
            name: StrId(run.name.get()),
            start: run.start.get(),
            end: run.end.get(),
            result: run.result.get(),
            stream: run.stream.get(),
            calls,
            busy: run.busy.get(),
        },
    );
}

/// [`emit`] with the calling thread's context (from [`crate::record::thread::ctx`]), for callers that already
/// hold it: no TLS lookup.
#[inline(always)]
pub fn emit_in(ctx: &crate::record::thread::ThreadCtx, rec: Record) {
    if ctx.repeat.armed.get() {
        flush_repeats_in(ctx);
    }
    push(ctx, rec);
}

/// Two records of one call (a launch's `Api` and its estimated `Kernel`), stored together: one buffer
/// check and one publication. Either both are stored or both are dropped and counted.
#[inline(always)]
pub fn emit_pair_in(ctx: &crate::record::thread::ThreadCtx, first: Record, second: Record) {
    if ctx.repeat.armed.get() {
        flush_repeats_in(ctx);
    }
    let Some(b) = own_or_register(ctx, 2) else { return };
    let p = &b.producer;
    let head = p.head.load(Ordering::Relaxed);
    if head.wrapping_add(1).wrapping_sub(p.tail_seen.load(Ordering::Relaxed)) > b.mask
        && !refresh_tail(b, head.wrapping_add(1))
    {
        p.dropped.store(p.dropped.load(Ordering::Relaxed) + 2, Ordering::Relaxed);
        return;
    }
    let (Some(a), Some(c)) = (b.slots.get(head & b.mask), b.slots.get(head.wrapping_add(1) & b.mask)) else { return };
    // SAFETY: slots `head` and `head + 1` are not visible to the consumer until `head` is published
    // below, and the consumer has finished with them (tail passed them), so this thread has exclusive
    // access.
    unsafe {
        (*a.get()).write(Entry::Record(first));
        (*c.get()).write(Entry::Record(second));
    }
    p.head.store(head.wrapping_add(2), Ordering::Release);
}

/// The calling thread's buffer of this generation, registered on the thread's first record; None
/// (the `records` dropped and counted) when the thread can have none.
#[inline(always)]
fn own_or_register(ctx: &crate::record::thread::ThreadCtx, records: u64) -> Option<&'static ThreadBuffer> {
    let (buf, generation) = (ctx.buffer.get(), ctx.buffer_generation.get());
    let buf = if !buf.is_null() && generation == GENERATION.load(Ordering::Relaxed) {
        buf
    } else {
        match register(generation) {
            Some(b) => b,
            None => {
                ORPHAN_DROPS.fetch_add(records, Ordering::Relaxed);
                return None;
            }
        }
    };
    // SAFETY: `buf` points to a live buffer owned by this thread (registered in this generation);
    // buffers are never freed.
    Some(unsafe { &*buf })
}

/// Stores `rec` in the calling thread's buffer (or drops and counts it).
#[inline(always)]
fn push(ctx: &crate::record::thread::ThreadCtx, rec: Record) {
    let Some(b) = own_or_register(ctx, 1) else { return };
    let p = &b.producer;
    let head = p.head.load(Ordering::Relaxed);
    if head.wrapping_sub(p.tail_seen.load(Ordering::Relaxed)) > b.mask && !refresh_tail(b, head) {
        // Only the owning thread adds to `dropped` (the writer takes it over once the owner exited):
        // a plain load and store, no locked instruction.
        p.dropped.store(p.dropped.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        return;
    }
    let Some(slot) = b.slots.get(head & b.mask) else { return };
    // SAFETY: slot `head` is not visible to the consumer until `head` is published below, and the
    // consumer has finished with it (tail passed it), so this thread has exclusive access.
    unsafe { (*slot.get()).write(Entry::Record(rec)) };
    p.head.store(head.wrapping_add(1), Ordering::Release);
}

/// A recorded launch's facts into the calling thread's buffer, one slot (or dropped and counted as
/// the records they stand for). False, with nothing done, when the thread has no buffer of this
/// generation yet or its previous record was a repeatable call: then the caller stores the launch's
/// records the general way ([`emit_pair_in`], which registers the buffer and writes the repeats
/// first). Loads, plain stores and one release store: no call, nothing that can panic.
#[inline(always)]
pub fn push_launch_in(ctx: &crate::record::thread::ThreadCtx, facts: LaunchFacts) -> bool {
    if ctx.repeat.armed.get() {
        return false;
    }
    let Some(b) = own_buffer(ctx) else { return false };
    let p = &b.producer;
    let head = p.head.load(Ordering::Relaxed);
    if head.wrapping_sub(p.tail_seen.load(Ordering::Relaxed)) > b.mask && !refresh_tail(b, head) {
        p.dropped.store(p.dropped.load(Ordering::Relaxed) + facts.record_count(), Ordering::Relaxed);
        return true;
    }
    let Some(slot) = b.slots.get(head & b.mask) else { return true };
    // SAFETY: as in `push`: slot `head` is this thread's until `head` is published below.
    unsafe { (*slot.get()).write(Entry::Launch(facts)) };
    p.head.store(head.wrapping_add(1), Ordering::Release);
    true
}

/// The buffer looked full by the producer's copy of `tail`: rereads it (acquire: the consumer is done
/// with the slots before it). Returns true when there is room now.
#[inline(never)]
fn refresh_tail(b: &ThreadBuffer, head: usize) -> bool {
    let tail = b.consumer.tail.load(Ordering::Acquire);
    b.producer.tail_seen.store(tail, Ordering::Relaxed);
    head.wrapping_sub(tail) <= b.mask
}

#[cold]
#[inline(never)]
fn register(previous_generation: u64) -> Option<*const ThreadBuffer> {
    if previous_generation == u64::MAX {
        // This thread's teardown already ran.
        return None;
    }
    // Arm the exit token first: if TLS is being torn down this fails and we do not register.
    OWNER.try_with(|_| ()).ok()?;
    let generation = GENERATION.load(Ordering::Acquire);
    let tid = crate::record::thread::tid();
    let buf = reuse_free_buffer(generation, tid).unwrap_or_else(|| new_buffer(generation, tid));
    crate::record::thread::with_ctx(|c| {
        c.buffer.set(buf);
        c.buffer_generation.set(generation);
    });
    Some(buf)
}

fn reuse_free_buffer(generation: u64, tid: u32) -> Option<*const ThreadBuffer> {
    let cap = CAPACITY.load(Ordering::Relaxed);
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: list nodes are never freed.
        let b = unsafe { &*p };
        if b.slots.len() == cap
            && b.owner_state.compare_exchange(FREE, OWNED, Ordering::AcqRel, Ordering::Relaxed).is_ok()
        {
            b.generation.store(generation, Ordering::Release);
            b.tid.store(tid, Ordering::Release);
            return Some(p);
        }
        p = b.next.load(Ordering::Acquire);
    }
    None
}

fn new_buffer(generation: u64, tid: u32) -> *const ThreadBuffer {
    let cap = CAPACITY.load(Ordering::Relaxed);
    let slots: Box<[UnsafeCell<MaybeUninit<Entry>>]> =
        (0..cap).map(|_| UnsafeCell::new(MaybeUninit::uninit())).collect();
    let node = Box::into_raw(Box::new(ThreadBuffer {
        slots,
        mask: cap - 1,
        owner_state: AtomicU32::new(OWNED),
        generation: AtomicU64::new(generation),
        tid: AtomicU32::new(tid),
        next: AtomicPtr::new(std::ptr::null_mut()),
        producer: ProducerSide {
            head: AtomicUsize::new(0),
            tail_seen: AtomicUsize::new(0),
            dropped: AtomicU64::new(0),
            pending_since: AtomicU64::new(0),
            pending_name: AtomicU32::new(0),
        },
        consumer: ConsumerSide { tail: AtomicUsize::new(0) },
    }));
    let mut head = HEAD.load(Ordering::Acquire);
    loop {
        // SAFETY: `node` is ours until published by the CAS below.
        unsafe { &*node }.next.store(head, Ordering::Relaxed);
        match HEAD.compare_exchange_weak(head, node, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return node,
            Err(h) => head = h,
        }
    }
}

/// Most records handed over at once: the slots go back to the producer after each batch, so a long
/// drain does not keep a busy thread's whole buffer from it.
const DRAIN_BATCH: usize = 4096;

/// Consumer side (writer thread only): moves every pending entry of the current generation to `sink`
/// in batches, frees buffers of exited threads once empty. `sink` gets the thread id of the buffer's
/// owner and runs of consecutive entries (in order, per thread), each of at most [`DRAIN_BATCH`]
/// entries. Returns (entries drained, total records dropped so far).
pub fn drain_slices(mut sink: impl FnMut(u32, &[Entry])) -> (u64, u64) {
    let generation = GENERATION.load(Ordering::Acquire);
    let mut drained = 0u64;
    let mut dropped = ORPHAN_DROPS.load(Ordering::Relaxed);
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: list nodes are never freed.
        let b = unsafe { &*p };
        p = b.next.load(Ordering::Acquire);
        if b.generation.load(Ordering::Acquire) != generation {
            continue;
        }
        dropped += b.producer.dropped.load(Ordering::Relaxed);
        let state = b.owner_state.load(Ordering::Acquire);
        if state == FREE {
            continue;
        }
        let mut t = b.consumer.tail.load(Ordering::Relaxed);
        let head = b.producer.head.load(Ordering::Acquire);
        // The owner's id, stored before its first entry was published (a reused buffer was empty).
        let tid = b.tid.load(Ordering::Acquire);
        while t != head {
            let start = t & b.mask;
            // Up to the end of the slot array, the head, or the batch size.
            let n = head.wrapping_sub(t).min(b.slots.len() - start).min(DRAIN_BATCH);
            let run = &b.slots[start..start + n];
            // SAFETY: slots in tail..head were fully written before `head` was released, and the producer
            // does not touch them until `tail` passes them; `UnsafeCell<MaybeUninit<Entry>>` has the
            // layout of `Entry`.
            let entries = unsafe { std::slice::from_raw_parts(run.as_ptr().cast::<Entry>(), n) };
            sink(tid, entries);
            t = t.wrapping_add(n);
            drained += n as u64;
            b.consumer.tail.store(t, Ordering::Release);
        }
        if state == EXITED && b.producer.head.load(Ordering::Acquire) == t {
            // Keep its drop count in the total: move it to the orphan counter, then recycle.
            ORPHAN_DROPS.fetch_add(b.producer.dropped.swap(0, Ordering::Relaxed), Ordering::Relaxed);
            b.owner_state.store(FREE, Ordering::Release);
        }
    }
    (drained, dropped)
}

/// Asks the CPU to start loading `entries[i]` (drained entries are written by another core); a no-op
/// past the end of the slice.
#[inline(always)]
pub fn prefetch(entries: &[Entry], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(r) = entries.get(i) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // An entry spans two cache lines: its first and its last byte.
        let first = (r as *const Entry).cast::<i8>();
        let last = first.wrapping_add(std::mem::size_of::<Entry>() - 1);
        // SAFETY: `_mm_prefetch` only needs SSE, part of the x86_64 baseline; a prefetch never faults and
        // both addresses are inside a live entry.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(first);
            _mm_prefetch::<_MM_HINT_T0>(last);
        }
    }
}

fn own_buffer(ctx: &crate::record::thread::ThreadCtx) -> Option<&'static ThreadBuffer> {
    let (buf, generation) = (ctx.buffer.get(), ctx.buffer_generation.get());
    if buf.is_null() || generation != GENERATION.load(Ordering::Relaxed) {
        return None;
    }
    // SAFETY: buffers are never freed; this one is owned by the calling thread.
    Some(unsafe { &*buf })
}

/// Marks the calling thread as blocked in `name` since `since` ticks (hang watchdog).
pub fn set_pending(name: tprof_format::StrId, since: u64) {
    set_pending_in(crate::record::thread::ctx(), name, since);
}

/// [`set_pending`] with the calling thread's context.
pub fn set_pending_in(ctx: &crate::record::thread::ThreadCtx, name: tprof_format::StrId, since: u64) {
    if let Some(b) = own_buffer(ctx) {
        b.producer.pending_name.store(name.0, Ordering::Relaxed);
        b.producer.pending_since.store(since.max(1), Ordering::Release);
    }
}

/// Clears the calling thread's pending call.
pub fn clear_pending() {
    clear_pending_in(crate::record::thread::ctx());
}

/// [`clear_pending`] with the calling thread's context.
pub fn clear_pending_in(ctx: &crate::record::thread::ThreadCtx) {
    if let Some(b) = own_buffer(ctx) {
        b.producer.pending_since.store(0, Ordering::Release);
    }
}

/// The oldest pending blocking call of any live thread: (tid, name, since ticks).
pub fn oldest_pending() -> Option<(u32, tprof_format::StrId, u64)> {
    let generation = GENERATION.load(Ordering::Acquire);
    let mut best: Option<(u32, tprof_format::StrId, u64)> = None;
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: list nodes are never freed.
        let b = unsafe { &*p };
        p = b.next.load(Ordering::Acquire);
        if b.generation.load(Ordering::Acquire) != generation || b.owner_state.load(Ordering::Acquire) != OWNED {
            continue;
        }
        let since = b.producer.pending_since.load(Ordering::Acquire);
        if since != 0 && best.is_none_or(|x| since < x.2) {
            let name = tprof_format::StrId(b.producer.pending_name.load(Ordering::Relaxed));
            best = Some((b.tid.load(Ordering::Relaxed), name, since));
        }
    }
    best
}

/// Records waiting in all buffers (approximate).
pub fn pending() -> u64 {
    let mut n = 0u64;
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: list nodes are never freed.
        let b = unsafe { &*p };
        n += b.producer.head.load(Ordering::Acquire).wrapping_sub(b.consumer.tail.load(Ordering::Acquire)) as u64;
        p = b.next.load(Ordering::Acquire);
    }
    n
}

/// In a fork child: events buffered by the parent belong to the parent's ring. Start a new
/// generation; every thread (only the forking one exists) re-registers on its next event. The old
/// buffers are abandoned (their memory is the parent's copy).
pub fn reset_after_fork() {
    GENERATION.fetch_add(1, Ordering::AcqRel);
    ORPHAN_DROPS.store(0, Ordering::Relaxed);
    HEAD.store(std::ptr::null_mut(), Ordering::Release);
}

/// Total records dropped so far in this process generation.
pub fn total_dropped() -> u64 {
    let mut d = ORPHAN_DROPS.load(Ordering::Relaxed);
    let generation = GENERATION.load(Ordering::Acquire);
    let mut p = HEAD.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: list nodes are never freed.
        let b = unsafe { &*p };
        if b.generation.load(Ordering::Acquire) == generation {
            d += b.producer.dropped.load(Ordering::Relaxed);
        }
        p = b.next.load(Ordering::Acquire);
    }
    d
}
