//! Completed CUPTI buffers -> tprof records.
//!
//! Two passes over each buffer: the first reads the ExternalCorrelation records (our CUSTOM2 ids into
//! the [`super::corrmap`] table), the second converts everything else, so a kernel record that CUPTI
//! staged before its launch's ExternalCorrelation record is still linked. GPU records whose CUPTI id
//! has no mapping yet wait one more buffer in a small pending list (the mapping may arrive in the next
//! buffer), then go out with CUPTI's own id (work the interposers did not see). CUPTI API records
//! whose id maps to a shim id are dropped: the interposer already recorded that call.

use std::ffi::{c_char, CStr};
use std::ptr::read_unaligned;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

use cupti_sys as sys;
use tprof_format::{ApiDomain, CopyKind, MemOp, MemSpace, MemoryKind, Record, StrId, SyncKind};

use super::libcupti::CuptiApi;
use super::{corrmap, session};
use crate::record::{interning, recorder};

/// Buffers parsed so far (the age of pending records).
static GENERATION: AtomicU64 = AtomicU64::new(0);

const PENDING_CAP: usize = 16384;

struct Pending {
    recs: Vec<(Record, u32, u64)>,
}

static PENDING: Mutex<Pending> = Mutex::new(Pending { recs: Vec::new() });

#[inline]
fn out(rec: Record) {
    // GPU work launched inside a window is kept after the window closed; what is
    // left out is counted for the metrics.
    if crate::capture::keep_gpu_record(&rec, session::interposers_bound()) {
        recorder::emit(rec);
    }
}

/// Iterates the records of a buffer with `cuptiActivityGetNextRecord`.
///
/// # Safety
/// `buffer` must hold `valid` bytes of records completed by CUPTI.
unsafe fn for_each_record(api: &CuptiApi, buffer: *mut u8, valid: usize, mut f: impl FnMut(*const u8, u32)) {
    let end = buffer as usize + valid;
    let mut rec: *mut sys::ActivityHeader = std::ptr::null_mut();
    loop {
        // SAFETY: CUPTI walks its own buffer; `rec` is null or the previous record it returned.
        let r = unsafe { (api.get_next_record)(buffer, valid, &mut rec) };
        if r != sys::CUPTI_SUCCESS || rec.is_null() {
            break;
        }
        let p = rec as *const u8;
        // SAFETY: CUPTI returned a record inside the buffer; every record starts with its u32 kind.
        let kind = unsafe { read_unaligned(p as *const u32) };
        if p as usize + sys::prefix_size(kind) <= end {
            f(p, kind);
        }
    }
}

/// Parses one completed buffer.
///
/// # Safety
/// `buffer` must hold `valid` bytes of records completed by CUPTI.
pub unsafe fn parse_buffer(api: &CuptiApi, buffer: *mut u8, valid: usize) {
    let generation = GENERATION.fetch_add(1, Ordering::AcqRel) + 1;
    // SAFETY: forwarded contract; the closure only reads ExternalCorrelation records.
    unsafe {
        for_each_record(api, buffer, valid, |p, kind| {
            if kind == sys::CUPTI_ACTIVITY_KIND_RUNTIME || kind == sys::CUPTI_ACTIVITY_KIND_DRIVER {
                // SAFETY: the kind says this is a CUpti_ActivityAPI record, fully in the buffer.
                let a = read_unaligned(p as *const sys::ActivityApi);
                let domain = if kind == sys::CUPTI_ACTIVITY_KIND_RUNTIME {
                    sys::CUPTI_CB_DOMAIN_RUNTIME_API
                } else {
                    sys::CUPTI_CB_DOMAIN_DRIVER_API
                };
                if corrmap::get(a.correlation_id).is_none() && callback_info(api, domain, a.cbid).1 {
                    corrmap::insert(a.correlation_id, corrmap::DUPLICATE);
                }
            } else if kind == sys::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION {
                // SAFETY: the kind says this record is an ExternalCorrelation record, fully in the buffer.
                let e = read_unaligned(p as *const sys::ActivityExternalCorrelation);
                if e.external_kind == sys::CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2 {
                    corrmap::insert(e.correlation_id, e.external_id as u32);
                } else {
                    out(Record::ExternalCorrelation {
                        kind: e.external_kind as u8,
                        external_id: e.external_id,
                        correlation: e.correlation_id,
                    });
                }
            }
        })
    };
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    if pending.recs.capacity() == 0 {
        pending.recs.reserve_exact(PENDING_CAP);
    }
    pending.recs.retain_mut(|(rec, cupti, born)| {
        if let Some(shim) = corrmap::get(*cupti) {
            link(*rec, shim);
            false
        } else if generation > *born + 1 {
            out(*rec);
            false
        } else {
            true
        }
    });
    // SAFETY: forwarded contract; the closure reads each record through its kind's prefix.
    unsafe {
        for_each_record(api, buffer, valid, |p, kind| {
            // SAFETY: `p` points at a record of `kind` whose prefix lies in the buffer.
            let Some((rec, cupti)) = convert(api, p, kind) else { return };
            match rec {
                Record::Api { .. } => {
                    if corrmap::get(cupti).is_none() {
                        out(rec);
                    }
                }
                _ => match corrmap::get(cupti) {
                    Some(shim) => link(rec, shim),
                    None if cupti != 0 && pending.recs.len() < PENDING_CAP => {
                        pending.recs.push((rec, cupti, generation))
                    }
                    None => out(rec),
                },
            }
        })
    };
}

