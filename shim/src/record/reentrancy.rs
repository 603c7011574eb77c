//! The reentrancy fence: a thread-local "inside tprof" flag, so CUDA calls that tprof itself makes
//! (CUPTI flushes, NCCL calling the runtime, our own allocations reaching hooked symbols) go straight
//! through untracked.

/// Proof that this thread is inside tprof; dropping it leaves. Not `Send` (it holds the thread's context).
pub struct ReentrancyGuard {
    ctx: &'static crate::record::thread::ThreadCtx,
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
        Self::enter_in(crate::record::thread::ctx())
    }

    /// [`Reentrancy::enter`] with the calling thread's context (from [`crate::record::thread::ctx`]).
    #[inline(always)]
    pub fn enter_in(ctx: &'static crate::record::thread::ThreadCtx) -> Option<ReentrancyGuard> {
        if ctx.inside.get() {
            None
        } else {
            ctx.inside.set(true);
            Some(ReentrancyGuard { ctx })
        }
    }

    /// True when this thread is inside tprof.
    pub fn active() -> bool {
        crate::record::thread::ctx().inside.get()
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
}
