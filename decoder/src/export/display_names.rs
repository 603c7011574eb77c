//! Naming shared by the exporters: display names (demangled, cached per name), labels for ranks,
//! streams and threads, flow ids, and which API calls launch GPU work.

use crate::intervals::FastMap;
use crate::model::*;

/// Demangles kernel names once per distinct name. Keys are the interned `Arc`s (by address); the
/// cache keeps each key alive, so an address cannot be reused while it is cached. Memory: names.
#[derive(Debug, Default)]
pub struct DisplayNames {
    cache: FastMap<usize, (Name, Name)>,
}

impl DisplayNames {
    /// The demangled form of `n` (the same `Name` when it is not mangled).
    pub fn get(&mut self, n: &Name) -> Name {
        let key = crate::ptr_cache::name_key(n);
        if let Some((_, d)) = self.cache.get(&key) {
            return d.clone();
        }
        let d = crate::summary::demangle(n);
        let d: Name = if *d == **n { n.clone() } else { Name::from(d) };
        self.cache.insert(key, (n.clone(), d.clone()));
        d
    }

    /// Forget every name (between processes: each input file interns its own names).
    pub fn clear(&mut self) {
        self.cache.clear();
    }
}

/// A name fit for one frame of a folded stack: no `;` (the frame separator), no line breaks.
pub fn frame_name(s: &str) -> String {
    s.chars().map(|c| if c == ';' || c == '\n' || c == '\r' { ':' } else { c }).collect()
}

/// "rank 3 · host7 · pid 1234" (or "pid 1234 · host7" without a rank).
pub fn process_label(p: &ProcessInfo) -> String {
    match p.rank {
        Some(r) => format!("rank {r} · {} · pid {}", p.host, p.pid),
        None => format!("pid {} · {}", p.pid, p.host),
    }
}

/// Short label for file names: "rank-3", else "pid-1234".
pub fn process_file_stem(p: &ProcessInfo) -> String {
    match p.rank {
        Some(r) => format!("rank-{r}"),
        None => format!("pid-{}", p.pid),
    }
}

/// "GPU 0 stream 7".
pub fn stream_label(device: u32, stream: u32) -> String {
    format!("GPU {device} stream {stream}")
}

/// A flow id unique across processes: process index in the high bits, correlation in the low 40.
/// Stays below 2^53 (exact in JSON doubles) for up to 8192 processes.
pub fn flow_id(proc: ProcId, correlation: u64) -> u64 {
    ((proc.0 as u64 & 0x1FFF) << 40) | (correlation & 0xFF_FFFF_FFFF)
}

/// True when a host API call can create GPU work (a flow starts there when its work shows up).
pub fn launches_gpu_work(a: &Api) -> bool {
    if a.correlation == 0 {
        return false;
    }
    if a.detail.is_some() {
        return true;
    }
    let n: &str = &a.name;
    n.contains("Launch") || n.contains("Memcpy") || n.contains("Memset") || n.starts_with("nccl")
}

/// Kineto's names for copies: "Memcpy HtoD (Pinned -> Device)".
pub fn memcpy_name(m: &Memcpy) -> String {
    format!("Memcpy {} ({} -> {})", m.kind.name(), memory_kind_name(m.src_kind), memory_kind_name(m.dst_kind))
}

/// Kineto's names for memsets: "Memset (Device)".
pub fn memset_name(m: &Memset) -> String {
    format!("Memset ({})", memory_kind_name(m.dst_kind))
}

/// Kineto's capitalised memory kind ("Pageable", "Device").
pub fn memory_kind_name(k: MemoryKind) -> &'static str {
    match k {
        MemoryKind::Pageable => "Pageable",
        MemoryKind::Pinned => "Pinned",
        MemoryKind::Device | MemoryKind::DeviceStatic => "Device",
        MemoryKind::Array => "Array",
        MemoryKind::Managed | MemoryKind::ManagedStatic => "Managed",
        MemoryKind::Unknown => "Unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn display_names_demangle_once() {
        let mut d = DisplayNames::default();
        let n: Name = "_Z4gemmPfS_S_i".into();
        assert_eq!(&*d.get(&n), "gemm(float*, float*, float*, int)");
        let plain: Name = "ncclKernel".into();
        assert!(Arc::ptr_eq(&d.get(&plain), &plain));
        assert_eq!(frame_name("a;b\nc"), "a:b:c");
        assert!(flow_id(ProcId(8191), u64::MAX) < 1 << 53);
    }
}
