//! The `TPROF_*` settings, as both sides speak them: the variable names, the capture modes, and the
//! syntax of step ranges, duty cycles and durations. The shim reads them (its `config`), `tprof run`
//! writes them for the command it starts, `tprof ctl` sends durations to a running process.

use std::time::Duration;

/// The environment variables libtprof reads (each documented in the README's configuration table).
pub mod vars {
    pub const DISABLE: &str = "TPROF_DISABLE";
    pub const OUT: &str = "TPROF_OUT";
    pub const RING_MB: &str = "TPROF_RING_MB";
    pub const MODE: &str = "TPROF_MODE";
    pub const STEPS: &str = "TPROF_STEPS";
    pub const SAMPLE: &str = "TPROF_SAMPLE";
    pub const FLIGHT_MB: &str = "TPROF_FLIGHT_MB";
    pub const METRICS_FILE: &str = "TPROF_METRICS_FILE";
    pub const METRICS_INTERVAL: &str = "TPROF_METRICS_INTERVAL";
    pub const FOLLOW_FORK: &str = "TPROF_FOLLOW_FORK";
    pub const STEP_MARKER: &str = "TPROF_STEP_MARKER";
    pub const HANG_TIMEOUT: &str = "TPROF_HANG_TIMEOUT";
    pub const CUPTI: &str = "TPROF_CUPTI";
    pub const CUPTI_PATH: &str = "TPROF_CUPTI_PATH";
    pub const CLOCK: &str = "TPROF_CLOCK";
    pub const BUFFER_EVENTS: &str = "TPROF_BUFFER_EVENTS";
    pub const COMMIT_MS: &str = "TPROF_COMMIT_MS";
    pub const QUIET: &str = "TPROF_QUIET";
    pub const GPU_METRICS_HZ: &str = "TPROF_GPU_METRICS_HZ";
    pub const JOB_ID: &str = "TPROF_JOB_ID";
    pub const HOST_HZ: &str = "TPROF_HOST_HZ";
    pub const DUMP_SIGNAL: &str = "TPROF_DUMP_SIGNAL";
    /// Root the topology probe reads the system under (`sys/class/infiniband`, `sys/class/net`,
    /// `sys/bus/pci`, `proc/sys/kernel/hostname`); `%r` is replaced by the rank. Default `/`.
    pub const SYSROOT: &str = "TPROF_SYSROOT";
    /// Test only: tprof panics where it first records this name (see the shim's `config`).
    pub const TEST_PANIC: &str = "TPROF_TEST_PANIC";

    /// Every variable above.
    pub const ALL: [&str; 24] = [
        DISABLE,
        OUT,
        RING_MB,
        MODE,
        STEPS,
        SAMPLE,
        FLIGHT_MB,
        METRICS_FILE,
        METRICS_INTERVAL,
        FOLLOW_FORK,
        STEP_MARKER,
        HANG_TIMEOUT,
        CUPTI,
        CUPTI_PATH,
        CLOCK,
        BUFFER_EVENTS,
        COMMIT_MS,
        QUIET,
        GPU_METRICS_HZ,
        JOB_ID,
        HOST_HZ,
        DUMP_SIGNAL,
        SYSROOT,
        TEST_PANIC,
    ];
}

/// `TPROF_OUT` when it is not set.
pub const DEFAULT_OUT_DIR: &str = "tprof-out";

/// Capture mode (`TPROF_MODE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Everything from the start.
    #[default]
    Full,
    /// Only the steps in `TPROF_STEPS`.
    Steps,
    /// A duty cycle (`TPROF_SAMPLE=2s/60s`).
    Sample,
    /// Always on; the ring wraps and keeps the newest events.
    Flight,
    /// Counters only, no per-event records.
    Metrics,
}

impl Mode {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [Mode; 5] = [Mode::Full, Mode::Steps, Mode::Sample, Mode::Flight, Mode::Metrics];

