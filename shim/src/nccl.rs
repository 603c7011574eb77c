//! NCCL interposers: collectives, send/recv, groups, communicator life cycle and async errors, as
//! `Record::Collective`.
//!
//! Each wrapper forwards to the real function (`pnccl*` when the library exports the profiling
//! aliases, else the next `ncclX`, else the one in an already loaded `libnccl.so.2`) and pushes its
//! shim correlation id as CUPTI external id around the call, so the NCCL kernels carry it. Programs
//! that `dlopen` libnccl and `dlsym` on its handle get the same wrappers through the `dlsym` hook
//! ([`HOOKS`] is registered with `intercept::dlsym::register_hooks` when libtprof loads).
//!
//! # Communicator identity
//! `comm` in the records is a 64-bit FNV-1a hash of the 128-byte `ncclUniqueId`, so it is the same
//! on every rank. `ncclCommSplit` children hash (parent id, split ordinal on the parent, color);
//! `ncclCommInitAll` communicators hash (pid, call ordinal). `seq` counts the data-moving calls
//! (collectives, send, recv) per communicator from 0.
//!
//! # Bytes convention (as nccl-tests reports "size")
//! - AllReduce, Broadcast, Reduce, Send, Recv: `count x sizeof(datatype)`;
//! - AllGather: `sendcount x sizeof(datatype) x nranks` (the gathered output);
//! - ReduceScatter: `recvcount x sizeof(datatype) x nranks` (the reduced input);
//! - AllToAll, Gather, Scatter: `count x sizeof(datatype) x nranks` (count is per peer).
#![allow(clippy::missing_safety_doc)]

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use tprof_format::{CollOp, Record};

