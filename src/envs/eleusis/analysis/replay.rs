//! Replays imported rounds through the engine ([`Round`], recorded cards as actions, recorded
//! verdicts as the judge) and reports every turn whose hand, board string, accept/reject or
//! check kind differs from the file; plus the import pipeline (`evalgrid eleusis import`):
//! read files → pool metrics → replay → report / CSV.

use crate::exhibit::csv_field;
use std::fmt::Display;
use std::path::PathBuf;

use serde::Serialize;

use super::metrics::{AnalysisOptions, ByRuleRow, KSelection, RuleComplexity, RunMetrics, analyze};
use super::results::{GuessAttempt, ResultsError, ResultsFile, RoundRecord, read_results};
use crate::envs::eleusis::game::card::Card;
use crate::envs::eleusis::game::equivalence::Verdict;
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::game::{Action, GameConfig, GameOverReason, GuessKind, Judge, JudgeRequest, Round};

/// One disagreement between the file and the engine (`turn` is none for round-level fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReplayDiff {
    /// Round number.
    pub round: u32,
    /// Turn number, or none for round-level fields (setup, outcome).
    pub turn: Option<u32>,
    /// What differs: `hand`, `board`, `accepted`, `check_kind`, `card`, `success`, …
    pub field: String,
    /// Value in the file.
    pub recorded: String,
    /// Value from the engine.
    pub replayed: String,
}

/// A judge that returns the verdict stored in the file (`correct` / `reasoning`); a check the
/// file does not have is answered "not equivalent" so the replay can go on.
#[derive(Debug, Clone, Copy)]
pub struct RecordedJudge<'a> {
    /// The turn's recorded check, if any.
    pub attempt: Option<&'a GuessAttempt>,
}

impl Judge for RecordedJudge<'_> {
    fn judge(&mut self, _request: &JudgeRequest<'_>) -> Verdict {
        Verdict {
            equivalent: self.attempt.is_some_and(GuessAttempt::is_correct),
            message: self.attempt.and_then(|g| g.reasoning.clone()).unwrap_or_else(|| "no recorded verdict".to_owned()),
            comparisons: 0,
            mismatches: 0,
        }
    }
}

/// The engine configuration a results file was played with (defaults 12 / 30 / 2).
pub fn game_config(run: &ResultsFile) -> GameConfig {
    GameConfig { hand_size: run.config.hand_size(), max_turns: run.config.max_turns(), wrong_guess_penalty: run.config.wrong_guess_penalty() }
}

fn opt<T: Display>(v: Option<T>) -> String {
    v.map_or_else(|| "null".to_owned(), |v| v.to_string())
}

fn kind_name(kind: Option<GuessKind>) -> &'static str {
    match kind {
        None => "none",
        Some(GuessKind::Formal) => "formal",
        Some(GuessKind::Shadow) => "shadow",
    }
}

fn cards(cs: &[Card]) -> String {
    cs.iter().map(ToString::to_string).collect::<Vec<_>>().join(" ")
}

