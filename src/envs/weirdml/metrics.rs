//! WeirdML metrics in plain Rust (spec §5): run accuracy, task score, model average with a
//! completeness flag, analytic standard error, per-submission and per-run failure rates,
//! accuracy after k iterations, and the unbiased max@k estimator over first tries.

use serde::{Deserialize, Serialize};

/// A_r = max over the run's submissions (failed ones count 0); `None` for an empty run.
pub fn run_accuracy(submissions: &[f64]) -> Option<f64> {
    submissions.iter().copied().reduce(f64::max)
}

/// Best-so-far accuracy after each submission.
pub fn best_so_far(submissions: &[f64]) -> Vec<f64> {
    let mut best = f64::NEG_INFINITY;
    submissions
        .iter()
        .map(|&a| {
            best = best.max(a);
            best
        })
        .collect()
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// S_t = mean over runs of the run accuracies (runs equally weighted).
pub fn task_score(run_accuracies: &[f64]) -> Option<f64> {
    mean(run_accuracies)
}

/// A model's average over tasks, with |T_m| and whether every expected task is present.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelAverage {
    /// Mean of task scores (`None` without tasks).
    pub mean: Option<f64>,
    /// Tasks with results.
    pub n_tasks: usize,
    /// `n_tasks == expected` (always true when nothing is expected).
    pub complete: bool,
}

/// S_m = mean over tasks (equal weights); flags rows missing tasks instead of re-weighting.
pub fn model_average(task_scores: &[f64], expected_tasks: Option<usize>) -> ModelAverage {
    ModelAverage { mean: mean(task_scores), n_tasks: task_scores.len(), complete: expected_tasks.is_none_or(|e| e == task_scores.len()) }
}

/// SE_m = (1/|T|)·sqrt(Σ_t s²_t / n_t), s² with the given ddof (0 mimics the bootstrap).
/// `tasks` holds each task's run accuracies; `None` if a task has ≤ ddof runs.
pub fn standard_error(tasks: &[Vec<f64>], ddof: usize) -> Option<f64> {
    if tasks.is_empty() {
        return None;
    }
    let mut sum = 0.0;
    for runs in tasks {
        let n = runs.len();
        if n <= ddof {
            return None;
        }
        let m = mean(runs)?;
        let ss: f64 = runs.iter().map(|x| (x - m) * (x - m)).sum();
        sum += ss / (n - ddof) as f64 / n as f64;
    }
    Some(sum.sqrt() / tasks.len() as f64)
}

/// F_t = Σ failed submissions / Σ J_r (per submission, not per run).
pub fn failure_rate(runs: &[Vec<bool>]) -> Option<f64> {
    let total: usize = runs.iter().map(Vec::len).sum();
    let failed = runs.iter().flatten().filter(|&&f| f).count();
    (total > 0).then(|| failed as f64 / total as f64)
}

/// Fraction of runs whose run accuracy is 0 (a different, smaller quantity).
pub fn per_run_failure_rate(runs: &[Vec<f64>]) -> Option<f64> {
    let n = runs.len();
    let zero = runs.iter().filter(|r| run_accuracy(r).unwrap_or(0.0) == 0.0).count();
    (n > 0).then(|| zero as f64 / n as f64)
}

/// S^(k)_t = mean over runs of max of the first min(k, J_r) submissions (shorter runs carry
/// their last best forward; an empty run counts 0).
pub fn accuracy_after_k(runs: &[Vec<f64>], k: usize) -> Option<f64> {
    let per_run: Vec<f64> = runs.iter().map(|r| run_accuracy(&r[..k.min(r.len())]).unwrap_or(0.0)).collect();
    mean(&per_run)
}

/// Weights w_i (ascending order statistics, i = 1..n) of the unbiased max@k estimator:
/// w_i = C(i−1, k−1)/C(n, k), computed top-down as w_n = k/n, w_{i−1} = w_i·(i−k)/(i−1),
/// which never overflows. `None` unless 1 ≤ k ≤ n.
pub fn max_at_k_weights(n: usize, k: usize) -> Option<Vec<f64>> {
    if k == 0 || k > n {
        return None;
    }
    let mut w = vec![0.0; n];
    w[n - 1] = k as f64 / n as f64;
    for i in (k + 1..=n).rev() {
        // w_{i-1} from w_i (1-based i).
        w[i - 2] = w[i - 1] * (i - k) as f64 / (i - 1) as f64;
    }
    Some(w)
}

/// θ̂_k = Σ_i w_i·x_(i) over the sorted first-try accuracies: the exact average of
/// max over all k-subsets (unbiased for iid tries). `None` unless 1 ≤ k ≤ n or on NaN.
pub fn max_at_k(first_tries: &[f64], k: usize) -> Option<f64> {
    if first_tries.iter().any(|x| x.is_nan()) {
        return None;
    }
    let mut xs = first_tries.to_vec();
    xs.sort_by(f64::total_cmp);
    let w = max_at_k_weights(xs.len(), k)?;
    Some(xs.iter().zip(&w).map(|(x, w)| x * w).sum())
}

/// pass@k = 1 − C(n−c, k)/C(n, k) (product form), the 0/1 special case of max@k.
pub fn pass_at_k(n: usize, c: usize, k: usize) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    let mut prob_all_fail = 1.0;
    for j in 0..k {
        prob_all_fail *= (n - c - j) as f64 / (n - j) as f64;
    }
    Some(1.0 - prob_all_fail)
}

#[cfg(test)]
mod tests;
