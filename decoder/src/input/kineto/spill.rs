//! Sorting more records than memory should hold: records gather in a buffer of bounded size; a
//! full buffer is sorted and written to an unnamed temporary file (a run); at the end the runs and
//! the last buffer are merged with a min-heap. Small traces never touch the disk.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};

/// A record that sorts by `key` (ties keep insertion order: the key ends with a sequence
/// number), spilled as the bytes `encode` appends (at most 65535) and read back by `decode`
/// (given the bytes from the record's first on, perhaps with more after its last, and the record
/// before it in the run, which it replaces); both are given the record before it in the run (the
/// default one first), so that a record may be written as its difference from that one.
pub(super) trait Record: Sized + Copy + Default {
    type Key: Ord + Copy;
    fn key(&self) -> Self::Key;
    fn encode(&self, prev: &Self, out: &mut Vec<u8>);
    fn decode(b: &[u8], prev: &mut Self);
}

/// Buffered records and the runs already on disk.
pub(super) struct Sorter<T: Record> {
    buf: Vec<T>,
    limit: usize,
    runs: Vec<File>,
}

impl<T: Record> Sorter<T> {
    /// A sorter holding at most `budget` bytes of records in memory.
    pub fn new(budget: usize) -> Sorter<T> {
        let limit = (budget / std::mem::size_of::<T>().max(1)).max(1024);
        Sorter { buf: Vec::new(), limit, runs: Vec::new() }
    }

    pub fn push(&mut self, r: T) -> std::io::Result<()> {
        if self.buf.len() == self.buf.capacity() && self.buf.len() < self.limit {
            let more = self.buf.capacity().max(1024).min(self.limit - self.buf.len());
            self.buf.reserve_exact(more);
        }
        self.buf.push(r);
        if self.buf.len() >= self.limit {
            self.spill()?;
        }
        Ok(())
    }

    #[cfg(test)]
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> std::io::Result<()> {
        let order = key_order(&self.buf);
        let mut f = tempfile::tempfile()?;
        // Each record as its length (u16) and its bytes, written a block at a time.
        let mut out = Vec::with_capacity(WRITE_BLOCK + (1 << 16));
        let mut prev = T::default();
        for k in 0..self.buf.len() {
            let r = &self.buf[order.as_ref().map_or(k, |o| o[k] as usize)];
            let at = out.len();
            out.extend_from_slice(&[0, 0]);
            r.encode(&prev, &mut out);
            prev = *r;
            let len =
                u16::try_from(out.len() - at - 2).map_err(|_| std::io::Error::other("record too long to spill"))?;
            out[at..at + 2].copy_from_slice(&len.to_le_bytes());
            if out.len() >= WRITE_BLOCK {
                f.write_all(&out)?;
                out.clear();
            }
        }
        f.write_all(&out)?;
        self.buf.clear();
        f.seek(SeekFrom::Start(0))?;
        self.runs.push(f);
        Ok(())
    }

    /// Every record pushed, in key order.
    pub fn into_sorted(mut self) -> std::io::Result<Merged<T>> {
        let order = key_order(&self.buf);
        let last = Run::Memory { recs: std::mem::take(&mut self.buf), order, at: 0 };
        if self.runs.is_empty() {
            // Nothing spilled: no merge.
            let only = last;
            return Ok(Merged { runs: vec![only], heap: BinaryHeap::new(), single: true });
        }
        let mut runs: Vec<Run<T>> = Vec::with_capacity(self.runs.len() + 1);
        for f in self.runs.drain(..) {
            runs.push(Run::Disk(DiskRun { file: f, buf: vec![0; READ_BLOCK], pos: 0, len: 0, prev: T::default() }));
        }
        runs.push(last);
        let mut heap = BinaryHeap::with_capacity(runs.len());
        for (i, run) in runs.iter_mut().enumerate() {
            if run.advance()? {
                heap.push(Reverse((run.head().key(), i)));
            }
        }
        Ok(Merged { runs, heap, single: false })
    }
}

/// The order of `recs` by key: None when they already are in it, else the indices in key order.
/// The keys (computed once) are sorted with their indices, not the records, which are large to
/// move; the sort is the stable one, which finds the runs already in order (Kineto writes each
/// thread's and stream's events mostly in time order) and merges them.
fn key_order<T: Record>(recs: &[T]) -> Option<Vec<u32>> {
    let mut keys: Vec<(T::Key, u32)> = recs.iter().enumerate().map(|(i, r)| (r.key(), i as u32)).collect();
    if keys.is_sorted_by(|a, b| a.0 <= b.0) {
        return None;
    }
    keys.sort_by_key(|k| k.0);
    Some(keys.into_iter().map(|(_, i)| i).collect())
}

/// Bytes of a run written at a time.
const WRITE_BLOCK: usize = 1 << 20;
/// Bytes of a run read at a time: more than the longest record and its length.
const READ_BLOCK: usize = 128 << 10;

