//! The damage-tolerant ring reader.
//!
//! Opening a file validates the header (a damaged one is recovered from the chunks, see
//! `header_recovery`; fatal only when no intact chunk is found), walks the string dictionary and classifies
//! every chunk slot. Everything intact is decoded; everything damaged is reported as a [`Damage`] with
//! its byte offset. Reading never panics on any input. The pages of a mapped file leave the process's
//! resident set behind every pass over the chunks (see [`crate::pages`]), so that a whole ring is
//! never resident at once.

use std::ops::Range;
use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::chunk::{inspect, ChunkState, CHUNK_HEADER_BYTES};
use crate::clock::TickConverter;
use crate::codec::{
    decode_checked_with, decode_one, decode_window_frame, peek_frame, CodecError, Decoded, DecodedVisitor, DeltaState,
    WINDOW,
};
use crate::error::{FileError, FormatError};
use crate::header::{FileHeader, LiveStats, HEADER_BYTES};
use crate::header_recovery::{self, ScannedChunk};
use crate::pages::{Behind, Bytes};
use crate::record::{type_code, Record, StrId};
use crate::strings::StringTable;

/// Damage found in a file: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub offset: u64,
    pub what: String,
}

impl std::fmt::Display for Damage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "offset {}: {}", self.offset, self.what)
    }
}

/// A committed, intact chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkRef {
    pub seq: u64,
    pub slot: u32,
    /// File offset of the chunk header.
    pub offset: u64,
    pub base_ticks: u64,
    /// Committed payload bytes.
    pub len: u32,
}

/// An open ring file.
pub struct RingReader {
    path: PathBuf,
    bytes: Bytes,
    header: FileHeader,
    stats: LiveStats,
    damage: Vec<Damage>,
    chunks: Vec<ChunkRef>,
    strings: StringTable,
    empty_slots: u32,
    /// Every `ClockSync` pair, in sequence order.
    syncs: Vec<(u64, u64, u64)>,
}

