//! Capture windows (production modes): when the window (`switch::is_recording`) is open.
//!
//! `TPROF_MODE`:
//! - `full`: open from initialisation to exit.
//! - `steps`: `TPROF_STEPS=A-B[:every=N]`: opens at the StepBegin of step A and closes right after the
//!   StepEnd of step B (then again at A+N..B+N, ... with `every`). Steps are numbered as the NVTX step
//!   marker numbers them: the trailing number of the range name (`ProfilerStep#12`), else the count of
//!   step ranges begun so far, from 0.
//! - `sample`: `TPROF_SAMPLE=L/P`: open for L at the start of every period P (from initialisation); the
//!   writer thread flips the window, so edges are within its 5 ms pause of the schedule.
//! - `flight`: always open; the ring wraps and keeps the newest `TPROF_FLIGHT_MB` MiB. A *dump* makes the
//!   ring durable now: a `Marker{FlightDump}` (value = [`Reason`] code, name = reason) is written, the
//!   writer commits and asks the kernel to write the file out. Dumps happen on `tprof ctl dump`, SIGUSR2
//!   (flight mode only), fatal signals (`service::signals`) and exit.
//! - `metrics`: never open by itself; only counters ([`crate::record::call_counters`], [`tallies`], `service::metrics`).
//!
//! In every mode a window can also be opened and closed on demand (`tprof ctl start|stop`, SIGUSR2
//! outside flight mode); while such a manual window is active the mode's own schedule waits.
//! Every edge writes `Marker{CaptureStart|CaptureStop}` (value = [`Reason`] code, name = reason text),
//! except the implicit window of `full` and `flight` mode, which spans the whole ring.
//!
//! GPU records (CUPTI) arrive after their launch, often after the window closed: a kernel / copy /
//! memset is kept when its correlation id is a shim id (its launch was recorded inside a window). One
//! with CUPTI's own id (a call the interposers did not record) is kept while the window is open, unless
//! a window has closed before and the interposers are bound: then it is work launched outside a window
//! whose record CUPTI delivered late ([`keep_gpu_record`]). Everything not kept is only counted.
//!
//! All state here is atomics; the only "lock" is a spin flag held while one edge is applied, reset in a
//! fork child. Nothing here runs on the per-call hot path except [`tracks_steps`] (one relaxed load).

pub mod hang_watchdog;
pub mod tallies;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::OnceLock;

pub use tprof_format::control_protocol::Until;
use tprof_format::settings::Mode;
use tprof_format::{MarkerKind, Record, StrId};

use crate::base::config::config;
use crate::base::{switch, ticks};
use crate::record::call_counters;
use crate::record::{correlation, interning, recorder};

/// Why a window edge or a dump happened (the marker's `value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Reason {
    /// The mode's schedule at initialisation.
    Start = 0,
    /// Steps mode (`TPROF_STEPS`).
    Steps = 1,
    /// Sample mode (`TPROF_SAMPLE`).
    Sample = 2,
    /// `tprof ctl`.
    Control = 3,
    /// The dump signal (`TPROF_DUMP_SIGNAL`).
    Signal = 4,
    /// Process exit.
    Exit = 5,
    /// A request from inside the process.
    Request = 6,
    /// A fatal signal (SIGSEGV, SIGBUS, SIGABRT, SIGFPE).
    Fatal = 7,
}

const REASONS: [(Reason, &str); 8] = [
    (Reason::Start, "start"),
    (Reason::Steps, "steps"),
    (Reason::Sample, "sample"),
    (Reason::Control, "ctl"),
    (Reason::Signal, "sigusr2"),
    (Reason::Exit, "exit"),
    (Reason::Request, "request"),
    (Reason::Fatal, "fatal signal"),
];

impl Reason {
    fn from_u8(v: u8) -> Reason {
        REASONS.get(v as usize).map(|r| r.0).unwrap_or(Reason::Request)
    }
}

const MANUAL_NONE: u8 = 0;
const MANUAL_OPEN: u8 = 1;
const MANUAL_DEADLINE: u8 = 2;
const MANUAL_STEPS: u8 = 3;

