//! The NCCL calls recorded as `Record::Collective`: collectives, send / recv, the one-sided signal
//! calls and groups. Each runs its real function with its shim correlation id pushed as CUPTI
//! external id (so the NCCL kernels carry it), published to the hang watchdog while it blocks;
//! outside a capture window a data-moving call is only tallied.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::atomic::Ordering;

use tprof_format::{CollOp, Record};

use super::communicators::{datatype_size, find, info, CommInfo};
use super::real_calls::{forward, nccl_wrappers, Comm, Stream, R};
use crate::base::panic_fence::ffi_guard;
use crate::base::{switch, ticks};
use crate::capture::{hang_watchdog, tallies};
use crate::record::reentrancy::Reentrancy;
use crate::record::{correlation, interning, recorder, thread};
use crate::{cupti, lifecycle};

/// What a wrapper says about its call: (op, communicator, count, datatype, peer or root, stream).
pub struct Described {
    op: CollOp,
    comm: Comm,
    count: u64,
    datatype: c_int,
    peer: i32,
    stream: Stream,
}

impl From<(CollOp, Comm, u64, c_int, i32, Stream)> for Described {
    fn from((op, comm, count, datatype, peer, stream): (CollOp, Comm, u64, c_int, i32, Stream)) -> Described {
        Described { op, comm, count, datatype, peer, stream }
    }
}

/// The bytes of a call as nccl-tests reports its size (see the module docs of `nccl`).
fn collective_bytes(op: CollOp, count: u64, datatype: c_int, nranks: u32) -> u64 {
    let elem = datatype_size(datatype);
    match op {
        CollOp::AllGather | CollOp::ReduceScatter | CollOp::AllToAll | CollOp::Gather | CollOp::Scatter => {
            count * elem * nranks.max(1) as u64
        }
        _ => count * elem,
    }
}

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

/// Runs `real` as the NCCL call `describe` tells, recording it (unless tprof is off or this thread
/// is already inside tprof) with the shim id pushed as CUPTI external correlation. Everything but the
/// real call runs behind the panic fence.
fn record(describe: impl FnOnce() -> Described, real: impl FnOnce() -> R) -> R {
    lifecycle::ensure_init();
    if !switch::is_recording() {
        // Outside a capture window the call is only counted.
        if switch::state() == switch::ENABLED {
            ffi_guard((), || {
                let d = describe();
                if d.op.moves_data() {
                    // The sequence number counts every data-moving call, recorded or not: the ranks'
                    // windows open and close at slightly different calls, and the numbers must
                    // still name the same collective on every rank.
                    if let Some(slot) = find(d.comm) {
                        slot.seq.fetch_add(1, Ordering::Relaxed);
                    }
                    let nranks = info(d.comm).nranks;
                    tallies::collective_unrecorded(d.op, collective_bytes(d.op, d.count, d.datatype, nranks), nranks);
                }
            });
        }
        return forward(real);
    }
    let Some(_inside) = Reentrancy::enter() else { return forward(real) };
    let call = ffi_guard(None, || {
        cupti::start_when_ready();
        let call = begin(describe());
        cupti::push_external(call.correlation);
        if call.op.moves_data() {
            hang_watchdog::note_collective(call.op, call.comm.id, call.seq);
        }
        // NCCL calls can block (group ends, communicator barriers): the hang watchdog watches them too.
        recorder::set_pending(interning::intern(call.op.name()), call.start);
        Some(call)
    });
    let Some(call) = call else { return forward(real) };
    let result = {
        let _link = crate::intercept::nccl_profiler::call_link::enter(call.correlation);
        forward(real)
    };
    ffi_guard((), || {
        recorder::clear_pending();
        cupti::pop_external();
        emit(&call, ticks::now(), result);
    });
    result
}

