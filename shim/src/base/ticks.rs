//! The shim's clock: `now()` returns *ticks* — the invariant TSC where the CPU has one (12 ns per read
//! on the reference machine), else CLOCK_MONOTONIC nanoseconds. The writer thread stores
//! (ticks, monotonic ns, wall ns) pairs in the ring so the decoder converts exactly.

use std::sync::atomic::{AtomicU8, Ordering};

use tprof_format::ClockSource;

const UNSET: u8 = 0;
const TSC: u8 = 1;
const MONOTONIC: u8 = 2;

static SOURCE: AtomicU8 = AtomicU8::new(UNSET);

/// Reads the current time in ticks of the chosen source.
#[inline(always)]
pub fn now() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        if SOURCE.load(Ordering::Relaxed) == TSC {
            return read_tsc();
        }
    }
    monotonic_ns()
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn read_tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions on x86_64; it only reads the time-stamp counter.
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own; the clock ids used are always valid.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    (ts.tv_sec as u64).wrapping_mul(1_000_000_000).wrapping_add(ts.tv_nsec as u64)
}

/// CLOCK_MONOTONIC in nanoseconds.
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME in nanoseconds since the Unix epoch.
pub fn wall_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// True when /proc/cpuinfo advertises an invariant TSC (`constant_tsc` and `nonstop_tsc`).
pub fn tsc_is_invariant() -> bool {
    if !cfg!(target_arch = "x86_64") {
        return false;
    }
    let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") else { return false };
    let Some(flags) = info.lines().find(|l| l.starts_with("flags")) else { return false };
    let has = |f: &str| flags.split_whitespace().any(|x| x == f);
    has("constant_tsc") && has("nonstop_tsc")
}

/// Chooses the clock source (once; later calls return the first choice).
/// `prefer`: Some(source) forces it (TPROF_CLOCK), None picks the TSC when invariant.
pub fn init(prefer: Option<ClockSource>) -> ClockSource {
    let current = SOURCE.load(Ordering::Acquire);
    if current != UNSET {
        return source();
    }
    let want = match prefer {
        Some(ClockSource::Monotonic) => MONOTONIC,
        Some(ClockSource::Tsc) | None if tsc_is_invariant() => TSC,
        _ => MONOTONIC,
    };
    let _ = SOURCE.compare_exchange(UNSET, want, Ordering::AcqRel, Ordering::Acquire);
    source()
}

/// The clock source in use (monotonic until [`init`] ran).
pub fn source() -> ClockSource {
    match SOURCE.load(Ordering::Acquire) {
        TSC => ClockSource::Tsc,
        _ => ClockSource::Monotonic,
    }
}

/// A simultaneous reading of (ticks, monotonic ns, wall ns): the ticks are read between two monotonic
/// reads and paired with their midpoint; the tightest of a few attempts is kept.
pub fn sync_pair() -> (u64, u64, u64) {
    let mut best = (0u64, 0u64, u64::MAX);
    for _ in 0..5 {
        let m0 = monotonic_ns();
        let t = now();
        let m1 = monotonic_ns();
        let width = m1.saturating_sub(m0);
        if width < best.2 {
            best = (t, m0 + width / 2, width);
        }
    }
    let wall = wall_ns();
    let mono_now = monotonic_ns();
    // Wall time at the pair's instant: shift the wall reading back by the time elapsed since.
    let wall_at = wall.saturating_sub(mono_now.saturating_sub(best.1));
    (best.0, best.1, wall_at)
}

/// Estimates ticks per second over `spin_ns` of busy waiting (1e9 for the monotonic source).
pub fn calibrate(spin_ns: u64) -> f64 {
    if source() == ClockSource::Monotonic {
        return 1e9;
    }
    let (t0, m0, _) = sync_pair();
    while monotonic_ns() < m0 + spin_ns {
        std::hint::spin_loop();
    }
    let (t1, m1, _) = sync_pair();
    let dt = (m1 - m0) as f64;
    if dt <= 0.0 || t1 <= t0 {
        return 1e9;
    }
    (t1 - t0) as f64 * 1e9 / dt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_advance_and_calibrate_sensibly() {
        init(None);
        let a = now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = now();
        assert!(b > a);
        let hz = calibrate(2_000_000);
        assert!(hz > 1e8 && hz < 1e11, "{hz}");
        let (t, m, w) = sync_pair();
        assert!(t > 0 && m > 0 && w > 1_600_000_000_000_000_000);
    }
}
