//! NVTX v3 injection library: NVTX's header-only API `dlopen`s `NVTX_INJECTION64_PATH` on first use
//! and calls its `InitializeInjectionNvtx2`, which fills the function-pointer slots of the CORE and
//! CORE2 modules with our hooks. Each NVTX-using DSO initialises separately, so this runs once per DSO.
//!
//! When libtprof is preloaded, [`install_env`] (run from our `.init_array` constructor) points
//! `NVTX_INJECTION64_PATH` at libtprof itself unless the user set it.
//!
//! Domain handles and registered-string handles are our own small values (a tag bit plus the
//! interned name's [`StrId`]), so no table is needed to resolve them.
//!
//! # NCCL's own ranges
//! NCCL (>= 2.2x) emits a range in domain "NCCL" for each of its API calls. When the NCCL
//! interposers see those calls they already record each one as a collective record, so a domain
//! "NCCL" created while a real NCCL call made by an interposer runs ([`crate::intercept::nccl::real_calls::forwarding`])
//! gets a *muted* handle: its ranges, marks and registered strings cost one tag test and record
//! nothing. A domain "NCCL" created elsewhere (NCCL linked statically into another library, whose
//! calls tprof does not see) records as any other domain.

mod step_matcher;

use std::cell::Cell;
use std::ffi::{c_char, c_int, c_uint, c_void};
use std::sync::atomic::{AtomicU64, Ordering};

use tprof_format::{MarkerKind, Record, StrId};

use crate::base::{panic_fence, switch, ticks};
use crate::lifecycle;
use crate::record::{interning, recorder, thread};

pub use step_matcher::{glob, StepMatcher};

type FnPtr = Option<unsafe extern "C" fn()>;
/// `NvtxFunctionTable`: an array of pointers to the slots of one module.
type FunctionTable = *mut *mut FnPtr;
type GetModuleFunctionTable =
    unsafe extern "C" fn(module: c_uint, out_table: *mut FunctionTable, out_size: *mut c_uint) -> c_int;
/// `NvtxGetExportTableFunc_t`.
pub type GetExportTable = unsafe extern "C" fn(export_table_id: u32) -> *const c_void;

#[repr(C)]
struct ExportTableCallbacks {
    struct_size: usize,
    get_module_function_table: Option<GetModuleFunctionTable>,
}

const ETID_CALLBACKS: u32 = 1;
const MODULE_CORE: c_uint = 1;
const MODULE_CORE2: c_uint = 5;

/// `nvtxEventAttributes_t` (v2/v3 layout).
#[repr(C)]
#[derive(Clone, Copy)]
struct EventAttributes {
    version: u16,
    size: u16,
    category: u32,
    color_type: i32,
    color: u32,
    payload_type: i32,
    reserved0: i32,
    payload: u64,
    message_type: i32,
    message: *const c_void,
}

const _: () = assert!(std::mem::size_of::<EventAttributes>() == 48);

const MESSAGE_ASCII: i32 = 1;
const MESSAGE_UNICODE: i32 = 2;
const MESSAGE_REGISTERED: i32 = 3;

const TAG_STRING: u64 = 1 << 32;
const TAG_DOMAIN: u64 = 2 << 32;
/// A domain whose events are dropped (see the module docs).
const TAG_MUTED_DOMAIN: u64 = 3 << 32;
/// The domain NCCL creates for its own ranges.
const NCCL_DOMAIN: &[u8] = b"NCCL";

static NEXT_RANGE_ID: AtomicU64 = AtomicU64::new(1);
/// Start/end ranges that are steps (ids), so their end emits StepEnd. 0 = free.
static STEP_RANGES: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];
/// Steps begun (the step number when the name carries none).
static STEPS_BEGUN: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Push depth of this thread (all domains) and which depths are step ranges.
    static DEPTH: Cell<(i32, u64)> = const { Cell::new((0, 0)) };
    /// Depths whose step range began while the window was closed (steps mode,
    /// metrics): their end is reported to `capture::step_ended` although no StepEnd is recorded.
    static CLOSED_STEPS: Cell<u64> = const { Cell::new(0) };
}

