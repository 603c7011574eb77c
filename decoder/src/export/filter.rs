//! A sink in front of an exporter that keeps only the selected processes and the events that
//! overlap each process's time window. Memory: one window per process.

use super::select::{IdSet, Window};
use crate::model::*;

/// Per process (by `ProcId`): `None` = drop the process, `Some(w)` = keep what overlaps `w`.
pub struct Filter<S> {
    pub inner: S,
    windows: Vec<Option<Window>>,
    ranks: Option<IdSet>,
    current: Option<Window>,
    /// Events passed on / dropped by the window.
    pub kept: u64,
    pub dropped: u64,
}

impl<S: TraceSink> Filter<S> {
    /// `ranks`: when set, processes without a selected rank are dropped too (imports whose rank is
    /// only known once decoded).
    pub fn new(inner: S, windows: Vec<Option<Window>>, ranks: Option<IdSet>) -> Filter<S> {
        Filter { inner, windows, ranks, current: None, kept: 0, dropped: 0 }
    }

    fn pass(&mut self, start: Ns, end: Ns) -> bool {
        let ok = self.current.is_some_and(|w| w.keeps(start, end));
        if ok {
            self.kept += 1;
        } else if self.current.is_some() {
            self.dropped += 1;
        }
        ok
    }
}

impl<S: TraceSink> TraceSink for Filter<S> {
    fn handle_process(&mut self, info: &ProcessInfo) {
        let rank_ok = match (&self.ranks, info.rank) {
            (None, _) => true,
            (Some(set), Some(r)) => set.contains(r as u64),
            (Some(_), None) => false,
        };
        self.current = self.windows.get(info.id.0 as usize).copied().flatten().filter(|_| rank_ok);
        if self.current.is_some() {
            self.inner.handle_process(info);
        }
    }
    fn handle_thread_name(&mut self, t: &ThreadName) {
        if self.current.is_some() {
            self.inner.handle_thread_name(t);
        }
    }
    fn handle_kernel(&mut self, k: &Kernel) {
        if self.pass(k.start, k.end) {
            self.inner.handle_kernel(k);
        }
    }
    fn handle_memcpy(&mut self, m: &Memcpy) {
        if self.pass(m.start, m.end) {
            self.inner.handle_memcpy(m);
        }
    }
    fn handle_memset(&mut self, m: &Memset) {
        if self.pass(m.start, m.end) {
            self.inner.handle_memset(m);
        }
    }
    fn handle_api(&mut self, a: &Api) {
        if self.pass(a.start, a.end) {
            self.inner.handle_api(a);
        }
    }
    fn handle_sync(&mut self, s: &SyncEvent) {
        if self.pass(s.start, s.end) {
            self.inner.handle_sync(s);
        }
    }
    fn handle_memory(&mut self, m: &MemoryEvent) {
        if self.pass(m.ts, m.ts) {
            self.inner.handle_memory(m);
        }
    }
    fn handle_collective(&mut self, c: &Collective) {
        if self.pass(c.start, c.end) {
            self.inner.handle_collective(c);
        }
    }
    fn handle_nvtx_range(&mut self, r: &NvtxRange) {
        if self.pass(r.start, r.end) {
            self.inner.handle_nvtx_range(r);
        }
    }
    fn handle_nvtx_mark(&mut self, m: &NvtxMark) {
        if self.pass(m.ts, m.ts) {
            self.inner.handle_nvtx_mark(m);
        }
    }
    fn handle_counter(&mut self, c: &CounterSample) {
        if self.pass(c.ts, c.ts) {
            self.inner.handle_counter(c);
        }
    }
    fn handle_marker(&mut self, m: &Marker) {
        if self.pass(m.ts, m.ts) {
            self.inner.handle_marker(m);
        }
    }
    fn handle_ranges_close_in_order(&mut self, p: ProcId) {
        // Dropping events keeps the promise (a range whose parent is dropped has no parent here).
        if self.current.is_some() {
            self.inner.handle_ranges_close_in_order(p);
        }
    }
    fn handle_no_collective_calls(&mut self, p: ProcId) {
        // Dropping events keeps it too.
        if self.current.is_some() {
            self.inner.handle_no_collective_calls(p);
        }
    }
    fn handle_process_end(&mut self, p: ProcId) {
        if self.current.take().is_some() {
            self.inner.handle_process_end(p);
        }
    }
    fn finish(&mut self) -> Result<(), SinkError> {
        self.inner.finish()
    }
}
