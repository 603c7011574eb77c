//! One interposed call, as every wrapper records it (the `interpose!` macro writes most wrappers):
//! real function from its `RealFn` slot (missing: warn once, return the no-driver error) ->
//! [`begin`] (init, recording?, reentrancy guard, shim correlation id) -> CUPTI external correlation
//! push for calls that create GPU work -> timestamp -> real call -> timestamp -> pop ->
//! `Record::Api` (+ an estimated `Kernel` for launches when CUPTI is off, `Sync` for synchronising
//! calls, `Memory` for allocations). Calls made while this thread is already inside tprof (the
//! real runtime calling the driver, CUPTI, our own work) go straight through unrecorded.
//!
//! Launches into a capturing stream are not executions (see `graph_capture`): they get their `Api`
//! record only. While a capture is in progress, calls made with the window closed are still
//! followed (nothing recorded), so the captured graph is known when it is launched later.
//!
//! The panic fence: what happens before the real call runs in one `ffi_guard` ([`started`]), what
//! happens after it in another (the `finish` methods), the real call itself outside both. A panic
//! in tprof's part turns tprof off with one line; the program's call runs and returns its result.
//!
//! A kernel launch recorded with CUPTI off and no stream capture in progress takes the launch's
//! short way instead (`interpose!`'s `launches`, [`ApiCall::finish_launch`]): no fence, as nothing
//! on it can panic (the steps that could are fenced, out of line), and the launch's raw facts in one
//! buffer slot, from which the writer thread builds the `Api` and estimated `Kernel` records.

use std::ffi::c_int;

use tprof_format::{ApiDomain, MemOp, MemSpace, Record, StrId, SyncKind};

use super::cuda_types::Dim3;
use super::graph_capture;
use crate::base::panic_fence::ffi_guard;
use crate::record::interning::StaticName;
use crate::record::reentrancy::{Reentrancy, ReentrancyGuard};
use crate::record::thread::ThreadCtx;

/// The calling thread's current device as tracked from `cudaSetDevice` (CUDA's default: 0).
#[inline]
pub fn current_device() -> u32 {
    crate::record::thread::ctx().device.get()
}

/// Tracks the device made current on this thread (`cudaSetDevice`).
pub(crate) fn set_current_device(dev: u32) {
    crate::record::thread::ctx().device.set(dev);
}

/// What a call does, for the records beyond `Api`.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Work {
    /// No GPU work: only the `Api` record (`arg` as given).
    Plain { arg: u64 },
    /// No GPU work, on a stream (event records, callbacks): the `Api` record with its stream.
    Stream { stream: u64, arg: u64 },
    /// A completion poll of `handle` (a stream, or an event: then `stream` is 0), which programs repeat
    /// until the answer changes: identical repeats are counted into one `ApiRepeat` record.
    Poll { stream: u64, handle: u64 },
    /// A kernel launch.
    Launch { name: StrId, grid: Dim3, block: Dim3, smem: u32, stream: u64 },
    /// A memcpy / memset (or a host function: ordered like GPU work): no estimated record of its own.
    Gpu { bytes: u64, stream: u64 },
    /// A graph launch: without CUPTI, one estimated `Kernel` per kernel the graph captured.
    GraphLaunch { exec: usize, stream: u64 },
    /// A synchronising call (host waits, or a stream waits on an event).
    Sync { kind: SyncKind, stream: u64, event: u64 },
}

impl Work {
    fn creates_gpu_work(&self) -> bool {
        matches!(self, Work::Launch { .. } | Work::Gpu { .. } | Work::GraphLaunch { .. })
    }
}

/// A kernel launch's arguments as the launch wrappers read them (`interpose!`'s `launches`):
/// [`Work::Launch`] on the general path.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Launch {
    pub name: StrId,
    pub grid: Dim3,
    pub block: Dim3,
    pub smem: u32,
    pub stream: u64,
}

impl From<Launch> for Work {
    #[inline(always)]
    fn from(l: Launch) -> Work {
        Work::Launch { name: l.name, grid: l.grid, block: l.block, smem: l.smem, stream: l.stream }
    }
}

