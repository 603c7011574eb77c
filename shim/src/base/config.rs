//! `TPROF_*` configuration, read once from the environment. A bad value gets one warning line on
//! stderr naming the variable, and the default is used: the host program always runs on.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use tprof_format::settings::{self, parse_duration, vars, DumpSignal, DutyCycle, Mode, StepRange};
use tprof_format::ClockSource;

use super::messages::warn_line;

/// The shim's configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// `TPROF_DISABLE=1`: load but record nothing.
    pub disabled: bool,
    /// `TPROF_OUT` (default `./tprof-out`).
    pub out_dir: PathBuf,
    /// `TPROF_RING_MB` (default 256).
    pub ring_mb: u64,
    /// `TPROF_MODE` (default full).
    pub mode: Mode,
    /// `TPROF_FOLLOW_FORK` (default on): a forked child records into its own ring.
    pub follow_fork: bool,
    /// `TPROF_STEP_MARKER`: NVTX range name pattern of a training step.
    pub step_marker: Option<String>,
    /// `TPROF_HANG_TIMEOUT` (default 300 s).
    pub hang_timeout: Duration,
    /// `TPROF_CUPTI` (default on).
    pub cupti: bool,
    /// `TPROF_CLOCK` (tsc | monotonic | auto).
    pub clock: Option<ClockSource>,
    /// `TPROF_BUFFER_EVENTS`: per-thread buffer capacity in events (power of two, default 16384).
    pub buffer_events: usize,
    /// `TPROF_COMMIT_MS`: longest time between ring commits (default 100).
    pub commit_interval: Duration,
    /// `TPROF_QUIET=1`: no informational lines (warnings still print).
    pub quiet: bool,
    /// `TPROF_DUMP_SIGNAL` (default off): the signal that toggles the window / dumps.
    pub dump_signal: DumpSignal,
    /// `TPROF_STEPS=100-110[:every=1000]`: the steps-mode window (default 100-110).
    pub steps: StepRange,
    /// `TPROF_SAMPLE=2s/60s`: the sample-mode duty cycle (default 2 s every 60 s).
    pub sample: DutyCycle,
    /// `TPROF_METRICS_FILE`: Prometheus textfile to rewrite every `metrics_interval` (`%p` = pid, `%r` = rank).
    pub metrics_file: Option<PathBuf>,
    /// `TPROF_METRICS_INTERVAL` (default 10 s).
    pub metrics_interval: Duration,
    /// `TPROF_FLIGHT_MB`: ring size in flight mode (default: `TPROF_RING_MB`).
    pub flight_mb: Option<u64>,
    /// `TPROF_CUPTI_PATH`: the libcupti to load (default: searched, see `cupti::libcupti`).
    pub cupti_path: Option<PathBuf>,
    /// `TPROF_GPU_METRICS_HZ` as given: read when the sampler starts ([`Config::gpu_metrics_hz`]).
    pub gpu_metrics_hz: Option<String>,
    /// `TPROF_HOST_HZ` as given: read when the host sampler starts (`host_metrics::sample_rate`).
    pub host_hz: Option<String>,
    /// `TPROF_SYSROOT`: the root the topology probe reads sysfs and procfs under (default `/`).
    pub sysroot: Option<String>,
    /// `TPROF_JOB_ID`: the job id in the ring header (default: the launcher's, see `process`).
    pub job_id: Option<String>,
    /// `TPROF_TEST_PANIC` (tests only): tprof panics where it first records this name (an API,
    /// kernel or NVTX range name), to show that the program runs on with one line.
    pub test_panic: Option<String>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            disabled: false,
            out_dir: PathBuf::from(settings::DEFAULT_OUT_DIR),
            ring_mb: 256,
            mode: Mode::Full,
            follow_fork: true,
            step_marker: None,
            hang_timeout: Duration::from_secs(300),
            cupti: true,
            clock: None,
            buffer_events: 16384,
            commit_interval: Duration::from_millis(100),
            quiet: false,
            dump_signal: DumpSignal::Off,
            steps: StepRange::DEFAULT,
            sample: DutyCycle::DEFAULT,
            metrics_file: None,
            metrics_interval: Duration::from_secs(10),
            flight_mb: None,
            cupti_path: None,
            gpu_metrics_hz: None,
            host_hz: None,
            sysroot: None,
            job_id: None,
            test_panic: None,
        }
    }
}

/// Default GPU counter sampling rate (Hz).
pub const DEFAULT_GPU_METRICS_HZ: u32 = 5;

/// Parses `TPROF_GPU_METRICS_HZ`: the rate (0 = off) and the warning to print for a bad value.
pub fn parse_gpu_metrics_hz(value: Option<&str>) -> (u32, Option<String>) {
    let Some(v) = value else { return (DEFAULT_GPU_METRICS_HZ, None) };
    if v.trim().is_empty() {
        return (DEFAULT_GPU_METRICS_HZ, None);
    }
    match v.trim().parse::<u32>() {
        Ok(n) if n <= 10 => (n, None),
        _ => (
            DEFAULT_GPU_METRICS_HZ,
            Some(format!(
                "{}={v:?} is not a rate between 1 and 10 (0 disables); using {DEFAULT_GPU_METRICS_HZ}",
                vars::GPU_METRICS_HZ
            )),
        ),
    }
}

