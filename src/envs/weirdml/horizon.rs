//! Time horizons (spec `weirdml-published.md`, the author's 2026 analysis): the human task
//! duration at which a model's runs reach an accuracy threshold half the time, fitted by maximum
//! likelihood on (log10 hours, success) points and bootstrapped over tasks. It takes plain run
//! scores per task, so published results and evalgrid's own WeirdML runs are fitted alike.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::published::PublishedError;
use crate::envs::splitmix::SplitMix64;

/// Accuracy thresholds θ and their labels in the estimates file.
pub const THRESHOLDS: [(&str, f64); 5] = [("25%", 0.25), ("50%", 0.50), ("70%", 0.70), ("90%", 0.90), ("95%", 0.95)];
/// The four estimator models whose human-time estimates are pooled.
pub const ESTIMATORS: [&str; 4] = ["gpt-5.2:medium", "gemini-3-pro-preview", "claude-opus-4.5", "grok-4-07-09"];
/// Task-level bootstrap resamples, as published.
pub const RESAMPLES: usize = 5_000;
/// Bounds of x50 (log10 hours).
const X50_BOUNDS: (f64, f64) = (-3.0, 7.0);
/// Bounds of −β (β = −exp(v), v ∈ [ln 1e-6, ln 50]).
const SLOPE_BOUNDS: (f64, f64) = (1e-6, 50.0);

/// Human-time estimates: per task, the (x = log10 hours, θ) pairs with positive hours.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimates {
    /// Task → (x, θ) pairs, estimator-major then threshold order.
    pub per_task: BTreeMap<String, Vec<(f64, f64)>>,
    /// `task / estimator / threshold` of every estimate skipped for non-positive hours.
    pub skipped: Vec<String>,
}

/// Reads `all_estimates.json` (task → `estimates` → estimator → threshold → `hours`) for `tasks`.
///
/// # Errors
/// Unreadable or non-JSON file, or a task, estimator, threshold or `hours` missing.
pub fn load_estimates(path: &Path, tasks: &[String]) -> Result<Estimates, PublishedError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| PublishedError::Read { path: shown.clone(), source })?;
    parse_estimates(&bytes, &shown, tasks)
}

/// [`load_estimates`] on bytes already read (`shown` names them in messages), so a report
/// fits exactly the bytes its key hashed.
///
/// # Errors
/// Non-JSON bytes, or a task, estimator, threshold or `hours` missing.
pub fn parse_estimates(bytes: &[u8], shown: &str, tasks: &[String]) -> Result<Estimates, PublishedError> {
    let shown = shown.to_owned();
    let root: Value = serde_json::from_slice(bytes).map_err(|source| PublishedError::Json { path: shown.clone(), what: "estimates", source })?;
    let missing = |message: String| PublishedError::Content { path: shown.clone(), message };
    let mut per_task = BTreeMap::new();
    let mut skipped = Vec::new();
    for task in tasks {
        let by_estimator = root.get(task).ok_or_else(|| missing(format!("task `{task}` missing")))?;
        let by_estimator = by_estimator.get("estimates").ok_or_else(|| missing(format!("task `{task}`: `estimates` missing")))?;
        let mut points = Vec::new();
        for estimator in ESTIMATORS {
            let by_threshold = by_estimator.get(estimator).ok_or_else(|| missing(format!("task `{task}`: estimator `{estimator}` missing")))?;
            for (label, theta) in THRESHOLDS {
                let entry = by_threshold.get(label).ok_or_else(|| missing(format!("task `{task}`, estimator `{estimator}`: threshold `{label}` missing")))?;
                let hours = entry
                    .get("hours")
                    .and_then(Value::as_f64)
                    .ok_or_else(|| missing(format!("task `{task}`, estimator `{estimator}`, threshold `{label}`: `hours` missing or not a number")))?;
                if hours > 0.0 && hours.is_finite() {
                    points.push((hours.log10(), theta));
                } else {
                    skipped.push(format!("{task} / {estimator} / {label}"));
                }
            }
        }
        per_task.insert(task.clone(), points);
    }
    Ok(Estimates { per_task, skipped })
}

