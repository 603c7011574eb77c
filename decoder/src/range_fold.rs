//! Folding finished range trees of [`crate::correlate::RangeProjection`] into per-chain GPU time,
//! so that its memory holds the open ranges and the launches still waiting for GPU work, not every
//! range of the trace.
//!
//! What the projection reports per name is the GPU time of the work launched inside ranges of that
//! name, each name counted once per chain of ancestors. So a range only matters through its chain:
//! the set of distinct names from it up to its root. Once a range's tree is complete (its root has
//! arrived), its chain is final: its GPU time so far is added to each name of the chain, and the
//! range is kept only as a pointer to its chain (a list of names) while a launch inside it may
//! still see GPU work (while the launch map holds a launch naming it). Its entry is dropped. So
//! memory holds the open trees, the chains of the launches still waiting, and a total per name.
//!
//! That is exact only when the input promises ([`TraceSink::handle_ranges_close_in_order`]):
//! range ids are unique, each range arrives after every API call and collective inside it and
//! after its children, before its parent. The Kineto import keeps that promise when the trace
//! nests properly; ring files do not make it, and nothing is folded for them.
//!
//! [`TraceSink::handle_ranges_close_in_order`]: crate::model::TraceSink::handle_ranges_close_in_order

use crate::intervals::FastMap;
use crate::model::{Name, Ns};

/// One completed range as the projection keeps it: its id, its parent's id (when `has_parent`)
/// and its name's index.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RangeEntry {
    pub id: u64,
    pub parent: u64,
    pub name: u32,
    pub has_parent: bool,
}

/// Longest chain the projection's walk follows (its hop limit); a deeper tree is not folded.
pub(crate) const MAX_CHAIN: usize = 10_001;

/// Ranges delivered between two folds.
const FOLD_EVERY: usize = 1 << 17;

/// Not computed yet / an ancestor has not arrived (no final chain) / a root's parent.
const UNSEEN: u32 = u32::MAX;
const OPEN: u32 = u32::MAX - 1;
const ROOT: u32 = u32::MAX - 2;

/// A chain node: (parent node or ROOT, name index).
type Node = (u32, u32);

/// The folded part of the projection.
#[derive(Debug, Default)]
pub(crate) struct RangeFold {
    /// On when the input made its promise; off again if a tree is deeper than [`MAX_CHAIN`].
    pub enabled: bool,
    /// Folded GPU time per name index (names equal by text may have several indices).
    gpu: FastMap<u32, Ns>,
    /// The chains (distinct names) that folded ranges still named by a launch have, and the GPU
    /// time added to each since the last fold.
    chains: Vec<(Vec<u32>, Ns)>,
    /// Folded ranges that a launch still names -> their chain.
    resolved: FastMap<u64, u32>,
    /// Fold when the range table holds this many.
    next: usize,
}

impl RangeFold {
    /// Adds `t` to range `r`'s chain when `r` was folded; false when it was not.
    #[inline]
    pub fn add(&mut self, r: u64, t: Ns) -> bool {
        if self.resolved.is_empty() {
            return false;
        }
        match self.resolved.get(&r) {
            Some(&c) => {
                self.chains[c as usize].1 += t;
                true
            }
            None => false,
        }
    }

    /// Whether the range table has grown enough since the last fold.
    #[inline]
    pub fn due(&self, ranges: usize) -> bool {
        self.enabled && ranges >= self.next.max(FOLD_EVERY)
    }

