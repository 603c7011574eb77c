//! CUPTI activity tracing: GPU kernels, copies, memsets, synchronizations, memory and the CUDA API
//! calls the interposers cannot see, on tprof's own clock.
//!
//! Lifecycle ([`start`], idempotent and cheap after the first call): load `libcupti` at run time
//! ([`libcupti`]), claim the CUPTI subscriber slot (`cuptiSubscribe`, which is how another tool is
//! detected), register the timestamp callback (so GPU times are `ticks::now()` ticks), the buffer
//! callbacks ([`buffers`]) and enable the activity kinds. Completed buffers are parsed into
//! [`tprof_format::Record`]s ([`parse`]), rewriting CUPTI correlation ids into shim ids through the
//! external-correlation table ([`corrmap`]).
//!
//! When CUPTI is missing or refuses (no driver, another subscriber), one stderr line says so, a
//! `Marker{CuptiUnavailable}` records why, and tprof runs on with interposition only: then
//! [`is_active`] is false and the launch interposers emit time-less `Kernel` records themselves.

mod buffers;
mod corrmap;
mod libcupti;
mod parse;
mod session;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};

use cupti_sys as sys;
use tprof_format::{MarkerKind, Record};

use crate::base::{config, dynamic_loader, messages, panic_fence, switch, ticks};
use crate::lifecycle;
use crate::record::{interning, recorder, reentrancy};

pub use libcupti::CuptiApi;
pub use session::{interposers_bound, register_interposed_calls};

const UNSTARTED: u8 = 0;
const STARTING: u8 = 1;
const ACTIVE: u8 = 2;
const UNAVAILABLE: u8 = 3;
const STOPPED: u8 = 4;
/// The program runs its own CUPTI client: tprof handed CUPTI over (or never took it).
const YIELDED: u8 = 5;

static STATE: AtomicU8 = AtomicU8::new(UNSTARTED);

thread_local! {
    /// External ids this thread pushed and has not popped (so a pop never underflows CUPTI's stack).
    static PUSHED: Cell<u32> = const { Cell::new(0) };
}

/// Flush period asked of CUPTI's own worker thread (ms).
const FLUSH_PERIOD_MS: u32 = 100;

/// True when CUPTI activity tracing runs: GPU records will come from CUPTI.
#[inline]
pub fn is_active() -> bool {
    STATE.load(Ordering::Relaxed) == ACTIVE
}

/// Pushes a shim correlation id as CUPTI external id (kind CUSTOM2) on this thread. No-op when CUPTI
/// is not active. Pair with [`pop_external`] after the call that creates GPU work.
#[inline]
pub fn push_external(id: u32) {
    if !is_active() {
        return;
    }
    let Some(api) = session::api() else { return };
    // SAFETY: `push_external_id` is CUPTI's cuptiActivityPushExternalCorrelationId, resolved from the
    // loaded library with the matching C signature; it only touches CUPTI's per-thread stack.
    let r = unsafe { (api.push_external_id)(sys::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, id as u64) };
    if r == sys::CUPTI_SUCCESS {
        let _ = PUSHED.try_with(|p| p.set(p.get() + 1));
    }
}

/// Pops the id pushed by the matching [`push_external`] (no-op if that push did not happen).
#[inline]
pub fn pop_external() {
    let pushed = PUSHED.try_with(|p| p.get()).unwrap_or(0);
    if pushed == 0 {
        return;
    }
    let _ = PUSHED.try_with(|p| p.set(pushed - 1));
    let Some(api) = session::api() else { return };
    let mut last = 0u64;
    // SAFETY: CUPTI's cuptiActivityPopExternalCorrelationId with its C signature; `last` is ours.
    unsafe { (api.pop_external_id)(sys::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2, &mut last) };
}

