//! BBEH aggregate metrics (spec §5): the paper's adjusted harmonic mean (headline "BBEH"),
//! the micro average (full set and Mini), the macro mean (labelled extra only) and a 95 %
//! Wilson score interval. All accuracies are in percent (0–100), like the paper.

/// Offset (percentage points) added to every task accuracy before the harmonic mean; 1.00 is
/// the only value that reproduces all 13 Table 2 headline numbers (spec §5.1).
pub const HM_OFFSET: f64 = 1.0;

/// Two-sided 95 % standard-normal quantile used by [`wilson_interval`].
pub const Z_95: f64 = 1.959_963_984_540_054;

/// Invalid inputs to the count-based aggregates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AggregateError {
    /// Parallel slices have different lengths.
    #[error("length mismatch: {left} vs {right}")]
    LengthMismatch {
        /// Length of the first slice.
        left: usize,
        /// Length of the second slice.
        right: usize,
    },
    /// No examples at all (total n is zero).
    #[error("no examples to aggregate")]
    Empty,
    /// A correct count exceeds its example count.
    #[error("correct count {correct} exceeds n = {n}")]
    CorrectExceedsN {
        /// Offending correct count.
        correct: usize,
        /// Its example count.
        n: usize,
    },
}

/// Per-task accuracy in percent, `100 · correct / n`.
pub fn task_accuracy(correct: usize, n: usize) -> Result<f64, AggregateError> {
    if n == 0 {
        return Err(AggregateError::Empty);
    }
    if correct > n {
        return Err(AggregateError::CorrectExceedsN { correct, n });
    }
    Ok(100.0 * correct as f64 / n as f64)
}

/// The paper's headline BBEH score: `T / Σ_t 1/(a_t + 1)` over per-task accuracies in percent.
///
/// No 1 is subtracted afterwards and nothing is clamped: an all-zero model scores 1.0, a perfect
/// one 101.0. Returns NaN for an empty slice (no tasks, no score).
pub fn harmonic_mean(acc_percent: &[f64]) -> f64 {
    if acc_percent.is_empty() {
        return f64::NAN;
    }
    let denom: f64 = acc_percent.iter().map(|a| 1.0 / (a + HM_OFFSET)).sum();
    acc_percent.len() as f64 / denom
}

fn check_lengths(left: usize, right: usize) -> Result<(), AggregateError> {
    if left == right { Ok(()) } else { Err(AggregateError::LengthMismatch { left, right }) }
}

/// Micro average in percent: `100 · Σ correct / Σ n` (BBEH micro and BBEH Mini).
/// Task sizes matter: DisambiguationQA has n = 120, every other task 200.
pub fn micro(correct: &[usize], n: &[usize]) -> Result<f64, AggregateError> {
    check_lengths(correct.len(), n.len())?;
    for (&c, &k) in correct.iter().zip(n) {
        if c > k {
            return Err(AggregateError::CorrectExceedsN { correct: c, n: k });
        }
    }
    let total: usize = n.iter().sum();
    if total == 0 {
        return Err(AggregateError::Empty);
    }
    Ok(100.0 * correct.iter().sum::<usize>() as f64 / total as f64)
}

/// Size-weighted mean of per-task accuracies, `Σ a_t n_t / Σ n_t`: the micro average for
/// expected (non-integer) accuracies such as the random baseline's.
pub fn weighted_mean(acc_percent: &[f64], n: &[usize]) -> Result<f64, AggregateError> {
    check_lengths(acc_percent.len(), n.len())?;
    let total: usize = n.iter().sum();
    if total == 0 {
        return Err(AggregateError::Empty);
    }
    let sum: f64 = acc_percent.iter().zip(n).map(|(a, &k)| a * k as f64).sum();
    Ok(sum / total as f64)
}

/// Unweighted mean of per-task accuracies; report only as a labelled extra, never as "BBEH".
/// Returns NaN for an empty slice.
pub fn macro_mean(acc_percent: &[f64]) -> f64 {
    if acc_percent.is_empty() {
        return f64::NAN;
    }
    acc_percent.iter().sum::<f64>() / acc_percent.len() as f64
}

/// 95 % Wilson score interval for `correct / n`, as `(low, high)` in percent.
///
/// Wilson rather than the normal (Wald) interval because BBEH accuracies are often near 0 %,
/// where Wald collapses to zero width or leaves [0, 100]; Wilson stays inside and is non-degenerate.
pub fn wilson_interval(correct: usize, n: usize) -> Result<(f64, f64), AggregateError> {
    if n == 0 {
        return Err(AggregateError::Empty);
    }
    if correct > n {
        return Err(AggregateError::CorrectExceedsN { correct, n });
    }
    let nf = n as f64;
    let p = correct as f64 / nf;
    let z2 = Z_95 * Z_95;
    let denom = 1.0 + z2 / nf;
    let centre = (p + z2 / (2.0 * nf)) / denom;
    let half = Z_95 * (p * (1.0 - p) / nf + z2 / (4.0 * nf * nf)).sqrt() / denom;
    // The bounds are exactly 0 / 1 at the extremes; avoid rounding residue there.
    let low = if correct == 0 { 0.0 } else { (centre - half).max(0.0) };
    let high = if correct == n { 1.0 } else { (centre + half).min(1.0) };
    Ok((100.0 * low, 100.0 * high))
}

#[cfg(test)]
mod tests;
