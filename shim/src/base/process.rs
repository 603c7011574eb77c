//! Who this process is: its place in the job (rank, local rank, world size, job id, from the
//! launchers' environment), host name, command line, and the ring file it writes once initialised.

use std::path::PathBuf;
use std::sync::OnceLock;

use super::config::config;

static RING_PATH: OnceLock<PathBuf> = OnceLock::new();

fn env(k: &str) -> Option<String> {
    std::env::var(k).ok().filter(|v| !v.trim().is_empty())
}

fn env_u32(keys: &[&str]) -> Option<u32> {
    keys.iter().find_map(|k| env(k).and_then(|v| v.trim().parse().ok()))
}

/// Rank, local rank, world size and job id from the launchers' environment variables
/// (`TPROF_JOB_ID` first for the job id).
pub fn job_identity() -> (Option<u32>, Option<u32>, Option<u32>, Option<String>) {
    let rank =
        env_u32(&["RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID", "MV2_COMM_WORLD_RANK"]);
    let local = env_u32(&[
        "LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "SLURM_LOCALID",
        "MPI_LOCALRANKID",
        "MV2_COMM_WORLD_LOCAL_RANK",
    ]);
    let world = env_u32(&["WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS", "MV2_COMM_WORLD_SIZE"]);
    let job = config()
        .job_id
        .clone()
        .or_else(|| ["TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"].iter().find_map(|k| env(k)));
    (rank, local, world, job)
}

/// The host name (`gethostname`), `unknown` when it cannot be read.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into our buffer.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The command line (`/proc/self/cmdline`), one entry per argument.
pub fn cmdline() -> Vec<String> {
    std::fs::read("/proc/self/cmdline")
        .map(|b| {
            b.split(|&c| c == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
        })
        .unwrap_or_default()
}

/// Where this process's ring file is, once created.
pub fn ring_path() -> Option<&'static PathBuf> {
    RING_PATH.get()
}

/// Remembers the ring file this process writes (once).
pub fn set_ring_path(path: PathBuf) {
    let _ = RING_PATH.set(path);
}
