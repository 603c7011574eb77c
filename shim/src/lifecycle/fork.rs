//! Fork handling. tprof holds no lock across `fork` (its only lock, the string-insert spin lock, is
//! force-released in the child). The child starts a new recorder generation and, unless
//! `TPROF_FOLLOW_FORK=0`, records into its own ring file from its next CUDA call.

use std::sync::Once;

use crate::base::config::config;
use crate::base::panic_fence::ffi_guard;
use crate::base::switch;
use crate::record::{interning, recorder, thread};
use crate::service::writer_thread;

static INSTALL: Once = Once::new();

extern "C" fn child_after_fork() {
    ffi_guard((), || {
        thread::reset_after_fork();
        interning::reset_after_fork();
        recorder::reset_after_fork();
        writer_thread::reset_after_fork();
        // The child re-initialises with its own ring on its next event, or stays off.
        switch::reset_in_fork_child(config().follow_fork);
    })
}

/// Installs the fork handlers (once per process; inherited by children).
pub fn install() {
    INSTALL.call_once(|| {
        // SAFETY: registers a handler that only touches atomics and thread-locals of this library.
        unsafe { libc::pthread_atfork(None, None, Some(child_after_fork)) };
    });
}
