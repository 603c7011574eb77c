//! The memory limit of this process's memory cgroup and what is charged to it (containers,
//! Slurm and Kubernetes jobs run under one; "RSS near the limit" is near this, not near the
//! machine's memory). cgroup v2 (`memory.max`, `memory.current`) or v1 (`memory.limit_in_bytes`,
//! `memory.usage_in_bytes`) at the usual mount points; the nearest cgroup on the path up to the
//! root that has a limit. Found once when the sampler starts, read with `pread` every round.

use super::procfs::{self, ProcFile};

/// v1 writes "no limit" as the largest page-aligned i64; anything from 2^60 on is no limit.
const NO_LIMIT: u64 = 1 << 60;

pub struct CgroupMemory {
    limit: ProcFile,
    usage: Option<ProcFile>,
    limit_bytes: u64,
}

impl CgroupMemory {
    /// This process's limited memory cgroup, None when there is none (or it cannot be read).
    pub fn find() -> Option<CgroupMemory> {
        let text = std::fs::read_to_string("/proc/self/cgroup").ok()?;
        let mut dirs: Vec<(String, [&str; 2])> = Vec::new();
        for line in text.lines() {
            let mut f = line.splitn(3, ':');
            let (Some(hier), Some(ctl), Some(path)) = (f.next(), f.next(), f.next()) else { continue };
            if hier == "0" && ctl.is_empty() {
                for root in ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"] {
                    dirs.push((format!("{root}{path}"), ["memory.max", "memory.current"]));
                }
            } else if ctl.split(',').any(|c| c == "memory") {
                dirs.push((format!("/sys/fs/cgroup/memory{path}"), ["memory.limit_in_bytes", "memory.usage_in_bytes"]));
            }
        }
        for (leaf, [limit, usage]) in dirs {
            let mut dir = leaf.trim_end_matches('/').to_string();
            loop {
                if let Some(found) = Self::open(&dir, limit, usage) {
                    return Some(found);
                }
                match dir.rfind('/') {
                    Some(i) if dir[..i].matches('/').count() >= 3 => dir.truncate(i),
                    _ => break,
                }
            }
        }
        None
    }

    fn open(dir: &str, limit: &str, usage: &str) -> Option<CgroupMemory> {
        let file = ProcFile::open(&format!("{dir}/{limit}"))?;
        let mut buf = Vec::new();
        let limit_bytes = file.read(&mut buf).and_then(procfs::number).filter(|&l| l > 0 && l < NO_LIMIT)?;
        Some(CgroupMemory { limit: file, usage: ProcFile::open(&format!("{dir}/{usage}")), limit_bytes })
    }

    /// (limit, usage) now.
    pub fn read(&mut self, buf: &mut Vec<u8>) -> (u64, Option<u64>) {
        if let Some(l) = self.limit.read(buf).and_then(procfs::number).filter(|&l| l > 0 && l < NO_LIMIT) {
            self.limit_bytes = l;
        }
        let usage = self.usage.as_ref().and_then(|f| f.read(buf)).and_then(procfs::number);
        (self.limit_bytes, usage)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_no_limit_or_a_readable_one() {
        // The test machine may or may not run the tests in a limited cgroup: either way no panic,
        // and a limit found reads back with a usage below about the limit.
        if let Some(mut c) = CgroupMemory::find() {
            let mut buf = Vec::new();
            let (limit, usage) = c.read(&mut buf);
            assert!(limit > 0 && limit < NO_LIMIT);
            if let Some(u) = usage {
                assert!(u <= limit + (64 << 20), "usage {u} limit {limit}");
            }
        }
    }
}