impl RingReader {
    /// Opens and validates a ring file (memory-mapped).
    pub fn open(path: &Path) -> Result<RingReader, FileError> {
        use std::os::unix::fs::OpenOptionsExt;
        let err = |source| FileError { path: path.into(), source };
        // Non-blocking, so that opening a FIFO does not wait for a writer; refused just below.
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
            .open(path)
            .map_err(|e| err(e.into()))?;
        let meta = file.metadata().map_err(|e| err(e.into()))?;
        if meta.is_dir() {
            return Err(err(FormatError::IsDirectory));
        }
        if !meta.is_file() {
            let what = format!("is {}, not a regular file: ring files are regular files", special_kind(&meta));
            return Err(err(FormatError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, what))));
        }
        let bytes = if meta.len() == 0 {
            Bytes::Owned(Vec::new())
        } else {
            // SAFETY: read-only private mapping of a regular file. A ring being written concurrently only
            // changes bytes in place (never shrinks), which the checksums make harmless.
            Bytes::Mapped(unsafe { Mmap::map(&file) }.map_err(|e| err(e.into()))?)
        };
        Self::from_bytes_inner(path.into(), bytes).map_err(err)
    }

    /// Reads a ring file image from memory (tests, fuzzing, pipes).
    pub fn from_bytes(path: &Path, data: Vec<u8>) -> Result<RingReader, FileError> {
        Self::from_bytes_inner(path.into(), Bytes::Owned(data))
            .map_err(|source| FileError { path: path.into(), source })
    }

    fn from_bytes_inner(path: PathBuf, bytes: Bytes) -> Result<RingReader, FormatError> {
        let data = bytes.as_slice();
        let file_len = data.len() as u64;
        let page = &data[..data.len().min(HEADER_BYTES)];
        let (header, stats, mut damage, scanned) = match FileHeader::parse(page, file_len) {
            Ok((header, stats, problems)) => {
                let damage = problems.into_iter().map(|(offset, what)| Damage { offset, what }).collect();
                (header, stats, damage, None)
            }
            Err(e) if header_recovery::worth_recovering(page, &e) => match header_recovery::recover(data, &e) {
                Some(r) => (r.header, r.stats, r.damage, r.scanned),
                None => return Err(e),
            },
            Err(e) => return Err(e),
        };
        if file_len < header.file_bytes() {
            damage.push(Damage {
                offset: file_len,
                what: format!(
                    "file truncated: {} bytes, the header says {}; the regions past this offset are lost",
                    file_len,
                    header.file_bytes()
                ),
            });
        }
        // The dictionary and the chunks are read once here: their pages are released behind the scan.
        let (strings, chunks, empty_slots, syncs) = {
            let mut behind = Behind::new(&bytes);
            let mut strings = StringTable::default();
            read_dictionary(data, &header, &mut strings, &mut damage);
            let dict_end = header.dict_offset.saturating_add(header.dict_bytes).min(file_len) as usize;
            behind.done((header.dict_offset.min(file_len) as usize)..dict_end);
            let (chunks, empty_slots, syncs) = match scanned {
                None => scan_chunks(data, &header, &mut damage, &mut behind),
                Some(found) => {
                    // The recovery scan read the whole file; the clock syncs are read again.
                    behind.done(dict_end..data.len());
                    let chunks = scanned_chunks(&header, &found, &mut damage);
                    let mut syncs = Vec::new();
                    for c in &chunks {
                        clock_syncs_in(payload_of(data, c), &mut syncs);
                        behind.done(slot_range(data, &header, c));
                    }
                    (chunks, 0, syncs)
                }
            };
            (strings, chunks, empty_slots, syncs)
        };
        Ok(RingReader { path, bytes, header, stats, damage, chunks, strings, empty_slots, syncs })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// The live counters (drops, flags) as the writer last left them.
    pub fn stats(&self) -> LiveStats {
        self.stats
    }

    /// Damage found while opening (header, dictionary, chunks). Decoding may find more: see
    /// [`RingReader::records`].
    pub fn damage(&self) -> &[Damage] {
        &self.damage
    }

    /// The string table from the dictionary region. Inline strings in the ring arrive as
    /// [`Decoded::String`] while iterating; [`RingReader::all_strings`] collects both.
    pub fn strings(&self) -> &StringTable {
        &self.strings
    }

    /// Dictionary strings plus every inline string definition in the ring (one pass over the chunks).
    pub fn all_strings(&self) -> StringTable {
        let mut table = self.strings.clone();
        let mut behind = Behind::new(&self.bytes);
        for chunk in &self.chunks {
            let mut pos = 0usize;
            let payload = self.payload(chunk);
            while pos < payload.len() {
                let Ok((code, size)) = peek_frame(&payload[pos..]) else { break };
                if code == type_code::STRING {
                    let mut st = DeltaState::default();
                    if let Ok((Decoded::String { id, bytes }, _)) = decode_one(&payload[pos..], &mut st) {
                        table.insert(id, &String::from_utf8_lossy(bytes));
                    }
                }
                pos += size;
            }
            behind.done(self.slot_range(chunk));
        }
        table
    }

    /// Intact chunks in sequence order (oldest first).
    pub fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }

    /// Slots never written (or being recycled when the file was read).
    pub fn empty_slots(&self) -> u32 {
        self.empty_slots
    }

    fn payload(&self, c: &ChunkRef) -> &[u8] {
        payload_of(self.bytes.as_slice(), c)
    }

    fn slot_range(&self, c: &ChunkRef) -> Range<usize> {
        slot_range(self.bytes.as_slice(), &self.header, c)
    }

    /// Decodes one chunk.
    pub fn chunk_records(&self, chunk: &ChunkRef) -> ChunkRecords<'_> {
        ChunkRecords {
            payload: self.payload(chunk),
            pos: 0,
            delta: DeltaState::at_chunk_start(chunk.base_ticks),
            chunk_offset: chunk.offset,
            failed: false,
        }
    }

    /// Every chunk with its items, in sequence order, in one pass that releases each chunk's pages
    /// from the process's resident set once the walk has moved past it (see [`crate::pages`]): a
    /// whole ring is never resident at once. Items of a chunk passed may still be read: its pages
    /// fault in again.
    pub fn chunk_pass(&self) -> ChunkPass<'_> {
        ChunkPass { reader: self, chunks: self.chunks.iter(), behind: Behind::new(&self.bytes), current: None }
    }

    /// Every item in commit order. Decoding damage inside a chunk yields one `Err(Damage)` and skips the
    /// rest of that chunk; the next chunk decodes normally. One [`RingReader::chunk_pass`].
    pub fn records(&self) -> impl Iterator<Item = Result<Decoded<'_>, Damage>> + '_ {
        self.chunk_pass().flat_map(|(_, items)| items)
    }

    /// Every `ClockSync` pair in the file, in sequence order (found while the chunks were checked at
    /// open, while their bytes were at hand).
    pub fn clock_syncs(&self) -> Vec<(u64, u64, u64)> {
        self.syncs.clone()
    }

    /// A converter from this file's ticks to monotonic and wall-clock nanoseconds.
    pub fn tick_converter(&self) -> TickConverter {
        TickConverter::new(&self.header, self.clock_syncs())
    }

    /// Resolves a string id from the dictionary ("" for id 0, `<str#N>` when unknown).
    pub fn name(&self, id: StrId) -> std::borrow::Cow<'_, str> {
        self.strings.name(id)
    }
}

