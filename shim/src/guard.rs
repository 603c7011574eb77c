//! Reentrancy and panic fences.
//!
//! - [`Reentrancy::enter`]: a thread-local "inside tprof" flag, so CUDA calls that tprof itself makes
//!   (CUPTI flushes, NCCL calling the runtime, our own allocations reaching hooked symbols) go straight
//!   through untracked.
//! - [`ffi_guard`]: every exported function and callback runs its body through it; a panic is caught,
//!   tprof disables itself with one stderr line, and the host program runs on.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

/// Proof that this thread is inside tprof; dropping it leaves. Not `Send` (it holds the thread's context).
pub struct ReentrancyGuard {
    ctx: &'static crate::thread::ThreadCtx,
}

impl Drop for ReentrancyGuard {
    #[inline]
    fn drop(&mut self) {
        self.ctx.inside.set(false);
    }
}

/// The reentrancy fence.
pub struct Reentrancy;

impl Reentrancy {
    /// Enters tprof on this thread, or None when this thread is already inside (then the caller must
    /// forward the call without recording).
    #[inline]
    pub fn enter() -> Option<ReentrancyGuard> {
        Self::enter_in(crate::thread::ctx())
    }

    /// [`Reentrancy::enter`] with the calling thread's context (from [`crate::thread::ctx`]).
    #[inline(always)]
    pub fn enter_in(ctx: &'static crate::thread::ThreadCtx) -> Option<ReentrancyGuard> {
        if ctx.inside.get() {
            None
        } else {
            ctx.inside.set(true);
            Some(ReentrancyGuard { ctx })
        }
    }

    /// True when this thread is inside tprof.
    pub fn active() -> bool {
        crate::thread::ctx().inside.get()
    }
}

static HOOK: Once = Once::new();

/// Installs a panic hook that stays silent for panics inside tprof's FFI guards (tprof prints its own
/// single line) and defers to the previous hook for everything else.
pub fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            // Inside tprof (the reentrancy flag is set around all of tprof's own work) the panic is
            // caught by `ffi_guard`, which prints tprof's single line; everything else is the host's.
            if !Reentrancy::active() {
                previous(info);
            }
        }));
    });
}

/// Runs `body`; if it panics, disables tprof permanently (one stderr line) and returns `default`.
#[inline]
pub fn ffi_guard<T>(default: T, body: impl FnOnce() -> T) -> T {
    // No thread-local bookkeeping here: this runs twice per intercepted call.
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(v) => v,
        Err(payload) => {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            crate::state::disable_permanently(&format!("internal error ({msg})"));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reentrancy_is_per_thread_and_released_on_drop() {
        let g = Reentrancy::enter().expect("first entry");
        assert!(Reentrancy::enter().is_none());
        std::thread::spawn(|| assert!(Reentrancy::enter().is_some())).join().unwrap();
        drop(g);
        assert!(Reentrancy::enter().is_some());
    }

    #[test]
    fn panics_are_caught() {
        install_panic_hook();
        let v = ffi_guard(7, || -> i32 { panic!("boom") });
        assert_eq!(v, 7);
        crate::state::reset_for_tests();
    }
}
