//! Lifecycle: the init state machine, the exit flush, and the one-line messages tprof prints.
//!
//! uninitialised -> initialising -> enabled | disabled | permanently disabled, advanced by
//! compare-exchange. Initialisation is lazy (the first intercepted call), so processes that never
//! touch CUDA (shells, compilers, DataLoader workers) create no ring file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Once, OnceLock};
use std::time::Duration;

use tprof_format::{ring_file_name, FileHeader, RingGeometry, RingWriter};

use crate::config::config;
use crate::{clock, recorder, writer_thread};

pub const UNINIT: u8 = 0;
pub const INITIALISING: u8 = 1;
pub const ENABLED: u8 = 2;
pub const DISABLED: u8 = 3;
pub const PERMANENTLY_DISABLED: u8 = 4;

static STATE: AtomicU8 = AtomicU8::new(UNINIT);
static RECORDING: AtomicBool = AtomicBool::new(false);
static DISABLED_SAID: AtomicBool = AtomicBool::new(false);
static RING_PATH: OnceLock<PathBuf> = OnceLock::new();
static EXIT_HOOK: Once = Once::new();
static FLUSH_HOOKS: HookTable = HookTable::new();
static INIT_HOOKS: HookTable = HookTable::new();

/// A small lock-free table of `fn()` hooks (nothing to unlock after fork).
pub struct HookTable {
    slots: [AtomicUsize; 16],
}

impl Default for HookTable {
    fn default() -> Self {
        Self::new()
    }
}

impl HookTable {
    pub const fn new() -> HookTable {
        HookTable { slots: [const { AtomicUsize::new(0) }; 16] }
    }

    /// Adds `f` unless present; silently ignores a 17th hook. True when `f` was added now.
    pub fn add(&self, f: fn()) -> bool {
        let v = f as usize;
        for s in &self.slots {
            match s.compare_exchange(0, v, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(existing) if existing == v => return false,
                Err(_) => {}
            }
        }
        false
    }

    pub fn run_all(&self) {
        for s in &self.slots {
            let v = s.load(Ordering::Acquire);
            if v == 0 {
                return;
            }
            // SAFETY: non-zero slots only ever hold values stored by `add` from a valid `fn()`.
            let f: fn() = unsafe { std::mem::transmute::<usize, fn()>(v) };
            f();
        }
    }
}

/// Writes one line to stderr with a single write(2): no Rust stderr lock (safe after fork, in signal
/// context and in destructors).
pub fn stderr_line(line: &str) {
    let mut buf = [0u8; 1024];
    let bytes = line.as_bytes();
    let n = bytes.len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&bytes[..n]);
    buf[n] = b'\n';
    // SAFETY: writes `n + 1` initialised bytes from our buffer to fd 2; failure is ignored on purpose.
    unsafe { libc::write(2, buf.as_ptr().cast(), n + 1) };
}

/// `tprof: warning: <msg>` on stderr.
pub fn warn_line(msg: &str) {
    stderr_line(&format!("tprof: warning: {msg}"));
}

/// Initialises tprof on first use; later calls cost one relaxed load. Never panics, never blocks.
#[inline]
pub fn ensure_init() {
    if STATE.load(Ordering::Relaxed) == UNINIT {
        init_slow();
    }
}

/// True when events should be recorded now (enabled and the capture window is open).
#[inline]
pub fn is_recording() -> bool {
    RECORDING.load(Ordering::Relaxed)
}

/// Opens or closes the capture window (production modes); no effect unless enabled.
pub fn set_recording(on: bool) {
    RECORDING.store(on && STATE.load(Ordering::Acquire) == ENABLED, Ordering::Release);
}

/// The current state (one of the constants above).
pub fn state() -> u8 {
    STATE.load(Ordering::Acquire)
}

/// Where this process's ring file is, once created.
pub fn ring_path() -> Option<&'static PathBuf> {
    RING_PATH.get()
}

/// Registers a function called at exit before the final ring flush (e.g. a forced CUPTI flush).
pub fn register_flush_hook(f: fn()) {
    let _ = FLUSH_HOOKS.add(f);
}