/// Asks CUPTI to hand over the buffers it has completed (non-forced, does not synchronise). Called
/// periodically by the writer thread. The completion callback may run on this thread.
pub fn flush() {
    if !is_active() {
        return;
    }
    if let Some(api) = session::api() {
        // SAFETY: cuptiActivityFlushAll with its C signature; no tprof lock is held here.
        let r = unsafe { (api.flush_all)(0) };
        if r != sys::CUPTI_SUCCESS && !FLUSH_FAILURE_NOTED.swap(true, Ordering::Relaxed) {
            note_if_failed(
                "periodic cuptiActivityFlushAll (noted once; records arrive at the next flush that works)",
                r,
            );
        }
    }
    apply_scheduled_disable();
}

/// A periodic flush failed and a note says so (once per process).
static FLUSH_FAILURE_NOTED: AtomicBool = AtomicBool::new(false);

/// Exit flush: forced (also returns partially filled buffers), without synchronising the device.
/// Registered with `state::register_flush_hook`.
fn flush_at_exit() {
    if STATE.compare_exchange(ACTIVE, STOPPED, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    if let Some(api) = session::api() {
        // SAFETY: cuptiActivityFlushAll with its C signature; no tprof lock is held here, so the
        // completion callback (which may run on this thread) cannot deadlock on us.
        let r = unsafe { (api.flush_all)(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
        note_if_failed("cuptiActivityFlushAll at exit: records CUPTI still held are lost", r);
        parse::flush_pending();
        session::report_dropped(api);
    }
}

/// The activity kinds `start` enabled (for switching them with the capture window).
static ENABLED_KINDS: [AtomicU32; 16] = [const { AtomicU32::new(0) }; 16];
static ENABLED_KINDS_COUNT: AtomicUsize = AtomicUsize::new(0);
static ACTIVITY_ON: AtomicBool = AtomicBool::new(true);

/// Turns CUPTI activity collection on or off with the capture window. Closing only schedules the
/// switch-off [`DISABLE_GRACE_NS`] later (done by the periodic flush), so the GPU work launched inside
/// the window still completes and is delivered; opening again cancels it. Outside a window CUPTI then
/// records nothing, and a closed window costs the program only the interposers' counters.
fn set_activity(on: bool) {
    if STATE.load(Ordering::Acquire) != ACTIVE {
        return;
    }
    if on {
        DISABLE_AT.store(0, Ordering::Release);
        switch_kinds(true);
    } else {
        DISABLE_AT.store(ticks::monotonic_ns() + DISABLE_GRACE_NS, Ordering::Release);
    }
}

/// How long activity stays on after a window closes.
const DISABLE_GRACE_NS: u64 = 2_000_000_000;
/// When to switch activity off (CLOCK_MONOTONIC ns), 0 = not scheduled.
static DISABLE_AT: AtomicU64 = AtomicU64::new(0);

/// Called by the periodic flush: performs a scheduled switch-off.
fn apply_scheduled_disable() {
    let at = DISABLE_AT.load(Ordering::Acquire);
    if at != 0
        && ticks::monotonic_ns() >= at
        && DISABLE_AT.compare_exchange(at, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
    {
        switch_kinds(false);
    }
}

fn switch_kinds(on: bool) {
    if ACTIVITY_ON.swap(on, Ordering::AcqRel) == on {
        return;
    }
    let Some(api) = session::api() else { return };
    let _inside = reentrancy::Reentrancy::enter();
    panic_fence::ffi_guard((), || {
        let n = ENABLED_KINDS_COUNT.load(Ordering::Acquire);
        for slot in &ENABLED_KINDS[..n.min(ENABLED_KINDS.len())] {
            let kind: sys::CUpti_ActivityKind = slot.load(Ordering::Relaxed);
            // SAFETY: cuptiActivityEnable/Disable with a kind that `start` enabled successfully.
            let r = unsafe {
                if on {
                    (api.enable)(kind)
                } else {
                    (api.disable)(kind)
                }
            };
            note_if_failed(
                if on {
                    "cuptiActivityEnable as a capture window opened"
                } else {
                    "cuptiActivityDisable as a capture window closed"
                },
                r,
            );
        }
    });
}

/// Starts CUPTI tracing once (the first CUDA call, `InitializeInjection` or tprof's init hook call
/// it). Cheap after the first call; never panics; safe to call from inside an interposer.
pub fn start() {
    if STATE.load(Ordering::Acquire) != UNSTARTED {
        return;
    }
    if STATE.compare_exchange(UNSTARTED, STARTING, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    // Whatever CUPTI calls while it starts (cuInit, dlsym...) must not be recorded.
    let _inside = reentrancy::Reentrancy::enter();
    let outcome = panic_fence::ffi_guard(Err(Refusal::quiet("internal error while starting CUPTI")), start_inner);
    match outcome {
        Ok(()) => {
            STATE.store(ACTIVE, Ordering::Release);
            crate::service::writer_thread::register_exit_flush_hook(flush_at_exit);
            crate::service::writer_thread::register_periodic_hook(flush);
            // Production modes: activity collection follows the capture window.
            crate::capture::register_activity_switch(set_activity);
        }
        Err(refusal) => {
            STATE.store(UNAVAILABLE, Ordering::Release);
            if refusal.warn {
                messages::warn_line(&format!(
                    "CUPTI unavailable: {}; tprof records CUDA calls by interposition only (kernels without GPU times)",
                    refusal.reason
                ));
            }
            recorder::emit(Record::Marker {
                kind: MarkerKind::CuptiUnavailable,
                ts: ticks::now(),
                value: refusal.code as u64,
                name: interning::intern(&refusal.reason),
            });
        }
    }
}

/// Why CUPTI is not used.
struct Refusal {
    reason: String,
    code: u32,
    warn: bool,
}

impl Refusal {
    fn warn(reason: String, code: u32) -> Refusal {
        Refusal { reason, code, warn: true }
    }
    fn quiet(reason: &str) -> Refusal {
        Refusal { reason: reason.into(), code: 0, warn: false }
    }
}

fn describe(api: &CuptiApi, call: &str, r: sys::CUptiResult) -> String {
    let hint = match r {
        sys::CUPTI_ERROR_NOT_INITIALIZED | sys::CUPTI_ERROR_UNKNOWN => {
            ": CUPTI cannot run here (no usable CUDA driver?)"
        }
        sys::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED => {
            ": another tool (Nsight Systems/Compute, a debugger or an in-process profiler) owns CUPTI"
        }
        sys::CUPTI_ERROR_INSUFFICIENT_PRIVILEGES => ": insufficient privileges for GPU profiling",
        _ => "",
    };
    format!("{call} returned {} ({r}) from {}{hint}", api.result_name(r), api.path)
}

/// Kinds enabled, in order; the first one is required.
const KINDS: &[(sys::CUpti_ActivityKind, &str)] = &[
    (sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, "CONCURRENT_KERNEL"),
    (sys::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION, "EXTERNAL_CORRELATION"),
    (sys::CUPTI_ACTIVITY_KIND_MEMCPY, "MEMCPY"),
    (sys::CUPTI_ACTIVITY_KIND_MEMSET, "MEMSET"),
    (sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, "SYNCHRONIZATION"),
    (sys::CUPTI_ACTIVITY_KIND_MEMORY2, "MEMORY2"),
    (sys::CUPTI_ACTIVITY_KIND_OVERHEAD, "OVERHEAD"),
    (sys::CUPTI_ACTIVITY_KIND_RUNTIME, "RUNTIME"),
    (sys::CUPTI_ACTIVITY_KIND_DRIVER, "DRIVER"),
];

unsafe extern "C" fn no_op_callback(
    _userdata: *mut std::ffi::c_void,
    _domain: sys::CUpti_CallbackDomain,
    _cbid: sys::CUpti_CallbackId,
    _cbdata: *const std::ffi::c_void,
) {
}

/// GPU timestamps in tprof's ticks. Once tprof has yielded CUPTI to the program's own profiler
/// (which did not register a timestamp callback of its own), CUPTI's default timebase instead:
/// wall-clock nanoseconds, which Kineto and other clients expect.
unsafe extern "C" fn timestamp_callback() -> u64 {
    panic_fence::ffi_guard(0, || {
        if STATE.load(Ordering::Relaxed) == YIELDED {
            return ticks::wall_ns();
        }
        ticks::now()
    })
}

/// How long a program's CUPTI claim waits for tprof's own start to finish on another thread.
const YIELD_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The program claims CUPTI (`call`, see `intercept::cupti_sharing`): tprof hands it over, once. Returns after
/// tprof's subscription, callbacks and activity kinds are released (or were never taken).
pub fn yield_to_program(call: &str) {
    let started = std::time::Instant::now();
    loop {
        match STATE.load(Ordering::Acquire) {
            UNSTARTED => {
                if STATE.compare_exchange(UNSTARTED, YIELDED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    say_yielded(call, false);
                    return;
                }
            }
            STARTING => {
                if started.elapsed() > YIELD_WAIT {
                    return;
                }
                std::thread::yield_now();
            }
            ACTIVE => {
                if STATE.compare_exchange(ACTIVE, STOPPED, Ordering::AcqRel, Ordering::Acquire).is_ok() {
                    release_for_program();
                    STATE.store(YIELDED, Ordering::Release);
                    say_yielded(call, true);
                    return;
                }
            }
            _ => return,
        }
    }
}

/// Gives back what tprof holds in CUPTI: its activity kinds, the records CUPTI still holds for it
/// (flushed and parsed into the ring now), and its subscription.
fn release_for_program() {
    let Some(api) = session::api() else { return };
    let _inside = reentrancy::Reentrancy::enter();
    DISABLE_AT.store(0, Ordering::Release);
    // Flush before disabling: the work tprof saw launched is delivered to tprof, not lost.
    // SAFETY: cuptiActivityFlushAll with its C signature; no tprof lock is held, so the completion
    // callback (which may run on this thread) can take what it needs.
    let r = unsafe { (api.flush_all)(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    note_if_failed("cuptiActivityFlushAll while yielding CUPTI to the program", r);
    let n = ENABLED_KINDS_COUNT.load(Ordering::Acquire);
    for slot in &ENABLED_KINDS[..n.min(ENABLED_KINDS.len())] {
        // SAFETY: cuptiActivityDisable with a kind `start` enabled.
        let r = unsafe { (api.disable)(slot.load(Ordering::Relaxed)) };
        note_if_failed("cuptiActivityDisable while yielding CUPTI to the program", r);
    }
    ACTIVITY_ON.store(false, Ordering::Release);
    // What completed between the flush and the disable.
    // SAFETY: as above.
    let r = unsafe { (api.flush_all)(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    note_if_failed("cuptiActivityFlushAll while yielding CUPTI to the program", r);
    parse::flush_pending();
    session::report_dropped(api);
    let sub = SUBSCRIBER.swap(0, Ordering::AcqRel);
    if sub != 0 {
        // SAFETY: the subscriber handle `start` obtained from cuptiSubscribe, released once.
        let r = unsafe { (api.unsubscribe)(sub as sys::CUpti_SubscriberHandle) };
        note_if_failed("cuptiUnsubscribe while yielding CUPTI to the program", r);
    }
}

fn say_yielded(call: &str, was_active: bool) {
    let reason = format!(
        "the program uses CUPTI itself ({call}: its own profiler, e.g. torch.profiler or jax.profiler); tprof {} CUPTI to it and records CUDA calls by interposition (kernels without GPU times)",
        if was_active { "handed" } else { "leaves" }
    );
    if config::config().cupti {
        messages::warn_line(&reason);
    }
    if switch::state() == switch::ENABLED {
        recorder::emit(Record::Marker {
            kind: MarkerKind::CuptiUnavailable,
            ts: ticks::now(),
            value: 0,
            name: interning::intern(&reason),
        });
    }
}

/// tprof's CUPTI subscriber handle while it holds one (0: none).
static SUBSCRIBER: AtomicUsize = AtomicUsize::new(0);

fn start_inner() -> Result<(), Refusal> {
    if !config::config().cupti {
        return Err(Refusal::quiet("disabled by TPROF_CUPTI=0"));
    }
    session::decide_interposers_bound();
    if !dynamic_loader::own_export_bound(c"cuptiSubscribe") {
        if let Some(own) = libcupti::already_loaded(&dynamic_loader::loaded_objects()) {
            return Err(Refusal::warn(
                format!(
                    "the program loaded {} itself and tprof is not preloaded, so it could not hand CUPTI over to the program's own profiler; GPU activity is not traced (preload libtprof.so to trace it)",
                    own.display()
                ),
                0,
            ));
        }
    }
    let api = match libcupti::load() {
        Ok(api) => session::keep_api(api),
        Err(searched) => {
            return Err(Refusal::warn(format!("libcupti not found (looked in {searched}; set TPROF_CUPTI_PATH)"), 0))
        }
    };
    if api.version_result != sys::CUPTI_SUCCESS {
        return Err(Refusal::warn(describe(api, "cuptiGetVersion", api.version_result), api.version_result));
    }
    if !sys::cupti_version_has(api.version, sys::CUPTI_API_VERSION_11_0) {
        return Err(Refusal::warn(format!("{} reports API version {} (CUDA < 11), too old", api.path, api.version), 0));
    }
    let mut subscriber: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    // SAFETY: cuptiSubscribe with its C signature; `subscriber` is ours; the callback is a valid
    // extern "C" fn with CUPTI's callback signature that does nothing (no domain is enabled).
    let r = unsafe { (api.subscribe)(&mut subscriber, no_op_callback, std::ptr::null_mut()) };
    if r != sys::CUPTI_SUCCESS {
        return Err(Refusal::warn(describe(api, "cuptiSubscribe", r), r));
    }
    SUBSCRIBER.store(subscriber as usize, Ordering::Release);
    let fail = |what: &str, r: sys::CUptiResult| {
        SUBSCRIBER.store(0, Ordering::Release);
        // SAFETY: releases the subscription taken above, so another tool may use CUPTI.
        let u = unsafe { (api.unsubscribe)(subscriber) };
        let also = if u == sys::CUPTI_SUCCESS { String::new() } else { format!("; cuptiUnsubscribe returned {u}") };
        Refusal::warn(format!("{}{also}", describe(api, what, r)), r)
    };
    if let Some(set_tid_type) = api.set_thread_id_type {
        // SAFETY: cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM): API records carry gettid().
        let r = unsafe { set_tid_type(sys::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM) };
        note_if_failed("cuptiSetThreadIdType(SYSTEM): CUPTI API records carry CUPTI's thread ids", r);
    }
    // SAFETY: registering an extern "C" fn returning u64, as CUpti_TimestampCallbackFunc requires.
    let r = unsafe { (api.register_timestamp_callback)(timestamp_callback) };
    if r != sys::CUPTI_SUCCESS {
        note_timebase_offset(api, r);
    }
    if !buffers::init() {
        return Err(fail("allocating the activity buffer pool", 0));
    }
    // SAFETY: both callbacks are extern "C" fns with CUPTI's buffer callback signatures.
    let r = unsafe { (api.register_callbacks)(buffers::request, buffers::complete) };
    if r != sys::CUPTI_SUCCESS {
        return Err(fail("cuptiActivityRegisterCallbacks", r));
    }
    let mut enabled: Vec<sys::CUpti_ActivityKind> = Vec::new();
    ENABLED_KINDS_COUNT.store(0, Ordering::Release);
    for (i, &(kind, name)) in KINDS.iter().enumerate() {
        // SAFETY: cuptiActivityEnable with a valid kind constant.
        let r = unsafe { (api.enable)(kind) };
        if r == sys::CUPTI_SUCCESS {
            enabled.push(kind);
            if let Some(slot) = ENABLED_KINDS.get(enabled.len() - 1) {
                slot.store(kind, Ordering::Relaxed);
                ENABLED_KINDS_COUNT.store(enabled.len(), Ordering::Release);
            }
        } else if i == 0 {
            return Err(fail("cuptiActivityEnable(CONCURRENT_KERNEL)", r));
        } else if sys::kind_unavailable(r) {
            note_if_failed(&format!("cuptiActivityEnable({name}): that kind is not recorded"), r);
        } else {
            for &k in &enabled {
                // SAFETY: disabling a kind we enabled above.
                unsafe { (api.disable)(k) };
            }
            return Err(fail(&format!("cuptiActivityEnable({name})"), r));
        }
    }
    if let Some(period) = api.flush_period {
        // SAFETY: cuptiActivityFlushPeriod(ms) with its C signature.
        let r = unsafe { period(FLUSH_PERIOD_MS) };
        note_if_failed("cuptiActivityFlushPeriod: buffers come with tprof's periodic flush only", r);
    }
    // Which CUPTI traces this process (`tprof dump` shows it).
    recorder::emit(Record::Marker {
        kind: MarkerKind::Note,
        ts: ticks::now(),
        value: u64::from(api.version),
        name: interning::intern(&format!("cupti: {} (API version {})", api.path, api.version)),
    });
    Ok(())
}

/// A CUPTI call that tprof can do without failed: a `Note` marker in the ring says which and what
/// it costs (no stderr line: the profile is still complete in what matters).
fn note_if_failed(what: &str, r: sys::CUptiResult) {
    if r == sys::CUPTI_SUCCESS {
        return;
    }
    recorder::emit(Record::Marker {
        kind: MarkerKind::Note,
        ts: ticks::now(),
        value: r as u64,
        name: interning::intern(&format!("{what} (returned {} {r})", sys::result_name(r))),
    });
}

/// The timestamp callback was refused: GPU times stay in CUPTI's clock. Record the offset between the
/// two clocks so the decoder can shift them.
fn note_timebase_offset(api: &CuptiApi, r: sys::CUptiResult) {
    let mut cupti_ns = 0u64;
    if let Some(get_ts) = api.get_timestamp {
        // SAFETY: cuptiGetTimestamp writes one u64 into our variable.
        let r = unsafe { get_ts(&mut cupti_ns) };
        note_if_failed("cuptiGetTimestamp: GPU times cannot be shifted into tprof's clock", r);
    }
    let now = ticks::now();
    recorder::emit(Record::Marker {
        kind: MarkerKind::Note,
        ts: now,
        value: cupti_ns,
        name: interning::intern(&format!(
            "cupti_timestamp_callback_refused result={r}: GPU times are CUPTI ns; value = cuptiGetTimestamp at ts"
        )),
    });
}

/// Starts CUPTI once tprof is enabled and the driver has been shown to work, whichever comes last.
/// Cheap after the first call.
#[inline]
pub fn start_when_ready() {
    if switch::state() == switch::ENABLED && crate::base::driver::works() {
        start();
    }
}

extern "C" fn constructor() {
    // Only in libtprof.so itself: test executables linking the rlib keep CUPTI out of their way.
    panic_fence::ffi_guard((), || {
        if dynamic_loader::own_library_path().is_some() {
            lifecycle::register_init_hook(start_when_ready);
            crate::base::driver::on_ready(start_when_ready);
        }
    })
}

/// Starts CUPTI when tprof is enabled and the driver works (never from NVTX initialisation alone).
#[used]
#[link_section = ".init_array"]
static REGISTER_START: extern "C" fn() = constructor;
