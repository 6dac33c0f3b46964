//! Per-run metrics of spec §5.1 computed from the flat rows of the parent module: the eight
//! headline numbers, the secondary tables (caution, calibration, guess rate, complexity
//! ratio, tokens, variance, double-down, streaks, quartiles) and bootstrap intervals.

use std::collections::BTreeMap;

use serde::Serialize;

use super::{HEADLINE_METRICS, RoundRow, TurnRow, mean, median, quantile, ratio, sample_var, sorted, sum_i64, sum_u64};
use crate::envs::eleusis::game::pyrandom::PyRandom;

/// The eight headline metrics (none when undefined, e.g. no successful round for caution).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Headline {
    /// Mean of `max(0, stored score)` (headline, §5 #1).
    pub avg_floored_score: Option<f64>,
    /// Mean stored score.
    pub avg_score: Option<f64>,
    /// Mean no-stakes score.
    pub avg_no_stakes_score: Option<f64>,
    /// Mean counting failed guesses.
    pub avg_failed_guesses_counting: Option<f64>,
    /// Mean counting success.
    pub success_rate_counting: Option<f64>,
    /// Mean caution over successful rounds.
    pub avg_caution: Option<f64>,
    /// `2 · avg_failed_guesses_counting − avg_caution`.
    pub boldness_index: Option<f64>,
    /// Σ counting turn tokens / Σ counting_turn_count (compat, §8 Q11).
    pub avg_output_tokens_per_turn: Option<f64>,
}

impl Headline {
    /// The metrics paired with their [`HEADLINE_METRICS`] names, in that order.
    pub fn values(&self) -> [(&'static str, Option<f64>); 8] {
        let v = [
            self.avg_floored_score,
            self.avg_score,
            self.avg_no_stakes_score,
            self.avg_failed_guesses_counting,
            self.success_rate_counting,
            self.avg_caution,
            self.boldness_index,
            self.avg_output_tokens_per_turn,
        ];
        std::array::from_fn(|i| (HEADLINE_METRICS[i], v[i]))
    }

    /// Headline of a multiset of rounds (integer sums, one division each).
    pub(super) fn of<'a>(rounds: impl Iterator<Item = &'a RoundRow>) -> Headline {
        let (mut n, mut floored, mut score, mut no_stakes) = (0u32, 0i64, 0i64, 0i64);
        let (mut failed, mut succ, mut caution, mut caution_n) = (0u64, 0u32, 0u64, 0u32);
        let (mut tokens, mut turns) = (0u64, 0i64);
        for r in rounds {
            n += 1;
            floored = sum_i64([floored, r.floored_score]);
            score = sum_i64([score, r.score]);
            no_stakes = sum_i64([no_stakes, r.no_stakes_score]);
            failed += u64::from(r.counting_failed_guesses);
            succ += u32::from(r.counting_success);
            if let Some(c) = r.caution {
                caution += u64::from(c);
                caution_n += 1;
            }
            tokens = sum_u64([tokens, r.counting_output_tokens]);
            turns = sum_i64([turns, r.counting_turn_count]);
        }
        let n = f64::from(n);
        let failed = ratio(failed as f64, n);
        let caution = ratio(caution as f64, f64::from(caution_n));
        Headline {
            avg_floored_score: ratio(floored as f64, n),
            avg_score: ratio(score as f64, n),
            avg_no_stakes_score: ratio(no_stakes as f64, n),
            avg_failed_guesses_counting: failed,
            success_rate_counting: ratio(f64::from(succ), n),
            avg_caution: caution,
            boldness_index: failed.zip(caution).map(|(f, c)| 2.0 * f - c),
            avg_output_tokens_per_turn: ratio(tokens as f64, turns as f64),
        }
    }
}

