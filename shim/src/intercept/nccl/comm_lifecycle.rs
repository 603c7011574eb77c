//! Communicator life cycle: the init calls, the calls that derive a communicator from another
//! (split, shrink, grow), destroy / abort / finalize and async errors, as `CommInit` .. `AsyncError`
//! collective records.
//!
//! # Identity of each kind of communicator (`comm` in the records)
//! - `ncclCommInitRank` / `ncclCommInitRankConfig`: FNV-1a of the 128-byte unique id;
//! - `ncclCommInitRankScalable`: FNV-1a of its `nId` unique ids in order (NCCL requires the same ids in
//!   the same order on every rank; one id gives the same value as `ncclCommInitRank`);
//! - `ncclCommSplit` children: (parent id, child ordinal on the parent, color);
//! - `ncclCommGrow`, existing ranks: (parent id, child ordinal on the parent). Split and grow are
//!   collective over the whole parent, so the ordinal agrees on every rank of the parent;
//! - `ncclCommGrow`, joining ranks (no parent): FNV-1a of the grow unique id. No public NCCL call
//!   gives a joining rank the parent's identity, so its id differs from the existing ranks' one;
//! - `ncclCommShrink`: (parent id, shrink ordinal on the parent, the excluded ranks as a set); only the
//!   surviving ranks call it, hence its own ordinal;
//! - `ncclCommInitAll`: (pid, call ordinal): all its ranks live in this process.

use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use tprof_format::CollOp;

use super::communicators::{
    comm_event, find, fnv, forget, info, query, remember, unique_id_hash, CommInfo, NcclUniqueId,
};
use super::real_calls::{forward, nccl_wrappers, Comm, NCCL_IN_PROGRESS, NCCL_SUCCESS, R};
use crate::base::panic_fence::ffi_guard;
use crate::base::ticks;
use crate::record::reentrancy::Reentrancy;
use crate::{cupti, lifecycle};

/// `ncclCommInitAll` calls so far (part of the identity of the communicators each makes).
static INIT_ALL_CALLS: AtomicU64 = AtomicU64::new(0);

/// Wraps a communicator-creating call: runs it, then registers and records what it created.
fn create(real: impl FnOnce() -> R, register: impl FnOnce(R)) -> R {
    lifecycle::ensure_init();
    let Some(_inside) = Reentrancy::enter() else { return forward(real) };
    ffi_guard((), cupti::start_when_ready);
    let result = forward(real);
    ffi_guard((), || register(result));
    result
}

/// The identity of a communicator made by `ncclCommInitRankScalable` from `n` unique ids.
///
/// # Safety
/// `ids` must be NULL or point at `n` unique ids.
pub unsafe fn scalable_id(ids: *const NcclUniqueId, n: c_int) -> u64 {
    if ids.is_null() || n <= 0 {
        return 0;
    }
    // SAFETY: caller contract: `n` readable unique ids.
    let ids = unsafe { std::slice::from_raw_parts(ids, n as usize) };
    fnv(ids.iter().flat_map(|id| id.internal.iter().map(|&c| c as u8)))
}

/// The identity of a split child: identical on every rank of one color, different between colors.
pub fn split_child_id(parent: u64, ordinal: u64, color: c_int) -> u64 {
    fnv(parent.to_le_bytes().into_iter().chain(ordinal.to_le_bytes()).chain(color.to_le_bytes()))
}

/// The identity of a grown communicator on the ranks that were in the parent.
pub fn grow_child_id(parent: u64, ordinal: u64) -> u64 {
    fnv(b"grow".iter().copied().chain(parent.to_le_bytes()).chain(ordinal.to_le_bytes()))
}

/// The identity of a shrunk communicator: the excluded ranks count as a set (any order).
pub fn shrink_child_id(parent: u64, ordinal: u64, excluded: &[c_int]) -> u64 {
    let mut set: Vec<c_int> = excluded.to_vec();
    set.sort_unstable();
    set.dedup();
    fnv(b"shrink"
        .iter()
        .copied()
        .chain(parent.to_le_bytes())
        .chain(ordinal.to_le_bytes())
        .chain(set.iter().flat_map(|r| r.to_le_bytes())))
}

/// Registers the communicator NCCL wrote into `comm_out` under `id` and records its `CommInit`.
fn registered(comm_out: *mut Comm, id: u64, rank: c_int, nranks: c_int, start: u64, result: R) {
    if result != NCCL_SUCCESS && result != NCCL_IN_PROGRESS {
        comm_event(
            CollOp::CommInit,
            CommInfo { id, rank: rank.max(0) as u32, nranks: nranks.max(0) as u32, device: 0 },
            start,
            ticks::now(),
            result,
        );
        return;
    }
    // SAFETY: on success NCCL wrote the new communicator into the caller's out-pointer.
    let comm = if comm_out.is_null() { std::ptr::null_mut() } else { unsafe { *comm_out } };
    let (_, _, device) = query(comm);
    let info = CommInfo { id, rank: rank.max(0) as u32, nranks: nranks.max(0) as u32, device };
    let _ = remember(comm, id, info.rank, info.nranks, device);
    comm_event(CollOp::CommInit, info, start, ticks::now(), result);
}

