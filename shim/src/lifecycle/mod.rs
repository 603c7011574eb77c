//! Floor 5, the lifecycle: the one place that starts and stops tprof's services. Initialisation
//! (the switch from uninitialised to enabled or disabled, the ring file, the writer thread, the
//! capture schedule, metrics, control socket and signal handlers, then the init hooks the sources
//! registered), the exit flush, fork ([`fork`]), and the ends of a process image that skip the exit
//! handlers: `_exit` and `exec` ([`image_end`]).
//!
//! Initialisation is lazy (the first intercepted call), so processes that never touch CUDA (shells,
//! compilers, DataLoader workers) create no ring file.

mod fork;
pub mod image_end;
mod out_dir;

use std::sync::Once;
use std::time::Duration;

use tprof_format::settings::Mode;
use tprof_format::{ring_file_name, FileHeader, RingGeometry, RingWriter};

use crate::base::config::config;
use crate::base::hook_table::HookTable;
use crate::base::messages::warn_line;
use crate::base::panic_fence::{ffi_guard, install_panic_hook};
use crate::base::{dynamic_loader, process, switch, ticks};
use crate::record::recorder;
use crate::service::{control_socket, metrics, signals, writer_thread};

static EXIT_HOOK: Once = Once::new();
static INIT_HOOKS: HookTable = HookTable::new();
static EXIT_HOOKS: HookTable = HookTable::new();

/// Longest a thread waits for another thread's initialisation to decide.
const INIT_WAIT: Duration = Duration::from_secs(5);

/// Initialises tprof on first use; later calls cost one relaxed load. Never panics. A thread that
/// arrives while another initialises waits (bounded) for the decision, so its events are recorded.
#[inline]
pub fn ensure_init() {
    if switch::is_undecided() {
        init_slow();
    }
}

/// Registers a function called once tprof is enabled (e.g. starting CUPTI).
pub fn register_init_hook(f: fn()) {
    if INIT_HOOKS.add(f) && switch::state() == switch::ENABLED {
        f();
    }
}

/// Registers a function the normal exit path calls before the ring closes (e.g. a short wait for a
/// once-per-process probe still writing its records). It must bound its own wait.
pub fn register_exit_hook(f: fn()) {
    EXIT_HOOKS.add(f);
}

/// A service that starts once tprof is enabled and the driver works, whichever comes last (NVML
/// and CUPTI belong to the driver stack; see `base::driver`), in libtprof.so only: test executables
/// linking the rlib start theirs explicitly. `start_with_driver!(start)` or
/// `start_with_driver!(start, exit = hook)` expands to the `.init_array` constructor that registers
/// `start` (and the exit hook `hook`).
macro_rules! start_with_driver {
    ($start:path $(, exit = $exit:path)?) => {
        extern "C" fn constructor() {
            $crate::base::panic_fence::ffi_guard((), || {
                if $crate::base::dynamic_loader::own_library_path().is_some() {
                    $crate::lifecycle::register_init_hook(start_when_ready);
                    $($crate::lifecycle::register_exit_hook($exit);)?
                    $crate::base::driver::on_ready(start_when_ready);
                }
            })
        }

        fn start_when_ready() {
            if $crate::base::switch::state() == $crate::base::switch::ENABLED && $crate::base::driver::works() {
                $start();
            }
        }

        #[used]
        #[link_section = ".init_array"]
        static REGISTER_START: extern "C" fn() = constructor;
    };
}
pub(crate) use start_with_driver;

#[cold]
fn init_slow() {
    if !switch::begin_initialising() {
        wait_for_decision();
        return;
    }
    let _inside = crate::record::reentrancy::Reentrancy::enter();
    // The writer thread, as it starts, compares: the short way to the thread context (static TLS).
    crate::record::thread::learn_static_tls();
    install_panic_hook(crate::record::reentrancy::Reentrancy::active);
    let outcome = std::panic::catch_unwind(init_inner);
    match outcome {
        Ok(Ok(())) => {
            // The mode decides whether the window starts open (steps, metrics: no).
            switch::finish_initialising(true, crate::capture::window_open_at_start());
            INIT_HOOKS.run_all();
            crate::capture::on_enabled();
            start_services();
        }
        Ok(Err(InitError::Quiet)) => switch::finish_initialising(false, false),
        Ok(Err(InitError::Warn(msg))) => {
            switch::finish_initialising(false, false);
            warn_line(&format!("{msg}; profiling is off, the program runs on"));
        }
        Err(_) => switch::disable_permanently("internal error during initialisation"),
    }
}

