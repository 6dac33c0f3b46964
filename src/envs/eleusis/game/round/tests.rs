//! Tests of the round state machine, including a replay of every published round of the
//! three shipped results files (hands, board strings, verdicts, check triggering, F, W,
//! first correct turn, no-stakes score).

use serde_json::Value;

use super::*;
use crate::envs::eleusis::test_support::*;

fn c(s: &str) -> Card {
    s.parse().expect("card")
}

fn cards(s: &str) -> Vec<Card> {
    s.split_whitespace().map(c).collect()
}

fn play(card: &str) -> Action {
    Action { card: c(card), reasoning: String::new(), tentative_rule: None, confidence: None, guess: false }
}

fn guess(card: &str, text: &str, formal: bool, confidence: Option<i64>) -> Action {
    Action { card: c(card), reasoning: "why".into(), tentative_rule: Some(text.into()), confidence, guess: formal }
}

/// Judge that always answers a fixed rule (or no code).
fn judge(rule: Option<&dyn RuleFn>) -> NativeJudge<'_> {
    NativeJudge { guessed: rule, params: SimulationParams::default() }
}

#[test]
fn first_turns_of_round_one() {
    let mut r = Round::new(SecretRule::EvenRanksOnly, 0, GameConfig::default()).expect("round");
    let obs = r.observation();
    assert_eq!(obs.turn, 1);
    assert_eq!(obs.board, "4♠");
    assert_eq!(obs.hand, cards("8♦ 2♥ A♠ 2♠ 3♦ 6♥ 6♠ J♥ 4♣ 4♣ 7♦ 7♥"));
    assert_eq!(obs.potential_score, 29);
    let mut j = judge(None);
    assert_eq!(r.apply(play("K♠"), &mut j), Err(GameError::CardNotInHand(c("K♠"))));
    // Duplicate 4♣: the first one is removed, 8♦ (next deck card) is appended.
    let t1 = r.apply(play("4♣"), &mut j).expect("turn 1");
    assert!(t1.accepted);
    assert_eq!(t1.board_before, "4♠");
    assert_eq!(r.hand(), cards("8♦ 2♥ A♠ 2♠ 3♦ 6♥ 6♠ J♥ 4♣ 7♦ 7♥ 8♦").as_slice());
    let t2 = r.apply(play("7♥"), &mut j).expect("turn 2");
    assert!(!t2.accepted);
    let t3 = r.apply(play("A♠"), &mut j).expect("turn 3");
    assert!(!t3.accepted);
    assert_eq!(r.board().board_string(), "4♠ 4♣ [7♥] [A♠]");
    assert_eq!(r.hand(), cards("8♦ 2♥ 2♠ 3♦ 6♥ 6♠ J♥ 4♣ 7♦ 8♦ 2♠ 5♠").as_slice());
    let obs = r.observation();
    assert_eq!(obs.turn, 4);
    assert_eq!(obs.history.len(), 3);
    assert_eq!(obs.history[1], Play { card: c("7♥"), accepted: false, reasoning: String::new() });
    assert!(t1.check.is_none());
}

