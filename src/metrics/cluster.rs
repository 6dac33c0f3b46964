//! Clustered standard errors (Miller 2024, Appendix A, with the finite-cluster correction
//! C / (C − 1), the estimator of Inspect's `stderr(cluster=...)`): items of one task are
//! correlated, so treating them as independent makes intervals too narrow.

use std::collections::BTreeMap;

/// 1.96: the normal quantile the spec's 95 % intervals use.
pub const Z95: f64 = 1.96;

/// Clustered SE of the mean of `values`, each given with its cluster label:
/// `SE² = C/(C−1) · (1/n²) · Σ_c (Σ_{u∈c} (x_u − x̄))²`. `None` with fewer than two
/// clusters, where it is undefined. With one unit per cluster it is `s/√n`.
#[must_use]
pub fn clustered_se(values: &[(u32, f64)]) -> Option<f64> {
    let n = values.len();
    if n == 0 {
        return None;
    }
    #[expect(clippy::cast_precision_loss, reason = "unit counts are far below 2^52")]
    let n = n as f64;
    let mean = values.iter().map(|(_, x)| x).sum::<f64>() / n;
    let mut sums: BTreeMap<u32, f64> = BTreeMap::new();
    for (c, x) in values {
        *sums.entry(*c).or_default() += x - mean;
    }
    #[expect(clippy::cast_precision_loss, reason = "cluster counts are small")]
    let c = sums.len() as f64;
    if c < 2.0 {
        return None;
    }
    let squares: f64 = sums.values().map(|s| s * s).sum();
    Some((c / (c - 1.0) * squares / (n * n)).sqrt())
}

/// Number of distinct clusters among `values`.
#[must_use]
pub fn cluster_count(values: &[(u32, f64)]) -> usize {
    let mut labels: Vec<u32> = values.iter().map(|(c, _)| *c).collect();
    labels.sort_unstable();
    labels.dedup();
    labels.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_unit_per_cluster_is_the_plain_standard_error() {
        let xs = [1.0, 4.0, 2.0, 8.0, 5.0];
        let values: Vec<(u32, f64)> = xs.iter().enumerate().map(|(i, x)| (u32::try_from(i).unwrap(), *x)).collect();
        let mean = 4.0;
        let s2 = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / 4.0;
        let plain = (s2 / 5.0_f64).sqrt();
        assert!((clustered_se(&values).unwrap() - plain).abs() < 1e-12 * plain);
    }

    #[test]
    fn one_cluster_has_no_standard_error_and_correlated_items_widen_it() {
        assert_eq!(clustered_se(&[(3, 1.0), (3, 0.0)]), None);
        // Two tasks, each all right or all wrong: the clustered SE is far above the naive one.
        let values = [(0, 1.0), (0, 1.0), (0, 1.0), (1, 0.0), (1, 0.0), (1, 0.0)];
        let naive = (0.25_f64 * 6.0 / 5.0 / 6.0).sqrt();
        assert!(clustered_se(&values).unwrap() > 2.0 * naive);
        assert!((clustered_se(&values).unwrap() - (2.0_f64 * (1.5 * 1.5 * 2.0) / 36.0).sqrt()).abs() < 1e-15);
    }
}