/// Everything §5.1 defines for one run (model).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunMetrics {
    /// Model display name.
    pub model: String,
    /// Rounds in the file.
    pub rounds_played: usize,
    /// The eight headline numbers.
    pub headline: Headline,
    /// Σ stored score.
    pub total_score: i64,
    /// Σ floored score.
    pub total_floored_score: i64,
    /// Σ counting_turn_count (`total_turns` of `basic_metrics.csv`).
    pub total_turns: i64,
    /// Σ round player output tokens (failed calls included).
    pub total_output_tokens: u64,
    /// Σ turn output tokens over counting turns.
    pub counting_output_tokens: u64,
    /// Σ no-stakes score.
    pub total_no_stakes_score: i64,
    /// `avg_no_stakes_score − avg_floored_score`.
    pub no_stakes_delta: Option<f64>,
    /// Σ wall-clock seconds.
    pub total_wall_clock: f64,
    /// `total_wall_clock / total_turns` (§5 #14).
    pub wall_clock_per_turn: Option<f64>,
    /// Consistent tokens/turn: counting tokens / counting turns (§8 Q11 variant).
    pub avg_output_tokens_per_counting_turn: Option<f64>,
    /// Rounds with a counting cutoff.
    pub cutoff_rounds: usize,
    /// Formal/shadow check counts over all turns.
    pub checks: CheckCounts,
    /// Caution distribution (§5 #5).
    pub caution: CautionStats,
    /// Intra/inter-rule variance of floored scores (§5 #13).
    pub variance: VarianceDecomposition,
    /// Calibration at levels 5–10 (§5 #7).
    pub calibration: Calibration,
    /// Guess rate at levels 5–10 (§5 #8).
    pub guess_rate: Vec<GuessRateLevel>,
    /// Tentative/actual complexity ratio (§5 #11).
    pub complexity_ratio: ComplexityRatio,
    /// Output tokens by turn index (§5 #12b).
    pub tokens_by_turn: TokensByTurn,
    /// Double-down rate (§5 #15).
    pub double_down: DoubleDown,
    /// Wrong-guess streaks (§5 #16).
    pub streaks: Streaks,
    /// Per complexity quartile Q1–Q4 (§5 #10).
    pub quartiles: Vec<QuartileStats>,
    /// Scores re-derived with the engine formula (§7.4).
    pub engine: EngineScores,
    /// Percentile bootstrap intervals of the headline metrics.
    pub bootstrap: Vec<BootstrapCi>,
}

/// Formal and shadow check counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct CheckCounts {
    /// Formal guesses.
    pub formal: u32,
    /// Correct formal guesses.
    pub formal_correct: u32,
    /// Shadow checks.
    pub shadow: u32,
    /// Correct shadow checks.
    pub shadow_correct: u32,
}

/// Caution over successful rounds.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CautionStats {
    /// Per successful round, in round order.
    pub values: Vec<u32>,
    /// Number of values.
    pub count: usize,
    /// Mean.
    pub mean: Option<f64>,
    /// Median.
    pub median: Option<f64>,
    /// Maximum.
    pub max: Option<u32>,
    /// Sum.
    pub sum: u64,
    /// Sample standard deviation (ddof 1).
    pub std: Option<f64>,
    /// Percentage of rounds with caution > 0.
    pub pct_positive: Option<f64>,
}

/// Variance decomposition of floored scores by rule.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct VarianceDecomposition {
    /// Mean over rules of the within-rule sample variance.
    pub intra_rule_variance: Option<f64>,
    /// Sample variance of the per-rule means.
    pub inter_rule_variance: Option<f64>,
    /// intra / inter.
    pub variance_ratio: Option<f64>,
}

/// Calibration table plus summary scores (definitions in the module docs of `analysis`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Calibration {
    /// Levels with data, ascending.
    pub levels: Vec<CalibrationLevel>,
    /// Checks in the table.
    pub n: u32,
    /// Σ_l (n_l / n) · |accuracy_l − l/10|.
    pub ece: Option<f64>,
    /// Mean of (l/10 − correct)² over the table's checks.
    pub brier: Option<f64>,
}

