//! Driver virtual memory management: `cuMemCreate`, `cuMemRelease`, `cuMemMap`, `cuMemUnmap`,
//! `cuMemRetainAllocationHandle`, `cuMemAddressReserve`, `cuMemAddressFree`, `cuMemSetAccess`. PyTorch's
//! expandable segments and NCCL allocate GPU memory this way, resolving the calls through
//! `cudaGetDriverEntryPointByVersion` / `cuGetProcAddress` (see `proc_address.rs`).
//!
//! The memory timeline counts physical memory (`vmmtrack`): a `Memory` alloc record at `cuMemCreate`
//! (address = the handle, bytes = its size), a free record (same address) when the driver frees it:
//! at the `cuMemRelease` or `cuMemUnmap` that drops its last reference or mapping (one record per
//! allocation an unmap frees). Reserving, mapping and access calls only get `Api` records (bytes =
//! the range's size): address space is not memory.

use std::ffi::{c_int, c_ulonglong, c_void};

use tprof_format::{ApiDomain, MemOp, MemSpace};

use super::api_call::{begin_outer, current_device, interpose, real_or, slots, started, MemEvent, Work};
use super::cuda_drv::DevPtr;
use super::memtrack;
use super::real::DRV_ERR_NOT_FOUND;
use super::vmmtrack::{self, Freed};
use crate::base::panic_fence::ffi_guard;

/// `CUmemGenericAllocationHandle`.
pub type AllocHandle = c_ulonglong;

/// `CUmemAllocationProp` (cuda.h): the prefix we read (type, requested handle types, location).
#[repr(C)]
pub struct CuMemAllocationProp {
    pub alloc_type: c_int,
    pub requested_handle_types: c_int,
    pub location_type: c_int,
    /// `id`; for `CU_MEM_LOCATION_TYPE_DEVICE_LOCALITY_DOMAIN` its first byte is the device.
    pub location_id: c_int,
}

const LOCATION_DEVICE: c_int = 1;
const LOCATION_HOST: c_int = 2;
const LOCATION_HOST_NUMA: c_int = 3;
const LOCATION_HOST_NUMA_CURRENT: c_int = 4;
const LOCATION_DEVICE_LOCALITY_DOMAIN: c_int = 6;

/// Where an allocation with these properties lives: (space, memtrack device).
///
/// # Safety
/// `prop` NULL or the caller's `CUmemAllocationProp`, readable during the call.
unsafe fn location(prop: *const CuMemAllocationProp) -> (MemSpace, u32) {
    if prop.is_null() {
        return (MemSpace::Device, current_device());
    }
    // SAFETY: a non-null prop points to the caller's properties for the duration of the call.
    let p = unsafe { &*prop };
    match p.location_type {
        LOCATION_DEVICE if p.location_id >= 0 => (MemSpace::Device, p.location_id as u32),
        LOCATION_DEVICE_LOCALITY_DOMAIN => (MemSpace::Device, (p.location_id as u32) & 0xff),
        LOCATION_HOST | LOCATION_HOST_NUMA | LOCATION_HOST_NUMA_CURRENT => (MemSpace::HostPinned, memtrack::HOST),
        _ => (MemSpace::Device, current_device()),
    }
}

fn space_of(device: u32) -> MemSpace {
    if device == memtrack::HOST {
        MemSpace::HostPinned
    } else {
        MemSpace::Device
    }
}

#[inline]
fn range(size: usize) -> Work {
    Work::Plain { arg: size as u64 }
}

interpose! {
    domain = Driver, missing = DRV_ERR_NOT_FOUND;
    extra_hooks = [cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap, cuMemRetainAllocationHandle];
    fn cuMemAddressReserve(ptr: *mut DevPtr, size: usize, alignment: usize, addr: DevPtr, flags: c_ulonglong) -> c_int
        => range(size);
    fn cuMemAddressFree(ptr: DevPtr, size: usize) -> c_int => range(size);
    fn cuMemSetAccess(ptr: DevPtr, size: usize, desc: *const c_void, count: usize) -> c_int => range(size);
}

slots!(cuMemCreate, cuMemRelease, cuMemMap, cuMemUnmap, cuMemRetainAllocationHandle);

/// `cuMemCreate`: physical memory, from the moment it is created.
#[no_mangle]
pub unsafe extern "C" fn cuMemCreate(
    handle: *mut AllocHandle,
    size: usize,
    prop: *const CuMemAllocationProp,
    flags: c_ulonglong,
) -> c_int {
    let real = real_or!(cuMemCreate, fn(*mut AllocHandle, usize, *const CuMemAllocationProp, c_ulonglong) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin_outer, || range(size));
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(handle, size, prop, flags) };
    let Some((call, work)) = call else { return r };
    ffi_guard((), || {
        // SAFETY: `prop` is the caller's input, unchanged by the call.
        let (space, device) = unsafe { location(prop) };
        let bytes = size as u64;
        let mem = if r == 0 && !handle.is_null() {
            // SAFETY: on success the driver stored the new handle into the caller's out-pointer.
            let h = unsafe { *handle };
            MemEvent {
                op: MemOp::Alloc,
                space,
                device,
                address: h,
                bytes,
                reserved: vmmtrack::on_create(h, device, bytes),
            }
        } else {
            MemEvent { op: MemOp::AllocFailed, space, device, address: 0, bytes, reserved: memtrack::reserved(device) }
        };
        call.finish_memory(ApiDomain::Driver, &cuMemCreate::NAME, r, &work, mem);
    });
    r
}

