//! Stream capture (CUDA graphs): which streams are capturing, and which kernels each captured graph
//! holds.
//!
//! Between `cudaStreamBeginCapture(s)` and `cudaStreamEndCapture(s)`, work queued on `s` is recorded
//! into a graph and runs only when an instantiation of that graph is launched. Other streams join the
//! capture by waiting on an event recorded in it (`cudaEventRecord` on a capturing stream, then
//! `cudaStreamWaitEvent`: a fork) and leave it when it ends. The capture interaction modes
//! (`cudaStreamCaptureMode`) only decide which other calls are allowed meanwhile, not which streams
//! capture; work on the legacy stream is never captured (it fails while a blocking stream captures).
//!
//! The launch interposers ask [`captured_launch`] whether a launch was captured (then it gets no
//! execution record) and it is remembered as a node of the capture. Without CUPTI, a graph launch
//! emits one estimated kernel per kernel node of its graph ([`for_each_graph_kernel`]).
//!
//! Cost: with no capture in progress a launch pays one relaxed load ([`any_active`]). Everything is a
//! fixed table of atomics, written by the capture calls (rare) and read without locks. Node lists are
//! persistent (nodes are pushed in front and never change), so a graph captured into again
//! (`cudaStreamBeginCaptureToGraph`) shares its earlier nodes, and readers never see a list change.

use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use tprof_format::StrId;

use super::cuda_types::Dim3;

/// Capture sequences in progress (a launch checks this first).
static ACTIVE: AtomicU32 = AtomicU32::new(0);

/// True while some stream of the process captures.
#[inline(always)]
pub fn any_active() -> bool {
    ACTIVE.load(Ordering::Relaxed) != 0
}

/// `cudaStreamLegacy` and `cudaStreamPerThread` (driver_types.h).
const STREAM_LEGACY: u64 = 0x1;
const STREAM_PER_THREAD: u64 = 0x2;

/// A stream handle as a table key: None for the legacy stream (NULL or `cudaStreamLegacy`), which
/// never captures; the per-thread default stream is one stream per thread. (Runtime `_ptsz` entry
/// points pass NULL for the per-thread stream: their wrappers map it to `cudaStreamPerThread`.)
fn stream_key(stream: u64) -> Option<usize> {
    match stream {
        0 | STREAM_LEGACY => None,
        STREAM_PER_THREAD => Some(((crate::record::thread::tid() as usize) << 4) | STREAM_PER_THREAD as usize),
        s => Some(s as usize),
    }
}

// ------------------------------------------------------------------ captures and their streams

const CAPTURES: usize = 32;
const CAPTURE_SLOT_BITS: u32 = 5;

struct CaptureSlot {
    /// `(sequence << CAPTURE_SLOT_BITS) | slot`, 0 when free.
    id: AtomicU64,
    /// First node of the capture's list ([`NodeRef`]), and its length.
    head: AtomicU32,
    count: AtomicU32,
    /// The graph's id when capturing into an existing graph (0: a new graph).
    graph_id: AtomicU32,
}

static CAPTURE: [CaptureSlot; CAPTURES] = [const {
    CaptureSlot {
        id: AtomicU64::new(0),
        head: AtomicU32::new(0),
        count: AtomicU32::new(0),
        graph_id: AtomicU32::new(0),
    }
}; CAPTURES];
static CAPTURE_SEQ: AtomicU64 = AtomicU64::new(0);

fn capture_alive(id: u64) -> Option<&'static CaptureSlot> {
    let slot = CAPTURE.get((id & ((1 << CAPTURE_SLOT_BITS) - 1)) as usize)?;
    (id != 0 && slot.id.load(Ordering::Acquire) == id).then_some(slot)
}

const STREAMS: usize = 64;

struct StreamSlot {
    /// [`stream_key`], 0 when free.
    key: AtomicUsize,
    /// The capture the stream belongs to.
    capture: AtomicU64,
}

static STREAM: [StreamSlot; STREAMS] =
    [const { StreamSlot { key: AtomicUsize::new(0), capture: AtomicU64::new(0) } }; STREAMS];

/// The live capture a stream belongs to.
fn capture_of(key: usize) -> Option<u64> {
    STREAM.iter().find(|s| s.key.load(Ordering::Acquire) == key).and_then(|s| {
        let id = s.capture.load(Ordering::Acquire);
        capture_alive(id).map(|_| id)
    })
}

