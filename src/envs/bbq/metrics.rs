//! BBQ-Bench metrics in plain Rust (spec §3, §4.11): score = fraction of task-runs solved,
//! numerical/string sub-scores, per-task solve rates, the cumulative solved-fraction vs
//! budget-fraction curve, and the "50 % CI" over trial scores.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::record::EpisodeRecord;
use super::task::{Family, TaskId};

/// Solved count over runs, with the rate (0 when there are no runs).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Rate {
    /// Solved task-runs.
    pub solved: usize,
    /// Task-runs.
    pub runs: usize,
    /// `solved / runs` (0.0 for no runs).
    pub rate: f64,
}

impl Rate {
    fn of(solved: usize, runs: usize) -> Rate {
        let rate = if runs == 0 { 0.0 } else { solved as f64 / runs as f64 };
        Rate { solved, runs, rate }
    }
}

/// One point of the query-efficiency curve F(p) (§4.11).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// p: fraction of the query budget.
    pub budget_fraction: f64,
    /// F(p): fraction of all task-runs solved with at most that fraction used.
    pub solved_fraction: f64,
}

/// Everything a report needs about a set of task-runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// All task-runs (the BBQ-Bench score is `overall.rate`).
    pub overall: Rate,
    /// The numerical half.
    pub numeric: Rate,
    /// The string half.
    pub string: Rate,
    /// Per task, in task order.
    pub per_task: BTreeMap<TaskId, Rate>,
    /// F(p) on the default grid 0, 0.05, …, 1.
    pub curve: Vec<CurvePoint>,
    /// Failed tool attempts over all runs (reported next to every score, §4.11).
    pub tool_failures: usize,
    /// Forfeited phases over all runs.
    pub forfeits: usize,
}

/// Grid steps of the default curve (p = 0, 0.05, …, 1).
pub const CURVE_STEPS: u32 = 20;

/// z-value of the "50 % confidence interval" (§4.11).
pub const CI50_Z: f64 = 0.6745;

/// BBQ-Bench score: fraction of task-runs solved (equals the mean of trial scores when every
/// trial has all 20 tasks).
pub fn score(records: &[EpisodeRecord]) -> f64 {
    rate(records.iter()).rate
}

fn rate<'a>(records: impl Iterator<Item = &'a EpisodeRecord>) -> Rate {
    let (mut solved, mut runs) = (0, 0);
    for r in records {
        runs += 1;
        solved += usize::from(r.solved);
    }
    Rate::of(solved, runs)
}

/// Solve rate of one half of the benchmark.
pub fn family_rate(records: &[EpisodeRecord], family: Family) -> Rate {
    rate(records.iter().filter(|r| r.task.task().family == family))
}

/// Solve rate per task present in `records`.
pub fn per_task(records: &[EpisodeRecord]) -> BTreeMap<TaskId, Rate> {
    let mut counts: BTreeMap<TaskId, (usize, usize)> = BTreeMap::new();
    for r in records {
        let e = counts.entry(r.task).or_default();
        e.0 += usize::from(r.solved);
        e.1 += 1;
    }
    counts.into_iter().map(|(t, (s, n))| (t, Rate::of(s, n))).collect()
}

/// F(p) for p = i / steps, i = 0..=steps: fraction of all task-runs that were solved with
/// `solved_at_queries / total_queries ≤ p` (compared exactly in integers).
pub fn efficiency_curve(records: &[EpisodeRecord], steps: u32) -> Vec<CurvePoint> {
    let steps = steps.max(1);
    let n = records.len();
    (0..=steps)
        .map(|i| {
            let hits = records
                .iter()
                .filter(|r| r.solved && r.solved_at_queries.is_some_and(|q| u64::from(q) * u64::from(steps) <= u64::from(i) * u64::from(r.total_queries)))
                .count();
            CurvePoint { budget_fraction: f64::from(i) / f64::from(steps), solved_fraction: if n == 0 { 0.0 } else { hits as f64 / n as f64 } }
        })
        .collect()
}

/// Mean and half-width of the "50 % CI", `0.6745 · s / √n` with s the sample standard
/// deviation; `None` for fewer than 2 trials (not reported for 1 trial).
pub fn mean_ci50(trial_scores: &[f64]) -> Option<(f64, f64)> {
    let n = trial_scores.len();
    if n < 2 {
        return None;
    }
    let nf = n as f64;
    let mean = trial_scores.iter().sum::<f64>() / nf;
    let var = trial_scores.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (nf - 1.0);
    Some((mean, CI50_Z * var.sqrt() / nf.sqrt()))
}

/// All metrics of §4.11 for a set of task-runs (any mix of tasks, trials and models).
pub fn summarize(records: &[EpisodeRecord]) -> Summary {
    Summary {
        overall: rate(records.iter()),
        numeric: family_rate(records, Family::Numeric),
        string: family_rate(records, Family::String),
        per_task: per_task(records),
        curve: efficiency_curve(records, CURVE_STEPS),
        tool_failures: records.iter().map(|r| r.failures.len()).sum(),
        forfeits: records.iter().map(|r| r.forfeits.len()).sum(),
    }
}

#[cfg(test)]
mod tests;