/// One calibration level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct CalibrationLevel {
    /// Truncated confidence 5–10.
    pub level: i64,
    /// Share of correct checks.
    pub accuracy: f64,
    /// Checks at this level.
    pub n: u32,
}

/// Guess rate at one confidence level.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct GuessRateLevel {
    /// Truncated confidence 5–10.
    pub level: i64,
    /// guess_count / total_turns; none without turns (evalgrid behaviour).
    pub rate: Option<f64>,
    /// The published export value: `rate`, or 1.0 for an empty level (§8 Q10).
    pub compat_rate: f64,
    /// Counting turns at this level.
    pub total_turns: u32,
    /// Of which formal guesses.
    pub guess_count: u32,
}

/// Complexity ratio summary.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ComplexityRatio {
    /// k used.
    pub k: f64,
    /// Median ratio.
    pub median: Option<f64>,
    /// 25th percentile (linear).
    pub q25: Option<f64>,
    /// 75th percentile (linear).
    pub q75: Option<f64>,
    /// Rows.
    pub count: usize,
}

/// Output tokens by turn index.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TokensByTurn {
    /// One entry per turn number present, ascending.
    pub by_turn: Vec<TurnTokenMean>,
    /// Mean tokens on turns 1–5.
    pub early_mean: Option<f64>,
    /// Mean tokens on turns ≥ max(6, last turn − 4).
    pub late_mean: Option<f64>,
    /// `(late − early) / early · 100`.
    pub change_pct: Option<f64>,
}

/// Mean output tokens at one turn number.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TurnTokenMean {
    /// Turn number.
    pub turn_number: u32,
    /// Mean output tokens.
    pub avg_output_tokens: f64,
    /// Turns averaged.
    pub sample_count: u32,
}

/// Double-down rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DoubleDown {
    /// Counting wrong formal guesses.
    pub wrong_guesses: u32,
    /// Of which followed by a formal guess on the next counting turn.
    pub next_turn_guesses: u32,
    /// next / wrong (0 without wrong guesses, as the reference).
    pub rate: f64,
}

/// Wrong-guess streaks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Streaks {
    /// Streak lengths in round order.
    pub lengths: Vec<u32>,
    /// Number of streaks.
    pub count: usize,
    /// Mean length.
    pub mean: Option<f64>,
    /// Longest streak (0 without streaks).
    pub max: u32,
    /// Σ lengths.
    pub total: u64,
}

/// One complexity quartile of one run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QuartileStats {
    /// `Q1` … `Q4`.
    pub quartile: String,
    /// Rounds in it.
    pub n_rounds: usize,
    /// Mean floored score.
    pub avg_floored_score: Option<f64>,
    /// Mean counting success (the heat-map value).
    pub success_rate_counting: Option<f64>,
}

/// Engine-formula scores (§7.4), to quantify the published score patch.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct EngineScores {
    /// Mean `max(0, engine score)`.
    pub avg_floored_score: Option<f64>,
    /// Mean engine score.
    pub avg_score: Option<f64>,
    /// Successful rounds whose stored score is engine + 1.
    pub inflated_rounds: usize,
}

/// A percentile bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BootstrapCi {
    /// Headline metric name.
    pub metric: String,
    /// Point estimate on all rounds.
    pub estimate: Option<f64>,
    /// 2.5th percentile of the resampled statistic.
    pub lower: Option<f64>,
    /// 97.5th percentile of the resampled statistic.
    pub upper: Option<f64>,
    /// Resamples where the statistic was defined.
    pub resamples: usize,
}

/// Pool-dependent inputs of the per-run metrics.
pub(super) struct RunContext<'a> {
    /// k of the complexity ratio.
    pub(super) k_ratio: f64,
    /// Quartile index 0–3 of each rule description.
    pub(super) quartile_of: &'a BTreeMap<String, usize>,
    /// Minimum confidence of complexity-ratio rows.
    pub(super) confidence_threshold: f64,
    /// Bootstrap resamples and seed.
    pub(super) bootstrap: (usize, u64),
}

