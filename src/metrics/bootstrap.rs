//! Stratified bootstrap for the BBEH harmonic mean, which is not a mean over units and so
//! has no standard error: items are resampled within each task, the harmonic mean is
//! recomputed, and the 2.5 % / 97.5 % percentiles of the resamples are the interval.

use crate::envs::splitmix::SplitMix64;

/// Resamples per interval (the spec asks for at least 2,000).
pub const RESAMPLES: usize = 2000;

/// `T / Σ_t 1/(acc_t% + 1)`, BBEH's adjusted harmonic mean of per-task accuracies.
fn harmonic(accs: impl Iterator<Item = f64>) -> f64 {
    let (mut t, mut denominator) = (0.0, 0.0);
    for a in accs {
        t += 1.0;
        denominator += 1.0 / (a + 1.0);
    }
    t / denominator
}

/// How one task's resampled mean is drawn.
enum Resample<'a> {
    /// Every value the same: every resample has that mean.
    Constant(f64),
    /// 0/1 values, k ones in n: the ones among n draws with replacement are Binomial(n, k/n),
    /// drawn by inverting its CDF (one uniform per task and resample instead of n; the
    /// same distribution as drawing the items, at a fraction of the cost on 18,080 items).
    Binary { n: f64, cdf: Vec<f64> },
    /// Any other values: n draws with replacement.
    Values(&'a [f64]),
}

impl<'a> Resample<'a> {
    fn new(values: &'a [f64]) -> Self {
        #[expect(clippy::cast_precision_loss, reason = "unit counts are far below 2^52")]
        let n = values.len() as f64;
        if values.iter().all(|x| *x == values[0]) {
            return Self::Constant(values[0]);
        }
        if !values.iter().all(|x| *x == 0.0 || *x == 1.0) {
            return Self::Values(values);
        }
        let k: f64 = values.iter().sum();
        let (lp, lq) = ((k / n).ln(), (1.0 - k / n).ln());
        let (mut ln_c, mut total) = (0.0, 0.0);
        let mut cdf = Vec::with_capacity(values.len() + 1);
        for j in 0..=values.len() {
            #[expect(clippy::cast_precision_loss, reason = "unit counts are far below 2^52")]
            let jf = j as f64;
            total += (ln_c + jf * lp + (n - jf) * lq).exp();
            cdf.push(total);
            ln_c += (n - jf).ln() - (jf + 1.0).ln();
        }
        Self::Binary { n, cdf }
    }

    /// One resample's mean.
    fn mean(&self, rng: &mut SplitMix64) -> f64 {
        match self {
            Self::Constant(x) => *x,
            Self::Binary { n, cdf } => {
                let u = rng.uniform() * cdf[cdf.len() - 1];
                let ones = cdf.partition_point(|c| *c <= u).min(cdf.len() - 1);
                #[expect(clippy::cast_precision_loss, reason = "unit counts are far below 2^52")]
                let ones = ones as f64;
                ones / n
            }
            Self::Values(values) => {
                let n = values.len();
                #[expect(clippy::cast_precision_loss, reason = "unit counts are far below 2^52")]
                let nf = n as f64;
                (0..n).map(|_| values[rng.index(n)]).sum::<f64>() / nf
            }
        }
    }
}

/// Percentile 95 % interval of the harmonic mean over tasks of `100 · mean(values)`,
/// resampling each task's values with replacement, from a generator seeded with `seed`
/// (so the same cache gives the same interval). `None` when a task has no values.
#[must_use]
pub fn harmonic_interval(per_task: &[Vec<f64>], seed: u64) -> Option<(f64, f64)> {
    if per_task.is_empty() || per_task.iter().any(Vec::is_empty) {
        return None;
    }
    let tasks: Vec<Resample<'_>> = per_task.iter().map(|v| Resample::new(v)).collect();
    let mut rng = SplitMix64::new(seed);
    let mut draws: Vec<f64> = (0..RESAMPLES).map(|_| harmonic(tasks.iter().map(|t| 100.0 * t.mean(&mut rng)))).collect();
    draws.sort_by(f64::total_cmp);
    Some((percentile(&draws, 0.025), percentile(&draws, 0.975)))
}

/// Linear-interpolated percentile of sorted values (numpy's default method).
fn percentile(sorted: &[f64], q: f64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "resample counts are small")]
    let pos = q * (sorted.len() - 1) as f64;
    #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "pos is within 0..len")]
    let lo = pos.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    #[expect(clippy::cast_precision_loss, reason = "resample counts are small")]
    let frac = pos - lo as f64;
    sorted[lo] + (sorted[hi] - sorted[lo]) * frac
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_brackets_the_estimate_and_repeats_with_its_seed() {
        let tasks: Vec<Vec<f64>> = (0..5).map(|t| (0..40).map(|i| f64::from(u8::from(i % (t + 2) == 0))).collect()).collect();
        let point = harmonic(tasks.iter().map(|v| 100.0 * v.iter().sum::<f64>() / 40.0));
        let (lo, hi) = harmonic_interval(&tasks, 7).unwrap();
        assert!(lo < point && point < hi, "{lo} {point} {hi}");
        assert_eq!(harmonic_interval(&tasks, 7), Some((lo, hi)));
        assert_ne!(harmonic_interval(&tasks, 8), Some((lo, hi)));
        // A task where every item has the same outcome cannot vary.
        let constant = vec![vec![1.0; 10], vec![0.0; 10]];
        let exact = harmonic([100.0, 0.0].into_iter());
        assert_eq!(harmonic_interval(&constant, 1), Some((exact, exact)));
    }

    #[test]
    fn binary_draws_have_the_resampling_distribution() {
        // 30 ones in 100: resampled means have mean 0.3 and variance 0.3·0.7/100.
        let values: Vec<f64> = (0..100).map(|i| f64::from(u8::from(i < 30))).collect();
        let (binary, direct) = (Resample::new(&values), Resample::Values(&values));
        assert!(matches!(binary, Resample::Binary { .. }));
        for r in [binary, direct] {
            let mut rng = SplitMix64::new(3);
            let draws: Vec<f64> = (0..20_000).map(|_| r.mean(&mut rng)).collect();
            let mean = draws.iter().sum::<f64>() / 20_000.0;
            let var = draws.iter().map(|d| (d - mean) * (d - mean)).sum::<f64>() / 19_999.0;
            assert!((mean - 0.3).abs() < 0.002, "{mean}");
            assert!((var / (0.21 / 100.0) - 1.0).abs() < 0.05, "{var}");
        }
    }

    #[test]
    fn percentile_interpolates_like_numpy() {
        let v: Vec<f64> = (0..11).map(f64::from).collect();
        assert!((percentile(&v, 0.025) - 0.25).abs() < 1e-12);
        assert!((percentile(&v, 0.975) - 9.75).abs() < 1e-12);
    }
}
