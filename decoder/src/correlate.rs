//! Correlation, streaming per process:
//! - NCCL call <-> its kernel (same correlation id; else in order of issue),
//! - NVTX range <-> the GPU work launched inside it (GPU time projected onto ranges, inclusive of
//!   nested ranges, as nsys's NVTX GPU projection).
//!
//! State is bounded by in-flight work (calls waiting for their kernel) and by ranges, not by events.
//! The range projection is in [`projection`].

use std::collections::VecDeque;

use crate::intervals::FastMap;
use crate::model::*;

mod projection;

pub(crate) use projection::Generations;
#[cfg(test)]
pub(crate) use projection::GENERATION;
pub use projection::{RangeProjection, RangeStat};

/// One collective with both sides when known.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectiveInstance {
    pub op: CollOp,
    pub bytes: u64,
    pub nranks: u32,
    pub comm: u64,
    pub seq: u64,
    pub host: Option<(Ns, Ns)>,
    pub gpu: Option<(Ns, Ns)>,
}

impl CollectiveInstance {
    /// The time nccl-tests would use: the kernel's duration when known, else the host call's.
    pub fn time_ns(&self) -> Ns {
        match (self.gpu, self.host) {
            (Some((s, e)), _) | (None, Some((s, e))) => e.saturating_sub(s),
            _ => 0,
        }
    }
}

/// Pairs NCCL calls with their kernels.
///
/// A call outside a group launches its kernel itself: the two share the call's correlation id. The
/// calls of a group (`ncclGroupStart` .. the outermost `ncclGroupEnd` on one thread) launch nothing;
/// their kernels are launched by the `ncclGroupEnd` and carry its correlation id, several kernels
/// to one id (two devices in one process, several operations in one group). Those are paired per
/// device in call order; the send/recv of a group on one device share one fused kernel (as NCCL
/// launches them), and collectives fused into fewer kernels than calls share the last one.
///
/// `T` is what one pairing becomes ([`CollectiveInstance`] for the summary; the diagnoses keep the
/// whole call).
#[derive(Debug)]
pub struct CollectiveMatcher<T: FromPairing = CollectiveInstance> {
    calls: FastMap<u64, Collective>,
    /// Kernels whose call (or group) has not been seen yet, by correlation.
    kernels: FastMap<u64, Vec<Kernel>>,
    /// Open groups per thread: depth and the data-moving calls made inside.
    open: FastMap<u32, (u32, Vec<Collective>)>,
    /// Closed groups waiting for their kernels, by the group end's correlation id, oldest first.
    groups: FastMap<u64, GroupCalls>,
    group_order: VecDeque<u64>,
    /// Calls and kernels without a correlation id, matched in order at the end.
    calls_fifo: VecDeque<Collective>,
    kernels_fifo: VecDeque<Kernel>,
    pub done: Vec<T>,
}

impl<T: FromPairing> Default for CollectiveMatcher<T> {
    fn default() -> Self {
        CollectiveMatcher {
            calls: FastMap::default(),
            kernels: FastMap::default(),
            open: FastMap::default(),
            groups: FastMap::default(),
            group_order: VecDeque::new(),
            calls_fifo: VecDeque::new(),
            kernels_fifo: VecDeque::new(),
            done: Vec::new(),
        }
    }
}

/// What a pairing of a call and its kernel (either may be missing) becomes. `gpu` is the kernel's
/// span, or the span of the fused kernel a grouped call shares when its own kernel is not there.
pub trait FromPairing {
    fn from_pairing(call: Option<&Collective>, kernel: Option<&Kernel>, gpu: Option<(Ns, Ns)>) -> Self;
}

impl FromPairing for CollectiveInstance {
    fn from_pairing(call: Option<&Collective>, kernel: Option<&Kernel>, gpu: Option<(Ns, Ns)>) -> Self {
        let mut i = instance(call, kernel);
        if kernel.is_none() {
            i.gpu = gpu;
        }
        i
    }
}