/// Start/end step ranges begun while the window was closed. 0 = free.
static CLOSED_STEP_RANGES: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];

/// A range or mark name, resolved from the three message forms.
struct Name {
    id: StrId,
}

impl Name {
    fn text(&self) -> &'static [u8] {
        interning::lookup(self.id).unwrap_or(b"")
    }
}

/// # Safety
/// `p` must be NULL or a NUL-terminated string.
unsafe fn name_from_cstr(p: *const c_char) -> Name {
    // SAFETY: forwarded contract.
    Name { id: unsafe { interning::intern_cstr(p) } }
}

/// # Safety
/// `p` must be NULL or a NUL-terminated `wchar_t` (UTF-32 on Linux) string.
unsafe fn name_from_wide(p: *const u32) -> Name {
    if p.is_null() {
        return Name { id: StrId::NONE };
    }
    let mut buf = [0u8; 512];
    let mut n = 0usize;
    let mut i = 0usize;
    loop {
        // SAFETY: the string is NUL-terminated; we stop at the terminator.
        let c = unsafe { *p.add(i) };
        if c == 0 {
            break;
        }
        let ch = char::from_u32(c).unwrap_or('\u{fffd}');
        if n + ch.len_utf8() > buf.len() {
            break;
        }
        n += ch.encode_utf8(&mut buf[n..]).len();
        i += 1;
    }
    Name { id: interning::intern_bytes(&buf[..n]) }
}

/// # Safety
/// `attr` must be NULL or point at an `nvtxEventAttributes_t` whose message matches its type.
unsafe fn name_from_attr(attr: *const EventAttributes) -> Name {
    if attr.is_null() {
        return Name { id: StrId::NONE };
    }
    // SAFETY: caller contract; the struct is at least as large as the v2 layout (checked by size).
    let a = unsafe { std::ptr::read_unaligned(attr) };
    if (a.size as usize) < std::mem::size_of::<EventAttributes>() {
        return Name { id: StrId::NONE };
    }
    match a.message_type {
        // SAFETY: an ASCII message is a NUL-terminated char string.
        MESSAGE_ASCII => unsafe { name_from_cstr(a.message as *const c_char) },
        // SAFETY: a UNICODE message is a NUL-terminated wchar_t string.
        MESSAGE_UNICODE => unsafe { name_from_wide(a.message as *const u32) },
        MESSAGE_REGISTERED => Name { id: handle_id(a.message as u64, TAG_STRING) },
        _ => Name { id: StrId::NONE },
    }
}

fn handle_id(h: u64, tag: u64) -> StrId {
    if h & !0xffff_ffff == tag {
        StrId(h as u32)
    } else {
        StrId::NONE
    }
}

fn domain_id(d: *const c_void) -> StrId {
    handle_id(d as u64, TAG_DOMAIN)
}

#[inline]
fn muted(d: *const c_void) -> bool {
    d as u64 & !0xffff_ffff == TAG_MUTED_DOMAIN
}

/// The handle of a new domain: muted for NCCL's own domain while the NCCL interposers see its calls.
fn create_domain(name: Name) -> *const c_void {
    let tag = if name.text() == NCCL_DOMAIN && crate::intercept::nccl::real_calls::forwarding() {
        TAG_MUTED_DOMAIN
    } else {
        TAG_DOMAIN
    };
    (tag | name.id.0 as u64) as *const c_void
}

#[inline]
fn recording() -> bool {
    lifecycle::ensure_init();
    switch::is_recording()
}

/// The number of a step that begins now: the name's trailing number, else the count of steps begun.
fn step_number(name: &Name) -> u64 {
    let n = STEPS_BEGUN.fetch_add(1, Ordering::Relaxed);
    step_matcher::trailing_number(name.text()).unwrap_or(n)
}