    /// The value of `TPROF_MODE` (and of the ring header's `mode`).
    pub fn name(self) -> &'static str {
        match self {
            Mode::Full => "full",
            Mode::Steps => "steps",
            Mode::Sample => "sample",
            Mode::Flight => "flight",
            Mode::Metrics => "metrics",
        }
    }

    /// The mode of that name.
    pub fn from_name(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.name() == name)
    }
}

/// The signal that toggles the capture window (flight mode: dumps), `TPROF_DUMP_SIGNAL`: off unless
/// asked for, so that tprof never changes what a signal does to the program by default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DumpSignal {
    #[default]
    Off,
    Usr1,
    Usr2,
}

impl DumpSignal {
    /// Parses `off` / `0` / empty, `USR1` / `SIGUSR1`, `USR2` / `SIGUSR2` (any case); None otherwise.
    pub fn parse(s: &str) -> Option<DumpSignal> {
        let up = s.trim().to_ascii_uppercase();
        match up.strip_prefix("SIG").unwrap_or(&up) {
            "" | "OFF" | "0" | "NONE" => Some(DumpSignal::Off),
            "USR1" => Some(DumpSignal::Usr1),
            "USR2" => Some(DumpSignal::Usr2),
            _ => None,
        }
    }
}

/// The longest duration a setting takes: a year (longer is a typo or an attack, not a timeout).
pub const MAX_DURATION: Duration = Duration::from_secs(366 * 24 * 3600);

/// Parses a duration like `300`, `300s`, `250ms`, `2m`, `1h` (a bare number is seconds). None for
/// anything else, negative, or longer than [`MAX_DURATION`].
pub fn parse_duration(s: &str) -> Option<Duration> {
    let s = s.trim();
    let (num, unit) = s.find(|c: char| !c.is_ascii_digit() && c != '.').map(|i| s.split_at(i)).unwrap_or((s, "s"));
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    let secs = match unit.trim() {
        "ms" => v / 1000.0,
        "s" | "" => v,
        "m" | "min" => v * 60.0,
        "h" => v * 3600.0,
        _ => return None,
    };
    Duration::try_from_secs_f64(secs).ok().filter(|d| *d <= MAX_DURATION)
}

/// A steps-mode window (`TPROF_STEPS`): steps `first..=last`, repeated every `every` steps (0 = once).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepRange {
    pub first: u64,
    pub last: u64,
    pub every: u64,
}

impl StepRange {
    pub const DEFAULT: StepRange = StepRange { first: 100, last: 110, every: 0 };

    /// Parses `100-110`, `100-110:every=1000`, or a single step `7`.
    pub fn parse(s: &str) -> Option<StepRange> {
        let s = s.trim();
        let (range, every) = match s.split_once(':') {
            Some((r, opt)) => {
                let n = opt.trim().strip_prefix("every=")?.trim().parse::<u64>().ok()?;
                (r, n)
            }
            None => (s, 0),
        };
        let (first, last) = match range.split_once('-') {
            Some((a, b)) => (a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?),
            None => {
                let n = range.trim().parse::<u64>().ok()?;
                (n, n)
            }
        };
        if last < first || (every != 0 && every <= last - first) {
            return None;
        }
        Some(StepRange { first, last, every })
    }

    /// Offset of step `n` inside its repetition, when `n` is in a window.
    fn offset(&self, n: u64) -> Option<u64> {
        if n < self.first {
            return None;
        }
        let off = if self.every == 0 { n - self.first } else { (n - self.first) % self.every };
        (off <= self.last - self.first).then_some(off)
    }

    /// True when step `n` is inside a window.
    pub fn contains(&self, n: u64) -> bool {
        self.offset(n).is_some()
    }

    /// True when step `n` is the last step of a window (the window closes after its StepEnd).
    pub fn is_last(&self, n: u64) -> bool {
        self.offset(n) == Some(self.last - self.first)
    }
}

