//! The crash-tolerant ring writer.
//!
//! One writer per file, used from one thread (the shim's writer thread). Records are encoded straight
//! into the mmap'd chunk; [`RingWriter::commit`] publishes what was written with one atomic store of the
//! chunk's commit word, so a process killed at any instant leaves every committed record readable.
//! When the ring is full the oldest chunk is recycled (the reader then starts at the oldest valid one).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use memmap2::MmapMut;

use crate::chunk::{commit_word, CHUNK_HEADER_BYTES, CHUNK_MAGIC, COMMIT_OFFSET};
use crate::codec::{encode_into, encode_string_into, encode_window, DeltaState, WINDOW};
use crate::header::{flags, off, FileHeader, FORMAT_VERSION, HEADER_BYTES};
use crate::record::{Record, StrId};

/// Sizes of the regions of a ring file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingGeometry {
    pub chunk_bytes: u32,
    pub chunk_count: u32,
    pub dict_bytes: u64,
}

impl RingGeometry {
    /// Default chunk size: small enough that a commit every 100 ms rewrites little, large enough that
    /// the 32-byte chunk header is noise.
    pub const DEFAULT_CHUNK_BYTES: u32 = 64 * 1024;

    /// A geometry for a file of about `total_bytes` (minimum 2 chunks): 1/32 of it (at least 64 KiB,
    /// at most 16 MiB) for the string dictionary, the rest for chunks.
    pub fn for_total_bytes(total_bytes: u64) -> RingGeometry {
        Self::with_chunk_bytes(total_bytes, Self::DEFAULT_CHUNK_BYTES)
    }

    /// Like [`RingGeometry::for_total_bytes`] with a chosen chunk size (rounded to 8 bytes, at least 4 KiB).
    pub fn with_chunk_bytes(total_bytes: u64, chunk_bytes: u32) -> RingGeometry {
        let chunk_bytes = (chunk_bytes.max(4096) + 7) & !7;
        let dict_bytes = ((total_bytes / 32).clamp(64 * 1024, 16 << 20) + 7) & !7;
        let ring = total_bytes.saturating_sub(HEADER_BYTES as u64 + dict_bytes);
        let chunk_count = (ring / u64::from(chunk_bytes)).clamp(2, u64::from(u32::MAX)) as u32;
        RingGeometry { chunk_bytes, chunk_count, dict_bytes }
    }

    pub fn ring_offset(&self) -> u64 {
        HEADER_BYTES as u64 + self.dict_bytes
    }

    pub fn file_bytes(&self) -> u64 {
        self.ring_offset() + u64::from(self.chunk_bytes) * u64::from(self.chunk_count)
    }
}

/// Why a ring file could not be created.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("cannot create {path}: {source}")]
    Open { path: PathBuf, source: io::Error },
    #[error("cannot reserve {bytes} bytes for {path}: {source}")]
    Reserve { path: PathBuf, bytes: u64, source: io::Error },
    #[error("{path}: the file-size limit (ulimit -f) is {limit} bytes, the ring needs {bytes}")]
    FileSizeLimit { path: PathBuf, bytes: u64, limit: u64 },
    #[error("cannot map {path}: {source}")]
    Map { path: PathBuf, source: io::Error },
}

/// Creates `path` owner-only (0600), exclusively (`O_EXCL`), never following a symlink (`O_NOFOLLOW`).
pub fn create_private_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// The soft file-size limit of this process, if any.
pub fn file_size_limit() -> Option<u64> {
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes into the struct we pass; RLIMIT_FSIZE is a valid resource.
    let rc = unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) };
    if rc == 0 && lim.rlim_cur != libc::RLIM_INFINITY {
        Some(lim.rlim_cur)
    } else {
        None
    }
}

/// Writes one ring file. Not `Sync`: owned by a single writer thread.
pub struct RingWriter {
    map: MmapMut,
    path: PathBuf,
    geom: RingGeometry,
    /// Sequence number of the open chunk (valid when `chunk_open`).
    seq: u64,
    chunk_open: bool,
    chunk_off: usize,
    used: usize,
    committed: usize,
    hasher: crc32fast::Hasher,
    delta: DeltaState,
    last_clock_sync: Option<Record>,
    dict_used: usize,
    flags: u64,
    events: u64,
    dropped_too_large: u64,
}

