//! Metrics tests on hand-built records: score, sub-scores, per-task rates, the efficiency
//! curve (exact grid comparisons) and the 50 % CI.

use super::super::record::RoundRecord;
use super::super::task::TaskParams;
use super::*;

fn rec(task: TaskId, solved_at: Option<u32>) -> EpisodeRecord {
    let t = task.task();
    EpisodeRecord {
        task,
        seed: 0,
        params: TaskParams::default(),
        total_queries: t.total_queries,
        query_batch_size: t.query_batch_size,
        max_rounds: t.rounds(),
        rounds: vec![RoundRecord::default()],
        solved: solved_at.is_some(),
        solved_round: solved_at.map(|_| 1),
        solved_at_queries: solved_at,
        queries_used: solved_at.unwrap_or(t.total_queries),
        failures: vec![],
        forfeits: vec![],
    }
}

#[test]
fn scores_sub_scores_and_per_task_rates() {
    let rs = vec![
        rec(TaskId::IsPrime, Some(0)),        // numeric, u = 0
        rec(TaskId::IsPrime, None),           // numeric
        rec(TaskId::DigitSum, Some(15)),      // numeric, u = 0.5
        rec(TaskId::ContainsAb, Some(1)),     // string, u = 0.05
        rec(TaskId::MaxZFunction, Some(100)), // string, u = 1
    ];
    let s = summarize(&rs);
    assert_eq!(s.overall, Rate { solved: 4, runs: 5, rate: 0.8 });
    assert_eq!(s.numeric, Rate { solved: 2, runs: 3, rate: 2.0 / 3.0 });
    assert_eq!(s.string, Rate { solved: 2, runs: 2, rate: 1.0 });
    assert_eq!(s.per_task[&TaskId::IsPrime].rate, 0.5);
    assert_eq!(s.per_task.len(), 4);
    assert!((score(&rs) - 0.8).abs() < 1e-12);
    let f: Vec<f64> = s.curve.iter().map(|p| p.solved_fraction).collect();
    assert_eq!(f.len(), 21);
    assert_eq!(f[0], 0.2); // only the round-0 solve
    assert_eq!(f[1], 0.4); // u = 1/20 = 0.05 counts at p = 0.05 exactly
    assert_eq!(f[9], 0.4);
    assert_eq!(f[10], 0.6); // u = 0.5
    assert_eq!(f[19], 0.6);
    assert_eq!(f[20], 0.8);
    assert!(f.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(s.curve[10].budget_fraction, 0.5);
}

#[test]
fn empty_input_gives_zero_rates() {
    let s = summarize(&[]);
    assert_eq!(s.overall.rate, 0.0);
    assert!(s.curve.iter().all(|p| p.solved_fraction == 0.0));
}

#[test]
fn ci50_uses_the_sample_standard_deviation() {
    assert_eq!(mean_ci50(&[0.9]), None);
    let (m, h) = mean_ci50(&[0.5, 0.7]).unwrap();
    assert!((m - 0.6).abs() < 1e-12);
    // s = 0.1·√2, n = 2 → 0.6745 · 0.1 = 0.06745.
    assert!((h - 0.06745).abs() < 1e-12);
}