/// Emits every record still waiting for a mapping (exit flush).
pub fn flush_pending() {
    let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
    for (rec, cupti, _) in pending.recs.drain(..) {
        match corrmap::get(cupti) {
            Some(shim) => link(rec, shim),
            None => out(rec),
        }
    }
}

/// Emits a GPU-side record whose CUPTI id maps to `shim`: rewritten to the shim id, or, for a call
/// the interposers recorded without an external id (synchronisations, allocations), dropped when the
/// interposer wrote its own `Sync` / `Memory` record.
fn link(mut rec: Record, shim: u32) {
    if shim == corrmap::DUPLICATE {
        if !matches!(rec, Record::Sync { .. } | Record::Memory { .. }) {
            out(rec);
        }
        return;
    }
    set_correlation(&mut rec, shim);
    out(rec);
}

fn set_correlation(rec: &mut Record, id: u32) {
    match rec {
        Record::Kernel { correlation, .. }
        | Record::Memcpy { correlation, .. }
        | Record::Memset { correlation, .. }
        | Record::Sync { correlation, .. }
        | Record::Memory { correlation, .. } => *correlation = id,
        _ => {}
    }
}

/// One CUPTI record as a tprof record plus its CUPTI correlation id (0 when it has none).
///
/// # Safety
/// `p` must point at a record of `kind` at least `sys::prefix_size(kind)` bytes long.
unsafe fn convert(api: &CuptiApi, p: *const u8, kind: u32) -> Option<(Record, u32)> {
    match kind {
        sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL | sys::CUPTI_ACTIVITY_KIND_KERNEL => {
            // SAFETY: caller contract (prefix in bounds); read_unaligned copes with packing.
            let k = unsafe { read_unaligned(p as *const sys::ActivityKernelPrefix) };
            let name = if k.name.is_null() {
                StrId::NONE
            } else {
                // SAFETY: CUPTI's kernel name is a NUL-terminated string valid while the buffer is.
                unsafe { interning::intern_cstr(k.name) }
            };
            let rec = Record::Kernel {
                device: k.device_id,
                context: k.context_id,
                stream: k.stream_id,
                start: k.start,
                end: k.end,
                grid: [k.grid_x as u32, k.grid_y as u32, k.grid_z as u32],
                block: [k.block_x as u32, k.block_y as u32, k.block_z as u32],
                registers: k.registers_per_thread,
                shared_mem: (k.static_shared_memory.max(0) as u32)
                    .saturating_add(k.dynamic_shared_memory.max(0) as u32),
                correlation: k.correlation_id,
                name,
                graph_id: k.graph_id,
            };
            Some((rec, k.correlation_id))
        }
        sys::CUPTI_ACTIVITY_KIND_MEMCPY => {
            // SAFETY: caller contract.
            let m = unsafe { read_unaligned(p as *const sys::ActivityMemcpyPrefix) };
            let rec = Record::Memcpy {
                device: m.device_id,
                context: m.context_id,
                stream: m.stream_id,
                start: m.start,
                end: m.end,
                bytes: m.bytes,
                kind: CopyKind::from_u8(m.copy_kind),
                src_kind: MemoryKind::from_u8(m.src_kind),
                dst_kind: MemoryKind::from_u8(m.dst_kind),
                correlation: m.correlation_id,
            };
            Some((rec, m.correlation_id))
        }
        sys::CUPTI_ACTIVITY_KIND_MEMSET => {
            // SAFETY: caller contract.
            let m = unsafe { read_unaligned(p as *const sys::ActivityMemsetPrefix) };
            let rec = Record::Memset {
                device: m.device_id,
                context: m.context_id,
                stream: m.stream_id,
                start: m.start,
                end: m.end,
                bytes: m.bytes,
                value: m.value,
                dst_kind: MemoryKind::from_u8(m.memory_kind as u8),
                correlation: m.correlation_id,
            };
            Some((rec, m.correlation_id))
        }
        sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => {
            // SAFETY: caller contract.
            let s = unsafe { read_unaligned(p as *const sys::ActivitySynchronizationPrefix) };
            let result = if sys::cupti_version_has(api.version, sys::CUPTI_API_VERSION_12_8) {
                // SAFETY: CUPTI 12.8+ (API 26+) writes Synchronization2, which has returnValue at this
                // offset; GetNextRecord stepped by that size, so it is inside the buffer.
                unsafe { read_unaligned(p.add(sys::SYNCHRONIZATION2_RETURN_VALUE_OFFSET) as *const u32) as i32 }
            } else {
                0
            };
            let rec = Record::Sync {
                kind: SyncKind::from_u8(s.sync_type as u8),
                tid: 0,
                context: s.context_id,
                stream: s.stream_id,
                event: s.cuda_event_id as u64,
                start: s.start,
                end: s.end,
                correlation: s.correlation_id,
                result,
            };
            Some((rec, s.correlation_id))
        }
        sys::CUPTI_ACTIVITY_KIND_MEMORY2 => {
            // SAFETY: caller contract.
            let m = unsafe { read_unaligned(p as *const sys::ActivityMemoryPrefix) };
            let op = match m.memory_operation_type {
                sys::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE => MemOp::Free,
                _ => MemOp::Alloc,
            };
            let space = match m.memory_kind {
                sys::CUPTI_ACTIVITY_MEMORY_KIND_PINNED => MemSpace::HostPinned,
                sys::CUPTI_ACTIVITY_MEMORY_KIND_MANAGED => MemSpace::Managed,
                _ if m.is_async != 0 => MemSpace::DeviceAsync,
                _ => MemSpace::Device,
            };
            let rec = Record::Memory {
                op,
                space,
                device: m.device_id,
                address: m.address,
                bytes: m.bytes,
                reserved: 0,
                ts: m.timestamp,
                result: 0,
                correlation: m.correlation_id,
                tid: 0,
            };
            Some((rec, m.correlation_id))
        }
        sys::CUPTI_ACTIVITY_KIND_OVERHEAD => {
            // SAFETY: caller contract.
            let o = unsafe { read_unaligned(p as *const sys::ActivityOverheadPrefix) };
            let tid = if o.object_kind == sys::CUPTI_ACTIVITY_OBJECT_THREAD { o.object_id[1] } else { 0 };
            out(Record::Overhead { kind: overhead_code(o.overhead_kind), start: o.start, end: o.end, tid });
            None
        }
        sys::CUPTI_ACTIVITY_KIND_RUNTIME | sys::CUPTI_ACTIVITY_KIND_DRIVER => {
            // SAFETY: caller contract.
            let a = unsafe { read_unaligned(p as *const sys::ActivityApi) };
            let (domain, cb_domain) = if kind == sys::CUPTI_ACTIVITY_KIND_RUNTIME {
                (ApiDomain::CuptiRuntime, sys::CUPTI_CB_DOMAIN_RUNTIME_API)
            } else {
                (ApiDomain::CuptiDriver, sys::CUPTI_CB_DOMAIN_DRIVER_API)
            };
            let rec = Record::Api {
                tid: a.thread_id,
                domain,
                name: callback_info(api, cb_domain, a.cbid).0,
                start: a.start,
                end: a.end,
                result: a.return_value as i32,
                correlation: a.correlation_id,
                detail: StrId::NONE,
                stream: 0,
                arg: 0,
            };
            Some((rec, a.correlation_id))
        }
        _ => None,
    }
}