impl RingWriter {
    /// Creates the file and writes its header. The header's geometry and version fields are set here.
    pub fn create(path: &Path, mut header: FileHeader, geom: RingGeometry) -> Result<RingWriter, CreateError> {
        let bytes = geom.file_bytes();
        if let Some(limit) = file_size_limit() {
            if limit < bytes {
                return Err(CreateError::FileSizeLimit { path: path.into(), bytes, limit });
            }
        }
        let file = create_private_file(path).map_err(|source| CreateError::Open { path: path.into(), source })?;
        let reserve = |source| {
            let _ = std::fs::remove_file(path);
            CreateError::Reserve { path: path.into(), bytes, source }
        };
        // Reserve the blocks now: writing into a sparse mapping on a full disk would raise SIGBUS.
        // SAFETY: fd is a valid, open, writable descriptor; offsets are in range.
        let rc = unsafe { libc::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(&file), 0, bytes as libc::off_t) };
        match rc {
            0 => {}
            libc::EOPNOTSUPP | libc::EINVAL => file.set_len(bytes).map_err(reserve)?,
            e => return Err(reserve(io::Error::from_raw_os_error(e))),
        }
        // SAFETY: the file was just created by us with O_EXCL, is private (0600) and sized to `bytes`;
        // nobody else truncates it while mapped.
        let mut map =
            unsafe { MmapMut::map_mut(&file) }.map_err(|source| CreateError::Map { path: path.into(), source })?;
        header.version = FORMAT_VERSION;
        header.little_endian = cfg!(target_endian = "little");
        header.pointer_size = std::mem::size_of::<usize>() as u8;
        header.chunk_bytes = geom.chunk_bytes;
        header.chunk_count = geom.chunk_count;
        header.dict_offset = HEADER_BYTES as u64;
        header.dict_bytes = geom.dict_bytes;
        header.ring_offset = geom.ring_offset();
        header.write_page(&mut map[..HEADER_BYTES]);
        Ok(RingWriter {
            map,
            path: path.into(),
            geom,
            seq: 0,
            chunk_open: false,
            chunk_off: 0,
            used: 0,
            committed: 0,
            hasher: crc32fast::Hasher::new(),
            delta: DeltaState::default(),
            last_clock_sync: None,
            dict_used: 0,
            flags: 0,
            events: 0,
            dropped_too_large: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn geometry(&self) -> RingGeometry {
        self.geom
    }

    /// Records appended so far.
    pub fn events_written(&self) -> u64 {
        self.events
    }

    fn atomic_u64(&self, offset: usize) -> &AtomicU64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.map.len());
        // SAFETY: the offset is 8-aligned inside the live mapping (page-aligned base), and every access
        // to these words goes through atomics while the map lives.
        unsafe { AtomicU64::from_ptr(self.map.as_ptr().add(offset) as *mut u64) }
    }

    fn store_live(&self, offset: usize, v: u64) {
        self.atomic_u64(offset).store(v, Ordering::Release);
    }

    fn capacity(&self) -> usize {
        self.geom.chunk_bytes as usize - CHUNK_HEADER_BYTES
    }

    fn open_chunk(&mut self, base_ticks: u64) {
        let slot = (self.seq % u64::from(self.geom.chunk_count)) as usize;
        let off = self.geom.ring_offset() as usize + slot * self.geom.chunk_bytes as usize;
        self.chunk_off = off;
        // Invalidate the slot first: a reader must never see the new header with the old payload.
        self.atomic_u64(off + COMMIT_OFFSET).store(0, Ordering::Release);
        let seq = self.seq;
        let hdr = &mut self.map[off..off + CHUNK_HEADER_BYTES];
        hdr[0..4].copy_from_slice(&CHUNK_MAGIC);
        hdr[4..8].fill(0);
        hdr[16..24].copy_from_slice(&seq.to_le_bytes());
        hdr[24..32].copy_from_slice(&base_ticks.to_le_bytes());
        self.hasher = crc32fast::Hasher::new();
        self.hasher.update(&self.map[off + 16..off + 32]);
        self.used = 0;
        self.committed = 0;
        self.delta = DeltaState::at_chunk_start(base_ticks);
        self.chunk_open = true;
        if seq >= u64::from(self.geom.chunk_count) && self.flags & flags::WRAPPED == 0 {
            self.flags |= flags::WRAPPED;
            self.store_live(off::LIVE_FLAGS, self.flags);
        }
        self.store_live(off::LIVE_NEXT_SEQ, seq + 1);
        // Every chunk starts with a clock pair, so any surviving chunk can be placed in time.
        if let Some(sync) = self.last_clock_sync {
            self.try_encode(&sync);
        }
    }