#[test]
fn formal_and_shadow_guesses() {
    let mut r = Round::new(SecretRule::EvenRanksOnly, 0, GameConfig::default()).expect("round");
    let red: &dyn RuleFn = &SecretRule::OnlyRedCards;
    let even: &dyn RuleFn = &SecretRule::EvenRanksOnly;
    // Turn 1: wrong formal guess.
    let t = r.apply(guess("8♦", "red cards", true, Some(9)), &mut judge(Some(red))).expect("t1");
    let chk = t.check.expect("check");
    assert_eq!(chk.kind, GuessKind::Formal);
    assert!(!chk.correct);
    assert_eq!(chk.message, "Mismatch at sim 1, turn 1: card=A♥, actual=False, guessed=True");
    let obs = r.observation();
    assert_eq!((obs.failed_guess_count, obs.penalty_so_far, obs.potential_score), (1, 2, 30 - 2 - 2));
    assert_eq!(obs.failed_guesses, vec!["red cards".to_owned()]);
    // Turn 2: correct shadow check (confidence 5, not formal): no consequence.
    let t = r.apply(guess("2♥", "even ranks", false, Some(5)), &mut judge(Some(even))).expect("t2");
    assert_eq!(t.check.as_ref().map(|c| (c.kind, c.correct)), Some((GuessKind::Shadow, true)));
    assert!(!r.is_over());
    // Confidence 4, or an empty tentative rule: no check at all.
    let t = r.apply(guess("2♠", "even ranks", false, Some(4)), &mut judge(Some(even))).expect("t3");
    assert!(t.check.is_none());
    let t = r.apply(guess("6♥", "", true, Some(10)), &mut judge(Some(even))).expect("t4");
    assert!(t.check.is_none());
    // Turn 5: no code → wrong formal guess.
    let t = r.apply(guess("6♠", "?", true, None), &mut judge(None)).expect("t5");
    assert_eq!(t.check.map(|c| c.message), Some("No code provided for guessed rule".to_owned()));
    // Turn 6: correct formal guess ends the round.
    r.apply(guess("J♥", "even ranks", true, Some(10)), &mut judge(Some(even))).expect("t6");
    assert!(r.is_over());
    assert_eq!(r.apply(play("4♣"), &mut judge(None)), Err(GameError::RoundOver));
    let res = r.finish();
    assert_eq!(res.win_turn, Some(6));
    assert_eq!(res.failed_guesses, 2);
    assert_eq!(res.score, 31 - 6 - 4);
    assert_eq!(res.floored_score, 21);
    assert_eq!(res.first_correct_turn, Some(2));
    assert_eq!(res.no_stakes_score, 29);
    assert_eq!(res.game_over_reason, GameOverReason::CorrectGuess);
    assert_eq!(res.turns_played, 6);
    let js = serde_json::to_string(&res).expect("ser");
    let back: RoundResult = serde_json::from_str(&js).expect("de");
    assert_eq!(back, res);
}

#[test]
fn prepare_commit_protocol() {
    let mut r = Round::new(SecretRule::AlternatingColors, 0, GameConfig::default()).expect("round");
    let hand = r.hand().to_vec();
    let p = r.prepare(guess(&hand[0].to_string(), "alternate colours", true, None)).expect("prep");
    let req = p.judge_request().expect("needs judging");
    assert_eq!(req.kind, GuessKind::Formal);
    assert_eq!(req.mainline.len(), if p.accepted() { 2 } else { 1 });
    assert_eq!(r.commit(p.clone(), None), Err(GameError::MissingVerdict(1)));
    let v = check(&SecretRule::AlternatingColors, &SecretRule::AlternatingColors, req.mainline, &SimulationParams::default());
    assert!(v.equivalent);
    let stale = p.clone();
    r.commit(p, Some(v.clone())).expect("commit");
    assert!(matches!(r.commit(stale, Some(v.clone())), Err(GameError::StalePreparedTurn { .. })));
    assert_eq!(r.finish().score, 30);

    let mut r = Round::new(SecretRule::AlternatingColors, 1, GameConfig::default()).expect("round");
    let p = r.prepare(play(&r.hand()[0].to_string())).expect("prep");
    assert!(p.judge_request().is_none());
    assert_eq!(r.commit(p, Some(v)), Err(GameError::UnexpectedVerdict(1)));
    // A prepared turn from another round is rejected.
    let other = Round::new(SecretRule::NoSpades, 1, GameConfig::default()).expect("round");
    let p = other.prepare(play(&other.hand()[0].to_string())).expect("prep");
    assert!(matches!(r.commit(p, None), Err(GameError::StalePreparedTurn { .. })));
}

#[test]
fn max_turns_and_incomplete() {
    let cfg = GameConfig { hand_size: 5, max_turns: 4, wrong_guess_penalty: 3 };
    let mut r = Round::new(SecretRule::SpadesOnly, 2, cfg).expect("round");
    assert_eq!(r.hand().len(), 5);
    assert_eq!(r.finish().game_over_reason, GameOverReason::Incomplete);
    let wrong: &dyn RuleFn = &SecretRule::NoSpades;
    while !r.is_over() {
        let card = r.hand()[0].to_string();
        r.apply(guess(&card, "not spades", true, None), &mut judge(Some(wrong))).expect("turn");
        assert_eq!(r.hand().len(), 5);
    }
    let res = r.finish();
    assert_eq!(res.game_over_reason, GameOverReason::MaxTurns);
    assert_eq!((res.turns_played, res.failed_guesses, res.score, res.floored_score), (4, 4, -12, 0));
    assert_eq!(res.no_stakes_score, 0);
}

