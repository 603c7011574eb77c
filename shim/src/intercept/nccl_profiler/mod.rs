//! libtprof.so as an NCCL profiler plugin. NCCL (>= 2.23) dlopens the library named by
//! `NCCL_PROFILER_PLUGIN` and looks up `ncclProfiler_v6`, then v5 ... v1 (the newest it knows
//! first); [`plugin_env`] points that variable at libtprof when it is preloaded, unless the user set
//! it (`NCCL_PROFILER_PLUGIN=none` turns the plugin off). This works when NCCL is linked statically
//! too: no interposition is needed.
//!
//! The versions' descriptors ([`abi`]) are translated here into the version-independent events of
//! [`events`]. Which events NCCL reports is the activation mask `init` returns, by mode:
//! `full`, `steps`, `sample`: tasks, proxy operations and steps, kernel channels (v4+), API events for
//! the graph-captured flag (v5+); `flight`: tasks and kernel channels; `metrics`: none (its counters
//! come from the interposers). Every entry point runs behind the panic fence and answers
//! `ncclSuccess`.
#![allow(clippy::missing_safety_doc)]

pub mod abi;
pub mod call_link;
pub mod events;
pub mod plugin_env;

use std::ffi::{c_char, c_int, c_void, CStr};

use tprof_format::settings::Mode;
use tprof_format::{CollOp, Record, StrId};

use crate::base::panic_fence::ffi_guard;
use crate::base::{config, switch, ticks};
use crate::lifecycle;
use crate::record::interning::{intern, intern_cstr};
use crate::record::recorder;
use abi::*;
use events::{ProxyOpDescr, TaskDescr};

/// The plugin's name as NCCL prints it.
const NAME: &CStr = c"tprof";

/// The activation mask for interface `version` in the configured mode.
pub fn activation_mask(version: u8, mode: Mode) -> u64 {
    use abi::event::*;
    let kernel = if version >= 4 { KERNEL_CH } else { 0 };
    match mode {
        Mode::Metrics => 0,
        Mode::Flight => COLL | P2P | kernel,
        Mode::Full | Mode::Steps | Mode::Sample => {
            let api = if version >= 5 { COLL_API | P2P_API } else { 0 };
            COLL | P2P | PROXY_OP | PROXY_STEP | kernel | api
        }
    }
}

/// The CollOp of an NCCL function name (`ncclFuncToString`).
fn op_named(func: &[u8]) -> CollOp {
    match func {
        b"AllReduce" => CollOp::AllReduce,
        b"AllGather" => CollOp::AllGather,
        b"ReduceScatter" => CollOp::ReduceScatter,
        b"Broadcast" => CollOp::Broadcast,
        b"Reduce" => CollOp::Reduce,
        b"AlltoAll" | b"AllToAll" => CollOp::AllToAll,
        b"Send" => CollOp::Send,
        b"Recv" => CollOp::Recv,
        b"Gather" => CollOp::Gather,
        b"Scatter" => CollOp::Scatter,
        _ => CollOp::Unknown,
    }
}