    fn seal_chunk(&mut self) {
        if self.chunk_open {
            self.commit_chunk();
            self.chunk_open = false;
            self.seq += 1;
        }
    }

    fn try_encode(&mut self, rec: &Record) -> bool {
        let start = self.chunk_off + CHUNK_HEADER_BYTES + self.used;
        let end = self.chunk_off + self.geom.chunk_bytes as usize;
        match encode_into(rec, &mut self.delta, &mut self.map[start..end]) {
            Some(n) => {
                self.used += n;
                true
            }
            None => false,
        }
    }

    /// Appends one record (not yet committed).
    pub fn append(&mut self, rec: &Record) {
        let is_sync = matches!(rec, Record::ClockSync { .. });
        if is_sync {
            // A chunk opened for this very pair needs no copy of the previous one.
            self.last_clock_sync = None;
        }
        if !self.chunk_open {
            self.open_chunk(rec.timestamp().unwrap_or(0));
        }
        if is_sync {
            self.last_clock_sync = Some(*rec);
        }
        if self.try_encode(rec) {
            self.events += 1;
            return;
        }
        self.seal_chunk();
        self.open_chunk(rec.timestamp().unwrap_or(0));
        if self.try_encode(rec) {
            self.events += 1;
        } else {
            self.dropped_too_large += 1;
        }
    }

    /// Appends records in order: the same bytes as [`RingWriter::append`] on each, with the chunk's state
    /// kept in registers while records go into the open chunk.
    pub fn append_all(&mut self, recs: &[Record]) {
        self.append_each(|sink| recs.iter().for_each(|rec| sink.push(rec)));
    }

