//! NCCL interposers: collectives, send/recv, the one-sided signal calls, groups (this file),
//! communicator life cycle ([`comms`]) and NCCL's memory calls ([`memory`]), as `Record::Collective`
//! (and `Api` / `Memory` records for the memory calls).
//!
//! Each wrapper forwards to the real function (`pnccl*` when the library exports the profiling
//! aliases, else the next `ncclX`, else the one in an already loaded `libnccl.so.2`) and pushes its
//! shim correlation id as CUPTI external id around the call, so the NCCL kernels carry it. Programs
//! that `dlopen` libnccl and `dlsym` on its handle get the same wrappers through the `dlsym` hook
//! ([`HOOKS`] is one of the tables the `dlsym` hook searches).
//!
//! Every forwarded call runs inside [`forward`], so the NVTX injection can tell that the NCCL
//! library creating its "NCCL" domain is one whose calls tprof sees ([`forwarding`]): it then drops
//! that domain's ranges, which would repeat the collective records.
//!
//! # Communicator identity
//! `comm` in the records is the same on every rank of a communicator: a 64-bit FNV-1a hash of the
//! 128-byte `ncclUniqueId`, or derived from the parent for split / shrink / grow children (see
//! [`comms`]). `seq` counts the data-moving calls (collectives, send, recv) per communicator from 0;
//! the one-sided calls (put with signal, signal, wait) have no `seq` (0): only one side makes them.
//!
//! # Bytes convention (as nccl-tests reports "size")
//! - AllReduce, Broadcast, Reduce, Send, Recv, PutSignal: `count x sizeof(datatype)`;
//! - AllGather: `sendcount x sizeof(datatype) x nranks` (the gathered output);
//! - ReduceScatter: `recvcount x sizeof(datatype) x nranks` (the reduced input);
//! - AllToAll, Gather, Scatter: `count x sizeof(datatype) x nranks` (count is per peer);
//! - Signal, WaitSignal: 0 (`count` of WaitSignal = the signals waited for).
#![allow(clippy::missing_safety_doc)]

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use tprof_format::{CollOp, Record};

use crate::base::dynamic_loader;
use crate::base::panic_fence::ffi_guard;
use crate::base::{switch, ticks};
use crate::intercept::real::RealFn;
use crate::intercept::real::{cstr, Hook};
use crate::record::reentrancy::Reentrancy;
use crate::record::{correlation, recorder, thread};
use crate::{cupti, lifecycle};

pub type Comm = *mut c_void;
pub type Stream = *mut c_void;
type R = c_int;

const NCCL_SUCCESS: R = 0;
const NCCL_SYSTEM_ERROR: R = 2;
const NCCL_IN_PROGRESS: R = 7;

/// `ncclUniqueId`, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct NcclUniqueId {
    pub internal: [c_char; 128],
}

/// Bytes of one element of an `ncclDataType_t`.
pub fn datatype_size(dt: c_int) -> u64 {
    match dt {
        0 | 1 | 10 | 11 => 1, // int8, uint8, fp8 e4m3, fp8 e5m2
        6 | 9 => 2,           // half, bfloat16
        2 | 3 | 7 => 4,       // int32, uint32, float
        4 | 5 | 8 => 8,       // int64, uint64, double
        _ => 0,
    }
}

/// FNV-1a over the unique id: the communicator's identity on every rank.
pub fn unique_id_hash(id: &NcclUniqueId) -> u64 {
    fnv(id.internal.iter().map(|&c| c as u8))
}

fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

// ---------------------------------------------------------------- communicator table

const COMMS: usize = 256;

struct CommSlot {
    key: AtomicUsize,
    id: AtomicU64,
    rank: AtomicU32,
    nranks: AtomicU32,
    device: AtomicU32,
    seq: AtomicU64,
    /// Children made by split or grow (collective over the whole parent).
    splits: AtomicU64,
    /// Children made by shrink (collective over the surviving ranks only).
    shrinks: AtomicU64,
    last_async: AtomicI32,
}

