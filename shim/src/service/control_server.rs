//! The control socket's server loop (FFI: `poll`): one thread serves up to [`MAX_CONNECTIONS`]
//! connections at once on non-blocking sockets, so a slow or idle client never keeps `tprof ctl` from
//! its answer.
//!
//! - Every connection has a deadline: [`READ_DEADLINE`] from accept to a complete request line, then
//!   [`WRITE_DEADLINE`] to take the reply (a `dump` first waits up to [`DUMP_WAIT`] for the writer's
//!   commit, without blocking the other connections). Past it the connection is closed.
//! - Past [`MAX_CONNECTIONS`] the oldest connection that has not sent its request is closed (else the
//!   oldest): 100 idle connections cost one slot each for a moment, not the service.
//! - The connection table and the request buffers are allocated once when the loop starts; a request
//!   allocates only its reply.
//!
//! What a request does is the caller's (`control_socket`): [`serve`] takes the peer-uid check and the
//! request executor as functions.

use std::io::{ErrorKind, Read};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 16;
/// Longest request line, bytes (a request is one short line).
pub const REQUEST_MAX: usize = 1024;
/// From accept to a complete request line.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);
/// From a reply ready to the reply taken.
pub const WRITE_DEADLINE: Duration = Duration::from_secs(1);
/// Longest wait for the writer thread to commit a requested dump.
pub const DUMP_WAIT: Duration = Duration::from_secs(2);

/// What a request asks of the server loop.
pub enum Outcome {
    /// Send this reply.
    Reply(String),
    /// Wait until the dump with this sequence number is committed (`done()` reaches it), then reply
    /// `ok dumped`.
    AwaitDump(u64),
}

/// The functions [`serve`] calls.
pub struct Handlers {
    /// Whether a connection from this peer may control the process: None = yes, Some(reply) = no.
    pub refuse: fn(&UnixStream) -> Option<String>,
    /// Runs one request line.
    pub execute: fn(&str) -> Outcome,
    /// The highest committed dump sequence number.
    pub dumps_done: fn() -> u64,
}

enum Phase {
    Reading,
    Dumping(u64),
    Writing { reply: Vec<u8>, sent: usize },
}

struct Connection {
    stream: UnixStream,
    accepted: Instant,
    deadline: Instant,
    refusal: Option<String>,
    buf: [u8; REQUEST_MAX],
    len: usize,
    phase: Phase,
}

impl Connection {
    fn reply(&mut self, text: String, now: Instant) {
        self.phase = Phase::Writing { reply: text.into_bytes(), sent: 0 };
        self.deadline = now + WRITE_DEADLINE;
    }

