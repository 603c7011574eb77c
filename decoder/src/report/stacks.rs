//! The names of NVTX range stacks ("outer;inner") for the flame graph: each completed range's
//! name and parent, and a memoized stack id per range whose chain is known.

use std::collections::HashMap;

use super::collect::frame_name;
use super::id_window::IdWindow;
use crate::intervals::FastMap;
use crate::model::{Name, RangeId};
use crate::ptr_cache::name_key;

/// Most ranges walked up from a kernel's range to name its stack.
const MAX_STACK_DEPTH: usize = 64;
/// The parent "stack" of outermost ranges in [`StackNames::children`].
const ROOT: u32 = u32::MAX;
/// [`RangeEntry::stack`] of a range whose stack is not named yet.
const UNNAMED: u32 = u32::MAX;

/// What is known of one range.
#[derive(Debug, Clone)]
struct RangeEntry {
    /// Its name, once it completed (None: only its stack is known, named at the end).
    name: Option<Name>,
    parent: Option<RangeId>,
    /// Its stack id, once its chain is known, else [`UNNAMED`].
    stack: u32,
}

/// Completed ranges and the stacks named from them.
#[derive(Debug, Default)]
pub struct RangeStacks {
    ranges: IdWindow<RangeEntry>,
    names: StackNames,
    /// Scratch for [`RangeStacks::stack_of`]: the ranges walked up, innermost first.
    walk: Vec<RangeId>,
}

/// The distinct stacks, by id.
#[derive(Debug, Default)]
struct StackNames {
    /// Distinct stacks ("range;range"), by id, with their number of frames.
    stacks: Vec<(String, usize)>,
    stack_ids: HashMap<String, u32>,
    /// The stack one range deeper: (stack id or [`ROOT`], range name pointer) -> (the name, stack id).
    children: FastMap<(u32, usize), (Name, u32)>,
}

impl StackNames {
    /// The id of a stack of `frames` frames.
    fn stack_id(&mut self, stack: String, frames: usize) -> u32 {
        if let Some(&i) = self.stack_ids.get(&stack) {
            return i;
        }
        let i = self.stacks.len() as u32;
        self.stacks.push((stack.clone(), frames));
        self.stack_ids.insert(stack, i);
        i
    }

    /// The stack of a range named `name` inside stack `parent` (or outermost, [`ROOT`]).
    #[inline]
    fn child_stack(&mut self, parent: u32, name: &Name) -> u32 {
        match self.children.get(&(parent, name_key(name))) {
            Some(&(_, s)) => s,
            None => self.new_child_stack(parent, name),
        }
    }

    #[cold]
    #[inline(never)]
    fn new_child_stack(&mut self, parent: u32, name: &Name) -> u32 {
        let (line, frames) = match self.stacks.get(parent as usize) {
            Some((p, n)) => (format!("{p};{}", frame_name(name)), n + 1),
            None => (frame_name(name), 1),
        };
        let s = self.stack_id(line, frames);
        self.children.insert((parent, name_key(name)), (name.clone(), s));
        s
    }

    /// Frames of stack `s` (0 for [`ROOT`]).
    fn frames(&self, s: u32) -> usize {
        self.stacks.get(s as usize).map_or(0, |s| s.1)
    }
}

impl RangeStacks {
    /// A range completed: its name and enclosing range.
    #[inline]
    pub fn complete(&mut self, id: RangeId, name: &Name, parent: Option<RangeId>) {
        match self.ranges.get_mut(id.0) {
            Some(e) => {
                e.name = Some(name.clone());
                e.parent = parent;
            }
            None => {
                self.ranges.insert(id.0, RangeEntry { name: Some(name.clone()), parent, stack: UNNAMED });
            }
        }
    }

    /// The completed range `id`: (its entry's name, parent, stack).
    #[inline]
    fn completed(&self, id: RangeId) -> Option<&RangeEntry> {
        self.ranges.get(id.0).filter(|e| e.name.is_some())
    }

    /// The text of stack `s` ("outer;inner").
    pub fn line(&self, s: u32) -> &str {
        &self.names.stacks[s as usize].0
    }

    /// The id of a stack of `frames` frames.
    pub fn stack_id(&mut self, stack: String, frames: usize) -> u32 {
        self.names.stack_id(stack, frames)
    }

    /// Remembers `s` as the stack of range `r`.
    fn memo(&mut self, r: RangeId, s: u32) {
        match self.ranges.get_mut(r.0) {
            Some(e) => e.stack = s,
            None => {
                self.ranges.insert(r.0, RangeEntry { name: None, parent: None, stack: s });
            }
        }
    }

    /// The stack of range `r` ("outer;inner"). With `complete_only`, None while a range of the
    /// chain has not completed yet (its name and parent are still unknown); at the end, a missing
    /// range ends the chain.
    ///
    /// Walks up only to the first range whose stack is known, then names each range on the way
    /// down from its parent's stack (memoized per range); chains deeper than [`MAX_STACK_DEPTH`]
    /// and ranges that never completed take [`RangeStacks::stack_by_walk`].
    #[inline]
    pub fn stack_of(&mut self, r: RangeId, complete_only: bool) -> Option<u32> {
        match self.ranges.get(r.0) {
            Some(e) if e.stack != UNNAMED => Some(e.stack),
            _ => self.stack_down(r, complete_only),
        }
    }

    /// [`RangeStacks::stack_of`] for a range without a known stack.
    #[inline(never)]
    fn stack_down(&mut self, r: RangeId, complete_only: bool) -> Option<u32> {
        let mut chain = std::mem::take(&mut self.walk);
        chain.clear();
        let s = self.stack_down_with(r, complete_only, &mut chain);
        self.walk = chain;
        s
    }