fn caution_stats(rounds: &[RoundRow]) -> CautionStats {
    let values: Vec<u32> = rounds.iter().filter_map(|r| r.caution).collect();
    let xs: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
    let positive = values.iter().filter(|&&v| v > 0).count();
    CautionStats {
        count: values.len(),
        mean: mean(&xs),
        median: median(&sorted(xs.clone())),
        max: values.iter().copied().max(),
        sum: values.iter().map(|&v| u64::from(v)).sum(),
        std: sample_var(&xs).map(f64::sqrt),
        pct_positive: ratio(positive as f64, values.len() as f64).map(|p| p * 100.0),
        values,
    }
}

fn variance(rounds: &[RoundRow]) -> VarianceDecomposition {
    let mut by_rule: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for r in rounds {
        by_rule.entry(&r.rule_description).or_default().push(r.floored_score as f64);
    }
    let vars: Vec<f64> = by_rule.values().filter_map(|v| sample_var(v)).collect();
    let means: Vec<f64> = by_rule.values().filter_map(|v| mean(v)).collect();
    let (intra, inter) = (mean(&vars), sample_var(&means));
    VarianceDecomposition { intra_rule_variance: intra, inter_rule_variance: inter, variance_ratio: intra.zip(inter).and_then(|(a, b)| ratio(a, b)) }
}

fn calibration(turns: &[TurnRow]) -> (Calibration, Vec<GuessRateLevel>) {
    let level_of = |t: &TurnRow| t.confidence_level.filter(|l| (5..=10).contains(l));
    let (mut cal, mut rate) = ([(0u32, 0u32); 6], [(0u32, 0u32); 6]);
    let (mut brier_sum, mut n) = (0.0, 0u32);
    for t in turns.iter().filter(|t| t.counts_for_analysis) {
        let Some(level) = level_of(t) else { continue };
        let i = (level - 5) as usize;
        rate[i].0 += 1;
        rate[i].1 += u32::from(t.guess_rule);
        if let Some(correct) = t.guess_correct {
            cal[i].0 += 1;
            cal[i].1 += u32::from(correct);
            let err = level as f64 / 10.0 - f64::from(u8::from(correct));
            brier_sum += err * err;
            n += 1;
        }
    }
    let levels: Vec<CalibrationLevel> = (5i64..=10)
        .zip(cal)
        .filter(|(_, (k, _))| *k > 0)
        .map(|(level, (k, c))| CalibrationLevel { level, accuracy: f64::from(c) / f64::from(k), n: k })
        .collect();
    let ece = (n > 0).then(|| levels.iter().map(|l| f64::from(l.n) / f64::from(n) * (l.accuracy - l.level as f64 / 10.0).abs()).sum());
    let guess_rate = (5i64..=10)
        .zip(rate)
        .map(|(level, (total, guesses))| {
            let r = ratio(f64::from(guesses), f64::from(total));
            GuessRateLevel { level, rate: r, compat_rate: r.unwrap_or(1.0), total_turns: total, guess_count: guesses }
        })
        .collect();
    let brier = ratio(brier_sum, f64::from(n));
    (Calibration { levels, n, ece, brier }, guess_rate)
}

fn complexity_ratio(rounds: &[RoundRow], turns: &[TurnRow], ctx: &RunContext<'_>) -> ComplexityRatio {
    let k = ctx.k_ratio;
    let mut actual: BTreeMap<u32, f64> = BTreeMap::new();
    for r in rounds {
        if let (Some(cc), Some(nc)) = (r.rule_cyclomatic, r.rule_node_count) {
            actual.entry(r.round_number).or_insert(f64::from(cc) + k * f64::from(nc));
        }
    }
    let ratios: Vec<f64> = turns
        .iter()
        .filter(|t| t.confidence.is_some_and(|c| c >= ctx.confidence_threshold))
        .filter_map(|t| {
            let tentative = f64::from(t.tentative_cyclomatic?) + k * f64::from(t.tentative_node_count?);
            ratio(tentative, *actual.get(&t.round_number)?)
        })
        .collect();
    let s = sorted(ratios);
    ComplexityRatio { k, median: median(&s), q25: quantile(&s, 0.25), q75: quantile(&s, 0.75), count: s.len() }
}

