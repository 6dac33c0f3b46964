//! Eleusis benchmark core ("Can LLMs play the game of science?", spec
//! `shared/specs/eleusis.md`): cards and the CPython-compatible RNG, the 26 secret rules,
//! round setup, the rule-equivalence judge, the turn state machine and built-in agents.

pub mod agents;
pub mod analysis;
pub mod benchmark;
pub mod board;
pub mod card;
pub mod compiler;
pub mod deck;
pub mod equivalence;
pub mod export;
pub mod game;
pub mod ideal;
pub mod llm_episode;
pub mod prompt;
pub mod pyjudge;
pub mod pyrandom;
pub mod replay;
pub mod report;
pub mod response;
pub mod results;
pub mod rule;
pub mod setup;
#[cfg(test)]
mod test_support;

pub use agents::{Agent, AgentAction, OracleAgent, RandomAgent, play_round};
pub use board::{Board, BoardError};
pub use card::{Card, CardParseError, Color, Suit};
pub use deck::{double_deck, universe, universe_index};
pub use equivalence::{RuleEvalError, RuleFn, SimulationParams, Verdict, check};
pub use game::{
    Action, GameConfig, GameError, GameOverReason, GuessCheck, GuessKind, Judge, JudgeRequest,
    NativeJudge, Observation, Play, PreparedTurn, Round, RoundResult, TurnRecord,
};
pub use pyrandom::PyRandom;
pub use rule::SecretRule;
pub use setup::{RoundSetup, SetupError, round_seed, shuffled_deck};
