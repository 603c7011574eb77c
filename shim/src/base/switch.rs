//! The on/off switch: tprof's state (uninitialised -> initialising -> enabled / disabled /
//! permanently disabled, advanced by compare-exchange) and the capture window's recording flag.
//! Read on every intercepted call (one relaxed load each); changed by `lifecycle` (initialisation,
//! fork), by `capture` (window edges) and by the panic fence ([`disable_permanently`]).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use super::messages::stderr_line;

pub const UNINIT: u8 = 0;
pub const INITIALISING: u8 = 1;
pub const ENABLED: u8 = 2;
pub const DISABLED: u8 = 3;
pub const PERMANENTLY_DISABLED: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static RECORDING: AtomicBool = AtomicBool::new(false);
static DISABLED_SAID: AtomicBool = AtomicBool::new(false);

/// True when events should be recorded now (enabled and the capture window is open).
#[inline]
pub fn is_recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// True until initialisation has decided (uninitialised or initialising; one relaxed load: the hot
/// path's init test).
#[inline]
pub fn is_undecided() -> bool {
    STATE.load(Ordering::Relaxed) < ENABLED
}

/// Opens or closes the capture window (production modes); no effect unless enabled.
pub fn set_recording(on: bool) {
    RECORDING.store(on && STATE.load(Ordering::Acquire) == ENABLED, Ordering::Release);
}

/// The current state (one of the constants above).
pub fn state() -> u8 {
    STATE.load(Ordering::Acquire)
}

/// Claims the initialisation: true for the one caller that moved the state from uninitialised.
pub fn begin_initialising() -> bool {
    STATE.compare_exchange(UNINIT, INITIALISING, Ordering::AcqRel, Ordering::Acquire).is_ok()
}

/// Ends the initialisation: enabled (the window open or not) or disabled.
pub fn finish_initialising(enabled: bool, window_open: bool) {
    if enabled {
        // The window first: a thread that waited for the decision sees it with the state.
        RECORDING.store(window_open, Ordering::Release);
        STATE.store(ENABLED, Ordering::Release);
    } else {
        STATE.store(DISABLED, Ordering::Release);
    }
}

/// Turns tprof off for good with one stderr line; the host program continues.
pub fn disable_permanently(reason: &str) {
    STATE.store(PERMANENTLY_DISABLED, Ordering::Release);
    RECORDING.store(false, Ordering::Release);
    if !DISABLED_SAID.swap(true, Ordering::AcqRel) {
        stderr_line(&format!("tprof: disabled: {reason}; the program continues without profiling"));
    }
}

/// In a fork child: nothing is recorded until the child re-initialises (`follow_fork`) or ever.
pub fn reset_in_fork_child(follow_fork: bool) {
    RECORDING.store(false, Ordering::Release);
    let s = STATE.load(Ordering::Acquire);
    if s == ENABLED || s == INITIALISING {
        STATE.store(if follow_fork { UNINIT } else { DISABLED }, Ordering::Release);
    }
}

/// After the ring was closed for an `exec` that failed: enabled goes back to uninitialised, so the
/// next event initialises again into a new ring file.
pub fn reset_after_closed_ring() {
    RECORDING.store(false, Ordering::Release);
    let _ = STATE.compare_exchange(ENABLED, UNINIT, Ordering::AcqRel, Ordering::Acquire);
}

/// Test support: back to a clean enabled-able state after a deliberate panic test.
#[cfg(test)]
pub fn reset_for_tests() {
    if STATE.load(Ordering::Acquire) == PERMANENTLY_DISABLED {
        STATE.store(UNINIT, Ordering::Release);
        DISABLED_SAID.store(false, Ordering::Release);
    }
}
