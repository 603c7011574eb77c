//! Which interposed NCCL call this thread is in, so a task the plugin sees start inside it carries
//! the call's shim correlation id (`Record::NcclTask::correlation` = `Record::Collective::correlation`).

use std::cell::Cell;

thread_local! {
    static CURRENT: Cell<u32> = const { Cell::new(0) };
}

/// Marks the thread as inside the interposed call `correlation` until the guard drops.
pub fn enter(correlation: u32) -> CallGuard {
    let prev = CURRENT.try_with(|c| c.replace(correlation)).unwrap_or(0);
    CallGuard { prev }
}

/// The interposed call this thread is in (0: none).
pub fn current() -> u32 {
    CURRENT.try_with(|c| c.get()).unwrap_or(0)
}

pub struct CallGuard {
    prev: u32,
}

impl Drop for CallGuard {
    fn drop(&mut self) {
        let _ = CURRENT.try_with(|c| c.set(self.prev));
    }
}
