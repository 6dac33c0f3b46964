//! evalgrid's own rounds in the published `results.json` shape (spec §6),
//! so every metric of §5 (`metrics`) runs on fresh runs exactly as on
//! imported ones — one implementation of the metrics, two sources.
//!
//! Our records follow the engine's correct scoring: `turn_count` is the win
//! turn W (or the turns played), never the published files' W − 1 quirk.

use serde_json::{Value, json};

use super::metrics::RunMetrics;
use super::metrics::{AnalysisOptions, analyze_run};
use super::results::from_value;
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::game::{GuessKind, RoundResult};

/// Converts round records (episode outputs, in round order) of one model to
/// a results document.
#[must_use]
pub fn results_document(model: &str, rounds: &[Value]) -> Value {
    let mut out = Vec::new();
    for (i, raw) in rounds.iter().enumerate() {
        let Ok(r) = serde_json::from_value::<RoundResult>(raw.clone()) else { continue };
        let meta = raw.get("llm").and_then(|m| m.get("turns")).and_then(Value::as_array);
        let description = SecretRule::from_name(&r.rule).map_or("", SecretRule::description);
        let turns: Vec<Value> = r
            .turns
            .iter()
            .map(|t| {
                let tokens = meta.and_then(|m| m.iter().find(|x| x["turn"] == t.turn)).and_then(|x| x["tokens"]["output_tokens"].as_u64()).unwrap_or(0);
                let guess_attempt = t.check.as_ref().map(|c| {
                    json!({
                        "guess": c.guess,
                        "correct": c.correct,
                        "reasoning": c.message,
                        "shadow": c.kind == GuessKind::Shadow,
                    })
                });
                json!({
                    "turn_number": t.turn,
                    "mainline_state": t.board_before,
                    "hand": t.hand_before.iter().map(ToString::to_string).collect::<Vec<_>>(),
                    "llm_response": {
                        "reasoning_summary": t.reasoning,
                        "card": t.card.to_string(),
                        "tentative_rule": t.tentative_rule,
                        "confidence_level": t.confidence,
                        "guess_rule": t.guess,
                    },
                    "action_result": {"card": t.card.to_string(), "accepted": t.accepted},
                    "guess_attempt": guess_attempt,
                    "tokens": {"output_tokens": tokens},
                })
            })
            .collect();
        out.push(json!({
            "round_number": i + 1,
            "rule_name": r.rule,
            "batch_round_index": r.batch,
            "turn_count": r.turns_played,
            "rule_description": description,
            "success": r.success,
            "score": r.score,
            "floored_score": r.floored_score,
            "first_correct_turn": r.first_correct_turn,
            "no_stakes_score": r.no_stakes_score,
            "failed_guesses": r.failed_guesses,
            "turns": turns,
        }));
    }
    let max_turns = rounds.first().and_then(|r| r["config"]["max_turns"].as_u64()).unwrap_or(30);
    json!({"folder_name": model, "config": {"max_turns": max_turns}, "rounds": out})
}

/// Every §5 metric of one model's rounds, with bootstrap CIs.
#[must_use]
pub fn analyze_rounds(model: &str, rounds: &[Value]) -> Option<RunMetrics> {
    let doc = results_document(model, rounds);
    let file = from_value(&doc).ok()?;
    let mut metrics = analyze_run(&file, &AnalysisOptions::default())?;
    metrics.model = model.to_owned();
    Some(metrics)
}