impl CommSlot {
    const fn new() -> CommSlot {
        CommSlot {
            key: AtomicUsize::new(0),
            id: AtomicU64::new(0),
            rank: AtomicU32::new(0),
            nranks: AtomicU32::new(0),
            device: AtomicU32::new(0),
            seq: AtomicU64::new(0),
            splits: AtomicU64::new(0),
            shrinks: AtomicU64::new(0),
            last_async: AtomicI32::new(0),
        }
    }
}

static TABLE: [CommSlot; COMMS] = [const { CommSlot::new() }; COMMS];
static INIT_ALL_CALLS: AtomicU64 = AtomicU64::new(0);

fn find(comm: Comm) -> Option<&'static CommSlot> {
    let k = comm as usize;
    if k == 0 {
        return None;
    }
    TABLE.iter().find(|s| s.key.load(Ordering::Acquire) == k)
}

/// Claims a slot for `comm` (reusing its own slot if the pointer is known).
fn remember(comm: Comm, id: u64, rank: u32, nranks: u32, device: u32) -> Option<&'static CommSlot> {
    let k = comm as usize;
    if k == 0 {
        return None;
    }
    let slot = find(comm)
        .or_else(|| TABLE.iter().find(|s| s.key.compare_exchange(0, k, Ordering::AcqRel, Ordering::Acquire).is_ok()))?;
    slot.id.store(id, Ordering::Relaxed);
    slot.rank.store(rank, Ordering::Relaxed);
    slot.nranks.store(nranks, Ordering::Relaxed);
    slot.device.store(device, Ordering::Relaxed);
    slot.seq.store(0, Ordering::Relaxed);
    slot.splits.store(0, Ordering::Relaxed);
    slot.shrinks.store(0, Ordering::Relaxed);
    slot.last_async.store(0, Ordering::Relaxed);
    Some(slot)
}

fn forget(comm: Comm) {
    if let Some(s) = find(comm) {
        s.key.store(0, Ordering::Release);
    }
}

/// What the records say about a communicator.
#[derive(Clone, Copy, Default)]
struct CommInfo {
    id: u64,
    rank: u32,
    nranks: u32,
    device: u32,
}

fn info(comm: Comm) -> CommInfo {
    match find(comm) {
        Some(s) => CommInfo {
            id: s.id.load(Ordering::Relaxed),
            rank: s.rank.load(Ordering::Relaxed),
            nranks: s.nranks.load(Ordering::Relaxed),
            device: s.device.load(Ordering::Relaxed),
        },
        None => learn_unknown(comm),
    }
}

/// A communicator created before tprof saw it: ask NCCL for rank / size / device; its identity can
/// only be local (the unique id is gone).
fn learn_unknown(comm: Comm) -> CommInfo {
    if comm.is_null() {
        return CommInfo::default();
    }
    let (rank, nranks, device) = query(comm);
    let id = 0x8000_0000_0000_0000 | (comm as u64 & 0x7fff_ffff_ffff_ffff);
    let _ = remember(comm, id, rank, nranks, device);
    CommInfo { id, rank, nranks, device }
}

/// (rank, nranks, device) from ncclCommUserRank / ncclCommCount / ncclCommCuDevice (0 when missing).
fn query(comm: Comm) -> (u32, u32, u32) {
    type Get = unsafe extern "C" fn(Comm, *mut c_int) -> R;
    let ask = |slot: &RealFn, pname: &CStr| -> u32 {
        let Some(p) = resolve(slot, pname) else { return 0 };
        // SAFETY: the NCCL query functions share this C signature.
        let f: Get = unsafe { std::mem::transmute::<*mut c_void, Get>(p) };
        let mut v: c_int = 0;
        // SAFETY: a live communicator handle and an out-pointer we own.
        let r = forward(|| unsafe { f(comm, &mut v) });
        if r == NCCL_SUCCESS {
            v.max(0) as u32
        } else {
            0
        }
    };
    (ask(&Q_USER_RANK, c"pncclCommUserRank"), ask(&Q_COUNT, c"pncclCommCount"), ask(&Q_CU_DEVICE, c"pncclCommCuDevice"))
}

static Q_USER_RANK: RealFn = RealFn::new(c"ncclCommUserRank");
static Q_COUNT: RealFn = RealFn::new(c"ncclCommCount");
static Q_CU_DEVICE: RealFn = RealFn::new(c"ncclCommCuDevice");