/// Registers a communicator derived from another one, asking NCCL for its rank and size.
fn registered_child(newcomm: *mut Comm, id: u64, start: u64, result: R) {
    // SAFETY: NCCL wrote the child (or NULL) into the out-pointer when the call did not fail.
    let child = if newcomm.is_null() || (result != NCCL_SUCCESS && result != NCCL_IN_PROGRESS) {
        std::ptr::null_mut()
    } else {
        unsafe { *newcomm }
    };
    if child.is_null() && result == NCCL_SUCCESS {
        return; // NCCL_SPLIT_NOCOLOR: no child on this rank
    }
    let (rank, nranks, _) = if child.is_null() { (0, 0, 0) } else { query(child) };
    registered(newcomm, id, rank as c_int, nranks as c_int, start, result);
}

/// The next child ordinal of `comm` (split and grow; 0 for a communicator tprof does not know).
fn next_child(comm: Comm) -> u64 {
    find(comm).map(|s| s.splits.fetch_add(1, Ordering::Relaxed)).unwrap_or(0)
}

/// Destroy / abort / finalize: recorded with what tprof knew of the communicator before.
fn comm_end(op: CollOp, comm: Comm, real: impl FnOnce() -> R) -> R {
    lifecycle::ensure_init();
    let Some(_inside) = Reentrancy::enter() else { return forward(real) };
    let before = ffi_guard(CommInfo::default(), || info(comm));
    let start = ticks::now();
    let r = forward(real);
    ffi_guard((), || {
        comm_event(op, before, start, ticks::now(), r);
        if op != CollOp::CommFinalize {
            forget(comm);
        }
    });
    r
}

