//! The statistics of a comparison: order statistics of step times, the Mann-Whitney U test (are
//! NEW's steps drawn from a distribution shifted against BASE's?) and a bootstrap confidence
//! interval of the change of the median. Steps are the samples.

use crate::xorshift::XorShift;

/// The `q` quantile (0..1) of sorted `v` (nearest rank); 0 when empty.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q.clamp(0.0, 1.0)).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

pub fn median(sorted: &[f64]) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

/// Two-sided p-value of the Mann-Whitney U test of `a` against `b` (normal approximation with
/// the tie correction and a continuity correction); 1 when either has fewer than 3 samples.
pub fn mann_whitney_p(a: &[f64], b: &[f64]) -> f64 {
    let (n1, n2) = (a.len(), b.len());
    if n1 < 3 || n2 < 3 {
        return 1.0;
    }
    let mut all: Vec<(f64, bool)> = a.iter().map(|&x| (x, true)).chain(b.iter().map(|&x| (x, false))).collect();
    all.sort_by(|x, y| x.0.total_cmp(&y.0));
    let n = all.len();
    let mut rank_sum_a = 0.0;
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < n {
        let mut j = i;
        while j + 1 < n && all[j + 1].0 == all[i].0 {
            j += 1;
        }
        let rank = (i + j) as f64 / 2.0 + 1.0;
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        rank_sum_a += all[i..=j].iter().filter(|x| x.1).count() as f64 * rank;
        i = j + 1;
    }
    let (n1f, n2f, nf) = (n1 as f64, n2 as f64, n as f64);
    let u = rank_sum_a - n1f * (n1f + 1.0) / 2.0;
    let mu = n1f * n2f / 2.0;
    let var = n1f * n2f / 12.0 * ((nf + 1.0) - tie_term / (nf * (nf - 1.0)));
    if var <= 0.0 {
        return 1.0;
    }
    let z = ((u - mu).abs() - 0.5).max(0.0) / var.sqrt();
    (2.0 * normal_upper_tail(z)).min(1.0)
}

/// P(Z > z) of the standard normal distribution (Abramowitz-Stegun 7.1.26 through erfc).
fn normal_upper_tail(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

fn erfc(x: f64) -> f64 {
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    let t = 1.0 / (1.0 + 0.3275911 * x);
    let poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
    poly * (-x * x).exp()
}

/// 95% bootstrap interval of `median(b) - median(a)` (percentile method, `rounds` resamples with
/// a fixed seed: the same inputs give the same interval).
pub fn bootstrap_median_change(a: &[f64], b: &[f64], rounds: usize) -> (f64, f64) {
    if a.is_empty() || b.is_empty() {
        return (0.0, 0.0);
    }
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut buf_a = vec![0.0; a.len()];
    let mut buf_b = vec![0.0; b.len()];
    let mut diffs = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        for x in buf_a.iter_mut() {
            *x = a[rng.index(a.len())];
        }
        for x in buf_b.iter_mut() {
            *x = b[rng.index(b.len())];
        }
        buf_a.sort_by(f64::total_cmp);
        buf_b.sort_by(f64::total_cmp);
        diffs.push(median(&buf_b) - median(&buf_a));
    }
    diffs.sort_by(f64::total_cmp);
    (quantile(&diffs, 0.025), quantile(&diffs, 0.975))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let v = sorted(&[5.0, 1.0, 3.0, 2.0, 4.0]);
        assert_eq!(median(&v), 3.0);
        assert_eq!(quantile(&v, 0.9), 5.0);
        assert_eq!(median(&[1.0, 2.0]), 1.5);
    }

    #[test]
    fn mann_whitney_tells_a_shift_from_noise() {
        // Same distribution (interleaved values): no evidence of a shift.
        let a: Vec<f64> = (0..100).map(|i| 100.0 + (i * 37 % 17) as f64).collect();
        let b: Vec<f64> = (0..100).map(|i| 100.0 + (i * 53 % 17) as f64).collect();
        assert!(mann_whitney_p(&a, &b) > 0.2, "{}", mann_whitney_p(&a, &b));
        // Shifted by 10 (the spread is 17): decisive.
        let c: Vec<f64> = b.iter().map(|x| x + 10.0).collect();
        assert!(mann_whitney_p(&a, &c) < 1e-6, "{}", mann_whitney_p(&a, &c));
        // Textbook value: a = 1..5, b = 6..10, U = 0: p = 0.0122 (normal approx., continuity).
        let p = mann_whitney_p(&[1.0, 2.0, 3.0, 4.0, 5.0], &[6.0, 7.0, 8.0, 9.0, 10.0]);
        assert!((p - 0.0122).abs() < 0.002, "{p}");
    }

    #[test]
    fn bootstrap_interval_covers_the_shift() {
        let a: Vec<f64> = (0..200).map(|i| 50.0 + (i % 10) as f64).collect();
        let b: Vec<f64> = a.iter().map(|x| x + 7.0).collect();
        let (lo, hi) = bootstrap_median_change(&a, &b, 500);
        assert!(lo <= 7.0 && hi >= 7.0 && lo > 4.0 && hi < 10.0, "{lo}..{hi}");
    }
}
