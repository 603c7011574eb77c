//! `TPROF_*` configuration, read once from the environment. A bad value gets one warning line on
//! stderr naming the variable, and the default is used: the host program always runs on.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use tprof_format::settings::{self, parse_duration, vars, DutyCycle, Mode, StepRange};
use tprof_format::ClockSource;

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
    // capture (issue 7): production-mode settings, parsed by `crate::capture` / `crate::metrics`.
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
            steps: StepRange::DEFAULT,
            sample: DutyCycle::DEFAULT,
            metrics_file: None,
            metrics_interval: Duration::from_secs(10),
            flight_mb: None,
        }
    }
}

fn warn(var: &str, value: &str, why: &str, default: &str) {
    crate::state::warn_line(&format!("{var}={value:?} {why}; using {default}"));
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
        c.parse_capture(&get);
        c
    }

    /// capture (issue 7): TPROF_STEPS, TPROF_SAMPLE, TPROF_METRICS_FILE, TPROF_METRICS_INTERVAL,
    /// TPROF_FLIGHT_MB.
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
    fn bad_values_fall_back_to_defaults() {
        let c = cfg(&[("TPROF_RING_MB", "lots"), ("TPROF_MODE", "turbo"), ("TPROF_FOLLOW_FORK", "maybe")]);
        assert_eq!(c.ring_mb, 256);
        assert_eq!(c.mode, Mode::Full);
        assert!(c.follow_fork);
    }
}
