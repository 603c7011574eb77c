//! The calling thread's kernel thread id, cached per thread.

use std::cell::Cell;

thread_local! {
    static TID: Cell<u32> = const { Cell::new(0) };
}

/// The kernel thread id (gettid) of the calling thread. One syscall per thread, then a TLS read.
#[inline]
pub fn tid() -> u32 {
    TID.with(|t| {
        let v = t.get();
        if v != 0 {
            return v;
        }
        // SAFETY: gettid has no preconditions and cannot fail.
        let id = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        t.set(id);
        id
    })
}

/// Forgets the cached id (the fork child's thread has a new one).
pub fn reset_after_fork() {
    TID.with(|t| t.set(0));
}