fn tokens_by_turn(turns: &[TurnRow]) -> TokensByTurn {
    let mut by: BTreeMap<u32, (u64, u32)> = BTreeMap::new();
    for t in turns {
        let e = by.entry(t.turn_number).or_default();
        e.0 = e.0.saturating_add(t.output_tokens);
        e.1 += 1;
    }
    let mean_where = |pred: &dyn Fn(u32) -> bool| {
        let (s, n) = turns.iter().filter(|t| pred(t.turn_number)).fold((0u64, 0u32), |(s, n), t| (s.saturating_add(t.output_tokens), n + 1));
        ratio(s as f64, f64::from(n))
    };
    let last = turns.iter().map(|t| t.turn_number).max().unwrap_or(0);
    let late_start = last.saturating_sub(4).max(6);
    let early = mean_where(&|n| n <= 5);
    let late = mean_where(&|n| n >= late_start);
    TokensByTurn {
        by_turn: by
            .into_iter()
            .map(|(turn_number, (s, n))| TurnTokenMean { turn_number, avg_output_tokens: s as f64 / f64::from(n), sample_count: n })
            .collect(),
        early_mean: early,
        late_mean: late,
        change_pct: early.zip(late).filter(|(e, _)| *e > 0.0).map(|(e, l)| (l - e) / e * 100.0),
    }
}

/// Double-down and streaks over each round's counting turns, sorted by turn number.
fn reckless(turns: &[TurnRow]) -> (DoubleDown, Streaks) {
    let mut by_round: BTreeMap<u32, Vec<&TurnRow>> = BTreeMap::new();
    for t in turns.iter().filter(|t| t.counts_for_analysis) {
        by_round.entry(t.round_number).or_default().push(t);
    }
    let formal = |t: &TurnRow| t.guess_rule && !t.is_shadow;
    let (mut wrong, mut next, mut lengths) = (0u32, 0u32, Vec::new());
    for list in by_round.values_mut() {
        list.sort_by_key(|t| t.turn_number);
        let mut streak = 0u32;
        for (i, t) in list.iter().enumerate() {
            let is_wrong = formal(t) && t.guess_correct != Some(true);
            if is_wrong {
                wrong += 1;
                next += u32::from(list.get(i + 1).is_some_and(|n| formal(n)));
                streak += 1;
            } else if streak > 0 {
                lengths.push(streak);
                streak = 0;
            }
        }
        if streak > 0 {
            lengths.push(streak);
        }
    }
    let total: u64 = lengths.iter().map(|&l| u64::from(l)).sum();
    let streaks =
        Streaks { count: lengths.len(), mean: ratio(total as f64, lengths.len() as f64), max: lengths.iter().copied().max().unwrap_or(0), total, lengths };
    let rate = ratio(f64::from(next), f64::from(wrong)).unwrap_or(0.0);
    (DoubleDown { wrong_guesses: wrong, next_turn_guesses: next, rate }, streaks)
}

fn quartiles(rounds: &[RoundRow], quartile_of: &BTreeMap<String, usize>) -> Vec<QuartileStats> {
    (0..4)
        .map(|q| {
            let rs: Vec<&RoundRow> = rounds.iter().filter(|r| quartile_of.get(&r.rule_description) == Some(&q)).collect();
            let n = rs.len() as f64;
            QuartileStats {
                quartile: format!("Q{}", q + 1),
                n_rounds: rs.len(),
                avg_floored_score: ratio(sum_i64(rs.iter().map(|r| r.floored_score)) as f64, n),
                success_rate_counting: ratio(rs.iter().filter(|r| r.counting_success).count() as f64, n),
            }
        })
        .collect()
}