    /// [`RangeStacks::stack_down`], `chain` empty.
    fn stack_down_with(&mut self, r: RangeId, complete_only: bool, chain: &mut Vec<RangeId>) -> Option<u32> {
        let mut id = r;
        let base = loop {
            if chain.len() == MAX_STACK_DEPTH {
                return self.stack_by_walk(r, complete_only);
            }
            let Some(e) = self.completed(id) else {
                if complete_only {
                    return None;
                }
                if chain.is_empty() {
                    return self.stack_by_walk(r, complete_only);
                }
                // At the end, a range that never completed ends the chain.
                break ROOT;
            };
            if !chain.is_empty() && e.stack != UNNAMED {
                break e.stack;
            }
            chain.push(id);
            match e.parent {
                Some(p) => id = p,
                None => break ROOT,
            }
        };
        if self.names.frames(base) + chain.len() > MAX_STACK_DEPTH {
            return self.stack_by_walk(r, complete_only);
        }
        let mut s = base;
        for id in chain.drain(..).rev() {
            // Every range of the chain completed.
            if let Some(RangeEntry { name: Some(name), stack, .. }) = self.ranges.get_mut(id.0) {
                s = self.names.child_stack(s, name);
                *stack = s;
            }
        }
        Some(s)
    }

    /// [`RangeStacks::stack_of`] by walking the whole chain up from `r`.
    fn stack_by_walk(&mut self, r: RangeId, complete_only: bool) -> Option<u32> {
        if complete_only && !self.chain_complete(r) {
            return None;
        }
        let mut id = r;
        let mut names: Vec<String> = Vec::new();
        let mut complete = false;
        for _ in 0..MAX_STACK_DEPTH {
            match self.completed(id) {
                Some(e) => {
                    names.push(frame_name(e.name.as_deref().unwrap_or_default()));
                    match e.parent {
                        Some(p) => id = p,
                        None => {
                            complete = true;
                            break;
                        }
                    }
                }
                None => break,
            }
        }
        if names.len() == MAX_STACK_DEPTH {
            complete = true;
        }
        if complete_only && !complete {
            return None;
        }
        if names.is_empty() {
            names.push("(unfinished range)".into());
        }
        names.reverse();
        let frames = names.len();
        let s = self.names.stack_id(names.join(";"), frames);
        self.memo(r, s);
        Some(s)
    }

    /// True when every range of `r`'s chain (up to [`MAX_STACK_DEPTH`]) has completed.
    fn chain_complete(&self, r: RangeId) -> bool {
        let mut id = r;
        for _ in 0..MAX_STACK_DEPTH {
            match self.completed(id) {
                Some(RangeEntry { parent: Some(p), .. }) => id = *p,
                Some(_) => return true,
                None => return false,
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::xorshift::XorShift;

    type Completed = std::collections::HashMap<RangeId, (Name, Option<RangeId>)>;

    /// The stack of `r` by walking its whole chain, in stacks that know only the ranges.
    fn walked(completed: &Completed, r: RangeId, complete_only: bool) -> Option<String> {
        let mut fresh = RangeStacks::default();
        for (&id, (name, parent)) in completed {
            fresh.complete(id, name, *parent);
        }
        fresh.stack_by_walk(r, complete_only).map(|s| fresh.line(s).to_string())
    }

    #[test]
    fn memoized_stacks_name_ranges_as_the_whole_walk_does() {
        let mut rng = XorShift(0x2545_f491_4f6c_dd1d);
        let names: Vec<Name> =
            ["step", "fwd", "layer;0", "attn", "mlp", "bwd", "x"].iter().map(|&n| n.into()).collect();
        for round in 0..30 {
            // A forest: each range opens inside a random open range (or none), some chains deeper
            // than MAX_STACK_DEPTH; ranges complete innermost first, a few never.
            let n = 300;
            let mut parent: Vec<Option<usize>> = Vec::new();
            let mut depth: Vec<usize> = Vec::new();
            for i in 0..n {
                // Every third round, long chains.
                let deep = round % 3 == 0;
                let p = match rng.below(100) {
                    _ if i == 0 => None,
                    0 => None,
                    1..=9 if !deep => None,
                    1..=90 if deep => Some(i - 1),
                    _ => Some(rng.below(i as u64) as usize),
                };
                depth.push(p.map_or(0, |p| depth[p] + 1));
                parent.push(p);
            }
            let mut order: Vec<usize> = (0..n).collect();
            let jitter: Vec<u64> = (0..n).map(|_| rng.below(4)).collect();
            order.sort_by_key(|&i| (std::cmp::Reverse(depth[i]), jitter[i]));
            let mut c = RangeStacks::default();
            let mut completed = Completed::new();
            for (k, &i) in order.iter().enumerate() {
                if rng.below(40) == 0 {
                    continue; // never completes
                }
                let name = names[rng.below(names.len() as u64) as usize].clone();
                let p = parent[i].map(|p| RangeId(p as u64));
                c.complete(RangeId(i as u64), &name, p);
                completed.insert(RangeId(i as u64), (name, p));
                for _ in 0..3 {
                    let r = RangeId(rng.below(n as u64));
                    let got = c.stack_of(r, true).map(|s| c.line(s).to_string());
                    assert_eq!(got, walked(&completed, r, true), "round {round} step {k} range {r:?}");
                }
            }
            for i in 0..n {
                let r = RangeId(i as u64);
                let got = c.stack_of(r, false).map(|s| c.line(s).to_string());
                assert_eq!(got, walked(&completed, r, false), "round {round} end, range {r:?}");
            }
        }
    }
}
