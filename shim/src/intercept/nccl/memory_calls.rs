//! NCCL's memory calls: `ncclMemAlloc` / `ncclMemFree` as an `Api` record (domain NCCL) plus a
//! `Memory` record (device memory, counted in the process's reservation like `cudaMalloc`), and the
//! buffer / window registration calls as `Api` records (`arg` = the registered bytes).

use std::ffi::{c_int, c_void};

use tprof_format::{ApiDomain, MemOp, MemSpace, Record, StrId};

use super::{forward, resolve, Comm, NCCL_SUCCESS, NCCL_SYSTEM_ERROR, R};
use crate::base::panic_fence::ffi_guard;
use crate::base::{switch, ticks};
use crate::intercept::memtrack;
use crate::intercept::real::RealFn;
use crate::lifecycle;
use crate::record::interning::StaticName;
use crate::record::reentrancy::Reentrancy;
use crate::record::{correlation, recorder, thread};

type FnMemAlloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> R;
type FnMemFree = unsafe extern "C" fn(*mut c_void) -> R;
type FnRegister = unsafe extern "C" fn(Comm, *mut c_void, usize, *mut *mut c_void) -> R;
type FnDeregister = unsafe extern "C" fn(Comm, *mut c_void) -> R;
type FnWindowRegister = unsafe extern "C" fn(Comm, *mut c_void, usize, *mut *mut c_void, c_int) -> R;

pub(super) static MEM_ALLOC: RealFn = RealFn::new(c"ncclMemAlloc");
pub(super) static MEM_FREE: RealFn = RealFn::new(c"ncclMemFree");
pub(super) static REGISTER: RealFn = RealFn::new(c"ncclCommRegister");
pub(super) static DEREGISTER: RealFn = RealFn::new(c"ncclCommDeregister");
pub(super) static WINDOW_REGISTER: RealFn = RealFn::new(c"ncclCommWindowRegister");
pub(super) static WINDOW_DEREGISTER: RealFn = RealFn::new(c"ncclCommWindowDeregister");

static N_MEM_ALLOC: StaticName = StaticName::new("ncclMemAlloc");
static N_MEM_FREE: StaticName = StaticName::new("ncclMemFree");
static N_REGISTER: StaticName = StaticName::new("ncclCommRegister");
static N_DEREGISTER: StaticName = StaticName::new("ncclCommDeregister");
static N_WINDOW_REGISTER: StaticName = StaticName::new("ncclCommWindowRegister");
static N_WINDOW_DEREGISTER: StaticName = StaticName::new("ncclCommWindowDeregister");

/// What a memory call did, for its `Memory` record.
struct MemEvent {
    op: MemOp,
    device: u32,
    address: u64,
    bytes: u64,
    reserved: u64,
}

/// Runs `real` as an NCCL call recorded as an `Api` record named `name` with `arg`; `after` turns
/// the result into the memory event to record after it (and updates the reservation totals, which
/// happens whether or not tprof records).
fn call(name: &StaticName, arg: u64, real: impl FnOnce() -> R, after: impl FnOnce(R) -> Option<MemEvent>) -> R {
    lifecycle::ensure_init();
    let recording = switch::is_recording();
    let inside = Reentrancy::enter();
    let correlation = if recording && inside.is_some() { correlation::next_id() } else { 0 };
    let start = ticks::now();
    let result = forward(real);
    let end = ticks::now();
    if inside.is_none() {
        return result;
    }
    ffi_guard((), || {
        let mem = after(result);
        if !recording {
            return;
        }
        let tid = thread::tid();
        recorder::emit(Record::Api {
            tid,
            domain: ApiDomain::Nccl,
            name: name.id(),
            start,
            end,
            result,
            correlation,
            detail: StrId::NONE,
            stream: 0,
            arg,
        });
        if let Some(m) = mem {
            recorder::emit(Record::Memory {
                op: m.op,
                space: MemSpace::Device,
                device: m.device,
                address: m.address,
                bytes: m.bytes,
                reserved: m.reserved,
                ts: end,
                result,
                correlation,
                tid,
            });
        }
    });
    result
}

/// `bytes` in the `Memory` record is the size asked for (NCCL may round it up to its granularity).
#[no_mangle]
pub unsafe extern "C" fn ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> R {
    let f = real_fn!(MEM_ALLOC, c"pncclMemAlloc", FnMemAlloc, NCCL_SYSTEM_ERROR);
    let device = crate::intercept::api_call::current_device();
    call(
        &N_MEM_ALLOC,
        size as u64,
        // SAFETY: forwarding the caller's arguments to the real function.
        || unsafe { f(ptr, size) },
        |r| {
            // SAFETY: on success NCCL wrote the allocation into the caller's out-pointer.
            let address = if r == NCCL_SUCCESS && !ptr.is_null() { (unsafe { *ptr }) as u64 } else { 0 };
            Some(if r == NCCL_SUCCESS {
                let reserved = memtrack::on_alloc(device, address, size as u64);
                MemEvent { op: MemOp::Alloc, device, address, bytes: size as u64, reserved }
            } else {
                MemEvent {
                    op: MemOp::AllocFailed,
                    device,
                    address: 0,
                    bytes: size as u64,
                    reserved: memtrack::reserved(device),
                }
            })
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn ncclMemFree(ptr: *mut c_void) -> R {
    let f = real_fn!(MEM_FREE, c"pncclMemFree", FnMemFree, NCCL_SYSTEM_ERROR);
    call(
        &N_MEM_FREE,
        0,
        // SAFETY: forwarding the caller's argument to the real function.
        || unsafe { f(ptr) },
        |r| {
            if r != NCCL_SUCCESS || ptr.is_null() {
                return None;
            }
            let (device, bytes, reserved) = memtrack::on_free(ptr as u64).unwrap_or_else(|| {
                let d = crate::intercept::api_call::current_device();
                (d, 0, memtrack::reserved(d))
            });
            Some(MemEvent { op: MemOp::Free, device, address: ptr as u64, bytes, reserved })
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommRegister(comm: Comm, buff: *mut c_void, size: usize, handle: *mut *mut c_void) -> R {
    let f = real_fn!(REGISTER, c"pncclCommRegister", FnRegister, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    call(&N_REGISTER, size as u64, || unsafe { f(comm, buff, size, handle) }, |_| None)
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommDeregister(comm: Comm, handle: *mut c_void) -> R {
    let f = real_fn!(DEREGISTER, c"pncclCommDeregister", FnDeregister, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    call(&N_DEREGISTER, 0, || unsafe { f(comm, handle) }, |_| None)
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommWindowRegister(
    comm: Comm,
    buff: *mut c_void,
    size: usize,
    win: *mut *mut c_void,
    win_flags: c_int,
) -> R {
    let f = real_fn!(WINDOW_REGISTER, c"pncclCommWindowRegister", FnWindowRegister, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    call(&N_WINDOW_REGISTER, size as u64, || unsafe { f(comm, buff, size, win, win_flags) }, |_| None)
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommWindowDeregister(comm: Comm, win: *mut c_void) -> R {
    let f = real_fn!(WINDOW_DEREGISTER, c"pncclCommWindowDeregister", FnDeregister, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    call(&N_WINDOW_DEREGISTER, 0, || unsafe { f(comm, win) }, |_| None)
}
