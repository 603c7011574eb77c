//! [`RangeProjection`]: GPU time of NVTX ranges (inclusive of nested ranges, as nsys's NVTX GPU
//! projection), launches matched to their GPU work by correlation id within two generations.

use crate::corr_slots::CorrSlots;
use crate::intervals::FastMap;
use crate::model::*;
use crate::range_fold::{RangeEntry, RangeFold};

/// GPU time per NVTX range name (inclusive of nested ranges), and range counts / CPU time.
#[derive(Debug, Default, Clone, PartialEq, serde::Serialize)]
pub struct RangeStat {
    pub name: String,
    pub count: u64,
    /// Sum of the ranges' own durations.
    pub range_ns: u64,
    /// GPU time of the work launched inside the ranges (kernels, copies, memsets).
    pub gpu_ns: u64,
}

/// Correlation entries per generation: GPU work is matched to launches (and launches to early GPU
/// work) among the last one to two generations, so memory stays bounded however long the trace.
pub(crate) const GENERATION: usize = 1 << 18;

/// Two generations of a correlation map: inserts go to the young one; when it is full, the old one
/// is dropped and the young one becomes old.
#[derive(Debug)]
pub(crate) struct Generations<V> {
    young: CorrSlots<V>,
    old: CorrSlots<V>,
}

impl<V> Default for Generations<V> {
    fn default() -> Self {
        Generations { young: CorrSlots::default(), old: CorrSlots::default() }
    }
}

impl<V> Generations<V> {
    /// Empty, with room for `room` entries made at the first insert into each generation (see
    /// [`CorrSlots::with_room`]): the second generation's vector, made when the first fills, does
    /// not grow from empty either; after that the two vectors take turns.
    pub(crate) fn with_room(room: usize) -> Self {
        Generations { young: CorrSlots::with_room(room), old: CorrSlots::with_room(room) }
    }

    // An empty generation is not probed (a lookup that misses the vector would go on to the map),
    // paid per API call when GPU work never arrives before its launch.
    #[inline(always)]
    pub(crate) fn get(&self, k: u64) -> Option<&V> {
        Self::nonempty(&self.young).and_then(|m| m.get(k)).or_else(|| Self::nonempty(&self.old).and_then(|m| m.get(k)))
    }
    #[inline]
    pub(crate) fn get_mut(&mut self, k: u64) -> Option<&mut V> {
        match Self::nonempty_mut(&mut self.young).and_then(|m| m.get_mut(k)) {
            Some(v) => Some(v),
            None => Self::nonempty_mut(&mut self.old).and_then(|m| m.get_mut(k)),
        }
    }
    #[inline]
    pub(crate) fn remove(&mut self, k: u64) -> Option<V> {
        Self::nonempty_mut(&mut self.young)
            .and_then(|m| m.remove(k))
            .or_else(|| Self::nonempty_mut(&mut self.old).and_then(|m| m.remove(k)))
    }
    #[inline]
    fn nonempty(m: &CorrSlots<V>) -> Option<&CorrSlots<V>> {
        (!m.is_empty()).then_some(m)
    }
    #[inline]
    fn nonempty_mut(m: &mut CorrSlots<V>) -> Option<&mut CorrSlots<V>> {
        (!m.is_empty()).then_some(m)
    }
    /// Inserts; when the young generation was full, the old one is dropped and its vector, cleared,
    /// becomes the young one (no regrowing it from empty, at the same peak memory).
    #[inline(always)]
    pub(crate) fn insert(&mut self, k: u64, v: V) {
        if self.young.len() >= GENERATION {
            self.next_generation();
        }
        self.young.insert(k, v);
    }
    #[cold]
    #[inline(never)]
    fn next_generation(&mut self) {
        std::mem::swap(&mut self.old, &mut self.young);
        self.young.clear();
    }
    /// Inserts; when the young generation was full, returns the old one it pushed out.
    #[inline]
    pub(crate) fn insert_evicting(&mut self, k: u64, v: V) -> Option<CorrSlots<V>> {
        let mut evicted = None;
        if self.young.len() >= GENERATION {
            evicted = Some(std::mem::replace(&mut self.old, std::mem::take(&mut self.young)));
        }
        self.young.insert(k, v);
        evicted
    }
    /// Entries held, both generations.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.young.len() + self.old.len()
    }
    /// Every value, both generations.
    pub(crate) fn values(&self) -> impl Iterator<Item = &V> {
        self.old.values().chain(self.young.values())
    }
    /// Every entry, both generations; the map is left empty.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = (u64, V)> {
        let (young, old) = (std::mem::take(&mut self.young), std::mem::take(&mut self.old));
        old.into_entries().chain(young.into_entries())
    }
}

