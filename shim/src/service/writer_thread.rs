//! The writer thread: drains every thread's buffer into the ring, defines new strings, writes clock
//! pairs and commits at least every `TPROF_COMMIT_MS` (100 ms), so a killed process loses at most that.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use tprof_format::{MarkerKind, Record, RingWriter, StrId};

use crate::base::hook_table::HookTable;
use crate::base::panic_fence::ffi_guard;
use crate::base::{switch, ticks};
use crate::capture::{self, hang_watchdog, tallies};
use crate::record::recorder::Entry;
use crate::record::reentrancy::Reentrancy;
use crate::record::{interning, recorder, thread};

use super::metrics;

/// Longest sleep between drains.
const MAX_PAUSE: Duration = Duration::from_millis(5);

static STOP: AtomicBool = AtomicBool::new(false);
static DONE: AtomicBool = AtomicBool::new(false);
static RUNNING_PID: AtomicU32 = AtomicU32::new(0);
/// The writer thread's kernel thread id: it cannot wait for itself.
static WRITER_TID: AtomicU32 = AtomicU32::new(0);

/// Functions run by the writer thread about every commit interval (e.g. a periodic CUPTI flush).
/// Lock-free tables, so nothing is ever locked across `fork`.
static PERIODIC_HOOKS: HookTable = HookTable::new();
/// Functions run when the writer is asked to stop, before anything else (event sources hand over
/// what they hold: a forced CUPTI flush).
static EXIT_FLUSH_HOOKS: HookTable = HookTable::new();
/// Functions run when the writer stops, after the final markers and before the final drain (the
/// control socket goes away).
static STOP_HOOKS: HookTable = HookTable::new();

/// Registers a function the writer thread calls about every commit interval (idempotent).
pub fn register_periodic_hook(f: fn()) {
    let _ = PERIODIC_HOOKS.add(f);
}

/// Registers a function called at exit before the final ring flush (e.g. a forced CUPTI flush).
pub fn register_exit_flush_hook(f: fn()) {
    let _ = EXIT_FLUSH_HOOKS.add(f);
}

/// Registers a function called at exit once the final markers are written, before the final drain.
pub fn register_stop_hook(f: fn()) {
    let _ = STOP_HOOKS.add(f);
}

fn clock_sync() -> Record {
    let (ticks, mono_ns, wall_ns) = ticks::sync_pair();
    Record::ClockSync { ticks, mono_ns, wall_ns }
}

/// Starts the writer thread for `ring`.
pub fn start(ring: RingWriter, commit_interval: Duration) -> std::io::Result<()> {
    STOP.store(false, Ordering::Release);
    DONE.store(false, Ordering::Release);
    RUNNING_PID.store(std::process::id(), Ordering::Release);
    std::thread::Builder::new().name("tprof-writer".into()).spawn(move || {
        // The initialising thread's offset against this thread's: static TLS or not.
        thread::learn_static_tls();
        let _inside = Reentrancy::enter();
        WRITER_TID.store(thread::tid(), Ordering::Release);
        ffi_guard((), || run(ring, commit_interval));
        DONE.store(true, Ordering::Release);
    })?;
    Ok(())
}