/// Our view of the window (mirrors `switch::is_recording` for edges we applied).
static OPEN: AtomicBool = AtomicBool::new(false);
/// The window has been closed at some point (from the start, or by an edge): GPU records without a
/// shim correlation id can then belong to work launched outside a window.
static EVER_CLOSED: AtomicBool = AtomicBool::new(false);
/// When the current window opened (ticks; 0 = open from the start).
static OPENED_TICKS: AtomicU64 = AtomicU64::new(0);
/// Held while one edge is applied.
static EDGE: AtomicBool = AtomicBool::new(false);
/// The process this state belongs to (a fork child resets it).
static OWNER_PID: AtomicU32 = AtomicU32::new(0);
static MODE: AtomicU8 = AtomicU8::new(0);
static TRACK_STEPS: AtomicBool = AtomicBool::new(false);
static MANUAL: AtomicU8 = AtomicU8::new(MANUAL_NONE);
static MANUAL_DEADLINE_NS: AtomicU64 = AtomicU64::new(0);
static MANUAL_STEPS_LEFT: AtomicU64 = AtomicU64::new(0);
static WINDOWS_OPENED: AtomicU64 = AtomicU64::new(0);
static SAMPLE_T0_NS: AtomicU64 = AtomicU64::new(0);
static SAMPLE_WANTS_OPEN: AtomicBool = AtomicBool::new(false);
/// The step in progress (for steps mode's last-step test) and when it began (ticks).
static CURRENT_STEP: AtomicU64 = AtomicU64::new(0);
static STEP_BEGIN_TICKS: AtomicU64 = AtomicU64::new(0);
/// Dump-signal toggles requested (by the signal handler) and served (by the writer thread).
static TOGGLES_REQUESTED: AtomicU32 = AtomicU32::new(0);
static TOGGLES_SERVED: AtomicU32 = AtomicU32::new(0);
/// Dump requests: sequence numbers requested, picked up and committed; the latest reason.
static DUMPS_REQUESTED: AtomicU64 = AtomicU64::new(0);
static DUMPS_TAKEN: AtomicU64 = AtomicU64::new(0);
static DUMPS_DONE: AtomicU64 = AtomicU64::new(0);
static DUMP_REASON: AtomicU8 = AtomicU8::new(Reason::Request as u8);
static DUMP_NAME: AtomicU32 = AtomicU32::new(0);
/// Interned reason names, by [`Reason`] code.
static REASON_IDS: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];
/// What the writer thread last published: events written into the ring, events dropped.
static RING_EVENTS: AtomicU64 = AtomicU64::new(0);
static RING_DROPPED: AtomicU64 = AtomicU64::new(0);
/// The writer thread's tid (a fatal-signal handler on that thread must not wait for it).
static WRITER_TID: AtomicU32 = AtomicU32::new(0);
/// Turns CUPTI activity on/off at window edges (registered once by the CUPTI module).
static ACTIVITY_SWITCH: OnceLock<fn(bool)> = OnceLock::new();

fn mode() -> Mode {
    match MODE.load(Ordering::Relaxed) {
        1 => Mode::Steps,
        2 => Mode::Sample,
        3 => Mode::Flight,
        4 => Mode::Metrics,
        _ => Mode::Full,
    }
}

fn mode_code(m: Mode) -> u8 {
    match m {
        Mode::Full => 0,
        Mode::Steps => 1,
        Mode::Sample => 2,
        Mode::Flight => 3,
        Mode::Metrics => 4,
    }
}

/// Whether the window is open when tprof becomes enabled (read by `lifecycle` at initialisation).
pub fn window_open_at_start() -> bool {
    matches!(config().mode, Mode::Full | Mode::Flight | Mode::Sample)
}

/// Called by `lifecycle` once tprof is enabled in this process (also in a fork child that
/// re-initialises): sets up the mode's schedule and the window's first state. The services that
/// drive the window (control socket, SIGUSR2, metrics) are started by `lifecycle` after it.
pub fn on_enabled() {
    let pid = std::process::id();
    let previous = OWNER_PID.swap(pid, Ordering::AcqRel);
    if previous != 0 && previous != pid {
        // A fork child: the parent's edge flag, manual window and requests are not ours.
        EDGE.store(false, Ordering::Release);
        MANUAL.store(MANUAL_NONE, Ordering::Release);
        WINDOWS_OPENED.store(0, Ordering::Relaxed);
        DUMPS_TAKEN.store(DUMPS_REQUESTED.load(Ordering::Acquire), Ordering::Release);
        DUMPS_DONE.store(DUMPS_REQUESTED.load(Ordering::Acquire), Ordering::Release);
        TOGGLES_SERVED.store(TOGGLES_REQUESTED.load(Ordering::Acquire), Ordering::Release);
        WRITER_TID.store(0, Ordering::Release);
        call_counters::reset_after_fork();
        tallies::reset_after_fork();
    }
    let cfg = config();
    MODE.store(mode_code(cfg.mode), Ordering::Release);
    TRACK_STEPS.store(matches!(cfg.mode, Mode::Steps | Mode::Metrics) || cfg.metrics_file.is_some(), Ordering::Release);
    for (reason, name) in REASONS {
        REASON_IDS[reason as usize].store(interning::intern(name).0, Ordering::Relaxed);
    }
    let open = switch::is_recording();
    OPEN.store(open, Ordering::Release);
    EVER_CLOSED.store(!open, Ordering::Relaxed);
    OPENED_TICKS.store(0, Ordering::Relaxed);
    SAMPLE_T0_NS.store(ticks::monotonic_ns(), Ordering::Release);
    SAMPLE_WANTS_OPEN.store(open, Ordering::Release);
    if open && !matches!(cfg.mode, Mode::Full | Mode::Flight) {
        WINDOWS_OPENED.fetch_add(1, Ordering::Relaxed);
        emit_marker(MarkerKind::CaptureStart, Reason::Start, StrId::NONE);
    }
    notify_activity(open);
}

