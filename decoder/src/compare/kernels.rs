//! Kernels of two runs matched by name: demangled, with the template noise normalised away
//! (template arguments, parameter lists, a leading return type), so that
//! `void at::native::vectorized_elementwise_kernel<4, FillFunctor<float>>(int, ...)` of one build
//! and `... <8, FillFunctor<c10::Half>> ...` of another are one kernel. Counts and times are per
//! step and rank, so runs of different lengths and rank counts compare.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::summary::NameRow;

/// A kernel's name with template arguments and parameters removed.
pub fn normalise(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut depth_angle = 0usize;
    let mut depth_paren = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth_angle += 1,
            '>' if depth_angle > 0 => depth_angle -= 1,
            '(' if depth_angle == 0 => depth_paren += 1,
            ')' if depth_angle == 0 && depth_paren > 0 => depth_paren -= 1,
            _ if depth_angle == 0 && depth_paren == 0 => out.push(c),
            _ => {}
        }
    }
    let mut s = out.split_whitespace().collect::<Vec<_>>().join(" ");
    // A leading return type ("void ns::kernel").
    if let Some(rest) = s.strip_prefix("void ") {
        s = rest.to_string();
    }
    if s.is_empty() {
        name.to_string()
    } else {
        s
    }
}

/// One kernel's per-step, per-rank figures in one run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct KernelFigures {
    /// Launches per step and rank.
    pub count_per_step: f64,
    /// GPU time per step and rank, ns.
    pub ns_per_step: f64,
    /// Mean time of one launch, ns.
    pub mean_ns: f64,
}

/// A kernel in either run.
#[derive(Debug, Clone, Serialize)]
pub struct KernelDiff {
    pub name: String,
    pub base: Option<KernelFigures>,
    pub new: Option<KernelFigures>,
    /// `new - base` GPU time per step and rank, ns (a missing side counts 0).
    pub change_ns_per_step: f64,
}

/// The kernel section of a comparison.
#[derive(Debug, Clone, Default, Serialize)]
pub struct KernelsDiff {
    /// In NEW only, by time.
    pub new: Vec<KernelDiff>,
    /// In BASE only, by time.
    pub gone: Vec<KernelDiff>,
    /// In both, whose count or time per step changed by more than 5%, largest change first.
    pub changed: Vec<KernelDiff>,
}

/// A relative change larger than this is a change.
const CHANGED: f64 = 0.05;
/// Rows kept per list.
const MAX_ROWS: usize = 20;

/// `per` = steps x ranks of the run (at least 1).
fn figures(rows: &[NameRow], per: f64) -> BTreeMap<String, KernelFigures> {
    let mut acc: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    for r in rows {
        let e = acc.entry(normalise(&r.name)).or_default();
        e.0 += r.count;
        e.1 += r.total_ns;
    }
    acc.into_iter()
        .map(|(name, (count, total))| {
            let f = KernelFigures {
                count_per_step: count as f64 / per,
                ns_per_step: total as f64 / per,
                mean_ns: if count == 0 { 0.0 } else { total as f64 / count as f64 },
            };
            (name, f)
        })
        .collect()
}

fn rel(a: f64, b: f64) -> f64 {
    if a == 0.0 {
        if b == 0.0 {
            0.0
        } else {
            f64::INFINITY
        }
    } else {
        (b - a).abs() / a
    }
}

/// Compares the kernel tables; `base_per` / `new_per` are each run's steps x ranks.
pub fn compare(base: &[NameRow], base_per: f64, new: &[NameRow], new_per: f64) -> KernelsDiff {
    let b = figures(base, base_per.max(1.0));
    let n = figures(new, new_per.max(1.0));
    let mut d = KernelsDiff::default();
    for (name, nf) in &n {
        match b.get(name) {
            None => d.new.push(KernelDiff {
                name: name.clone(),
                base: None,
                new: Some(*nf),
                change_ns_per_step: nf.ns_per_step,
            }),
            Some(bf) => {
                if rel(bf.ns_per_step, nf.ns_per_step) > CHANGED || rel(bf.count_per_step, nf.count_per_step) > CHANGED
                {
                    d.changed.push(KernelDiff {
                        name: name.clone(),
                        base: Some(*bf),
                        new: Some(*nf),
                        change_ns_per_step: nf.ns_per_step - bf.ns_per_step,
                    });
                }
            }
        }
    }
    for (name, bf) in &b {
        if !n.contains_key(name) {
            d.gone.push(KernelDiff {
                name: name.clone(),
                base: Some(*bf),
                new: None,
                change_ns_per_step: -bf.ns_per_step,
            });
        }
    }
    for list in [&mut d.new, &mut d.gone, &mut d.changed] {
        list.sort_by(|x, y| {
            y.change_ns_per_step.abs().total_cmp(&x.change_ns_per_step.abs()).then(x.name.cmp(&y.name))
        });
        list.truncate(MAX_ROWS);
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, count: u64, total_ns: u64) -> NameRow {
        NameRow { name: name.into(), count, total_ns, avg_ns: 0, min_ns: 0, max_ns: 0, pct: 0.0 }
    }

    #[test]
    fn template_noise_is_normalised() {
        assert_eq!(
            normalise("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)"),
            "at::native::vectorized_elementwise_kernel"
        );
        assert_eq!(normalise("ampere_sgemm_128x64_tn"), "ampere_sgemm_128x64_tn");
        assert_eq!(normalise("gemm(float*, float*, float*, int)"), "gemm");
        assert_eq!(
            normalise("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"),
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL"
        );
    }

    #[test]
    fn new_gone_and_changed_per_step() {
        // BASE: 10 steps x 2 ranks; NEW: 20 steps x 1 rank. Per step and rank: k1 same, k2 twice
        // as long, k3 gone, k4 new; two template instances of k5 are one kernel.
        let base = [
            row("k1(int)", 20, 20_000),
            row("k2", 20, 40_000),
            row("k3", 20, 1_000),
            row("void k5<float>(float*)", 20, 10_000),
        ];
        let new = [
            row("k1(int)", 20, 20_000),
            row("k2", 20, 80_000),
            row("k4", 40, 4_000),
            row("void k5<float>(float*)", 10, 5_000),
            row("void k5<half>(half*)", 10, 5_000),
        ];
        let d = compare(&base, 20.0, &new, 20.0);
        assert_eq!(d.new.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["k4"]);
        assert_eq!(d.gone.iter().map(|k| k.name.as_str()).collect::<Vec<_>>(), ["k3"]);
        assert_eq!(d.changed.len(), 1, "{:?}", d.changed);
        assert_eq!(d.changed[0].name, "k2");
        assert_eq!(d.changed[0].change_ns_per_step, 2000.0);
        assert_eq!(d.new[0].new.unwrap().count_per_step, 2.0);
    }
}
