//! The communicators tprof knows: a fixed lock-free table from `ncclComm_t` to what the records say
//! about it (identity, rank, size, device, per-communicator counters), the identity hash, and the
//! communicator-level records (init, destroy, abort, finalize, async error).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicI32, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use tprof_format::{CollOp, Record};

use super::real_calls::{forward, resolve, Comm, NCCL_SUCCESS, R};
use crate::base::switch;
use crate::intercept::real::RealFn;
use crate::record::{correlation, recorder, thread};

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

/// 64-bit FNV-1a.
pub fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

const COMMS: usize = 256;

/// One known communicator.
pub struct CommSlot {
    key: AtomicUsize,
    id: AtomicU64,
    rank: AtomicU32,
    nranks: AtomicU32,
    device: AtomicU32,
    /// Data-moving calls so far (the records' `seq`).
    pub seq: AtomicU64,
    /// Children made by split or grow (collective over the whole parent).
    pub splits: AtomicU64,
    /// Children made by shrink (collective over the surviving ranks only).
    pub shrinks: AtomicU64,
    /// The last async error reported (only changes are recorded).
    pub last_async: AtomicI32,
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

/// The slot of a known communicator.
pub fn find(comm: Comm) -> Option<&'static CommSlot> {
    let k = comm as usize;
    if k == 0 {
        return None;
    }
    TABLE.iter().find(|s| s.key.load(Ordering::Acquire) == k)
}

/// Claims a slot for `comm` (reusing its own slot if the pointer is known).
pub fn remember(comm: Comm, id: u64, rank: u32, nranks: u32, device: u32) -> Option<&'static CommSlot> {
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

/// Frees the slot of a communicator that is gone.
pub fn forget(comm: Comm) {
    if let Some(s) = find(comm) {
        s.key.store(0, Ordering::Release);
    }
}

/// What the records say about a communicator.
#[derive(Clone, Copy, Default)]
pub struct CommInfo {
    pub id: u64,
    pub rank: u32,
    pub nranks: u32,
    pub device: u32,
}

/// What the records say about `comm` (learnt from NCCL now if tprof did not see it made).
pub fn info(comm: Comm) -> CommInfo {
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
pub(super) fn query(comm: Comm) -> (u32, u32, u32) {
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

/// Records a communicator-level event (init, destroy, abort, finalize, async error) with explicit times.
pub fn comm_event(op: CollOp, info: CommInfo, start: u64, end: u64, result: R) {
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
}