/// What a file that is neither regular nor a directory is ("a FIFO (named pipe)").
fn special_kind(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "a special file"
    }
}

/// A walk over the chunks in sequence order: see [`RingReader::chunk_pass`].
pub struct ChunkPass<'a> {
    reader: &'a RingReader,
    chunks: std::slice::Iter<'a, ChunkRef>,
    behind: Behind<'a>,
    /// The chunk handed out last, released once the walk moves on.
    current: Option<&'a ChunkRef>,
}

impl<'a> Iterator for ChunkPass<'a> {
    type Item = (&'a ChunkRef, ChunkRecords<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(c) = self.current.take() {
            self.behind.done(self.reader.slot_range(c));
        }
        let c = self.chunks.next()?;
        self.current = Some(c);
        Some((c, self.reader.chunk_records(c)))
    }
}

impl Drop for ChunkPass<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.current.take() {
            self.behind.done(self.reader.slot_range(c));
        }
    }
}

/// Iterator over one chunk's items.
pub struct ChunkRecords<'a> {
    payload: &'a [u8],
    pos: usize,
    delta: DeltaState,
    chunk_offset: u64,
    failed: bool,
}

impl<'a> ChunkRecords<'a> {
    /// Hands every item to `visit`: the items iterating yields, in the same order, each handed over
    /// where it is decoded (see [`crate::codec::decode_one_with`]: a record goes from its fields to the visitor's
    /// code for its type). Returns the damage that ended the chunk early, if any (iterating yields it
    /// as the last item).
    #[inline(always)]
    pub fn for_each_item<V: DecodedVisitor<'a, Out = ()>>(mut self, visit: &mut V) -> Option<Damage> {
        if self.failed {
            return None;
        }
        // The walk's state in locals (registers), back in `self` only for the damage report.
        let (payload, mut pos, mut delta) = (self.payload, self.pos, self.delta);
        while pos < payload.len() {
            // `decode_one_with`, its fast path's frames going round the loop straight away.
            let rest = &payload[pos..];
            if let Some(window) = rest.first_chunk::<WINDOW>() {
                if let Some(((), size)) = decode_window_frame(window, &mut delta, visit) {
                    pos += size;
                    continue;
                }
            }
            match decode_checked_with(rest, &mut delta, visit) {
                Ok(((), size)) => pos += size,
                Err(e) => {
                    self.pos = pos;
                    return Some(self.fail(e));
                }
            }
        }
        None
    }

    /// The damage of a frame that did not decode; the rest of the chunk is skipped.
    #[cold]
    fn fail(&mut self, e: CodecError) -> Damage {
        self.failed = true;
        let offset = self.chunk_offset + (CHUNK_HEADER_BYTES + self.pos) as u64;
        Damage {
            offset,
            what: format!("{e}; the remaining {} bytes of this chunk are skipped", self.payload.len() - self.pos),
        }
    }
}

impl<'a> Iterator for ChunkRecords<'a> {
    type Item = Result<Decoded<'a>, Damage>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.payload.len() {
            return None;
        }
        match decode_one(&self.payload[self.pos..], &mut self.delta) {
            Ok((item, size)) => {
                self.pos += size;
                Some(Ok(item))
            }
            Err(e) => Some(Err(self.fail(e))),
        }
    }
}

/// A committed chunk's payload.
fn payload_of<'d>(data: &'d [u8], c: &ChunkRef) -> &'d [u8] {
    let start = c.offset as usize + CHUNK_HEADER_BYTES;
    &data[start..start + c.len as usize]
}

/// The bytes of a chunk's slot (header, payload and the unused rest), which a pass is done with once
/// it has read the chunk.
fn slot_range(data: &[u8], h: &FileHeader, c: &ChunkRef) -> Range<usize> {
    let slot = u64::from(h.chunk_bytes).max(CHUNK_HEADER_BYTES as u64 + u64::from(c.len));
    c.offset as usize..(c.offset.saturating_add(slot) as usize).min(data.len())
}