/// Whether `TPROF_DISABLE` turns tprof off, read straight from the environment without a warning:
/// for what happens when the library is loaded, before the configuration is read at the first CUDA
/// call (the program may still change its environment until then).
pub fn disabled_at_load() -> bool {
    std::env::var(vars::DISABLE).is_ok_and(|v| matches!(v.trim(), "1" | "true" | "yes" | "on"))
}

fn warn(var: &str, value: &str, why: &str, default: &str) {
    warn_line(&format!("{var}={value:?} {why}; using {default}"));
}

fn parse_bool(var: &str, value: &str, default: bool) -> bool {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => true,
        "0" | "false" | "no" | "off" => false,
        _ => {
            warn(var, value, "is not a boolean (0/1)", if default { "1" } else { "0" });
            default
        }
    }
}

impl Config {
    /// The root sysfs and procfs are read under by the topology probe and the NIC counters:
    /// `TPROF_SYSROOT` with `%r` replaced by the rank, else `/`.
    pub fn sysroot_of(&self, rank: Option<u32>) -> PathBuf {
        match &self.sysroot {
            Some(s) => PathBuf::from(s.replace("%r", &rank.map_or_else(|| "0".to_string(), |r| r.to_string()))),
            None => PathBuf::from("/"),
        }
    }

    /// Reads the configuration from an environment lookup (the process environment in production).
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Config {
        let mut c = Config::default();
        if let Some(v) = get(vars::DISABLE) {
            c.disabled = parse_bool(vars::DISABLE, &v, false);
        }
        if let Some(v) = get(vars::OUT) {
            if v.trim().is_empty() {
                warn(vars::OUT, &v, "is empty", "./tprof-out");
            } else {
                c.out_dir = PathBuf::from(v);
            }
        }
        if let Some(v) = get(vars::RING_MB) {
            match v.trim().parse::<u64>() {
                Ok(mb) if (1..=65536).contains(&mb) => c.ring_mb = mb,
                _ => warn(vars::RING_MB, &v, "is not a size in MiB between 1 and 65536", "256"),
            }
        }
        if let Some(v) = get(vars::MODE) {
            c.mode = match v.trim() {
                "" => Mode::Full,
                name => Mode::from_name(name).unwrap_or_else(|| {
                    warn(vars::MODE, &v, "is not one of full, steps, sample, flight, metrics", "full");
                    Mode::Full
                }),
            };
        }
        if let Some(v) = get(vars::FOLLOW_FORK) {
            c.follow_fork = parse_bool(vars::FOLLOW_FORK, &v, true);
        }
        if let Some(v) = get(vars::STEP_MARKER) {
            if !v.trim().is_empty() {
                c.step_marker = Some(v);
            }
        }
        if let Some(v) = get(vars::HANG_TIMEOUT) {
            match parse_duration(&v) {
                Some(d) if d >= Duration::from_millis(100) => c.hang_timeout = d,
                _ => warn(vars::HANG_TIMEOUT, &v, "is not a duration of at least 100ms (e.g. 300s)", "300s"),
            }
        }
        if let Some(v) = get(vars::CUPTI) {
            c.cupti = parse_bool(vars::CUPTI, &v, true);
        }
        if let Some(v) = get(vars::CLOCK) {
            c.clock = match v.trim() {
                "tsc" => Some(ClockSource::Tsc),
                "monotonic" => Some(ClockSource::Monotonic),
                "auto" | "" => None,
                _ => {
                    warn(vars::CLOCK, &v, "is not one of tsc, monotonic, auto", "auto");
                    None
                }
            };
        }
        if let Some(v) = get(vars::BUFFER_EVENTS) {
            match v.trim().parse::<usize>() {
                Ok(n) if (64..=1 << 24).contains(&n) => c.buffer_events = n.next_power_of_two(),
                _ => warn(vars::BUFFER_EVENTS, &v, "is not a count between 64 and 16777216", "16384"),
            }
        }
        if let Some(v) = get(vars::COMMIT_MS) {
            match v.trim().parse::<u64>() {
                Ok(ms) if (1..=100).contains(&ms) => c.commit_interval = Duration::from_millis(ms),
                _ => warn(vars::COMMIT_MS, &v, "is not a number of milliseconds between 1 and 100", "100"),
            }
        }
        if let Some(v) = get(vars::QUIET) {
            c.quiet = parse_bool(vars::QUIET, &v, false);
        }
        if let Some(v) = get(vars::DUMP_SIGNAL) {
            match DumpSignal::parse(&v) {
                Some(s) => c.dump_signal = s,
                None => warn(vars::DUMP_SIGNAL, &v, "is not one of USR1, USR2, off", "off"),
            }
        }
        c.parse_capture(&get);
        c.parse_sources(&get);
        c
    }