/// # Safety
/// `p` is NULL or a NUL-terminated string.
unsafe fn op_of(p: *const c_char) -> CollOp {
    if p.is_null() {
        return CollOp::Unknown;
    }
    // SAFETY: the caller's contract.
    op_named(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// Version 1's numeric fields (`ncclFunc_t`, `ncclDataType_t`, `NCCL_ALGO_*`, `NCCL_PROTO_*`).
fn v1_func(f: u8) -> CollOp {
    match f {
        0 => CollOp::Broadcast,
        1 => CollOp::Reduce,
        2 => CollOp::AllGather,
        3 => CollOp::ReduceScatter,
        4 => CollOp::AllReduce,
        6 => CollOp::Send,
        7 => CollOp::Recv,
        8 => CollOp::AllToAll,
        9 => CollOp::Scatter,
        10 => CollOp::Gather,
        _ => CollOp::Unknown,
    }
}
fn v1_datatype(d: u8) -> StrId {
    const NAMES: [&str; 12] = [
        "ncclInt8",
        "ncclUint8",
        "ncclInt32",
        "ncclUint32",
        "ncclInt64",
        "ncclUint64",
        "ncclFloat16",
        "ncclFloat32",
        "ncclFloat64",
        "ncclBfloat16",
        "ncclFloat8e4m3",
        "ncclFloat8e5m2",
    ];
    NAMES.get(d as usize).map_or(StrId::NONE, |n| intern(n))
}
fn v1_algo(a: u8) -> StrId {
    const NAMES: [&str; 7] = ["TREE", "RING", "COLLNET_DIRECT", "COLLNET_CHAIN", "NVLS", "NVLS_TREE", "PAT"];
    NAMES.get(a as usize).map_or(StrId::NONE, |n| intern(n))
}
fn v1_proto(p: u8) -> StrId {
    const NAMES: [&str; 3] = ["LL", "LL128", "SIMPLE"];
    NAMES.get(p as usize).map_or(StrId::NONE, |n| intern(n))
}

// ---------------------------------------------------------------- init and finalize

/// Everything `init` says, whatever the version.
struct InitArgs {
    version: u8,
    comm: u64,
    name: *const c_char,
    nnodes: c_int,
    nranks: c_int,
    rank: c_int,
}

/// # Safety
/// `context` and `mask` are NULL or writable (NCCL's contract); `a.name` NULL or a C string.
unsafe fn init_common(context: *mut *mut c_void, mask: *mut c_int, a: InitArgs) -> c_int {
    ffi_guard(NCCL_SUCCESS, || {
        lifecycle::ensure_init();
        let want =
            if switch::state() == switch::ENABLED { activation_mask(a.version, config::config().mode) } else { 0 };
        let ctx = events::context_new(a.comm, want & abi::event::KERNEL_CH != 0);
        let want = if ctx.is_some() { want } else { 0 };
        if !mask.is_null() {
            // SAFETY: NCCL passes its mask variable for the plugin to set.
            unsafe { *mask = want as c_int };
        }
        if !context.is_null() {
            // SAFETY: NCCL passes where to store the context.
            unsafe { *context = ctx.unwrap_or(0) as *mut c_void };
        }
        if ctx.is_some() && want != 0 {
            recorder::emit(Record::NcclCommInfo {
                comm: a.comm,
                // SAFETY: the caller's contract.
                name: unsafe { intern_cstr(a.name) },
                nnodes: a.nnodes.max(0) as u32,
                nranks: a.nranks.max(0) as u32,
                rank: a.rank.max(0) as u32,
                plugin_version: a.version,
                ts: ticks::now(),
            });
        }
        NCCL_SUCCESS
    })
}

unsafe extern "C" fn init_v1(context: *mut *mut c_void, mask: *mut c_int) -> c_int {
    let a = InitArgs { version: 1, comm: 0, name: std::ptr::null(), nnodes: 0, nranks: 0, rank: 0 };
    // SAFETY: NCCL's contract for `init`.
    unsafe { init_common(context, mask, a) }
}
unsafe extern "C" fn init_v2(context: *mut *mut c_void, mask: *mut c_int) -> c_int {
    let a = InitArgs { version: 2, comm: 0, name: std::ptr::null(), nnodes: 0, nranks: 0, rank: 0 };
    // SAFETY: NCCL's contract for `init`.
    unsafe { init_common(context, mask, a) }
}
unsafe extern "C" fn init_v3(context: *mut *mut c_void, mask: *mut c_int) -> c_int {
    let a = InitArgs { version: 3, comm: 0, name: std::ptr::null(), nnodes: 0, nranks: 0, rank: 0 };
    // SAFETY: NCCL's contract for `init`.
    unsafe { init_common(context, mask, a) }
}
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn init_v4(
    context: *mut *mut c_void,
    mask: *mut c_int,
    name: *const c_char,
    comm: u64,
    nnodes: c_int,
    nranks: c_int,
    rank: c_int,
    _log: DebugLogger,
) -> c_int {
    // SAFETY: NCCL's contract for `init`.
    unsafe { init_common(context, mask, InitArgs { version: 4, comm, name, nnodes, nranks, rank }) }
}
macro_rules! init_v5_like {
    ($f:ident, $v:expr) => {
        #[allow(clippy::too_many_arguments)]
        unsafe extern "C" fn $f(
            context: *mut *mut c_void,
            comm: u64,
            mask: *mut c_int,
            name: *const c_char,
            nnodes: c_int,
            nranks: c_int,
            rank: c_int,
            _log: DebugLogger,
        ) -> c_int {
            // SAFETY: NCCL's contract for `init`.
            unsafe { init_common(context, mask, InitArgs { version: $v, comm, name, nnodes, nranks, rank }) }
        }
    };
}
init_v5_like!(init_v5, 5);
init_v5_like!(init_v6, 6);

unsafe extern "C" fn finalize(context: *mut c_void) -> c_int {
    ffi_guard(NCCL_SUCCESS, || {
        if let Some(ctx) = events::context_at(context as usize) {
            events::context_end(ctx);
        }
        NCCL_SUCCESS
    })
}

unsafe extern "C" fn stop_event(handle: *mut c_void) -> c_int {
    ffi_guard(NCCL_SUCCESS, || {
        events::stop(handle as usize);
        NCCL_SUCCESS
    })
}

// ---------------------------------------------------------------- startEvent per version

/// An event start in version-independent terms.
enum Start {
    Task(TaskDescr),
    Api { graph_captured: bool },
    ProxyOp(ProxyOpDescr),
    ProxyStep,
    KernelCh { p_timer: u64 },
    Other,
}

/// Starts a proxy step (most of NCCL's events) and stores its handle: the fast path, with no
/// descriptor to decode.
///
/// # Safety
/// `handle` is NULL or writable.
#[inline(always)]
unsafe fn start_step(context: *mut c_void, handle: *mut *mut c_void, parent: *mut c_void) -> c_int {
    if handle.is_null() {
        return NCCL_SUCCESS;
    }
    let h = ffi_guard(None, || {
        events::context_at(context as usize)?;
        if !switch::is_recording() {
            return None;
        }
        events::start_proxy_step(parent as usize)
    });
    // SAFETY: NCCL passes where to store the handle (checked non-NULL above).
    unsafe { *handle = h.unwrap_or(0) as *mut c_void };
    NCCL_SUCCESS
}

/// Starts the event `start` and stores its handle (NULL for events tprof does not follow).
///
/// # Safety
/// `handle` is NULL or writable.
#[inline(never)]
unsafe fn start_common(
    context: *mut c_void,
    handle: *mut *mut c_void,
    parent: *mut c_void,
    start: impl FnOnce() -> Start,
) -> c_int {
    if handle.is_null() {
        return NCCL_SUCCESS;
    }
    let h = ffi_guard(None, || {
        let ctx = events::context_at(context as usize)?;
        if !switch::is_recording() {
            return None;
        }
        let parent = parent as usize;
        match start() {
            Start::Task(d) => events::start_task(ctx, parent, &d, call_link::current()),
            Start::Api { graph_captured } => events::start_api(graph_captured),
            Start::ProxyOp(op) => events::start_proxy_op(ctx, parent, &op),
            Start::ProxyStep => events::start_proxy_step(parent),
            Start::KernelCh { p_timer } => events::start_kernel_ch(parent, p_timer),
            Start::Other => None,
        }
    });
    // SAFETY: NCCL passes where to store the handle (checked non-NULL above).
    unsafe { *handle = h.unwrap_or(0) as *mut c_void };
    NCCL_SUCCESS
}

fn proxy_op(p: &ProxyOp) -> Start {
    Start::ProxyOp(ProxyOpDescr {
        pid: p.pid,
        channel: p.channelId,
        peer: p.peer,
        is_send: p.isSend != 0,
        nsteps: p.nSteps,
    })
}

unsafe extern "C" fn start_v1(context: *mut c_void, handle: *mut *mut c_void, d: *mut DescrV1) -> c_int {
    if d.is_null() {
        return NCCL_SUCCESS;
    }
    // SAFETY: NCCL's contract: a valid descriptor for the call (read in place, not copied).
    let d = unsafe { &*d };
    if d.type_ as u64 == event::PROXY_STEP {
        // SAFETY: NCCL's contract for `startEvent`.
        return unsafe { start_step(context, handle, d.parentObj) };
    }
    let start = || match d.type_ as u64 {
        // SAFETY (every union read below): `type_` says which member NCCL filled.
        event::COLL => {
            let c = unsafe { d.u.coll };
            Start::Task(TaskDescr {
                comm: c.commHash,
                op: v1_func(c.func),
                seq: c.seqNumber,
                count: c.count as u64,
                datatype: v1_datatype(c.datatype),
                algo: v1_algo(c.algo),
                proto: v1_proto(c.proto),
                nchannels: c.nMaxChannels,
                nwarps: c.nWarps,
                peer: c.root,
            })
        }
        event::P2P => {
            let p = unsafe { d.u.p2p };
            Start::Task(TaskDescr {
                comm: p.commHash,
                op: v1_func(p.func),
                seq: 0,
                count: p.count as u64,
                datatype: v1_datatype(p.datatype),
                algo: StrId::NONE,
                proto: StrId::NONE,
                nchannels: 0,
                nwarps: 0,
                peer: p.peer,
            })
        }
        event::PROXY_OP => proxy_op(&unsafe { d.u.proxyOp }),
        event::PROXY_STEP => Start::ProxyStep,
        _ => Start::Other,
    };
    // SAFETY: NCCL's contract for `startEvent`.
    unsafe { start_common(context, handle, d.parentObj, start) }
}

/// Versions 2 and 3 (the same fields tprof reads, by name).
macro_rules! start_v2_like {
    ($f:ident, $descr:ty, $kernel:expr) => {
        unsafe extern "C" fn $f(context: *mut c_void, handle: *mut *mut c_void, d: *mut $descr) -> c_int {
            if d.is_null() {
                return NCCL_SUCCESS;
            }
            // SAFETY: NCCL's contract: a valid descriptor for the call (read in place, not copied).
            let d = unsafe { &*d };
            if d.type_ as u64 == event::PROXY_STEP {
                // SAFETY: NCCL's contract for `startEvent`.
                return unsafe { start_step(context, handle, d.parentObj) };
            }
            let start = || match d.type_ as u64 {
                // SAFETY (every union read and string below): `type_` says which member NCCL filled;
                // its strings are NULL or NCCL's static names.
                event::COLL => unsafe {
                    let c = d.u.coll;
                    Start::Task(TaskDescr {
                        comm: c.commHash,
                        op: op_of(c.func),
                        seq: c.seqNumber,
                        count: c.count as u64,
                        datatype: intern_cstr(c.datatype),
                        algo: intern_cstr(c.algo),
                        proto: intern_cstr(c.proto),
                        nchannels: c.nMaxChannels,
                        nwarps: c.nWarps,
                        peer: c.root,
                    })
                },
                event::P2P => unsafe {
                    let p = d.u.p2p;
                    Start::Task(TaskDescr {
                        comm: p.commHash,
                        op: op_of(p.func),
                        seq: 0,
                        count: p.count as u64,
                        datatype: intern_cstr(p.datatype),
                        algo: StrId::NONE,
                        proto: StrId::NONE,
                        nchannels: 0,
                        nwarps: 0,
                        peer: p.peer,
                    })
                },
                event::PROXY_OP => proxy_op(&unsafe { d.u.proxyOp }),
                event::PROXY_STEP => Start::ProxyStep,
                event::KERNEL_CH if $kernel => Start::KernelCh { p_timer: 0 },
                _ => Start::Other,
            };
            // SAFETY: NCCL's contract for `startEvent`.
            unsafe { start_common(context, handle, d.parentObj, start) }
        }
    };
}
start_v2_like!(start_v2, DescrV2, false);
start_v2_like!(start_v3, DescrV3, true);

/// Versions 4 to 6 (the same fields tprof reads, by name; API events from v5).
macro_rules! start_v4_like {
    ($f:ident, $descr:ty, $api:tt) => {
        unsafe extern "C" fn $f(context: *mut c_void, handle: *mut *mut c_void, d: *mut $descr) -> c_int {
            if d.is_null() {
                return NCCL_SUCCESS;
            }
            // SAFETY: NCCL's contract: a valid descriptor for the call (read in place, not copied).
            let d = unsafe { &*d };
            if d.type_ as u64 == event::PROXY_STEP {
                // SAFETY: NCCL's contract for `startEvent`.
                return unsafe { start_step(context, handle, d.parentObj) };
            }
            let start = || match d.type_ as u64 {
                // SAFETY (every union read and string below): `type_` says which member NCCL filled;
                // its strings are NULL or NCCL's static names.
                event::COLL => unsafe {
                    let c = d.u.coll;
                    Start::Task(TaskDescr {
                        comm: 0,
                        op: op_of(c.func),
                        seq: c.seqNumber,
                        count: c.count as u64,
                        datatype: intern_cstr(c.datatype),
                        algo: intern_cstr(c.algo),
                        proto: intern_cstr(c.proto),
                        nchannels: c.nChannels,
                        nwarps: c.nWarps,
                        peer: c.root,
                    })
                },
                event::P2P => unsafe {
                    let p = d.u.p2p;
                    Start::Task(TaskDescr {
                        comm: 0,
                        op: op_of(p.func),
                        seq: 0,
                        count: p.count as u64,
                        datatype: intern_cstr(p.datatype),
                        algo: StrId::NONE,
                        proto: StrId::NONE,
                        nchannels: p.nChannels,
                        nwarps: 0,
                        peer: p.peer,
                    })
                },
                event::PROXY_OP => proxy_op(&unsafe { d.u.proxyOp }),
                event::PROXY_STEP => Start::ProxyStep,
                event::KERNEL_CH => Start::KernelCh { p_timer: unsafe { d.u.kernelCh }.pTimer },
                t => start_v4_like!(@api $api, t, d),
            };
            // SAFETY: NCCL's contract for `startEvent`.
            unsafe { start_common(context, handle, d.parentObj, start) }
        }
    };
    (@api no, $t:ident, $d:ident) => {{
        let _ = $t;
        Start::Other
    }};
    (@api yes, $t:ident, $d:ident) => {
        match $t {
            // SAFETY: `type_` says which member NCCL filled.
            event::COLL_API => Start::Api { graph_captured: unsafe { $d.u.collApi }.graphCaptured },
            event::P2P_API => Start::Api { graph_captured: unsafe { $d.u.p2pApi }.graphCaptured },
            _ => Start::Other,
        }
    };
}
start_v4_like!(start_v4, DescrV4, no);
start_v4_like!(start_v5, DescrV5, yes);
start_v4_like!(start_v6, DescrV6, yes);

// ---------------------------------------------------------------- recordEventState

unsafe extern "C" fn record_v1(handle: *mut c_void, st: c_int, args: *mut StateArgsV1) -> c_int {
    ffi_guard(NCCL_SUCCESS, || {
        // SAFETY: NCCL's contract: NULL or the arguments of the state; proxy states carry `proxyOp`.
        let size = (!args.is_null() && st <= state::PROXY_STEP_RECV_GPU_WAIT)
            .then(|| unsafe { (*args).proxyOp.transSize } as u64);
        events::record_state(handle as usize, st, size, None);
        NCCL_SUCCESS
    })
}

unsafe extern "C" fn record_v4(handle: *mut c_void, st: c_int, args: *mut StateArgsV4) -> c_int {
    ffi_guard(NCCL_SUCCESS, || {
        let (size, timer) = if args.is_null() {
            (None, None)
        } else if st == state::KERNEL_CH_STOP {
            // SAFETY: NCCL's contract: the kernel-channel stop carries `kernelCh`.
            (None, Some(unsafe { (*args).kernelCh.pTimer }))
        } else if matches!(
            st,
            state::PROXY_STEP_SEND_GPU_WAIT..=state::PROXY_STEP_RECV_GPU_WAIT | state::PROXY_STEP_SEND_PEER_WAIT_V4
        ) {
            // SAFETY: NCCL's contract: proxy step states carry `proxyStep`.
            (Some(unsafe { (*args).proxyStep.transSize } as u64), None)
        } else {
            (None, None)
        };
        events::record_state(handle as usize, st, size, timer);
        NCCL_SUCCESS
    })
}

// ---------------------------------------------------------------- the exported tables

#[no_mangle]
pub static ncclProfiler_v1: ProfilerV1 = Profiler {
    name: NAME.as_ptr(),
    init: init_v1,
    startEvent: start_v1,
    stopEvent: stop_event,
    recordEventState: record_v1,
    finalize,
};
#[no_mangle]
pub static ncclProfiler_v2: ProfilerV2 = Profiler {
    name: NAME.as_ptr(),
    init: init_v2,
    startEvent: start_v2,
    stopEvent: stop_event,
    recordEventState: record_v1,
    finalize,
};
#[no_mangle]
pub static ncclProfiler_v3: ProfilerV3 = Profiler {
    name: NAME.as_ptr(),
    init: init_v3,
    startEvent: start_v3,
    stopEvent: stop_event,
    recordEventState: record_v1,
    finalize,
};
#[no_mangle]
pub static ncclProfiler_v4: ProfilerV4 = Profiler {
    name: NAME.as_ptr(),
    init: init_v4,
    startEvent: start_v4,
    stopEvent: stop_event,
    recordEventState: record_v4,
    finalize,
};
#[no_mangle]
pub static ncclProfiler_v5: ProfilerV5 = Profiler {
    name: NAME.as_ptr(),
    init: init_v5,
    startEvent: start_v5,
    stopEvent: stop_event,
    recordEventState: record_v4,
    finalize,
};
#[no_mangle]
pub static ncclProfiler_v6: ProfilerV6 = Profiler {
    name: NAME.as_ptr(),
    init: init_v6,
    startEvent: start_v6,
    stopEvent: stop_event,
    recordEventState: record_v4,
    finalize,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_by_mode_ask_only_what_the_mode_needs() {
        use abi::event::*;
        assert_eq!(activation_mask(6, Mode::Metrics), 0);
        assert_eq!(activation_mask(6, Mode::Flight), COLL | P2P | KERNEL_CH);
        assert_eq!(activation_mask(3, Mode::Flight), COLL | P2P);
        let full = activation_mask(6, Mode::Full);
        assert_eq!(full, COLL | P2P | PROXY_OP | PROXY_STEP | KERNEL_CH | COLL_API | P2P_API);
        assert_eq!(activation_mask(4, Mode::Full) & (COLL_API | P2P_API), 0);
        assert_eq!(full & (GROUP | PROXY_CTRL | NET_PLUGIN | KERNEL_LAUNCH | CE_COLL), 0);
    }

    #[test]
    fn function_names_map_to_ops() {
        assert_eq!(op_named(b"AlltoAll"), CollOp::AllToAll);
        assert_eq!(op_named(b"ReduceScatter"), CollOp::ReduceScatter);
        assert_eq!(v1_func(4), CollOp::AllReduce);
        assert_eq!(op_named(b"SendRecv"), CollOp::Unknown);
    }
}
