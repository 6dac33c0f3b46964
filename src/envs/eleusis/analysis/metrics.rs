//! Metrics of the Eleusis write-up (spec §5) computed from imported results files: flat
//! per-turn / per-round rows (the table layer a polars front end can wrap), per-run metrics
//! with the §5.0 counting cutoff, pool-level complexity (k search, quartiles, by-rule) and
//! deterministic bootstrap intervals. All reductions are sequential f64 sums in row order;
//! integer sums saturate.
//!
//! Definitions the reference lacks (evalgrid's own):
//! * **ECE** = Σ_l (n_l / n) · |accuracy_l − l/10| over the calibration table (counting turns
//!   with a check, confidence truncated, levels 5–10), i.e. a binned ECE restricted to the
//!   levels the reference keeps; **Brier** = mean of (l/10 − correct)² over the same checks.
//! * **Bootstrap**: 2,000 resamples of the run's rounds with replacement (indices from a
//!   CPython-compatible MT19937, `randbelow(n)`, seed 42); each headline metric is recomputed
//!   on the resample exactly as on the full run (caution over the resample's successful
//!   rounds, tokens/turn as a ratio of sums); the interval is the 2.5 / 97.5 % linear
//!   percentile of the defined resample values.
use std::collections::BTreeMap;

use serde::Serialize;

use super::results::{ResultsFile, TurnEntry};
use crate::envs::eleusis::game::rule::SecretRule;

mod run;
pub use run::{
    BootstrapCi, Calibration, CalibrationLevel, CautionStats, CheckCounts, ComplexityRatio, DoubleDown, EngineScores, GuessRateLevel, Headline, QuartileStats,
    RunMetrics, Streaks, TokensByTurn, TurnTokenMean, VarianceDecomposition,
};

/// k of `C_k` used by the published quartile heat-map (§5 #10, §8 Q15).
pub const PUBLISHED_K_QUARTILE: f64 = 0.20;
/// k of `C_k` used by the published complexity ratio and by-rule table (§5 #11, #17).
pub const PUBLISHED_K_RATIO: f64 = 0.49;
/// Names of the eight headline metrics, in CSV column order.
pub const HEADLINE_METRICS: [&str; 8] = [
    "avg_floored_score",
    "avg_score",
    "avg_no_stakes_score",
    "avg_failed_guesses_counting",
    "success_rate_counting",
    "avg_caution",
    "boldness_index",
    "avg_output_tokens_per_turn",
];

/// How k of `C_k = cyclomatic + k · node_count` is chosen; both published values depend on
/// the pool of runs, so reproduction uses fixed values.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub enum KChoice {
    /// Use this k.
    Fixed(f64),
    /// Grid search k ∈ {0.01 … 1.00} for the most negative per-rule correlation (§5 #9).
    Search,
}

/// Knobs of the analysis; [`Default`] reproduces the published tables.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AnalysisOptions {
    /// k for quartiles (published 0.20, searched on `counting_success`).
    pub k_quartile: KChoice,
    /// k for complexity ratio and by-rule (published 0.49, searched on raw `success`).
    pub k_ratio: KChoice,
    /// Minimum confidence of complexity-ratio rows (5).
    pub confidence_threshold: f64,
    /// Bootstrap resamples over rounds (2,000).
    pub bootstrap_resamples: usize,
    /// Seed of the bootstrap's CPython-compatible MT19937.
    pub bootstrap_seed: u64,
}

impl Default for AnalysisOptions {
    fn default() -> Self {
        AnalysisOptions {
            k_quartile: KChoice::Fixed(PUBLISHED_K_QUARTILE),
            k_ratio: KChoice::Fixed(PUBLISHED_K_RATIO),
            confidence_threshold: 5.0,
            bootstrap_resamples: 2000,
            bootstrap_seed: 42,
        }
    }
}