nccl_wrappers! {
    /// Passes through; wrapped so that NCCL's first-use initialisation (which creates its NVTX domain)
    /// runs inside an NCCL interposer on the rank that makes the unique id.
    fn ncclGetUniqueId(id: *mut NcclUniqueId) -> R => call (real) {
        // SAFETY: forwarding the caller's argument.
        forward(|| unsafe { real(id) })
    };
    fn ncclCommInitRank(comm: *mut Comm, nranks: c_int, id: NcclUniqueId, rank: c_int) -> R => call (real) {
        let start = ticks::now();
        // SAFETY: forwarding the caller's arguments to the real function.
        create(|| unsafe { real(comm, nranks, id, rank) }, |r| registered(comm, unique_id_hash(&id), rank, nranks, start, r))
    };
    fn ncclCommInitRankConfig(comm: *mut Comm, nranks: c_int, id: NcclUniqueId, rank: c_int, config: *mut c_void) -> R
        => call (real) {
        let start = ticks::now();
        create(
            // SAFETY: forwarding the caller's arguments to the real function.
            || unsafe { real(comm, nranks, id, rank, config) },
            |r| registered(comm, unique_id_hash(&id), rank, nranks, start, r),
        )
    };
    fn ncclCommInitRankScalable(
        newcomm: *mut Comm, nranks: c_int, myrank: c_int, n_id: c_int, comm_ids: *mut NcclUniqueId, config: *mut c_void
    ) -> R => call (real) {
        let start = ticks::now();
        // SAFETY: NCCL's contract: `comm_ids` holds `n_id` unique ids (read before NCCL may fail on them).
        let id = ffi_guard(0, || unsafe { scalable_id(comm_ids, n_id) });
        create(
            // SAFETY: forwarding the caller's arguments to the real function.
            || unsafe { real(newcomm, nranks, myrank, n_id, comm_ids, config) },
            |r| registered(newcomm, id, myrank, nranks, start, r),
        )
    };
    fn ncclCommInitAll(comms: *mut Comm, ndev: c_int, devlist: *const c_int) -> R => call (real) {
        let start = ticks::now();
        create(
            // SAFETY: forwarding the caller's arguments to the real function.
            || unsafe { real(comms, ndev, devlist) },
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
    };
    fn ncclCommSplit(comm: Comm, color: c_int, key: c_int, newcomm: *mut Comm, config: *mut c_void) -> R => call (real) {
        let start = ticks::now();
        let (parent, ordinal) = ffi_guard((CommInfo::default(), 0), || (info(comm), next_child(comm)));
        create(
            // SAFETY: forwarding the caller's arguments to the real function.
            || unsafe { real(comm, color, key, newcomm, config) },
            |r| registered_child(newcomm, split_child_id(parent.id, ordinal, color), start, r),
        )
    };
    fn ncclCommShrink(
        comm: Comm, exclude_ranks: *mut c_int, exclude_count: c_int, newcomm: *mut Comm, config: *mut c_void,
        shrink_flags: c_int
    ) -> R => call (real) {
        let start = ticks::now();
        let id = ffi_guard(0, || {
            let parent = info(comm);
            let ordinal = find(comm).map(|s| s.shrinks.fetch_add(1, Ordering::Relaxed)).unwrap_or(0);
            let excluded: &[c_int] = if exclude_ranks.is_null() || exclude_count <= 0 {
                &[]
            } else {
                // SAFETY: NCCL's contract: the list holds `exclude_count` ranks.
                unsafe { std::slice::from_raw_parts(exclude_ranks, exclude_count as usize) }
            };
            shrink_child_id(parent.id, ordinal, excluded)
        });
        create(
            // SAFETY: forwarding the caller's arguments to the real function.
            || unsafe { real(comm, exclude_ranks, exclude_count, newcomm, config, shrink_flags) },
            |r| registered_child(newcomm, id, start, r),
        )
    };
    fn ncclCommGrow(
        comm: Comm, nranks: c_int, unique_id: *const NcclUniqueId, rank: c_int, newcomm: *mut Comm, config: *mut c_void
    ) -> R => call (real) {
        let start = ticks::now();
        let id = ffi_guard(0, || {
            if !comm.is_null() {
                grow_child_id(info(comm).id, next_child(comm))
            } else if !unique_id.is_null() {
                // SAFETY: a joining rank passes the grow unique id (NCCL rejects NULL for it).
                unique_id_hash(unsafe { &*unique_id })
            } else {
                0
            }
        });
        create(
            // SAFETY: forwarding the caller's arguments to the real function.
            || unsafe { real(comm, nranks, unique_id, rank, newcomm, config) },
            |r| registered_child(newcomm, id, start, r),
        )
    };
    fn ncclCommDestroy(comm: Comm) -> R => call (real) {
        // SAFETY: forwarding the caller's argument.
        comm_end(CollOp::CommDestroy, comm, || unsafe { real(comm) })
    };
    fn ncclCommAbort(comm: Comm) -> R => call (real) {
        // SAFETY: forwarding the caller's argument.
        comm_end(CollOp::CommAbort, comm, || unsafe { real(comm) })
    };
    fn ncclCommFinalize(comm: Comm) -> R => call (real) {
        // SAFETY: forwarding the caller's argument.
        comm_end(CollOp::CommFinalize, comm, || unsafe { real(comm) })
    };
    /// Polled often: records only a change to a non-success error per communicator.
    fn ncclCommGetAsyncError(comm: Comm, async_error: *mut R) -> R => call (real) {
        let start = ticks::now();
        // SAFETY: forwarding the caller's arguments.
        let r = forward(|| unsafe { real(comm, async_error) });
        if r == NCCL_SUCCESS && !async_error.is_null() {
            // SAFETY: NCCL wrote the error into the caller's out-pointer.
            let e = unsafe { *async_error };
            ffi_guard((), || {
                let Some(_inside) = Reentrancy::enter() else { return };
                let info = info(comm);
                let changed = find(comm).map(|s| s.last_async.swap(e, Ordering::Relaxed) != e).unwrap_or(true);
                if changed && e != NCCL_SUCCESS && e != NCCL_IN_PROGRESS {
                    comm_event(CollOp::AsyncError, info, start, ticks::now(), e);
                }
            });
        }
        r
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(byte: u8) -> NcclUniqueId {
        let mut u = NcclUniqueId { internal: [0; 128] };
        u.internal[0] = byte as _;
        u
    }

    #[test]
    fn one_scalable_id_is_the_init_rank_identity() {
        let a = id(7);
        // SAFETY: one readable id.
        assert_eq!(unsafe { scalable_id(&a, 1) }, unique_id_hash(&a));
    }

    #[test]
    fn scalable_identity_depends_on_every_id_and_their_order() {
        let ab = [id(1), id(2)];
        let ba = [id(2), id(1)];
        // SAFETY: two readable ids each.
        let (x, y) = unsafe { (scalable_id(ab.as_ptr(), 2), scalable_id(ba.as_ptr(), 2)) };
        assert_ne!(x, y);
        // SAFETY: as above.
        assert_ne!(x, unsafe { scalable_id(ab.as_ptr(), 1) });
        // SAFETY: NULL is handled.
        assert_eq!(unsafe { scalable_id(std::ptr::null(), 2) }, 0);
    }

    #[test]
    fn children_differ_by_color_ordinal_and_kind() {
        assert_eq!(split_child_id(9, 0, 1), split_child_id(9, 0, 1));
        assert_ne!(split_child_id(9, 0, 0), split_child_id(9, 0, 1));
        assert_ne!(split_child_id(9, 0, 0), split_child_id(9, 1, 0));
        assert_ne!(grow_child_id(9, 0), split_child_id(9, 0, 0));
        assert_eq!(shrink_child_id(9, 0, &[3, 1]), shrink_child_id(9, 0, &[1, 3, 3]));
        assert_ne!(shrink_child_id(9, 0, &[1]), shrink_child_id(9, 0, &[2]));
    }
}
