//! Eleusis benchmark core ("Can LLMs play the game of science?", spec
//! `shared/specs/eleusis.md`): cards and the CPython-compatible RNG, the 26 secret rules,
//! round setup, the rule-equivalence judge, the turn state machine and built-in agents.
//!
//! One folder per concept: [`game`] (the game without a model: cards, rules, setup, the
//! equivalence check, the turn loop), [`judge`] (the Python judge), [`play`] (built-in agents,
//! prompt, reply parsing, rule compiler, the LLM episode) and [`analysis`] (published results,
//! the §5 metrics, export, replay); [`benchmark`], [`report`] and `tools` (`evalgrid eleusis
//! import`) plug them into evalgrid.
//!
//! Test convention in this folder: a module `foo.rs` with tests declares `#[cfg(test)] mod
//! tests;` and its tests live in `foo/tests.rs` (no inline test bodies, no `#[path]`-mounted
//! `*_tests.rs` siblings); shared test helpers are in `test_support.rs`.

pub mod analysis;
pub mod benchmark;
pub mod game;
pub mod judge;
pub mod play;
pub mod report;
#[cfg(test)]
mod test_support;
mod tools;

// Module paths of before the split into folders that code outside `eleusis/` uses.
pub use analysis::replay;
pub use game::{card, rule};
pub use judge::pyjudge;
pub use play::llm_episode;

pub use game::board::{Board, BoardError};
pub use game::card::{Card, CardParseError, Color, Suit};
pub use game::deck::{double_deck, universe, universe_index};
pub use game::equivalence::{RuleEvalError, RuleFn, SimulationParams, Verdict, check};
pub use game::pyrandom::PyRandom;
pub use game::round::{
    Action, GameConfig, GameError, GameOverReason, GuessCheck, GuessKind, Judge, JudgeRequest, NativeJudge, Observation, Play, PreparedTurn, Round,
    RoundResult, TurnRecord,
};
pub use game::rule::SecretRule;
pub use game::setup::{RoundSetup, SetupError, round_seed, shuffled_deck};
pub use play::agents::{Agent, AgentAction, OracleAgent, RandomAgent, play_round};