/// `number`: already taken by `step_number` (a step that opened the capture window), else None.
fn step_begin(name: &Name, ts: u64, number: Option<u64>) {
    let value = number.unwrap_or_else(|| step_number(name));
    recorder::emit(Record::Marker { kind: MarkerKind::StepBegin, ts, value, name: name.id });
    crate::capture::step_began(value, ts);
}

fn step_end(ts: u64) {
    recorder::emit(Record::Marker { kind: MarkerKind::StepEnd, ts, value: 0, name: StrId::NONE });
    // May close the window (after the step's StepEnd was recorded).
    crate::capture::step_ended(ts);
}

/// A step range begins while the window is closed. Returns Some(step number) when
/// this step opened the window (then the caller records it), None when it stays closed (then the step
/// is tracked in `closed` for its end).
fn closed_step_begin(name: &Name) -> Option<u64> {
    if !crate::capture::tracks_steps() || !step_matcher::is_step(name.id, name.text()) {
        return None;
    }
    let n = step_number(name);
    let ts = ticks::now();
    crate::capture::step_begin_closed(n, ts).then_some(n)
}

fn push(domain: StrId, name: Name) -> c_int {
    let (depth, bits) = DEPTH.try_with(|d| d.get()).unwrap_or((0, 0));
    let bit = 1u64 << depth.clamp(0, 63);
    let _ = CLOSED_STEPS.try_with(|c| c.set(c.get() & !bit));
    let mut opened_at = None;
    if !recording() {
        // A step range may open the window (steps mode) or is tracked closed.
        opened_at = closed_step_begin(&name);
        if opened_at.is_none() || !switch::is_recording() {
            if crate::capture::tracks_steps() && step_matcher::is_step(name.id, name.text()) {
                let _ = CLOSED_STEPS.try_with(|c| c.set(c.get() | bit));
            }
            let _ = DEPTH.try_with(|d| d.set((depth + 1, bits & !bit)));
            return depth;
        }
    }
    let ts = ticks::now();
    recorder::emit(Record::NvtxPush { tid: thread::tid(), domain, name: name.id, ts });
    let is_step = opened_at.is_some() || step_matcher::is_step(name.id, name.text());
    if is_step {
        step_begin(&name, ts, opened_at);
    }
    let bits = if is_step { bits | bit } else { bits & !bit };
    let _ = DEPTH.try_with(|d| d.set((depth + 1, bits)));
    depth
}

fn pop(domain: StrId) -> c_int {
    let (depth, bits) = DEPTH.try_with(|d| d.get()).unwrap_or((0, 0));
    let level = depth - 1;
    let _ = DEPTH.try_with(|d| d.set((level.max(0), bits)));
    // The end of a step tracked while the window was closed.
    if level >= 0 {
        let bit = 1u64 << level.min(63);
        if CLOSED_STEPS.try_with(|c| c.replace(c.get() & !bit) & bit != 0).unwrap_or(false) {
            crate::capture::step_ended(ticks::now());
            return level;
        }
    }
    if !recording() {
        return level;
    }
    let ts = ticks::now();
    recorder::emit(Record::NvtxPop { tid: thread::tid(), domain, ts });
    if level >= 0 && bits & (1u64 << level.min(63)) != 0 {
        step_end(ts);
    }
    level
}

fn range_start(domain: StrId, name: Name) -> u64 {
    let id = NEXT_RANGE_ID.fetch_add(1, Ordering::Relaxed);
    let mut opened_at = None;
    if !recording() {
        // A step range may open the window (steps mode) or is tracked closed.
        opened_at = closed_step_begin(&name);
        if opened_at.is_none() || !switch::is_recording() {
            if crate::capture::tracks_steps() && step_matcher::is_step(name.id, name.text()) {
                if let Some(slot) = CLOSED_STEP_RANGES.iter().find(|s| s.load(Ordering::Relaxed) == 0) {
                    let _ = slot.compare_exchange(0, id, Ordering::AcqRel, Ordering::Relaxed);
                }
            }
            return id;
        }
    }
    let ts = ticks::now();
    recorder::emit(Record::NvtxStart { tid: thread::tid(), domain, name: name.id, id, ts });
    if opened_at.is_some() || step_matcher::is_step(name.id, name.text()) {
        step_begin(&name, ts, opened_at);
        if let Some(slot) = STEP_RANGES.iter().find(|s| s.load(Ordering::Relaxed) == 0) {
            let _ = slot.compare_exchange(0, id, Ordering::AcqRel, Ordering::Relaxed);
        }
    }
    id
}