/// One turn, flattened (the reference `df_turns`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TurnRow {
    /// Model display name.
    pub model: String,
    /// Round number.
    pub round_number: u32,
    /// Turn number.
    pub turn_number: u32,
    /// Confidence as a number (bool → 0/1; strings, lists → none).
    pub confidence: Option<f64>,
    /// Confidence truncated to an integer (pandas `astype(int)`).
    pub confidence_level: Option<i64>,
    /// `guess_rule` under Python truthiness.
    pub guess_rule: bool,
    /// A formal or shadow check was recorded.
    pub has_guess_attempt: bool,
    /// Verdict of that check.
    pub guess_correct: Option<bool>,
    /// The check was a shadow check.
    pub is_shadow: bool,
    /// Played card string.
    pub card: Option<String>,
    /// Recorded accept/reject of the played card.
    pub card_accepted: Option<bool>,
    /// Tentative rule text.
    pub tentative_rule: Option<String>,
    /// AST node count of the compiled guess.
    pub tentative_node_count: Option<u32>,
    /// Cyclomatic complexity of the compiled guess.
    pub tentative_cyclomatic: Option<u32>,
    /// Before the round's counting cutoff (§5.0).
    pub counts_for_analysis: bool,
    /// Turn output tokens.
    pub output_tokens: u64,
    /// Failed attempts of the turn (3 = random fallback).
    pub retry_count: u32,
}

/// One round, flattened with every derived per-round quantity of §5.0 (the `df_rounds`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RoundRow {
    /// Model display name.
    pub model: String,
    /// Round number.
    pub round_number: u32,
    /// Library rule name.
    pub rule_name: String,
    /// Verbatim rule description (join key).
    pub rule_description: String,
    /// Batch index.
    pub batch_round_index: Option<u32>,
    /// Stored success.
    pub success: bool,
    /// Stored score (published quirk included, §8 Q1).
    pub score: i64,
    /// `max(0, score)`.
    pub floored_score: i64,
    /// Stored `turn_count` (§8 Q2).
    pub turn_count: i64,
    /// Recorded turns.
    pub turns_played: usize,
    /// Stored F.
    pub failed_guesses: Option<u32>,
    /// First turn whose formal guess was correct (W).
    pub win_turn: Option<u32>,
    /// Wrong formal guesses over all turns.
    pub formal_wrong_guesses: u32,
    /// First n with `penalty·F_n ≥ max_turns − n`.
    pub cutoff_turn: Option<u32>,
    /// Wrong formal guesses before the cutoff, up to the first correct one.
    pub counting_failed_guesses: u32,
    /// Success with W before the cutoff.
    pub counting_success: bool,
    /// `min(turn_count, cutoff)`.
    pub counting_turn_count: i64,
    /// First turn with any correct check.
    pub first_correct_turn: Option<u32>,
    /// `max_turns − first_correct_turn + 1`, else 0.
    pub no_stakes_score: i64,
    /// Consecutive correct shadow checks just before the win (successful rounds only).
    pub caution: Option<u32>,
    /// Score by the engine formula `max_turns + 1 − W − penalty·F` / `−penalty·F`.
    pub engine_score: i64,
    /// Round player output tokens (all calls).
    pub output_tokens: u64,
    /// Σ turn output tokens over counting turns.
    pub counting_output_tokens: u64,
    /// Counting turns.
    pub counting_turns: u32,
    /// Wall-clock seconds (0 when missing).
    pub wall_clock_seconds: f64,
    /// Secret rule cyclomatic complexity.
    pub rule_cyclomatic: Option<u32>,
    /// Secret rule AST node count.
    pub rule_node_count: Option<u32>,
}

/// Complexity of one library rule, keyed by description.
#[derive(Debug, Clone, PartialEq, Serialize)]
struct RuleInfo {
    /// Rule name.
    name: String,
    /// Cyclomatic complexity.
    cyclomatic: u32,
    /// AST node count.
    node_count: u32,
}