/// The writer's loop (not inlined: the intercept bench counts its instructions by this name).
#[inline(never)]
fn run(mut ring: RingWriter, commit_interval: Duration) {
    let mut strings_done = 0u32;
    let mut last_dropped = 0u64;
    // Records CUPTI reported dropped: the sum of the CuptiDropped markers written, kept in the header.
    let mut cupti_dropped = 0u64;
    let mut cupti_dropped_stored = 0u64;
    let mut last_commit = Instant::now();
    let mut last_hooks = Instant::now();
    ring.append(&clock_sync());
    ring.commit(ticks::now());
    loop {
        let stopping = STOP.load(Ordering::Acquire);
        // Timed window edges and SIGUSR2, the metrics file when due, dump requests.
        let now_ns = capture::writer_tick(ring.events_written(), last_dropped);
        metrics::tick(now_ns);
        let capture = capture::take_dump_request();
        if last_hooks.elapsed() >= commit_interval && !stopping {
            PERIODIC_HOOKS.run_all();
            last_hooks = Instant::now();
        }
        if stopping {
            // Final flush of the event sources (CUPTI) from this thread, whose buffer is intact.
            EXIT_FLUSH_HOOKS.run_all();
            // The final FlightDump / CaptureStop marker; the control socket goes away.
            capture::writer_stopping();
            STOP_HOOKS.run_all();
            recorder::emit(Record::Marker {
                kind: MarkerKind::ProcessExit,
                ts: ticks::now(),
                value: 0,
                name: StrId::NONE,
            });
            switch::set_recording(false);
        }
        strings_done = define_new_strings(&mut ring, strings_done);
        // Every record that goes into the ring is tallied for the metrics file.
        let (drained, dropped) =
            recorder::drain_slices(|tid, entries| write_batch(&mut ring, tid, entries, &mut cupti_dropped));
        // Strings interned while we drained may be used by what we drained.
        strings_done = define_new_strings(&mut ring, strings_done);
        if dropped != last_dropped {
            ring.append(&Record::Marker {
                kind: MarkerKind::DroppedEvents,
                ts: ticks::now(),
                value: dropped - last_dropped,
                name: StrId::NONE,
            });
            ring.set_dropped(dropped);
            last_dropped = dropped;
        }
        if cupti_dropped != cupti_dropped_stored {
            ring.set_cupti_dropped(cupti_dropped);
            cupti_dropped_stored = cupti_dropped;
        }
        // The hang watchdog: a report is committed at once (the job may be killed any moment now).
        let hang_reported = !stopping && hang_watchdog::poll();
        if hang_reported {
            PERIODIC_HOOKS.run_all(); // CUPTI: deliver what completed
            recorder::drain_slices(|tid, entries| write_batch(&mut ring, tid, entries, &mut cupti_dropped));
            strings_done = define_new_strings(&mut ring, strings_done);
        }
        // Commit early enough that the gap never exceeds the interval, whatever the sleep below.
        if stopping || hang_reported || capture.commit_now || last_commit.elapsed() + MAX_PAUSE >= commit_interval {
            ring.append(&clock_sync());
            ring.commit(ticks::now());
            last_commit = Instant::now();
        }
        // A dump is committed: start writing the file out and say so.
        if capture.dump_seq != 0 {
            let _ = ring.flush_async();
            capture::dump_committed(capture.dump_seq);
        }
        if stopping {
            // The last metrics file, after the final drain.
            metrics::write_final();
            let _ = ring.close(ticks::now());
            return;
        }
        let pause = if drained > 1024 {
            Duration::from_micros(100)
        } else if drained > 0 {
            Duration::from_millis(1)
        } else {
            MAX_PAUSE
        };
        std::thread::sleep(pause.min(commit_interval));
    }
}

/// Entries of thread `tid` going into the ring as records (a launch's facts become its `Api` and
/// estimated `Kernel` records), each encoded where it is made: tallied for the metrics file, CUPTI's
/// drop reports added up for the header.
fn write_batch(ring: &mut RingWriter, tid: u32, entries: &[Entry], cupti_dropped: &mut u64) {
    ring.append_each(|sink| {
        for (i, e) in entries.iter().enumerate() {
            // The entries were just written by another core: ask for the lines a few entries ahead.
            recorder::prefetch(entries, i + 8);
            match e {
                Entry::Record(r) => {
                    tallies::observe_written(r);
                    if let Record::Marker { kind: MarkerKind::CuptiDropped, value, .. } = *r {
                        *cupti_dropped += value;
                    }
                    sink.push(r);
                }
                // A launch's records tally nothing (an `Api` record and a `Kernel` record without GPU
                // time: `tallies` counts kernels with times only).
                Entry::Launch(facts) => {
                    sink.push(&facts.api_record(tid));
                    if let Some(kernel) = facts.kernel_record() {
                        sink.push(&kernel);
                    }
                }
            }
        }
    });
}

fn define_new_strings(ring: &mut RingWriter, since: u32) -> u32 {
    interning::for_each_since(since, |id, text| ring.define_string(id, &String::from_utf8_lossy(text)))
}

/// Asks the writer thread (of this process) to drain, commit and close the ring, waiting at most
/// `timeout`. Returns true when it finished in time. Called on the writer thread itself (a signal
/// handler that ends the process there), it asks and returns false at once.
pub fn stop_and_wait(timeout: Duration) -> bool {
    if RUNNING_PID.load(Ordering::Acquire) != std::process::id() {
        return true;
    }
    if thread::tid() == WRITER_TID.load(Ordering::Acquire) {
        STOP.store(true, Ordering::Release);
        return false;
    }
    STOP.store(true, Ordering::Release);
    let deadline = Instant::now() + timeout;
    while !DONE.load(Ordering::Acquire) {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    true
}

/// True while a writer thread runs in this process.
pub fn running() -> bool {
    RUNNING_PID.load(Ordering::Acquire) == std::process::id() && !DONE.load(Ordering::Acquire)
}

/// In a fork child: the writer thread does not exist here.
pub fn reset_after_fork() {
    RUNNING_PID.store(0, Ordering::Release);
    WRITER_TID.store(0, Ordering::Release);
    STOP.store(false, Ordering::Release);
    DONE.store(false, Ordering::Release);
}
