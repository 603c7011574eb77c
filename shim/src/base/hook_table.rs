//! A small lock-free table of `fn()` hooks: how a lower room calls code of a room above it without
//! importing it (the room above registers its function; nothing to unlock after fork).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Up to 16 `fn()` hooks, run in registration order.
pub struct HookTable {
    slots: [AtomicUsize; 16],
}

impl Default for HookTable {
    fn default() -> Self {
        Self::new()
    }
}

impl HookTable {
    pub const fn new() -> HookTable {
        HookTable { slots: [const { AtomicUsize::new(0) }; 16] }
    }

    /// Adds `f` unless present; silently ignores a 17th hook. True when `f` was added now.
    pub fn add(&self, f: fn()) -> bool {
        let v = f as usize;
        for s in &self.slots {
            match s.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(existing) if existing == v => return false,
                Err(_) => {}
            }
        }
        false
    }

    pub fn run_all(&self) {
        for s in &self.slots {
            let v = s.load(Ordering::Acquire);
            if v == 0 {
                return;
            }
            // SAFETY: non-zero slots only ever hold values stored by `add` from a valid `fn()`.
            let f: fn() = unsafe { std::mem::transmute::<usize, fn()>(v) };
            f();
        }
    }
}
