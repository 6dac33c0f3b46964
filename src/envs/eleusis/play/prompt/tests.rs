//! Tests of the action prompt: structure re-rendered from the recorded final turn of round 78
//! of each shipped run (sections, order, last-3 history, potential score, failed guesses),
//! the engine's turn-1 observation, placeholder safety, and the golden `last_prompt.md`
//! sha256s (ignored: needs the verbatim reference template).

use sha2::{Digest, Sha256};

use super::*;
use crate::envs::eleusis::analysis::results::{ResultsFile, RoundRecord, parse_results};
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::game::{Play, Round};
use crate::envs::eleusis::test_support::{RESULTS_FILES, data_dir};

fn load(file: &str) -> ResultsFile {
    let bytes = std::fs::read(data_dir().join("results").join(file)).expect("read results");
    parse_results(&bytes).expect("parse results")
}

/// The observation of the last recorded turn of `round`, rebuilt from the file: board and
/// hand of that turn, history and failed formal guesses of the earlier turns.
fn last_turn_observation(round: &RoundRecord, config: &GameConfig) -> Observation {
    let last = round.turns.last().expect("turns");
    let earlier = &round.turns[..round.turns.len() - 1];
    let history = earlier
        .iter()
        .map(|t| {
            let action = t.action_result.as_ref().expect("action");
            Play {
                card: action.card.as_deref().expect("card").parse().expect("card"),
                accepted: action.accepted == Some(true),
                reasoning: t.llm_response.reasoning_text().unwrap_or("").to_owned(),
            }
        })
        .collect();
    let failed_guesses: Vec<String> = earlier
        .iter()
        .filter_map(|t| t.guess_attempt.as_ref())
        .filter(|g| !g.is_shadow() && !g.is_correct())
        .map(|g| g.guess.clone().unwrap_or_default())
        .collect();
    let f = failed_guesses.len() as u32;
    let penalty = config.wrong_guess_penalty * i64::from(f);
    let board = last.mainline_state.clone().expect("board");
    Observation {
        turn: last.turn_number,
        max_turns: config.max_turns,
        mainline: board.split(' ').filter(|t| !t.starts_with('[')).map(|t| t.parse().expect("card")).collect(),
        board,
        hand: last.hand.iter().map(|c| c.parse().expect("card")).collect(),
        history,
        failed_guesses,
        failed_guess_count: f,
        penalty_so_far: penalty,
        potential_score: i64::from(config.max_turns) - i64::from(last.turn_number) - penalty,
    }
}

fn position(haystack: &str, needle: &str) -> usize {
    haystack.find(needle).unwrap_or_else(|| panic!("missing {needle:?}"))
}

#[test]
fn final_prompts_of_round_78_have_the_reference_structure() {
    let config = GameConfig::default();
    for file in RESULTS_FILES {
        let run = load(file);
        let round = &run.rounds[77];
        let obs = last_turn_observation(round, &config);
        let prompt = render_action_prompt(&obs, &config, 1);
        assert_eq!(obs.turn, 30, "{file}");

        // Sections in order.
        let order = [
            "## RULES OF THE GAME",
            "## YOUR TASK",
            "Turn: 30 / 30\n",
            &format!("({} wrong guesses): {}\n", obs.failed_guess_count, obs.penalty_so_far),
            &format!("guess correctly this turn: {}\n", 30 - 30 - 2 * i64::from(obs.failed_guess_count)),
            "#### MAINLINE & SIDELINES",
            &format!("\n{}\n", obs.board),
            "#### YOUR HAND",
            &format!("\n{}\n", round.turns[29].hand.join(", ")),
            "#### RECENT PLAY HISTORY",
            "#### ALL YOUR PREVIOUS FAILED FORMAL GUESSES",
            "#### YOUR ACTION",
            "<ACTION>\n{",
            "Cards must alternate between red and black colors",
        ];
        let mut last = 0;
        for needle in order {
            let at = position(&prompt[last..], needle) + last;
            last = at + needle.len();
        }
        // The rules are parameterised and carry the FE0F suit symbols.
        assert!(prompt.contains("You are dealt 12 cards"));
        assert!(prompt.contains("Score = (30 - current_turn) - (2 × number_of_failed_guesses)"));
        assert!(prompt.contains("hearts ♥\u{fe0f}"));
        assert!(!prompt.contains("{{"), "unfilled placeholder");

        // Exactly the last 3 plays (turns 27-29), oldest first, with their reasoning.
        let history = &prompt[position(&prompt, "#### RECENT PLAY HISTORY")..position(&prompt, "#### ALL YOUR")];
        let lines: Vec<&str> = history.lines().filter(|l| l.starts_with("- ")).collect();
        assert_eq!(lines.len(), 3, "{file}");
        for (line, turn) in lines.iter().zip(&round.turns[26..29]) {
            let a = turn.action_result.as_ref().expect("action");
            let verdict = if a.accepted == Some(true) { "✓ ACCEPTED" } else { "✗ REJECTED" };
            assert_eq!(*line, format!("- {}: {verdict}", a.card.as_deref().expect("card")));
            let reasoning = turn.llm_response.reasoning_text().expect("reasoning");
            assert!(history.contains(&format!("\n  Your reasoning: {reasoning}\n")));
        }
        let turn26 = round.turns[25].llm_response.reasoning_text().expect("r");
        assert!(!prompt.contains(turn26), "turn 26 is outside the window");

        // Every failed formal guess, quoted, then the closing line.
        let failed = &prompt[position(&prompt, "#### ALL YOUR")..position(&prompt, "#### YOUR ACTION")];
        assert_eq!(failed.matches("\n- \"").count(), obs.failed_guesses.len());
        for g in &obs.failed_guesses {
            assert!(failed.contains(&format!("- \"{g}\"\n")));
        }
        assert_eq!(failed.contains("judged incorrect"), !obs.failed_guesses.is_empty());

        // Retry attempts append the suffix after a blank line.
        let retry = render_action_prompt(&obs, &config, 2);
        assert_eq!(retry, format!("{prompt}{RETRY_SUFFIX}"));
        assert!(retry.ends_with("valid <ACTION> block.\n") && prompt.ends_with("</ACTION>\n"));
    }
}

