//! Eleusis benchmark core ("Can LLMs play the game of science?", spec
//! `shared/specs/eleusis.md`): cards and the CPython-compatible RNG, the 26 secret rules,
//! round setup, the rule-equivalence judge, the turn state machine and built-in agents.

pub mod analysis;
pub mod game;
pub mod judge;
pub mod play;
pub mod benchmark;
pub mod report;
#[cfg(test)]
mod test_support;

// Flat paths of before the split into folders (TEMPORARY during the move).
pub use game::{board, card, deck, equivalence, pyrandom, rule, setup};
pub use judge::pyjudge;
pub use analysis::{export, replay, results};
pub use play::{agents, compiler, ideal, llm_episode, prompt, response};

pub use play::agents::{Agent, AgentAction, OracleAgent, RandomAgent, play_round};
pub use game::board::{Board, BoardError};
pub use game::card::{Card, CardParseError, Color, Suit};
pub use game::deck::{double_deck, universe, universe_index};
pub use game::equivalence::{RuleEvalError, RuleFn, SimulationParams, Verdict, check};
pub use game::round::{
    Action, GameConfig, GameError, GameOverReason, GuessCheck, GuessKind, Judge, JudgeRequest,
    NativeJudge, Observation, Play, PreparedTurn, Round, RoundResult, TurnRecord,
};
pub use game::pyrandom::PyRandom;
pub use game::rule::SecretRule;
pub use game::setup::{RoundSetup, SetupError, round_seed, shuffled_deck};