// ---------------------------------------------------------------- resolving the real functions

/// The real NCCL function for `slot`: its pointer if known, else `pnccl*`, else the next `nccl*`,
/// else the symbol in an already loaded libnccl.so.2 (a program that dlopened it RTLD_LOCAL).
fn resolve(slot: &RealFn, pname: &CStr) -> Option<*mut c_void> {
    if let Some(p) = slot.get() {
        return Some(p);
    }
    let p = dynamic_loader::next(pname);
    if slot.offer(p) {
        return slot.get();
    }
    for lib in [c"libnccl.so.2", c"libnccl.so"] {
        // SAFETY: RTLD_NOLOAD only returns a handle to an already loaded library (never loads one).
        let h = unsafe { libc::dlopen(lib.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
        if h.is_null() {
            continue;
        }
        for name in [pname, slot.name()] {
            // SAFETY: `h` is a live handle from dlopen.
            let p = unsafe { dynamic_loader::symbol_in(h, name) };
            if slot.offer(p) {
                // SAFETY: drops the extra reference RTLD_NOLOAD took; the library stays loaded.
                unsafe { libc::dlclose(h) };
                return slot.get();
            }
        }
        // SAFETY: as above.
        unsafe { libc::dlclose(h) };
    }
    None
}

// ---------------------------------------------------------------- forwarding

thread_local! {
    /// How deep this thread is inside real NCCL calls made by the interposers.
    static FORWARDING: Cell<u32> = const { Cell::new(0) };
}

/// Runs the real NCCL function `real`, marking this thread as inside it.
pub(crate) fn forward<T>(real: impl FnOnce() -> T) -> T {
    let _ = FORWARDING.try_with(|d| d.set(d.get() + 1));
    let r = real();
    let _ = FORWARDING.try_with(|d| d.set(d.get().saturating_sub(1)));
    r
}

/// True while this thread runs a real NCCL function called by one of the interposers: what NCCL
/// does now (e.g. create its NVTX domain) belongs to a library whose calls tprof records.
pub fn forwarding() -> bool {
    FORWARDING.try_with(|d| d.get() > 0).unwrap_or(false)
}

// ---------------------------------------------------------------- recording

/// One NCCL call in flight.
struct Call {
    op: CollOp,
    comm: CommInfo,
    count: u64,
    datatype: c_int,
    bytes: u64,
    peer: i32,
    stream: u64,
    seq: u64,
    correlation: u32,
    start: u64,
}

/// Runs `real` as an NCCL call `op` on `comm`, recording it (unless tprof is off or this thread is
/// already inside tprof) with the shim id pushed as CUPTI external correlation.
fn record(
    op: CollOp,
    comm: Comm,
    count: u64,
    datatype: c_int,
    peer: i32,
    stream: Stream,
    real: impl FnOnce() -> R,
) -> R {
    lifecycle::ensure_init();
    if !switch::is_recording() {
        // capture (issue 7): outside a capture window the call is only counted.
        if op.moves_data() && switch::state() == switch::ENABLED {
            let nranks = info(comm).nranks;
            let elem = datatype_size(datatype);
            let bytes = match op {
                CollOp::AllGather | CollOp::ReduceScatter | CollOp::AllToAll | CollOp::Gather | CollOp::Scatter => {
                    count * elem * nranks.max(1) as u64
                }
                _ => count * elem,
            };
            crate::capture::tallies::collective_unrecorded(op, bytes, nranks);
        }
        return forward(real);
    }
    let Some(_inside) = Reentrancy::enter() else { return forward(real) };
    cupti::start_when_ready();
    let call = ffi_guard(None, || Some(begin(op, comm, count, datatype, peer, stream)));
    let Some(call) = call else { return forward(real) };
    cupti::push_external(call.correlation);
    if op.moves_data() {
        crate::capture::hang_watchdog::note_collective(op, call.comm.id, call.seq);
    }
    // NCCL calls can block (group ends, communicator barriers): the hang watchdog watches them too.
    recorder::set_pending(crate::record::interning::intern(op.name()), call.start);
    let result = forward(real);
    recorder::clear_pending();
    cupti::pop_external();
    let end = ticks::now();
    ffi_guard((), || emit(&call, end, result));
    result
}

fn begin(op: CollOp, comm: Comm, count: u64, datatype: c_int, peer: i32, stream: Stream) -> Call {
    let info = info(comm);
    let elem = datatype_size(datatype);
    let n = info.nranks.max(1) as u64;
    let bytes = match op {
        CollOp::AllGather | CollOp::ReduceScatter | CollOp::AllToAll | CollOp::Gather | CollOp::Scatter => {
            count * elem * n
        }
        _ => count * elem,
    };
    let seq = if op.moves_data() { find(comm).map(|s| s.seq.fetch_add(1, Ordering::Relaxed)).unwrap_or(0) } else { 0 };
    Call {
        op,
        comm: info,
        count,
        datatype,
        bytes,
        peer,
        stream: stream as u64,
        seq,
        correlation: correlation::next_id(),
        start: ticks::now(),
    }
}

fn emit(c: &Call, end: u64, result: R) {
    recorder::emit(Record::Collective {
        tid: thread::tid(),
        op: c.op,
        start: c.start,
        end,
        comm: c.comm.id,
        rank: c.comm.rank,
        nranks: c.comm.nranks,
        count: c.count,
        datatype: c.datatype.clamp(0, 255) as u8,
        bytes: c.bytes,
        peer: c.peer,
        stream: c.stream,
        seq: c.seq,
        result,
        correlation: c.correlation,
        device: c.comm.device,
    });
}

/// Records a communicator-level event (init, destroy, abort, finalize, async error) with explicit times.
fn comm_event(op: CollOp, info: CommInfo, start: u64, end: u64, result: R) {
    if !switch::is_recording() {
        return;
    }
    recorder::emit(Record::Collective {
        tid: thread::tid(),
        op,
        start,
        end,
        comm: info.id,
        rank: info.rank,
        nranks: info.nranks,
        count: 0,
        datatype: 0,
        bytes: 0,
        peer: -1,
        stream: 0,
        seq: 0,
        result,
        correlation: correlation::next_id(),
        device: info.device,
    });
}

/// Wraps a communicator-creating call: runs it, then registers and records what it created.
fn create(real: impl FnOnce() -> R, register: impl FnOnce(R)) -> R {
    lifecycle::ensure_init();
    let Some(_inside) = Reentrancy::enter() else { return forward(real) };
    cupti::start_when_ready();
    let result = forward(real);
    ffi_guard((), || register(result));
    result
}

// ---------------------------------------------------------------- the wrappers

macro_rules! real_fn {
    ($slot:ident, $pname:literal, $ty:ty, $ret:expr) => {{
        match resolve(&$slot, $pname) {
            // SAFETY: the symbol is the NCCL function of that name, whose C signature is $ty.
            Some(p) => unsafe { std::mem::transmute::<*mut c_void, $ty>(p) },
            None => return $slot.missing($ret),
        }
    }};
}

type FnAllReduce = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> R;
type FnReduce = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, c_int, Comm, Stream) -> R;
type FnBroadcast = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, c_int, Comm, Stream) -> R;
type FnBcast = unsafe extern "C" fn(*mut c_void, usize, c_int, c_int, Comm, Stream) -> R;
type FnGather = unsafe extern "C" fn(*const c_void, *mut c_void, usize, c_int, Comm, Stream) -> R;
type FnSend = unsafe extern "C" fn(*const c_void, usize, c_int, c_int, Comm, Stream) -> R;
type FnVoid = unsafe extern "C" fn() -> R;
type FnPutSignal = unsafe extern "C" fn(
    *const c_void,
    usize,
    c_int,
    c_int,
    *mut c_void,
    usize,
    c_int,
    c_int,
    c_uint,
    Comm,
    Stream,
) -> R;
type FnSignal = unsafe extern "C" fn(c_int, c_int, c_int, c_uint, Comm, Stream) -> R;
type FnWaitSignal = unsafe extern "C" fn(c_int, *mut WaitSignalDesc, Comm, Stream) -> R;