const NAME_CACHE: usize = 1024;
static RUNTIME_NAMES: [AtomicU32; NAME_CACHE] = [const { AtomicU32::new(0) }; NAME_CACHE];
static DRIVER_NAMES: [AtomicU32; NAME_CACHE] = [const { AtomicU32::new(0) }; NAME_CACHE];

/// Strips CUPTI's `_vNNNN` toolkit-version suffix (`cudaLaunchKernel_v7000` -> `cudaLaunchKernel`);
/// ABI suffixes that are part of the symbol (`cuMemAlloc_v2`) stay.
pub fn strip_version_suffix(name: &str) -> &str {
    if let Some(i) = name.rfind("_v") {
        let tail = &name[i + 2..];
        if tail.len() >= 4 && tail.bytes().all(|b| b.is_ascii_digit()) {
            return &name[..i];
        }
    }
    name
}

/// Bit of a name-cache entry: a call the interposers record themselves without an external id.
const INTERPOSED_NO_WORK: u32 = 1 << 31;

/// True for calls the interposers wrap in a CUPTI external id (they create GPU work).
fn creates_gpu_work(name: &str) -> bool {
    ["Launch", "Memcpy", "Memset"].iter().any(|w| name.contains(w))
}

/// The interned name of a callback id, and whether a record of it without a shim mapping duplicates
/// an interposed call (interposers bound, the function is hooked and gets no external id). Cached per
/// (domain, cbid).
fn callback_info(api: &CuptiApi, domain: sys::CUpti_CallbackDomain, cbid: u32) -> (StrId, bool) {
    let cache = if domain == sys::CUPTI_CB_DOMAIN_RUNTIME_API { &RUNTIME_NAMES } else { &DRIVER_NAMES };
    let slot = cache.get(cbid as usize);
    if let Some(v) = slot.map(|s| s.load(Ordering::Relaxed)).filter(|&v| v != 0) {
        return (StrId(v & !INTERPOSED_NO_WORK), v & INTERPOSED_NO_WORK != 0);
    }
    let mut from_cupti: Option<String> = None;
    if let Some(f) = api.get_callback_name {
        let mut p: *const c_char = std::ptr::null();
        // SAFETY: cuptiGetCallbackName writes a pointer to a static NUL-terminated name into `p`.
        if unsafe { f(domain, cbid, &mut p) } == sys::CUPTI_SUCCESS && !p.is_null() {
            // SAFETY: as above.
            let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
            from_cupti = Some(strip_version_suffix(&s).to_string());
        }
    }
    let cuda_major = sys::cupti_cuda_major(api.version);
    let name = match (from_cupti, sys::static_cbid_name(domain, cbid, cuda_major)) {
        (Some(n), _) if !n.is_empty() => n,
        (_, Some(n)) => n.to_string(),
        _ if domain == sys::CUPTI_CB_DOMAIN_RUNTIME_API => format!("cuda_runtime_cbid_{cbid}"),
        _ => format!("cuda_driver_cbid_{cbid}"),
    };
    let duplicate = session::interposers_bound() && !creates_gpu_work(&name) && session::interposed(name.as_bytes());
    let id = interning::intern(&name);
    if let Some(s) = slot {
        s.store(id.0 | if duplicate { INTERPOSED_NO_WORK } else { 0 }, Ordering::Relaxed);
    }
    (id, duplicate)
}