/// Runs the exit flush hooks (called by the writer thread when it is asked to stop).
pub(crate) fn run_flush_hooks() {
    FLUSH_HOOKS.run_all();
}

/// Registers a function called once tprof is enabled (e.g. starting CUPTI).
pub fn register_init_hook(f: fn()) {
    if INIT_HOOKS.add(f) && STATE.load(Ordering::Acquire) == ENABLED {
        f();
    }
}

/// Turns tprof off for good with one stderr line; the host program continues.
pub fn disable_permanently(reason: &str) {
    STATE.store(PERMANENTLY_DISABLED, Ordering::Release);
    RECORDING.store(false, Ordering::Release);
    if !DISABLED_SAID.swap(true, Ordering::AcqRel) {
        stderr_line(&format!("tprof: disabled: {reason}; the program continues without profiling"));
    }
}

#[cold]
fn init_slow() {
    if STATE.compare_exchange(UNINIT, INITIALISING, Ordering::AcqRel, Ordering::Acquire).is_err() {
        return;
    }
    let _inside = crate::guard::Reentrancy::enter();
    crate::guard::install_panic_hook();
    let outcome = std::panic::catch_unwind(init_inner);
    match outcome {
        Ok(Ok(())) => {
            STATE.store(ENABLED, Ordering::Release);
            // capture (issue 7): the mode decides whether the window starts open (steps, metrics: no).
            RECORDING.store(crate::capture::window_open_at_start(), Ordering::Release);
            INIT_HOOKS.run_all();
            // capture (issue 7): schedule, control socket, SIGUSR2, fatal-signal handlers, metrics.
            crate::capture::on_enabled();
        }
        Ok(Err(InitError::Quiet)) => STATE.store(DISABLED, Ordering::Release),
        Ok(Err(InitError::Warn(msg))) => {
            STATE.store(DISABLED, Ordering::Release);
            warn_line(&format!("{msg}; profiling is off, the program runs on"));
        }
        Err(_) => disable_permanently("internal error during initialisation"),
    }
}

enum InitError {
    Quiet,
    Warn(String),
}

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

fn env_u32(keys: &[&str]) -> Option<u32> {
    keys.iter().find_map(|k| env(k).and_then(|v| v.trim().parse().ok()))
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

fn cmdline() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
        })
        .unwrap_or_default()
}