/// No range with this id in [`dense_range_index`].
const NO_RANGE: u32 = u32::MAX;

/// The lowest id and, per id from it, the index of the last range delivered with that id
/// ([`NO_RANGE`] for none); None when the ids spread over more than twice their number (and a
/// few thousand), where sorting takes less memory.
fn dense_range_index(ranges: &[RangeEntry]) -> Option<(u64, Vec<u32>)> {
    let first = ranges.iter().map(|e| e.id).min()?;
    let last = ranges.iter().map(|e| e.id).max()?;
    if last - first >= 2 * ranges.len() as u64 + 4096 || ranges.len() >= NO_RANGE as usize {
        return None;
    }
    let mut at = vec![NO_RANGE; (last - first) as usize + 1];
    for (i, e) in ranges.iter().enumerate() {
        at[(e.id - first) as usize] = i as u32;
    }
    Some((first, at))
}

/// `t` to each distinct name of a chain: `up` yields the names from a range up to its root (the
/// first 10,001 count), None past the root or a range not delivered.
#[inline(always)]
fn add_up_chain(gpu_of: &mut [Option<Ns>], seen: &mut Vec<u32>, t: Ns, mut up: impl FnMut() -> Option<u32>) {
    seen.clear();
    for _ in 0..=10_000 {
        let Some(name) = up() else { break };
        if !seen.contains(&name) {
            seen.push(name);
            *gpu_of[name as usize].get_or_insert(0) += t;
        }
    }
}

/// Projects GPU work onto the ranges it was launched in.
#[derive(Debug)]
pub struct RangeProjection {
    /// Launch correlation -> innermost range open at the launch.
    launches: Generations<RangeId>,
    /// GPU work that arrived before its launch call.
    early_gpu: Generations<Ns>,
    /// Completed ranges in delivery order (24 B each; sorted by id once, at the end).
    ranges: Vec<RangeEntry>,
    /// Range names by index, and the index of each interned name (by pointer).
    names: Vec<Name>,
    name_index: FastMap<usize, u32>,
    /// Direct GPU time per range.
    /// as (range id, ns): a run of one range's work adds to the last entry; when the list has
    /// doubled since it was last summed per range, it is summed again (16 B per range, not a map's
    /// ~50 B with its resize).
    direct: Vec<(u64, Ns)>,
    direct_summed: usize,
    /// (ranges, their time) per name index.
    stats: Vec<(u64, u64)>,
    /// Complete range trees folded into per-chain GPU time (when the input allows it).
    fold: RangeFold,
}

/// Launches made room for at once in each generation's vector: a generation holds [`GENERATION`]
/// entries, and its vector a slot per id from its first (a ring's launches with a range take
/// nearly every id: 263,0xx slots for 262,144 entries on the generated 100 M-event job), so the
/// vector is made once and never regrown by copying (address space only until used).
const LAUNCH_ROOM: usize = GENERATION + GENERATION / 8;

/// Completed ranges made room for at the first (24 B each).
const RANGES_ROOM: usize = 1 << 12;

impl Default for RangeProjection {
    fn default() -> Self {
        RangeProjection {
            launches: Generations::with_room(LAUNCH_ROOM),
            early_gpu: Generations::default(),
            ranges: Vec::new(),
            names: Vec::new(),
            name_index: FastMap::default(),
            direct: Vec::new(),
            direct_summed: 0,
            stats: Vec::new(),
            fold: RangeFold::default(),
        }
    }
}