    /// Folds every complete tree of `ranges` (in any order; left sorted by id): their ranges' time
    /// in `direct` (one entry per range, sorted by id) goes to their names and leaves `direct`;
    /// the ranges that `live` (the range ids the launch map holds) names keep their chains, the
    /// rest are forgotten.
    pub fn fold(
        &mut self,
        ranges: &mut Vec<RangeEntry>,
        direct: &mut Vec<(u64, Ns)>,
        names: &[Name],
        live: impl Iterator<Item = u64>,
    ) {
        ranges.sort_unstable_by_key(|e| e.id);
        let Some((node, nodes)) = nodes_of(ranges) else {
            self.enabled = false;
            return;
        };
        self.flush();
        let find = |id: u64| ranges.binary_search_by_key(&id, |e| e.id).ok();
        let complete = |id: u64| find(id).map(|i| node[i]).filter(|&c| c < ROOT);
        // Time per node of this fold, then per name.
        let mut node_gpu = vec![0 as Ns; nodes.len()];
        direct.retain(|&(r, t)| match complete(r) {
            Some(c) => {
                node_gpu[c as usize] += t;
                false
            }
            None => true,
        });
        let mut chain = Vec::new();
        for (c, &t) in node_gpu.iter().enumerate() {
            if t > 0 {
                chain_names(&nodes, c as u32, names, &mut chain);
                for &n in &chain {
                    *self.gpu.entry(n).or_default() += t;
                }
            }
        }
        // Launches naming a range folded now or before keep its chain (the chains are copied anew).
        let old = std::mem::take(&mut self.chains);
        let mut old_new: FastMap<u32, u32> = FastMap::default();
        let mut node_new: FastMap<u32, u32> = FastMap::default();
        let mut resolved: FastMap<u64, u32> = FastMap::default();
        for r in live {
            let c = if let Some(&o) = self.resolved.get(&r) {
                *old_new.entry(o).or_insert_with(|| {
                    self.chains.push((old[o as usize].0.clone(), 0));
                    (self.chains.len() - 1) as u32
                })
            } else if let Some(n) = complete(r) {
                *node_new.entry(n).or_insert_with(|| {
                    let mut ch = Vec::new();
                    chain_names(&nodes, n, names, &mut ch);
                    self.chains.push((ch, 0));
                    (self.chains.len() - 1) as u32
                })
            } else {
                continue;
            };
            resolved.insert(r, c);
        }
        self.resolved = resolved;
        let mut i = 0;
        ranges.retain(|_| {
            i += 1;
            node[i - 1] == OPEN
        });
        self.next = ranges.len() + FOLD_EVERY;
    }

    /// The time added to the chains since the last fold, to their names.
    fn flush(&mut self) {
        for (ch, t) in &mut self.chains {
            if *t > 0 {
                for &n in ch.iter() {
                    *self.gpu.entry(n).or_default() += *t;
                }
                *t = 0;
            }
        }
    }

    /// The folded GPU time, added to each name's.
    pub fn finish(&mut self, names: &[Name], gpu: &mut FastMap<Name, Ns>) {
        self.flush();
        for (n, t) in std::mem::take(&mut self.gpu) {
            *gpu.entry(names[n as usize].clone()).or_default() += t;
        }
        self.chains = Vec::new();
        self.resolved = FastMap::default();
    }
}

/// A node per distinct (parent node, name) of the complete trees of `ranges` (sorted by id): for
/// each range its node (OPEN where an ancestor is missing), and the nodes as (parent node or ROOT,
/// name). None when a tree is deeper than [`MAX_CHAIN`] (or loops).
fn nodes_of(ranges: &[RangeEntry]) -> Option<(Vec<u32>, Vec<Node>)> {
    let mut node = vec![UNSEEN; ranges.len()];
    let mut depth = vec![0u32; ranges.len()];
    let mut nodes: Vec<Node> = Vec::new();
    let mut index: FastMap<(u32, u32), u32> = FastMap::default();
    let mut path: Vec<usize> = Vec::new();
    for start in 0..ranges.len() {
        // Up to a range whose node is known, a root, or a missing parent.
        path.clear();
        let mut i = start;
        let (above, mut d) = loop {
            if node[i] != UNSEEN {
                break (node[i], depth[i]);
            }
            path.push(i);
            if path.len() > MAX_CHAIN {
                return None;
            }
            let e = &ranges[i];
            if !e.has_parent {
                break (ROOT, 0);
            }
            match ranges.binary_search_by_key(&e.parent, |p| p.id) {
                Ok(p) => i = p,
                Err(_) => break (OPEN, 0),
            }
        };
        // The projection's walk follows at most MAX_CHAIN ranges: a tree is folded only when
        // that walk would have seen all of it.
        let mut c = above;
        for &j in path.iter().rev() {
            d += 1;
            if c != OPEN {
                if d as usize > MAX_CHAIN {
                    return None;
                }
                let key = (c, ranges[j].name);
                c = *index.entry(key).or_insert_with(|| {
                    nodes.push(key);
                    (nodes.len() - 1) as u32
                });
            }
            node[j] = c;
            depth[j] = d;
        }
    }
    Some((node, nodes))
}

