//! Synthetic ring files with known truth, for the tests and the decode benchmark (the cargo
//! feature `testkit`, which the `tprof` binary is built without).
//!
//! Three jobs, one per question:
//! - [`data_parallel::SynthJob`]: a plain data-parallel job whose every time is known (decoding,
//!   summary, clock alignment, exports);
//! - [`simtrain::Scenario`]: a job shaped like `simtrain` with each pathology as a switch (the
//!   diagnoses);
//! - [`bench_job`]: a large, realistic multi-rank job (the decode benchmark's throughput).
//!
//! All write through [`create_ring`]: a header naming the rank, the strings, a ring sized to hold
//! everything.

pub mod bench_job;
pub mod data_parallel;
pub mod kineto_trace;
pub mod simtrain;

use std::path::{Path, PathBuf};

use tprof_format::{ClockSource, FileHeader, RingGeometry, RingWriter, StrId};

pub use data_parallel::SynthJob;
pub use simtrain::Scenario;

/// True wall-clock time of a generated job's start (ns since the epoch).
pub const T0: u64 = 1_700_000_000_000_000_000;

/// Who a generated ring file says it is, and where its clocks start.
#[derive(Debug, Clone)]
pub struct RankIdentity<'a> {
    pub pid: u32,
    pub hostname: String,
    pub cmdline: Vec<String>,
    pub rank: u32,
    pub local_rank: u32,
    pub world_size: u32,
    pub job_id: &'a str,
    /// The header's start pair: wall-clock ns and monotonic ns (= ticks, 1 GHz).
    pub start_wall_ns: u64,
    pub start_mono_ns: u64,
    /// The header's `writer`.
    pub writer: &'a str,
}

/// Creates the ring file of `id` in `dir` (named as the shim names it), `total_bytes` large,
/// with `strings` defined.
pub fn create_ring<'s>(
    dir: &Path,
    id: RankIdentity<'_>,
    total_bytes: u64,
    strings: impl IntoIterator<Item = (StrId, &'s str)>,
) -> std::io::Result<(PathBuf, RingWriter)> {
    let header = FileHeader {
        pid: id.pid,
        ppid: 1,
        hostname: id.hostname,
        cmdline: id.cmdline,
        rank: Some(id.rank),
        local_rank: Some(id.local_rank),
        world_size: Some(id.world_size),
        job_id: Some(id.job_id.into()),
        start_wall_ns: id.start_wall_ns,
        start_mono_ns: id.start_mono_ns,
        start_ticks: id.start_mono_ns,
        clock_source: ClockSource::Monotonic,
        ticks_per_sec: 1e9,
        mode: "full".into(),
        writer: id.writer.into(),
        ..FileHeader::default()
    };
    let path = dir.join(tprof_format::ring_file_name(&header.hostname, Some(id.rank), header.pid));
    let mut w =
        RingWriter::create(&path, header, RingGeometry::for_total_bytes(total_bytes)).map_err(std::io::Error::other)?;
    for (sid, text) in strings {
        w.define_string(sid, text);
    }
    Ok((path, w))
}

/// The real Kineto traces the tests read: `$TPROF_KINETO_DATA`, else the project's
/// `../shared/data/kineto`. Panics, saying so, when they are not there.
pub fn kineto_traces_dir() -> PathBuf {
    let d = std::env::var("TPROF_KINETO_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/kineto"));
    assert!(d.is_dir(), "real Kineto traces not found at {} (set TPROF_KINETO_DATA)", d.display());
    d
}