fn range_end(id: u64) {
    // The end of a step range tracked while the window was closed.
    if crate::capture::tracks_steps() {
        if let Some(slot) = CLOSED_STEP_RANGES.iter().find(|s| s.load(Ordering::Relaxed) == id) {
            slot.store(0, Ordering::Release);
            crate::capture::step_ended(ticks::now());
            return;
        }
    }
    if !recording() {
        return;
    }
    let ts = ticks::now();
    recorder::emit(Record::NvtxEnd { tid: thread::tid(), id, ts });
    if let Some(slot) = STEP_RANGES.iter().find(|s| s.load(Ordering::Relaxed) == id) {
        slot.store(0, Ordering::Release);
        step_end(ts);
    }
}

fn mark(domain: StrId, name: Name) {
    if recording() {
        recorder::emit(Record::NvtxMark { tid: thread::tid(), domain, name: name.id, ts: ticks::now() });
    }
}

fn name_thread(tid: u32, name: Name) {
    if recording() {
        recorder::emit(Record::ThreadName { tid, name: name.id });
    }
}

// ---------------------------------------------------------------- CORE hooks

unsafe extern "C" fn mark_ex(attr: *const EventAttributes) {
    // SAFETY: NVTX passes a valid attribute struct (or NULL).
    panic_fence::ffi_guard((), || mark(StrId::NONE, unsafe { name_from_attr(attr) }))
}
unsafe extern "C" fn mark_a(msg: *const c_char) {
    // SAFETY: NVTX passes a NUL-terminated string (or NULL).
    panic_fence::ffi_guard((), || mark(StrId::NONE, unsafe { name_from_cstr(msg) }))
}
unsafe extern "C" fn mark_w(msg: *const u32) {
    // SAFETY: NVTX passes a NUL-terminated wide string (or NULL).
    panic_fence::ffi_guard((), || mark(StrId::NONE, unsafe { name_from_wide(msg) }))
}
unsafe extern "C" fn range_start_ex(attr: *const EventAttributes) -> u64 {
    // SAFETY: as in `mark_ex`.
    panic_fence::ffi_guard(0, || range_start(StrId::NONE, unsafe { name_from_attr(attr) }))
}
unsafe extern "C" fn range_start_a(msg: *const c_char) -> u64 {
    // SAFETY: as in `mark_a`.
    panic_fence::ffi_guard(0, || range_start(StrId::NONE, unsafe { name_from_cstr(msg) }))
}
unsafe extern "C" fn range_start_w(msg: *const u32) -> u64 {
    // SAFETY: as in `mark_w`.
    panic_fence::ffi_guard(0, || range_start(StrId::NONE, unsafe { name_from_wide(msg) }))
}
unsafe extern "C" fn range_end_hook(id: u64) {
    panic_fence::ffi_guard((), || range_end(id))
}
unsafe extern "C" fn range_push_ex(attr: *const EventAttributes) -> c_int {
    // SAFETY: as in `mark_ex`.
    panic_fence::ffi_guard(-1, || push(StrId::NONE, unsafe { name_from_attr(attr) }))
}
unsafe extern "C" fn range_push_a(msg: *const c_char) -> c_int {
    // SAFETY: as in `mark_a`.
    panic_fence::ffi_guard(-1, || push(StrId::NONE, unsafe { name_from_cstr(msg) }))
}
unsafe extern "C" fn range_push_w(msg: *const u32) -> c_int {
    // SAFETY: as in `mark_w`.
    panic_fence::ffi_guard(-1, || push(StrId::NONE, unsafe { name_from_wide(msg) }))
}
unsafe extern "C" fn range_pop() -> c_int {
    panic_fence::ffi_guard(-1, || pop(StrId::NONE))
}
unsafe extern "C" fn name_os_thread_a(tid: u32, name: *const c_char) {
    // SAFETY: as in `mark_a`.
    panic_fence::ffi_guard((), || name_thread(tid, unsafe { name_from_cstr(name) }))
}
unsafe extern "C" fn name_os_thread_w(tid: u32, name: *const u32) {
    // SAFETY: as in `mark_w`.
    panic_fence::ffi_guard((), || name_thread(tid, unsafe { name_from_wide(name) }))
}