/// A call being recorded. Holds the reentrancy guard, so everything the real function does on this
/// thread goes through unrecorded.
pub(crate) struct ApiCall {
    pub correlation: u32,
    pub start: u64,
    pushed: bool,
    /// A host-blocking call published to the hang watchdog.
    blocking: bool,
    /// False for [`begin_outer`] calls made while the capture window is closed: tracked, not recorded.
    recording: bool,
    /// The calling thread's context: the call's only TLS lookup.
    ctx: &'static ThreadCtx,
    _inside: ReentrancyGuard,
}

/// A memory event to record with the call ([`ApiCall::finish_memory`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemEvent {
    pub op: MemOp,
    pub space: MemSpace,
    pub device: u32,
    pub address: u64,
    pub bytes: u64,
    pub reserved: u64,
}

/// Starts recording a call, or None (not recording, or already inside tprof on this thread). With the
/// window closed the cost is two relaxed loads, one TLS lookup and a counter increment.
#[inline(always)]
pub(crate) fn begin() -> Option<ApiCall> {
    if !crate::base::switch::is_recording() {
        return begin_closed();
    }
    begin_recording()
}

/// [`begin`] once the window was seen open: counts the call, enters tprof, takes a correlation id.
#[inline(always)]
pub(crate) fn begin_recording() -> Option<ApiCall> {
    let ctx = crate::record::thread::ctx();
    // The per-thread call counter counts whether or not the window is open.
    crate::record::call_counters::count_call_in(ctx, true);
    let inside = Reentrancy::enter_in(ctx)?;
    Some(ApiCall {
        correlation: crate::record::correlation::next_id_in(ctx),
        start: 0,
        pushed: false,
        blocking: false,
        recording: true,
        ctx,
        _inside: inside,
    })
}

/// True when a recorded launch can take the short way ([`ApiCall::finish_launch`]): CUPTI off (no
/// external correlation to push, an estimated `Kernel` record) and no stream capture in progress
/// (the launch runs). Two relaxed loads.
#[inline(always)]
pub(crate) fn launch_short_way() -> bool {
    !crate::cupti::is_active() && !graph_capture::any_active()
}

/// The window is closed (or tprof not initialised yet): count the call, record nothing.
#[inline(never)]
fn begin_closed() -> Option<ApiCall> {
    if count_closed_call() {
        return begin_recording();
    }
    None
}

/// Called by a wrapper that found the window closed: initialises tprof on the process's first call,
/// then counts the call as made with the window closed and returns false, or returns true (counting
/// nothing) when the window is open after all (initialisation just opened it). Runs on every call
/// with the window closed, so it has no fence of its own: initialisation runs behind one, and the
/// rest is relaxed loads and stores that cannot panic (the counter block's first registration,
/// `call_counters::count_slow`, is fenced).
#[inline(never)]
pub(crate) fn count_closed_call() -> bool {
    crate::lifecycle::ensure_init();
    if crate::base::switch::is_recording() {
        return true;
    }
    crate::record::call_counters::count_call_in(crate::record::thread::ctx(), false);
    false
}

/// A wrapper's window test, inlined into it: true when the window is closed and the call was counted
/// (forward it), false when it is to be recorded. Once initialisation has decided, counting is a few
/// loads and a store with no call (the thread context through static TLS), so the wrapper forwards
/// the call with a jump, without saving its arguments; the first call initialises tprof
/// ([`count_closed_call`]). No panic is possible here (relaxed loads and stores; the counter block's
/// first registration is fenced).
#[inline(always)]
pub(crate) fn closed_and_counted() -> bool {
    if crate::base::switch::is_recording() {
        return false;
    }
    if crate::base::switch::is_undecided() {
        return !count_closed_call();
    }
    crate::record::call_counters::count_call_in(crate::record::thread::ctx(), false);
    true
}