/// Replays one round; an empty list means hands, boards, verdicts and outcome all agree.
pub fn replay_round(round: &RoundRecord, config: GameConfig) -> Vec<ReplayDiff> {
    let mut diffs = Vec::new();
    let mut diff = |turn: Option<u32>, field: &str, recorded: String, replayed: String| {
        diffs.push(ReplayDiff { round: round.round_number, turn, field: field.to_owned(), recorded, replayed });
    };
    let by_desc = SecretRule::from_description(&round.rule_description);
    let by_name = SecretRule::from_name(&round.rule_name);
    let Some(rule) = by_desc.or(by_name) else {
        diff(None, "rule", round.rule_description.clone(), "unknown rule".to_owned());
        return diffs;
    };
    if by_name.is_some_and(|n| n != rule) {
        diff(None, "rule_name", round.rule_name.clone(), rule.name().to_owned());
    }
    let Some(batch) = round.batch_round_index else {
        diff(None, "batch_round_index", "null".to_owned(), "required for the seed".to_owned());
        return diffs;
    };
    let mut game = match Round::new(rule, batch, config) {
        Ok(g) => g,
        Err(e) => {
            diff(None, "setup", String::new(), e.to_string());
            return diffs;
        }
    };
    for t in &round.turns {
        let at = Some(t.turn_number);
        if game.is_over() {
            diff(at, "turn", "recorded".to_owned(), "round already over".to_owned());
            break;
        }
        if t.turn_number != game.current_turn() {
            diff(at, "turn_number", t.turn_number.to_string(), game.current_turn().to_string());
        }
        let hand = t.hand.join(" ");
        if hand != cards(game.hand()) {
            diff(at, "hand", hand, cards(game.hand()));
        }
        let board = game.board().board_string();
        if t.mainline_state.as_deref() != Some(board.as_str()) {
            diff(at, "board", opt(t.mainline_state.as_deref()), board);
        }
        let recorded_card = t.action_result.as_ref().and_then(|a| a.card.as_deref());
        let Some(card) = recorded_card.and_then(|c| c.parse::<Card>().ok()) else {
            diff(at, "card", opt(recorded_card), "not a card string".to_owned());
            break;
        };
        let resp = &t.llm_response;
        let action = Action {
            card,
            reasoning: resp.reasoning_text().unwrap_or_default().to_owned(),
            tentative_rule: resp.tentative_text().map(str::to_owned),
            confidence: resp.confidence_level.as_ref().and_then(|c| c.as_python_int()),
            guess: resp.guess_flag(),
        };
        let prepared = match game.prepare(action) {
            Ok(p) => p,
            Err(e) => {
                diff(at, "card", card.to_string(), e.to_string());
                break;
            }
        };
        let recorded_accept = t.action_result.as_ref().and_then(|a| a.accepted);
        if recorded_accept != Some(prepared.accepted()) {
            diff(at, "accepted", opt(recorded_accept), prepared.accepted().to_string());
        }
        let attempt = t.guess_attempt.as_ref();
        let recorded_kind = attempt.map(|g| if g.is_shadow() { GuessKind::Shadow } else { GuessKind::Formal });
        let verdict = prepared.judge_request().map(|req| {
            if recorded_kind != Some(req.kind) {
                diff(at, "check_kind", kind_name(recorded_kind).to_owned(), kind_name(Some(req.kind)).to_owned());
            }
            RecordedJudge { attempt }.judge(&req)
        });
        if verdict.is_none() && recorded_kind.is_some() {
            diff(at, "check_kind", kind_name(recorded_kind).to_owned(), "none".to_owned());
        }
        if let Err(e) = game.commit(prepared, verdict) {
            diff(at, "commit", String::new(), e.to_string());
            break;
        }
    }
    let result = game.finish();
    let reason = match result.game_over_reason {
        GameOverReason::CorrectGuess => "correct_guess",
        GameOverReason::MaxTurns => "max_turns",
        GameOverReason::Incomplete => "incomplete",
        GameOverReason::ContextExceeded => "context_exceeded",
    };
    let checks = [
        ("success", round.success.to_string(), result.success.to_string()),
        ("failed_guesses", opt(round.failed_guesses), result.failed_guesses.to_string()),
        ("first_correct_turn", opt(round.first_correct_turn), opt(result.first_correct_turn)),
        ("no_stakes_score", opt(round.no_stakes_score), result.no_stakes_score.to_string()),
        ("game_over_reason", opt(round.game_over_reason.as_deref()), reason.to_owned()),
    ];
    for (field, recorded, replayed) in checks {
        if recorded != "null" && recorded != replayed {
            diff(None, field, recorded, replayed);
        }
    }
    diffs
}

/// Replays every round of a run with its configuration.
pub fn replay_run(run: &ResultsFile) -> Vec<ReplayDiff> {
    let config = game_config(run);
    run.rounds.iter().flat_map(|r| replay_round(r, config)).collect()
}

/// Why an import failed (any unreadable file aborts it; nothing is half-reported).
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// No paths were given.
    #[error("no results files given")]
    NoInput,
    /// A file could not be read or parsed (the cause follows in the error chain).
    #[error("{path}")]
    Results {
        /// The file.
        path: String,
        /// What went wrong (JSON path included for schema errors).
        #[source]
        source: ResultsError,
    },
}

