//! Interval arithmetic on sorted, disjoint `(start, end)` lists (GPU busy time, overlaps).

use crate::model::Ns;

/// Union of intervals (any order) as a sorted disjoint list.
pub fn union(mut v: Vec<(Ns, Ns)>) -> Vec<(Ns, Ns)> {
    v.sort_unstable();
    let mut out: Vec<(Ns, Ns)> = Vec::with_capacity(v.len() / 2 + 1);
    for (s, e) in v {
        if e <= s {
            continue;
        }
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Merge two sorted disjoint lists into their union.
pub fn union2(a: &[(Ns, Ns)], b: &[(Ns, Ns)]) -> Vec<(Ns, Ns)> {
    let mut v = Vec::with_capacity(a.len() + b.len());
    v.extend_from_slice(a);
    v.extend_from_slice(b);
    union(v)
}

/// Total length of a sorted disjoint list inside `[lo, hi)`.
pub fn measure_in(list: &[(Ns, Ns)], lo: Ns, hi: Ns) -> Ns {
    let first = list.partition_point(|x| x.1 <= lo);
    let mut total = 0;
    for &(s, e) in &list[first..] {
        if s >= hi {
            break;
        }
        total += e.min(hi).saturating_sub(s.max(lo));
    }
    total
}

/// Total length of a sorted disjoint list.
pub fn measure(list: &[(Ns, Ns)]) -> Ns {
    list.iter().map(|(s, e)| e - s).sum()
}

/// Length of `a ∩ b` inside `[lo, hi)`, both sorted and disjoint.
pub fn intersect_in(a: &[(Ns, Ns)], b: &[(Ns, Ns)], lo: Ns, hi: Ns) -> Ns {
    let mut i = a.partition_point(|x| x.1 <= lo);
    let mut j = b.partition_point(|x| x.1 <= lo);
    let mut total = 0;
    while i < a.len() && j < b.len() {
        let (s1, e1) = a[i];
        let (s2, e2) = b[j];
        if s1 >= hi || s2 >= hi {
            break;
        }
        let s = s1.max(s2).max(lo);
        let e = e1.min(e2).min(hi);
        if e > s {
            total += e - s;
        }
        if e1 < e2 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic() {
        let a = union(vec![(5, 10), (0, 3), (2, 4), (10, 12)]);
        assert_eq!(a, vec![(0, 4), (5, 12)]);
        assert_eq!(measure(&a), 11);
        assert_eq!(measure_in(&a, 3, 6), 2);
        let b = union(vec![(3, 6), (11, 20)]);
        assert_eq!(intersect_in(&a, &b, 0, 100), 1 + 1 + 1);
        assert_eq!(intersect_in(&a, &b, 0, 5), 1);
        assert_eq!(measure(&union2(&a, &b)), 20);
    }
}
