//! The NCCL profiler plugin ABI, versions 1 to 6: event descriptors, state arguments and function
//! tables, as NCCL's `src/include/plugin/profiler/profiler_v{1..6}.h` and `nccl_profiler.h` define
//! them (NCCL 2.23 .. 2.29+). Field order and types follow the headers; the layout of every struct is
//! checked against a C compiler's in `tests/e2e/tests/nccl_profiler_abi.rs` (the vendored header
//! there is written from the same facts).
#![allow(non_snake_case)]

use std::ffi::{c_char, c_int, c_void};

/// Event types (`ncclProfile*`, a bit mask).
pub mod event {
    pub const GROUP: u64 = 1 << 0;
    pub const COLL: u64 = 1 << 1;
    pub const P2P: u64 = 1 << 2;
    pub const PROXY_OP: u64 = 1 << 3;
    pub const PROXY_STEP: u64 = 1 << 4;
    pub const PROXY_CTRL: u64 = 1 << 5;
    pub const KERNEL_CH: u64 = 1 << 6;
    pub const NET_PLUGIN: u64 = 1 << 7;
    pub const GROUP_API: u64 = 1 << 8;
    pub const COLL_API: u64 = 1 << 9;
    pub const P2P_API: u64 = 1 << 10;
    pub const KERNEL_LAUNCH: u64 = 1 << 11;
    pub const CE_COLL: u64 = 1 << 12;
    pub const CE_SYNC: u64 = 1 << 13;
    pub const CE_BATCH: u64 = 1 << 14;
}

/// Event states (`ncclProfilerEventState_t`, the same enum in every version).
pub mod state {
    pub const PROXY_OP_SEND_POSTED: i32 = 0;
    pub const PROXY_OP_SEND_REM_FIFO_WAIT: i32 = 1;
    pub const PROXY_OP_SEND_TRANSMITTED: i32 = 2;
    pub const PROXY_OP_SEND_DONE: i32 = 3;
    pub const PROXY_OP_RECV_POSTED: i32 = 4;
    pub const PROXY_OP_RECV_RECEIVED: i32 = 5;
    pub const PROXY_OP_RECV_TRANSMITTED: i32 = 6;
    pub const PROXY_OP_RECV_DONE: i32 = 7;
    pub const PROXY_STEP_SEND_GPU_WAIT: i32 = 8;
    pub const PROXY_STEP_SEND_WAIT: i32 = 9;
    pub const PROXY_STEP_RECV_WAIT: i32 = 10;
    pub const PROXY_STEP_RECV_FLUSH_WAIT: i32 = 11;
    pub const PROXY_STEP_RECV_GPU_WAIT: i32 = 12;
    pub const PROXY_OP_IN_PROGRESS_V4: i32 = 19;
    pub const PROXY_STEP_SEND_PEER_WAIT_V4: i32 = 20;
    pub const KERNEL_CH_STOP: i32 = 22;
}

/// `ncclResult_t`: success.
pub const NCCL_SUCCESS: c_int = 0;

/// `ncclPid_t` on Linux (`pid_t`).
pub type NcclPid = libc::pid_t;

/// `ncclDebugLogger_t`, never called by tprof: an opaque function pointer.
pub type DebugLogger = *const c_void;

