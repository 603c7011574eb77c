//! NCCL's memory calls: `ncclMemAlloc` / `ncclMemFree` as an `Api` record (domain NCCL) plus a
//! `Memory` record (device memory, counted in the process's reservation like `cudaMalloc`), and the
//! buffer / window registration calls as `Api` records (`arg` = the registered bytes).

use std::ffi::{c_int, c_void};

use tprof_format::{ApiDomain, MemOp, MemSpace, Record, StrId};

use super::real_calls::{forward, nccl_wrappers, Comm, NCCL_SUCCESS, R};
use crate::base::panic_fence::ffi_guard;
use crate::base::{switch, ticks};
use crate::intercept::api_call::current_device;
use crate::intercept::memtrack;
use crate::lifecycle;
use crate::record::interning::StaticName;
use crate::record::reentrancy::Reentrancy;
use crate::record::{correlation, recorder, thread};

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

nccl_wrappers! {
    /// `bytes` in the `Memory` record is the size asked for (NCCL may round it up to its granularity).
    fn ncclMemAlloc(ptr: *mut *mut c_void, size: usize) -> R => call (real) {
        let device = current_device();
        call(
            &N_MEM_ALLOC,
            size as u64,
            // SAFETY: forwarding the caller's arguments to the real function.
            || unsafe { real(ptr, size) },
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
    };
    fn ncclMemFree(ptr: *mut c_void) -> R => call (real) {
        call(
            &N_MEM_FREE,
            0,
            // SAFETY: forwarding the caller's argument to the real function.
            || unsafe { real(ptr) },
            |r| {
                if r != NCCL_SUCCESS || ptr.is_null() {
                    return None;
                }
                let (device, bytes, reserved) = memtrack::on_free(ptr as u64).unwrap_or_else(|| {
                    let d = current_device();
                    (d, 0, memtrack::reserved(d))
                });
                Some(MemEvent { op: MemOp::Free, device, address: ptr as u64, bytes, reserved })
            },
        )
    };
    fn ncclCommRegister(comm: Comm, buff: *mut c_void, size: usize, handle: *mut *mut c_void) -> R => call (real) {
        // SAFETY: forwarding the caller's arguments to the real function.
        call(&N_REGISTER, size as u64, || unsafe { real(comm, buff, size, handle) }, |_| None)
    };
    fn ncclCommDeregister(comm: Comm, handle: *mut c_void) -> R => call (real) {
        // SAFETY: forwarding the caller's arguments to the real function.
        call(&N_DEREGISTER, 0, || unsafe { real(comm, handle) }, |_| None)
    };
    fn ncclCommWindowRegister(comm: Comm, buff: *mut c_void, size: usize, win: *mut *mut c_void, win_flags: c_int) -> R
        => call (real) {
        // SAFETY: forwarding the caller's arguments to the real function.
        call(&N_WINDOW_REGISTER, size as u64, || unsafe { real(comm, buff, size, win, win_flags) }, |_| None)
    };
    fn ncclCommWindowDeregister(comm: Comm, win: *mut c_void) -> R => call (real) {
        // SAFETY: forwarding the caller's arguments to the real function.
        call(&N_WINDOW_DEREGISTER, 0, || unsafe { real(comm, win) }, |_| None)
    };
}