/// Binomial points of one task: (x, runs, successes).
type TaskPoints = Vec<(f64, f64, f64)>;

/// One model's fitted time horizon.
#[derive(Debug, Clone, PartialEq)]
pub struct Horizon {
    /// Data points (runs × usable estimates).
    pub n_data: usize,
    /// Points with score ≥ θ.
    pub n_success: usize,
    /// x50 percentiles 2.5 / 50 / 97.5 over the bootstrap (log10 hours).
    pub x50: [f64; 3],
    /// Median slope β (< 0) over the bootstrap.
    pub beta_q50: f64,
}

fn softplus(t: f64) -> f64 {
    t.max(0.0) + (-t.abs()).exp().ln_1p()
}

fn sigmoid(t: f64) -> f64 {
    if t >= 0.0 {
        1.0 / (1.0 + (-t).exp())
    } else {
        let e = t.exp();
        e / (1.0 + e)
    }
}

/// Negative log-likelihood of p = σ(a + b·x).
fn nll(points: &[(f64, f64, f64)], a: f64, b: f64) -> f64 {
    points.iter().map(|&(x, n, k)| k * softplus(-(a + b * x)) + (n - k) * softplus(a + b * x)).sum()
}

fn feasible(a: f64, b: f64) -> bool {
    let x50 = -a / b;
    (-SLOPE_BOUNDS.1..=-SLOPE_BOUNDS.0).contains(&b) && (X50_BOUNDS.0..=X50_BOUNDS.1).contains(&x50)
}

/// Unconstrained Newton (logistic regression in (a, b), convex) with step halving: the last
/// iterate and whether it is a stationary point (the gradient vanished, or no step improves the
/// likelihood any more while the gradient is already tiny).
fn newton(points: &[(f64, f64, f64)], start: (f64, f64)) -> ((f64, f64), bool) {
    let total: f64 = points.iter().map(|p| p.1).sum::<f64>().max(1.0);
    let (mut a, mut b) = start;
    let mut f = nll(points, a, b);
    for _ in 0..100 {
        let (mut ga, mut gb, mut haa, mut hab, mut hbb) = (0.0, 0.0, 0.0, 0.0, 0.0);
        for &(x, n, k) in points {
            let p = sigmoid(a + b * x);
            let r = n * p - k;
            let w = n * p * (1.0 - p);
            ga += r;
            gb += r * x;
            haa += w;
            hab += w * x;
            hbb += w * x * x;
        }
        let gradient = ga.abs().max(gb.abs());
        if gradient < 1e-7 * total {
            return ((a, b), true);
        }
        let det = haa * hbb - hab * hab;
        if det.abs() < 1e-300 || !det.is_finite() {
            return ((a, b), false);
        }
        let (da, db) = ((hbb * ga - hab * gb) / det, (haa * gb - hab * ga) / det);
        // A Newton step this small is at the optimum to within rounding.
        if da.abs().max(db.abs()) < 1e-9 * (1.0 + a.abs().max(b.abs())) {
            return ((a, b), gradient < 1e-6 * total);
        }
        let mut step = 1.0;
        loop {
            let (na, nb) = (a - step * da, b - step * db);
            let nf = nll(points, na, nb);
            if nf <= f {
                (a, b, f) = (na, nb, nf);
                break;
            }
            step /= 2.0;
            if step < 1e-12 {
                // Rounding, not a real ascent direction, once the gradient is this small.
                return ((a, b), gradient < 1e-6 * total);
            }
        }
        if a.abs() > 1e6 || b.abs() > 1e6 {
            return ((a, b), false);
        }
    }
    ((a, b), false)
}