/// True while step ranges matter although the window may be closed (steps mode, metrics): NVTX then
/// reports every step begin / end here. One relaxed load.
#[inline]
pub fn tracks_steps() -> bool {
    TRACK_STEPS.load(Ordering::Relaxed)
}

/// Registers the CUPTI activity switch (the first registration wins): called with `false` when a window closes and `true` when one
/// opens (and once now with the current state). In metrics mode it is never turned off: the kernel
/// tally needs CUPTI's kernel records.
pub fn register_activity_switch(f: fn(bool)) {
    let _ = ACTIVITY_SWITCH.set(f);
    if switch::state() == switch::ENABLED {
        notify_activity(switch::is_recording());
    }
}

fn notify_activity(open: bool) {
    if !open && mode() == Mode::Metrics {
        return;
    }
    if let Some(f) = ACTIVITY_SWITCH.get() {
        f(open);
    }
}

fn reason_id(r: Reason) -> StrId {
    StrId(REASON_IDS[r as usize].load(Ordering::Relaxed))
}

fn emit_marker(kind: MarkerKind, reason: Reason, name: StrId) {
    let name = if name == StrId::NONE { reason_id(reason) } else { name };
    recorder::emit(Record::Marker { kind, ts: ticks::now(), value: reason as u64, name });
}

/// Applies one edge (open or close) unless the window is already in that state. Returns true when
/// this call changed it.
fn set_window(open: bool, reason: Reason) -> bool {
    if switch::state() != switch::ENABLED {
        return false;
    }
    while EDGE.compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
        std::hint::spin_loop();
    }
    let changed = OPEN.load(Ordering::Acquire) != open;
    if changed {
        if open {
            OPENED_TICKS.store(ticks::now(), Ordering::Relaxed);
            emit_marker(MarkerKind::CaptureStart, reason, StrId::NONE);
            switch::set_recording(true);
            WINDOWS_OPENED.fetch_add(1, Ordering::Relaxed);
        } else {
            switch::set_recording(false);
            EVER_CLOSED.store(true, Ordering::Relaxed);
            emit_marker(MarkerKind::CaptureStop, reason, StrId::NONE);
        }
        OPEN.store(open, Ordering::Release);
        notify_activity(open);
    }
    EDGE.store(false, Ordering::Release);
    changed
}

// ------------------------------------------------------------------ on-demand windows

/// Opens a manual window now (`tprof ctl start`, SIGUSR2). Returns false when it was already open (the
/// new end condition still applies).
pub fn start_manual(until: Until, reason: Reason) -> bool {
    match until {
        Until::Stopped => MANUAL.store(MANUAL_OPEN, Ordering::Release),
        Until::Elapsed(d) => {
            let deadline = ticks::monotonic_ns().saturating_add(d.as_nanos().min(u64::MAX as u128) as u64);
            MANUAL_DEADLINE_NS.store(deadline, Ordering::Release);
            MANUAL.store(MANUAL_DEADLINE, Ordering::Release);
        }
        Until::Steps(n) => {
            MANUAL_STEPS_LEFT.store(n.max(1), Ordering::Release);
            MANUAL.store(MANUAL_STEPS, Ordering::Release);
        }
    }
    set_window(true, reason)
}

/// Closes the window now (`tprof ctl stop`, SIGUSR2); the mode's schedule resumes at its next edge.
pub fn stop_manual(reason: Reason) -> bool {
    MANUAL.store(MANUAL_NONE, Ordering::Release);
    set_window(false, reason)
}

