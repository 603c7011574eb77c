//! The CUPTI side of the correlation protocol as the interposers see it: push the shim id as a CUPTI
//! external correlation (kind CUSTOM2) around calls that create GPU work, and know whether CUPTI
//! delivers GPU records (if not, launches emit estimated `Kernel` records themselves).
//!
//! Forwards to the gpu-trace module (`crate::cupti`), whose functions are no-ops when CUPTI is off.

/// True when CUPTI activity tracing runs.
#[inline]
pub fn active() -> bool {
    imp::active()
}

/// Pushes `id` as external correlation id on this thread (no-op without CUPTI).
#[inline]
pub fn push_external(id: u32) {
    imp::push_external(id)
}

/// Pops the id pushed by [`push_external`].
#[inline]
pub fn pop_external() {
    imp::pop_external()
}

mod imp {
    pub use crate::cupti::{is_active as active, pop_external, push_external};
}