/// Import outcome of one file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FileReport {
    /// The file as given.
    pub path: String,
    /// Model display name.
    pub model: String,
    /// Rounds in the file.
    pub rounds: usize,
    /// Turns in the file.
    pub turns: usize,
    /// All metrics of the run.
    pub metrics: RunMetrics,
    /// Engine disagreements (empty for a faithful file).
    pub replay_diffs: Vec<ReplayDiff>,
}

/// Everything `evalgrid eleusis import` reports: per-file metrics and replay, and the
/// pool-level complexity tables (the files are analysed as one pool, like the reference).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ImportReport {
    /// One entry per input file, in input order.
    pub files: Vec<FileReport>,
    /// k of the quartiles.
    pub k_quartile: KSelection,
    /// k of the complexity ratio and by-rule table.
    pub k_ratio: KSelection,
    /// Quartile edges.
    pub quartile_edges: Vec<f64>,
    /// `qcut` or `equal_width`.
    pub quartile_method: String,
    /// Rules played, with complexity and quartile.
    pub rules: Vec<RuleComplexity>,
    /// By-rule table over the pool.
    pub by_rule: Vec<ByRuleRow>,
}

/// Imports published results files with the published analysis settings.
pub fn import(paths: &[PathBuf]) -> Result<ImportReport, ImportError> {
    import_with(paths, &AnalysisOptions::default())
}

/// Imports results files with explicit analysis options.
pub fn import_with(paths: &[PathBuf], opts: &AnalysisOptions) -> Result<ImportReport, ImportError> {
    if paths.is_empty() {
        return Err(ImportError::NoInput);
    }
    let runs = paths
        .iter()
        .map(|p| read_results(p).map_err(|source| ImportError::Results { path: p.display().to_string(), source }))
        .collect::<Result<Vec<_>, _>>()?;
    let pool = analyze(&runs, opts);
    let files = paths
        .iter()
        .zip(&runs)
        .zip(pool.runs)
        .map(|((p, run), metrics)| FileReport {
            path: p.display().to_string(),
            model: run.model_name().to_owned(),
            rounds: run.rounds.len(),
            turns: run.rounds.iter().map(|r| r.turns.len()).sum(),
            metrics,
            replay_diffs: replay_run(run),
        })
        .collect();
    Ok(ImportReport {
        files,
        k_quartile: pool.k_quartile,
        k_ratio: pool.k_ratio,
        quartile_edges: pool.quartile_edges,
        quartile_method: pool.quartile_method,
        rules: pool.rules,
        by_rule: pool.by_rule,
    })
}

/// `metrics.csv`: one row per file/model; the eight headline columns first, then totals.
/// Floats use `{}` (shortest round-trip form); an undefined metric is an empty cell.
pub fn metrics_csv(report: &ImportReport) -> String {
    let mut out = String::from("model");
    for name in super::metrics::HEADLINE_METRICS {
        out.push(',');
        out.push_str(name);
    }
    out.push_str(",rounds_played,total_score,total_floored_score,total_turns,total_output_tokens,counting_output_tokens,total_no_stakes_score,total_wall_clock,wall_clock_per_turn,intra_rule_variance,inter_rule_variance,variance_ratio,replay_diffs\n");
    for f in &report.files {
        let m = &f.metrics;
        let mut cells = vec![csv_field(&f.model)];
        cells.extend(m.headline.values().iter().map(|(_, v)| v.map(|x| x.to_string()).unwrap_or_default()));
        let v = &m.variance;
        let float = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
        cells.extend([
            m.rounds_played.to_string(),
            m.total_score.to_string(),
            m.total_floored_score.to_string(),
            m.total_turns.to_string(),
            m.total_output_tokens.to_string(),
            m.counting_output_tokens.to_string(),
            m.total_no_stakes_score.to_string(),
            m.total_wall_clock.to_string(),
            float(m.wall_clock_per_turn),
            float(v.intra_rule_variance),
            float(v.inter_rule_variance),
            float(v.variance_ratio),
            f.replay_diffs.len().to_string(),
        ]);
        out.push_str(&cells.join(","));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