/// description → complexity: first `rules_library` entry over the runs (the reference's
/// lookup), then the native table for descriptions missing from every library.
fn rule_lookup(runs: &[&ResultsFile]) -> BTreeMap<String, RuleInfo> {
    let mut map = BTreeMap::new();
    for r in runs.iter().flat_map(|run| run.rules_library()) {
        if let (Some(d), Some(cc), Some(nc)) = (&r.description, r.cyclomatic_complexity, r.node_count) {
            map.entry(d.clone()).or_insert_with(|| RuleInfo { name: r.name.clone().unwrap_or_default(), cyclomatic: cc, node_count: nc });
        }
    }
    for round in runs.iter().flat_map(|run| &run.rounds) {
        if let Some(rule) = SecretRule::from_description(&round.rule_description) {
            map.entry(round.rule_description.clone()).or_insert_with(|| RuleInfo {
                name: rule.name().to_owned(),
                cyclomatic: rule.cyclomatic(),
                node_count: rule.node_count(),
            });
        }
    }
    map
}

/// The reference counting cutoff: walk turns in order, F_n = wrong formal guesses so far.
fn counting_cutoff(turns: &[TurnEntry], max_turns: u32, penalty: i64) -> Option<u32> {
    let mut failed = 0i64;
    for t in turns {
        if t.guess_attempt.as_ref().is_some_and(|g| !g.is_shadow() && g.correct == Some(false)) {
            failed += 1;
        }
        if penalty.saturating_mul(failed) >= i64::from(max_turns) - i64::from(t.turn_number) {
            return Some(t.turn_number);
        }
    }
    None
}

/// Flat per-turn rows of one run (all turns, cutoff flag included).
pub fn per_turn_rows(run: &ResultsFile) -> Vec<TurnRow> {
    rows(run, &rule_lookup(&[run])).1
}

/// Flat per-round rows of one run (rule complexity from the run's own library).
pub fn per_round_rows(run: &ResultsFile) -> Vec<RoundRow> {
    rows(run, &rule_lookup(&[run])).0
}

