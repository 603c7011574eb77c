//! Signal handlers (FFI: `sigaction`): the opt-in dump signal, and fatal and termination signals that
//! remove the control socket (and, in flight mode, commit the flight recorder) before the program's
//! own disposition runs. None of them changes what a signal does to the program.
//!
//! - The dump signal (`TPROF_DUMP_SIGNAL=USR1|USR2`, default off) toggles the capture window (flight
//!   mode: dumps). The disposition it finds is kept: a handler the program installed before is called
//!   after ours (with its `SA_SIGINFO` calling convention), `SIG_IGN` stays ignored, and the default
//!   action (ending the program) is what the opt-in replaces. A handler the program installs later
//!   replaces ours: theirs wins, and `tprof ctl` remains the way in.
//! - Fatal signals: SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL, installed in every mode, each chaining to
//!   the disposition it found. Termination signals: SIGTERM, SIGINT, SIGHUP, SIGQUIT, taken only where
//!   they have the default disposition (a program's own handler, or SIG_IGN, is left alone).
//! - The handler does only async-signal-safe work: `unlink` of the socket; in flight mode atomic
//!   stores to request a dump, `clock_gettime` / `nanosleep` to wait at most [`FATAL_WAIT_MS`] for
//!   the writer thread to serve it; `sigaction` to put the previous disposition back, and `raise` (for
//!   signals that were sent rather than caused by the faulting instruction, which simply faults again
//!   on return). The previous handler or the default action (termination, core dump) then runs as if
//!   tprof were not there: exit status and core dumps are the program's.
//!
//! What is guaranteed on a fatal signal in flight mode: everything committed before it (the writer
//! commits at least every `TPROF_COMMIT_MS`, 100 ms) is in the file whatever happens next. When the
//! writer thread is alive and is not the crashing thread, the events already in the thread buffers at
//! the signal, and a `FlightDump` marker (value 7, "fatal signal"), are committed too. If the writer is
//! wedged (the crash corrupted it), the handler gives up after the wait and the last <= 100 ms are lost.

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;

use libc::{c_int, c_void, siginfo_t};
use tprof_format::settings::DumpSignal;

use crate::capture::{self, Reason};

use super::{control_socket, writer_thread};

/// Longest time a fatal-signal handler waits for the writer thread's commit.
pub const FATAL_WAIT_MS: u64 = 500;

/// Signals raised by a faulting instruction (or `abort`): always handled, chained.
const FATAL: [c_int; 5] = [libc::SIGSEGV, libc::SIGBUS, libc::SIGABRT, libc::SIGFPE, libc::SIGILL];
/// Signals that end the program by default: handled only while they have the default disposition.
const TERMINATING: [c_int; 4] = [libc::SIGTERM, libc::SIGINT, libc::SIGHUP, libc::SIGQUIT];
/// Every signal with a save slot: the fatal ones, the terminating ones, the two dump signals.
const SLOTS: usize = 11;
const SIGNALS: [c_int; SLOTS] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGABRT,
    libc::SIGFPE,
    libc::SIGILL,
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The dispositions in place before ours, one per signal (written once, before our handler can run;
/// read only by the handler).
struct Saved {
    actions: [UnsafeCell<MaybeUninit<libc::sigaction>>; SLOTS],
    valid: [AtomicBool; SLOTS],
}

// SAFETY: each slot is written once by `take` (under a `Once`) before the matching handler is
// installed, and `valid` (Release/Acquire) orders that write before any read in the handler.
unsafe impl Sync for Saved {}

static SAVED: Saved = Saved {
    actions: [const { UnsafeCell::new(MaybeUninit::uninit()) }; SLOTS],
    valid: [const { AtomicBool::new(false) }; SLOTS],
};
static FATAL_ONCE: Once = Once::new();
static DUMP_ONCE: Once = Once::new();
static IN_FATAL: AtomicBool = AtomicBool::new(false);
/// Flight mode: fatal and termination signals commit the ring first.
static DUMP_ON_FATAL: AtomicBool = AtomicBool::new(false);

/// Outcome of taking the dump signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpSignalState {
    /// Not asked for (`TPROF_DUMP_SIGNAL` off).
    Off,
    /// Our handler is installed; it calls the program's earlier handler after ours.
    Installed,
    /// `sigaction` failed.
    Failed,
}

fn empty_action() -> libc::sigaction {
    // SAFETY: `sigaction` is a plain C struct for which all-zero bytes are a valid value.
    unsafe { std::mem::zeroed() }
}

fn slot_of(sig: c_int) -> Option<usize> {
    SIGNALS.iter().position(|&s| s == sig)
}

/// The disposition saved for `sig` before ours, if any.
fn previous(sig: c_int) -> Option<*const libc::sigaction> {
    let i = slot_of(sig)?;
    let (valid, action) = (SAVED.valid.get(i)?, SAVED.actions.get(i)?);
    // SAFETY: `valid` says the slot was filled by sigaction before our handler was installed.
    valid.load(Ordering::Acquire).then(|| unsafe { (*action.get()).as_ptr() })
}