/// A run on disk, read a block at a time; records are decoded straight from the block.
struct DiskRun<T> {
    file: File,
    /// The record read last, the run's head (the default one before the first).
    prev: T,
    buf: Vec<u8>,
    /// The next record's length is at `buf[pos]`; the bytes read end at `len`.
    pos: usize,
    len: usize,
}

impl<T> DiskRun<T> {
    /// Where the next record's bytes start in `buf` (all of them are there): None at the end of the run.
    fn next_bytes(&mut self) -> std::io::Result<Option<usize>> {
        loop {
            let have = self.len - self.pos;
            if have >= 2 {
                let n = u16::from_le_bytes([self.buf[self.pos], self.buf[self.pos + 1]]) as usize;
                if have >= 2 + n {
                    let start = self.pos + 2;
                    self.pos = start + n;
                    return Ok(Some(start));
                }
            }
            self.buf.copy_within(self.pos..self.len, 0);
            self.pos = 0;
            self.len = have;
            let k = loop {
                match self.file.read(&mut self.buf[have..]) {
                    Ok(k) => break k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            };
            if k == 0 {
                if have == 0 {
                    return Ok(None);
                }
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.len += k;
        }
    }
}

enum Run<T> {
    Disk(DiskRun<T>),
    /// The last buffer: its records and their key order ([`key_order`]); the head is the
    /// `at`th in that order (counting from 1; 0 before the first).
    Memory {
        recs: Vec<T>,
        order: Option<Vec<u32>>,
        at: usize,
    },
}

impl<T: Record> Run<T> {
    /// Moves the head to the next record: false at the end of the run.
    fn advance(&mut self) -> std::io::Result<bool> {
        match self {
            Run::Memory { recs, at, .. } => {
                if *at >= recs.len() {
                    return Ok(false);
                }
                *at += 1;
                Ok(true)
            }
            Run::Disk(d) => Ok(match d.next_bytes()? {
                Some(s) => {
                    T::decode(&d.buf[s..d.len], &mut d.prev);
                    true
                }
                None => false,
            }),
        }
    }

    /// The record [`Run::advance`] moved to last.
    fn head(&self) -> &T {
        match self {
            Run::Memory { recs, order, at } => {
                let k = at.saturating_sub(1);
                &recs[order.as_ref().map_or(k, |o| o[k] as usize)]
            }
            Run::Disk(d) => &d.prev,
        }
    }
}

/// The merge of a sorter's runs.
pub(super) struct Merged<T: Record> {
    runs: Vec<Run<T>>,
    /// The runs not at their end, by their heads' keys.
    heap: BinaryHeap<Reverse<(T::Key, usize)>>,
    /// One run only (in memory): read straight through.
    single: bool,
}

impl<T: Record> Merged<T> {
    pub fn next(&mut self) -> std::io::Result<Option<T>> {
        if self.single {
            let run = &mut self.runs[0];
            return Ok(if run.advance()? { Some(*run.head()) } else { None });
        }
        // The run with the least head gives it up; its next head takes its place in the heap
        // (one sift instead of a pop and a push).
        let Some(mut top) = self.heap.peek_mut() else { return Ok(None) };
        let run = &mut self.runs[top.0 .1];
        let out = *run.head();
        if run.advance()? {
            top.0 .0 = run.head().key();
        } else {
            std::collections::binary_heap::PeekMut::pop(top);
        }
        Ok(Some(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Default)]
    struct Pair(u32, u64);
    impl Record for Pair {
        type Key = (u32, u64);
        fn key(&self) -> (u32, u64) {
            (self.0, self.1)
        }
        fn encode(&self, _prev: &Self, out: &mut Vec<u8>) {
            out.extend_from_slice(&self.0.to_le_bytes());
            out.extend_from_slice(&self.1.to_le_bytes());
        }
        fn decode(b: &[u8], prev: &mut Pair) {
            *prev =
                Pair(u32::from_le_bytes(b[..4].try_into().unwrap()), u64::from_le_bytes(b[4..12].try_into().unwrap()))
        }
    }

    #[test]
    fn merges_spilled_runs_in_key_order() {
        let mut s = Sorter::<Pair>::new(0); // 1024 records a run
        let n = 10_000u64;
        for seq in 0..n {
            s.push(Pair(((seq * 7919) % 13) as u32, seq)).unwrap();
        }
        assert_eq!(s.spilled_runs(), 9);
        let mut m = s.into_sorted().unwrap();
        let mut got = Vec::new();
        while let Some(p) = m.next().unwrap() {
            got.push(p);
        }
        let mut want: Vec<Pair> = (0..n).map(|seq| Pair(((seq * 7919) % 13) as u32, seq)).collect();
        want.sort_by_key(|p| p.key());
        assert_eq!(got, want);
    }
}