/// Percentile intervals from `b` resamples of the rounds (with replacement) drawn by a
/// CPython-compatible MT19937 seeded with `seed`: deterministic and platform-independent.
fn bootstrap(rounds: &[RoundRow], estimate: &Headline, b: usize, seed: u64) -> Vec<BootstrapCi> {
    let mut samples: [Vec<f64>; 8] = Default::default();
    let n = rounds.len();
    if n > 0 {
        let mut rng = PyRandom::new(seed);
        for _ in 0..b {
            let h = Headline::of((0..n).filter_map(|_| rounds.get(rng.randbelow_usize(n))));
            for (i, (_, v)) in h.values().into_iter().enumerate() {
                samples[i].extend(v);
            }
        }
    }
    estimate
        .values()
        .into_iter()
        .zip(samples)
        .map(|((metric, estimate), s)| {
            let s = sorted(s);
            BootstrapCi { metric: metric.to_owned(), estimate, lower: quantile(&s, 0.025), upper: quantile(&s, 0.975), resamples: s.len() }
        })
        .collect()
}

/// All per-run metrics from the run's rows.
pub(super) fn run_metrics(model: &str, rounds: &[RoundRow], turns: &[TurnRow], ctx: &RunContext<'_>) -> RunMetrics {
    let headline = Headline::of(rounds.iter());
    let total_turns = sum_i64(rounds.iter().map(|r| r.counting_turn_count));
    let total_wall_clock: f64 = rounds.iter().map(|r| r.wall_clock_seconds).sum();
    let counting_output_tokens = sum_u64(rounds.iter().map(|r| r.counting_output_tokens));
    let counting_turns: u64 = rounds.iter().map(|r| u64::from(r.counting_turns)).sum();
    let mut checks = CheckCounts::default();
    for t in turns.iter().filter(|t| t.has_guess_attempt) {
        let ok = u32::from(t.guess_correct == Some(true));
        if t.is_shadow {
            checks.shadow += 1;
            checks.shadow_correct += ok;
        } else {
            checks.formal += 1;
            checks.formal_correct += ok;
        }
    }
    let (calibration, guess_rate) = calibration(turns);
    let (double_down, streaks) = reckless(turns);
    let n = rounds.len() as f64;
    let engine = EngineScores {
        avg_floored_score: ratio(sum_i64(rounds.iter().map(|r| r.engine_score.max(0))) as f64, n),
        avg_score: ratio(sum_i64(rounds.iter().map(|r| r.engine_score)) as f64, n),
        inflated_rounds: rounds.iter().filter(|r| r.success && r.engine_score.checked_add(1) == Some(r.score)).count(),
    };
    RunMetrics {
        model: model.to_owned(),
        rounds_played: rounds.len(),
        total_score: sum_i64(rounds.iter().map(|r| r.score)),
        total_floored_score: sum_i64(rounds.iter().map(|r| r.floored_score)),
        total_turns,
        total_output_tokens: sum_u64(rounds.iter().map(|r| r.output_tokens)),
        counting_output_tokens,
        total_no_stakes_score: sum_i64(rounds.iter().map(|r| r.no_stakes_score)),
        no_stakes_delta: headline.avg_no_stakes_score.zip(headline.avg_floored_score).map(|(a, b)| a - b),
        total_wall_clock,
        wall_clock_per_turn: ratio(total_wall_clock, total_turns as f64),
        avg_output_tokens_per_counting_turn: ratio(counting_output_tokens as f64, counting_turns as f64),
        cutoff_rounds: rounds.iter().filter(|r| r.cutoff_turn.is_some()).count(),
        checks,
        caution: caution_stats(rounds),
        variance: variance(rounds),
        calibration,
        guess_rate,
        complexity_ratio: complexity_ratio(rounds, turns, ctx),
        tokens_by_turn: tokens_by_turn(turns),
        double_down,
        streaks,
        quartiles: quartiles(rounds, ctx.quartile_of),
        engine,
        bootstrap: bootstrap(rounds, &headline, ctx.bootstrap.0, ctx.bootstrap.1),
        headline,
    }
}
