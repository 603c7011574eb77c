//! The child processes of the shim's process-level tests (`shim/tests/recorder_processes.rs`,
//! `shim/tests/gpu_metrics.rs`): the recording core linked as a library, driven by a role.
//!
//! `tprof-recording-child steady`: one event every 100 us until killed; `forker`: events, a fork with both
//! sides recording, exit; `gpu_metrics`: starts the NVML sampler and runs `CHILD_MS` (default 800).
//! Cargo builds it for the integration tests (`CARGO_BIN_EXE_tprof-recording-child`); not a program
//! for users.

use std::time::Duration;

use tprof_format::{ApiDomain, Record, StrId};

fn api(arg: u64) -> Record {
    Record::Api {
        tid: 1,
        domain: ApiDomain::Runtime,
        name: StrId::NONE,
        start: tprof::base::ticks::now(),
        end: 0,
        result: 0,
        correlation: 0,
        detail: StrId::NONE,
        stream: 0,
        arg,
    }
}

fn main() {
    let role = std::env::args().nth(1).unwrap_or_default();
    tprof::lifecycle::ensure_init();
    match role.as_str() {
        "steady" => {
            let mut i = 0u64;
            loop {
                tprof::record::recorder::emit(api(i));
                i += 1;
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        "forker" => {
            for i in 0..1000 {
                tprof::record::recorder::emit(api(i));
            }
            // SAFETY: a test child; the forked child only uses tprof's fork-safe paths plus its own
            // re-initialisation, which is what the test checks.
            let pid = unsafe { libc::fork() };
            if pid == 0 {
                tprof::lifecycle::ensure_init();
                for i in 0..500 {
                    tprof::record::recorder::emit(api(100_000 + i));
                }
                std::process::exit(0);
            }
            for i in 1000..2000 {
                tprof::record::recorder::emit(api(i));
            }
            let mut status = 0;
            // SAFETY: waiting for our own child.
            unsafe { libc::waitpid(pid, &mut status, 0) };
            std::process::exit(if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 { 0 } else { 1 });
        }
        "gpu_metrics" => {
            tprof::gpu_metrics::start();
            let ms: u64 = std::env::var("CHILD_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(800);
            std::thread::sleep(Duration::from_millis(ms));
            tprof::lifecycle::shutdown_for_tests();
        }
        other => {
            eprintln!("tprof-recording-child: unknown role {other:?} (steady, forker, gpu_metrics)");
            std::process::exit(2);
        }
    }
}