fn begin(d: Described) -> Call {
    let info = info(d.comm);
    let bytes = collective_bytes(d.op, d.count, d.datatype, info.nranks);
    let seq =
        if d.op.moves_data() { find(d.comm).map(|s| s.seq.fetch_add(1, Ordering::Relaxed)).unwrap_or(0) } else { 0 };
    Call {
        op: d.op,
        comm: info,
        count: d.count,
        datatype: d.datatype,
        bytes,
        peer: d.peer,
        stream: d.stream as u64,
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

/// `ncclWaitSignalDesc_t`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct WaitSignalDesc {
    pub op_cnt: c_int,
    pub peer: c_int,
    pub sig_idx: c_int,
    pub ctx: c_int,
}

/// `ncclWaitSignal`'s `count` (the signals waited for: the sum of `opCnt`) and `peer` (the one peer
/// waited for, else -1).
///
/// # Safety
/// `descs` must be NULL or hold `n_desc` descriptors (NCCL's contract).
unsafe fn signals_waited_for(n_desc: c_int, descs: *const WaitSignalDesc) -> (u64, i32) {
    if descs.is_null() || n_desc <= 0 {
        return (0, -1);
    }
    // SAFETY: NCCL's contract: `descs` holds `n_desc` descriptors.
    let d = unsafe { std::slice::from_raw_parts(descs, n_desc as usize) };
    let signals: u64 = d.iter().map(|x| x.op_cnt.max(0) as u64).sum();
    (signals, if d.len() == 1 { d[0].peer } else { -1 })
}

const NO_COMM: Comm = std::ptr::null_mut();
const NO_STREAM: Stream = std::ptr::null_mut();

nccl_wrappers! {
    fn ncclAllReduce(send: *const c_void, recv: *mut c_void, count: usize, dt: c_int, op: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::AllReduce, comm, count as u64, dt, -1, stream);
    fn ncclAllGather(send: *const c_void, recv: *mut c_void, sendcount: usize, dt: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::AllGather, comm, sendcount as u64, dt, -1, stream);
    fn ncclReduceScatter(send: *const c_void, recv: *mut c_void, recvcount: usize, dt: c_int, op: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::ReduceScatter, comm, recvcount as u64, dt, -1, stream);
    fn ncclBroadcast(send: *const c_void, recv: *mut c_void, count: usize, dt: c_int, root: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Broadcast, comm, count as u64, dt, root, stream);
    fn ncclBcast(buff: *mut c_void, count: usize, dt: c_int, root: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Broadcast, comm, count as u64, dt, root, stream);
    fn ncclReduce(send: *const c_void, recv: *mut c_void, count: usize, dt: c_int, op: c_int, root: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Reduce, comm, count as u64, dt, root, stream);
    fn ncclAllToAll(send: *const c_void, recv: *mut c_void, count: usize, dt: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::AllToAll, comm, count as u64, dt, -1, stream);
    fn ncclAlltoAll(send: *const c_void, recv: *mut c_void, count: usize, dt: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::AllToAll, comm, count as u64, dt, -1, stream);
    fn ncclGather(send: *const c_void, recv: *mut c_void, count: usize, dt: c_int, root: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Gather, comm, count as u64, dt, root, stream);
    fn ncclScatter(send: *const c_void, recv: *mut c_void, count: usize, dt: c_int, root: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Scatter, comm, count as u64, dt, root, stream);
    fn ncclSend(send: *const c_void, count: usize, dt: c_int, peer: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Send, comm, count as u64, dt, peer, stream);
    fn ncclRecv(recv: *mut c_void, count: usize, dt: c_int, peer: c_int, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Recv, comm, count as u64, dt, peer, stream);
    fn ncclGroupStart() -> R => collective (CollOp::GroupStart, NO_COMM, 0, 0, -1, NO_STREAM);
    /// Grouped collectives launch their kernels here, so the external correlation push matters.
    fn ncclGroupEnd() -> R => collective (CollOp::GroupEnd, NO_COMM, 0, 0, -1, NO_STREAM);
    fn ncclPutSignal(
        localbuff: *const c_void, count: usize, dt: c_int, peer: c_int, peer_win: *mut c_void, peer_win_offset: usize,
        sig_idx: c_int, ctx: c_int, flags: c_uint, comm: Comm, stream: Stream
    ) -> R => collective (CollOp::PutSignal, comm, count as u64, dt, peer, stream);
    fn ncclSignal(peer: c_int, sig_idx: c_int, ctx: c_int, flags: c_uint, comm: Comm, stream: Stream) -> R
        => collective (CollOp::Signal, comm, 0, -1, peer, stream);
    /// `count` = the signals waited for (sum of `opCnt`); `peer` = the one peer waited for, else -1.
    fn ncclWaitSignal(n_desc: c_int, descs: *mut WaitSignalDesc, comm: Comm, stream: Stream) -> R
        => collective {
            // SAFETY: NCCL's contract: `descs` holds `n_desc` descriptors.
            let (signals, peer) = unsafe { signals_waited_for(n_desc, descs) };
            (CollOp::WaitSignal, comm, signals, -1, peer, stream)
        };
}