/// `ncclWaitSignalDesc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WaitSignalDesc {
    pub op_cnt: c_int,
    pub peer: c_int,
    pub sig_idx: c_int,
    pub ctx: c_int,
}

mod comms;
mod memory_calls;
pub use comms::*;
pub use memory_calls::*;

static ALL_REDUCE: RealFn = RealFn::new(c"ncclAllReduce");
static ALL_GATHER: RealFn = RealFn::new(c"ncclAllGather");
static REDUCE_SCATTER: RealFn = RealFn::new(c"ncclReduceScatter");
static BROADCAST: RealFn = RealFn::new(c"ncclBroadcast");
static BCAST: RealFn = RealFn::new(c"ncclBcast");
static REDUCE: RealFn = RealFn::new(c"ncclReduce");
static ALL_TO_ALL: RealFn = RealFn::new(c"ncclAllToAll");
static ALLTO_ALL: RealFn = RealFn::new(c"ncclAlltoAll");
static GATHER: RealFn = RealFn::new(c"ncclGather");
static SCATTER: RealFn = RealFn::new(c"ncclScatter");
static SEND: RealFn = RealFn::new(c"ncclSend");
static RECV: RealFn = RealFn::new(c"ncclRecv");
static GROUP_START: RealFn = RealFn::new(c"ncclGroupStart");
static GROUP_END: RealFn = RealFn::new(c"ncclGroupEnd");
static PUT_SIGNAL: RealFn = RealFn::new(c"ncclPutSignal");
static SIGNAL: RealFn = RealFn::new(c"ncclSignal");
static WAIT_SIGNAL: RealFn = RealFn::new(c"ncclWaitSignal");

