//! CUPTI activity tracing: GPU kernels, copies, memsets, synchronizations, memory and the CUDA API
//! calls the interposers cannot see, on tprof's own clock.
//!
//! Lifecycle ([`start`], idempotent and cheap after the first call): load `libcupti` at run time
//! ([`loader`]), claim the CUPTI subscriber slot (`cuptiSubscribe`, which is how another tool is
//! detected), register the timestamp callback (so GPU times are `clock::now()` ticks), the buffer
//! callbacks ([`buffers`]) and enable the activity kinds. Completed buffers are parsed into
//! [`tprof_format::Record`]s ([`parse`]), rewriting CUPTI correlation ids into shim ids through the
//! external-correlation table ([`corrmap`]).
//!
//! When CUPTI is missing or refuses (no driver, another subscriber), one stderr line says so, a
//! `Marker{CuptiUnavailable}` records why, and tprof runs on with interposition only: then
//! [`is_active`] is false and the launch interposers emit time-less `Kernel` records themselves.

mod buffers;
mod corrmap;
mod loader;
mod parse;

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::OnceLock;

use cupti_sys as sys;
use tprof_format::{MarkerKind, Record, StrId};

use crate::{clock, config, guard, recorder, state, strings};

pub use loader::CuptiApi;

const UNSTARTED: u8 = 0;
const STARTING: u8 = 1;
const ACTIVE: u8 = 2;
const UNAVAILABLE: u8 = 3;
const STOPPED: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(UNSTARTED);
static API: OnceLock<CuptiApi> = OnceLock::new();
/// Whether the runtime/driver interposers see the program's calls (LD_PRELOAD), decided at start.
static INTERPOSERS_BOUND: AtomicBool = AtomicBool::new(false);
/// Records CUPTI reported dropped, in total.
static DROPPED_TOTAL: AtomicU64 = AtomicU64::new(0);

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

/// True once [`start`] has finished deciding (active, unavailable or stopped).
pub fn is_decided() -> bool {
    STATE.load(Ordering::Acquire) >= ACTIVE
}

/// The loaded CUPTI entry points, when CUPTI was loaded.
pub fn api() -> Option<&'static CuptiApi> {
    API.get()
}

/// True when the interposers are in the program's symbol lookup path (then CUPTI API records of hooked
/// calls duplicate the interposers' records).
pub fn interposers_bound() -> bool {
    INTERPOSERS_BOUND.load(Ordering::Relaxed)
}

/// Records CUPTI reported dropped so far.
pub fn dropped_total() -> u64 {
    DROPPED_TOTAL.load(Ordering::Relaxed)
}

/// Pushes a shim correlation id as CUPTI external id (kind CUSTOM2) on this thread. No-op when CUPTI
/// is not active. Pair with [`pop_external`] after the call that creates GPU work.
#[inline]
pub fn push_external(id: u32) {
    if !is_active() {
        return;
    }
    let Some(api) = API.get() else { return };
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
    let Some(api) = API.get() else { return };
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
    if let Some(api) = API.get() {
        // SAFETY: cuptiActivityFlushAll with its C signature; no tprof lock is held here.
        unsafe { (api.flush_all)(0) };
    }
    apply_scheduled_disable();
}

