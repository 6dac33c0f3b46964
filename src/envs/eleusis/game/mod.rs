//! The game itself, no model involved: cards, decks and the table, the CPython-compatible RNG,
//! the 26 secret rules, round setup, the native equivalence check and the turn loop ([`round`]).

pub mod board;
pub mod card;
pub mod deck;
pub mod equivalence;
pub mod pyrandom;
pub mod round;
pub mod rule;
pub mod setup;

pub use round::{
    Action, GameConfig, GameError, GameOverReason, GuessCheck, GuessKind, Judge, JudgeRequest, NativeJudge, Observation, Play, PreparedTurn, Round,
    RoundResult, TurnRecord,
};
