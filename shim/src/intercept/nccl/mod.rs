//! NCCL interposers: collectives, send/recv, the one-sided signal calls and groups
//! ([`collectives`]), the communicator life cycle ([`comm_lifecycle`]) and NCCL's memory calls
//! ([`memory_calls`]), as `Record::Collective` (and `Api` / `Memory` records for the memory calls),
//! all written by one macro ([`real_calls::nccl_wrappers`]); the communicators tprof knows are in
//! [`communicators`].
//!
//! Each wrapper forwards to the real function (see [`real_calls::resolve`]) and pushes its shim
//! correlation id as CUPTI external id around the call, so the NCCL kernels carry it. Programs that
//! `dlopen` libnccl and `dlsym` on its handle get the same wrappers through the `dlsym` hook, which
//! searches [`hooks`].
//!
//! Every forwarded call runs inside [`real_calls::forward`], so the NVTX injection can tell that the
//! NCCL library creating its "NCCL" domain is one whose calls tprof sees
//! ([`real_calls::forwarding`]): it then drops that domain's ranges, which would repeat the
//! collective records.
//!
//! # Communicator identity
//! `comm` in the records is the same on every rank of a communicator: a 64-bit FNV-1a hash of the
//! 128-byte `ncclUniqueId`, or derived from the parent for split / shrink / grow children (see
//! [`comm_lifecycle`]). `seq` counts the data-moving calls (collectives, send, recv) per communicator from 0;
//! the one-sided calls (put with signal, signal, wait) have no `seq` (0): only one side makes them.
//!
//! # Bytes convention (as nccl-tests reports "size")
//! - AllReduce, Broadcast, Reduce, Send, Recv, PutSignal: `count x sizeof(datatype)`;
//! - AllGather: `sendcount x sizeof(datatype) x nranks` (the gathered output);
//! - ReduceScatter: `recvcount x sizeof(datatype) x nranks` (the reduced input);
//! - AllToAll, Gather, Scatter: `count x sizeof(datatype) x nranks` (count is per peer);
//! - Signal, WaitSignal: 0 (`count` of WaitSignal = the signals waited for).
#![allow(clippy::missing_safety_doc)]

pub mod collectives;
pub mod comm_lifecycle;
pub mod communicators;
pub mod memory_calls;
pub mod real_calls;

use crate::intercept::real::Hook;

/// Every NCCL wrapper, for the `dlsym` hook (lookups on a libnccl handle).
pub fn hooks() -> impl Iterator<Item = &'static Hook> {
    [collectives::HOOKS, comm_lifecycle::HOOKS, memory_calls::HOOKS].into_iter().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hook_table_names_match_wrappers() {
        assert!(hooks().all(|h| h.name.to_bytes().starts_with(b"nccl") && h.real.name() == h.name));
        assert_eq!(hooks().count(), 35, "every NCCL wrapper is in a table");
    }
}
