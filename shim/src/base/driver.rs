//! Whether the CUDA driver works in this process, learnt from the program's own calls.
//!
//! CUPTI and NVML are parts of the driver stack: loaded into a process without a usable driver they
//! misbehave (CUPTI 13.2 recurses without end in `cuptiGetVersion`, others return 999 or print
//! nothing useful). So they start only once the driver has been shown to work: `cuInit` returned
//! `CUDA_SUCCESS` (the runtime's implicit initialisation goes through the same wrapper), the driver
//! loaded tprof through `CUDA_INJECTION64_PATH`, or a call that needs the driver succeeded (a fallback
//! for programs whose `cuInit` tprof cannot see). Never from NVTX initialisation, which CPU-only
//! programs reach too.
//!
//! Without a driver, the first call that says so (`cudaErrorInsufficientDriver`, `cudaErrorNoDevice`,
//! `CUDA_ERROR_NO_DEVICE`, ...) prints the one line tprof has to say about it.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use super::config::config;
use super::hook_table::HookTable;
use super::messages::warn_line;
use super::panic_fence::ffi_guard;

const UNKNOWN: u8 = 0;
const WORKS: u8 = 1;

static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
static READY_HOOKS: HookTable = HookTable::new();
static ABSENT_SAID: AtomicBool = AtomicBool::new(false);

/// True once the driver has been shown to work (one relaxed load).
#[inline]
pub fn works() -> bool {
    STATE.load(Ordering::Relaxed) == WORKS
}

/// Registers a function run once, on the thread that first shows the driver works (starting CUPTI,
/// the NVML sampler). Runs it at once if that already happened.
pub fn on_ready(f: fn()) {
    if READY_HOOKS.add(f) && works() {
        f();
    }
}

/// The driver works: runs the ready hooks the first time. Cheap afterwards.
pub fn mark_working() {
    if works() {
        return;
    }
    if STATE.swap(WORKS, Ordering::AcqRel) == WORKS {
        return;
    }
    ffi_guard((), || READY_HOOKS.run_all());
}

/// `cuInit` returned `result`.
pub fn note_init_result(result: i32) {
    if result == 0 {
        mark_working();
    } else if let Some(meaning) = driver_error_meaning(result) {
        say_absent("cuInit", result, meaning);
    }
}

/// A runtime call returned `result` (cold path: only non-zero results, or the first successes).
#[cold]
pub fn note_runtime_result(call: &str, result: i32, needs_driver: bool) {
    if result == 0 {
        if needs_driver {
            mark_working();
        }
    } else if let Some(meaning) = runtime_error_meaning(result) {
        say_absent(call, result, meaning);
    }
}

/// A driver call other than `cuInit` returned `result` (cold path).
#[cold]
pub fn note_driver_result(call: &str, result: i32) {
    if result == 0 {
        mark_working();
    } else if let Some(meaning) = driver_error_meaning(result) {
        say_absent(call, result, meaning);
    }
}

/// Runtime results that mean "no usable driver or device" (cuda_runtime_api.h / driver_types.h).
fn runtime_error_meaning(result: i32) -> Option<&'static str> {
    Some(match result {
        34 => "cudaErrorStubLibrary: the CUDA driver is a stub library",
        35 => "cudaErrorInsufficientDriver: no CUDA driver, or one older than the runtime",
        100 => "cudaErrorNoDevice: no CUDA-capable device",
        _ => return None,
    })
}

/// Driver results that mean "no usable driver or device" (cuda.h).
fn driver_error_meaning(result: i32) -> Option<&'static str> {
    Some(match result {
        34 => "CUDA_ERROR_STUB_LIBRARY: the CUDA driver is a stub library",
        35 => "CUDA_ERROR_INSUFFICIENT_DRIVER: the driver is older than the runtime",
        100 => "CUDA_ERROR_NO_DEVICE: no CUDA-capable device",
        _ => return None,
    })
}

fn say_absent(call: &str, result: i32, meaning: &str) {
    if works() || ABSENT_SAID.swap(true, Ordering::AcqRel) {
        return;
    }
    if config().quiet {
        return;
    }
    warn_line(&format!(
        "no usable CUDA driver ({call} returned {result}, {meaning}): no GPU activity or counters are recorded, only the program's CUDA calls"
    ));
}

/// Test support: forget what was learnt.
#[cfg(test)]
pub fn reset_for_tests() {
    STATE.store(UNKNOWN, Ordering::Release);
    ABSENT_SAID.store(false, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    static RUNS: AtomicU32 = AtomicU32::new(0);
    fn count_run() {
        RUNS.fetch_add(1, Ordering::Relaxed);
    }

    #[test]
    fn ready_hooks_run_once_when_the_driver_is_shown_to_work() {
        reset_for_tests();
        on_ready(count_run);
        note_runtime_result("cudaGetDeviceCount", 35, true);
        note_init_result(100);
        assert!(!works(), "no-driver results do not count as working");
        assert_eq!(RUNS.load(Ordering::Relaxed), 0);
        note_runtime_result("cudaRuntimeGetVersion", 0, false);
        assert!(!works(), "a call that works without a driver proves nothing");
        note_init_result(0);
        note_init_result(0);
        note_driver_result("cuMemAlloc_v2", 0);
        assert!(works());
        assert_eq!(RUNS.load(Ordering::Relaxed), 1);
        on_ready(count_run);
        assert_eq!(RUNS.load(Ordering::Relaxed), 1, "a hook registered again is not run again");
    }

    #[test]
    fn no_driver_codes_are_named() {
        assert!(runtime_error_meaning(35).unwrap().contains("InsufficientDriver"));
        assert!(driver_error_meaning(100).unwrap().contains("NO_DEVICE"));
        assert!(runtime_error_meaning(2).is_none());
    }
}