/// The calls of one closed group still waiting for a kernel, and the last kernel seen per device.
#[derive(Debug, Default)]
struct GroupCalls {
    pending: Vec<Collective>,
    last_kernel: Vec<(u32, (Ns, Ns))>,
}

/// Closed groups kept waiting for kernels at most; the oldest is then resolved with what it has.
const MAX_PENDING_GROUPS: usize = 1 << 16;

fn instance(c: Option<&Collective>, k: Option<&Kernel>) -> CollectiveInstance {
    let info = k.and_then(|k| k.collective.as_ref());
    CollectiveInstance {
        op: c
            .map(|c| c.op)
            .or(info.map(|i| i.op))
            .unwrap_or_else(|| k.map(|k| coll_op_from_name(&k.name)).unwrap_or_default()),
        bytes: c.map(|c| c.bytes).or(info.map(|i| i.bytes)).unwrap_or(0),
        nranks: c.map(|c| c.nranks).or(info.map(|i| i.nranks)).unwrap_or(0),
        comm: c.map(|c| c.comm).unwrap_or(0),
        seq: c.map(|c| c.seq).unwrap_or(0),
        host: c.map(|c| (c.start, c.end)),
        gpu: k.map(|k| (k.start, k.end)),
    }
}

fn pairing<T: FromPairing>(call: Option<&Collective>, kernel: Option<&Kernel>) -> T {
    T::from_pairing(call, kernel, kernel.map(|k| (k.start, k.end)))
}

impl<T: FromPairing> CollectiveMatcher<T> {
    pub fn call(&mut self, c: &Collective) {
        match c.op {
            CollOp::GroupStart => {
                self.open.entry(c.tid).or_default().0 += 1;
                return;
            }
            CollOp::GroupEnd => {
                self.group_end(c);
                return;
            }
            _ => {}
        }
        if !c.op.moves_data() {
            return;
        }
        if let Some((depth, calls)) = self.open.get_mut(&c.tid) {
            if *depth > 0 {
                calls.push(c.clone());
                return;
            }
        }
        if c.correlation == 0 {
            self.calls_fifo.push_back(c.clone());
        } else if let Some(k) = self.take_kernel(c.correlation) {
            self.done.push(pairing(Some(c), Some(&k)));
        } else {
            self.calls.insert(c.correlation, c.clone());
        }
    }

    /// The outermost group end closes the thread's group: its calls wait for the kernels that carry
    /// the group end's correlation id.
    fn group_end(&mut self, end: &Collective) {
        let Some((depth, calls)) = self.open.get_mut(&end.tid) else { return };
        *depth = depth.saturating_sub(1);
        if *depth > 0 {
            return;
        }
        let calls = std::mem::take(calls);
        self.open.remove(&end.tid);
        if calls.is_empty() {
            return;
        }
        if end.correlation == 0 {
            // No link to the kernels: they pair in issue order at the end, like uncorrelated calls.
            self.calls_fifo.extend(calls);
            return;
        }
        if self.groups.len() >= MAX_PENDING_GROUPS {
            if let Some(oldest) = self.group_order.pop_front() {
                if let Some(g) = self.groups.remove(&oldest) {
                    self.resolve_group(g);
                }
            }
        }
        self.groups.insert(end.correlation, GroupCalls { pending: calls, last_kernel: Vec::new() });
        self.group_order.push_back(end.correlation);
        let mut early = self.kernels.remove(&end.correlation).unwrap_or_default();
        early.sort_by_key(|k| k.start);
        for k in early {
            self.group_kernel(end.correlation, &k);
        }
    }

    fn take_kernel(&mut self, correlation: u64) -> Option<Kernel> {
        let list = self.kernels.get_mut(&correlation)?;
        let k = (!list.is_empty()).then(|| list.remove(0));
        if list.is_empty() {
            self.kernels.remove(&correlation);
        }
        k
    }