/// The manual window's end condition, for `status`.
pub fn manual_state() -> String {
    match MANUAL.load(Ordering::Acquire) {
        MANUAL_OPEN => "until-stop".into(),
        MANUAL_DEADLINE => {
            let left = MANUAL_DEADLINE_NS.load(Ordering::Acquire).saturating_sub(ticks::monotonic_ns());
            format!("{}ms-left", left / 1_000_000)
        }
        MANUAL_STEPS => format!("{}-steps-left", MANUAL_STEPS_LEFT.load(Ordering::Acquire)),
        _ => "none".into(),
    }
}

/// Asks for a dump-signal toggle (async-signal-safe: one atomic add); the writer thread serves it.
pub fn request_toggle_from_signal() {
    TOGGLES_REQUESTED.fetch_add(1, Ordering::AcqRel);
}

// ------------------------------------------------------------------ steps

fn note_step_begin(n: u64, ts: u64) {
    CURRENT_STEP.store(n, Ordering::Relaxed);
    STEP_BEGIN_TICKS.store(ts, Ordering::Relaxed);
}

/// NVTX: a step range began while the window was closed (only called when [`tracks_steps`]). Returns
/// true when this opened the window: the caller then records the range and its StepBegin.
pub fn step_begin_closed(n: u64, ts: u64) -> bool {
    note_step_begin(n, ts);
    if mode() == Mode::Steps && MANUAL.load(Ordering::Acquire) == MANUAL_NONE && config().steps.contains(n) {
        set_window(true, Reason::Steps);
        return switch::is_recording();
    }
    false
}

/// NVTX: a step began and its StepBegin marker was recorded.
pub fn step_began(n: u64, ts: u64) {
    note_step_begin(n, ts);
}

/// NVTX: a step ended (after its StepEnd marker, when recorded). May close the window: steps mode
/// after the last step of a window, or a manual `--steps N` window after N steps.
pub fn step_ended(ts: u64) {
    let begin = STEP_BEGIN_TICKS.swap(0, Ordering::Relaxed);
    if begin != 0 && ts > begin {
        tallies::note_step(ts - begin);
    }
    if MANUAL.load(Ordering::Acquire) == MANUAL_STEPS {
        if MANUAL_STEPS_LEFT.fetch_sub(1, Ordering::AcqRel) <= 1 {
            MANUAL.store(MANUAL_NONE, Ordering::Release);
            set_window(false, Reason::Control);
        }
        return;
    }
    if mode() == Mode::Steps
        && MANUAL.load(Ordering::Acquire) == MANUAL_NONE
        && OPEN.load(Ordering::Acquire)
        && config().steps.is_last(CURRENT_STEP.load(Ordering::Relaxed))
    {
        set_window(false, Reason::Steps);
    }
}

// ------------------------------------------------------------------ GPU records

/// CUPTI parser: whether a converted record goes into the ring. GPU work (kernel, copy, memset)
/// launched by a recorded call (shim correlation id) is kept even when it completes after the window
/// closed; other records only while the window is open. What is not kept is counted.
/// `interposers_bound`: the runtime interposers see the program's calls (decided by CUPTI's start).
#[inline]
pub fn keep_gpu_record(rec: &Record, interposers_bound: bool) -> bool {
    let keep = match *rec {
        Record::Kernel { correlation, .. }
        | Record::Memcpy { correlation, .. }
        | Record::Memset { correlation, .. } => {
            if correlation::is_shim_id(correlation) {
                switch::state() == switch::ENABLED
            } else {
                // CUPTI's own id: a call the interposers did not record. Once a window has closed, with
                // the interposers bound that means work launched outside a window (parsed late): drop.
                switch::is_recording()
                    && !(EVER_CLOSED.load(Ordering::Relaxed) && interposers_bound)
                    && in_current_window(rec)
            }
        }
        _ => switch::is_recording() && in_current_window(rec),
    };
    if !keep {
        tallies::observe_unrecorded(rec);
    }
    keep
}

/// Whether a record delivered late (by CUPTI) happened after the current window opened.
fn in_current_window(rec: &Record) -> bool {
    match rec.timestamp() {
        Some(ts) if ts != 0 => ts >= OPENED_TICKS.load(Ordering::Relaxed),
        _ => true,
    }
}

// ------------------------------------------------------------------ dumps

fn request_dump(reason: Reason, name: StrId) -> u64 {
    DUMP_NAME.store(name.0, Ordering::Release);
    DUMP_REASON.store(reason as u8, Ordering::Release);
    DUMPS_REQUESTED.fetch_add(1, Ordering::AcqRel) + 1
}

/// Requests a dump for `reason` (`tprof ctl dump`, a fatal signal) with atomics only (so also from a
/// signal handler); returns its sequence number, committed once [`dumps_done`] reaches it.
pub fn request_dump_for(reason: Reason) -> u64 {
    request_dump(reason, StrId::NONE)
}