/// Rank, local rank and world size from the launchers' environment variables.
pub fn job_identity() -> (Option<u32>, Option<u32>, Option<u32>, Option<String>) {
    let rank =
        env_u32(&["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK"]);
    let local = env_u32(&[
        "LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
        "MV2_COMM_WORLD_LOCAL_RANK",
    ]);
    let world = env_u32(&["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "MV2_COMM_WORLD_SIZE"]);
    let job =
        ["TPROF_JOB_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"].iter().find_map(|k| env(k));
    (rank, local, world, job)
}

fn init_inner() -> Result<(), InitError> {
    let cfg = config();
    if cfg.disabled {
        return Err(InitError::Quiet);
    }
    recorder::set_capacity(cfg.buffer_events);
    let source = clock::init(cfg.clock);
    let ticks_per_sec = clock::calibrate(2_000_000);
    crate::hang::set_ticks_per_sec(ticks_per_sec);
    let (start_ticks, start_mono_ns, start_wall_ns) = clock::sync_pair();
    let (rank, local_rank, world_size, job_id) = job_identity();
    let pid = std::process::id();
    let header = FileHeader {
        pid,
        // SAFETY: getppid has no preconditions.
        ppid: unsafe { libc::getppid() } as u32,
        hostname: hostname(),
        cmdline: cmdline(),
        rank,
        local_rank,
        world_size,
        job_id,
        start_wall_ns,
        start_mono_ns,
        start_ticks,
        clock_source: source,
        ticks_per_sec,
        mode: cfg.mode.name().into(),
        writer: concat!("tprof ", env!("CARGO_PKG_VERSION")).into(),
        ..FileHeader::default()
    };
    let dir = &cfg.out_dir;
    if let Err(e) = std::fs::DirBuilder::new().recursive(true).mode_private().create(dir) {
        return Err(InitError::Warn(format!("cannot create TPROF_OUT={} ({e})", dir.display())));
    }
    let geometry = RingGeometry::for_total_bytes(cfg.ring_mb << 20);
    let base = ring_file_name(&header.hostname, rank, pid);
    let mut last_err = String::new();
    for attempt in 0..8 {
        let name = if attempt == 0 { base.clone() } else { base.replace(".tprof", &format!("-{attempt}.tprof")) };
        let path = dir.join(&name);
        match RingWriter::create(&path, header.clone(), geometry) {
            Ok(ring) => {
                let _ = RING_PATH.set(path);
                writer_thread::start(ring, cfg.commit_interval)
                    .map_err(|e| InitError::Warn(format!("cannot start the writer thread ({e})")))?;
                EXIT_HOOK.call_once(|| {
                    // SAFETY: registering a plain extern "C" fn with atexit is always valid.
                    unsafe { libc::atexit(exit_handler) };
                    crate::fork::install();
                    pin_library();
                });
                return Ok(());
            }
            Err(tprof_format::writer::CreateError::Open { source, .. })
                if source.kind() == std::io::ErrorKind::AlreadyExists =>
            {
                last_err = format!("{} exists", path.display());
            }
            Err(e) => return Err(InitError::Warn(e.to_string())),
        }
    }
    Err(InitError::Warn(format!("cannot create a ring file in {} ({last_err})", dir.display())))
}

trait DirBuilderPrivate {
    fn mode_private(&mut self) -> &mut Self;
}

impl DirBuilderPrivate for std::fs::DirBuilder {
    fn mode_private(&mut self) -> &mut Self {
        std::os::unix::fs::DirBuilderExt::mode(self, 0o700)
    }
}

/// Keeps libtprof.so loaded for the life of the process: the writer thread runs its code, so an
/// injection-path `dlclose` must not unmap it.
fn pin_library() {
    let mut info: libc::Dl_info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: dladdr only reads the address of one of our own functions and fills `info`.
    let ok = unsafe { libc::dladdr(pin_library as *const libc::c_void, &mut info) };
    if ok != 0 && !info.dli_fname.is_null() {
        // SAFETY: dli_fname is a NUL-terminated path owned by the loader; RTLD_NOLOAD only takes a
        // reference to the already-loaded object.
        unsafe { libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE) };
    }
}

extern "C" fn exit_handler() {
    crate::guard::ffi_guard((), || {
        let _inside = crate::guard::Reentrancy::enter();
        if !writer_thread::running() {
            return;
        }
        // glibc runs the exiting thread's thread-local destructors before atexit handlers, so this
        // thread may no longer own a buffer: the writer thread runs the flush hooks, writes the exit
        // marker and closes the ring.
        if !writer_thread::stop_and_wait(Duration::from_secs(2)) {
            warn_line("the ring writer did not finish within 2 s at exit; the last events may be missing");
        }
    });
}

/// Flushes at exit without exiting (used by tests and `tprof` control paths).
pub fn shutdown_for_tests() {
    exit_handler();
}

/// In a fork child: the child re-initialises with its own ring on its next event, or stays off.
pub fn after_fork_child() {
    RECORDING.store(false, Ordering::Release);
    let s = STATE.load(Ordering::Acquire);
    if s == ENABLED || s == INITIALISING {
        if config().follow_fork {
            STATE.store(UNINIT, Ordering::Release);
        } else {
            STATE.store(DISABLED, Ordering::Release);
        }
    }
}

/// Test support: back to a clean enabled-able state after a deliberate panic test.
pub fn reset_for_tests() {
    if STATE.load(Ordering::Acquire) == PERMANENTLY_DISABLED {
        STATE.store(UNINIT, Ordering::Release);
        DISABLED_SAID.store(false, Ordering::Release);
    }
}