/// `cuMemRelease`: frees the memory when no mapping holds it any more.
#[no_mangle]
pub unsafe extern "C" fn cuMemRelease(handle: AllocHandle) -> c_int {
    let real = real_or!(cuMemRelease, fn(AllocHandle) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin_outer, || Work::Plain { arg: 0 });
    // SAFETY: forwarding the caller's argument unchanged to the real function.
    let r = unsafe { real(handle) };
    let Some((call, mut work)) = call else { return r };
    ffi_guard((), || match if r == 0 { vmmtrack::on_release(handle) } else { None } {
        Some((device, bytes, reserved)) => {
            work = Work::Plain { arg: bytes };
            let mem = MemEvent { op: MemOp::Free, space: space_of(device), device, address: handle, bytes, reserved };
            call.finish_memory(ApiDomain::Driver, &cuMemRelease::NAME, r, &work, mem);
        }
        None => call.finish_memory_events(ApiDomain::Driver, &cuMemRelease::NAME, r, &work, &[]),
    });
    r
}

/// `cuMemRetainAllocationHandle`: one more reference to the allocation mapped at `addr`.
#[no_mangle]
pub unsafe extern "C" fn cuMemRetainAllocationHandle(handle: *mut AllocHandle, addr: *mut c_void) -> c_int {
    let real = real_or!(cuMemRetainAllocationHandle, fn(*mut AllocHandle, *mut c_void) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin_outer, || Work::Plain { arg: 0 });
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(handle, addr) };
    let Some((call, work)) = call else { return r };
    ffi_guard((), || {
        if r == 0 && !handle.is_null() {
            // SAFETY: on success the driver stored the handle into the caller's out-pointer.
            vmmtrack::on_retain(unsafe { *handle });
        }
        call.finish_memory_events(ApiDomain::Driver, &cuMemRetainAllocationHandle::NAME, r, &work, &[]);
    });
    r
}

/// `cuMemMap`: the mapping holds the allocation; maps address space, allocates nothing.
#[no_mangle]
pub unsafe extern "C" fn cuMemMap(
    ptr: DevPtr,
    size: usize,
    offset: usize,
    handle: AllocHandle,
    flags: c_ulonglong,
) -> c_int {
    let real = real_or!(cuMemMap, fn(DevPtr, usize, usize, AllocHandle, c_ulonglong) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin_outer, || range(size));
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(ptr, size, offset, handle, flags) };
    let Some((call, work)) = call else { return r };
    ffi_guard((), || {
        if r == 0 {
            vmmtrack::on_map(ptr, size as u64, handle);
        }
        call.finish_memory_events(ApiDomain::Driver, &cuMemMap::NAME, r, &work, &[]);
    });
    r
}

/// `cuMemUnmap`: frees the allocations whose last hold was one of the mappings taken back.
#[no_mangle]
pub unsafe extern "C" fn cuMemUnmap(ptr: DevPtr, size: usize) -> c_int {
    let real = real_or!(cuMemUnmap, fn(DevPtr, usize) -> c_int; DRV_ERR_NOT_FOUND);
    let call = started(begin_outer, || range(size));
    // SAFETY: forwarding the caller's arguments unchanged to the real function.
    let r = unsafe { real(ptr, size) };
    let Some((call, work)) = call else { return r };
    ffi_guard((), || {
        let freed = if r == 0 { vmmtrack::on_unmap(ptr, size as u64) } else { Freed::default() };
        let freed = freed.allocations();
        let unset = MemEvent { op: MemOp::Free, space: MemSpace::Device, device: 0, address: 0, bytes: 0, reserved: 0 };
        let mut mems = [unset; Freed::MAX];
        let n = freed.len();
        for (i, (m, f)) in mems.iter_mut().zip(freed).enumerate() {
            // The device's total after this one: what it holds now plus what the later ones gave back.
            let later: u64 = freed[i + 1..].iter().filter(|g| g.device == f.device).map(|g| g.bytes).sum();
            let reserved = memtrack::reserved(f.device) + later;
            *m = MemEvent {
                op: MemOp::Free,
                space: space_of(f.device),
                device: f.device,
                address: f.handle,
                bytes: f.bytes,
                reserved,
            };
        }
        call.finish_memory_events(ApiDomain::Driver, &cuMemUnmap::NAME, r, &work, &mems[..n]);
    });
    r
}