/// A sample-mode duty cycle (`TPROF_SAMPLE`): open `on` at the start of every `period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DutyCycle {
    pub on: Duration,
    pub period: Duration,
}

impl DutyCycle {
    pub const DEFAULT: DutyCycle = DutyCycle { on: Duration::from_secs(2), period: Duration::from_secs(60) };

    /// Parses `2s/60s` (durations as in [`parse_duration`]).
    pub fn parse(s: &str) -> Option<DutyCycle> {
        let (on, period) = s.split_once('/')?;
        let on = parse_duration(on)?;
        let period = parse_duration(period)?;
        if on.is_zero() || period < Duration::from_millis(10) || on > period {
            return None;
        }
        Some(DutyCycle { on, period })
    }

    /// Whether the window should be open `elapsed_ns` after the schedule started.
    pub fn open_at(&self, elapsed_ns: u64) -> bool {
        let period = self.period.as_nanos().max(1) as u64;
        (elapsed_ns % period) < self.on.as_nanos() as u64
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn dump_signals() {
        assert_eq!(DumpSignal::parse("USR2"), Some(DumpSignal::Usr2));
        assert_eq!(DumpSignal::parse("sigusr1"), Some(DumpSignal::Usr1));
        assert_eq!(DumpSignal::parse(" off "), Some(DumpSignal::Off));
        assert_eq!(DumpSignal::parse(""), Some(DumpSignal::Off));
        assert_eq!(DumpSignal::parse("TERM"), None);
        assert_eq!(DumpSignal::parse("12"), None);
    }

    #[test]
    fn huge_durations_are_refused_not_a_panic() {
        for v in ["100000000000000000000", "100000000000000000000s", "1e400", "367d", "9999999999h"] {
            assert_eq!(parse_duration(v), None, "{v}");
        }
        assert_eq!(parse_duration("300s"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("366d"), None, "unknown unit");
        assert_eq!(parse_duration("8784h"), Some(MAX_DURATION));
    }

    use super::*;

    #[test]
    fn modes_round_trip_their_names() {
        for m in Mode::ALL {
            assert_eq!(Mode::from_name(m.name()), Some(m));
        }
        assert_eq!(Mode::from_name("turbo"), None);
        assert_eq!(Mode::default(), Mode::Full);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("2m"), Some(Duration::from_secs(120)));
        assert_eq!(parse_duration("7"), Some(Duration::from_secs(7)));
        assert_eq!(parse_duration("0"), Some(Duration::ZERO));
        assert_eq!(parse_duration("x"), None);
        assert_eq!(parse_duration("-1s"), None);
    }

    #[test]
    fn step_ranges() {
        let r = StepRange::parse("100-110").unwrap();
        assert!(!r.contains(99) && r.contains(100) && r.contains(110) && !r.contains(111));
        assert!(r.is_last(110) && !r.is_last(109) && !r.is_last(1110));
        let r = StepRange::parse("100-110:every=1000").unwrap();
        assert!(r.contains(1105) && r.is_last(2110) && !r.contains(1111) && !r.contains(50));
        assert_eq!(StepRange::parse("7"), Some(StepRange { first: 7, last: 7, every: 0 }));
        for bad in ["", "10-5", "a-b", "1-10:every=5", "1-2:often=3"] {
            assert_eq!(StepRange::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn duty_cycles() {
        let d = DutyCycle::parse("2s/60s").unwrap();
        assert_eq!(d, DutyCycle::DEFAULT);
        assert!(d.open_at(0) && d.open_at(1_999_999_999) && !d.open_at(2_000_000_000));
        assert!(d.open_at(60_500_000_000) && !d.open_at(59_000_000_000));
        let d = DutyCycle::parse("250ms/1s").unwrap();
        assert_eq!(d.on, Duration::from_millis(250));
        for bad in ["2s", "61s/60s", "0s/1s", "x/1s"] {
            assert_eq!(DutyCycle::parse(bad), None, "{bad}");
        }
    }
}