impl RangeProjection {
    /// The input promised that ranges close in order (see [`crate::range_fold`]): complete range
    /// trees may be folded.
    pub fn ranges_close_in_order(&mut self) {
        self.fold.enabled = true;
    }

    /// Completed ranges held in the table (the folded ones are not).
    #[cfg(test)]
    pub(crate) fn ranges_held(&self) -> usize {
        self.ranges.len()
    }

    #[inline]
    pub fn api(&mut self, a: &Api) {
        let (Some(r), true) = (a.range, a.correlation != 0) else { return };
        if let Some(t) = self.early_gpu.remove(a.correlation) {
            self.add_direct(r, t);
        } else {
            self.launches.insert(a.correlation, r);
        }
    }

    pub fn collective(&mut self, c: &Collective) {
        if let (Some(r), true) = (c.range, c.correlation != 0) {
            if self.launches.get(c.correlation).is_none() {
                self.launches.insert(c.correlation, r);
            }
        }
    }

    #[inline(always)]
    pub fn gpu(&mut self, correlation: u64, dur: Ns) {
        // The usual case, inline: launched lately (in the young generation's vector), in the range
        // of the last GPU work.
        if let (Some(r), Some(last), true) =
            (self.launches.young.get_in_vector(correlation), self.direct.last_mut(), correlation != 0)
        {
            if last.0 == r.0 {
                last.1 += dur;
                return;
            }
        }
        self.gpu_any(correlation, dur);
    }

    /// [`RangeProjection::gpu`] of any GPU work.
    #[inline(never)]
    fn gpu_any(&mut self, correlation: u64, dur: Ns) {
        if correlation == 0 {
            return;
        }
        match self.launches.get(correlation) {
            Some(&r) => self.add_direct(r, dur),
            None => match self.early_gpu.get_mut(correlation) {
                Some(t) => *t += dur,
                None => self.early_gpu.insert(correlation, dur),
            },
        }
    }

    pub fn range(&mut self, r: &NvtxRange) {
        let key = crate::ptr_cache::name_key(&r.name);
        let names = &mut self.names;
        let stats = &mut self.stats;
        let name = *self.name_index.entry(key).or_insert_with(|| {
            names.push(r.name.clone());
            stats.push((0, 0));
            (names.len() - 1) as u32
        });
        let (parent, has_parent) = r.parent.map_or((0, false), |p| (p.0, true));
        if self.ranges.capacity() == 0 {
            self.ranges.reserve(RANGES_ROOM);
        }
        self.ranges.push(RangeEntry { id: r.id.0, parent, name, has_parent });
        let s = &mut self.stats[name as usize];
        s.0 += 1;
        s.1 += r.end.saturating_sub(r.start);
        if self.fold.due(self.ranges.len()) {
            self.sum_direct();
            let live = self.launches.values().map(|r| r.0);
            self.fold.fold(&mut self.ranges, &mut self.direct, &self.names, live);
            self.direct_summed = self.direct.len();
        }
    }

    #[inline(always)]
    fn add_direct(&mut self, r: RangeId, t: Ns) {
        match self.direct.last_mut() {
            Some(last) if last.0 == r.0 => last.1 += t,
            _ => self.add_direct_new(r, t),
        }
    }

    /// [`RangeProjection::add_direct`] of a range other than the last one's.
    #[inline(never)]
    fn add_direct_new(&mut self, r: RangeId, t: Ns) {
        if self.fold.add(r.0, t) {
            return;
        }
        if self.direct.capacity() == 0 {
            // As much as is held before it is first summed (see below).
            self.direct.reserve(2 << 15);
        }
        self.direct.push((r.0, t));
        if self.direct.len() >= 2 * self.direct_summed.max(1 << 15) {
            self.sum_direct();
        }
    }

