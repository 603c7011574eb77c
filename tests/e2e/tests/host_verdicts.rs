//! `host_cpu_contention` and `host_memory_pressure` end to end, on this machine's real /proc and
//! cgroup counters (simtrain on the simulated GPU stack under libtprof, host sampler at 10 Hz).
//!
//! - Contention: simtrain `--launch-bound` (the main thread launches all the time, so a CPU it
//!   waits for is GPU idle) pinned to CPU 0 beside two busy loops pinned there too: the verdict is
//!   the top one, with involuntary switches and a run-queue wait of most of the thread's demand,
//!   and it and `launch_bound` together claim no more GPU idle time than there was (attributed
//!   once). A clean run (GPU-bound, not pinned, no busy loops) has no contention verdict above
//!   0.05 even on a loaded machine: what the verdict costs is GPU idle time, and a GPU-bound run
//!   has little of it, however long its host thread waits at each wake-up.
//! - Memory: simtrain holding 136 MiB (`--host-mb`) in a memory cgroup limited to 160 MiB (RSS
//!   ~94% of the limit): the verdict names the cgroup limit; the same run without the limit has
//!   none. Needs a writable memory cgroup (v1 or v2; root in the CI VM); without one the test
//!   says so and checks nothing else.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use tprof_e2e::diagnose::*;

fn verdict<'a>(d: &'a serde_json::Value, kind: &str) -> Option<&'a serde_json::Value> {
    d["verdicts"].as_array().unwrap().iter().find(|v| v["kind"] == kind)
}

fn severity(v: Option<&serde_json::Value>) -> f64 {
    v.and_then(|v| v["severity"].as_f64()).unwrap_or(0.0)
}

/// A busy loop pinned to CPU 0, killed when dropped.
struct Burner(Child);
impl Burner {
    fn start() -> Burner {
        let c = Command::new("taskset")
            .args(["-c", "0", "sh", "-c", "while :; do :; done"])
            .stdin(Stdio::null())
            .spawn()
            .expect("taskset (util-linux) runs a busy loop");
        Burner(c)
    }
}
impl Drop for Burner {
    fn drop(&mut self) {
        self.0.kill().ok();
        self.0.wait().ok();
    }
}

#[test]
fn cpu_contention_from_competing_processes_and_a_clean_run() {
    let args = ["--launch-bound", "--steps", "16", "--quiet"];
    let burners = [Burner::start(), Burner::start()];
    let r = profile_simtrain_under(&["taskset", "-c", "0"], &args, None, Duration::from_secs(120));
    drop(burners);
    assert_eq!(r.out.code, 0, "{}", r.out.describe());
    let d = diagnose_json(r.rings.path(), &["--all"]);
    let table = verdict_table(&d);
    let v = assert_top(&d, "host_cpu_contention", "launch-bound simtrain beside two busy loops on its core");
    let e = &v["evidence"];
    // Three runnable tasks on one core: the thread gets about a third of it.
    assert!(e["wait_of_demand_share"].as_f64().unwrap() >= 0.4, "{e}\n{table}");
    assert!(e["run_delay_share"].as_f64().unwrap() >= 0.3, "{e}\n{table}");
    assert!(e["involuntary_switches_per_s"].as_f64().unwrap() >= 20.0, "{e}\n{table}");
    assert!(v["severity"].as_f64().unwrap() >= 0.2, "{table}");
    // Attributed once: contention's claim and launch_bound's launch idle fit in the idle there was.
    let ns = &d["efficiency"]["overall"]["ns"];
    let idle = ns["launch_ns"].as_u64().unwrap() + ns["idle_ns"].as_u64().unwrap();
    let claimed = e["gpu_idle_claimed_ns"].as_u64().unwrap();
    let launch = verdict(&d, "launch_bound").map(|l| l["evidence"]["launch_idle_ns"].as_u64().unwrap()).unwrap_or(0);
    assert!(claimed > 0, "{e}");
    assert!(claimed + launch <= idle + idle / 100, "claimed {claimed} + launch {launch} > idle {idle}\n{table}");
    assert!(severity(verdict(&d, "launch_bound")) < v["severity"].as_f64().unwrap(), "{table}");

    let r = profile_simtrain(&["--steps", "24", "--quiet"], None, Duration::from_secs(120));
    assert_eq!(r.out.code, 0, "{}", r.out.describe());
    let d = diagnose_json(r.rings.path(), &["--all"]);
    assert!(severity(verdict(&d, "host_cpu_contention")) < 0.05, "clean run\n{}", verdict_table(&d));
}

