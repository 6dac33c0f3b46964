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

/// Percentile 95 % interval of the harmonic mean over tasks of `100 · mean(values)`,
/// resampling each task's values with replacement, from a generator seeded with `seed`
/// (so the same cache gives the same interval). `None` when a task has no values.
#[must_use]
pub fn harmonic_interval(per_task: &[Vec<f64>], seed: u64) -> Option<(f64, f64)> {
    if per_task.is_empty() || per_task.iter().any(Vec::is_empty) {
        return None;
    }
    let mut rng = SplitMix64::new(seed);
    let mut draws: Vec<f64> = (0..RESAMPLES)
        .map(|_| {
            harmonic(per_task.iter().map(|values| {
                let n = values.len();
                let sum: f64 = (0..n).map(|_| values[rng.index(n)]).sum();
                #[expect(clippy::cast_precision_loss, reason = "unit counts are far below 2^52")]
                let n = n as f64;
                100.0 * sum / n
            }))
        })
        .collect();
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
    fn percentile_interpolates_like_numpy() {
        let v: Vec<f64> = (0..11).map(f64::from).collect();
        assert!((percentile(&v, 0.025) - 0.25).abs() < 1e-12);
        assert!((percentile(&v, 0.975) - 9.75).abs() < 1e-12);
    }
}