fn rows(run: &ResultsFile, lookup: &BTreeMap<String, RuleInfo>) -> (Vec<RoundRow>, Vec<TurnRow>) {
    let model = run.model_name().to_owned();
    let (max_turns, penalty) = (run.config.max_turns(), run.config.wrong_guess_penalty());
    let mut round_rows = Vec::with_capacity(run.rounds.len());
    let mut turn_rows = Vec::new();
    for r in &run.rounds {
        let cutoff = counting_cutoff(&r.turns, max_turns, penalty).filter(|&c| c != 0);
        let counts = |n: u32| cutoff.is_none_or(|c| n < c);
        let (mut counting_failed, mut success_turn, mut formal_wrong) = (0u32, None, 0u32);
        for t in &r.turns {
            let Some(g) = t.guess_attempt.as_ref().filter(|g| !g.is_shadow()) else {
                continue;
            };
            match g.correct {
                Some(true) if success_turn.is_none() => success_turn = Some(t.turn_number),
                Some(false) => {
                    formal_wrong += 1;
                    if success_turn.is_none() && counts(t.turn_number) {
                        counting_failed += 1;
                    }
                }
                _ => {}
            }
        }
        let first_correct_turn = r.turns.iter().filter(|t| t.guess_attempt.as_ref().is_some_and(|g| g.is_correct())).map(|t| t.turn_number).min();
        let mut sorted: Vec<&TurnEntry> = r.turns.iter().collect();
        sorted.sort_by_key(|t| t.turn_number);
        let caution = r.success.then_some(()).and_then(|()| {
            let w = sorted.iter().position(|t| t.llm_response.guess_flag() && t.guess_attempt.as_ref().is_some_and(|g| g.is_correct()))?;
            let streak = sorted[..w].iter().rev().take_while(|t| t.guess_attempt.as_ref().is_some_and(|g| g.is_shadow() && g.is_correct())).count();
            Some(u32::try_from(streak).unwrap_or(u32::MAX))
        });
        let pen_f = penalty.saturating_mul(i64::from(formal_wrong));
        let engine_score = match success_turn {
            Some(w) => (i64::from(max_turns) + 1 - i64::from(w)).saturating_sub(pen_f),
            None => 0i64.saturating_sub(pen_f),
        };
        let (mut counting_output_tokens, mut counting_turns) = (0u64, 0u32);
        for t in &r.turns {
            let g = t.guess_attempt.as_ref();
            let conf = t.llm_response.confidence_level.as_ref();
            let counted = counts(t.turn_number);
            if counted {
                counting_output_tokens = counting_output_tokens.saturating_add(t.output_tokens());
                counting_turns += 1;
            }
            let action = t.action_result.as_ref();
            turn_rows.push(TurnRow {
                model: model.clone(),
                round_number: r.round_number,
                turn_number: t.turn_number,
                confidence: conf.and_then(|c| c.numeric()),
                confidence_level: conf.and_then(|c| c.truncated()),
                guess_rule: t.llm_response.guess_flag(),
                has_guess_attempt: g.is_some(),
                guess_correct: g.and_then(|g| g.correct),
                is_shadow: g.is_some_and(|g| g.is_shadow()),
                card: action.and_then(|a| a.card.clone()),
                card_accepted: action.and_then(|a| a.accepted),
                tentative_rule: t.llm_response.tentative_text().map(str::to_owned),
                tentative_node_count: g.and_then(|g| g.node_count),
                tentative_cyclomatic: g.and_then(|g| g.cyclomatic_complexity),
                counts_for_analysis: counted,
                output_tokens: t.output_tokens(),
                retry_count: t.retry_count.unwrap_or(0),
            });
        }
        let info = lookup.get(&r.rule_description);
        round_rows.push(RoundRow {
            model: model.clone(),
            round_number: r.round_number,
            rule_name: r.rule_name.clone(),
            rule_description: r.rule_description.clone(),
            batch_round_index: r.batch_round_index,
            success: r.success,
            score: r.score,
            floored_score: r.score.max(0),
            turn_count: r.turn_count,
            turns_played: r.turns.len(),
            failed_guesses: r.failed_guesses,
            win_turn: success_turn,
            formal_wrong_guesses: formal_wrong,
            cutoff_turn: cutoff,
            counting_failed_guesses: counting_failed,
            counting_success: r.success && cutoff.is_none_or(|c| success_turn.is_some_and(|w| w < c)),
            counting_turn_count: cutoff.map_or(r.turn_count, |c| r.turn_count.min(i64::from(c))),
            first_correct_turn,
            no_stakes_score: first_correct_turn.map_or(0, |t| i64::from(max_turns) - i64::from(t) + 1),
            caution,
            engine_score,
            output_tokens: r.llm_usage.as_ref().and_then(|u| u.player.as_ref()).map_or(0, |p| p.output()),
            counting_output_tokens,
            counting_turns,
            wall_clock_seconds: r.wall_clock_seconds.unwrap_or(0.0),
            rule_cyclomatic: info.map(|i| i.cyclomatic),
            rule_node_count: info.map(|i| i.node_count),
        });
    }
    (round_rows, turn_rows)
}

// ---------------------------------------------------------------- statistics helpers

/// Saturating sum: stored scores and token counts are untrusted input, and an overflow must
/// neither panic (debug) nor wrap (release).
fn sum_i64(xs: impl IntoIterator<Item = i64>) -> i64 {
    xs.into_iter().fold(0, i64::saturating_add)
}

