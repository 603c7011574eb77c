//! The lines tprof prints. Each is one `writev(2)` to stderr: no Rust stderr lock, so a line is safe
//! after fork, in signal context and in destructors, and lines of several processes never interleave.

/// Writes one line to stderr with a single writev(2), however long.
pub fn stderr_line(line: &str) {
    let newline = b"\n";
    let iov = [
        libc::iovec { iov_base: line.as_ptr() as *mut libc::c_void, iov_len: line.len() },
        libc::iovec { iov_base: newline.as_ptr() as *mut libc::c_void, iov_len: 1 },
    ];
    // SAFETY: one writev(2) of the line and its newline, both borrowed for the call (the kernel only
    // reads them): the whole line however long, in one call; failure is ignored on purpose.
    unsafe { libc::writev(2, iov.as_ptr(), 2) };
}

/// `tprof: warning: <msg>` on stderr.
pub fn warn_line(msg: &str) {
    stderr_line(&format!("tprof: warning: {msg}"));
}
