//! Per-thread state of the hot path, in ONE thread-local so an intercepted call pays for one TLS
//! lookup (`__tls_get_addr` in a shared library) instead of one per module: an interposer takes
//! [`ctx`] once and hands the reference to every step of the call.

use std::cell::Cell;

/// Everything tprof keeps per thread on the hot path. No destructor: it stays readable while other
/// thread-local destructors run (CUDA called from a thread destructor).
pub struct ThreadCtx {
    /// Kernel thread id (0 until first asked).
    pub tid: Cell<u32>,
    /// Inside tprof (reentrancy flag, see `reentrancy`).
    pub inside: Cell<bool>,
    /// Correlation id block: next id, end of block (see `correlation`).
    pub corr_next: Cell<u32>,
    pub corr_end: Cell<u32>,
    /// The thread's recorder buffer and the fork generation it belongs to (see `recorder`).
    pub buffer: Cell<*const crate::record::recorder::ThreadBuffer>,
    pub buffer_generation: Cell<u64>,
    /// The thread's call-counter block (see `call_counters`; null until the first call, and after exit).
    pub counters: Cell<*const crate::record::call_counters::CallCounters>,
    /// The device made current through `cudaSetDevice` (CUDA's default: 0).
    pub device: Cell<u32>,
    /// The completion poll this thread repeats, and the repeats not yet written (see `recorder`).
    pub repeat: crate::record::recorder::RepeatRun,
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
            counters: Cell::new(std::ptr::null()),
            device: Cell::new(0),
            repeat: crate::record::recorder::RepeatRun::new(),
        }
    };
}

/// The calling thread's context, for the whole of an intercepted call: one TLS lookup.
///
/// The reference cannot leave the thread (`ThreadCtx` is not `Sync`, so `&ThreadCtx` is not `Send`).
#[inline(always)]
pub fn ctx() -> &'static ThreadCtx {
    // SAFETY: the thread-local has a const initialiser and no destructor, so its storage is valid and
    // initialised for the whole life of the thread, destructors included; the reference is not `Send`,
    // so it is only ever used on this thread, while the thread (and thus the storage) exists.
    CTX.with(|c| unsafe { &*(c as *const ThreadCtx) })
}

/// Runs `f` with the calling thread's context.
#[inline(always)]
pub fn with_ctx<R>(f: impl FnOnce(&ThreadCtx) -> R) -> R {
    f(ctx())
}

impl ThreadCtx {
    /// The kernel thread id (gettid) of this thread. One syscall per thread, then a field read.
    #[inline]
    pub fn tid(&self) -> u32 {
        let v = self.tid.get();
        if v != 0 {
            return v;
        }
        self.fetch_tid()
    }

    #[cold]
    fn fetch_tid(&self) -> u32 {
        // SAFETY: gettid has no preconditions and cannot fail.
        let id = unsafe { libc::syscall(libc::SYS_gettid) } as u32;
        self.tid.set(id);
        id
    }
}

/// The kernel thread id (gettid) of the calling thread. One syscall per thread, then a TLS read.
#[inline]
pub fn tid() -> u32 {
    ctx().tid()
}

/// Forgets the cached id (the fork child's thread has a new one).
pub fn reset_after_fork() {
    ctx().tid.set(0);
}
