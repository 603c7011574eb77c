//! Reading a ring whose fixed header fields (bytes 0..64) are damaged.
//!
//! Every chunk decodes alone (its header carries its sequence number, base ticks, length and CRC), so a
//! damaged header need not lose the file: the ring region is scanned for intact chunks (chunk magic at
//! an 8-byte boundary and a matching CRC), and the geometry is taken from the damaged header where the
//! chunks agree with it, else rediscovered from where the chunks lie. The header damage is reported as
//! a [`Damage`] naming the first field that disagrees with what the chunks say.

use crate::chunk::{inspect, ChunkState, CHUNK_HEADER_BYTES, CHUNK_MAGIC};
use crate::error::FormatError;
use crate::header::{le_u32, le_u64, off, FileHeader, LiveStats, FORMAT_VERSION, HEADER_BYTES, META_MAX, META_OFFSET};
use crate::reader::Damage;

/// A chunk found by scanning the file for chunk magic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ScannedChunk {
    pub offset: u64,
    pub state: ChunkState,
}

/// What a damaged header could be recovered to.
pub(crate) struct Recovered {
    pub header: FileHeader,
    pub stats: LiveStats,
    pub damage: Vec<Damage>,
    /// `None` when the geometry is exact (chunks are read slot by slot); otherwise the chunks found by
    /// scanning, which the reader takes as they are.
    pub scanned: Option<Vec<ScannedChunk>>,
}

/// Whether a header error may be header damage (rather than a file that is not a ring, too short, or
/// of a newer format version with an intact header).
pub(crate) fn worth_recovering(page: &[u8], err: &FormatError) -> bool {
    if page.len() < HEADER_BYTES {
        return false;
    }
    let crc_ok = crc32fast::hash(&page[..off::FIXED_CRC]) == le_u32(page, off::FIXED_CRC);
    match err {
        FormatError::BadMagic { .. } | FormatError::Corrupt { .. } => true,
        // A newer version whose header checksum holds is a real newer file: "upgrade tprof".
        FormatError::UnsupportedVersion { .. } => !crc_ok,
        _ => false,
    }
}

