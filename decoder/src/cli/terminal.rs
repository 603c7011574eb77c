//! The terminal of `tprof top`: raw mode (no echo, no line buffering) restored on drop, keys read
//! by a thread into a channel (a wait with a timeout), the screen cleared between frames. The
//! decoder has no `unsafe` (`forbid(unsafe_code)`): the mode is set with `stty` on the terminal,
//! which is what termios calls would do, and no TUI dependency is needed. Ctrl-C arrives as a key
//! (`-isig`) so the mode is always restored.

use std::io::Read;
use std::process::{Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::time::Duration;

/// Raw mode on the controlling terminal while alive (when stdin is one).
pub struct RawMode {
    saved: Option<String>,
}

fn stty(args: &[&str]) -> Option<String> {
    let tty = std::fs::File::open("/dev/tty").ok()?;
    let out = Command::new("stty").args(args).stdin(tty).stderr(Stdio::null()).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

impl RawMode {
    pub fn enter() -> RawMode {
        use std::io::IsTerminal;
        if !std::io::stdin().is_terminal() {
            return RawMode { saved: None };
        }
        let saved = stty(&["-g"]);
        if saved.is_some() {
            stty(&["-icanon", "-echo", "-isig", "min", "1"]);
        }
        RawMode { saved }
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        if let Some(s) = &self.saved {
            stty(&[s.as_str()]);
        }
    }
}

/// Keys typed on stdin, read by a background thread (it ends with stdin).
pub struct Keys {
    rx: Receiver<u8>,
}

impl Keys {
    pub fn start() -> Keys {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            let mut b = [0u8; 1];
            let mut stdin = std::io::stdin();
            while let Ok(1) = stdin.read(&mut b) {
                if tx.send(b[0]).is_err() {
                    break;
                }
            }
        });
        Keys { rx }
    }

    /// The next key within `timeout`, or None (also when stdin has ended: then it just waits).
    pub fn next(&self, timeout: Duration) -> Option<u8> {
        match self.rx.recv_timeout(timeout) {
            Ok(k) => Some(k),
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => None,
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                std::thread::sleep(timeout);
                None
            }
        }
    }
}

/// Clear screen and home the cursor.
pub const CLEAR: &str = "\x1b[H\x1b[2J";