/// Appends the `ClockSync` pairs of a chunk's payload to `out` (cheap: other records are skipped by
/// their frame length).
fn clock_syncs_in(payload: &[u8], out: &mut Vec<(u64, u64, u64)>) {
    let mut pos = 0usize;
    // Before this, a longest short frame still fits in what follows.
    let roomy = payload.len().saturating_sub(2 + 255);
    while pos < payload.len() {
        // Short frames of other types skipped by their length byte alone (no other check
        // while the frame surely lies inside the payload).
        if pos < roomy {
            // The rest of the payload as a slice, so that no index needs a check of its own.
            let mut rest = &payload[pos..];
            while rest.len() > 2 + 255 {
                let (code, len) = (rest[0], rest[1]);
                if code == type_code::CLOCK_SYNC || len == 0xff {
                    break;
                }
                rest = &rest[2 + usize::from(len)..];
            }
            pos = payload.len() - rest.len();
        }
        if let Some(&[code, len]) = payload.get(pos..pos + 2) {
            if code != type_code::CLOCK_SYNC && len != 0xff && pos + 2 + usize::from(len) <= payload.len() {
                pos += 2 + usize::from(len);
                continue;
            }
        }
        let Ok((code, size)) = peek_frame(&payload[pos..]) else { break };
        if code == type_code::CLOCK_SYNC {
            let mut st = DeltaState::default();
            if let Ok((Decoded::Record(Record::ClockSync { ticks, mono_ns, wall_ns }), _)) =
                decode_one(&payload[pos..], &mut st)
            {
                out.push((ticks, mono_ns, wall_ns));
            }
        }
        pos += size;
    }
}

fn read_dictionary(data: &[u8], h: &FileHeader, strings: &mut StringTable, damage: &mut Vec<Damage>) {
    let start = h.dict_offset as usize;
    let end = (h.dict_offset.saturating_add(h.dict_bytes) as usize).min(data.len());
    let mut pos = start;
    while pos + 8 <= end {
        let len = u32::from_le_bytes(data[pos..pos + 4].try_into().expect("4 bytes")) as usize;
        if len == 0 {
            return;
        }
        let crc = u32::from_le_bytes(data[pos + 4..pos + 8].try_into().expect("4 bytes"));
        let entry = (8 + len + 3) & !3;
        if pos + 8 + len > end {
            damage.push(Damage {
                offset: pos as u64,
                what: format!(
                    "string dictionary entry of {len} bytes runs past the dictionary; later strings are lost"
                ),
            });
            return;
        }
        let payload = &data[pos + 8..pos + 8 + len];
        if crc32fast::hash(payload) != crc {
            damage.push(Damage {
                offset: pos as u64,
                what: "string dictionary entry checksum mismatch; entry skipped".into(),
            });
        } else {
            let mut p = 0;
            match crate::varint::get_u64(payload, &mut p).and_then(|v| u32::try_from(v).ok()) {
                Some(id) => strings.insert(StrId(id), &String::from_utf8_lossy(&payload[p..])),
                None => {
                    damage.push(Damage { offset: pos as u64, what: "string dictionary entry has no valid id".into() })
                }
            }
        }
        pos += entry;
    }
}

/// Classifies every slot and reads the clock syncs of the intact chunks while their bytes are at hand:
/// the chunks in sequence order, the empty slots, the clock syncs in sequence order.
fn scan_chunks(
    data: &[u8],
    h: &FileHeader,
    damage: &mut Vec<Damage>,
    behind: &mut Behind,
) -> (Vec<ChunkRef>, u32, Vec<(u64, u64, u64)>) {
    let mut chunks = Vec::new();
    let mut empty = 0u32;
    // The clock syncs in slot order, and where each intact chunk's lie among them (by offset).
    let (mut found, mut spans) = (Vec::new(), Vec::new());
    let cb = h.chunk_bytes as u64;
    for slot in 0..h.chunk_count {
        let off = h.ring_offset + u64::from(slot) * cb;
        if off >= data.len() as u64 {
            break;
        }
        let end = (off + cb).min(data.len() as u64) as usize;
        match inspect(&data[off as usize..end]) {
            ChunkState::Empty => empty += 1,
            ChunkState::Valid { seq, base_ticks, len } => {
                let c = ChunkRef { seq, slot, offset: off, base_ticks, len };
                let from = found.len();
                clock_syncs_in(payload_of(data, &c), &mut found);
                spans.push((off, from..found.len()));
                chunks.push(c);
            }
            ChunkState::Damaged { seq, reason } => {
                let seq = if seq == u64::MAX { "?".to_string() } else { seq.to_string() };
                damage
                    .push(Damage { offset: off, what: format!("chunk in slot {slot} (seq {seq}): {reason}; skipped") });
            }
        }
        behind.done(off as usize..end);
    }
    let deduped = in_sequence(chunks, damage);
    // A slot being recycled at the time of the crash is expected; a seq beyond the slot count in a
    // file whose chunks disagree with their slots is not.
    for c in &deduped {
        if c.seq % u64::from(h.chunk_count) != u64::from(c.slot) {
            damage.push(Damage {
                offset: c.offset,
                what: format!(
                    "chunk seq {} found in slot {} (expected slot {})",
                    c.seq,
                    c.slot,
                    c.seq % u64::from(h.chunk_count)
                ),
            });
        }
    }
    let mut syncs = Vec::with_capacity(found.len());
    for c in &deduped {
        if let Ok(i) = spans.binary_search_by_key(&c.offset, |s| s.0) {
            syncs.extend_from_slice(&found[spans[i].1.clone()]);
        }
    }
    (deduped, empty, syncs)
}