/// Saturating sum of token counts (see [`sum_i64`]).
fn sum_u64(xs: impl IntoIterator<Item = u64>) -> u64 {
    xs.into_iter().fold(0, u64::saturating_add)
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sample variance (ddof 1), two-pass.
fn sample_var(xs: &[f64]) -> Option<f64> {
    let m = mean(xs).filter(|_| xs.len() >= 2)?;
    Some(xs.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / (xs.len() - 1) as f64)
}

fn sorted(mut xs: Vec<f64>) -> Vec<f64> {
    xs.sort_by(f64::total_cmp);
    xs
}

/// numpy `quantile(method="linear")` on sorted data, including numpy's two-sided lerp.
fn quantile(sorted: &[f64], q: f64) -> Option<f64> {
    let last = sorted.len().checked_sub(1)?;
    let virt = q * last as f64;
    let lo = (virt.floor().max(0.0) as usize).min(last);
    let (a, b, t) = (sorted[lo], sorted[(lo + 1).min(last)], virt - lo as f64);
    Some(if t >= 0.5 { b - (b - a) * (1.0 - t) } else { a + (b - a) * t })
}

/// pandas median: middle value, or the mean of the two middle values.
fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

/// Pearson correlation (numpy `corrcoef` formula, clipped to [−1, 1]); none when undefined.
fn pearson(x: &[f64], y: &[f64]) -> Option<f64> {
    let (mx, my) = (mean(x)?, mean(y)?);
    let (mut sxy, mut sxx, mut syy) = (0.0, 0.0, 0.0);
    for (a, b) in x.iter().zip(y) {
        sxy += (a - mx) * (b - my);
        sxx += (a - mx) * (a - mx);
        syy += (b - my) * (b - my);
    }
    // numpy divides the covariance matrix by n − 1 before normalising.
    let d = (x.len() as f64 - 1.0).max(1.0);
    let r = (sxy / d) / (sxx / d).sqrt() / (syy / d).sqrt();
    r.is_finite().then(|| r.clamp(-1.0, 1.0))
}

fn ratio(num: f64, den: f64) -> Option<f64> {
    (den != 0.0).then(|| num / den)
}

// ---------------------------------------------------------------- pool level

/// The k of one `C_k` and how it was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct KSelection {
    /// The k used.
    pub k: f64,
    /// Pearson r of per-rule `C_k` and success rate at that k (searched k only).
    pub correlation: Option<f64>,
    /// Whether k came from the grid search.
    pub searched: bool,
}

/// Complexity and quartile of one rule played in the pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuleComplexity {
    /// Verbatim description.
    pub description: String,
    /// Rule name.
    pub name: String,
    /// Cyclomatic complexity.
    pub cyclomatic: u32,
    /// AST node count.
    pub node_count: u32,
    /// `C_k` with the quartile k.
    pub complexity_quartile_k: f64,
    /// `C_k` with the ratio/by-rule k.
    pub complexity_ratio_k: f64,
    /// `Q1` … `Q4` (none if binning failed).
    pub quartile: Option<String>,
}

/// One row of the by-rule table (§5 #17), over all runs of the pool.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ByRuleRow {
    /// Verbatim description.
    pub description: String,
    /// Rule name (from the rounds).
    pub name: String,
    /// Rounds played.
    pub n_rounds: usize,
    /// Mean floored score.
    pub avg_floored_score: Option<f64>,
    /// Sample std (ddof 1) of floored scores.
    pub std_floored_score: Option<f64>,
    /// Mean counting success.
    pub success_rate_counting: Option<f64>,
    /// `C_k` with the ratio k.
    pub aggregated_complexity: Option<f64>,
    /// Floored scores per model, in round order.
    pub floored_scores_by_model: BTreeMap<String, Vec<i64>>,
}

/// Metrics of a pool of runs: the pool-dependent parts (k, quartiles, by-rule) and each run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PoolAnalysis {
    /// k of the quartiles.
    pub k_quartile: KSelection,
    /// k of the complexity ratio and by-rule table.
    pub k_ratio: KSelection,
    /// Quartile bin edges (5 values) of the rule-level `C_k`.
    pub quartile_edges: Vec<f64>,
    /// `qcut` (quantile edges) or `equal_width` (fallback on duplicate edges).
    pub quartile_method: String,
    /// The rules played, by description.
    pub rules: Vec<RuleComplexity>,
    /// By-rule table, best average first.
    pub by_rule: Vec<ByRuleRow>,
    /// One entry per input run, in input order.
    pub runs: Vec<RunMetrics>,
}