/// `CUpti_ActivityOverheadKind` in one byte (the ring's `Overhead.kind`): the driver's kinds (below
/// 2^16) as they are, CUPTI's own (`n << 16`) as `0x80 | n`.
fn overhead_code(kind: u32) -> u8 {
    if kind < 1 << 16 {
        kind.min(0x7f) as u8
    } else {
        0x80 | ((kind >> 16).min(0x7f) as u8)
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn overhead_kinds_keep_their_identity_in_one_byte() {
        assert_eq!(overhead_code(sys::CUPTI_ACTIVITY_OVERHEAD_UNKNOWN), 0);
        assert_eq!(overhead_code(sys::CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER), 1);
        assert_eq!(overhead_code(sys::CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH), 0x81);
        assert_eq!(overhead_code(sys::CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST), 0x87);
    }

    use super::*;

    #[test]
    fn version_suffixes_are_stripped() {
        assert_eq!(strip_version_suffix("cudaLaunchKernel_v7000"), "cudaLaunchKernel");
        assert_eq!(strip_version_suffix("cuMemAlloc_v2"), "cuMemAlloc_v2");
        assert_eq!(strip_version_suffix("cuLaunchKernel"), "cuLaunchKernel");
        assert_eq!(strip_version_suffix("cudaLaunchKernel_ptsz"), "cudaLaunchKernel_ptsz");
    }
}