/// The wrappers' shortest path: true when the call is only to be counted and forwarded (window
/// closed, tprof decided, no stream capture to follow) and it was counted, through static TLS, without
/// a single call instruction, so the wrapper forwards with a jump and never saves its arguments. False:
/// nothing was done, the wrapper takes its full path (which counts, initialises, records or follows).
/// Loads and one store that cannot panic.
#[inline(always)]
pub(crate) fn counted_closed_fast() -> bool {
    if crate::base::switch::is_recording() || crate::base::switch::is_undecided() || graph_capture::any_active() {
        return false;
    }
    let Some(ctx) = crate::record::thread::ctx_static() else { return false };
    crate::record::call_counters::try_count_closed(ctx)
}

/// Starts a call behind the panic fence: `begin` (one of the `begin*` functions) and, when it
/// records or tracks the call, the description of its `work` and [`ApiCall::start`]. None: the call is
/// neither recorded nor tracked (or tprof panicked: it is off now).
#[inline(always)]
pub(crate) fn started(begin: impl FnOnce() -> Option<ApiCall>, work: impl FnOnce() -> Work) -> Option<(ApiCall, Work)> {
    ffi_guard(None, || {
        let mut call = begin()?;
        let work = work();
        call.start(&work);
        Some((call, work))
    })
}

/// A call made with the window closed while a stream capture is in progress: followed for its
/// effect on the capture (the reentrancy guard is taken), nothing recorded. The closed-window call
/// was counted already.
#[inline(never)]
pub(crate) fn begin_tracking() -> Option<ApiCall> {
    let ctx = crate::record::thread::ctx();
    let inside = Reentrancy::enter_in(ctx)?;
    Some(ApiCall { correlation: 0, start: 0, pushed: false, blocking: false, recording: false, ctx, _inside: inside })
}

/// [`begin`] for a call whose effect on stream capture tprof follows: with the window closed, a call
/// tracked (`track`) but not recorded, else None.
#[inline]
pub(crate) fn begin_tracked(track: bool) -> Option<ApiCall> {
    if crate::base::switch::is_recording() || count_closed_call() {
        return begin_recording();
    }
    if track {
        begin_tracking()
    } else {
        None
    }
}

/// Runs a call tprof follows (stream capture, kernel naming): `real`, then `after(result)` still
/// inside tprof (so it is not run for tprof's own calls), recording the call as `Api` (+ the records
/// of `work`) when the window is open. `track`: follow the call with the window closed too.
#[inline]
pub(crate) fn call_tracked(
    track: bool,
    name: &StaticName,
    work: Work,
    real: impl FnOnce() -> c_int,
    after: impl FnOnce(c_int),
) -> c_int {
    let call = started(|| begin_tracked(track), || work);
    let r = real();
    if let Some((c, work)) = call {
        ffi_guard((), || after(r));
        c.finish(ApiDomain::Runtime, name, r, &work);
    }
    r
}

/// A successful launch (kernel or graph) into a capturing stream: remembered as part of the captured
/// graph; true when captured (it did not run).
fn into_capture(work: &Work) -> bool {
    match *work {
        Work::Launch { name, grid, block, smem, stream } => {
            graph_capture::captured_launch(stream, &graph_capture::KernelNode { name, grid, block, smem })
        }
        Work::GraphLaunch { exec, stream } => graph_capture::captured_graph_launch(stream, exec),
        _ => false,
    }
}

/// Like [`begin`], but also Some while the capture window is closed (then nothing is recorded): for
/// calls whose effect tprof must track all the time (allocations), only at the outermost level.
#[inline]
pub(crate) fn begin_outer() -> Option<ApiCall> {
    crate::lifecycle::ensure_init();
    let ctx = crate::record::thread::ctx();
    let inside = Reentrancy::enter_in(ctx)?;
    let recording = crate::base::switch::is_recording();
    // The per-thread call counter counts whether or not the window is open.
    crate::record::call_counters::count_call_in(ctx, recording);
    let correlation = if recording { crate::record::correlation::next_id_in(ctx) } else { 0 };
    Some(ApiCall { correlation, start: 0, pushed: false, blocking: false, recording, ctx, _inside: inside })
}

/// What a call's result says about the driver (see `crate::driver`): one relaxed load and a branch
/// once the driver is known to work and the call succeeded.
#[inline(always)]
fn note_driver_state(domain: ApiDomain, name: &StaticName, result: i32, work: &Work) {
    if result != 0 || !crate::base::driver::works() {
        note_driver_state_slow(domain, name, result, work);
    }
}

