//! Sorting more records than memory should hold: records gather in a buffer of bounded size; a
//! full buffer is sorted and written to an unnamed temporary file (a run); at the end the runs and
//! the last buffer are merged with a min-heap. Small traces never touch the disk.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};

/// A record of fixed encoded size that sorts by `key` (ties keep insertion order: the key ends
/// with a sequence number).
pub(super) trait Record: Sized {
    type Key: Ord + Copy;
    const SIZE: usize;
    fn key(&self) -> Self::Key;
    fn encode(&self, out: &mut [u8]);
    fn decode(b: &[u8]) -> Self;
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
        // Keys computed once and sorted with indices: the records are large to move around.
        self.buf.sort_by_cached_key(T::key);
        let mut f = BufWriter::with_capacity(1 << 20, tempfile::tempfile()?);
        let mut rec = vec![0u8; T::SIZE];
        for r in self.buf.drain(..) {
            r.encode(&mut rec);
            f.write_all(&rec)?;
        }
        let mut f = f.into_inner().map_err(|e| e.into_error())?;
        f.seek(SeekFrom::Start(0))?;
        self.runs.push(f);
        Ok(())
    }

    /// Every record pushed, in key order.
    pub fn into_sorted(mut self) -> std::io::Result<Merged<T>> {
        self.buf.sort_by_cached_key(T::key);
        if self.runs.is_empty() {
            // Nothing spilled: no merge.
            let only = Run::Memory(std::mem::take(&mut self.buf).into_iter());
            return Ok(Merged { runs: vec![only], heads: Vec::new(), heap: BinaryHeap::new(), single: true });
        }
        let mut runs: Vec<Run<T>> = Vec::with_capacity(self.runs.len() + 1);
        for f in self.runs.drain(..) {
            runs.push(Run::Disk(BufReader::with_capacity(64 << 10, f), vec![0u8; T::SIZE]));
        }
        runs.push(Run::Memory(std::mem::take(&mut self.buf).into_iter()));
        let mut heap = BinaryHeap::with_capacity(runs.len());
        let mut heads: Vec<Option<T>> = Vec::with_capacity(runs.len());
        for (i, run) in runs.iter_mut().enumerate() {
            let head = run.next()?;
            if let Some(h) = &head {
                heap.push(Reverse((h.key(), i)));
            }
            heads.push(head);
        }
        Ok(Merged { runs, heads, heap, single: false })
    }
}

enum Run<T> {
    Disk(BufReader<File>, Vec<u8>),
    Memory(std::vec::IntoIter<T>),
}

impl<T: Record> Run<T> {
    fn next(&mut self) -> std::io::Result<Option<T>> {
        match self {
            Run::Memory(it) => Ok(it.next()),
            Run::Disk(f, rec) => match f.read_exact(rec) {
                Ok(()) => Ok(Some(T::decode(rec))),
                Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(None),
                Err(e) => Err(e),
            },
        }
    }
}

/// The merge of a sorter's runs.
pub(super) struct Merged<T: Record> {
    runs: Vec<Run<T>>,
    heads: Vec<Option<T>>,
    heap: BinaryHeap<Reverse<(T::Key, usize)>>,
    /// One run only (in memory): read straight through.
    single: bool,
}

impl<T: Record> Merged<T> {
    pub fn next(&mut self) -> std::io::Result<Option<T>> {
        if self.single {
            return self.runs[0].next();
        }
        let Some(Reverse((_, i))) = self.heap.pop() else { return Ok(None) };
        let out = self.heads[i].take();
        let head = self.runs[i].next()?;
        if let Some(h) = &head {
            self.heap.push(Reverse((h.key(), i)));
        }
        self.heads[i] = head;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq)]
    struct Pair(u32, u64);
    impl Record for Pair {
        type Key = (u32, u64);
        const SIZE: usize = 12;
        fn key(&self) -> (u32, u64) {
            (self.0, self.1)
        }
        fn encode(&self, out: &mut [u8]) {
            out[..4].copy_from_slice(&self.0.to_le_bytes());
            out[4..12].copy_from_slice(&self.1.to_le_bytes());
        }
        fn decode(b: &[u8]) -> Pair {
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