/// Minimum of a convex function on [lo, hi] by golden-section search.
fn golden(lo: f64, hi: f64, f: impl Fn(f64) -> f64) -> (f64, f64) {
    let r = (5f64.sqrt() - 1.0) / 2.0;
    let (mut lo, mut hi) = (lo, hi);
    let (mut c, mut d) = (hi - r * (hi - lo), lo + r * (hi - lo));
    let (mut fc, mut fd) = (f(c), f(d));
    for _ in 0..200 {
        if hi - lo < 1e-12 * (1.0 + lo.abs().max(hi.abs())) {
            break;
        }
        if fc <= fd {
            (hi, d, fd) = (d, c, fc);
            c = hi - r * (hi - lo);
            fc = f(c);
        } else {
            (lo, c, fc) = (c, d, fd);
            d = lo + r * (hi - lo);
            fd = f(d);
        }
    }
    [(lo, f(lo)), (hi, f(hi)), (c, fc), (d, fd)].into_iter().min_by(|p, q| p.1.total_cmp(&q.1)).unwrap_or((lo, f(lo)))
}

/// Bounded maximum-likelihood fit: (x50, β). The problem is convex in (a, b) = (−β·x50, β) over
/// a convex polygon, so the optimum is Newton's stationary point inside it or lies on one of its
/// 4 edges (the best of those and of Newton's last feasible iterate is taken).
pub fn fit(points: &[(f64, f64, f64)]) -> (f64, f64) {
    fit_from(points, (0.0, -1.0))
}

/// [`fit`] with Newton started at `start` = (x50, β) (a bootstrap starts at the full-data fit).
fn fit_from(points: &[(f64, f64, f64)], start: (f64, f64)) -> (f64, f64) {
    let ((a, b), stationary) = newton(points, (-start.1 * start.0, start.1));
    let interior = feasible(a, b);
    if stationary && interior {
        return (-a / b, b);
    }
    let mut candidates = Vec::with_capacity(5);
    if interior {
        candidates.push((nll(points, a, b), -a / b, b));
    }
    for x50 in [X50_BOUNDS.0, X50_BOUNDS.1] {
        let (b, f) = golden(-SLOPE_BOUNDS.1, -SLOPE_BOUNDS.0, |b| nll(points, -b * x50, b));
        candidates.push((f, x50, b));
    }
    for b in [-SLOPE_BOUNDS.1, -SLOPE_BOUNDS.0] {
        let (x50, f) = golden(X50_BOUNDS.0, X50_BOUNDS.1, |x50| nll(points, -b * x50, b));
        candidates.push((f, x50, b));
    }
    candidates.into_iter().min_by(|p, q| p.0.total_cmp(&q.0)).map_or((0.0, -1.0), |(_, x50, b)| (x50, b))
}

/// numpy's default (linear) percentile of sorted values, q in [0, 1].
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (i, frac) = (pos.floor() as usize, pos - pos.floor());
    let j = (i + 1).min(sorted.len() - 1);
    sorted[i] + frac * (sorted[j] - sorted[i])
}

/// The bootstrap seed of a model: fixed by its key alone, so a model's horizon does not depend
/// on which other models are fitted.
fn seed_of(model: &str) -> u64 {
    let hash = blake3::Hasher::new_derive_key("evalgrid weirdml horizon bootstrap v1").update(model.as_bytes()).finalize();
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&hash.as_bytes()[..8]);
    u64::from_le_bytes(bytes)
}