/// Grid search of §5 #9: most negative Pearson r over k = 0.01 + i·0.01, i < 100.
fn search_k(rounds: &[&RoundRow], lookup: &BTreeMap<String, RuleInfo>, success: fn(&RoundRow) -> bool) -> KSelection {
    let mut per_rule: BTreeMap<&str, (u32, u32)> = BTreeMap::new();
    for r in rounds {
        let e = per_rule.entry(&r.rule_description).or_default();
        e.0 += u32::from(success(r));
        e.1 += 1;
    }
    let (mut cc, mut nc, mut rate) = (Vec::new(), Vec::new(), Vec::new());
    for (d, (found, played)) in per_rule {
        if let Some(info) = lookup.get(d) {
            cc.push(f64::from(info.cyclomatic));
            nc.push(f64::from(info.node_count));
            rate.push(f64::from(found) / f64::from(played));
        }
    }
    let (mut best_k, mut best_r) = (0.1, 0.0);
    if cc.len() >= 3 {
        for i in 0..100u32 {
            let k = 0.01 + f64::from(i) * 0.01;
            let c: Vec<f64> = cc.iter().zip(&nc).map(|(c, n)| c + k * n).collect();
            if let Some(r) = pearson(&c, &rate).filter(|&r| r < best_r) {
                (best_k, best_r) = (k, r);
            }
        }
    }
    KSelection { k: best_k, correlation: Some(best_r), searched: true }
}

/// pandas `qcut(q=4)` (right-closed, lowest included); on duplicate edges pandas raises and
/// the reference falls back to `cut(bins=4)` (equal width, low edge lowered by 0.1 %).
fn quartile_bins(values: &[f64]) -> (Vec<f64>, &'static str, Vec<Option<usize>>) {
    let s = sorted(values.to_vec());
    let (Some(&mn), Some(&mx)) = (s.first(), s.last()) else {
        return (Vec::new(), "qcut", Vec::new());
    };
    let q: Vec<f64> = [0.0, 0.25, 0.5, 0.75, 1.0].iter().filter_map(|&p| quantile(&s, p)).collect();
    let (edges, method, lowest) = if q.windows(2).all(|w| w[0] < w[1]) {
        (q, "qcut", true)
    } else {
        let (lo, hi) = if mn == mx {
            let pad = if mn == 0.0 { 0.001 } else { 0.001 * mn.abs() };
            (mn - pad, mx + pad)
        } else {
            (mn, mx)
        };
        let step = (hi - lo) / 4.0;
        let mut e: Vec<f64> = (0..5).map(|i| f64::from(i) * step + lo).collect();
        e[4] = hi;
        if mn != mx {
            e[0] -= (mx - mn) * 0.001;
        }
        (e, "equal_width", false)
    };
    let bins = values
        .iter()
        .map(|&v| {
            let ids = edges.iter().position(|&e| e >= v).unwrap_or(edges.len());
            let ids = if lowest && edges.first() == Some(&v) { 1 } else { ids };
            (ids > 0 && ids < edges.len()).then(|| ids - 1)
        })
        .collect();
    (edges, method, bins)
}

