//! Divergences between distributions, shared by [anomaly detection](crate::anomaly) and
//! [phase detection](crate::phase).

/// The Jensen–Shannon divergence of two distributions over the same categories, in bits
/// (0 for identical mixes, 1 for mixes with no category in common).
///
/// `p` and `q` are counts or weights; each is normalised by its own sum, so they need not add up
/// to one. A side that sums to zero (or holds no finite positive weight) gives 0: there is
/// nothing to compare. Slices of different lengths are compared over the longer one, the
/// missing entries taken as zero.
pub fn jensen_shannon_bits(p: &[f64], q: &[f64]) -> f64 {
    js_terms(p, q).iter().sum::<f64>().clamp(0.0, 1.0)
}

/// The Jensen–Shannon divergence split by category: entry `i` is category `i`'s share of
/// [`jensen_shannon_bits`], never negative, so the terms add up to the divergence and say which
/// categories make two mixes differ.
pub fn js_terms(p: &[f64], q: &[f64]) -> Vec<f64> {
    let n = p.len().max(q.len());
    let weight = |x: &[f64], i: usize| x.get(i).copied().filter(|v| v.is_finite() && *v > 0.0).unwrap_or(0.0);
    let sum_p: f64 = (0..n).map(|i| weight(p, i)).sum();
    let sum_q: f64 = (0..n).map(|i| weight(q, i)).sum();
    if sum_p <= 0.0 || sum_q <= 0.0 {
        return vec![0.0; n];
    }
    (0..n)
        .map(|i| {
            let a = weight(p, i) / sum_p;
            let b = weight(q, i) / sum_q;
            let m = (a + b) / 2.0;
            let half = |x: f64| if x > 0.0 { 0.5 * x * (x / m).log2() } else { 0.0 };
            (half(a) + half(b)).max(0.0)
        })
        .collect()
}

/// Cliff's delta of two samples: P(x > y) − P(x < y) for `x` drawn from `xs` and `y` from `ys`,
/// from −1 (every x below every y) through 0 (no tendency) to 1 (every x above every y).
/// Both slices must be sorted ascending; an empty side gives 0.
pub fn cliffs_delta(xs_sorted: &[u64], ys_sorted: &[u64]) -> f64 {
    if xs_sorted.is_empty() || ys_sorted.is_empty() {
        return 0.0;
    }
    let (mut above, mut below) = (0u128, 0u128);
    for &x in xs_sorted {
        let lower = ys_sorted.partition_point(|&y| y < x);
        let upper = ys_sorted.partition_point(|&y| y <= x);
        above += lower as u128;
        below += (ys_sorted.len() - upper) as u128;
    }
    let pairs = xs_sorted.len() as f64 * ys_sorted.len() as f64;
    (above as f64 - below as f64) / pairs
}

/// The median of sorted values (the mean of the middle two for an even count); `None` when
/// empty.
pub fn median_sorted(sorted: &[u64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2] as f64),
        _ => Some((sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0),
    }
}

/// The median of unsorted finite values; `None` when empty.
pub(crate) fn median_f64(values: &mut [f64]) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsd_bounds_and_symmetry() {
        assert_eq!(jensen_shannon_bits(&[1.0, 2.0], &[2.0, 4.0]), 0.0);
        assert!((jensen_shannon_bits(&[1.0, 0.0], &[0.0, 5.0]) - 1.0).abs() < 1e-12);
        let a = jensen_shannon_bits(&[3.0, 1.0, 0.0], &[1.0, 1.0, 1.0]);
        let b = jensen_shannon_bits(&[1.0, 1.0, 1.0], &[3.0, 1.0, 0.0]);
        assert!((a - b).abs() < 1e-12 && a > 0.0 && a < 1.0);
        assert_eq!(jensen_shannon_bits(&[], &[1.0]), 0.0);
        assert_eq!(jensen_shannon_bits(&[f64::NAN, 1.0], &[1.0]), 1.0, "NaN weighs nothing");
        assert_eq!(jensen_shannon_bits(&[f64::NAN], &[1.0]), 0.0);
        let terms = js_terms(&[3.0, 1.0, 0.0], &[1.0, 1.0, 1.0]);
        assert!((terms.iter().sum::<f64>() - a).abs() < 1e-12);
        assert!(terms.iter().all(|t| *t >= 0.0));
    }

    #[test]
    fn cliffs_delta_counts_pairs() {
        assert_eq!(cliffs_delta(&[5, 6], &[1, 2]), 1.0);
        assert_eq!(cliffs_delta(&[1, 2], &[5, 6]), -1.0);
        assert_eq!(cliffs_delta(&[1, 2], &[1, 2]), 0.0);
        // x=2 beats y=1 and ties y=2; x=3 beats both: (3 - 0) / 4.
        assert_eq!(cliffs_delta(&[2, 3], &[1, 2]), 0.75);
        assert_eq!(cliffs_delta(&[], &[1]), 0.0);
    }

    #[test]
    fn medians() {
        assert_eq!(median_sorted(&[]), None);
        assert_eq!(median_sorted(&[1, 3, 10]), Some(3.0));
        assert_eq!(median_sorted(&[1, 3]), Some(2.0));
        assert_eq!(median_f64(&mut [3.0, 1.0, 2.0]), Some(2.0));
    }
}