/// Highest dump sequence number committed so far.
pub fn dumps_done() -> u64 {
    DUMPS_DONE.load(Ordering::Acquire)
}

/// The writer thread's tid, once it ran a tick (0 before).
pub fn writer_tid() -> u32 {
    WRITER_TID.load(Ordering::Acquire)
}

// ------------------------------------------------------------------ writer-thread side

/// What the writer thread must do after [`take_dump_request`].
#[derive(Debug, Default, Clone, Copy)]
pub struct TickActions {
    /// Commit at the end of this iteration (a dump was requested).
    pub commit_now: bool,
    /// Dump sequence number to acknowledge with [`dump_committed`] after that commit (0 = none).
    pub dump_seq: u64,
}

/// Called by the writer thread at the top of every iteration (before it drains): applies the timed
/// edges (sample duty cycle, `--duration` windows, SIGUSR2 toggles). `events` / `dropped`: the ring's
/// counts, published for `tprof ctl status`. Returns the CLOCK_MONOTONIC time it used.
pub fn writer_tick(events: u64, dropped: u64) -> u64 {
    RING_EVENTS.store(events, Ordering::Relaxed);
    RING_DROPPED.store(dropped, Ordering::Relaxed);
    if WRITER_TID.load(Ordering::Relaxed) == 0 {
        WRITER_TID.store(crate::record::thread::tid(), Ordering::Release);
    }
    let now = ticks::monotonic_ns();
    if MANUAL.load(Ordering::Acquire) == MANUAL_DEADLINE && now >= MANUAL_DEADLINE_NS.load(Ordering::Acquire) {
        MANUAL.store(MANUAL_NONE, Ordering::Release);
        set_window(false, Reason::Control);
    }
    let toggles = TOGGLES_REQUESTED.load(Ordering::Acquire);
    if toggles != TOGGLES_SERVED.swap(toggles, Ordering::AcqRel) {
        if mode() == Mode::Flight {
            request_dump(Reason::Signal, StrId::NONE);
        } else if OPEN.load(Ordering::Acquire) {
            stop_manual(Reason::Signal);
        } else {
            start_manual(Until::Stopped, Reason::Signal);
        }
    }
    if mode() == Mode::Sample {
        let elapsed = now.saturating_sub(SAMPLE_T0_NS.load(Ordering::Acquire));
        let want = config().sample.open_at(elapsed);
        if want != SAMPLE_WANTS_OPEN.swap(want, Ordering::AcqRel) && MANUAL.load(Ordering::Acquire) == MANUAL_NONE {
            set_window(want, Reason::Sample);
        }
    }
    now
}

/// Called by the writer thread after [`writer_tick`]: turns dump requests into a `FlightDump` marker
/// plus a commit.
pub fn take_dump_request() -> TickActions {
    let mut actions = TickActions::default();
    let requested = DUMPS_REQUESTED.load(Ordering::Acquire);
    if requested != DUMPS_TAKEN.swap(requested, Ordering::AcqRel) {
        let reason = Reason::from_u8(DUMP_REASON.load(Ordering::Acquire));
        let name = StrId(DUMP_NAME.swap(0, Ordering::AcqRel));
        emit_marker(MarkerKind::FlightDump, reason, name);
        actions = TickActions { commit_now: true, dump_seq: requested };
    }
    actions
}

/// The writer committed (and started writing out) everything up to dump `seq`.
pub fn dump_committed(seq: u64) {
    DUMPS_DONE.fetch_max(seq, Ordering::AcqRel);
}

/// The writer thread is stopping (exit): the final `FlightDump` (flight mode) or `CaptureStop`. Runs
/// before the final drain.
pub fn writer_stopping() {
    match mode() {
        Mode::Flight => emit_marker(MarkerKind::FlightDump, Reason::Exit, StrId::NONE),
        Mode::Full => {}
        _ => {
            if OPEN.swap(false, Ordering::AcqRel) {
                emit_marker(MarkerKind::CaptureStop, Reason::Exit, StrId::NONE);
            }
        }
    }
}

/// Facts for `tprof ctl status`.
pub struct Status {
    pub mode: Mode,
    pub open: bool,
    pub manual: String,
    pub windows: u64,
    pub events: u64,
    pub dropped: u64,
}

pub fn status() -> Status {
    Status {
        mode: mode(),
        open: switch::is_recording(),
        manual: manual_state(),
        windows: WINDOWS_OPENED.load(Ordering::Relaxed),
        events: RING_EVENTS.load(Ordering::Relaxed),
        dropped: RING_DROPPED.load(Ordering::Relaxed).max(recorder::total_dropped()),
    }
}