fn add_stream(key: usize, capture: u64) -> bool {
    if let Some(s) = STREAM.iter().find(|s| s.key.load(Ordering::Acquire) == key) {
        s.capture.store(capture, Ordering::Release);
        return true;
    }
    for s in &STREAM {
        let k = s.key.load(Ordering::Acquire);
        let stale = k != 0 && capture_alive(s.capture.load(Ordering::Acquire)).is_none();
        if (k == 0 || stale) && s.key.compare_exchange(k, key, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            s.capture.store(capture, Ordering::Release);
            return true;
        }
    }
    warn_once(&STREAMS_FULL, "more than 64 streams capturing: launches on the others are counted as executed");
    false
}

static STREAMS_FULL: AtomicU32 = AtomicU32::new(0);
static CAPTURES_FULL: AtomicU32 = AtomicU32::new(0);
static EVENTS_FULL: AtomicU32 = AtomicU32::new(0);
static NODES_FULL: AtomicU32 = AtomicU32::new(0);
static GRAPHS_FULL: AtomicU32 = AtomicU32::new(0);

fn warn_once(flag: &AtomicU32, msg: &str) {
    if flag.swap(1, Ordering::Relaxed) == 0 {
        crate::base::messages::warn_line(msg);
    }
}

/// `cudaStreamBeginCapture[ToGraph](stream)` succeeded; `into` is the graph captured into, if any.
pub fn begin(stream: u64, into: usize) {
    let Some(key) = stream_key(stream) else { return };
    let seq = CAPTURE_SEQ.fetch_add(1, Ordering::Relaxed) + 1;
    let Some((index, slot)) = CAPTURE.iter().enumerate().find(|(i, s)| {
        let id = (seq << CAPTURE_SLOT_BITS) | *i as u64;
        s.id.compare_exchange(0, id, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }) else {
        warn_once(
            &CAPTURES_FULL,
            "more than 32 stream captures at once: launches in the others are counted as executed",
        );
        return;
    };
    let id = (seq << CAPTURE_SLOT_BITS) | index as u64;
    let (head, count, graph_id) = graph_nodes(&GRAPHS, into).unwrap_or((0, 0, 0));
    slot.head.store(head, Ordering::Relaxed);
    slot.count.store(count, Ordering::Relaxed);
    slot.graph_id.store(graph_id, Ordering::Relaxed);
    if !add_stream(key, id) {
        slot.id.store(0, Ordering::Release);
        return;
    }
    ACTIVE.fetch_add(1, Ordering::AcqRel);
}

/// `cudaErrorStreamCaptureInvalidated` and `cudaErrorStreamCaptureUnjoined`: the capture ended
/// without a graph. Other failures (`Unmatched`: not the origin stream, `WrongThread`, invalid
/// arguments) leave it running.
const CAPTURE_INVALIDATED: i32 = 901;
const CAPTURE_UNJOINED: i32 = 904;

/// `cudaStreamEndCapture(stream)` returned `result` and, on success, `graph`.
pub fn end(stream: u64, result: i32, graph: usize) {
    if !matches!(result, 0 | CAPTURE_INVALIDATED | CAPTURE_UNJOINED) {
        return;
    }
    let Some(id) = stream_key(stream).and_then(capture_of) else { return };
    let Some(slot) = capture_alive(id) else { return };
    for s in &STREAM {
        if s.capture.load(Ordering::Acquire) == id {
            s.capture.store(0, Ordering::Release);
            s.key.store(0, Ordering::Release);
        }
    }
    if result == 0 && graph != 0 {
        let head = slot.head.load(Ordering::Acquire);
        let count = slot.count.load(Ordering::Acquire);
        let graph_id = match slot.graph_id.load(Ordering::Relaxed) {
            0 => GRAPH_IDS.fetch_add(1, Ordering::Relaxed) + 1,
            g => g,
        };
        set_graph_nodes(&GRAPHS, graph, head, count, graph_id);
    }
    if slot.id.compare_exchange(id, 0, Ordering::AcqRel, Ordering::Acquire).is_ok() {
        ACTIVE.fetch_sub(1, Ordering::AcqRel);
    }
}

// ------------------------------------------------------------------ events recorded in a capture

const EVENTS: usize = 256;
const EVENT_PROBES: usize = 16;

struct EventSlot {
    key: AtomicUsize,
    capture: AtomicU64,
}

static EVENT: [EventSlot; EVENTS] =
    [const { EventSlot { key: AtomicUsize::new(0), capture: AtomicU64::new(0) } }; EVENTS];

fn event_slots(event: usize) -> impl Iterator<Item = &'static EventSlot> {
    let h = ((event as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize;
    (0..EVENT_PROBES).filter_map(move |i| EVENT.get((h + i) % EVENTS))
}

/// `cudaEventRecord(event, stream)` succeeded (called only while a capture is in progress).
pub fn on_event_record(event: usize, stream: u64) {
    if event == 0 {
        return;
    }
    let capture = stream_key(stream).and_then(capture_of);
    if let Some(s) = event_slots(event).find(|s| s.key.load(Ordering::Acquire) == event) {
        s.capture.store(capture.unwrap_or(0), Ordering::Release);
        return;
    }
    let Some(id) = capture else { return };
    for s in event_slots(event) {
        let k = s.key.load(Ordering::Acquire);
        let reusable = k == 0 || capture_alive(s.capture.load(Ordering::Acquire)).is_none();
        if reusable && s.key.compare_exchange(k, event, Ordering::AcqRel, Ordering::Acquire).is_ok() {
            s.capture.store(id, Ordering::Release);
            return;
        }
    }
    warn_once(
        &EVENTS_FULL,
        "too many events recorded in stream captures: a stream joining through one is not followed",
    );
}

/// `cudaStreamWaitEvent(stream, event)` succeeded (called only while a capture is in progress): a
/// stream waiting on an event recorded in a capture joins that capture.
pub fn on_stream_wait(stream: u64, event: usize) {
    let Some(key) = stream_key(stream) else { return };
    let Some(id) = event_slots(event)
        .find(|s| s.key.load(Ordering::Acquire) == event)
        .map(|s| s.capture.load(Ordering::Acquire))
        .filter(|&id| capture_alive(id).is_some())
    else {
        return;
    };
    if capture_of(key).is_none() {
        add_stream(key, id);
    }
}

// ------------------------------------------------------------------ captured kernels

/// A kernel node: what an estimated execution record of it needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelNode {
    pub name: StrId,
    pub grid: Dim3,
    pub block: Dim3,
    pub smem: u32,
}

const NODES: usize = 1 << 16;

struct Node {
    name: AtomicU32,
    grid: [AtomicU32; 3],
    block: [AtomicU32; 3],
    smem: AtomicU32,
    /// Next node (index + 1; 0 = end of the list).
    next: AtomicU32,
}

static NODE: [Node; NODES] = [const {
    Node {
        name: AtomicU32::new(0),
        grid: [const { AtomicU32::new(0) }; 3],
        block: [const { AtomicU32::new(0) }; 3],
        smem: AtomicU32::new(0),
        next: AtomicU32::new(0),
    }
}; NODES];
static NODES_USED: AtomicU32 = AtomicU32::new(0);

/// Pushes a kernel node in front of a capture's list.
fn push_node(capture: &CaptureSlot, k: &KernelNode) {
    let index = NODES_USED.fetch_add(1, Ordering::Relaxed);
    let Some(n) = NODE.get(index as usize) else {
        NODES_USED.store(NODES as u32, Ordering::Relaxed);
        warn_once(&NODES_FULL, "more than 65536 captured kernels: graph launches without CUPTI miss the later ones");
        return;
    };
    n.name.store(k.name.0, Ordering::Relaxed);
    for (a, v) in n.grid.iter().zip(k.grid.arr()) {
        a.store(v, Ordering::Relaxed);
    }
    for (a, v) in n.block.iter().zip(k.block.arr()) {
        a.store(v, Ordering::Relaxed);
    }
    n.smem.store(k.smem, Ordering::Relaxed);
    let mut head = capture.head.load(Ordering::Acquire);
    loop {
        n.next.store(head, Ordering::Relaxed);
        match capture.head.compare_exchange_weak(head, index + 1, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(h) => head = h,
        }
    }
    capture.count.fetch_add(1, Ordering::AcqRel);
}

fn read_node(n: &Node) -> KernelNode {
    let d = |a: &[AtomicU32; 3]| Dim3 {
        x: a[0].load(Ordering::Relaxed),
        y: a[1].load(Ordering::Relaxed),
        z: a[2].load(Ordering::Relaxed),
    };
    KernelNode {
        name: StrId(n.name.load(Ordering::Relaxed)),
        grid: d(&n.grid),
        block: d(&n.block),
        smem: n.smem.load(Ordering::Relaxed),
    }
}

/// Walks a node list (most recently captured first).
fn for_each_node(head: u32, count: u32, mut f: impl FnMut(KernelNode)) {
    let mut next = head;
    for _ in 0..count {
        let Some(n) = next.checked_sub(1).and_then(|i| NODE.get(i as usize)) else { return };
        f(read_node(n));
        next = n.next.load(Ordering::Relaxed);
    }
}

/// A launch of `k` on `stream` succeeded: true when the stream is capturing (the kernel became a node
/// of the capture's graph and did not run). Call only while [`any_active`].
pub fn captured_launch(stream: u64, k: &KernelNode) -> bool {
    let Some(slot) = stream_key(stream).and_then(capture_of).and_then(capture_alive) else { return false };
    push_node(slot, k);
    true
}

/// A graph launch on `stream` succeeded: true when the stream is capturing (the graph became a child
/// of the captured one, its kernels nodes of it). Call only while [`any_active`].
pub fn captured_graph_launch(stream: u64, exec: usize) -> bool {
    let Some(slot) = stream_key(stream).and_then(capture_of).and_then(capture_alive) else { return false };
    let mut nodes = Vec::new();
    if let Some((head, count, _)) = graph_nodes(&EXECS, exec) {
        for_each_node(head, count, |k| nodes.push(k));
    }
    // pushed oldest first, so the capture's list keeps the child's order
    for k in nodes.iter().rev() {
        push_node(slot, k);
    }
    true
}

/// The kernel nodes of the graph `exec` was instantiated from, most recently captured first, with the
/// graph's id (tprof's own numbering, from 1). Nothing for executables tprof did not see instantiated
/// from a captured graph.
pub fn for_each_graph_kernel(exec: usize, mut f: impl FnMut(KernelNode, u32)) {
    if let Some((head, count, graph_id)) = graph_nodes(&EXECS, exec) {
        for_each_node(head, count, |k| f(k, graph_id));
    }
}

// ------------------------------------------------------------------ graphs and executables

const GRAPH_BITS: u32 = 12;
const GRAPH_SLOTS: usize = 1 << GRAPH_BITS;

struct GraphSlot {
    /// `cudaGraph_t` / `cudaGraphExec_t`, 0 when free (keys are never removed: a destroyed handle
    /// keeps its slot with no nodes, ready for reuse of the address).
    key: AtomicUsize,
    /// `head << 32 | count` of the node list.
    nodes: AtomicU64,
    graph_id: AtomicU32,
}

type GraphTable = [GraphSlot; GRAPH_SLOTS];
static GRAPHS: GraphTable =
    [const { GraphSlot { key: AtomicUsize::new(0), nodes: AtomicU64::new(0), graph_id: AtomicU32::new(0) } };
        GRAPH_SLOTS];
static EXECS: GraphTable =
    [const { GraphSlot { key: AtomicUsize::new(0), nodes: AtomicU64::new(0), graph_id: AtomicU32::new(0) } };
        GRAPH_SLOTS];
static GRAPH_IDS: AtomicU32 = AtomicU32::new(0);

fn slot_index(key: usize) -> usize {
    ((key as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - GRAPH_BITS)) as usize
}

fn find_graph(table: &'static GraphTable, key: usize, claim: bool) -> Option<&'static GraphSlot> {
    if key == 0 {
        return None;
    }
    let start = slot_index(key);
    for i in 0..GRAPH_SLOTS {
        let s = table.get((start + i) & (GRAPH_SLOTS - 1))?;
        let k = s.key.load(Ordering::Acquire);
        if k == key {
            return Some(s);
        }
        if k == 0 {
            if !claim {
                return None;
            }
            match s.key.compare_exchange(0, key, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(s),
                Err(k2) if k2 == key => return Some(s),
                Err(_) => {}
            }
        }
    }
    if claim {
        warn_once(&GRAPHS_FULL, "more than 4096 graphs: graph launches without CUPTI get no kernel estimates");
    }
    None
}

fn graph_nodes(table: &'static GraphTable, key: usize) -> Option<(u32, u32, u32)> {
    let s = find_graph(table, key, false)?;
    let v = s.nodes.load(Ordering::Acquire);
    (v != 0).then(|| ((v >> 32) as u32, v as u32, s.graph_id.load(Ordering::Relaxed)))
}

fn set_graph_nodes(table: &'static GraphTable, key: usize, head: u32, count: u32, graph_id: u32) {
    let packed = (u64::from(head) << 32) | u64::from(count);
    if packed == 0 {
        forget(table, key);
    } else if let Some(s) = find_graph(table, key, true) {
        s.graph_id.store(graph_id, Ordering::Relaxed);
        s.nodes.store(packed, Ordering::Release);
    }
}

fn forget(table: &'static GraphTable, key: usize) {
    if let Some(s) = find_graph(table, key, false) {
        s.nodes.store(0, Ordering::Release);
    }
}

/// `cudaGraphInstantiate*(exec, graph)` succeeded: the executable runs the graph's kernels.
pub fn on_instantiate(exec: usize, graph: usize) {
    match graph_nodes(&GRAPHS, graph) {
        Some((head, count, id)) => set_graph_nodes(&EXECS, exec, head, count, id),
        None => forget(&EXECS, exec),
    }
}

/// `cudaGraphDestroy(graph)`: its handle may be reused.
pub fn forget_graph(graph: usize) {
    forget(&GRAPHS, graph);
}

/// `cudaGraphExecDestroy(exec)`: its handle may be reused.
pub fn forget_exec(exec: usize) {
    forget(&EXECS, exec);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: u32, x: u32) -> KernelNode {
        KernelNode { name: StrId(name), grid: Dim3 { x, y: 1, z: 1 }, block: Dim3 { x: 32, y: 1, z: 1 }, smem: 0 }
    }

    fn exec_kernels(exec: usize) -> Vec<(u32, u32)> {
        let mut v = Vec::new();
        for_each_graph_kernel(exec, |k, _| v.push((k.name.0, k.grid.x)));
        v.reverse();
        v
    }

    // One test: the tables are process-wide.
    #[test]
    fn capture_fork_join_instantiate_and_capture_into_a_graph() {
        let (s1, s2, s3) = (0x7000_1000u64, 0x7000_2000u64, 0x7000_3000u64);
        let (ev, graph, exec) = (0x7100_0000usize, 0x7200_0000usize, 0x7300_0000usize);
        assert!(!any_active());
        begin(s1, 0);
        assert!(any_active());
        assert!(captured_launch(s1, &kernel(1, 1)));
        assert!(!captured_launch(s2, &kernel(9, 9)), "s2 has not joined");
        on_event_record(ev, s1);
        on_stream_wait(s2, ev);
        assert!(captured_launch(s2, &kernel(2, 2)), "s2 joined through the event");
        assert!(!captured_launch(s3, &kernel(9, 9)));
        assert!(!captured_launch(0, &kernel(9, 9)), "the legacy stream never captures");
        end(s2, 903, 0); // not the origin: the capture goes on
        assert!(any_active());
        end(s1, 0, graph);
        assert!(!any_active());
        assert!(!captured_launch(s2, &kernel(9, 9)), "s2 left with the capture");
        on_instantiate(exec, graph);
        assert_eq!(exec_kernels(exec), vec![(1, 1), (2, 2)]);

        // capture into the same graph again: earlier nodes kept, the first executable unchanged
        begin(s3, graph);
        assert!(captured_launch(s3, &kernel(3, 3)));
        end(s3, 0, graph);
        let exec2 = exec + 0x10;
        on_instantiate(exec2, graph);
        assert_eq!(exec_kernels(exec2), vec![(1, 1), (2, 2), (3, 3)]);
        assert_eq!(exec_kernels(exec), vec![(1, 1), (2, 2)]);

        // a graph launched into a capture is a child graph: its kernels join the outer capture
        begin(s1, 0);
        assert!(captured_graph_launch(s1, exec));
        assert!(captured_launch(s1, &kernel(4, 4)));
        let outer = graph + 0x10;
        end(s1, 0, outer);
        on_instantiate(exec + 0x20, outer);
        assert_eq!(exec_kernels(exec + 0x20), vec![(1, 1), (2, 2), (4, 4)]);

        // an invalidated capture ends without a graph; a destroyed executable has no kernels
        begin(s2, 0);
        end(s2, CAPTURE_INVALIDATED, 0);
        assert!(!any_active());
        forget_exec(exec);
        assert!(exec_kernels(exec).is_empty());
    }

    #[test]
    fn per_thread_stream_is_per_thread() {
        let here = stream_key(STREAM_PER_THREAD);
        let there = std::thread::spawn(|| stream_key(STREAM_PER_THREAD)).join().unwrap();
        assert_ne!(here, there);
        assert_eq!(stream_key(0), None);
        assert_eq!(stream_key(STREAM_LEGACY), None);
    }
}
