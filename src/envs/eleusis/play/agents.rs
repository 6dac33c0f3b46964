//! Built-in, LLM-free players: a seeded random baseline (lower bound, never guesses) and an
//! oracle that knows the rule (upper bound, wins on turn 1). They exercise the round state
//! machine end to end and anchor the score scale; [`play_round`] drives any sync agent.

use crate::envs::eleusis::game::card::Card;
use crate::envs::eleusis::game::deck::universe;
use crate::envs::eleusis::game::equivalence::{RuleFn, SimulationParams};
use crate::envs::eleusis::game::pyrandom::PyRandom;
use crate::envs::eleusis::game::rule::SecretRule;
use crate::envs::eleusis::game::{Action, GameConfig, GameError, NativeJudge, Observation, Round, RoundResult};

/// An agent's turn: the action plus, when it guesses, the rule its guess text stands for
/// (built-in agents guess native rules; `None` is judged as "no code").
pub struct AgentAction {
    /// The validated action.
    pub action: Action,
    /// The rule to judge for a formal or shadow check.
    pub guessed_rule: Option<Box<dyn RuleFn + Send + Sync>>,
}

impl std::fmt::Debug for AgentAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentAction").field("action", &self.action).field("guessed_rule", &self.guessed_rule.as_ref().map(|_| "<rule>")).finish()
    }
}

/// A synchronous player.
pub trait Agent {
    /// Chooses the action for the observed turn.
    fn act(&mut self, obs: &Observation) -> AgentAction;
}

/// Plays a uniformly random hand card (`hand[randbelow(len)]` with a seeded `PyRandom`)
/// and never guesses: the no-skill baseline (score 0).
#[derive(Debug, Clone)]
pub struct RandomAgent {
    rng: PyRandom,
}

impl RandomAgent {
    /// A random agent whose choices are fully determined by `seed`.
    pub fn new(seed: u64) -> Self {
        RandomAgent { rng: PyRandom::new(seed) }
    }
}

/// Fallback card for an (impossible) empty hand; the round then reports `CardNotInHand`.
fn any_card(hand: &[Card]) -> Card {
    hand.first().copied().unwrap_or(universe()[0])
}

impl Agent for RandomAgent {
    fn act(&mut self, obs: &Observation) -> AgentAction {
        let card = self.rng.choice(&obs.hand).copied().unwrap_or_else(|| any_card(&obs.hand));
        AgentAction { action: Action { card, reasoning: String::new(), tentative_rule: None, confidence: None, guess: false }, guessed_rule: None }
    }
}

/// Knows the secret rule: plays the first hand card and formally guesses the rule's
/// description with confidence 10, so it wins on turn 1 (score 30, the maximum).
#[derive(Debug, Clone, Copy)]
pub struct OracleAgent {
    rule: SecretRule,
}

impl OracleAgent {
    /// An oracle for `rule`.
    pub fn new(rule: SecretRule) -> Self {
        OracleAgent { rule }
    }
}

impl Agent for OracleAgent {
    fn act(&mut self, obs: &Observation) -> AgentAction {
        AgentAction {
            action: Action {
                card: any_card(&obs.hand),
                reasoning: "I know the rule.".to_owned(),
                tentative_rule: Some(self.rule.description().to_owned()),
                confidence: Some(10),
                guess: true,
            },
            guessed_rule: Some(Box::new(self.rule)),
        }
    }
}

/// Plays one full round of `rule`/`batch` with `agent`, judging guesses natively with the
/// reference simulation parameters.
pub fn play_round(rule: SecretRule, batch: u32, config: GameConfig, agent: &mut dyn Agent) -> Result<RoundResult, GameError> {
    let mut round = Round::new(rule, batch, config)?;
    while !round.is_over() {
        let obs = round.observation();
        let AgentAction { action, guessed_rule } = agent.act(&obs);
        let guessed: Option<&dyn RuleFn> = match &guessed_rule {
            Some(rule) => Some(rule.as_ref()),
            None => None,
        };
        let mut judge = NativeJudge { guessed, params: SimulationParams::default() };
        round.apply(action, &mut judge)?;
    }
    Ok(round.finish())
}

#[cfg(test)]
mod tests;