/// Installs `handler` for `sig`, saving the disposition it replaces; with `only_default`, only when
/// that is SIG_DFL. Called under a `Once` per signal set. True when ours is installed.
fn take(sig: c_int, handler: usize, flags: c_int, only_default: bool) -> bool {
    let Some(i) = slot_of(sig) else { return false };
    let (Some(valid), Some(slot)) = (SAVED.valid.get(i), SAVED.actions.get(i)) else { return false };
    let mut old = empty_action();
    // SAFETY: queries the current disposition into our struct; a NULL new action changes nothing.
    if unsafe { libc::sigaction(sig, std::ptr::null(), &mut old) } != 0 {
        return false;
    }
    if old.sa_sigaction == handler {
        return true;
    }
    if only_default && old.sa_sigaction != libc::SIG_DFL {
        return false;
    }
    let mut act = empty_action();
    act.sa_sigaction = handler;
    act.sa_flags = flags;
    // SAFETY: initialises the mask of our own struct.
    unsafe { libc::sigemptyset(&mut act.sa_mask) };
    // SAFETY: `slot` is this signal's save slot, written only here (under the caller's Once) and read
    // by the handler only after `valid` is set below; sigaction fills it with the old action.
    let rc = unsafe { libc::sigaction(sig, &act, (*slot.get()).as_mut_ptr()) };
    if rc == 0 {
        valid.store(true, Ordering::Release);
    }
    rc == 0
}

extern "C" fn on_dump_signal(sig: c_int, info: *mut siginfo_t, ctx: *mut c_void) {
    capture::request_toggle_from_signal();
    let Some(prev) = previous(sig) else { return };
    // SAFETY: `prev` points to a saved sigaction (see `previous`), never written again.
    let (handler, flags) = unsafe { ((*prev).sa_sigaction, (*prev).sa_flags) };
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        return;
    }
    if flags & libc::SA_SIGINFO != 0 {
        // SAFETY: with SA_SIGINFO the kernel would have called this address as a three-argument
        // handler; we pass it the arguments the kernel gave us.
        let f: extern "C" fn(c_int, *mut siginfo_t, *mut c_void) = unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: without SA_SIGINFO the address is a one-argument `sa_handler`.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

/// Installs the dump signal of `TPROF_DUMP_SIGNAL` (once per process; a fork child inherits it).
pub fn install_dump_signal(which: DumpSignal) -> DumpSignalState {
    let sig = match which {
        DumpSignal::Off => return DumpSignalState::Off,
        DumpSignal::Usr1 => libc::SIGUSR1,
        DumpSignal::Usr2 => libc::SIGUSR2,
    };
    let mut ok = false;
    DUMP_ONCE.call_once(|| {
        let handler = on_dump_signal as extern "C" fn(c_int, *mut siginfo_t, *mut c_void) as usize;
        ok = take(sig, handler, libc::SA_SIGINFO | libc::SA_RESTART | libc::SA_ONSTACK, false);
    });
    if ok || previous(sig).is_some() {
        DumpSignalState::Installed
    } else {
        DumpSignalState::Failed
    }
}

/// Installs the fatal- and termination-signal handlers (once per process; a fork child inherits
/// them). `flight`: they commit the flight recorder too.
pub fn install_fatal_handlers(flight: bool) {
    DUMP_ON_FATAL.store(flight, Ordering::Release);
    FATAL_ONCE.call_once(|| {
        let handler = on_fatal as extern "C" fn(c_int, *mut siginfo_t, *mut c_void) as usize;
        let flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
        for sig in FATAL {
            take(sig, handler, flags, false);
        }
        for sig in TERMINATING {
            take(sig, handler, flags, true);
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
    control_socket::unlink_from_signal();
    if DUMP_ON_FATAL.load(Ordering::Acquire) && !IN_FATAL.swap(true, Ordering::AcqRel) {
        dump_for_fatal_signal();
    }
    let mut dfl = empty_action();
    dfl.sa_sigaction = libc::SIG_DFL;
    let restore: *const libc::sigaction = previous(sig).unwrap_or(&dfl as *const libc::sigaction);
    // SAFETY: puts back the previous disposition (or the default) for this signal; async-signal-safe.
    unsafe { libc::sigaction(sig, restore, std::ptr::null_mut()) };
    // SAFETY: the kernel passes a valid siginfo to an SA_SIGINFO handler (checked for NULL anyway).
    let sent = info.is_null() || unsafe { (*info).si_code } <= 0;
    let fault = FATAL.contains(&sig) && sig != libc::SIGABRT;
    if sent || !fault {
        // Sent with kill/raise/abort, or a terminal's signal: deliver it again to the restored
        // disposition once we return (the signal is blocked while this handler runs). A fault
        // re-executes the faulting instruction instead.
        // SAFETY: raise is async-signal-safe.
        unsafe { libc::raise(sig) };
    }
}
