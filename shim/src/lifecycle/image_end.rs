//! The ends of a process image that run no exit handler: `_exit` / `_Exit` (fork children,
//! Python's `os._exit` and `multiprocessing` workers) and `exec` (the image is replaced). The
//! interposers (`intercept/process_image.rs`) call these before the real call: the ring is
//! drained, committed and closed as at exit. An `exec` that fails returns: tprof then records on
//! into a new ring file from the next event, as a fork child does.

use crate::base::panic_fence::ffi_guard;
use crate::base::switch;

use super::{close_ring, EXIT_WAIT};

/// Before the real `_exit`: close the ring (bounded wait).
pub fn before_exit() {
    ffi_guard((), || {
        close_ring(EXIT_WAIT);
    })
}

/// Before the real `exec*`: close the ring (bounded wait). Returns whether a ring was closed, for
/// [`after_failed_exec`].
pub fn before_exec() -> bool {
    ffi_guard(false, || close_ring(EXIT_WAIT))
}

/// The `exec` returned (it failed): the next event initialises tprof again, into a new ring file.
pub fn after_failed_exec(ring_closed: bool) {
    if ring_closed {
        switch::reset_after_closed_ring();
    }
}

/// Before an `exec` whose return tprof cannot see (the variadic `execl*`, entered by a tail jump):
/// close the ring and go back to uninitialised at once, so that after a failed `exec` the next
/// event opens a new ring (a thread calling CUDA while the `exec` succeeds opens one that the new
/// image abandons).
pub fn before_exec_unseen_return() {
    ffi_guard((), || {
        if close_ring(EXIT_WAIT) {
            switch::reset_after_closed_ring();
        }
    })
}