    /// Appends the records `produce` pushes into the [`RecordSink`] it is given, each encoded as it is
    /// pushed (the same bytes as [`RingWriter::append`] on each): a caller that makes records from
    /// something else (the shim's launches) stores them nowhere first, and a record built where it is
    /// pushed is encoded with what is known of it (its type, constant fields) folded in.
    #[inline(always)]
    pub fn append_each(&mut self, produce: impl FnOnce(&mut RecordSink<'_>)) {
        let mut sink = RecordSink { used: self.used, delta: self.delta, written: 0, ring: self };
        produce(&mut sink);
        sink.hand_back();
    }

    /// Defines a string: in the dictionary region while it has room, else inline in the ring.
    pub fn define_string(&mut self, id: StrId, text: &str) {
        let text = text.as_bytes();
        let text = &text[..text.len().min(64 * 1024)];
        if self.flags & flags::DICT_FULL == 0 && self.dict_append(id, text) {
            return;
        }
        if self.flags & flags::DICT_FULL == 0 {
            self.flags |= flags::DICT_FULL;
            self.store_live(off::LIVE_FLAGS, self.flags);
        }
        if !self.chunk_open {
            self.open_chunk(0);
        }
        let cap = self.capacity();
        let start = self.chunk_off + CHUNK_HEADER_BYTES + self.used;
        let end = self.chunk_off + self.geom.chunk_bytes as usize;
        if let Some(n) = encode_string_into(id, text, &mut self.map[start..end]) {
            self.used += n;
            return;
        }
        self.seal_chunk();
        self.open_chunk(0);
        let start = self.chunk_off + CHUNK_HEADER_BYTES + self.used;
        let end = self.chunk_off + self.geom.chunk_bytes as usize;
        let text = &text[..text.len().min(cap.saturating_sub(32))];
        if let Some(n) = encode_string_into(id, text, &mut self.map[start..end]) {
            self.used += n;
        }
    }

    /// Dictionary entry: `[len u32][crc u32][varint id + bytes]`, 4-byte aligned; `len` is stored last.
    fn dict_append(&mut self, id: StrId, text: &[u8]) -> bool {
        let mut idbuf = [0u8; 10];
        let mut n = 0;
        crate::varint::put_u64(&mut idbuf, &mut n, id.0.into());
        let len = n + text.len();
        let entry = (8 + len + 3) & !3;
        let base = HEADER_BYTES + self.dict_used;
        // Keep 4 zero bytes after the last entry as the terminator.
        if self.dict_used + entry + 4 > self.geom.dict_bytes as usize {
            return false;
        }
        let p = base + 8;
        self.map[p..p + n].copy_from_slice(&idbuf[..n]);
        self.map[p + n..p + len].copy_from_slice(text);
        let crc = crc32fast::hash(&self.map[p..p + len]);
        self.map[base + 4..base + 8].copy_from_slice(&crc.to_le_bytes());
        // SAFETY: `base` is 4-aligned (entries are padded to 4) inside the mapping; the length word is
        // only ever accessed atomically by the writer, and published last.
        let len_word = unsafe { AtomicU32::from_ptr(self.map.as_mut_ptr().add(base) as *mut u32) };
        len_word.store(len as u32, Ordering::Release);
        self.dict_used += entry;
        self.store_live(off::LIVE_DICT_USED, self.dict_used as u64);
        true
    }

    fn commit_chunk(&mut self) {
        if !self.chunk_open || self.used == 0 {
            return;
        }
        if self.used != self.committed {
            let start = self.chunk_off + CHUNK_HEADER_BYTES;
            self.hasher.update(&self.map[start + self.committed..start + self.used]);
            self.committed = self.used;
        }
        let crc = self.hasher.clone().finalize();
        self.atomic_u64(self.chunk_off + COMMIT_OFFSET).store(commit_word(self.used as u32, crc), Ordering::Release);
    }

    /// Publishes everything appended so far. `now_ticks` is recorded as the last commit time.
    pub fn commit(&mut self, now_ticks: u64) {
        self.commit_chunk();
        self.store_live(off::LIVE_EVENTS, self.events);
        self.store_live(off::LIVE_LAST_COMMIT_TICKS, now_ticks);
    }

    /// Records the shim's total dropped-event count in the header.
    pub fn set_dropped(&self, total: u64) {
        self.store_live(off::LIVE_DROPPED, total + self.dropped_too_large);
    }

    /// Records CUPTI's total dropped-record count in the header.
    pub fn set_cupti_dropped(&self, total: u64) {
        self.store_live(off::LIVE_CUPTI_DROPPED, total);
    }

    /// Sets header flag bits (see [`crate::header::flags`]).
    pub fn set_flags(&mut self, bits: u64) {
        self.flags |= bits;
        self.store_live(off::LIVE_FLAGS, self.flags);
    }

    /// Commits, marks the file cleanly closed and asks the kernel to write it out.
    pub fn close(mut self, now_ticks: u64) -> io::Result<()> {
        self.commit(now_ticks);
        self.set_flags(flags::CLEAN_CLOSE);
        self.map.flush_async()
    }

    /// Asks the kernel to start writing dirty pages (not needed for crash safety against SIGKILL).
    pub fn flush_async(&self) -> io::Result<()> {
        self.map.flush_async()
    }
}

/// Where [`RingWriter::append_each`]'s producer pushes records: the open chunk's fill and delta state
/// kept here (in registers) while records go into it, the writer's own state brought up to date
/// before anything else (a clock pair, a full chunk) takes [`RingWriter::append`].
pub struct RecordSink<'a> {
    ring: &'a mut RingWriter,
    used: usize,
    delta: DeltaState,
    written: u64,
}

impl RecordSink<'_> {
    /// Appends one record (not yet committed).
    #[inline(always)]
    pub fn push(&mut self, rec: &Record) {
        let ring = &mut *self.ring;
        if ring.chunk_open && !matches!(rec, Record::ClockSync { .. }) {
            let start = ring.chunk_off + CHUNK_HEADER_BYTES + self.used;
            let end = ring.chunk_off + ring.geom.chunk_bytes as usize;
            // The last bytes of a chunk take the general path.
            if let Some(window) = ring.map.get_mut(start..end).and_then(|o| o.first_chunk_mut::<WINDOW>()) {
                self.used += encode_window(rec, &mut self.delta, window);
                self.written += 1;
                return;
            }
        }
        self.push_general(rec);
    }

    #[inline(never)]
    fn push_general(&mut self, rec: &Record) {
        self.hand_back();
        self.ring.append(rec);
        self.used = self.ring.used;
        self.delta = self.ring.delta;
    }

    /// The chunk's state back into the writer.
    #[inline(always)]
    fn hand_back(&mut self) {
        if self.ring.chunk_open {
            self.ring.used = self.used;
            self.ring.delta = self.delta;
        }
        self.ring.events += self.written;
        self.written = 0;
    }
}