// ---------------------------------------------------------------- CORE2 hooks (domains)

unsafe extern "C" fn domain_mark_ex(d: *const c_void, attr: *const EventAttributes) {
    if muted(d) {
        return;
    }
    // SAFETY: as in `mark_ex`.
    panic_fence::ffi_guard((), || mark(domain_id(d), unsafe { name_from_attr(attr) }))
}
unsafe extern "C" fn domain_range_start_ex(d: *const c_void, attr: *const EventAttributes) -> u64 {
    if muted(d) {
        return 0;
    }
    // SAFETY: as in `mark_ex`.
    panic_fence::ffi_guard(0, || range_start(domain_id(d), unsafe { name_from_attr(attr) }))
}
unsafe extern "C" fn domain_range_end(d: *const c_void, id: u64) {
    if muted(d) {
        return;
    }
    panic_fence::ffi_guard((), || range_end(id))
}
unsafe extern "C" fn domain_range_push_ex(d: *const c_void, attr: *const EventAttributes) -> c_int {
    if muted(d) {
        return 0;
    }
    // SAFETY: as in `mark_ex`.
    panic_fence::ffi_guard(-1, || push(domain_id(d), unsafe { name_from_attr(attr) }))
}
unsafe extern "C" fn domain_range_pop(d: *const c_void) -> c_int {
    if muted(d) {
        return 0;
    }
    panic_fence::ffi_guard(-1, || pop(domain_id(d)))
}
unsafe extern "C" fn domain_register_string_a(d: *const c_void, s: *const c_char) -> *const c_void {
    if muted(d) {
        return TAG_STRING as *const c_void;
    }
    // SAFETY: as in `mark_a`.
    panic_fence::ffi_guard(std::ptr::null(), || {
        (TAG_STRING | unsafe { name_from_cstr(s) }.id.0 as u64) as *const c_void
    })
}
unsafe extern "C" fn domain_register_string_w(d: *const c_void, s: *const u32) -> *const c_void {
    if muted(d) {
        return TAG_STRING as *const c_void;
    }
    // SAFETY: as in `mark_w`.
    panic_fence::ffi_guard(std::ptr::null(), || {
        (TAG_STRING | unsafe { name_from_wide(s) }.id.0 as u64) as *const c_void
    })
}
unsafe extern "C" fn domain_create_a(name: *const c_char) -> *const c_void {
    // SAFETY: as in `mark_a`.
    panic_fence::ffi_guard(std::ptr::null(), || create_domain(unsafe { name_from_cstr(name) }))
}
unsafe extern "C" fn domain_create_w(name: *const u32) -> *const c_void {
    // SAFETY: as in `mark_w`.
    panic_fence::ffi_guard(std::ptr::null(), || create_domain(unsafe { name_from_wide(name) }))
}
unsafe extern "C" fn domain_destroy(_d: *const c_void) {}