#[no_mangle]
pub unsafe extern "C" fn ncclAllReduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    op: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(ALL_REDUCE, c"pncclAllReduce", FnAllReduce, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::AllReduce, comm, count as u64, dt, -1, stream, || unsafe {
        f(send, recv, count, dt, op, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclAllGather(
    send: *const c_void,
    recv: *mut c_void,
    sendcount: usize,
    dt: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(ALL_GATHER, c"pncclAllGather", FnGather, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::AllGather, comm, sendcount as u64, dt, -1, stream, || unsafe {
        f(send, recv, sendcount, dt, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclReduceScatter(
    send: *const c_void,
    recv: *mut c_void,
    recvcount: usize,
    dt: c_int,
    op: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(REDUCE_SCATTER, c"pncclReduceScatter", FnAllReduce, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::ReduceScatter, comm, recvcount as u64, dt, -1, stream, || unsafe {
        f(send, recv, recvcount, dt, op, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclBroadcast(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    root: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(BROADCAST, c"pncclBroadcast", FnBroadcast, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::Broadcast, comm, count as u64, dt, root, stream, || unsafe {
        f(send, recv, count, dt, root, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclBcast(
    buff: *mut c_void,
    count: usize,
    dt: c_int,
    root: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(BCAST, c"pncclBcast", FnBcast, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::Broadcast, comm, count as u64, dt, root, stream, || unsafe {
        f(buff, count, dt, root, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclReduce(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    op: c_int,
    root: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(REDUCE, c"pncclReduce", FnReduce, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::Reduce, comm, count as u64, dt, root, stream, || unsafe {
        f(send, recv, count, dt, op, root, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclAllToAll(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(ALL_TO_ALL, c"pncclAllToAll", FnGather, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::AllToAll, comm, count as u64, dt, -1, stream, || unsafe { f(send, recv, count, dt, comm, stream) })
}

#[no_mangle]
pub unsafe extern "C" fn ncclAlltoAll(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(ALLTO_ALL, c"pncclAlltoAll", FnGather, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::AllToAll, comm, count as u64, dt, -1, stream, || unsafe { f(send, recv, count, dt, comm, stream) })
}

#[no_mangle]
pub unsafe extern "C" fn ncclGather(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    root: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(GATHER, c"pncclGather", FnBroadcast, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::Gather, comm, count as u64, dt, root, stream, || unsafe {
        f(send, recv, count, dt, root, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclScatter(
    send: *const c_void,
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    root: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(SCATTER, c"pncclScatter", FnBroadcast, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::Scatter, comm, count as u64, dt, root, stream, || unsafe {
        f(send, recv, count, dt, root, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclSend(
    send: *const c_void,
    count: usize,
    dt: c_int,
    peer: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(SEND, c"pncclSend", FnSend, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::Send, comm, count as u64, dt, peer, stream, || unsafe { f(send, count, dt, peer, comm, stream) })
}

#[no_mangle]
pub unsafe extern "C" fn ncclRecv(
    recv: *mut c_void,
    count: usize,
    dt: c_int,
    peer: c_int,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(RECV, c"pncclRecv", FnSend, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function (same ABI as ncclSend).
    record(CollOp::Recv, comm, count as u64, dt, peer, stream, || unsafe { f(recv, count, dt, peer, comm, stream) })
}

#[no_mangle]
pub unsafe extern "C" fn ncclGroupStart() -> R {
    let f = real_fn!(GROUP_START, c"pncclGroupStart", FnVoid, NCCL_SYSTEM_ERROR);
    // SAFETY: no arguments.
    record(CollOp::GroupStart, std::ptr::null_mut(), 0, 0, -1, std::ptr::null_mut(), || unsafe { f() })
}

#[no_mangle]
pub unsafe extern "C" fn ncclGroupEnd() -> R {
    let f = real_fn!(GROUP_END, c"pncclGroupEnd", FnVoid, NCCL_SYSTEM_ERROR);
    // SAFETY: no arguments. Grouped collectives launch their kernels here, so the push matters.
    record(CollOp::GroupEnd, std::ptr::null_mut(), 0, 0, -1, std::ptr::null_mut(), || unsafe { f() })
}

#[no_mangle]
pub unsafe extern "C" fn ncclPutSignal(
    localbuff: *const c_void,
    count: usize,
    dt: c_int,
    peer: c_int,
    peer_win: *mut c_void,
    peer_win_offset: usize,
    sig_idx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(PUT_SIGNAL, c"pncclPutSignal", FnPutSignal, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::PutSignal, comm, count as u64, dt, peer, stream, || unsafe {
        f(localbuff, count, dt, peer, peer_win, peer_win_offset, sig_idx, ctx, flags, comm, stream)
    })
}

#[no_mangle]
pub unsafe extern "C" fn ncclSignal(
    peer: c_int,
    sig_idx: c_int,
    ctx: c_int,
    flags: c_uint,
    comm: Comm,
    stream: Stream,
) -> R {
    let f = real_fn!(SIGNAL, c"pncclSignal", FnSignal, NCCL_SYSTEM_ERROR);
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::Signal, comm, 0, -1, peer, stream, || unsafe { f(peer, sig_idx, ctx, flags, comm, stream) })
}

/// `count` = the signals waited for (sum of `opCnt`); `peer` = the one peer waited for, else -1.
#[no_mangle]
pub unsafe extern "C" fn ncclWaitSignal(n_desc: c_int, descs: *mut WaitSignalDesc, comm: Comm, stream: Stream) -> R {
    let f = real_fn!(WAIT_SIGNAL, c"pncclWaitSignal", FnWaitSignal, NCCL_SYSTEM_ERROR);
    let (signals, peer) = ffi_guard((0, -1), || {
        if descs.is_null() || n_desc <= 0 {
            return (0, -1);
        }
        // SAFETY: NCCL's contract: `descs` holds `n_desc` descriptors.
        let d = unsafe { std::slice::from_raw_parts(descs, n_desc as usize) };
        let signals: u64 = d.iter().map(|x| x.op_cnt.max(0) as u64).sum();
        (signals, if d.len() == 1 { d[0].peer } else { -1 })
    });
    // SAFETY: forwarding the caller's arguments to the real function.
    record(CollOp::WaitSignal, comm, signals, -1, peer, stream, || unsafe { f(n_desc, descs, comm, stream) })
}

// ---------------------------------------------------------------- dlsym hook table

macro_rules! hook {
    ($name:literal, $slot:ident, $f:ident) => {
        Hook { name: cstr(concat!($name, "\0").as_bytes()), real: &$slot, wrapper: $f as *const () }
    };
}

/// The wrappers the `dlsym` hook hands out for lookups on a libnccl handle.
pub static HOOKS: &[Hook] = &[
    hook!("ncclAllReduce", ALL_REDUCE, ncclAllReduce),
    hook!("ncclAllGather", ALL_GATHER, ncclAllGather),
    hook!("ncclReduceScatter", REDUCE_SCATTER, ncclReduceScatter),
    hook!("ncclBroadcast", BROADCAST, ncclBroadcast),
    hook!("ncclBcast", BCAST, ncclBcast),
    hook!("ncclReduce", REDUCE, ncclReduce),
    hook!("ncclAllToAll", ALL_TO_ALL, ncclAllToAll),
    hook!("ncclAlltoAll", ALLTO_ALL, ncclAlltoAll),
    hook!("ncclGather", GATHER, ncclGather),
    hook!("ncclScatter", SCATTER, ncclScatter),
    hook!("ncclSend", SEND, ncclSend),
    hook!("ncclRecv", RECV, ncclRecv),
    hook!("ncclGroupStart", GROUP_START, ncclGroupStart),
    hook!("ncclGroupEnd", GROUP_END, ncclGroupEnd),
    hook!("ncclPutSignal", PUT_SIGNAL, ncclPutSignal),
    hook!("ncclSignal", SIGNAL, ncclSignal),
    hook!("ncclWaitSignal", WAIT_SIGNAL, ncclWaitSignal),
    hook!("ncclGetUniqueId", GET_UNIQUE_ID, ncclGetUniqueId),
    hook!("ncclCommInitRank", INIT_RANK, ncclCommInitRank),
    hook!("ncclCommInitRankConfig", INIT_RANK_CONFIG, ncclCommInitRankConfig),
    hook!("ncclCommInitRankScalable", INIT_RANK_SCALABLE, ncclCommInitRankScalable),
    hook!("ncclCommInitAll", INIT_ALL, ncclCommInitAll),
    hook!("ncclCommSplit", SPLIT, ncclCommSplit),
    hook!("ncclCommShrink", SHRINK, ncclCommShrink),
    hook!("ncclCommGrow", GROW, ncclCommGrow),
    hook!("ncclCommDestroy", DESTROY, ncclCommDestroy),
    hook!("ncclCommAbort", ABORT, ncclCommAbort),
    hook!("ncclCommFinalize", FINALIZE, ncclCommFinalize),
    hook!("ncclCommGetAsyncError", ASYNC_ERROR, ncclCommGetAsyncError),
    hook!("ncclMemAlloc", MEM_ALLOC, ncclMemAlloc),
    hook!("ncclMemFree", MEM_FREE, ncclMemFree),
    hook!("ncclCommRegister", REGISTER, ncclCommRegister),
    hook!("ncclCommDeregister", DEREGISTER, ncclCommDeregister),
    hook!("ncclCommWindowRegister", WINDOW_REGISTER, ncclCommWindowRegister),
    hook!("ncclCommWindowDeregister", WINDOW_DEREGISTER, ncclCommWindowDeregister),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unique_id_hash_is_content_based() {
        let mut a = NcclUniqueId { internal: [0; 128] };
        let b = a;
        assert_eq!(unique_id_hash(&a), unique_id_hash(&b));
        a.internal[127] = 1;
        assert_ne!(unique_id_hash(&a), unique_id_hash(&b));
    }

    #[test]
    fn datatype_sizes() {
        assert_eq!(datatype_size(7), 4);
        assert_eq!(datatype_size(9), 2);
        assert_eq!(datatype_size(8), 8);
        assert_eq!(datatype_size(99), 0);
    }

    #[test]
    fn comm_table_remembers_and_forgets() {
        let c = 0x1234usize as Comm;
        remember(c, 42, 1, 4, 3).unwrap();
        let i = info(c);
        assert_eq!((i.id, i.rank, i.nranks, i.device), (42, 1, 4, 3));
        assert_eq!(find(c).unwrap().seq.fetch_add(1, Ordering::Relaxed), 0);
        forget(c);
        assert!(find(c).is_none());
    }

    #[test]
    fn hook_table_names_match_wrappers() {
        assert!(HOOKS.iter().all(|h| h.name.to_bytes().starts_with(b"nccl") && h.real.name() == h.name));
    }
}