/// The chunks a scan found in a file whose geometry is not known (see [`header_recovery`]): the intact
/// ones are taken where they lie, the damaged ones reported.
fn scanned_chunks(h: &FileHeader, found: &[ScannedChunk], damage: &mut Vec<Damage>) -> Vec<ChunkRef> {
    let mut chunks = Vec::new();
    for c in found {
        let slot = ((c.offset - h.ring_offset) / u64::from(h.chunk_bytes.max(1))) as u32;
        match c.state {
            ChunkState::Valid { seq, base_ticks, len } => {
                chunks.push(ChunkRef { seq, slot, offset: c.offset, base_ticks, len })
            }
            ChunkState::Damaged { reason, .. } => {
                damage.push(Damage { offset: c.offset, what: format!("chunk: {reason}; skipped") })
            }
            ChunkState::Empty => {}
        }
    }
    in_sequence(chunks, damage)
}

/// Sorts chunks by sequence number, drops duplicates and reports gaps.
fn in_sequence(mut chunks: Vec<ChunkRef>, damage: &mut Vec<Damage>) -> Vec<ChunkRef> {
    chunks.sort_by_key(|c| c.seq);
    let mut deduped: Vec<ChunkRef> = Vec::with_capacity(chunks.len());
    for c in chunks {
        if let Some(prev) = deduped.last() {
            if prev.seq == c.seq {
                damage.push(Damage {
                    offset: c.offset,
                    what: format!("duplicate chunk seq {}; second copy skipped", c.seq),
                });
                continue;
            }
            if c.seq != prev.seq + 1 {
                damage.push(Damage {
                    offset: c.offset,
                    what: format!(
                        "chunks with seq {}..={} are missing (damaged or overwritten)",
                        prev.seq + 1,
                        c.seq - 1
                    ),
                });
            }
        }
        deduped.push(c);
    }
    deduped
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{encode_string_into, encode_to_vec};

    /// Collects what [`ChunkRecords::for_each_item`] hands over, as iterating would yield it.
    struct Collect<'a>(Vec<Result<Decoded<'a>, Damage>>);

    impl<'a> DecodedVisitor<'a> for Collect<'a> {
        type Out = ();
        fn visit(&mut self, item: Decoded<'a>) {
            self.0.push(Ok(item));
        }
    }

    #[test]
    fn visiting_a_chunk_hands_over_what_iterating_yields() {
        let mut st = DeltaState::at_chunk_start(500);
        let mut payload = Vec::new();
        for i in 0..5u64 {
            let rec = Record::NvtxPush { tid: 1, domain: StrId(0), name: StrId(2), ts: 1000 + 700 * i };
            encode_to_vec(&rec, &mut st, &mut payload);
        }
        let mut text = [0u8; 16];
        let n = encode_string_into(StrId(2), b"step", &mut text).unwrap();
        payload.extend_from_slice(&text[..n]);
        payload.extend_from_slice(&[200, 2, 9, 9]); // a type this version does not know
        encode_to_vec(&Record::NvtxPop { tid: 1, domain: StrId(0), ts: 90_000 }, &mut st, &mut payload);
        let whole = payload.len();
        payload.extend_from_slice(&[type_code::KERNEL, 2, 1, 1]); // a kernel frame too short
        encode_to_vec(&Record::ThreadName { tid: 1, name: StrId(2) }, &mut st, &mut payload);
        for cut in [whole, payload.len()] {
            let records = || ChunkRecords {
                payload: &payload[..cut],
                pos: 0,
                delta: DeltaState::at_chunk_start(500),
                chunk_offset: 4096,
                failed: false,
            };
            let iterated: Vec<_> = records().collect();
            let mut visited = Collect(Vec::new());
            let damage = records().for_each_item(&mut visited);
            visited.0.extend(damage.map(Err));
            assert_eq!(visited.0, iterated);
            assert_eq!(iterated.len(), 8 + usize::from(cut > whole), "{iterated:?}");
            assert_eq!(iterated.last().unwrap().is_err(), cut > whole);
        }
    }
}
