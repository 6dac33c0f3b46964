//! The per-turn action prompt (spec §4.1): one user message rebuilt from the
//! [`Observation`] each turn, from a versioned template whose text enters the engine's step
//! keys. See [`prompt_template`] for what the text is (an evalgrid reconstruction, not the
//! reference bytes).

use crate::envs::eleusis::game::{GameConfig, Observation};

pub mod prompt_template;

pub use prompt_template::{ACTION_TEMPLATE, GAME_RULES_TEMPLATE, RETRY_SUFFIX};

/// Version of the action-prompt template; part of every step key and of provenance. Not the
/// reference's byte-exact `v1` (§8 Q3): the reference text is not vendored yet.
pub const PROMPT_VERSION: &str = "eleusis-action/v1-reconstructed";

/// Plays shown in the history section (the reference shows the last 3).
pub const HISTORY_WINDOW: usize = 3;

/// Every template fragment in a fixed order, for hashing into step keys: a change to any of
/// them changes the rendered prompts.
pub fn template_parts() -> [(&'static str, &'static str); 8] {
    use prompt_template as t;
    [
        ("version", PROMPT_VERSION),
        ("game_rules", t::GAME_RULES_TEMPLATE),
        ("action", t::ACTION_TEMPLATE),
        ("retry_suffix", t::RETRY_SUFFIX),
        ("history_line", t::HISTORY_LINE),
        ("history_reasoning_line", t::HISTORY_REASONING_LINE),
        ("failed_guess_line", t::FAILED_GUESS_LINE),
        ("failed_guesses_footer", t::FAILED_GUESSES_FOOTER),
    ]
}

/// Single-pass `{{name}}` substitution: values are inserted verbatim and never rescanned,
/// so model text containing `{{…}}` cannot inject placeholders. Unknown names stay as is.
pub fn fill(template: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(open) = rest.find("{{") {
        out.push_str(&rest[..open]);
        let after = &rest[open + 2..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[open..]);
            return out;
        };
        let name = &after[..close];
        match values.iter().find(|(k, _)| *k == name) {
            Some((_, v)) => out.push_str(v),
            None => out.push_str(&rest[open..open + 2 + close + 2]),
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// The rules section for a configuration (hand size, penalty, max turns).
pub fn render_game_rules(config: &GameConfig) -> String {
    fill(
        GAME_RULES_TEMPLATE,
        &[("hand_size", &config.hand_size.to_string()), ("penalty", &config.wrong_guess_penalty.to_string()), ("max_turns", &config.max_turns.to_string())],
    )
}

/// The history section body: the last [`HISTORY_WINDOW`] plays, oldest first, each with
/// its verdict and (when non-empty) the reasoning given for it; empty on turn 1.
pub fn render_history(obs: &Observation) -> String {
    use prompt_template as t;
    let start = obs.history.len().saturating_sub(HISTORY_WINDOW);
    let mut out = String::new();
    for play in &obs.history[start..] {
        let verdict = if play.accepted { "✓ ACCEPTED" } else { "✗ REJECTED" };
        let card = play.card.to_string();
        out.push_str(&fill(t::HISTORY_LINE, &[("card", &card), ("verdict", verdict)]));
        if !play.reasoning.is_empty() {
            out.push_str(&fill(t::HISTORY_REASONING_LINE, &[("reasoning", &play.reasoning)]));
        }
    }
    out
}

/// The failed-guesses section body: every failed formal guess of the round, quoted, then a
/// closing line; empty when there is none.
pub fn render_failed_guesses(obs: &Observation) -> String {
    use prompt_template as t;
    if obs.failed_guesses.is_empty() {
        return String::new();
    }
    let mut out = String::new();
    for guess in &obs.failed_guesses {
        out.push_str(&fill(t::FAILED_GUESS_LINE, &[("guess", guess)]));
    }
    out.push_str(t::FAILED_GUESSES_FOOTER);
    out
}

/// The full prompt for `attempt` (1-based) of the observed turn; attempts ≥ 2 get the
/// "don't reason too long" suffix after a blank line. The potential score shown is the
/// observation's `max_turns − t − penalty·F` (one lower than the engine score, §8 Q3).
pub fn render_action_prompt(obs: &Observation, config: &GameConfig, attempt: u32) -> String {
    let hand: Vec<String> = obs.hand.iter().map(ToString::to_string).collect();
    let mut prompt = fill(
        ACTION_TEMPLATE,
        &[
            ("game_rules", &render_game_rules(config)),
            ("turn", &obs.turn.to_string()),
            ("max_turns", &obs.max_turns.to_string()),
            ("failed_guess_count", &obs.failed_guess_count.to_string()),
            ("penalty_so_far", &obs.penalty_so_far.to_string()),
            ("potential_score", &obs.potential_score.to_string()),
            ("board", &obs.board),
            ("hand", &hand.join(", ")),
            ("history", &render_history(obs)),
            ("failed_guesses", &render_failed_guesses(obs)),
            ("penalty", &config.wrong_guess_penalty.to_string()),
        ],
    );
    if attempt >= 2 {
        prompt.push_str(RETRY_SUFFIX);
    }
    prompt
}

#[cfg(test)]
mod tests;
