//! The commands' standard output. A reader that went away (`tprof info RING | head -1`) ends the
//! command quietly with status 0; any other write error (`>/dev/full`) ends it with one line on
//! stderr and status 1. Nothing here panics on a write error, as `print!` does.

use std::io::{self, Write};

/// The exit status after a failed write to stdout, having said why (unless the pipe was closed).
pub fn failed(e: &io::Error) -> i32 {
    if e.kind() == io::ErrorKind::BrokenPipe {
        return 0;
    }
    eprintln!("tprof: cannot write the output: {e}");
    1
}

/// Writes `text` to stdout and flushes it; `Err(status)` when that failed.
pub fn print(text: &str) -> Result<(), i32> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).map_err(|e| failed(&e))
}

/// [`print`] of `text` and a newline.
pub fn println(text: &str) -> Result<(), i32> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
        .map_err(|e| failed(&e))
}

/// A status from [`print`] / [`println`]: 0 after a closed pipe, 1 after another error.
pub fn status(r: Result<(), i32>, ok: i32) -> i32 {
    match r {
        Ok(()) => ok,
        Err(code) => code,
    }
}