/// The slots we fill: (module, callback id, hook).
fn hooks() -> [(c_uint, usize, unsafe extern "C" fn()); 25] {
    // SAFETY (for every transmute below): NVTX calls each slot with the C signature of that callback
    // id (nvtxTypes.h), which is the signature of the hook stored in it; fn pointers share one size.
    macro_rules! h {
        ($f:expr) => {
            unsafe { std::mem::transmute::<*const (), unsafe extern "C" fn()>($f as *const ()) }
        };
    }
    [
        (MODULE_CORE, 1, h!(mark_ex)),
        (MODULE_CORE, 2, h!(mark_a)),
        (MODULE_CORE, 3, h!(mark_w)),
        (MODULE_CORE, 4, h!(range_start_ex)),
        (MODULE_CORE, 5, h!(range_start_a)),
        (MODULE_CORE, 6, h!(range_start_w)),
        (MODULE_CORE, 7, h!(range_end_hook)),
        (MODULE_CORE, 8, h!(range_push_ex)),
        (MODULE_CORE, 9, h!(range_push_a)),
        (MODULE_CORE, 10, h!(range_push_w)),
        (MODULE_CORE, 11, h!(range_pop)),
        (MODULE_CORE, 14, h!(name_os_thread_a)),
        (MODULE_CORE, 15, h!(name_os_thread_w)),
        (MODULE_CORE2, 1, h!(domain_mark_ex)),
        (MODULE_CORE2, 2, h!(domain_range_start_ex)),
        (MODULE_CORE2, 3, h!(domain_range_end)),
        (MODULE_CORE2, 4, h!(domain_range_push_ex)),
        (MODULE_CORE2, 5, h!(domain_range_pop)),
        (MODULE_CORE2, 10, h!(domain_register_string_a)),
        (MODULE_CORE2, 11, h!(domain_register_string_w)),
        (MODULE_CORE2, 12, h!(domain_create_a)),
        (MODULE_CORE2, 13, h!(domain_create_w)),
        (MODULE_CORE2, 14, h!(domain_destroy)),
        // Unused CORE2 ids 6/7 (resources) stay NVTX's no-ops; these two keep the table shape explicit.
        (MODULE_CORE2, 8, h!(domain_noop2)),
        (MODULE_CORE2, 9, h!(domain_noop2)),
    ]
}

/// `nvtxDomainNameCategoryA/W(domain, category, name)`: accepted, not recorded.
unsafe extern "C" fn domain_noop2(_d: *const c_void, _category: u32, _name: *const c_void) {}

/// Fills the slots of the NVTX instance that called us. Returns 1 on success (NVTX convention).
///
/// # Safety
/// `get_export_table` must be the getter NVTX passes to `InitializeInjectionNvtx2`.
unsafe fn fill_tables(get_export_table: GetExportTable) -> c_int {
    // SAFETY: NVTX's export-table getter; id 1 returns its NvtxExportTableCallbacks (or NULL).
    let etbl = unsafe { get_export_table(ETID_CALLBACKS) } as *const ExportTableCallbacks;
    if etbl.is_null() {
        return 0;
    }
    // SAFETY: a non-NULL callbacks table is a valid NvtxExportTableCallbacks.
    let etbl = unsafe { &*etbl };
    if etbl.struct_size < std::mem::size_of::<ExportTableCallbacks>() {
        return 0;
    }
    let Some(get_table) = etbl.get_module_function_table else { return 0 };
    for module in [MODULE_CORE, MODULE_CORE2] {
        let mut table: FunctionTable = std::ptr::null_mut();
        let mut size: c_uint = 0;
        // SAFETY: NVTX writes the module's slot-pointer array and its size into our variables.
        if unsafe { get_table(module, &mut table, &mut size) } == 0 || table.is_null() {
            return 0;
        }
        for (m, cbid, hook) in hooks() {
            if m != module || cbid > size as usize {
                continue;
            }
            // SAFETY: `table` has `size + 1` entries (index 0 unused); each is a pointer to the slot
            // NVTX reads for that callback id, which we may overwrite before init completes.
            unsafe {
                let slot = *table.add(cbid);
                if !slot.is_null() {
                    *slot = Some(hook);
                }
            }
        }
    }
    1
}

