//! Signal handlers (FFI: `sigaction`): SIGUSR2 for on-demand control, fatal signals for the flight
//! recorder.
//!
//! - SIGUSR2 toggles the capture window (flight mode: dumps). Installed only when the signal still has
//!   its default disposition: an application's own handler (or SIG_IGN) is never replaced; then
//!   `tprof ctl` is the way in, and one informational line says so.
//! - Fatal signals (flight mode): SIGSEGV, SIGBUS, SIGABRT, SIGFPE. The handler does only
//!   async-signal-safe work: atomic stores to request a dump, `clock_gettime` / `nanosleep` to wait at
//!   most [`FATAL_WAIT_MS`] for the writer thread to serve it, `sigaction` to put the previous handler
//!   back, and `raise` (for signals that were sent rather than caused by the faulting instruction,
//!   which simply faults again on return). The previous handler or the default action (core dump)
//!   then runs as if tprof were not there.
//!
//! What is guaranteed on a fatal signal: everything committed before it (the writer commits at least
//! every `TPROF_COMMIT_MS`, 100 ms) is in the file whatever happens next. When the writer thread is
//! alive and is not the crashing thread, the events already in the thread buffers at the signal, and a
//! `FlightDump` marker (value 7, "fatal signal"), are committed too. If the writer is wedged (the
//! crash corrupted it), the handler gives up after the wait and the last <= 100 ms are lost.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use libc::{c_int, c_void, siginfo_t};

use crate::capture::{self, Reason};

use super::writer_thread;

/// Longest time a fatal-signal handler waits for the writer thread's commit.
pub const FATAL_WAIT_MS: u64 = 500;

const FATAL: [c_int; 4] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT, libc::SIGFPE];

/// The dispositions in place before ours, one per fatal signal (written once, before our handler can
/// run; read only by the handler).
struct Saved {
    actions: [UnsafeCell<MaybeUninit<libc::sigaction>>; 4],
    valid: [AtomicBool; 4],
}

// SAFETY: each slot is written once by `install_fatal_handlers` (under a `Once`) before the matching
// handler is installed, and `valid` (Release/Acquire) orders that write before any read in the handler.
unsafe impl Sync for Saved {}

static SAVED: Saved = Saved {
    actions: [const { UnsafeCell::new(MaybeUninit::uninit()) }; 4],
    valid: [const { AtomicBool::new(false) }; 4],
};
static FATAL_ONCE: Once = Once::new();
static IN_FATAL: AtomicBool = AtomicBool::new(false);

/// Outcome of trying to take SIGUSR2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sigusr2 {
    /// Our handler is installed.
    Installed,
    /// The application has its own handler (or ignores it): left alone.
    ApplicationOwns,
    /// `sigaction` failed.
    Failed,
}

fn empty_action() -> libc::sigaction {
    // SAFETY: `sigaction` is a plain C struct for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

extern "C" fn on_sigusr2(_sig: c_int) {
    capture::request_toggle_from_signal();
}

/// Installs the SIGUSR2 toggle unless the signal already has a handler. Idempotent (a fork child
/// inherits the handler and sees it as ours).
pub fn install_toggle() -> Sigusr2 {
    let mut old = empty_action();
    // SAFETY: queries the current disposition into our struct; a NULL new action changes nothing.
    if unsafe { libc::sigaction(libc::SIGUSR2, std::ptr::null(), &mut old) } != 0 {
        return Sigusr2::Failed;
    }
    let ours = on_sigusr2 as extern "C" fn(c_int) as usize;
    if old.sa_sigaction == ours {
        return Sigusr2::Installed;
    }
    if old.sa_sigaction != libc::SIG_DFL {
        return Sigusr2::ApplicationOwns;
    }
    let mut act = empty_action();
    act.sa_sigaction = ours;
    act.sa_flags = libc::SA_RESTART;
    // SAFETY: `act.sa_mask` is ours to initialise; the handler only performs one atomic add.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: installs a valid handler for SIGUSR2; `old` is not needed (it was SIG_DFL).
    if unsafe { libc::sigaction(libc::SIGUSR2, &act, std::ptr::null_mut()) } != 0 {
        return Sigusr2::Failed;
    }
    Sigusr2::Installed
}

/// Installs the fatal-signal handlers (once per process; a fork child inherits them).
pub fn install_fatal_handlers() {
    FATAL_ONCE.call_once(|| {
        for (i, &sig) in FATAL.iter().enumerate() {
            let mut act = empty_action();
            act.sa_sigaction = on_fatal as extern "C" fn(c_int, *mut siginfo_t, *mut c_void) as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            // SAFETY: initialises the mask of our own struct.
            unsafe { libc::sigemptyset(&mut act.sa_mask) };
            let slot = SAVED.actions[i].get();
            // SAFETY: `slot` is this signal's save slot, written only here (under the Once) and read by
            // the handler only after `valid[i]` is set below; sigaction fills it with the old action.
            let rc = unsafe { libc::sigaction(sig, &act, (*slot).as_mut_ptr()) };
            if rc == 0 {
                SAVED.valid[i].store(true, Ordering::Release);
            }
        }
    });
}

fn monotonic_ms() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime is async-signal-safe and writes into our timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1000).wrapping_add(ts.tv_nsec as u64 / 1_000_000)
}

/// Requests a dump and waits (bounded) for the writer to commit it. Async-signal-safe.
fn dump_for_fatal_signal() {
    if !writer_thread::running() {
        return;
    }
    // SAFETY: the gettid system call has no preconditions and is async-signal-safe.
    let me = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
    if me == capture::writer_tid() {
        return;
    }
    let seq = capture::request_dump_for(Reason::Fatal);
    let deadline = monotonic_ms().saturating_add(FATAL_WAIT_MS);
    while capture::dumps_done() < seq && monotonic_ms() < deadline {
        let pause = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        // SAFETY: nanosleep is async-signal-safe; a NULL remainder is allowed.
        unsafe { libc::nanosleep(&pause, std::ptr::null_mut()) };
    }
}

/// The handlers run behind no panic fence: the fence's panic path allocates, which a signal handler
/// must not. They are written so that they cannot panic (no indexing, no unwrapping, no arithmetic
/// that can overflow, nothing but atomics and async-signal-safe system calls).
extern "C" fn on_fatal(sig: c_int, info: *mut siginfo_t, _ctx: *mut c_void) {
    if !IN_FATAL.swap(true, Ordering::AcqRel) {
        dump_for_fatal_signal();
    }
    let Some(i) = FATAL.iter().position(|&s| s == sig) else { return };
    let (Some(valid), Some(action)) = (SAVED.valid.get(i), SAVED.actions.get(i)) else { return };
    let previous = if valid.load(Ordering::Acquire) {
        // SAFETY: `valid` says the slot was filled by sigaction before this handler was installed.
        unsafe { (*action.get()).as_ptr() }
    } else {
        std::ptr::null()
    };
    let mut dfl = empty_action();
    dfl.sa_sigaction = libc::SIG_DFL;
    let restore: *const libc::sigaction = if previous.is_null() { &dfl } else { previous };
    // SAFETY: puts back the previous disposition (or the default) for this signal; async-signal-safe.
    unsafe { libc::sigaction(sig, restore, std::ptr::null_mut()) };
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler (checked for NULL anyway).
    let sent = info.is_null() || unsafe { (*info).si_code } <= 0;
    if sent || sig == libc::SIGABRT {
        // Sent with kill/raise/abort: deliver it again to the restored disposition once we return (the
        // signal is blocked while this handler runs). A fault re-executes the instruction instead.
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(sig) };
    }
}