    /// Reads what is there; when the line is complete, runs it. False: close the connection.
    fn read_ready(&mut self, h: &Handlers, now: Instant) -> bool {
        loop {
            let Some(room) = self.buf.get_mut(self.len..) else { return false };
            if room.is_empty() {
                self.reply(format!("error: request longer than {REQUEST_MAX} bytes\n"), now);
                return true;
            }
            match self.stream.read(room) {
                Ok(0) if self.len == 0 => return false,
                Ok(0) => break,
                Ok(n) => {
                    let start = self.len;
                    self.len += n;
                    if self.buf[start..self.len].contains(&b'\n') {
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return true,
                Err(_) => return false,
            }
        }
        // The line is complete (newline or end of input).
        let end = self.buf[..self.len].iter().position(|&b| b == b'\n').unwrap_or(self.len);
        if let Some(refusal) = self.refusal.take() {
            self.reply(refusal, now);
            return true;
        }
        let outcome = match std::str::from_utf8(&self.buf[..end]) {
            Ok(line) => (h.execute)(line.trim()),
            Err(_) => Outcome::Reply("error: the request is not UTF-8\n".into()),
        };
        match outcome {
            Outcome::Reply(text) => self.reply(text, now),
            Outcome::AwaitDump(seq) => {
                self.phase = Phase::Dumping(seq);
                self.deadline = now + DUMP_WAIT;
            }
        }
        true
    }

    /// Sends what the socket takes. False: close the connection (done or failed).
    fn write_ready(&mut self) -> bool {
        let Phase::Writing { reply, sent } = &mut self.phase else { return true };
        while let Some(rest) = reply.get(*sent..).filter(|r| !r.is_empty()) {
            // MSG_NOSIGNAL: a client that hung up must not raise SIGPIPE in the host program.
            // SAFETY: sends from a live slice of `rest.len()` bytes on a socket this connection owns.
            let n =
                unsafe { libc::send(self.stream.as_raw_fd(), rest.as_ptr().cast(), rest.len(), libc::MSG_NOSIGNAL) };
            if n > 0 {
                *sent += n as usize;
                continue;
            }
            let e = std::io::Error::last_os_error();
            match e.kind() {
                ErrorKind::Interrupted if n < 0 => continue,
                ErrorKind::WouldBlock if n < 0 => return true,
                _ => return false,
            }
        }
        false
    }

    /// Deadlines and finished dumps. False: close the connection.
    fn tick(&mut self, h: &Handlers, now: Instant) -> bool {
        if let Phase::Dumping(seq) = self.phase {
            if (h.dumps_done)() >= seq {
                self.reply("ok dumped\n".into(), now);
                return true;
            }
            if now >= self.deadline {
                let text = format!("error: the ring writer did not commit within {} s\n", DUMP_WAIT.as_secs());
                self.reply(text, now);
                return true;
            }
            return true;
        }
        now < self.deadline
    }

    fn events(&self) -> libc::c_short {
        match self.phase {
            Phase::Reading => libc::POLLIN,
            Phase::Dumping(_) => 0,
            Phase::Writing { .. } => libc::POLLOUT,
        }
    }
}

/// Serves `listener` forever (the calling thread is the control thread).
pub fn serve(listener: UnixListener, h: Handlers) {
    if listener.set_nonblocking(true).is_err() {
        return;
    }
    let mut conns: Vec<Connection> = Vec::with_capacity(MAX_CONNECTIONS);
    let mut fds = [libc::pollfd { fd: -1, events: 0, revents: 0 }; MAX_CONNECTIONS + 1];
    loop {
        let now = Instant::now();
        conns.retain_mut(|c| c.tick(&h, now));
        let mut timeout_ms: libc::c_int = -1;
        fds[0] = libc::pollfd { fd: listener.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        for (slot, c) in fds[1..].iter_mut().zip(conns.iter()) {
            *slot = libc::pollfd { fd: c.stream.as_raw_fd(), events: c.events(), revents: 0 };
            let wait = if matches!(c.phase, Phase::Dumping(_)) {
                1
            } else {
                c.deadline.saturating_duration_since(now).as_millis().min(60_000) as libc::c_int + 1
            };
            timeout_ms = if timeout_ms < 0 { wait } else { timeout_ms.min(wait) };
        }
        let n = conns.len() + 1;
        // SAFETY: `fds` holds `n` <= MAX_CONNECTIONS + 1 initialised pollfd entries we own; poll only
        // writes their `revents`.
        let rc = unsafe { libc::poll(fds.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
        if rc < 0 {
            if std::io::Error::last_os_error().kind() != ErrorKind::Interrupted {
                std::thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        let now = Instant::now();
        // Connections first (their pollfd slots match the table's order), then new ones.
        let mut i = 0;
        let mut slot = 1;
        while i < conns.len() {
            let revents = fds[slot].revents;
            slot += 1;
            let c = &mut conns[i];
            let keep = if revents & (libc::POLLERR | libc::POLLNVAL) != 0 {
                false
            } else if revents & (libc::POLLIN | libc::POLLHUP) != 0 && matches!(c.phase, Phase::Reading) {
                c.read_ready(&h, now) && (!matches!(c.phase, Phase::Writing { .. }) || c.write_ready())
            } else if revents & libc::POLLOUT != 0 {
                c.write_ready()
            } else {
                revents & libc::POLLHUP == 0
            };
            if keep {
                i += 1;
            } else {
                conns.remove(i);
            }
        }
        if fds[0].revents & libc::POLLIN != 0 {
            accept_all(&listener, &mut conns, &h, now);
        }
    }
}

fn accept_all(listener: &UnixListener, conns: &mut Vec<Connection>, h: &Handlers, now: Instant) {
    loop {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        if stream.set_nonblocking(true).is_err() {
            continue;
        }
        if conns.len() >= MAX_CONNECTIONS {
            let victim = conns
                .iter()
                .enumerate()
                .filter(|(_, c)| matches!(c.phase, Phase::Reading))
                .min_by_key(|(_, c)| c.accepted)
                .map(|(i, _)| i)
                .unwrap_or(0);
            conns.remove(victim);
        }
        let refusal = (h.refuse)(&stream);
        conns.push(Connection {
            stream,
            accepted: now,
            deadline: now + READ_DEADLINE,
            refusal,
            buf: [0; REQUEST_MAX],
            len: 0,
            phase: Phase::Reading,
        });
    }
}
