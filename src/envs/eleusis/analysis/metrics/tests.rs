//! Tests of `metrics`: the published headline of the three shipped runs to 1e-9
//! (`vectors.json → published_headline`), the secondary values of spec §7.1–§7.4, and unit
//! tests of the statistics helpers, binning, k search and bootstrap.

use serde_json::{Value, json};

use super::super::results::{from_value, read_results};
use super::*;
use crate::envs::eleusis::test_support::{RESULTS_FILES, data_dir};

fn shipped_runs() -> Vec<ResultsFile> {
    RESULTS_FILES.iter().map(|f| read_results(&data_dir().join("results").join(f)).expect("shipped file")).collect()
}

fn pool() -> PoolAnalysis {
    analyze(&shipped_runs(), &AnalysisOptions::default())
}

fn close(actual: Option<f64>, expected: f64, tol: f64, what: &str) {
    let a = actual.unwrap_or_else(|| panic!("{what}: undefined"));
    assert!((a - expected).abs() <= tol, "{what}: {a} vs {expected}");
}

#[test]
fn headline_reproduces_published_vectors_to_1e9() {
    let text = std::fs::read_to_string(data_dir().join("vectors.json")).expect("vectors");
    let vectors: Value = serde_json::from_str(&text).expect("json");
    let published = &vectors["published_headline"];
    let runs = shipped_runs();
    let pooled = analyze(&runs, &AnalysisOptions::default());
    for (run, pooled_metrics) in runs.iter().zip(&pooled.runs) {
        let alone = analyze_run(run, &AnalysisOptions::default()).expect("one run");
        let row = &published[run.model_name()];
        assert!(row.is_object(), "no published row for {}", run.model_name());
        for m in [&alone, pooled_metrics] {
            for (name, value) in m.headline.values() {
                let expected = row[name].as_f64().expect("published value");
                close(value, expected, 1e-9, &format!("{} {name}", m.model));
            }
        }
    }
}

/// §7.2 secondary values (printed to 6 decimals, wall clock to 2).
#[test]
fn secondary_values_of_spec_7_2() {
    let p = pool();
    #[rustfmt::skip]
    let expected = [
        (1158, 1174, 1195, 3341037, 3232254, 73525.83, 61.527891, [24.628205, 36.601709, 0.672870], 4.243590),
        (511, 1036, 851, 9229131, 5944454, 165334.16, 194.282209, [29.628205, 115.135043, 0.257334], 3.782051),
        (817, 1024, 1207, 1581524, 1389850, 12702.02, 10.523629, [29.923077, 83.049573, 0.360304], 2.589744),
    ];
    for (m, (score, floored, turns, out, counting, wall, wall_turn, var, delta)) in p.runs.iter().zip(expected) {
        assert_eq!(
            (m.total_score, m.total_floored_score, m.total_turns, m.total_output_tokens, m.counting_output_tokens),
            (score, floored, turns, out, counting),
            "{}",
            m.model
        );
        close(Some(m.total_wall_clock), wall, 5e-3, "total_wall_clock");
        close(m.wall_clock_per_turn, wall_turn, 5e-7, "wall_clock_per_turn");
        close(m.variance.intra_rule_variance, var[0], 5e-7, "intra");
        close(m.variance.inter_rule_variance, var[1], 5e-7, "inter");
        close(m.variance.variance_ratio, var[2], 5e-7, "ratio");
        close(m.no_stakes_delta, delta, 5e-7, "no_stakes_delta");
    }
    #[rustfmt::skip]
    let behaviour = [
        (3.0, 2.621326, 75, 22, 0, 22, 1.0, 1, [1.0, 1.0, 1.0, 0.809524]),
        (0.0, 0.831472, 65, 249, 132, 121, 2.057851, 7, [0.916667, 0.6, 0.888889, 0.142857]),
        (2.0, 1.797283, 60, 75, 15, 63, 1.190476, 4, [0.958333, 0.733333, 0.722222, 0.380952]),
    ];
    let rates = [0.0, 0.530120, 0.2];
    for ((m, (median, std, n, wrong, next, streaks, mean_streak, max_streak, quart)), rate) in p.runs.iter().zip(behaviour).zip(rates) {
        close(m.caution.median, median, 0.0, "caution median");
        close(m.caution.std, std, 5e-7, "caution std");
        assert_eq!(m.caution.count, n);
        assert_eq!((m.double_down.wrong_guesses, m.double_down.next_turn_guesses), (wrong, next));
        close(Some(m.double_down.rate), rate, 5e-7, "double-down");
        assert_eq!((m.streaks.count, m.streaks.max), (streaks, max_streak));
        close(m.streaks.mean, mean_streak, 5e-7, "mean streak");
        for (q, e) in m.quartiles.iter().zip(quart) {
            close(q.success_rate_counting, e, 5e-7, &format!("{} {}", m.model, q.quartile));
        }
    }
}