/// NVTX's entry point into an injection library.
///
/// # Safety
/// Called by NVTX with its export-table getter.
#[no_mangle]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get_export_table: Option<GetExportTable>) -> c_int {
    panic_fence::ffi_guard(0, || {
        lifecycle::ensure_init();
        if crate::base::config::config().disabled {
            return 0;
        }
        let Some(getter) = get_export_table else { return 0 };
        // SAFETY: the getter comes from NVTX (contract of this function).
        unsafe { fill_tables(getter) }
    })
}

/// Points `NVTX_INJECTION64_PATH` at libtprof unless the user set it (or tprof is disabled).
pub fn install_env() {
    if std::env::var_os("NVTX_INJECTION64_PATH").is_some_and(|v| !v.is_empty()) {
        return;
    }
    if crate::base::config::disabled_at_load() {
        return;
    }
    if let Some(path) = crate::base::dynamic_loader::own_library_path() {
        let value: &std::ffi::OsStr = std::os::unix::ffi::OsStrExt::from_bytes(path.to_bytes());
        std::env::set_var("NVTX_INJECTION64_PATH", value);
    }
}

extern "C" fn constructor() {
    panic_fence::ffi_guard((), install_env)
}

/// Runs [`install_env`] when libtprof is loaded, before the program's first NVTX call.
#[used]
#[link_section = ".init_array"]
static INSTALL_ENV: extern "C" fn() = constructor;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_round_trip() {
        let id = interning::intern("nvtx_test_domain");
        let h = (TAG_DOMAIN | id.0 as u64) as *const c_void;
        assert_eq!(domain_id(h), id);
        assert_eq!(handle_id(h as u64, TAG_STRING), StrId::NONE);
        assert_eq!(domain_id(std::ptr::null()), StrId::NONE);
    }

    #[test]
    fn nccl_domain_is_muted_only_inside_an_interposed_nccl_call() {
        let outside = create_domain(Name { id: interning::intern("NCCL") });
        assert!(!muted(outside));
        assert_eq!(domain_id(outside), interning::intern("NCCL"));
        let other = create_domain(Name { id: interning::intern("NCCL-like") });
        assert!(!muted(other));
        let inside =
            crate::intercept::nccl::real_calls::forward(|| create_domain(Name { id: interning::intern("NCCL") }));
        assert!(muted(inside));
        let other_inside =
            crate::intercept::nccl::real_calls::forward(|| create_domain(Name { id: interning::intern("NCCL-like") }));
        assert!(!muted(other_inside));
        assert!(!crate::intercept::nccl::real_calls::forwarding());
        // SAFETY: a muted handle is never dereferenced; the hooks return before recording.
        assert_eq!(unsafe { domain_range_push_ex((TAG_MUTED_DOMAIN | 5) as *const c_void, std::ptr::null()) }, 0);
        assert!(muted((TAG_MUTED_DOMAIN | 5) as *const c_void));
        assert_eq!(domain_id((TAG_MUTED_DOMAIN | 5) as *const c_void), StrId::NONE);
    }

    #[test]
    fn wide_names_become_utf8() {
        let w: Vec<u32> = "fwd\u{e9}".chars().map(|c| c as u32).chain([0]).collect();
        // SAFETY: NUL-terminated wide string.
        let n = unsafe { name_from_wide(w.as_ptr()) };
        assert_eq!(n.text(), "fwd\u{e9}".as_bytes());
    }

    #[test]
    fn attributes_with_registered_strings() {
        let id = interning::intern("registered_nvtx_name");
        let a = EventAttributes {
            version: 3,
            size: 48,
            category: 0,
            color_type: 0,
            color: 0,
            payload_type: 0,
            reserved0: 0,
            payload: 0,
            message_type: MESSAGE_REGISTERED,
            message: (TAG_STRING | id.0 as u64) as *const c_void,
        };
        // SAFETY: a valid attribute struct.
        assert_eq!(unsafe { name_from_attr(&a) }.id, id);
    }
}
