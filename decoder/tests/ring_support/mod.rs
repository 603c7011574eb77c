//! Shared by the tests that write small ring files by hand and run the built `tprof` binary on them:
//! the CLI runner, a ring header, and one launch (the API call and its kernel).
#![allow(dead_code)]

use std::process::{Command, Output};

use tprof_format::{ApiDomain, ClockSource, FileHeader, Record, RingWriter, StrId};

/// Wall clock at the ring's start.
pub const T0: u64 = 1_700_000_000_000_000_000;
/// Monotonic clock (= ticks) at the ring's start.
pub const MONO0: u64 = 1_000_000_000;

/// (exit code, stdout, stderr) of a finished `tprof`; a signal death reads as 128 + the signal.
pub fn result(out: Output) -> (i32, String, String) {
    use std::os::unix::process::ExitStatusExt;
    let code = out.status.code().unwrap_or_else(|| 128 + out.status.signal().unwrap_or(0));
    (code, String::from_utf8_lossy(&out.stdout).into(), String::from_utf8_lossy(&out.stderr).into())
}

/// Runs the built `tprof args...`.
pub fn tprof(args: &[&str]) -> (i32, String, String) {
    result(Command::new(env!("CARGO_BIN_EXE_tprof")).args(args).output().expect("tprof runs"))
}

/// A full-mode ring header of process `pid` on `host`, rank `rank` of `world`, clocks at T0 / MONO0
/// (1 tick = 1 ns).
pub fn header(pid: u32, host: &str, rank: u32, world: u32) -> FileHeader {
    FileHeader {
        pid,
        ppid: 1,
        hostname: host.into(),
        cmdline: vec!["test".into()],
        rank: Some(rank),
        world_size: Some(world),
        job_id: Some("job".into()),
        start_wall_ns: T0,
        start_mono_ns: MONO0,
        start_ticks: MONO0,
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        mode: "full".into(),
        writer: "test".into(),
        ..FileHeader::default()
    }
}

/// One kernel launch on stream 7 of thread 1: the runtime call `api` (2 us from `t`) naming `kernel`,
/// then the kernel itself from `t + 3 us` to `t + 3 us + kernel_ns`, both with correlation `corr`.
pub fn launch(w: &mut RingWriter, api: StrId, kernel: StrId, t: u64, kernel_ns: u64, corr: u32) {
    w.append(&Record::Api {
        tid: 1,
        domain: ApiDomain::Runtime,
        name: api,
        start: t,
        end: t + 2_000,
        result: 0,
        correlation: corr,
        detail: kernel,
        stream: 7,
        arg: 0,
    });
    w.append(&Record::Kernel {
        device: 0,
        context: 1,
        stream: 7,
        start: t + 3_000,
        end: t + 3_000 + kernel_ns,
        grid: [1, 1, 1],
        block: [32, 1, 1],
        registers: 16,
        shared_mem: 0,
        correlation: corr,
        name: kernel,
        graph_id: 0,
    });
}
