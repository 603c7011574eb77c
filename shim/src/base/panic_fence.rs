//! The panic fence. Every function tprof exports or hands to a library as a callback runs its own
//! work through [`ffi_guard`] (a panic unwinding out of an `extern "C"` function aborts the host
//! program): a panic is caught, tprof turns itself off with one stderr line, and the host program
//! runs on with the call's own result. The interposers keep the real call outside the fence, so the
//! program's call completes whatever happens to the recording around it.

use std::panic::{catch_unwind, AssertUnwindSafe, Location};
use std::sync::Once;

use super::switch;

static HOOK: Once = Once::new();

/// Installs a panic hook that stays silent for tprof's own panics (the fence prints tprof's single
/// line) and defers to the previous hook for everything else. A panic is tprof's when
/// `inside_tprof()` says the thread is inside tprof's work, or when it was raised in the shim's code.
pub fn install_panic_hook(inside_tprof: fn() -> bool) {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !(inside_tprof() || in_shim_sources(info.location())) {
                previous(info);
            }
        }));
    });
}

/// True for a location in the shim's sources (the compiler records paths from the workspace root,
/// as `file!()` gives them: `shim/src/...`).
fn in_shim_sources(location: Option<&Location<'_>>) -> bool {
    let sources = file!().strip_suffix("base/panic_fence.rs").unwrap_or("shim/src/");
    location.is_some_and(|l| l.file().starts_with(sources))
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
            switch::disable_permanently(&format!("internal error ({msg})"));
            default
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_are_caught() {
        install_panic_hook(|| true);
        let v = ffi_guard(7, || -> i32 { panic!("boom") });
        assert_eq!(v, 7);
        switch::reset_for_tests();
    }

    #[test]
    fn shim_locations_are_recognised() {
        assert!(in_shim_sources(Some(Location::caller())));
        assert!(!in_shim_sources(None));
    }
}