/// Exit flush: forced (also returns partially filled buffers), without synchronising the device.
/// Registered with `state::register_flush_hook`.
fn flush_at_exit() {
    if STATE.compare_exchange(ACTIVE, STOPPED, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    if let Some(api) = API.get() {
        // SAFETY: cuptiActivityFlushAll with its C signature; no tprof lock is held here, so the
        // completion callback (which may run on this thread) cannot deadlock on us.
        unsafe { (api.flush_all)(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
        parse::flush_pending();
        report_dropped(api);
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
        DISABLE_AT.store(clock::monotonic_ns() + DISABLE_GRACE_NS, Ordering::Release);
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
        && clock::monotonic_ns() >= at
        && DISABLE_AT.compare_exchange(at, 0, Ordering::AcqRel, Ordering::Acquire).is_ok()
    {
        switch_kinds(false);
    }
}

fn switch_kinds(on: bool) {
    if ACTIVITY_ON.swap(on, Ordering::AcqRel) == on {
        return;
    }
    let Some(api) = API.get() else { return };
    let _inside = guard::Reentrancy::enter();
    guard::ffi_guard((), || {
        let n = ENABLED_KINDS_COUNT.load(Ordering::Acquire);
        for slot in &ENABLED_KINDS[..n.min(ENABLED_KINDS.len())] {
            let kind: sys::CUpti_ActivityKind = slot.load(Ordering::Relaxed);
            // SAFETY: cuptiActivityEnable/Disable with a kind that `start` enabled successfully.
            unsafe {
                if on {
                    (api.enable)(kind);
                } else {
                    (api.disable)(kind);
                }
            }
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
    let _inside = guard::Reentrancy::enter();
    let outcome = guard::ffi_guard(Err(Refusal::quiet("internal error while starting CUPTI")), start_inner);
    match outcome {
        Ok(()) => {
            STATE.store(ACTIVE, Ordering::Release);
            state::register_flush_hook(flush_at_exit);
            crate::writer_thread::register_periodic_hook(flush);
            // Production modes: activity collection follows the capture window.
            crate::capture::register_activity_switch(set_activity);
        }
        Err(refusal) => {
            STATE.store(UNAVAILABLE, Ordering::Release);
            if refusal.warn {
                state::warn_line(&format!(
                    "CUPTI unavailable: {}; tprof records CUDA calls by interposition only (kernels without GPU times)",
                    refusal.reason
                ));
            }
            recorder::emit(Record::Marker {
                kind: MarkerKind::CuptiUnavailable,
                ts: clock::now(),
                value: refusal.code as u64,
                name: strings::intern(&refusal.reason),
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
        sys::CUPTI_ERROR_NOT_INITIALIZED => ": no usable CUDA driver",
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

unsafe extern "C" fn timestamp_callback() -> u64 {
    clock::now()
}

fn start_inner() -> Result<(), Refusal> {
    if !config::config().cupti {
        return Err(Refusal::quiet("disabled by TPROF_CUPTI=0"));
    }
    INTERPOSERS_BOUND.store(crate::injection::interposers_bound(), Ordering::Relaxed);
    let api = match loader::load() {
        Ok(api) => API.get_or_init(|| api),
        Err(searched) => {
            return Err(Refusal::warn(format!("libcupti not found (looked in {searched}; set TPROF_CUPTI_PATH)"), 0))
        }
    };
    if !sys::cupti_version_has(api.version, 13) {
        return Err(Refusal::warn(format!("{} reports API version {} (CUDA < 11), too old", api.path, api.version), 0));
    }
    let mut subscriber: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    // SAFETY: cuptiSubscribe with its C signature; `subscriber` is ours; the callback is a valid
    // extern "C" fn with CUPTI's callback signature that does nothing (no domain is enabled).
    let r = unsafe { (api.subscribe)(&mut subscriber, no_op_callback, std::ptr::null_mut()) };
    if r != sys::CUPTI_SUCCESS {
        return Err(Refusal::warn(describe(api, "cuptiSubscribe", r), r));
    }
    let fail = |what: &str, r: sys::CUptiResult| {
        // SAFETY: releases the subscription taken above, so another tool may use CUPTI.
        unsafe { (api.unsubscribe)(subscriber) };
        Refusal::warn(describe(api, what, r), r)
    };
    if let Some(set_tid_type) = api.set_thread_id_type {
        // SAFETY: cuptiSetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM): API records carry gettid().
        unsafe { set_tid_type(1) };
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
        } else if !sys::kind_unavailable(r) {
            for &k in &enabled {
                // SAFETY: disabling a kind we enabled above.
                unsafe { (api.disable)(k) };
            }
            return Err(fail(&format!("cuptiActivityEnable({name})"), r));
        }
    }
    if let Some(period) = api.flush_period {
        // SAFETY: cuptiActivityFlushPeriod(ms) with its C signature.
        unsafe { period(FLUSH_PERIOD_MS) };
    }
    Ok(())
}

/// The timestamp callback was refused: GPU times stay in CUPTI's clock. Record the offset between the
/// two clocks so the decoder can shift them.
fn note_timebase_offset(api: &CuptiApi, r: sys::CUptiResult) {
    let mut cupti_ns = 0u64;
    if let Some(get_ts) = api.get_timestamp {
        // SAFETY: cuptiGetTimestamp writes one u64 into our variable.
        unsafe { get_ts(&mut cupti_ns) };
    }
    let now = clock::now();
    recorder::emit(Record::Marker {
        kind: MarkerKind::Note,
        ts: now,
        value: cupti_ns,
        name: strings::intern(&format!(
            "cupti_timestamp_callback_refused result={r}: GPU times are CUPTI ns; value = cuptiGetTimestamp at ts"
        )),
    });
}

/// Emits `Marker{CuptiDropped}` for records CUPTI dropped since the last call.
fn report_dropped(api: &CuptiApi) {
    let mut dropped: usize = 0;
    // SAFETY: cuptiActivityGetNumDroppedRecords(NULL, 0, &n) with its C signature; no tprof lock is
    // held (CUPTI may take its own buffer lock here).
    let r = unsafe { (api.get_num_dropped)(std::ptr::null_mut(), 0, &mut dropped) };
    if r == sys::CUPTI_SUCCESS && dropped > 0 {
        DROPPED_TOTAL.fetch_add(dropped as u64, Ordering::Relaxed);
        recorder::emit(Record::Marker {
            kind: MarkerKind::CuptiDropped,
            ts: clock::now(),
            value: dropped as u64,
            name: StrId::NONE,
        });
    }
}

extern "C" fn constructor() {
    // Only in libtprof.so itself: test executables linking the rlib keep CUPTI out of their way.
    guard::ffi_guard((), || {
        if crate::nvtx::own_library_path().is_some() {
            state::register_init_hook(start);
        }
    })
}

/// Starts CUPTI when tprof initialises (first intercepted call, or `InitializeInjection`).
#[used]
#[link_section = ".init_array"]
static REGISTER_START: extern "C" fn() = constructor;

/// Test support: the state name.
pub fn state_name() -> &'static str {
    match STATE.load(Ordering::Acquire) {
        UNSTARTED => "unstarted",
        STARTING => "starting",
        ACTIVE => "active",
        UNAVAILABLE => "unavailable",
        _ => "stopped",
    }
}
