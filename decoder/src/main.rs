//! The `tprof` command line.
#![deny(unsafe_code)]

use clap::Parser;

fn main() {
    heap::keep_freed_memory();
    let cli = tprof_decoder::cli::Cli::parse();
    std::process::exit(tprof_decoder::cli::run(cli));
}

/// The one `unsafe` of the command line: how glibc's allocator treats the memory it is given back.
///
/// A decode builds each rank's state (runs of calls and kernels growing to tens or hundreds of MB),
/// then frees it and builds the next rank's. With glibc's defaults every block over the (dynamic)
/// mmap threshold is a fresh mapping, and a heap top over the trim threshold goes back to the kernel,
/// so each rank faults its pages in anew: `report` on 10 M events took ~150 k minor faults for a
/// 200 MB peak, and 20-25% of its CPU time was the kernel's (zeroing and mapping pages). Kept in
/// the heap, freed memory is reused by the next rank: ~50 k faults, system time 0.3-0.5 -> 0.15 s
/// (scripts/bench-decode.sh measures it side by side). The peak resident set is that of the
/// largest rank(s) either way; what changes is that it is not handed back before the process exits.
mod heap {
    /// Heap tops and large blocks stay in the process (glibc only; elsewhere nothing changes).
    pub fn keep_freed_memory() {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        #[allow(unsafe_code)]
        // SAFETY: mallopt only changes glibc's allocator parameters; it is called first thing in
        // main, before any other thread exists, and each value is one glibc accepts (it returns 0,
        // ignored, for a value it refuses, leaving that parameter at its default).
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, libc::c_int::MAX);
            libc::mallopt(libc::M_TRIM_THRESHOLD, libc::c_int::MAX);
            libc::mallopt(libc::M_TOP_PAD, 64 << 20);
        }
    }
}
