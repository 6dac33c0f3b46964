//! Unit tests of `agents`.

use super::*;
use crate::envs::eleusis::game::GameOverReason;
use crate::envs::eleusis::game::setup::round_seed;

fn all_rounds() -> impl Iterator<Item = (SecretRule, u32)> {
    SecretRule::ALL.into_iter().flat_map(|r| (0..3).map(move |b| (r, b)))
}

#[test]
fn oracle_scores_30_everywhere() {
    for (rule, batch) in all_rounds() {
        let res = play_round(rule, batch, GameConfig::default(), &mut OracleAgent::new(rule)).expect("round");
        assert_eq!(res.score, 30, "{} b{batch}", rule.name());
        assert_eq!((res.win_turn, res.failed_guesses, res.no_stakes_score), (Some(1), 0, 30));
        assert_eq!(res.game_over_reason, GameOverReason::CorrectGuess);
        let chk = res.turns[0].check.as_ref().expect("check");
        assert_eq!(chk.message, "Rules appear equivalent: 208000 comparisons, all matched");
    }
}

#[test]
fn random_never_scores_positive() {
    for (rule, batch) in all_rounds() {
        let mut agent = RandomAgent::new(round_seed(rule, batch));
        let res = play_round(rule, batch, GameConfig::default(), &mut agent).expect("round");
        assert!(res.score <= 0, "{} b{batch}", rule.name());
        assert_eq!(res.turns_played, 30);
        assert_eq!(res.game_over_reason, GameOverReason::MaxTurns);
        assert!(res.turns.iter().all(|t| t.check.is_none()));
    }
}

#[test]
fn replay_is_deterministic() {
    let run = |seed| play_round(SecretRule::CyclicSuitOrder, 1, GameConfig::default(), &mut RandomAgent::new(seed)).expect("round");
    let a = run(7);
    assert_eq!(a, run(7));
    assert_ne!(a.turns, run(8).turns);
    // The first card is hand[randbelow(12)] of PyRandom(7).
    let mut rng = PyRandom::new(7);
    let hand = &a.turns[0].hand_before;
    assert_eq!(a.turns[0].card, hand[rng.randbelow_usize(hand.len())]);
}

/// An agent that formally guesses a wrong native rule every turn pays 2 per turn.
#[test]
fn reckless_guesser_is_penalised() {
    struct Reckless;
    impl Agent for Reckless {
        fn act(&mut self, obs: &Observation) -> AgentAction {
            AgentAction {
                action: Action { card: obs.hand[0], reasoning: String::new(), tentative_rule: Some("Only spades.".into()), confidence: Some(3), guess: true },
                guessed_rule: Some(Box::new(SecretRule::SpadesOnly)),
            }
        }
    }
    let res = play_round(SecretRule::OnlyRedCards, 0, GameConfig::default(), &mut Reckless).expect("round");
    assert_eq!((res.failed_guesses, res.score, res.floored_score), (30, -60, 0));
    let a = format!("{:?}", Reckless.act(&Round::new(SecretRule::OnlyRedCards, 0, GameConfig::default()).expect("r").observation()));
    assert!(a.contains("<rule>"));
}