#[cold]
#[inline(never)]
fn note_driver_state_slow(domain: ApiDomain, name: &StaticName, result: i32, work: &Work) {
    match domain {
        ApiDomain::Driver => crate::base::driver::note_driver_result(name.text(), result),
        ApiDomain::Nccl | ApiDomain::CuptiRuntime | ApiDomain::CuptiDriver => {}
        ApiDomain::Runtime => {
            let needs_driver = matches!(work, Work::Launch { .. } | Work::Gpu { .. } | Work::Sync { .. });
            crate::base::driver::note_runtime_result(name.text(), result, needs_driver)
        }
    }
}

/// [`note_driver_state`]'s slow side for a launch, behind the fence.
#[cold]
#[inline(never)]
fn note_launch_driver_state(domain: ApiDomain, name: &StaticName, result: i32) {
    let work = Work::Launch { name: StrId::NONE, grid: Dim3::default(), block: Dim3::default(), smem: 0, stream: 0 };
    ffi_guard((), || note_driver_state_slow(domain, name, result, &work));
}

/// The API name the hang watchdog reports for a host-blocking synchronization.
fn blocking_name(kind: SyncKind) -> Option<&'static StaticName> {
    static STREAM: StaticName = StaticName::new("cudaStreamSynchronize");
    static EVENT: StaticName = StaticName::new("cudaEventSynchronize");
    static DEVICE: StaticName = StaticName::new("cudaDeviceSynchronize");
    match kind {
        SyncKind::StreamSynchronize => Some(&STREAM),
        SyncKind::EventSynchronize => Some(&EVENT),
        SyncKind::ContextSynchronize => Some(&DEVICE),
        _ => None,
    }
}

impl ApiCall {
    /// Pushes the external correlation for GPU work and takes the start time: right before the real call.
    #[inline]
    pub(crate) fn start(&mut self, work: &Work) {
        if self.recording && work.creates_gpu_work() && crate::cupti::is_active() {
            crate::cupti::push_external(self.correlation);
            self.pushed = true;
        }
        self.start = crate::base::ticks::now();
        if let Work::Sync { kind, .. } = work {
            if let Some(name) = blocking_name(*kind) {
                crate::record::recorder::set_pending_in(self.ctx, name.id(), self.start);
                self.blocking = true;
            }
        }
    }

    /// Ends the call behind the panic fence: timestamps, pops the external correlation, emits the
    /// records.
    #[inline]
    pub(crate) fn finish(self, domain: ApiDomain, name: &StaticName, result: i32, work: &Work) {
        ffi_guard((), || {
            let end = crate::base::ticks::now();
            note_driver_state(domain, name, result, work);
            if self.blocking {
                crate::record::recorder::clear_pending_in(self.ctx);
            }
            if self.pushed {
                crate::cupti::pop_external();
            }
            let captured = result == 0 && graph_capture::any_active() && into_capture(work);
            if self.recording {
                self.emit(domain, name, result, work, end, captured);
            }
        })
    }

    /// Ends a launch begun the short way ([`launch_short_way`] held; `start`: ticks before the real
    /// call), with no panic fence: the launch's facts go into the thread's buffer as one slot of plain
    /// stores, the writer thread builds the `Api` and estimated `Kernel` records from them. Nothing
    /// here can panic (loads, stores, `rdtsc`, integer compares); what could (a failed call's driver
    /// note, the thread's first record, a repeat run to write, a capture or CUPTI started meanwhile,
    /// the API name's first interning) goes the general way, behind the fence, out of line.
    #[inline(always)]
    pub(crate) fn finish_launch(self, domain: ApiDomain, name: &StaticName, result: i32, launch: Launch, start: u64) {
        let end = crate::base::ticks::now();
        if result != 0 || !crate::base::driver::works() {
            note_launch_driver_state(domain, name, result);
        }
        let api = name.interned();
        if api != StrId::NONE && launch_short_way() {
            let facts = crate::record::launch::LaunchFacts {
                start,
                end,
                stream: launch.stream,
                grid: launch.grid.arr(),
                block: launch.block.arr(),
                api,
                kernel: launch.name,
                correlation: self.correlation,
                device: self.ctx.device.get(),
                result,
                smem: launch.smem,
                domain,
            };
            if crate::record::recorder::push_launch_in(self.ctx, facts) {
                return;
            }
        }
        self.finish_launch_general(domain, name, result, launch, start, end);
    }

