//! The lines tprof prints. Each is one `write(2)` to stderr: no Rust stderr lock, so a line is safe
//! after fork, in signal context and in destructors, and lines of several processes never interleave.

/// Writes one line to stderr with a single write(2).
pub fn stderr_line(line: &str) {
    let mut buf = [0u8; 1024];
    let bytes = line.as_bytes();
    let n = bytes.len().min(buf.len() - 1);
    buf[..n].copy_from_slice(&bytes[..n]);
    buf[n] = b'\n';
    // SAFETY: writes `n + 1` initialised bytes from our buffer to fd 2; failure is ignored on purpose.
    unsafe { libc::write(2, buf.as_ptr().cast(), n + 1) };
}

/// `tprof: warning: <msg>` on stderr.
pub fn warn_line(msg: &str) {
    stderr_line(&format!("tprof: warning: {msg}"));
}
