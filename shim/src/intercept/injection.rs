//! `CUDA_INJECTION64_PATH=libtprof.so`: the CUDA driver `dlopen`s the library during `cuInit` and
//! calls `InitializeInjection`.
//!
//! Preload and injection together load one object (same file, one link map), so everything is
//! initialised once and the interposers, already bound under `LD_PRELOAD`, record each call once.
//! Injected alone, the interposers are not in the symbol lookup path (the program was bound to
//! libcudart before the driver loaded us): coverage then comes from CUPTI, which `ensure_init`
//! starts, and [`interposers_bound`] says so.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, Ordering};

static INJECTED: AtomicBool = AtomicBool::new(false);

/// True when the process's global lookup of `cudaLaunchKernel` finds our wrapper (LD_PRELOAD, or
/// libtprof linked in), i.e. the runtime interposers see the program's calls.
pub fn interposers_bound() -> bool {
    crate::base::dynamic_loader::own_export_bound(c"cudaLaunchKernel")
}

/// The injection entry point. Idempotent (the driver may call it again, e.g. after a fork); returns
/// 1 (success) so the driver keeps the library loaded.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    crate::base::panic_fence::ffi_guard(1, || {
        let first = !INJECTED.swap(true, Ordering::AcqRel);
        crate::lifecycle::ensure_init();
        // The driver is initialising us: it exists, and this is the moment NVIDIA's injection
        // samples subscribe to CUPTI (the driver-ready hooks start CUPTI and the NVML sampler).
        crate::base::driver::mark_working();
        if first && crate::base::switch::is_recording() && !interposers_bound() {
            crate::record::recorder::emit(tprof_format::Record::Marker {
                kind: tprof_format::MarkerKind::Note,
                ts: crate::base::ticks::now(),
                value: 0,
                name: crate::record::interning::intern(
                    "injected without LD_PRELOAD: CUDA calls seen through CUPTI only",
                ),
            });
        }
        1
    })
}