    /// [`ApiCall::finish_launch`] when the short way does not apply: the general records, behind the fence.
    #[cold]
    #[inline(never)]
    fn finish_launch_general(
        mut self,
        domain: ApiDomain,
        name: &StaticName,
        result: i32,
        launch: Launch,
        start: u64,
        end: u64,
    ) {
        self.start = start;
        ffi_guard((), || {
            let work = Work::from(launch);
            let captured = result == 0 && graph_capture::any_active() && into_capture(&work);
            self.emit(domain, name, result, &work, end, captured);
        })
    }

    /// Ends an allocation / free: the `Api` record plus the `Memory` record.
    pub(crate) fn finish_memory(self, domain: ApiDomain, name: &StaticName, result: i32, work: &Work, mem: MemEvent) {
        self.finish_memory_events(domain, name, result, work, std::slice::from_ref(&mem));
    }

    /// Ends a call with any number of memory events (none, or one per device an unmap freed memory
    /// on), behind the panic fence: the `Api` record plus a `Memory` record for each.
    pub(crate) fn finish_memory_events(
        self,
        domain: ApiDomain,
        name: &StaticName,
        result: i32,
        work: &Work,
        mems: &[MemEvent],
    ) {
        ffi_guard((), || {
            let end = crate::base::ticks::now();
            note_driver_state(domain, name, result, &Work::Gpu { bytes: 0, stream: 0 });
            if !self.recording {
                return;
            }
            self.emit(domain, name, result, work, end, false);
            for mem in mems {
                crate::record::recorder::emit_in(
                    self.ctx,
                    Record::Memory {
                        op: mem.op,
                        space: mem.space,
                        device: mem.device,
                        address: mem.address,
                        bytes: mem.bytes,
                        reserved: mem.reserved,
                        ts: end,
                        result,
                        correlation: self.correlation,
                        tid: self.ctx.tid(),
                    },
                );
            }
        });
    }

    /// `captured`: a launch recorded into a graph, not executed (no estimated kernel).
    #[inline(always)]
    fn emit(&self, domain: ApiDomain, name: &StaticName, result: i32, work: &Work, end: u64, captured: bool) {
        let ctx = self.ctx;
        let tid = ctx.tid();
        let estimate = result == 0 && !captured && !crate::cupti::is_active();
        if let (Work::Launch { name: kernel, grid, block, smem, stream }, true) = (*work, estimate) {
            // The launch's two records in one go (one buffer check, one publication), built as the
            // writer thread builds a launch that took the short way.
            let facts = crate::record::launch::LaunchFacts {
                start: self.start,
                end,
                stream,
                grid: grid.arr(),
                block: block.arr(),
                api: name.id(),
                kernel,
                correlation: self.correlation,
                device: ctx.device.get(),
                result,
                smem,
                domain,
            };
            return match facts.records(tid) {
                (api, Some(kernel)) => crate::record::recorder::emit_pair_in(ctx, api, kernel),
                (api, None) => crate::record::recorder::emit_in(ctx, api),
            };
        }
        let (detail, stream, arg) = match *work {
            Work::Plain { arg } => (StrId::NONE, 0, arg),
            Work::Stream { stream, arg } => (StrId::NONE, stream, arg),
            Work::Poll { stream, .. } => (StrId::NONE, stream, 0),
            Work::Launch { name, grid, block, stream, .. } => (name, stream, grid.count() * block.count()),
            Work::Gpu { bytes, stream } => (StrId::NONE, stream, bytes),
            Work::GraphLaunch { stream, .. } => (StrId::NONE, stream, 0),
            Work::Sync { stream, .. } => (StrId::NONE, stream, 0),
        };
        let api = Record::Api {
            tid,
            domain,
            name: name.id(),
            start: self.start,
            end,
            result,
            correlation: self.correlation,
            detail,
            stream,
            arg,
        };
        if let Work::Poll { handle, .. } = *work {
            return crate::record::recorder::emit_repeatable_in(ctx, api, handle);
        }
        crate::record::recorder::emit_in(ctx, api);
        match *work {
            Work::GraphLaunch { exec, stream } if estimate => {
                graph_capture::for_each_graph_kernel(exec, |k, graph_id| {
                    self.emit_estimated_kernel(stream, k, graph_id)
                });
            }
            Work::Sync { kind, stream, event } => crate::record::recorder::emit_in(
                ctx,
                Record::Sync {
                    kind,
                    tid,
                    context: 0,
                    stream: stream as u32,
                    event,
                    start: self.start,
                    end,
                    correlation: self.correlation,
                    result,
                },
            ),
            _ => {}
        }
    }