    /// One entry per range.
    fn sum_direct(&mut self) {
        self.direct.sort_unstable_by_key(|e| e.0);
        self.direct.dedup_by(|later, earlier| {
            let same = later.0 == earlier.0;
            if same {
                earlier.1 += later.1;
            }
            same
        });
        self.direct_summed = self.direct.len();
    }

    /// End of the process: roll direct GPU time up the range tree (each name counted once per chain).
    pub fn finish(&mut self) -> Vec<RangeStat> {
        // No launch waits any more: their memory goes before the tables below are made.
        self.launches = Generations::default();
        self.early_gpu = Generations::default();
        // Names are told apart by their text: names interned apart with one text are one name,
        // known by the first index with that text.
        let mut first: FastMap<&str, u32> = FastMap::with_capacity_and_hasher(self.names.len(), Default::default());
        let same: Vec<u32> = (0..self.names.len()).map(|i| *first.entry(&*self.names[i]).or_insert(i as u32)).collect();
        drop(first);
        let mut gpu_of: Vec<Option<Ns>> = vec![None; self.names.len()];
        let mut seen: Vec<u32> = Vec::new();
        // By id, the last delivered of equal ids kept (as a map's insert would): through an index
        // by id when the ids are dense (as a ring's are), else sorted. Each range's direct time
        // goes to each distinct name of its chain (up to 10,001 ranges).
        let mut ranges = std::mem::take(&mut self.ranges);
        match dense_range_index(&ranges) {
            Some((first, at)) => {
                // Direct time per range (by its index), added up in place of sorting `direct`; a
                // range with none (or none that took time) adds nothing to any name.
                let index = |id: u64| match id.checked_sub(first).and_then(|d| at.get(usize::try_from(d).ok()?)) {
                    Some(&i) if i != NO_RANGE => Some(i as usize),
                    _ => None,
                };
                let mut per_range: Vec<Ns> = vec![0; ranges.len()];
                for &(rid, t) in &self.direct {
                    if let Some(i) = index(rid) {
                        per_range[i] += t;
                    }
                }
                self.direct = Vec::new();
                for (start, &t) in per_range.iter().enumerate() {
                    if t > 0 {
                        let mut next = Some(start);
                        add_up_chain(&mut gpu_of, &mut seen, t, || {
                            let e = &ranges[next?];
                            next = if e.has_parent { index(e.parent) } else { None };
                            Some(same[e.name as usize])
                        });
                    }
                }
            }
            None => {
                ranges.sort_by_key(|e| e.id);
                ranges.dedup_by(|later, earlier| {
                    let same = later.id == earlier.id;
                    if same {
                        *earlier = *later;
                    }
                    same
                });
                self.sum_direct();
                for &(rid, t) in &std::mem::take(&mut self.direct) {
                    let mut next = Some(rid);
                    add_up_chain(&mut gpu_of, &mut seen, t, || {
                        let e = &ranges[ranges.binary_search_by_key(&next?, |e| e.id).ok()?];
                        next = e.has_parent.then_some(e.parent);
                        Some(same[e.name as usize])
                    });
                }
            }
        }
        let mut gpu: FastMap<Name, Ns> = FastMap::default();
        for (i, t) in gpu_of.into_iter().enumerate() {
            if let Some(t) = t {
                gpu.insert(self.names[i].clone(), t);
            }
        }
        self.fold.finish(&self.names, &mut gpu);
        let mut stats: Vec<(u64, u64)> = vec![(0, 0); self.names.len()];
        for (i, &(count, range_ns)) in self.stats.iter().enumerate() {
            let s = &mut stats[same[i] as usize];
            s.0 += count;
            s.1 += range_ns;
        }
        let mut out: Vec<RangeStat> = (0..self.names.len())
            .filter(|&i| same[i] as usize == i)
            .map(|i| {
                let n = &self.names[i];
                let (count, range_ns) = stats[i];
                RangeStat { name: n.to_string(), count, range_ns, gpu_ns: gpu.get(n).copied().unwrap_or(0) }
            })
            .collect();
        out.sort_by(|a, b| b.gpu_ns.cmp(&a.gpu_ns).then(b.range_ns.cmp(&a.range_ns)).then(a.name.cmp(&b.name)));
        self.names = Vec::new();
        self.name_index = FastMap::default();
        self.direct = Vec::new();
        self.direct_summed = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(corr: u64, range: Option<RangeId>) -> Api {
        Api {
            proc: ProcId(0),
            tid: 1,
            domain: ApiDomain::Runtime,
            name: "cudaLaunchKernel".into(),
            start: 0,
            end: 1,
            result: 0,
            correlation: corr,
            detail: None,
            stream: 0,
            arg: 0,
            range,
            repeat: None,
        }
    }

    fn range(id: u64, parent: Option<u64>, name: &str) -> NvtxRange {
        NvtxRange {
            proc: ProcId(0),
            id: RangeId(id),
            parent: parent.map(RangeId),
            depth: parent.is_some() as u32,
            kind: RangeKind::Nvtx,
            tid: 1,
            domain: None,
            name: name.into(),
            start: 0,
            end: 100,
        }
    }

    #[test]
    fn projects_gpu_time_inclusively() {
        let mut p = RangeProjection::default();
        p.api(&api(1, Some(RangeId(2))));
        p.api(&api(2, Some(RangeId(1))));
        p.range(&range(2, Some(1), "fwd"));
        p.range(&range(1, None, "step"));
        p.gpu(1, 30);
        p.gpu(2, 5);
        p.gpu(3, 1000); // launched outside any range
        let out = p.finish();
        let get = |n: &str| out.iter().find(|s| s.name == n).unwrap().gpu_ns;
        assert_eq!(get("step"), 35);
        assert_eq!(get("fwd"), 30);
    }

    /// Ranges with dense ids (indexed) and sparse ones (sorted), repeated ids (the last delivered
    /// counts), children delivered before their parents: the same projection either way.
    #[test]
    fn dense_and_sparse_range_ids_project_alike() {
        let project = |scale: u64| {
            let mut p = RangeProjection::default();
            let id = |i: u64| 7 + i * scale;
            for i in 0..3000u64 {
                p.api(&api(i + 1, Some(RangeId(id(i)))));
            }
            for i in (0..3000u64).rev() {
                let parent = (i % 10 != 0).then(|| id(i - i % 10));
                let name = if i % 10 == 0 {
                    "outer"
                } else if i % 3 == 0 {
                    "a"
                } else {
                    "b"
                };
                p.range(&range(id(i), parent, name));
            }
            p.range(&range(id(5), Some(id(0)), "outer"));
            for i in 0..3000u64 {
                p.gpu(i + 1, 10 + i % 7);
            }
            // More work of the same launches, out of range order, some taking no time; and work
            // whose launch never came.
            for i in (0..3000u64).rev().step_by(7) {
                p.gpu(i + 1, i % 2);
            }
            p.gpu(1 << 40, 1000);
            assert_eq!(dense_range_index(&p.ranges).is_some(), scale == 1);
            p.finish()
        };
        let dense = project(1);
        assert_eq!(dense, project(1000));
        let get = |n: &str| dense.iter().find(|s| s.name == n).unwrap().clone();
        assert_eq!((get("outer").count, get("a").count + get("b").count), (301, 2700));
        // Every chain ends in an "outer" range.
        let more: u64 = (0..3000u64).rev().step_by(7).map(|i| i % 2).sum();
        assert_eq!(get("outer").gpu_ns, (0..3000u64).map(|i| 10 + i % 7).sum::<u64>() + more);
        let entries = |n: u64, scale: u64| -> Vec<RangeEntry> {
            (0..n).map(|i| RangeEntry { id: i * scale, parent: 0, name: 0, has_parent: false }).collect()
        };
        assert!(dense_range_index(&entries(3000, 1)).is_some());
        assert!(dense_range_index(&entries(3000, 1000)).is_none());
    }
}