/// §7.1 caution count and complexity ratio, §7.4 engine-formula scores, §7.4 cutoff counts,
/// §3.1 check volumes and the §1.8 stored-score table.
#[test]
fn complexity_ratio_engine_scores_and_counts() {
    let p = pool();
    #[rustfmt::skip]
    let expected = [
        ((0.788272, 1.176204, 857), 14.167, 70, 4, (101, 75, 757, 322), (75, 3)),
        ((0.758541, 1.750636, 933), 12.897, 30, 28, (460, 65, 475, 47), (65, 13)),
        ((0.774840, 1.520635, 1016), 12.577, 44, 23, (194, 60, 823, 138), (60, 18)),
    ];
    for (m, ((q25, q75, n), engine, inflated, cutoffs, checks, (wins, max_turn))) in p.runs.iter().zip(expected) {
        let c = &m.complexity_ratio;
        close(c.median, 1.0, 0.0, "median ratio");
        close(c.q25, q25, 5e-7, "q25");
        close(c.q75, q75, 5e-7, "q75");
        assert_eq!((c.count, c.k), (n, PUBLISHED_K_RATIO));
        close(m.engine.avg_floored_score, engine, 5e-4, "engine floored");
        assert_eq!(m.engine.inflated_rounds, inflated);
        assert_eq!(m.cutoff_rounds, cutoffs);
        let k = &m.checks;
        assert_eq!((k.formal, k.formal_correct, k.shadow, k.shadow_correct), checks);
        assert_eq!((m.caution.count, m.rounds_played - m.caution.count), (wins, max_turn));
    }
}

/// §7.3 calibration (accuracy to 3 decimals, n exact) and guess rate (counts exact).
#[test]
fn calibration_and_guess_rate_of_spec_7_3() {
    let p = pool();
    #[rustfmt::skip]
    let cal: [&[(f64, u32)]; 3] = [
        &[(0.294, 126), (0.345, 330), (0.538, 225), (0.693, 101), (0.828, 64)],
        &[(0.072, 138), (0.098, 82), (0.134, 119), (0.105, 95), (0.185, 227), (0.270, 37)],
        &[(0.059, 135), (0.112, 152), (0.126, 175), (0.204, 113), (0.350, 300), (0.667, 27)],
    ];
    #[rustfmt::skip]
    let rate: [[(u32, u32); 6]; 3] = [
        [(0, 126), (2, 330), (4, 225), (28, 101), (62, 64), (0, 0)],
        [(0, 138), (4, 82), (11, 119), (40, 95), (207, 227), (37, 37)],
        [(0, 135), (0, 152), (0, 175), (3, 113), (100, 300), (27, 27)],
    ];
    for ((m, cal), rate) in p.runs.iter().zip(cal).zip(rate) {
        assert_eq!(m.calibration.levels.len(), cal.len());
        for (i, (l, (acc, n))) in m.calibration.levels.iter().zip(cal).enumerate() {
            assert_eq!((l.level, l.n), (5 + i as i64, *n));
            close(Some(l.accuracy), *acc, 5e-4, "accuracy");
        }
        for (g, (guesses, turns)) in m.guess_rate.iter().zip(rate) {
            assert_eq!((g.guess_count, g.total_turns), (guesses, turns), "{} level {}", m.model, g.level);
            if turns == 0 {
                assert_eq!((g.rate, g.compat_rate), (None, 1.0));
            } else {
                assert_eq!(g.rate, Some(g.compat_rate));
            }
        }
        // ECE/Brier are consistent with the table they summarise.
        let n: u32 = m.calibration.levels.iter().map(|l| l.n).sum();
        assert_eq!(n, m.calibration.n);
        let ece: f64 = m.calibration.levels.iter().map(|l| f64::from(l.n) / f64::from(n) * (l.accuracy - l.level as f64 / 10.0).abs()).sum();
        close(m.calibration.ece, ece, 1e-12, "ece");
        let brier = m.calibration.brier.expect("brier");
        assert!((0.0..=1.0).contains(&brier));
    }
}

