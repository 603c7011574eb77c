//! Chunk framing inside the ring region.
//!
//! A chunk is `chunk_bytes` long: a 32-byte header then the payload of framed records.
//! ```text
//!  0..4   magic "TPCK"
//!  4..8   reserved (0)
//!  8..16  commit word: payload length (u32, low half) | CRC32 (u32, high half), one atomic store
//! 16..24  sequence number (0, 1, 2, ...; slot = seq % chunk_count)
//! 24..32  base ticks: the delta-encoding base of the chunk's first timestamp
//! ```
//! The CRC covers bytes 16..32 and the committed payload. A writer starting a chunk first zeroes the
//! commit word, so a slot that is being recycled never passes for its previous contents.

/// Chunk magic.
pub const CHUNK_MAGIC: [u8; 4] = *b"TPCK";
/// Bytes before the payload.
pub const CHUNK_HEADER_BYTES: usize = 32;
/// Offset of the commit word.
pub const COMMIT_OFFSET: usize = 8;

/// Packs a payload length and CRC into the commit word.
pub fn commit_word(len: u32, crc: u32) -> u64 {
    u64::from(len) | (u64::from(crc) << 32)
}

/// CRC of a chunk: its sequence/base header bytes and its committed payload.
pub fn chunk_crc(seq_and_base: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(seq_and_base);
    h.update(payload);
    h.finalize()
}

/// What a chunk slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkState {
    /// Never written (all zero) or being started.
    Empty,
    /// Committed and intact.
    Valid { seq: u64, base_ticks: u64, len: u32 },
    /// Damaged: the reason.
    Damaged { seq: u64, reason: &'static str },
}

/// Classifies the chunk at `chunk` (exactly `chunk_bytes` long, or shorter if the file is truncated).
pub fn inspect(chunk: &[u8]) -> ChunkState {
    if chunk.len() < CHUNK_HEADER_BYTES {
        return ChunkState::Damaged { seq: u64::MAX, reason: "chunk header truncated by end of file" };
    }
    let word = u64::from_le_bytes(chunk[8..16].try_into().expect("8 bytes"));
    let len = (word & 0xffff_ffff) as u32;
    let crc = (word >> 32) as u32;
    let seq = u64::from_le_bytes(chunk[16..24].try_into().expect("8 bytes"));
    let base_ticks = u64::from_le_bytes(chunk[24..32].try_into().expect("8 bytes"));
    if chunk[..4] != CHUNK_MAGIC {
        if chunk[..32].iter().all(|&b| b == 0) || (word == 0 && chunk[..4] == [0; 4]) {
            return ChunkState::Empty;
        }
        return ChunkState::Damaged { seq, reason: "bad chunk magic" };
    }
    if word == 0 {
        return ChunkState::Empty;
    }
    let cap = chunk.len() - CHUNK_HEADER_BYTES;
    if len as usize > cap {
        return ChunkState::Damaged { seq, reason: "payload length exceeds the chunk (or the file was truncated)" };
    }
    let payload = &chunk[CHUNK_HEADER_BYTES..CHUNK_HEADER_BYTES + len as usize];
    if chunk_crc(&chunk[16..32], payload) != crc {
        return ChunkState::Damaged { seq, reason: "checksum mismatch" };
    }
    ChunkState::Valid { seq, base_ticks, len }
}