/// The distinct names (by text) from node `c` up to its root, into `out`.
fn chain_names(nodes: &[Node], mut c: u32, names: &[Name], out: &mut Vec<u32>) {
    out.clear();
    while c < ROOT {
        let (parent, n) = nodes[c as usize];
        if !out.iter().any(|&m| names[m as usize] == names[n as usize]) {
            out.push(n);
        }
        c = parent;
    }
}

#[cfg(test)]
mod tests {
    use crate::correlate::{RangeProjection, RangeStat};
    use crate::model::*;

    /// Step `s` (a root range named "step" or, for every 1000th, "slow step") holds op "a" with an
    /// op "a" inside it and op "b"; each op launches one kernel (correlation = its range id) whose
    /// GPU work arrives `lag` steps after the step closed. Fed in the promised order.
    fn run(steps: u64, lag: u64, fold: bool) -> (Vec<RangeStat>, usize) {
        let mut p = RangeProjection::default();
        if fold {
            p.ranges_close_in_order();
        }
        let names: Vec<Name> = ["step", "slow step", "a", "b"].iter().map(|&n| Name::from(n)).collect();
        let range = |id: u64, parent: Option<u64>, name: &Name, dur: Ns| NvtxRange {
            proc: ProcId(0),
            id: RangeId(id),
            parent: parent.map(RangeId),
            depth: 0,
            kind: RangeKind::CpuOp,
            tid: 1,
            domain: None,
            name: name.clone(),
            start: 0,
            end: dur,
        };
        let api = |corr: u64| Api {
            proc: ProcId(0),
            tid: 1,
            domain: ApiDomain::CuptiRuntime,
            name: "cudaLaunchKernel".into(),
            start: 0,
            end: 1,
            result: 0,
            correlation: corr,
            detail: None,
            stream: 0,
            arg: 0,
            range: Some(RangeId(corr)),
            repeat: None,
        };
        let mut held = 0;
        for s in 0..steps + lag {
            if s < steps {
                let (root, a, inner, b) = (4 * s, 4 * s + 1, 4 * s + 2, 4 * s + 3);
                for c in [inner, a, b] {
                    p.api(&api(c));
                }
                p.range(&range(inner, Some(a), &names[2], 1));
                p.range(&range(a, Some(root), &names[2], 3));
                p.range(&range(b, Some(root), &names[3], 2));
                p.range(&range(root, None, &names[if s % 1000 == 0 { 1 } else { 0 }], 10));
            }
            if s >= lag {
                let d = s - lag;
                // GPU ns: inner 1, a 10, b 100 (per step).
                p.gpu(4 * d + 2, 1);
                p.gpu(4 * d + 1, 10);
                p.gpu(4 * d + 3, 100);
            }
            held = held.max(p.ranges_held());
        }
        (p.finish(), held)
    }

    #[test]
    fn folding_keeps_the_numbers_and_drops_the_ranges() {
        let steps = 100_000;
        for lag in [0, 3, 50_000] {
            let (folded, held) = run(steps, lag, true);
            let (plain, all) = run(steps, lag, false);
            assert_eq!(folded, plain, "lag {lag}");
            assert_eq!(all, 4 * steps as usize);
            assert!(held < (1 << 17) + 8, "lag {lag}: {held} ranges held");
            let gpu = |n: &str| folded.iter().find(|r| r.name == n).map(|r| (r.count, r.gpu_ns));
            assert_eq!(gpu("a"), Some((2 * steps, 11 * steps)), "lag {lag}");
            assert_eq!(gpu("b"), Some((steps, 100 * steps)));
            assert_eq!(gpu("slow step"), Some((steps / 1000, 111 * steps / 1000)));
            assert_eq!(gpu("step"), Some((steps - steps / 1000, 111 * (steps - steps / 1000))));
        }
    }
}