#[test]
fn quartiles_follow_spec_2_3() {
    let p = pool();
    let edges = [2.8, 3.4, 7.3, 13.65, 16.0];
    assert_eq!(p.quartile_method, "qcut");
    for (a, e) in p.quartile_edges.iter().zip(edges) {
        assert!((a - e).abs() < 1e-9, "{:?}", p.quartile_edges);
    }
    let mut counts = [0; 4];
    for r in &p.rules {
        let q = r.quartile.as_deref().expect("binned");
        counts[usize::from(q.as_bytes()[1] - b'1')] += 1;
        let rule = SecretRule::from_description(&r.description).expect("library rule");
        assert_eq!((r.cyclomatic, r.node_count), (rule.cyclomatic(), rule.node_count()));
    }
    assert_eq!(counts, [8, 5, 6, 7]);
    let q = |name: &str| p.rules.iter().find(|r| r.name == name).and_then(|r| r.quartile.clone());
    assert_eq!(q("even_ranks_only").as_deref(), Some("Q1"));
    assert_eq!(q("black_face_cards").as_deref(), Some("Q3"));
    assert_eq!(p.by_rule.len(), 26);
    assert!(p.by_rule.iter().all(|r| r.n_rounds == 9 && r.floored_scores_by_model.len() == 3));
    assert!(p.by_rule.windows(2).all(|w| w[0].avg_floored_score >= w[1].avg_floored_score));
}

#[test]
fn bootstrap_is_deterministic_and_brackets_the_estimate() {
    let runs = shipped_runs();
    let opts = AnalysisOptions::default();
    let a = analyze_run(&runs[0], &opts).expect("run");
    let b = analyze_run(&runs[0], &opts).expect("run");
    assert_eq!(a.bootstrap, b.bootstrap);
    assert_eq!(a.bootstrap.len(), 8);
    for ci in &a.bootstrap {
        assert_eq!(ci.resamples, 2000);
        let (lo, hi, est) = (ci.lower.expect("lo"), ci.upper.expect("hi"), ci.estimate.expect("est"));
        assert!(lo <= est && est <= hi, "{ci:?}");
        assert!(lo < hi, "{ci:?}");
    }
    let other = analyze_run(&runs[0], &AnalysisOptions { bootstrap_seed: 7, ..opts }).expect("run");
    assert_ne!(a.bootstrap, other.bootstrap);
}

#[test]
fn k_search_is_deterministic_and_on_the_grid() {
    let runs = shipped_runs();
    let opts = AnalysisOptions { k_quartile: KChoice::Search, k_ratio: KChoice::Search, ..Default::default() };
    let p = analyze(&runs, &opts);
    for k in [p.k_quartile, p.k_ratio] {
        assert!(k.searched);
        assert!(k.correlation.is_some_and(|r| r < 0.0), "{k:?}");
        let i = ((k.k - 0.01) / 0.01).round();
        assert!((0.0..100.0).contains(&i) && (0.01 + i * 0.01 - k.k).abs() < 1e-15, "{k:?}");
    }
    assert_eq!(p, analyze(&runs, &opts));
    let fixed = pool();
    assert_eq!((fixed.k_quartile.k, fixed.k_quartile.searched), (PUBLISHED_K_QUARTILE, false));
}

#[test]
fn statistics_helpers_match_numpy_and_pandas() {
    assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.25), Some(1.75));
    assert_eq!(quantile(&[1.0, 2.0, 3.0, 4.0], 0.75), Some(3.25));
    assert_eq!(quantile(&[5.0], 0.3), Some(5.0));
    assert_eq!(quantile(&[], 0.5), None);
    assert_eq!(median(&[1.0, 2.0, 3.0, 10.0]), Some(2.5));
    assert_eq!(median(&[1.0, 2.0, 30.0]), Some(2.0));
    close(sample_var(&[30.0, 28.0, 0.0]), 844.0 / 3.0, 1e-12, "sample_var");
    assert_eq!(sample_var(&[1.0]), None);
    assert_eq!(pearson(&[1.0, 2.0, 3.0], &[3.0, 2.0, 1.0]), Some(-1.0));
    assert_eq!(pearson(&[1.0, 1.0, 1.0], &[3.0, 2.0, 1.0]), None);
}