/// Python truthiness of a JSON value (the reference's `if response["guess_rule"]`).
fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|x| x != 0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Replays the recorded verdicts and asserts the engine asks for exactly the checks that
/// were recorded.
struct ReplayJudge {
    expected: Option<(GuessKind, String, bool, String)>,
    called: bool,
}

impl Judge for ReplayJudge {
    fn judge(&mut self, request: &JudgeRequest<'_>) -> Verdict {
        self.called = true;
        let (kind, text, correct, message) = self.expected.clone().expect("engine asked for an unrecorded check");
        assert_eq!(request.kind, kind);
        assert_eq!(request.guess, text);
        Verdict { equivalent: correct, message, comparisons: 0, mismatches: 0 }
    }
}

#[test]
fn replay_published_rounds() {
    let mut checked_turns = 0;
    for file in RESULTS_FILES {
        let res = results(file);
        let rounds = res["rounds"].as_array().expect("rounds");
        assert_eq!(rounds.len(), 78);
        for (i, rd) in rounds.iter().enumerate() {
            let rule = SecretRule::from_name(rd["rule_name"].as_str().expect("name")).expect("rule");
            assert_eq!(rule, SecretRule::ALL[i / 3]);
            let batch = rd["batch_round_index"].as_u64().expect("batch") as u32;
            let mut round = Round::new(rule, batch, GameConfig::default()).expect("round");
            let ctx = format!("{file} round {}", i + 1);
            for t in rd["turns"].as_array().expect("turns") {
                let obs = round.observation();
                assert_eq!(Some(obs.turn as u64), t["turn_number"].as_u64(), "{ctx}");
                assert_eq!(Some(obs.board.as_str()), t["mainline_state"].as_str(), "{ctx}");
                let hand: Vec<Card> = serde_json::from_value(t["hand"].clone()).expect("hand");
                assert_eq!(obs.hand, hand, "{ctx} turn {}", obs.turn);
                let resp = &t["llm_response"];
                let card: Card = t["action_result"]["card"].as_str().expect("card").parse().expect("card");
                let confidence = match &resp["confidence_level"] {
                    Value::Bool(b) => Some(i64::from(*b)),
                    v => v.as_i64(),
                };
                let action = Action {
                    card,
                    reasoning: resp["reasoning_summary"].as_str().unwrap_or("").to_owned(),
                    tentative_rule: resp["tentative_rule"].as_str().map(str::to_owned),
                    confidence,
                    guess: truthy(&resp["guess_rule"]),
                };
                let ga = &t["guess_attempt"];
                let expected = (!ga.is_null()).then(|| {
                    let kind = if ga["shadow"].as_bool() == Some(true) { GuessKind::Shadow } else { GuessKind::Formal };
                    let text = ga["guess"].as_str().expect("guess").to_owned();
                    let correct = ga["correct"].as_bool().expect("correct");
                    (kind, text, correct, ga["reasoning"].as_str().expect("reasoning").to_owned())
                });
                let mut judge = ReplayJudge { expected: expected.clone(), called: false };
                let rec = round.apply(action, &mut judge).expect("apply");
                assert_eq!(judge.called, expected.is_some(), "{ctx} turn {}", rec.turn);
                assert_eq!(Some(rec.accepted), t["action_result"]["accepted"].as_bool(), "{ctx}");
                checked_turns += 1;
            }
            assert!(round.is_over(), "{ctx}");
            let out = round.finish();
            assert_eq!(Some(out.success), rd["success"].as_bool(), "{ctx}");
            assert_eq!(Some(u64::from(out.failed_guesses)), rd["failed_guesses"].as_u64(), "{ctx}");
            assert_eq!(out.first_correct_turn.map(u64::from), rd["first_correct_turn"].as_u64(), "{ctx}");
            assert_eq!(Some(out.no_stakes_score), rd["no_stakes_score"].as_i64(), "{ctx}");
            let reason = serde_json::to_value(out.game_over_reason).expect("reason");
            assert_eq!(reason, rd["game_over_reason"], "{ctx}");
            let stored = rd["score"].as_i64().expect("score");
            if out.success {
                assert!(stored == out.score || stored == out.score + 1, "{ctx}: {stored} vs {}", out.score);
            } else {
                assert_eq!(stored, out.score, "{ctx}");
            }
        }
    }
    assert!(checked_turns > 1000);
}