// ---------------------------------------------------------------- parts shared by several versions

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOp {
    pub pid: NcclPid,
    pub channelId: u8,
    pub peer: c_int,
    pub nSteps: c_int,
    pub chunkSize: c_int,
    pub isSend: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyStep {
    pub step: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelChV3 {
    pub channelId: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelChV4 {
    pub channelId: u8,
    pub pTimer: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetPlugin {
    pub id: i64,
    pub data: *mut c_void,
}

// ---------------------------------------------------------------- v1

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV1 {
    pub name: *const c_char,
    pub commHash: u64,
    pub seqNumber: u64,
    pub func: u8,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: u8,
    pub op: u32,
    pub trafficBytes: usize,
    pub nMaxChannels: u8,
    pub nWarps: u8,
    pub algo: u8,
    pub proto: u8,
    pub isCollnet: c_int,
    pub isNvls: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV1 {
    pub name: *const c_char,
    pub commHash: u64,
    pub func: u8,
    pub buff: *mut c_void,
    pub datatype: u8,
    pub count: usize,
    pub peer: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrV1Union {
    pub coll: CollV1,
    pub p2p: P2pV1,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV1 {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: DescrV1Union,
}

/// State arguments of versions 1 to 3.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyOpArgsV1 {
    pub transSize: usize,
    pub steps: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyCtrlArgs {
    pub appendedProxyOps: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgsV1 {
    pub proxyOp: ProxyOpArgsV1,
    pub proxyCtrl: ProxyCtrlArgs,
}

// ---------------------------------------------------------------- v2

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV2 {
    pub name: *const c_char,
    pub commHash: u64,
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub trafficBytes: usize,
    pub nMaxChannels: u8,
    pub nWarps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV2 {
    pub name: *const c_char,
    pub commHash: u64,
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrV2Union {
    pub coll: CollV2,
    pub p2p: P2pV2,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV2 {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: DescrV2Union,
}

// ---------------------------------------------------------------- v3

/// v3's collective: v2's without `trafficBytes`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV3 {
    pub name: *const c_char,
    pub commHash: u64,
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub nMaxChannels: u8,
    pub nWarps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrV3Union {
    pub coll: CollV3,
    pub p2p: P2pV2,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
    pub kernelCh: KernelChV3,
    pub netPlugin: NetPlugin,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV3 {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: DescrV3Union,
}

// ---------------------------------------------------------------- v4

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV4 {
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub nChannels: u8,
    pub nWarps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV4 {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub nChannels: u8,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrV4Union {
    pub coll: CollV4,
    pub p2p: P2pV4,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
    pub kernelCh: KernelChV4,
    pub netPlugin: NetPlugin,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV4 {
    pub type_: u8,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: DescrV4Union,
}

/// State arguments of versions 4 to 6.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct ProxyStepArgs {
    pub transSize: usize,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct NetPluginArgs {
    pub data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelChArgs {
    pub pTimer: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union StateArgsV4 {
    pub proxyStep: ProxyStepArgs,
    pub proxyCtrl: ProxyCtrlArgs,
    pub netPlugin: NetPluginArgs,
    pub kernelCh: KernelChArgs,
}

// ---------------------------------------------------------------- v5 and v6

#[repr(C)]
#[derive(Clone, Copy)]
pub struct GroupApiV5 {
    pub graphCaptured: bool,
    pub groupDepth: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollApiV5 {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub root: c_int,
    pub stream: *mut c_void,
    pub graphCaptured: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pApiV5 {
    pub func: *const c_char,
    pub count: usize,
    pub datatype: *const c_char,
    pub stream: *mut c_void,
    pub graphCaptured: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct KernelLaunchV5 {
    pub stream: *mut c_void,
}

/// v5's collective: v4's with `parentGroup`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CollV5 {
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub nChannels: u8,
    pub nWarps: u8,
    pub algo: *const c_char,
    pub proto: *const c_char,
    pub parentGroup: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct P2pV5 {
    pub func: *const c_char,
    pub buff: *mut c_void,
    pub datatype: *const c_char,
    pub count: usize,
    pub peer: c_int,
    pub nChannels: u8,
    pub parentGroup: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrV5Union {
    pub groupApi: GroupApiV5,
    pub collApi: CollApiV5,
    pub p2pApi: P2pApiV5,
    pub kernelLaunch: KernelLaunchV5,
    pub coll: CollV5,
    pub p2p: P2pV5,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
    pub kernelCh: KernelChV4,
    pub netPlugin: NetPlugin,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV5 {
    pub type_: u64,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: DescrV5Union,
}

/// v6: copy-engine collectives.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollV6 {
    pub seqNumber: u64,
    pub func: *const c_char,
    pub sendBuff: *const c_void,
    pub recvBuff: *mut c_void,
    pub count: usize,
    pub root: c_int,
    pub datatype: *const c_char,
    pub syncStrategy: *const c_char,
    pub intraBatchSync: bool,
    pub batchSize: u32,
    pub numBatches: u32,
    pub ceSeqNum: u32,
    pub stream: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollSyncV6 {
    pub isComplete: bool,
    pub nRanks: c_int,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct CeCollBatchV6 {
    pub numOps: c_int,
    pub totalBytes: usize,
    pub useIntraSync: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union DescrV6Union {
    pub groupApi: GroupApiV5,
    pub collApi: CollApiV5,
    pub p2pApi: P2pApiV5,
    pub kernelLaunch: KernelLaunchV5,
    pub coll: CollV5,
    pub p2p: P2pV5,
    pub proxyOp: ProxyOp,
    pub proxyStep: ProxyStep,
    pub kernelCh: KernelChV4,
    pub netPlugin: NetPlugin,
    pub ceColl: CeCollV6,
    pub ceCollSync: CeCollSyncV6,
    pub ceCollBatch: CeCollBatchV6,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct DescrV6 {
    pub type_: u64,
    pub parentObj: *mut c_void,
    pub rank: c_int,
    pub u: DescrV6Union,
}

// ---------------------------------------------------------------- function tables

pub type StopEvent = unsafe extern "C" fn(handle: *mut c_void) -> c_int;
pub type Finalize = unsafe extern "C" fn(context: *mut c_void) -> c_int;
/// `init` of versions 1 to 3.
pub type InitV1 = unsafe extern "C" fn(context: *mut *mut c_void, mask: *mut c_int) -> c_int;
/// `init` of version 4.
pub type InitV4 = unsafe extern "C" fn(
    context: *mut *mut c_void,
    mask: *mut c_int,
    comm_name: *const c_char,
    comm_hash: u64,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: DebugLogger,
) -> c_int;
/// `init` of versions 5 and 6.
pub type InitV5 = unsafe extern "C" fn(
    context: *mut *mut c_void,
    comm_id: u64,
    mask: *mut c_int,
    comm_name: *const c_char,
    n_nodes: c_int,
    nranks: c_int,
    rank: c_int,
    logfn: DebugLogger,
) -> c_int;

/// `ncclProfiler_vN_t`: the same five entries after the name in every version, with that version's
/// `init`, descriptor and state-argument types.
#[repr(C)]
pub struct Profiler<Init, Descr, Args> {
    pub name: *const c_char,
    pub init: Init,
    pub startEvent: unsafe extern "C" fn(context: *mut c_void, handle: *mut *mut c_void, descr: *mut Descr) -> c_int,
    pub stopEvent: StopEvent,
    pub recordEventState: unsafe extern "C" fn(handle: *mut c_void, state: c_int, args: *mut Args) -> c_int,
    pub finalize: Finalize,
}

// SAFETY: the tables are immutable statics of function pointers and a pointer to a static C string;
// NCCL only reads them.
unsafe impl<I, D, A> Sync for Profiler<I, D, A> {}

pub type ProfilerV1 = Profiler<InitV1, DescrV1, StateArgsV1>;
pub type ProfilerV2 = Profiler<InitV1, DescrV2, StateArgsV1>;
pub type ProfilerV3 = Profiler<InitV1, DescrV3, StateArgsV1>;
pub type ProfilerV4 = Profiler<InitV4, DescrV4, StateArgsV4>;
pub type ProfilerV5 = Profiler<InitV5, DescrV5, StateArgsV4>;
pub type ProfilerV6 = Profiler<InitV5, DescrV6, StateArgsV4>;