    /// One kernel of a closed group: the next call on its device, or every send/recv on its device
    /// for the fused point-to-point kernel.
    fn group_kernel(&mut self, g: u64, k: &Kernel) {
        let Some(group) = self.groups.get_mut(&g) else { return };
        let on_device = |c: &Collective| c.device == k.device;
        let device_known = group.pending.iter().any(on_device);
        let mine = |c: &Collective| !device_known || on_device(c);
        let p2p_kernel = coll_op_from_name(&k.name) == CollOp::Send
            || k.name.contains("SendRecv")
            || group.pending.iter().filter(|c| mine(c)).all(|c| c.op.is_p2p());
        let mut taken = Vec::new();
        if p2p_kernel {
            let mut i = 0;
            while i < group.pending.len() {
                if mine(&group.pending[i]) && group.pending[i].op.is_p2p() {
                    taken.push(group.pending.remove(i));
                } else {
                    i += 1;
                }
            }
        } else if let Some(i) = group.pending.iter().position(|c| mine(c) && !c.op.is_p2p()) {
            taken.push(group.pending.remove(i));
        }
        match group.last_kernel.iter_mut().find(|(d, _)| *d == k.device) {
            Some(e) => e.1 = (k.start, k.end),
            None => group.last_kernel.push((k.device, (k.start, k.end))),
        }
        let empty = group.pending.is_empty();
        if taken.is_empty() {
            self.done.push(pairing(None, Some(k)));
        }
        for c in &taken {
            self.done.push(pairing(Some(c), Some(k)));
        }
        if empty {
            self.groups.remove(&g);
            self.group_order.retain(|&x| x != g);
        }
    }

    /// A group whose kernels will not come: calls on a device that had a kernel share its time (the
    /// collectives were fused into fewer kernels), the others keep their host times.
    fn resolve_group(&mut self, g: GroupCalls) {
        for c in &g.pending {
            let gpu = g.last_kernel.iter().find(|(d, _)| *d == c.device).map(|e| e.1);
            self.done.push(T::from_pairing(Some(c), None, gpu));
        }
    }

    /// Feed every kernel; non-communication kernels are ignored.
    pub fn kernel(&mut self, k: &Kernel) {
        if k.work_kind() != GpuWorkKind::Communication {
            return;
        }
        if k.correlation != 0 && self.groups.contains_key(&k.correlation) {
            self.group_kernel(k.correlation, k);
        } else if let Some(c) = (k.correlation != 0).then(|| self.calls.remove(&k.correlation)).flatten() {
            self.done.push(pairing(Some(&c), Some(k)));
        } else if k.correlation != 0 {
            // Nearly always the only kernel of its correlation: room for one (an empty Vec's first
            // push would make room for four, ~480 B per waiting kernel).
            self.kernels.entry(k.correlation).or_insert_with(|| Vec::with_capacity(1)).push(k.clone());
        } else {
            self.kernels_fifo.push_back(k.clone());
        }
    }

    /// End of the process: groups resolve with what they have, leftovers are paired in issue order,
    /// the rest stand alone.
    pub fn finish(&mut self) {
        self.finish_accepting(|_, _| true);
    }