#[test]
fn turn_one_prompt_from_the_engine() {
    let config = GameConfig::default();
    let round = Round::new(SecretRule::EvenRanksOnly, 0, config).expect("round");
    let obs = round.observation();
    let prompt = render_action_prompt(&obs, &config, 1);
    assert!(prompt.contains("Turn: 1 / 30\n"));
    assert!(prompt.contains("guess correctly this turn: 29\n"));
    assert!(prompt.contains("\n4♠\n"), "board = starter");
    assert!(prompt.contains("\n8♦, 2♥, A♠, 2♠, 3♦, 6♥, 6♠, J♥, 4♣, 4♣, 7♦, 7♥\n"));
    assert!(prompt.contains("(your last 3 plays)\n\n#### ALL YOUR PREVIOUS FAILED FORMAL GUESSES\n\n#### YOUR ACTION"));
    // No variation selector in card strings of the state (only in the rules text).
    let state = &prompt[position(&prompt, "### CURRENT GAME STATE")..];
    assert!(!state[..position(state, "#### YOUR ACTION")].contains('\u{fe0f}'));
}

#[test]
fn fill_is_single_pass_and_keeps_unknown_placeholders() {
    let out = fill("a {{x}} b {{y}} {{z", &[("x", "{{y}}"), ("y", "Y")]);
    assert_eq!(out, "a {{y}} b Y {{z");
    assert_eq!(fill("{{unknown}}", &[]), "{{unknown}}");
    let parts = template_parts();
    assert_eq!(parts[0], ("version", PROMPT_VERSION));
}

/// The published final prompts (`last_prompt.md`, sha256 in `vectors.json`) are byte-exact
/// only with the verbatim reference template, which is not vendored (see `prompt_template`).
#[test]
#[ignore = "needs the verbatim reference template text (prompts/action.py + game_rules.py), not vendored"]
fn golden_last_prompt_sha256() {
    let text = std::fs::read_to_string(data_dir().join("vectors.json")).expect("vectors");
    let v: serde_json::Value = serde_json::from_str(&text).expect("json");
    let golden = v["last_prompt_sha256"].as_object().expect("map");
    let config = GameConfig::default();
    for file in RESULTS_FILES {
        let tag = file.trim_end_matches(".results.json.gz");
        let (_, sha) = golden.iter().find(|(k, _)| k.ends_with(&format!("_{tag}/last_prompt.md"))).expect("golden hash");
        let run = load(file);
        let obs = last_turn_observation(&run.rounds[77], &config);
        let prompt = render_action_prompt(&obs, &config, 1);
        let got: String = Sha256::digest(prompt.as_bytes()).iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(got, sha.as_str().expect("sha"), "{file}");
    }
}