/// Another thread initialises: yield until it has decided, at most [`INIT_WAIT`]. The initialising
/// thread itself (re-entered from inside initialisation) and tprof's own threads never wait.
fn wait_for_decision() {
    if crate::record::reentrancy::Reentrancy::active() {
        return;
    }
    let deadline = std::time::Instant::now() + INIT_WAIT;
    let mut spins = 0u32;
    while switch::state() == switch::INITIALISING {
        if spins < 1000 {
            std::thread::yield_now();
            spins += 1;
        } else if std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        } else {
            return;
        }
    }
}

/// The services that drive and report the capture window: the metrics file, the control socket
/// (removed when the writer stops, and by the fatal- and termination-signal handlers, which in flight
/// mode also commit the ring) and the opt-in dump signal.
fn start_services() {
    metrics::on_enabled();
    control_socket::start();
    writer_thread::register_stop_hook(control_socket::remove_socket);
    signals::install_fatal_handlers(config().mode == Mode::Flight);
    if signals::install_dump_signal(config().dump_signal) == signals::DumpSignalState::Failed {
        warn_line("cannot install the handler of TPROF_DUMP_SIGNAL; use `tprof ctl` instead");
    }
}

enum InitError {
    Quiet,
    Warn(String),
}

fn init_inner() -> Result<(), InitError> {
    let cfg = config();
    if cfg.disabled {
        return Err(InitError::Quiet);
    }
    recorder::set_capacity(cfg.buffer_events);
    let source = ticks::init(cfg.clock);
    let ticks_per_sec = ticks::calibrate(2_000_000);
    crate::capture::hang_watchdog::set_ticks_per_sec(ticks_per_sec);
    let (start_ticks, start_mono_ns, start_wall_ns) = ticks::sync_pair();
    let (rank, local_rank, world_size, job_id) = process::job_identity();
    let pid = std::process::id();
    let header = FileHeader {
        pid,
        // SAFETY: getppid has no preconditions.
        ppid: unsafe { libc::getppid() } as u32,
        hostname: process::hostname(),
        cmdline: process::cmdline(),
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
    // SAFETY: geteuid has no preconditions.
    if let Some(why) = out_dir::refusal(dir, unsafe { libc::geteuid() }) {
        return Err(InitError::Warn(why));
    }
    let geometry = RingGeometry::for_total_bytes(cfg.ring_mb << 20);
    let base = ring_file_name(&header.hostname, rank, pid);
    let mut last_err = String::new();
    for attempt in 0..8 {
        let name = if attempt == 0 { base.clone() } else { base.replace(".tprof", &format!("-{attempt}.tprof")) };
        let path = dir.join(&name);
        match RingWriter::create(&path, header.clone(), geometry) {
            Ok(ring) => {
                process::set_ring_path(path);
                writer_thread::start(ring, cfg.commit_interval)
                    .map_err(|e| InitError::Warn(format!("cannot start the writer thread ({e})")))?;
                EXIT_HOOK.call_once(|| {
                    // SAFETY: registering a plain extern "C" fn with atexit is always valid.
                    unsafe { libc::atexit(exit_handler) };
                    fork::install();
                    dynamic_loader::pin_own_object();
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

extern "C" fn exit_handler() {
    ffi_guard((), || {
        // glibc runs the exiting thread's thread-local destructors before atexit handlers, so this
        // thread may no longer own a buffer: the writer thread runs the flush hooks, writes the exit
        // marker and closes the ring.
        if writer_thread::running() {
            EXIT_HOOKS.run_all();
        }
        close_ring(EXIT_WAIT);
    });
}

/// Longest the exit paths wait for the writer to drain, commit and close the ring.
const EXIT_WAIT: Duration = Duration::from_secs(2);

/// Has this process's writer thread drain, commit and close the ring, waiting at most `timeout`.
/// True when a ring was open and has been closed in time. Touches only atomics and sleeps (safe
/// in a fork child and in a signal handler); in a `vfork` child (another pid) it does nothing.
fn close_ring(timeout: Duration) -> bool {
    // First, before touching anything: a vfork child shares the parent's memory.
    if !writer_thread::running() {
        return false;
    }
    let _inside = crate::record::reentrancy::Reentrancy::enter();
    let closed = writer_thread::stop_and_wait(timeout);
    if !closed {
        warn_line("the ring writer did not finish within 2 s as the process ended; the last events may be missing");
    }
    closed
}

/// Flushes at exit without exiting (used by tests and `tprof` control paths).
pub fn shutdown_for_tests() {
    exit_handler();
}