/// Fits `model`'s horizon from its run scores per task (every task must have estimates),
/// with `resamples` task-level bootstrap resamples seeded by the model key.
pub fn horizon(model: &str, scores: &[(String, Vec<f64>)], estimates: &Estimates, resamples: usize) -> Horizon {
    let tasks: Vec<TaskPoints> = scores
        .iter()
        .map(|(task, runs)| {
            let pairs = estimates.per_task.get(task).map_or(&[][..], Vec::as_slice);
            pairs.iter().map(|&(x, theta)| (x, runs.len() as f64, runs.iter().filter(|&&s| s >= theta).count() as f64)).collect()
        })
        .collect();
    let n_data = tasks.iter().flatten().map(|p| p.1).sum::<f64>() as usize;
    let n_success = tasks.iter().flatten().map(|p| p.2).sum::<f64>() as usize;
    let full = fit(&tasks.iter().flatten().copied().collect::<Vec<_>>());
    let mut rng = SplitMix64::new(seed_of(model));
    let mut x50s = Vec::with_capacity(resamples);
    let mut betas = Vec::with_capacity(resamples);
    let mut sample: Vec<(f64, f64, f64)> = Vec::new();
    for _ in 0..resamples.max(1) {
        sample.clear();
        if resamples == 0 {
            sample.extend(tasks.iter().flatten().copied());
        } else {
            for _ in 0..tasks.len() {
                sample.extend_from_slice(&tasks[rng.index(tasks.len())]);
            }
        }
        let (x50, beta) = fit_from(&sample, full);
        x50s.push(x50);
        betas.push(beta);
    }
    x50s.sort_by(f64::total_cmp);
    betas.sort_by(f64::total_cmp);
    Horizon { n_data, n_success, x50: [percentile(&x50s, 0.025), percentile(&x50s, 0.5), percentile(&x50s, 0.975)], beta_q50: percentile(&betas, 0.5) }
}

/// Hours as the author writes them: 1 day = 8 work-hours, 1 week = 40, 1 month = 160.
pub fn duration_text(hours: f64) -> String {
    if hours < 1.0 {
        format!("{:.0} min", hours * 60.0)
    } else if hours < 40.0 {
        format!("{hours:.1} h")
    } else if hours < 160.0 {
        format!("{:.1} weeks", hours / 40.0)
    } else {
        format!("{:.1} months", hours / 160.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fit_recovers_a_known_curve_and_respects_bounds() {
        // Exact expected successes of p = σ(−1.5·(x − 0.7)) on a grid: the MLE is the curve.
        let points: Vec<(f64, f64, f64)> = (0..21).map(|i| -1.0 + 0.2 * f64::from(i)).map(|x| (x, 1000.0, 1000.0 * sigmoid(-1.5 * (x - 0.7)))).collect();
        let (x50, beta) = fit(&points);
        assert!((x50 - 0.7).abs() < 1e-6 && (beta + 1.5).abs() < 1e-6, "{x50} {beta}");
        // All failures: the optimum runs to the bounds (x50 = −3) instead of diverging.
        let none: Vec<(f64, f64, f64)> = (0..5).map(|i| (f64::from(i), 10.0, 0.0)).collect();
        let (x50, beta) = fit(&none);
        assert!((x50 + 3.0).abs() < 1e-6 && beta < 0.0, "{x50} {beta}");
        // Success rising with x (β would be positive): the optimum is on the x50 = −3 edge, as
        // scipy's L-BFGS-B finds it (x50 −3, β −0.0148241).
        let wrong: Vec<(f64, f64, f64)> = (0..5).map(|i| (f64::from(i), 10.0, 2.0 * f64::from(i))).collect();
        let (x50, beta) = fit(&wrong);
        assert!((x50 + 3.0).abs() < 1e-6 && (beta + 0.014_824_1).abs() < 1e-6, "{x50} {beta}");
    }

    #[test]
    fn percentile_is_numpys_linear_one() {
        let v = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&v, 0.5), 2.5);
        assert!((percentile(&v, 0.025) - 1.075).abs() < 1e-12);
        assert_eq!(percentile(&v, 1.0), 4.0);
    }

    #[test]
    fn durations_follow_the_authors_units() {
        assert_eq!(duration_text(0.4), "24 min");
        assert_eq!(duration_text(37.7), "37.7 h");
        assert_eq!(duration_text(80.0), "2.0 weeks");
        assert_eq!(duration_text(320.0), "2.0 months");
    }
}
