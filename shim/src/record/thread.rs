//! Per-thread state of the hot path, in ONE thread-local so an intercepted call pays for one TLS
//! lookup (`__tls_get_addr` in a shared library) instead of one per module: an interposer takes
//! [`ctx`] once and hands the reference to every step of the call.

use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, AtomicU32, Ordering};

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

/// Where `CTX` lies relative to the thread pointer when tprof's thread-local block is in the static
/// TLS area (tprof loaded with the program: `LD_PRELOAD`, `DT_NEEDED`): the same offset in every
/// thread, so [`ctx`] is one `fs`-relative load and an add instead of a call to `__tls_get_addr`
/// (a shared object must be compiled for the general-dynamic model, as it may be `dlopen`ed). 0 while
/// not known to be static (a `dlopen`ed tprof, `CUDA_INJECTION64_PATH`: then each thread's block is
/// allocated apart and `__tls_get_addr` is the only way). Set by [`learn_static_tls`].
static STATIC_OFFSET: AtomicIsize = AtomicIsize::new(0);
/// The first thread's (tid, offset) seen by [`learn_static_tls`] (0 = none yet).
static FIRST_TID: AtomicU32 = AtomicU32::new(0);
static FIRST_OFFSET: AtomicIsize = AtomicIsize::new(0);

/// The calling thread's context, for the whole of an intercepted call: one TLS lookup.
///
/// The reference cannot leave the thread (`ThreadCtx` is not `Sync`, so `&ThreadCtx` is not `Send`).
#[inline(always)]
pub fn ctx() -> &'static ThreadCtx {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let offset = STATIC_OFFSET.load(Ordering::Relaxed);
        if offset != 0 {
            // SAFETY: a non-zero offset was found to be where `CTX` lies from the thread pointer in two
            // different threads ([`learn_static_tls`]): the static TLS layout, fixed for every thread of
            // the process (fork children included), so this is the calling thread's own `CTX`, valid
            // for the thread's whole life as the general path below says.
            return unsafe { &*(thread_pointer().wrapping_add_signed(offset) as *const ThreadCtx) };
        }
    }
    ctx_general()
}

/// The calling thread's context when the short way is known (static TLS), else None: no call.
#[inline(always)]
pub fn ctx_static() -> Option<&'static ThreadCtx> {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let offset = STATIC_OFFSET.load(Ordering::Relaxed);
        if offset != 0 {
            // SAFETY: as in `ctx`.
            return Some(unsafe { &*(thread_pointer().wrapping_add_signed(offset) as *const ThreadCtx) });
        }
    }
    None
}

/// [`ctx`] through the thread-local's own access (`__tls_get_addr`).
#[inline(never)]
fn ctx_general() -> &'static ThreadCtx {
    // SAFETY: the thread-local has a const initialiser and no destructor, so its storage is valid and
    // initialised for the whole life of the thread, destructors included; the reference is not `Send`,
    // so it is only ever used on this thread, while the thread (and thus the storage) exists.
    CTX.with(|c| unsafe { &*(c as *const ThreadCtx) })
}

/// The thread pointer (x86-64 glibc: the TCB's first word points to itself, `%fs:0`).
#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
#[inline(always)]
fn thread_pointer() -> usize {
    let tp: usize;
    // SAFETY: on x86-64 Linux the `fs` base is the thread's TCB, whose first word is its own address
    // (the TLS ABI); reading it has no side effect.
    unsafe {
        std::arch::asm!("mov {}, qword ptr fs:[0]", out(reg) tp, options(nostack, preserves_flags, readonly, pure))
    };
    tp
}

/// Called by two different threads (the one initialising tprof, the writer thread as it starts):
/// when both find `CTX` at the same offset from their thread pointer, tprof's TLS block is in the
/// static TLS area and [`ctx`] takes the short way from now on. Blocks allocated per thread (a
/// `dlopen`ed tprof) are separate heap allocations and do not sit at one offset in two threads.
pub fn learn_static_tls() {
    #[cfg(all(target_arch = "x86_64", target_os = "linux"))]
    {
        let offset = (ctx_general() as *const ThreadCtx as isize).wrapping_sub(thread_pointer() as isize);
        let tid = ctx_general().tid();
        // Variant II TLS (x86-64): static blocks lie below the thread pointer.
        if offset >= 0 || STATIC_OFFSET.load(Ordering::Relaxed) != 0 {
            return;
        }
        if FIRST_TID.compare_exchange(0, tid, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            FIRST_OFFSET.store(offset, Ordering::Release);
            return;
        }
        let first = FIRST_OFFSET.load(Ordering::Acquire);
        if FIRST_TID.load(Ordering::Acquire) != tid && first == offset {
            STATIC_OFFSET.store(offset, Ordering::Release);
        }
    }
}

/// True when [`ctx`] takes the static-TLS short way (for the bench and tests).
pub fn static_tls() -> bool {
    STATIC_OFFSET.load(Ordering::Relaxed) != 0
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

/// Forgets the cached id (the fork child's thread has a new one), and the first thread's TLS offset:
/// the child's thread is a copy of one of the parent's, at the same offset whatever the TLS model, so
/// it must not count as a second thread.
pub fn reset_after_fork() {
    ctx().tid.set(0);
    FIRST_TID.store(0, Ordering::Release);
    FIRST_OFFSET.store(0, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The test binary links tprof statically (static TLS): after two threads compared offsets, the
    /// short way gives each thread its own context, the one the thread-local access gives.
    #[test]
    fn static_tls_short_way_is_each_threads_own_context() {
        learn_static_tls();
        std::thread::spawn(learn_static_tls).join().unwrap();
        if cfg!(all(target_arch = "x86_64", target_os = "linux")) {
            assert!(static_tls(), "two threads saw the same offset: static TLS");
        }
        let mine = ctx() as *const ThreadCtx as usize;
        assert_eq!(mine, ctx_general() as *const ThreadCtx as usize);
        ctx().device.set(7);
        let others: Vec<(usize, usize, u32)> = (0..4)
            .map(|_| {
                std::thread::spawn(|| {
                    (ctx() as *const ThreadCtx as usize, ctx_general() as *const ThreadCtx as usize, ctx().device.get())
                })
                .join()
                .unwrap()
            })
            .collect();
        for (short, general, device) in others {
            assert_eq!(short, general);
            assert_ne!(short, mine);
            assert_eq!(device, 0, "a new thread's context is its own");
        }
        assert_eq!(ctx().device.get(), 7);
        ctx().device.set(0);
    }
}