    /// The settings of single sources: TPROF_CUPTI_PATH, TPROF_GPU_METRICS_HZ, TPROF_JOB_ID, and the
    /// test switch TPROF_TEST_PANIC.
    fn parse_sources(&mut self, get: &impl Fn(&str) -> Option<String>) {
        if let Some(v) = get(vars::CUPTI_PATH) {
            if !v.is_empty() {
                self.cupti_path = Some(PathBuf::from(v));
            }
        }
        self.gpu_metrics_hz = get(vars::GPU_METRICS_HZ);
        self.host_hz = get(vars::HOST_HZ);
        self.sysroot = get(vars::SYSROOT).filter(|v| !v.trim().is_empty());
        if let Some(v) = get(vars::JOB_ID) {
            if !v.trim().is_empty() {
                self.job_id = Some(v);
            }
        }
        if let Some(v) = get(vars::TEST_PANIC) {
            if !v.is_empty() {
                self.test_panic = Some(v);
            }
        }
    }

    /// The production-mode settings: TPROF_STEPS, TPROF_SAMPLE, TPROF_METRICS_FILE,
    /// TPROF_METRICS_INTERVAL, TPROF_FLIGHT_MB.
    fn parse_capture(&mut self, get: &impl Fn(&str) -> Option<String>) {
        if let Some(v) = get(vars::STEPS) {
            match StepRange::parse(&v) {
                Some(r) => self.steps = r,
                None => warn(vars::STEPS, &v, "is not a step range like 100-110 or 100-110:every=1000", "100-110"),
            }
        }
        if let Some(v) = get(vars::SAMPLE) {
            match DutyCycle::parse(&v) {
                Some(d) => self.sample = d,
                None => warn(vars::SAMPLE, &v, "is not a duty cycle like 2s/60s (on <= period)", "2s/60s"),
            }
        }
        if let Some(v) = get(vars::METRICS_FILE) {
            if !v.trim().is_empty() {
                self.metrics_file = Some(PathBuf::from(v.trim()));
            }
        }
        if let Some(v) = get(vars::METRICS_INTERVAL) {
            match parse_duration(&v) {
                Some(d) if d >= Duration::from_millis(100) => self.metrics_interval = d,
                _ => warn(vars::METRICS_INTERVAL, &v, "is not a duration of at least 100ms (e.g. 10s)", "10s"),
            }
        }
        if let Some(v) = get(vars::FLIGHT_MB) {
            match v.trim().parse::<u64>() {
                Ok(mb) if (1..=65536).contains(&mb) => self.flight_mb = Some(mb),
                _ => warn(vars::FLIGHT_MB, &v, "is not a size in MiB between 1 and 65536", vars::RING_MB),
            }
        }
        if self.mode == Mode::Flight {
            if let Some(mb) = self.flight_mb {
                self.ring_mb = mb;
            }
        }
    }
}

static CONFIG: OnceLock<Config> = OnceLock::new();

/// The process configuration (read from the environment on first use).
pub fn config() -> &'static Config {
    CONFIG.get_or_init(|| Config::from_lookup(|k| std::env::var(k).ok()))
}

/// The configuration if it has been read already (None before the first [`config`] call), for code
/// that may run before tprof initialises and must not read the environment that early.
pub fn config_if_read() -> Option<&'static Config> {
    CONFIG.get()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> Config {
        Config::from_lookup(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
    }

    #[test]
    fn defaults_and_values() {
        let c = cfg(&[]);
        assert_eq!(c.ring_mb, 256);
        assert_eq!(c.mode, Mode::Full);
        let c = cfg(&[("TPROF_RING_MB", "16"), ("TPROF_MODE", "flight"), ("TPROF_HANG_TIMEOUT", "2s")]);
        assert_eq!(c.ring_mb, 16);
        assert_eq!(c.mode, Mode::Flight);
        assert_eq!(c.hang_timeout, Duration::from_secs(2));
    }

    #[test]
    fn sysroot_takes_the_rank() {
        assert_eq!(cfg(&[]).sysroot_of(Some(3)), PathBuf::from("/"));
        assert_eq!(cfg(&[("TPROF_SYSROOT", "/tmp/sys-r%r")]).sysroot_of(Some(3)), PathBuf::from("/tmp/sys-r3"));
    }

    #[test]
    fn bad_values_fall_back_to_defaults() {
        let c = cfg(&[("TPROF_RING_MB", "lots"), ("TPROF_MODE", "turbo"), ("TPROF_FOLLOW_FORK", "maybe")]);
        assert_eq!(c.ring_mb, 256);
        assert_eq!(c.mode, Mode::Full);
        assert!(c.follow_fork);
    }

    #[test]
    fn hz_parsing() {
        let parse_hz = parse_gpu_metrics_hz;
        assert_eq!(parse_hz(None), (5, None));
        assert_eq!(parse_hz(Some("10")), (10, None));
        assert_eq!(parse_hz(Some("0")), (0, None));
        assert_eq!(parse_hz(Some(" 1 ")), (1, None));
        let (hz, w) = parse_hz(Some("11"));
        assert_eq!(hz, 5);
        assert!(w.unwrap().contains("TPROF_GPU_METRICS_HZ=\"11\""));
        assert_eq!(parse_hz(Some("fast")).0, 5);
        assert!(parse_hz(Some("-1")).1.is_some());
    }
}
