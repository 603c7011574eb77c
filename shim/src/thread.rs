//! Per-thread state of the hot path, in ONE thread-local so an intercepted call pays for one TLS
//! lookup (`__tls_get_addr` in a shared library) instead of one per module.

use std::cell::Cell;

/// Everything tprof keeps per thread on the hot path. No destructor: it stays readable while other
/// thread-local destructors run (CUDA called from a thread destructor).
pub struct ThreadCtx {
    /// Kernel thread id (0 until first asked).
    pub tid: Cell<u32>,
    /// Inside tprof (reentrancy flag, see `guard`).
    pub inside: Cell<bool>,
    /// Correlation id block: next id, end of block (see `correlation`).
    pub corr_next: Cell<u32>,
    pub corr_end: Cell<u32>,
    /// The thread's recorder buffer and the fork generation it belongs to (see `recorder`).
    pub buffer: Cell<*const crate::recorder::ThreadBuffer>,
    pub buffer_generation: Cell<u64>,
}

thread_local! {
    static CTX: ThreadCtx = const {
        ThreadCtx {
            tid: Cell::new(0),
            inside: Cell::new(false),
            corr_next: Cell::new(0),
            corr_end: Cell::new(0),
            buffer: Cell::new(std::ptr::null()),
            buffer_generation: Cell::new(0),
        }
    };
}

/// Runs `f` with the calling thread's context.
#[inline(always)]
pub fn with_ctx<R>(f: impl FnOnce(&ThreadCtx) -> R) -> R {
    CTX.with(f)
}

/// The kernel thread id (gettid) of the calling thread. One syscall per thread, then a TLS read.
#[inline]
pub fn tid() -> u32 {
    with_ctx(|c| {
        let v = c.tid.get();
        if v != 0 {
            return v;
        }
        // SAFETY: gettid has no preconditions and cannot fail.
        let id = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        c.tid.set(id);
        id
    })
}

/// Forgets the cached id (the fork child's thread has a new one).
pub fn reset_after_fork() {
    with_ctx(|c| c.tid.set(0));
}