use crate::guard::{ffi_guard, Reentrancy};
use crate::intercept::real::{self, RealFn};
use crate::intercept::{cstr, Hook};
use crate::{clock, correlation, cupti, recorder, state, thread};

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
    splits: AtomicU64,
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
        let r = unsafe { f(comm, &mut v) };
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
    let p = real::next(pname);
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
            let p = unsafe { real::symbol_in(h, name) };
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
    state::ensure_init();
    if !state::is_recording() {
        // capture (issue 7): outside a capture window the call is only counted.
        if op.moves_data() && state::state() == state::ENABLED {
            let nranks = info(comm).nranks;
            let elem = datatype_size(datatype);
            let bytes = match op {
                CollOp::AllGather | CollOp::ReduceScatter | CollOp::AllToAll | CollOp::Gather | CollOp::Scatter => {
                    count * elem * nranks.max(1) as u64
                }
                _ => count * elem,
            };
            crate::counters::collective_unrecorded(op, bytes, nranks);
        }
        return real();
    }
    let Some(_inside) = Reentrancy::enter() else { return real() };
    cupti::start_when_ready();
    let call = ffi_guard(None, || Some(begin(op, comm, count, datatype, peer, stream)));
    let Some(call) = call else { return real() };
    cupti::push_external(call.correlation);
    if op.moves_data() {
        crate::hang::note_collective(op, call.comm.id, call.seq);
    }
    // NCCL calls can block (group ends, communicator barriers): the hang watchdog watches them too.
    recorder::set_pending(crate::strings::intern(op.name()), call.start);
    let result = real();
    recorder::clear_pending();
    cupti::pop_external();
    let end = clock::now();
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
        start: clock::now(),
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
    if !state::is_recording() {
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
    state::ensure_init();
    let Some(_inside) = Reentrancy::enter() else { return real() };
    cupti::start_when_ready();
    let result = real();
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
type FnComm = unsafe extern "C" fn(Comm) -> R;
type FnInitRank = unsafe extern "C" fn(*mut Comm, c_int, NcclUniqueId, c_int) -> R;
type FnInitRankConfig = unsafe extern "C" fn(*mut Comm, c_int, NcclUniqueId, c_int, *mut c_void) -> R;
type FnInitAll = unsafe extern "C" fn(*mut Comm, c_int, *const c_int) -> R;
type FnSplit = unsafe extern "C" fn(Comm, c_int, c_int, *mut Comm, *mut c_void) -> R;
type FnAsyncError = unsafe extern "C" fn(Comm, *mut R) -> R;

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
static INIT_RANK: RealFn = RealFn::new(c"ncclCommInitRank");
static INIT_RANK_CONFIG: RealFn = RealFn::new(c"ncclCommInitRankConfig");
static INIT_ALL: RealFn = RealFn::new(c"ncclCommInitAll");
static SPLIT: RealFn = RealFn::new(c"ncclCommSplit");
static DESTROY: RealFn = RealFn::new(c"ncclCommDestroy");
static ABORT: RealFn = RealFn::new(c"ncclCommAbort");
static FINALIZE: RealFn = RealFn::new(c"ncclCommFinalize");
static ASYNC_ERROR: RealFn = RealFn::new(c"ncclCommGetAsyncError");

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

fn registered(comm_out: *mut Comm, id: u64, rank: c_int, nranks: c_int, start: u64, result: R) {
    if result != NCCL_SUCCESS && result != NCCL_IN_PROGRESS {
        comm_event(
            CollOp::CommInit,
            CommInfo { id, rank: rank.max(0) as u32, nranks: nranks.max(0) as u32, device: 0 },
            start,
            clock::now(),
            result,
        );
        return;
    }
    // SAFETY: on success NCCL wrote the new communicator into the caller's out-pointer.
    let comm = if comm_out.is_null() { std::ptr::null_mut() } else { unsafe { *comm_out } };
    let (_, _, device) = query(comm);
    let info = CommInfo { id, rank: rank.max(0) as u32, nranks: nranks.max(0) as u32, device };
    let _ = remember(comm, id, info.rank, info.nranks, device);
    comm_event(CollOp::CommInit, info, start, clock::now(), result);
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommInitRank(comm: *mut Comm, nranks: c_int, id: NcclUniqueId, rank: c_int) -> R {
    let f = real_fn!(INIT_RANK, c"pncclCommInitRank", FnInitRank, NCCL_SYSTEM_ERROR);
    let start = clock::now();
    // SAFETY: forwarding the caller's arguments to the real function.
    create(|| unsafe { f(comm, nranks, id, rank) }, |r| registered(comm, unique_id_hash(&id), rank, nranks, start, r))
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommInitRankConfig(
    comm: *mut Comm,
    nranks: c_int,
    id: NcclUniqueId,
    rank: c_int,
    config: *mut c_void,
) -> R {
    let f = real_fn!(INIT_RANK_CONFIG, c"pncclCommInitRankConfig", FnInitRankConfig, NCCL_SYSTEM_ERROR);
    let start = clock::now();
    // SAFETY: forwarding the caller's arguments to the real function.
    create(
        || unsafe { f(comm, nranks, id, rank, config) },
        |r| registered(comm, unique_id_hash(&id), rank, nranks, start, r),
    )
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommInitAll(comms: *mut Comm, ndev: c_int, devlist: *const c_int) -> R {
    let f = real_fn!(INIT_ALL, c"pncclCommInitAll", FnInitAll, NCCL_SYSTEM_ERROR);
    let start = clock::now();
    // SAFETY: forwarding the caller's arguments to the real function.
    create(
        || unsafe { f(comms, ndev, devlist) },
        |r| {
            let ordinal = INIT_ALL_CALLS.fetch_add(1, Ordering::Relaxed);
            let id = fnv(std::process::id().to_le_bytes().into_iter().chain(ordinal.to_le_bytes()));
            for i in 0..ndev.max(0) {
                // SAFETY: on success NCCL filled `ndev` communicators into the caller's array.
                let slot = if comms.is_null() { std::ptr::null_mut() } else { unsafe { comms.add(i as usize) } };
                registered(slot, id, i, ndev, start, r);
            }
        },
    )
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommSplit(
    comm: Comm,
    color: c_int,
    key: c_int,
    newcomm: *mut Comm,
    config: *mut c_void,
) -> R {
    let f = real_fn!(SPLIT, c"pncclCommSplit", FnSplit, NCCL_SYSTEM_ERROR);
    let start = clock::now();
    let parent = info(comm);
    let ordinal = find(comm).map(|s| s.splits.fetch_add(1, Ordering::Relaxed)).unwrap_or(0);
    // SAFETY: forwarding the caller's arguments to the real function.
    create(
        || unsafe { f(comm, color, key, newcomm, config) },
        |r| {
            // SAFETY: NCCL wrote the child (or NULL for NCCL_SPLIT_NOCOLOR) into the out-pointer.
            let child = if newcomm.is_null() || r != NCCL_SUCCESS { std::ptr::null_mut() } else { unsafe { *newcomm } };
            if child.is_null() && r == NCCL_SUCCESS {
                return;
            }
            let id = fnv(parent.id.to_le_bytes().into_iter().chain(ordinal.to_le_bytes()).chain(color.to_le_bytes()));
            let (rank, nranks, _) = if child.is_null() { (0, 0, 0) } else { query(child) };
            registered(newcomm, id, rank as c_int, nranks as c_int, start, r);
        },
    )
}

fn comm_end(op: CollOp, slot: &RealFn, pname: &CStr, comm: Comm) -> R {
    let f = match resolve(slot, pname) {
        // SAFETY: destroy / abort / finalize share the signature ncclResult_t(ncclComm_t).
        Some(p) => unsafe { std::mem::transmute::<*mut c_void, FnComm>(p) },
        None => return slot.missing(NCCL_SYSTEM_ERROR),
    };
    state::ensure_init();
    let Some(_inside) = Reentrancy::enter() else {
        // SAFETY: forwarding the caller's argument.
        return unsafe { f(comm) };
    };
    let before = ffi_guard(CommInfo::default(), || info(comm));
    let start = clock::now();
    // SAFETY: forwarding the caller's argument.
    let r = unsafe { f(comm) };
    ffi_guard((), || {
        comm_event(op, before, start, clock::now(), r);
        if op != CollOp::CommFinalize {
            forget(comm);
        }
    });
    r
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommDestroy(comm: Comm) -> R {
    comm_end(CollOp::CommDestroy, &DESTROY, c"pncclCommDestroy", comm)
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommAbort(comm: Comm) -> R {
    comm_end(CollOp::CommAbort, &ABORT, c"pncclCommAbort", comm)
}

#[no_mangle]
pub unsafe extern "C" fn ncclCommFinalize(comm: Comm) -> R {
    comm_end(CollOp::CommFinalize, &FINALIZE, c"pncclCommFinalize", comm)
}

/// Polled often: records only a change to a non-success error per communicator.
#[no_mangle]
pub unsafe extern "C" fn ncclCommGetAsyncError(comm: Comm, async_error: *mut R) -> R {
    let f = real_fn!(ASYNC_ERROR, c"pncclCommGetAsyncError", FnAsyncError, NCCL_SYSTEM_ERROR);
    let start = clock::now();
    // SAFETY: forwarding the caller's arguments.
    let r = unsafe { f(comm, async_error) };
    if r == NCCL_SUCCESS && !async_error.is_null() {
        // SAFETY: NCCL wrote the error into the caller's out-pointer.
        let e = unsafe { *async_error };
        ffi_guard((), || {
            let Some(_inside) = Reentrancy::enter() else { return };
            let info = info(comm);
            let changed = find(comm).map(|s| s.last_async.swap(e, Ordering::Relaxed) != e).unwrap_or(true);
            if changed && e != NCCL_SUCCESS && e != NCCL_IN_PROGRESS {
                comm_event(CollOp::AsyncError, info, start, clock::now(), e);
            }
        });
    }
    r
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
    hook!("ncclCommInitRank", INIT_RANK, ncclCommInitRank),
    hook!("ncclCommInitRankConfig", INIT_RANK_CONFIG, ncclCommInitRankConfig),
    hook!("ncclCommInitAll", INIT_ALL, ncclCommInitAll),
    hook!("ncclCommSplit", SPLIT, ncclCommSplit),
    hook!("ncclCommDestroy", DESTROY, ncclCommDestroy),
    hook!("ncclCommAbort", ABORT, ncclCommAbort),
    hook!("ncclCommFinalize", FINALIZE, ncclCommFinalize),
    hook!("ncclCommGetAsyncError", ASYNC_ERROR, ncclCommGetAsyncError),
];

/// Registers [`HOOKS`] with the `dlsym` hook (idempotent; called when libtprof loads).
pub fn register_dlsym_hooks() {
    let _ = crate::intercept::dlsym::register_hooks(HOOKS);
}

extern "C" fn constructor() {
    ffi_guard((), register_dlsym_hooks)
}

/// Registers the NCCL wrappers with the `dlsym` hook when libtprof is loaded, before the program
/// can `dlopen` libnccl.
#[used]
#[link_section = ".init_array"]
static REGISTER_HOOKS: extern "C" fn() = constructor;

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
