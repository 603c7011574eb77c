//! What tprof holds of CUPTI once it started it: the loaded entry points, the facts decided then
//! (do the interposers see the program's calls, which calls do they wrap), and the account of the
//! records CUPTI dropped. Read by the buffer callbacks and the parser.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use cupti_sys as sys;
use tprof_format::{MarkerKind, Record, StrId};

use super::libcupti::CuptiApi;
use crate::base::{dynamic_loader, ticks};
use crate::record::recorder;

static API: OnceLock<CuptiApi> = OnceLock::new();
/// Whether the runtime/driver interposers see the program's calls (LD_PRELOAD), decided at start.
static INTERPOSERS_BOUND: AtomicBool = AtomicBool::new(false);
/// Which CUDA functions the interposers wrap (by exported name), as the interposers registered it.
static INTERPOSED: OnceLock<fn(&[u8]) -> bool> = OnceLock::new();

/// The loaded CUPTI entry points, when CUPTI was loaded.
pub fn api() -> Option<&'static CuptiApi> {
    API.get()
}

/// Keeps the entry points of the libcupti tprof loaded (the first kept stays).
pub(super) fn keep_api(api: CuptiApi) -> &'static CuptiApi {
    API.get_or_init(|| api)
}

/// Decides, as CUPTI starts, whether the program's `cudaLaunchKernel` reaches the interposers.
pub(super) fn decide_interposers_bound() {
    INTERPOSERS_BOUND.store(dynamic_loader::own_export_bound(c"cudaLaunchKernel"), Ordering::Relaxed);
}

/// True when the interposers are in the program's symbol lookup path (then CUPTI API records of hooked
/// calls duplicate the interposers' records).
pub fn interposers_bound() -> bool {
    INTERPOSERS_BOUND.load(Ordering::Relaxed)
}

/// Registers the interposers' answer to "is this CUDA function wrapped?" (the first registration wins).
pub fn register_interposed_calls(wrapped: fn(&[u8]) -> bool) {
    let _ = INTERPOSED.set(wrapped);
}

/// True when the interposers wrap the CUDA function `name` (false before they registered).
pub(super) fn interposed(name: &[u8]) -> bool {
    INTERPOSED.get().is_some_and(|wrapped| wrapped(name))
}

/// Emits `Marker{CuptiDropped}` for records CUPTI dropped since the last call (the writer thread
/// adds them up into the ring header).
pub(super) fn report_dropped(api: &CuptiApi) {
    let mut dropped: usize = 0;
    // SAFETY: cuptiActivityGetNumDroppedRecords(NULL, 0, &n) with its C signature; no tprof lock is
    // held (CUPTI may take its own buffer lock here).
    let r = unsafe { (api.get_num_dropped)(std::ptr::null_mut(), 0, &mut dropped) };
    if r == sys::CUPTI_SUCCESS && dropped > 0 {
        recorder::emit(Record::Marker {
            kind: MarkerKind::CuptiDropped,
            ts: ticks::now(),
            value: dropped as u64,
            name: StrId::NONE,
        });
    }
}