    /// [`finish`](Self::finish), pairing a leftover call with the next leftover kernel only when
    /// `accept` says the two can belong together (else both stand alone).
    pub fn finish_accepting(&mut self, accept: impl Fn(&Collective, &Kernel) -> bool) {
        for g in std::mem::take(&mut self.group_order) {
            if let Some(group) = self.groups.remove(&g) {
                self.resolve_group(group);
            }
        }
        for (_, (_, calls)) in self.open.drain() {
            self.calls_fifo.extend(calls);
        }
        let mut calls: Vec<Collective> = self.calls.drain().map(|(_, c)| c).chain(self.calls_fifo.drain(..)).collect();
        let mut kernels: Vec<Kernel> =
            self.kernels.drain().flat_map(|(_, k)| k).chain(self.kernels_fifo.drain(..)).collect();
        calls.sort_by_key(|c| c.start);
        kernels.sort_by_key(|k| k.start);
        // Kernels that carry their own collective info (imports) stand alone, and so do kernels a
        // CUDA graph launch ran: a replay of a captured call, whose capture-time call (left over:
        // its kernel ran only in the replays) must not take a replay's kernel as its own.
        let (own, mut plain): (Vec<Kernel>, Vec<Kernel>) =
            kernels.into_iter().partition(|k| k.collective.is_some() || k.graph_id != 0);
        for k in &own {
            self.done.push(pairing(None, Some(k)));
        }
        let n = calls.len().min(plain.len());
        for (c, k) in calls.iter().zip(plain.iter()).take(n) {
            if accept(c, k) {
                self.done.push(pairing(Some(c), Some(k)));
            } else {
                self.done.push(pairing(Some(c), None));
                self.done.push(pairing(None, Some(k)));
            }
        }
        for c in &calls[n..] {
            self.done.push(pairing(Some(c), None));
        }
        for k in plain.drain(n..) {
            self.done.push(pairing(None, Some(&k)));
        }
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(corr: u64, start: Ns, end: Ns, name: &str) -> Kernel {
        Kernel {
            proc: ProcId(0),
            device: 0,
            context: 0,
            stream: 1,
            start,
            end,
            name: name.into(),
            grid: [1; 3],
            block: [1; 3],
            registers: 0,
            shared_mem: 0,
            correlation: corr,
            graph_id: 0,
            collective: None,
        }
    }

    #[test]
    fn matches_calls_and_kernels() {
        let mut m: CollectiveMatcher = CollectiveMatcher::default();
        let call = |corr, start| Collective {
            proc: ProcId(0),
            tid: 1,
            op: CollOp::AllReduce,
            start,
            end: start + 1,
            comm: 1,
            rank: 0,
            nranks: 4,
            count: 0,
            datatype: 0,
            bytes: 100,
            peer: -1,
            stream: 0,
            seq: 0,
            result: 0,
            correlation: corr,
            device: 0,
            range: None,
        };
        m.kernel(&kernel(5, 10, 30, "ncclKernel_AllReduce"));
        m.call(&call(5, 1));
        m.call(&call(0, 40));
        m.kernel(&kernel(0, 50, 90, "ncclKernel_AllReduce"));
        m.kernel(&kernel(7, 0, 5, "gemm"));
        m.finish();
        assert_eq!(m.done.len(), 2);
        assert!(m.done.iter().all(|c| c.gpu.is_some() && c.host.is_some()));
        assert_eq!(m.done.iter().map(|c| c.time_ns()).sum::<u64>(), 60);
    }

    fn coll(op: CollOp, corr: u64, device: u32, seq: u64, bytes: u64) -> Collective {
        Collective {
            proc: ProcId(0),
            tid: 1,
            op,
            start: seq * 10,
            end: seq * 10 + 1,
            comm: 9,
            rank: device,
            nranks: 2,
            count: 0,
            datatype: 0,
            bytes,
            peer: if op.is_p2p() { 1 - device as i32 } else { -1 },
            stream: 0,
            seq,
            result: 0,
            correlation: corr,
            device,
            range: None,
        }
    }

    fn on(device: u32, mut k: Kernel) -> Kernel {
        k.device = device;
        k
    }

    #[test]
    fn grouped_calls_pair_with_the_group_ends_kernels_per_device_in_call_order() {
        // One thread drives two devices: a group of all-reduce (1 MiB) and all-gather (4 MiB) on each.
        let mut m: CollectiveMatcher = CollectiveMatcher::default();
        let g = 100;
        // A kernel of the group arrives before the group's records (CUPTI's buffers come later or
        // earlier than the host's).
        m.kernel(&on(1, kernel(g, 200, 260, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")));
        m.call(&coll(CollOp::GroupStart, 1, 0, 0, 0));
        m.call(&coll(CollOp::AllReduce, 2, 0, 0, 1 << 20));
        m.call(&coll(CollOp::AllReduce, 3, 1, 0, 1 << 20));
        m.call(&coll(CollOp::AllGather, 4, 0, 1, 4 << 20));
        m.call(&coll(CollOp::AllGather, 5, 1, 1, 4 << 20));
        m.call(&coll(CollOp::GroupEnd, g, 0, 0, 0));
        m.kernel(&on(0, kernel(g, 200, 250, "ncclDevKernel_AllReduce_Sum_f32_RING_LL")));
        m.kernel(&on(0, kernel(g, 250, 450, "ncclDevKernel_AllGather_RING_LL")));
        m.kernel(&on(1, kernel(g, 260, 470, "ncclDevKernel_AllGather_RING_LL")));
        m.finish();
        type Row = (CollOp, u64, Option<(Ns, Ns)>);
        let mut got: Vec<Row> = m.done.iter().map(|c| (c.op, c.bytes, c.gpu)).collect();
        got.sort_by_key(|g| (g.0 as u8, g.2));
        assert_eq!(
            got,
            vec![
                (CollOp::AllReduce, 1 << 20, Some((200, 250))),
                (CollOp::AllReduce, 1 << 20, Some((200, 260))),
                (CollOp::AllGather, 4 << 20, Some((250, 450))),
                (CollOp::AllGather, 4 << 20, Some((260, 470))),
            ]
        );
    }

    #[test]
    fn grouped_send_recv_share_their_fused_kernel() {
        let mut m: CollectiveMatcher = CollectiveMatcher::default();
        m.call(&coll(CollOp::GroupStart, 1, 0, 0, 0));
        m.call(&coll(CollOp::Send, 2, 0, 0, 1 << 20));
        m.call(&coll(CollOp::Recv, 3, 0, 1, 1 << 20));
        m.call(&coll(CollOp::GroupEnd, 7, 0, 0, 0));
        m.kernel(&kernel(7, 100, 180, "ncclDevKernel_SendRecv"));
        m.finish();
        assert_eq!(m.done.len(), 2);
        assert!(m.done.iter().all(|c| c.gpu == Some((100, 180))), "{:?}", m.done);
    }

    #[test]
    fn graph_replayed_kernels_are_not_the_capture_time_calls() {
        // Two all-reduces captured (calls 2 and 3, their kernels never run under those ids), the
        // graph launched twice (launch correlations 10 and 11), then one eager all-reduce (call 4).
        let mut m: CollectiveMatcher = CollectiveMatcher::default();
        m.call(&coll(CollOp::AllReduce, 2, 0, 0, 1 << 20));
        m.call(&coll(CollOp::AllReduce, 3, 0, 1, 1 << 20));
        for (i, launch) in [10u64, 11].into_iter().enumerate() {
            for n in 0..2u64 {
                let mut k = kernel(
                    launch,
                    100 + 100 * i as u64 + 40 * n,
                    130 + 100 * i as u64 + 40 * n,
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                );
                k.graph_id = 1;
                m.kernel(&k);
            }
        }
        m.call(&coll(CollOp::AllReduce, 4, 0, 2, 1 << 20));
        m.kernel(&kernel(4, 400, 430, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
        m.finish();
        let host_only = m.done.iter().filter(|c| c.host.is_some() && c.gpu.is_none()).count();
        let replays = m.done.iter().filter(|c| c.host.is_none() && c.gpu.is_some()).count();
        let eager: Vec<_> = m.done.iter().filter(|c| c.host.is_some() && c.gpu.is_some()).collect();
        assert_eq!((host_only, replays, m.done.len()), (2, 4, 7), "{:?}", m.done);
        assert_eq!(eager.len(), 1);
        assert_eq!(eager[0].gpu, Some((400, 430)));
    }

    #[test]
    fn collectives_fused_into_fewer_kernels_share_the_last_one() {
        let mut m: CollectiveMatcher = CollectiveMatcher::default();
        m.call(&coll(CollOp::GroupStart, 1, 0, 0, 0));
        m.call(&coll(CollOp::AllReduce, 2, 0, 0, 1 << 20));
        m.call(&coll(CollOp::AllReduce, 3, 0, 1, 1 << 20));
        m.call(&coll(CollOp::GroupEnd, 7, 0, 0, 0));
        m.kernel(&kernel(7, 100, 300, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
        m.finish();
        assert_eq!(m.done.len(), 2);
        assert!(m.done.iter().all(|c| c.gpu == Some((100, 300))), "{:?}", m.done);
    }
}