/// Scans `data` past the header page for chunk headers (chunk magic at 8-byte boundaries). Intact
/// chunks are skipped over whole, so records inside them are never taken for chunks.
pub(crate) fn scan_for_chunks(data: &[u8]) -> Vec<ScannedChunk> {
    let mut out = Vec::new();
    let mut pos = HEADER_BYTES;
    while pos + CHUNK_HEADER_BYTES <= data.len() {
        if data[pos..pos + 4] != CHUNK_MAGIC {
            pos += 8;
            continue;
        }
        let state = inspect(&data[pos..]);
        match state {
            ChunkState::Valid { len, .. } => {
                out.push(ScannedChunk { offset: pos as u64, state });
                pos += (CHUNK_HEADER_BYTES + len as usize + 7) & !7;
            }
            ChunkState::Damaged { .. } => {
                out.push(ScannedChunk { offset: pos as u64, state });
                pos += 8;
            }
            ChunkState::Empty => pos += 8,
        }
    }
    out
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

fn seq_of(c: &ScannedChunk) -> Option<u64> {
    match c.state {
        ChunkState::Valid { seq, .. } => Some(seq),
        _ => None,
    }
}

/// Whether every scanned chunk sits at the slot its sequence number says, in this geometry.
fn fits(chunks: &[ScannedChunk], ring_offset: u64, chunk_bytes: u64, chunk_count: u64) -> bool {
    chunk_bytes >= (CHUNK_HEADER_BYTES + 64) as u64
        && chunk_count > 0
        && ring_offset >= HEADER_BYTES as u64
        && chunks.iter().all(|c| {
            let Some(rel) = c.offset.checked_sub(ring_offset) else { return false };
            let slot = rel / chunk_bytes;
            rel % chunk_bytes == 0 && slot < chunk_count && seq_of(c).is_none_or(|s| s % chunk_count == slot)
        })
}

/// Geometry (ring offset, chunk bytes, chunk count) and whether it is known to be exact.
fn geometry(page: &[u8], file_len: u64, chunks: &[ScannedChunk]) -> (u64, u64, u64, bool) {
    let hint_cb = u64::from(le_u32(page, off::CHUNK_BYTES));
    let hint_count = u64::from(le_u32(page, off::CHUNK_COUNT));
    let hint_ring = le_u64(page, off::RING_OFFSET);
    if fits(chunks, hint_ring, hint_cb, hint_count)
        && hint_ring.checked_add(hint_cb.saturating_mul(hint_count)) == Some(file_len)
    {
        return (hint_ring, hint_cb, hint_count, true);
    }
    let first = chunks[0].offset;
    let spacing = chunks.windows(2).fold(0, |g, w| gcd(g, w[1].offset - w[0].offset));
    let mut candidates = Vec::new();
    if hint_cb >= (CHUNK_HEADER_BYTES + 64) as u64
        && hint_cb.is_multiple_of(8)
        && (spacing == 0 || spacing % hint_cb == 0)
    {
        candidates.push(hint_cb);
    }
    if spacing >= (CHUNK_HEADER_BYTES + 64) as u64 && !candidates.contains(&spacing) {
        candidates.push(spacing);
    }
    for &cb in &candidates {
        // The ring starts at the first chunk or whole chunks before it (slots not found by the scan).
        let mut ring = first;
        for _ in 0..=4096 {
            let count = (file_len - ring) / cb;
            if fits(chunks, ring, cb, count) && ring + cb * count == file_len {
                return (ring, cb, count, true);
            }
            match ring.checked_sub(cb) {
                Some(r) if r >= HEADER_BYTES as u64 => ring = r,
                _ => break,
            }
        }
    }
    let cb = candidates.first().copied().unwrap_or(file_len - first).max(1);
    (first, cb, ((file_len - first) / cb).max(1), false)
}

/// The metadata block: as long as the header says if that length matches its checksum, else up to the
/// first zero byte (the page is zero after the block). Returns the block and whether it is verified.
fn metadata(page: &[u8]) -> (&[u8], bool) {
    let stored_crc = le_u32(page, off::META_CRC);
    let said = (le_u32(page, off::META_LEN) as usize).min(META_MAX);
    let by_len = &page[META_OFFSET..META_OFFSET + said];
    if crc32fast::hash(by_len) == stored_crc {
        return (by_len, true);
    }
    let region = &page[META_OFFSET..META_OFFSET + META_MAX];
    let end = region.iter().position(|&b| b == 0).unwrap_or(META_MAX);
    let by_zero = &region[..end];
    (by_zero, crc32fast::hash(by_zero) == stored_crc)
}

/// Recovers a ring whose header failed with `err`, or `None` when no intact chunk is found (then the
/// file is not taken for a ring and `err` stands).
pub(crate) fn recover(data: &[u8], err: &FormatError) -> Option<Recovered> {
    let page = &data[..HEADER_BYTES];
    let file_len = data.len() as u64;
    let chunks = scan_for_chunks(data);
    let intact = chunks.iter().filter(|c| seq_of(c).is_some()).count();
    if intact == 0 {
        return None;
    }
    let (ring_offset, chunk_bytes, chunk_count, exact) = geometry(page, file_len, &chunks);
    let (meta, meta_ok) = metadata(page);
    let version = match u16::from_le_bytes([page[off::VERSION], page[off::VERSION + 1]]) {
        v @ 1..=FORMAT_VERSION => v,
        _ => FORMAT_VERSION,
    };
    let mut header = FileHeader {
        version,
        little_endian: page[off::ENDIAN] != 0,
        pointer_size: if matches!(page[off::POINTER_SIZE], 4 | 8) { page[off::POINTER_SIZE] } else { 8 },
        chunk_bytes: u32::try_from(chunk_bytes).unwrap_or(u32::MAX),
        chunk_count: u32::try_from(chunk_count).unwrap_or(u32::MAX),
        dict_offset: HEADER_BYTES as u64,
        dict_bytes: ring_offset - HEADER_BYTES as u64,
        ring_offset,
        ..FileHeader::default()
    };
    header.parse_meta(meta);
    let field = first_wrong_field(page, &header, meta.len(), err);
    let how = if exact {
        "the geometry the chunks agree with is used"
    } else {
        "the geometry is unknown, chunks found by scanning are read as they are"
    };
    let mut damage = vec![Damage {
        offset: field.0,
        what: format!(
            "header damaged ({}; {}): {intact} intact chunks found by scanning the file, {how}",
            field.1, err
        ),
    }];
    if !meta_ok {
        damage.push(Damage {
            offset: META_OFFSET as u64,
            what: "metadata checksum mismatch; parsed what could be read".into(),
        });
    }
    let stats = LiveStats {
        dropped_events: le_u64(page, off::LIVE_DROPPED),
        next_seq: le_u64(page, off::LIVE_NEXT_SEQ),
        dict_used: le_u64(page, off::LIVE_DICT_USED),
        flags: le_u64(page, off::LIVE_FLAGS),
        last_commit_ticks: le_u64(page, off::LIVE_LAST_COMMIT_TICKS),
        cupti_dropped: le_u64(page, off::LIVE_CUPTI_DROPPED),
        events_written: le_u64(page, off::LIVE_EVENTS),
    };
    Some(Recovered { header, stats, damage, scanned: if exact { None } else { Some(chunks) } })
}

/// The first fixed field (offset, description) whose stored value differs from the recovered one.
fn first_wrong_field(page: &[u8], h: &FileHeader, meta_len: usize, err: &FormatError) -> (u64, String) {
    if page[..8] != crate::header::MAGIC {
        return (0, "bad magic".into());
    }
    let u16_at = |o: usize| u64::from(u16::from_le_bytes([page[o], page[o + 1]]));
    let fields: [(usize, &str, u64, u64); 10] = [
        (off::VERSION, "version", u16_at(off::VERSION), u64::from(h.version)),
        (off::ENDIAN, "endianness", u64::from(page[off::ENDIAN]), u64::from(h.little_endian)),
        (off::POINTER_SIZE, "pointer size", u64::from(page[off::POINTER_SIZE]), u64::from(h.pointer_size)),
        (off::HEADER_BYTES, "header bytes", u64::from(le_u32(page, off::HEADER_BYTES)), HEADER_BYTES as u64),
        (off::CHUNK_BYTES, "chunk bytes", u64::from(le_u32(page, off::CHUNK_BYTES)), u64::from(h.chunk_bytes)),
        (off::CHUNK_COUNT, "chunk count", u64::from(le_u32(page, off::CHUNK_COUNT)), u64::from(h.chunk_count)),
        (off::DICT_OFFSET, "dictionary offset", le_u64(page, off::DICT_OFFSET), h.dict_offset),
        (off::DICT_BYTES, "dictionary bytes", le_u64(page, off::DICT_BYTES), h.dict_bytes),
        (off::RING_OFFSET, "ring offset", le_u64(page, off::RING_OFFSET), h.ring_offset),
        (off::META_LEN, "metadata length", u64::from(le_u32(page, off::META_LEN)), meta_len as u64),
    ];
    for (o, name, stored, recovered) in fields {
        if stored != recovered {
            return (o as u64, format!("{name} at offset {o} is {stored}, the file says {recovered}"));
        }
    }
    match err {
        FormatError::Corrupt { offset, .. } => (*offset, "fixed fields or their checksums damaged".into()),
        _ => (off::FIXED_CRC as u64, "header checksum damaged".into()),
    }
}
