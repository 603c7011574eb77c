//! The bytes of a Kineto trace as a sliding window: a plain file read in chunks, or a `.json.gz`
//! gunzipped on its own thread (gunzip and parse overlap) and handed over in chunks through a
//! bounded channel (the chunks go back to the gunzip thread to be filled again). Only the window is
//! held: memory does not grow with the file, and the window's bytes are allocated once.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use crate::error::InputError;

/// Bytes read (or gunzipped) at a time.
const CHUNK: usize = 1 << 20;
/// Gunzipped chunks in flight between the two threads.
const CHANNEL_CHUNKS: usize = 4;

enum Feed {
    Plain(File),
    /// Chunks from the gunzip thread; an `Err` ends the stream (the gzip damage, said once). Used
    /// chunks go back on the second channel.
    Gunzip(Chunks, SyncSender<Vec<u8>>),
}

/// Gunzipped chunks, or the gzip damage that ended the stream.
type Chunks = Receiver<Result<Vec<u8>, String>>;

/// A window [`Window::data`] onto the JSON text: `data()[0]` is byte `base` of it, parsing is at `pos`.
pub(super) struct Window {
    /// The window's bytes are `buf[..len]`; the rest is room for the next read (kept, not zeroed again).
    buf: Vec<u8>,
    len: usize,
    pub pos: usize,
    /// Where the last parse attempt began (kept in step when [`Window::fill`] moves the bytes).
    pub mark: usize,
    base: u64,
    eof: bool,
    feed: Feed,
    /// Whether the file was gzipped (offsets are then in the gunzipped text).
    pub gzipped: bool,
    /// The gzip damage that ended the stream early, if any.
    pub gzip_error: Option<String>,
}

impl Window {
    pub fn open(path: &Path) -> Result<Window, InputError> {
        let mut file = File::open(path).map_err(|e| InputError::io(path, e))?;
        let mut magic = [0u8; 2];
        let n = read_full(&mut file, &mut magic).map_err(|e| InputError::io(path, e))?;
        let gzipped = n == 2 && magic == [0x1f, 0x8b];
        let mut buf = Vec::new();
        let feed = if gzipped {
            let file = File::open(path).map_err(|e| InputError::io(path, e))?;
            let (rx, back) = spawn_gunzip(file);
            Feed::Gunzip(rx, back)
        } else {
            buf.extend_from_slice(&magic[..n]);
            Feed::Plain(file)
        };
        let len = buf.len();
        Ok(Window { buf, len, pos: 0, mark: 0, base: 0, eof: false, feed, gzipped, gzip_error: None })
    }

    /// The bytes of the window.
    pub fn data(&self) -> &[u8] {
        &self.buf[..self.len]
    }

    /// Bytes in the window.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The bytes not parsed yet.
    pub fn rest(&self) -> &[u8] {
        &self.buf[self.pos..self.len]
    }

    /// Offset in the JSON text of `data[i]`.
    pub fn offset_of(&self, i: usize) -> u64 {
        self.base + i as u64
    }

    pub fn at_eof(&self) -> bool {
        self.eof
    }

    /// Bytes of the JSON text seen so far.
    pub fn bytes_seen(&self) -> u64 {
        self.base + self.len as u64
    }

    /// Drops the bytes before `pos` and appends the next chunk; false at the end of the text.
    pub fn fill(&mut self, path: &Path) -> Result<bool, InputError> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.buf.copy_within(self.pos..self.len, 0);
            self.len -= self.pos;
            self.base += self.pos as u64;
            self.pos = 0;
        }
        let len = self.len;
        match &mut self.feed {
            Feed::Plain(f) => {
                if self.buf.len() < len + CHUNK {
                    self.buf.resize(len + CHUNK, 0);
                }
                let n = read_full(f, &mut self.buf[len..len + CHUNK]).map_err(|e| InputError::io(path, e))?;
                self.len = len + n;
                if n == 0 {
                    self.eof = true;
                }
            }
            Feed::Gunzip(rx, back) => match rx.recv() {
                Ok(Ok(chunk)) => {
                    if self.buf.len() < len + chunk.len() {
                        self.buf.resize(len + chunk.len(), 0);
                    }
                    self.buf[len..len + chunk.len()].copy_from_slice(&chunk);
                    self.len = len + chunk.len();
                    let _ = back.try_send(chunk);
                }
                Ok(Err(e)) => {
                    self.gzip_error = Some(e);
                    self.eof = true;
                }
                Err(_) => self.eof = true,
            },
        }
        Ok(!self.eof)
    }
}

fn read_full(f: &mut File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// Gunzips `file` (all members) on a thread of its own, into the chunks that come back (new ones
/// while none has); it stops when the receiver is dropped.
fn spawn_gunzip(file: File) -> (Chunks, SyncSender<Vec<u8>>) {
    let (tx, rx) = sync_channel(CHANNEL_CHUNKS);
    let (back, used) = sync_channel::<Vec<u8>>(CHANNEL_CHUNKS + 2);
    std::thread::spawn(move || {
        let mut gz = flate2::read::MultiGzDecoder::new(std::io::BufReader::with_capacity(CHUNK, file));
        loop {
            let mut chunk = used.try_recv().unwrap_or_default();
            chunk.resize(CHUNK, 0);
            let mut n = 0;
            let mut failed = None;
            while n < CHUNK {
                match gz.read(&mut chunk[n..]) {
                    Ok(0) => break,
                    Ok(k) => n += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        failed = Some(e.to_string());
                        break;
                    }
                }
            }
            chunk.truncate(n);
            if n > 0 && tx.send(Ok(chunk)).is_err() {
                return;
            }
            if let Some(e) = failed {
                let _ = tx.send(Err(e));
                return;
            }
            if n < CHUNK {
                return;
            }
        }
    });
    (rx, back)
}