#[test]
fn quartile_binning_falls_back_to_equal_width() {
    let (edges, method, bins) = quartile_bins(&[1.0, 1.0, 1.0, 1.0, 2.0]);
    assert_eq!(method, "equal_width");
    assert_eq!(edges.len(), 5);
    assert_eq!(bins, vec![Some(0), Some(0), Some(0), Some(0), Some(3)]);
    let (_, method, bins) = quartile_bins(&[3.0, 3.0]);
    assert_eq!(method, "equal_width");
    assert_eq!(bins, vec![Some(1), Some(1)]);
    let (_, method, bins) = quartile_bins(&[1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(method, "qcut");
    assert_eq!(bins, vec![Some(0), Some(0), Some(1), Some(2), Some(3)]);
    assert_eq!(quartile_bins(&[]).2, Vec::<Option<usize>>::new());
}

/// Synthetic round: formal wrong guesses at `wrong`, formal correct at `win`, 30 turns max.
fn synthetic(wrong: &[u32], win: Option<u32>, shadow_ok: &[u32]) -> ResultsFile {
    let last = win.unwrap_or(30);
    let turns: Vec<Value> = (1..=last)
        .map(|t| {
            let formal = wrong.contains(&t) || win == Some(t);
            let attempt = if formal {
                json!({"correct": win == Some(t)})
            } else if shadow_ok.contains(&t) {
                json!({"correct": true, "shadow": true})
            } else {
                Value::Null
            };
            json!({"turn_number": t, "llm_response": {"guess_rule": formal, "confidence_level": 6},
                   "guess_attempt": attempt, "tokens": {"output_tokens": 100}})
        })
        .collect();
    from_value(&json!({"config": {"player": "Synthetic"}, "rounds": [{
        "round_number": 1, "turn_count": last, "rule_description": "Only Aces (rank 1) .",
        "success": win.is_some(), "score": win.map_or(-2 * wrong.len() as i64, |w| 31 - i64::from(w) - 2 * wrong.len() as i64),
        "turns": turns}]}))
    .expect("synthetic run")
}

#[test]
fn counting_cutoff_and_round_quantities() {
    // No guesses: cutoff at 30, turn 30 never counts.
    let r = &per_round_rows(&synthetic(&[], None, &[]))[0];
    assert_eq!((r.cutoff_turn, r.counting_turn_count, r.counting_turns), (Some(30), 30, 29));
    // Ten wrong guesses on turns 1..=10: 2·F_n ≥ 30 − n first at n = 10.
    let wrong: Vec<u32> = (1..=10).collect();
    let run = synthetic(&wrong, Some(12), &[11]);
    let r = &per_round_rows(&run)[0];
    assert_eq!(r.cutoff_turn, Some(10));
    assert_eq!((r.counting_failed_guesses, r.formal_wrong_guesses), (9, 10));
    assert!(r.success && !r.counting_success);
    assert_eq!((r.win_turn, r.first_correct_turn, r.no_stakes_score), (Some(12), Some(11), 20));
    assert_eq!((r.caution, r.engine_score, r.counting_turn_count), (Some(1), -1, 10));
    let turns = per_turn_rows(&run);
    assert_eq!(turns.iter().filter(|t| t.counts_for_analysis).count(), 9);
    let m = analyze_run(&run, &AnalysisOptions::default()).expect("run");
    assert_eq!((m.streaks.count, m.streaks.max), (1, 9));
    assert_eq!((m.double_down.wrong_guesses, m.double_down.next_turn_guesses), (9, 8));
    // Rows serialise flat for a dataframe layer.
    let row = serde_json::to_value(&turns[0]).expect("json");
    assert!(row.as_object().is_some_and(|o| o.values().all(|v| !v.is_object())));
}

#[test]
fn empty_run_has_undefined_metrics_and_does_not_panic() {
    let run = from_value(&json!({"rounds": []})).expect("empty");
    let m = analyze_run(&run, &AnalysisOptions::default()).expect("run");
    assert!(m.headline.values().iter().all(|(_, v)| v.is_none()));
    assert!(m.bootstrap.iter().all(|ci| ci.lower.is_none() && ci.resamples == 0));
    assert_eq!(m.complexity_ratio.count, 0);
    assert!(analyze(&[], &AnalysisOptions::default()).runs.is_empty());
}

#[test]
fn extreme_stored_values_saturate_instead_of_panicking() {
    let round = |n: u32| {
        json!({"round_number": n, "turn_count": i64::MIN, "rule_description": "x", "success": true,
               "score": i64::MAX, "batch_round_index": 0,
               "llm_usage": {"player": {"output_tokens": u64::MAX}},
               "turns": [{"turn_number": 0, "tokens": {"output_tokens": u64::MAX},
                          "llm_response": {"guess_rule": true, "confidence_level": 1e308},
                          "guess_attempt": {"correct": true, "node_count": 1, "cyclomatic_complexity": 1}},
                         {"turn_number": u32::MAX, "tokens": {"output_tokens": u64::MAX},
                          "guess_attempt": {"correct": false}}]})
    };
    let run = from_value(&json!({"config": {"wrong_guess_penalty": i64::MIN, "max_turns": u32::MAX},
                                 "rounds": [round(1), round(2)]}))
    .expect("parse");
    let m = analyze_run(&run, &AnalysisOptions { bootstrap_resamples: 50, ..Default::default() }).expect("run");
    assert_eq!((m.total_score, m.total_output_tokens), (i64::MAX, u64::MAX));
    assert!(m.headline.avg_floored_score.is_some());
    assert!(super::super::replay::replay_run(&run).iter().all(|d| d.field == "rule"));
}