/// A memory cgroup of our own, removed when dropped.
struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    /// A child of this process's memory cgroup limited to `limit` bytes; Err says why not.
    fn create(limit: u64) -> Result<MemoryCgroup, String> {
        let text = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let name = format!("tprof-e2e-{}", std::process::id());
        let mut tried = Vec::new();
        for line in text.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(hier), Some(ctl), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
            let (root, file) = if ctl.split(',').any(|c| c == "memory") {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
            } else if hier == "0" && ctl.is_empty() {
                ("/sys/fs/cgroup", "memory.max")
            } else {
                continue;
            };
            let dir = PathBuf::from(format!("{root}{}/{name}", path.trim_end_matches('/')));
            match std::fs::create_dir(&dir) {
                Ok(()) => {
                    let cg = MemoryCgroup { dir };
                    match std::fs::write(cg.dir.join(file), limit.to_string()) {
                        Ok(()) => return Ok(cg),
                        Err(e) => tried.push(format!("{}: {e}", cg.dir.join(file).display())),
                    }
                }
                Err(e) => tried.push(format!("{}: {e}", dir.display())),
            }
        }
        Err(if tried.is_empty() { "no memory cgroup in /proc/self/cgroup".into() } else { tried.join("; ") })
    }
}

impl Drop for MemoryCgroup {
    fn drop(&mut self) {
        std::fs::remove_dir(&self.dir).ok();
    }
}

#[test]
fn memory_pressure_near_a_cgroup_limit_and_a_clean_run() {
    let limit: u64 = 160 << 20;
    let cg = match MemoryCgroup::create(limit) {
        Ok(cg) => cg,
        Err(why) => {
            eprintln!("host_memory_pressure on real counters NOT checked: cannot make a memory cgroup ({why})");
            return;
        }
    };
    let args = ["--host-mb", "136", "--steps", "40", "--quiet"];
    let join = format!("echo $$ > {}/cgroup.procs && exec \"$0\" \"$@\"", cg.dir.display());
    let r = profile_simtrain_under(&["sh", "-c", &join], &args, None, Duration::from_secs(120));
    assert_eq!(r.out.code, 0, "under a {limit}-byte cgroup limit: {}", r.out.describe());
    let d = diagnose_json(r.rings.path(), &["--all"]);
    let table = verdict_table(&d);
    let v = verdict(&d, "host_memory_pressure").unwrap_or_else(|| panic!("no host_memory_pressure\n{table}"));
    let e = &v["evidence"];
    assert_eq!(e["cgroup_memory_limit_bytes"].as_u64(), Some(limit), "{e}");
    let rss = e["rss_bytes"].as_u64().unwrap();
    assert!(rss >= 136 << 20 && rss as f64 >= 0.9 * limit as f64 && rss <= limit, "RSS {rss}: {e}");
    assert!(v["severity"].as_f64().unwrap() >= 0.1, "{table}");
    drop(cg);

    let r = profile_simtrain(&args, None, Duration::from_secs(120));
    assert_eq!(r.out.code, 0, "{}", r.out.describe());
    let d = diagnose_json(r.rings.path(), &["--all"]);
    assert!(verdict(&d, "host_memory_pressure").is_none(), "no limit, 24 GB machine\n{}", verdict_table(&d));
}
