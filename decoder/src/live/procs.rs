//! Which processes are running and which rings they write (`tprof top --all`): the `.tprof` files
//! that processes of this user have mapped (`/proc/PID/maps`), read-only, nothing is signalled.

use std::path::PathBuf;

/// The ring files mapped by running processes on this host.
pub fn mapped_rings() -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else { return out };
    for e in rd.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let Ok(maps) = std::fs::read_to_string(e.path().join("maps")) else { continue };
        for line in maps.lines() {
            // "addr perms offset dev inode   /path/host-r0-p123.tprof"
            if let Some(p) = line.split_whitespace().nth(5) {
                if p.ends_with(".tprof") && line.split_whitespace().count() == 6 {
                    out.push(PathBuf::from(p));
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Whether `pid` runs, when `host` is this host (None otherwise: another node's ring).
pub fn alive(host: &str, pid: u32) -> Option<bool> {
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").ok()?;
    if here.trim() != host || pid == 0 {
        return None;
    }
    Some(std::path::Path::new(&format!("/proc/{pid}")).exists())
}
