//! The production-mode settings (TPROF_STEPS, TPROF_SAMPLE, TPROF_METRICS_*, TPROF_FLIGHT_MB): values,
//! and defaults after one warning for bad values.

use std::time::Duration;

use tprof::base::config::Config;
use tprof_format::settings::{DutyCycle, Mode, StepRange};

fn cfg(pairs: &[(&str, &str)]) -> Config {
    Config::from_lookup(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))
}

#[test]
fn production_settings() {
    let c = cfg(&[
        ("TPROF_MODE", "steps"),
        ("TPROF_STEPS", "100-110:every=1000"),
        ("TPROF_SAMPLE", "500ms/10s"),
        ("TPROF_METRICS_FILE", "/m/tprof-%r.prom"),
        ("TPROF_METRICS_INTERVAL", "2s"),
    ]);
    assert_eq!(c.mode, Mode::Steps);
    assert_eq!(c.steps, StepRange { first: 100, last: 110, every: 1000 });
    assert_eq!(c.sample, DutyCycle { on: Duration::from_millis(500), period: Duration::from_secs(10) });
    assert_eq!(c.metrics_file.as_deref(), Some(std::path::Path::new("/m/tprof-%r.prom")));
    assert_eq!(c.metrics_interval, Duration::from_secs(2));
}

#[test]
fn flight_ring_size() {
    let c = cfg(&[("TPROF_MODE", "flight"), ("TPROF_FLIGHT_MB", "32")]);
    assert_eq!(c.ring_mb, 32);
    let c = cfg(&[("TPROF_MODE", "full"), ("TPROF_FLIGHT_MB", "32")]);
    assert_eq!(c.ring_mb, 256, "TPROF_FLIGHT_MB only sizes flight-mode rings");
}

#[test]
fn bad_values_fall_back() {
    let c = cfg(&[
        ("TPROF_STEPS", "110-100"),
        ("TPROF_SAMPLE", "61s/60s"),
        ("TPROF_METRICS_INTERVAL", "1ms"),
        ("TPROF_FLIGHT_MB", "0"),
    ]);
    assert_eq!(c.steps, StepRange::DEFAULT);
    assert_eq!(c.sample, DutyCycle::DEFAULT);
    assert_eq!(c.metrics_interval, Duration::from_secs(10));
    assert_eq!(c.flight_mb, None);
}