    /// A kernel known to run, GPU time unknown (CUPTI off): `start == end == 0`.
    fn emit_estimated_kernel(&self, stream: u64, k: graph_capture::KernelNode, graph_id: u32) {
        crate::record::recorder::emit_in(self.ctx, self.estimated_kernel(stream, k, graph_id));
    }

    #[inline(always)]
    fn estimated_kernel(&self, stream: u64, k: graph_capture::KernelNode, graph_id: u32) -> Record {
        Record::Kernel {
            device: self.ctx.device.get(),
            context: 0,
            stream: stream as u32,
            start: 0,
            end: 0,
            grid: k.grid.arr(),
            block: k.block.arr(),
            registers: 0,
            shared_mem: k.smem,
            correlation: self.correlation,
            name: k.name,
            graph_id,
        }
    }
}

/// Defines interposers with the common pattern, their real-function slots (one module per
/// wrapper, named like it) and the module's `HOOKS` table. Kernel launches go in `launches`, their
/// expression giving a [`Launch`]: with the window open, CUPTI off and no stream capture in
/// progress they take the short way ([`ApiCall::finish_launch`]); otherwise the general path with
/// [`Work::Launch`].
///
/// ```ignore
/// interpose! { domain = Runtime, missing = real::RT_ERR_NO_DRIVER;
///     extra_hooks = [];
///     launches = [
///         fn cudaLaunchKernel(f: *const c_void, g: Dim3, b: Dim3, a: *mut *mut c_void, m: usize, s: Handle) -> c_int
///             => launch(f, g, b, m, s);
///     ];
///     fn cudaMemcpyAsync(dst: *mut c_void, src: *const c_void, n: usize, kind: c_int, s: Handle) -> c_int
///         => Work::Gpu { bytes: n as u64, stream: s as u64 };
/// }
/// ```
macro_rules! interpose {
    (
        domain = $domain:ident, missing = $missing:expr;
        extra_hooks = [$($extra:ident),* $(,)?];
        $(launches = [
            $(
                $(#[$lmeta:meta])*
                fn $lname:ident($($larg:ident: $lty:ty),* $(,)?) -> $lret:ty => $launch:expr;
            )*
        ];)?
        $(
            $(#[$meta:meta])*
            fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty => $work:expr;
        )*
    ) => {
        $($(
            $crate::intercept::api_call::interpose!(@wrapper launch, $domain, $missing,
                [$(#[$lmeta])*] fn $lname($($larg: $lty),*) -> $lret => $launch);
        )*)?
        $(
            $crate::intercept::api_call::interpose!(@wrapper plain, $domain, $missing,
                [$(#[$meta])*] fn $name($($arg: $ty),*) -> $ret => $work);
        )*

        /// The wrappers of this module, for the `dlsym` and entry-point hooks.
        pub static HOOKS: &[$crate::intercept::real::Hook] = &[
            $($(
                $crate::intercept::real::Hook {
                    name: $crate::intercept::real::cstr(concat!(stringify!($lname), "\0").as_bytes()),
                    real: &$lname::REAL,
                    wrapper: $lname as *const (),
                },
            )*)?
            $(
                $crate::intercept::real::Hook {
                    name: $crate::intercept::real::cstr(concat!(stringify!($name), "\0").as_bytes()),
                    real: &$name::REAL,
                    wrapper: $name as *const (),
                },
            )*
            $(
                $crate::intercept::real::Hook {
                    name: $crate::intercept::real::cstr(concat!(stringify!($extra), "\0").as_bytes()),
                    real: &$extra::REAL,
                    wrapper: $extra as *const (),
                },
            )*
        ];
    };

    // One wrapper: its slot and name, the shortest path (window closed: a jump to the real function),
    // and `full` with the recorded call (`@traced`, by kind).
    (@wrapper $kind:ident, $domain:ident, $missing:expr,
        [$(#[$meta:meta])*] fn $name:ident($($arg:ident: $ty:ty),*) -> $ret:ty => $work:expr) => {
        #[allow(non_snake_case)]
        #[doc(hidden)]
        pub mod $name {
            pub static REAL: $crate::intercept::real::RealFn =
                $crate::intercept::real::RealFn::new($crate::intercept::real::cstr(concat!(stringify!($name), "\0").as_bytes()));
            pub static NAME: $crate::record::interning::StaticName = $crate::record::interning::StaticName::new(stringify!($name));
        }

        $(#[$meta])*
        #[no_mangle]
        #[allow(clippy::missing_safety_doc)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            type Real = unsafe extern "C" fn($($ty),*) -> $ret;
            let resolved = $name::REAL.resolved();
            if !resolved.is_null() && $crate::intercept::api_call::counted_closed_fast() {
                // SAFETY: the slot holds the real definition of this symbol, which has this C signature.
                let real = unsafe { std::mem::transmute::<*mut std::ffi::c_void, Real>(resolved) };
                // SAFETY: forwarding the caller's arguments unchanged to the real function.
                return unsafe { real($($arg),*) };
            }
            // `full` through its address hidden from the optimiser: a direct call is not made a jump
            // when the C ABI puts arguments on the stack (the launches: two `dim3`s by value and six
            // more), a call through a register is, so no wrapper saves registers or copies arguments.
            let full_fn: Real = full;
            // SAFETY: `full_fn`'s own address, unchanged, as the function type it has.
            let full_fn = unsafe {
                std::mem::transmute::<*const (), Real>($crate::intercept::real::opaque_address(full_fn as *const ()))
            };
            // SAFETY: the caller's arguments, unchanged, to the full path of this wrapper.
            return unsafe { full_fn($($arg),*) };
            /// Everything but the shortest path: resolution, initialisation, the closed window
            /// when the short way is not available, recording. Same C signature as the wrapper,
            /// so the wrapper reaches it with a jump.
            #[inline(never)]
            unsafe extern "C" fn full($($arg: $ty),*) -> $ret {
            let Some(real) = $name::REAL.get() else { return $name::REAL.missing($missing) };
            // SAFETY: the slot holds the real definition of this symbol, which has this C signature.
            let real = unsafe { std::mem::transmute::<*mut std::ffi::c_void, Real>(real) };
            // Window closed: count the call and forward it, before anything else is set up
            // (while a stream capture is in progress, follow it: it may add to the graph).
            if $crate::intercept::api_call::closed_and_counted() {
                if !$crate::intercept::graph_capture::any_active() {
                    // SAFETY: forwarding the caller's arguments unchanged to the real function.
                    return unsafe { real($($arg),*) };
                }
                // SAFETY: the caller's arguments, unchanged, with the real function of this symbol.
                return unsafe { traced(real, false, $($arg),*) };
            }
            $crate::intercept::api_call::interpose!(@short $kind, $domain, $name, real, ($($arg),*) => $work);
            $crate::intercept::api_call::interpose!(@traced $kind, $domain, $name, ($($arg: $ty),*) -> $ret => $work);
            // SAFETY: the caller's arguments, unchanged, with the real function of this symbol.
            unsafe { traced(real, true, $($arg),*) }
            }
        }
    };

    // A recorded call's short way, in `full` itself (the caller's arguments still where the C ABI
    // put them): none for most calls.
    (@short plain, $domain:ident, $name:ident, $real:ident, ($($arg:ident),*) => $work:expr) => {};

    // A launch, window open, CUPTI off, no stream capture in progress: no panic fence (everything
    // here is loads, stores, compares and `rdtsc`; the few steps that could panic are fenced, out of
    // line), the launch's facts stored in one buffer slot ([`ApiCall::finish_launch`]).
    (@short launch, $domain:ident, $name:ident, $real:ident, ($($arg:ident),*) => $launch:expr) => {
        if $crate::intercept::api_call::launch_short_way() {
            let Some(call) = $crate::intercept::api_call::begin_recording() else {
                // SAFETY: forwarding the caller's arguments unchanged to the real function.
                return unsafe { $real($($arg),*) };
            };
            let launch: $crate::intercept::api_call::Launch = $launch;
            let start = $crate::base::ticks::now();
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            let result = unsafe { $real($($arg),*) };
            call.finish_launch(tprof_format::ApiDomain::$domain, &$name::NAME, result as i32, launch, start);
            return result;
        }
    };

    // The recorded (or, with the window closed, followed) call, out of line so the closed-window
    // path stays a few instructions. `recording`: the window is open.
    (@traced $kind:ident, $domain:ident, $name:ident, ($($arg:ident: $ty:ty),*) -> $ret:ty => $work:expr) => {
        #[inline(never)]
        #[allow(clippy::too_many_arguments)]
        unsafe fn traced(real: Real, recording: bool, $($arg: $ty),*) -> $ret {
            let call = $crate::intercept::api_call::started(
                || if recording {
                    $crate::intercept::api_call::begin_recording()
                } else {
                    $crate::intercept::api_call::begin_tracking()
                },
                || -> $crate::intercept::api_call::Work { $crate::intercept::api_call::interpose!(@work $kind, $work) },
            );
            let Some((call, work)) = call else {
                // SAFETY: forwarding the caller's arguments unchanged to the real function.
                return unsafe { real($($arg),*) };
            };
            // SAFETY: forwarding the caller's arguments unchanged to the real function.
            let result = unsafe { real($($arg),*) };
            call.finish(tprof_format::ApiDomain::$domain, &$name::NAME, result as i32, &work);
            result
        }
    };

    // The general path's `Work`: the wrapper's expression, or for a launch (CUPTI on, a stream
    // capture in progress, or followed with the window closed) `Work::Launch` from its `Launch`.
    (@work plain, $work:expr) => { $work };
    (@work launch, $launch:expr) => { $crate::intercept::api_call::Work::from($launch) };
}
pub(crate) use interpose;

/// Real-function slots and interned API names for hand-written wrappers: one module per name,
/// as `interpose!` makes them.
macro_rules! slots {
    ($($name:ident),* $(,)?) => {
        $(
            #[allow(non_snake_case)]
            #[doc(hidden)]
            pub mod $name {
                pub static REAL: $crate::intercept::real::RealFn =
                    $crate::intercept::real::RealFn::new($crate::intercept::real::cstr(concat!(stringify!($name), "\0").as_bytes()));
                #[allow(dead_code)]
                pub static NAME: $crate::record::interning::StaticName = $crate::record::interning::StaticName::new(stringify!($name));
            }
        )*
    };
}
pub(crate) use slots;

/// Loads the real function of a hand-written wrapper as its C type, or returns the missing-symbol
/// value from the wrapper: `let real = real_or!(cudaMalloc, fn(*mut *mut c_void, usize) -> c_int; 35);`
macro_rules! real_or {
    ($name:ident, fn($($ty:ty),* $(,)?) $(-> $ret:ty)?; $missing:expr) => {{
        type Real = unsafe extern "C" fn($($ty),*) $(-> $ret)?;
        match $name::REAL.get() {
            // SAFETY: the slot holds the real definition of this symbol, which has this C signature.
            Some(p) => unsafe { std::mem::transmute::<*mut std::ffi::c_void, Real>(p) },
            None => return $name::REAL.missing($missing),
        }
    }};
}
pub(crate) use real_or;