fn by_rule(rounds: &[&RoundRow], lookup: &BTreeMap<String, RuleInfo>, k: f64) -> Vec<ByRuleRow> {
    let mut groups: BTreeMap<&str, Vec<&RoundRow>> = BTreeMap::new();
    for r in rounds {
        groups.entry(&r.rule_description).or_default().push(r);
    }
    let mut rows: Vec<ByRuleRow> = groups
        .into_iter()
        .map(|(d, rs)| {
            let scores: Vec<f64> = rs.iter().map(|r| r.floored_score as f64).collect();
            let mut by_model: BTreeMap<String, Vec<i64>> = BTreeMap::new();
            for r in &rs {
                by_model.entry(r.model.clone()).or_default().push(r.floored_score);
            }
            ByRuleRow {
                description: d.to_owned(),
                name: rs.first().map(|r| r.rule_name.clone()).unwrap_or_default(),
                n_rounds: rs.len(),
                avg_floored_score: mean(&scores),
                std_floored_score: sample_var(&scores).map(f64::sqrt),
                success_rate_counting: ratio(rs.iter().filter(|r| r.counting_success).count() as f64, rs.len() as f64),
                aggregated_complexity: lookup.get(d).map(|i| f64::from(i.cyclomatic) + k * f64::from(i.node_count)),
                floored_scores_by_model: by_model,
            }
        })
        .collect();
    let key = |r: &ByRuleRow| r.avg_floored_score.unwrap_or(f64::NEG_INFINITY);
    rows.sort_by(|a, b| key(b).total_cmp(&key(a)));
    rows
}

/// Analyses a pool of runs (the reference analyses a results folder as one pool).
pub fn analyze(runs: &[ResultsFile], opts: &AnalysisOptions) -> PoolAnalysis {
    let refs: Vec<&ResultsFile> = runs.iter().collect();
    let lookup = rule_lookup(&refs);
    let tables: Vec<(Vec<RoundRow>, Vec<TurnRow>)> = runs.iter().map(|r| rows(r, &lookup)).collect();
    let all: Vec<&RoundRow> = tables.iter().flat_map(|t| &t.0).collect();
    let pick = |choice: KChoice, success: fn(&RoundRow) -> bool| match choice {
        KChoice::Fixed(k) => KSelection { k, correlation: None, searched: false },
        KChoice::Search => search_k(&all, &lookup, success),
    };
    let k_quartile = pick(opts.k_quartile, |r| r.counting_success);
    let k_ratio = pick(opts.k_ratio, |r| r.success);
    let present: BTreeMap<&str, &RuleInfo> = all.iter().filter_map(|r| lookup.get(&r.rule_description).map(|i| (r.rule_description.as_str(), i))).collect();
    let c_k = |i: &RuleInfo, k: f64| f64::from(i.cyclomatic) + k * f64::from(i.node_count);
    let cq: Vec<f64> = present.values().map(|i| c_k(i, k_quartile.k)).collect();
    let (quartile_edges, method, bins) = quartile_bins(&cq);
    let quartile_of: BTreeMap<String, usize> = present.keys().zip(&bins).filter_map(|(d, b)| b.map(|b| ((*d).to_owned(), b))).collect();
    let rules = present
        .iter()
        .zip(&bins)
        .map(|((d, i), b)| RuleComplexity {
            description: (*d).to_owned(),
            name: i.name.clone(),
            cyclomatic: i.cyclomatic,
            node_count: i.node_count,
            complexity_quartile_k: c_k(i, k_quartile.k),
            complexity_ratio_k: c_k(i, k_ratio.k),
            quartile: b.map(|b| format!("Q{}", b + 1)),
        })
        .collect();
    let ctx = run::RunContext {
        k_ratio: k_ratio.k,
        quartile_of: &quartile_of,
        confidence_threshold: opts.confidence_threshold,
        bootstrap: (opts.bootstrap_resamples, opts.bootstrap_seed),
    };
    PoolAnalysis {
        k_quartile,
        k_ratio,
        quartile_edges,
        quartile_method: method.to_owned(),
        rules,
        by_rule: by_rule(&all, &lookup, k_ratio.k),
        runs: runs.iter().zip(&tables).map(|(run, (rr, tr))| run::run_metrics(run.model_name(), rr, tr, &ctx)).collect(),
    }
}

/// Metrics of a single run analysed as a pool of one (always `Some`; with the default fixed
/// k this reproduces the published per-model values).
pub fn analyze_run(run: &ResultsFile, opts: &AnalysisOptions) -> Option<RunMetrics> {
    analyze(std::slice::from_ref(run), opts).runs.pop()
}

#[cfg(test)]
mod tests;
