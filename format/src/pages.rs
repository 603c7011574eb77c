//! A ring file's bytes (mapped, or owned for an image read from memory), and handing the mapped pages
//! a pass over the file is done with back to the kernel.
//!
//! Every page of a mapping that has been read stays in the process's resident set until the mapping
//! is dropped: decoding a 160 MB ring kept all 160 MB resident beside the decoder's own state. The
//! reader's passes (the dictionary and chunk scan at open, the clock syncs, every walk over the
//! chunks) instead tell a [`Behind`] which regions they have finished with, and it releases them
//! (`MADV_DONTNEED`) a batch at a time. A later pass reading them again faults them back in from the
//! page cache, with the same contents.

use std::ops::Range;

use memmap2::{Mmap, UncheckedAdvice};

/// The bytes of a ring file.
pub(crate) enum Bytes {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

/// Alignment of the releases in the address space. On a fault the kernel also maps the faulting
/// page's neighbours that are in the page cache, within an aligned 64 KiB window ("fault-around"):
/// a release ending inside the window of the read position would see its last pages mapped again
/// by the next fault. A multiple of every page size in use (4, 16, 64 KiB).
const GRANULE: usize = 64 << 10;

/// Bytes a pass moves past before they are released (one system call per MiB).
const BATCH: usize = 1 << 20;

impl Bytes {
    pub(crate) fn as_slice(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }

    /// Drops the pages of `range` (offsets, page-aligned in the address space, or ending at the end
    /// of the mapping) from this process's resident set. Nothing for owned bytes.
    fn release(&self, range: Range<usize>) {
        let Bytes::Mapped(m) = self else { return };
        if range.is_empty() || range.end > m.len() {
            return;
        }
        // SAFETY: `m` is a read-only (PROT_READ) private mapping of a regular file: nothing ever
        // wrote to it, so it holds no copy-on-write page, only the file's own pages from the page
        // cache. MADV_DONTNEED removes them from this process's page tables; the next read of any
        // byte in the range faults the file's page in again, with the contents it had (a private
        // mapping's unwritten pages are the page cache's, so bytes a live writer changes between two
        // passes are seen alike with or without the release). Slices borrowed from the mapping
        // (payloads, inline strings) therefore keep reading the same bytes; the mapping itself stays.
        // The range lies inside the mapping (checked above).
        let _ = unsafe { m.unchecked_advise_range(UncheckedAdvice::DontNeed, range.start, range.len()) };
    }
}

/// What to release of `pending` (offsets into a mapping of `len` bytes at address `base`): all of it,
/// widened to whole granules (`to_end`: the pass moves elsewhere or ends), or the whole granules
/// before the one `pending` ends in (the pass continues from there).
fn releasable(base: usize, len: usize, pending: &Range<usize>, to_end: bool) -> Range<usize> {
    let down = |off: usize| ((base + off) & !(GRANULE - 1)).saturating_sub(base);
    let start = down(pending.start);
    let end = if to_end { ((base + pending.end).next_multiple_of(GRANULE) - base).min(len) } else { down(pending.end) };
    start..end.max(start)
}

/// Follows one pass over a file's regions, in the order it reads them, and releases the pages it
/// has moved past: a batch at a time while the regions follow each other, everything pending where
/// the pass jumps (the ring's wrap from its last slot to its first, a damaged chunk skipped) and at
/// the end (drop). Releasing a page too soon only costs a page fault, never a wrong byte.
pub(crate) struct Behind<'b> {
    bytes: &'b Bytes,
    /// Read and not yet released.
    pending: Range<usize>,
}

impl<'b> Behind<'b> {
    pub(crate) fn new(bytes: &'b Bytes) -> Behind<'b> {
        Behind { bytes, pending: 0..0 }
    }

    /// The pass is done with `range` (offsets into the file).
    #[inline]
    pub(crate) fn done(&mut self, range: Range<usize>) {
        let Bytes::Mapped(m) = self.bytes else { return };
        if range.start != self.pending.end {
            self.flush();
            self.pending = range.start..range.start;
        }
        self.pending.end = range.end.max(range.start);
        if self.pending.len() >= BATCH {
            let cut = releasable(m.as_ptr() as usize, m.len(), &self.pending, false);
            self.bytes.release(cut.clone());
            self.pending.start = self.pending.start.max(cut.end);
        }
    }

    /// Releases everything pending.
    fn flush(&mut self) {
        let Bytes::Mapped(m) = self.bytes else { return };
        if !self.pending.is_empty() {
            self.bytes.release(releasable(m.as_ptr() as usize, m.len(), &self.pending, true));
        }
        self.pending = self.pending.end..self.pending.end;
    }
}

impl Drop for Behind<'_> {
    fn drop(&mut self) {
        self.flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every release is granule-aligned (or at the mapping's ends), covers what it must and stops
    /// short of the granule the pass reads on in.
    #[test]
    fn releases_are_whole_granules_behind_the_pass() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for _ in 0..10_000 {
            let base = 0x7f00_0000_0000 + 4096 * next(64);
            let len = 1 + next(8 << 20);
            let a = next(len);
            let b = a + next(len - a + 1);
            let aligned = |off: usize| off == 0 || off == len || (base + off).is_multiple_of(GRANULE);
            for to_end in [false, true] {
                let r = releasable(base, len, &(a..b), to_end);
                assert!(r.start <= r.end && r.end <= len, "{r:?}");
                assert!(aligned(r.start) && aligned(r.end), "{base:#x} {len} {a}..{b} {r:?}");
                assert!(r.start <= a && a - r.start < GRANULE, "{r:?} {a}");
                if to_end {
                    assert!(r.end >= b && (r.end - b < GRANULE), "{r:?} {b}");
                } else {
                    assert!(r.end <= b && (b - r.end < GRANULE || r.is_empty()), "{r:?} {b}");
                }
            }
        }
    }

    #[test]
    fn owned_bytes_release_nothing() {
        let bytes = Bytes::Owned(vec![7; 3 << 20]);
        let mut behind = Behind::new(&bytes);
        behind.done(0..(3 << 20));
        drop(behind);
        assert!(bytes.as_slice().iter().all(|&b| b == 7));
    }
}
