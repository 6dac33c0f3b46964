//! Serialisable records of BBQ-Bench episodes: phases and tools, answered queries, failed
//! attempts and forfeits, and the per-round and per-episode records that metrics consume.

use serde::{Deserialize, Serialize};

use super::function::{Input, Output};
use super::task::{TaskId, TaskParams};

/// The phase an episode is waiting in; decides which operation is allowed next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for one `query` call.
    Query,
    /// Waiting for the scratchpad text.
    Scratchpad,
    /// Waiting for `submit_predictions`.
    Evaluation,
    /// Solved or out of rounds; nothing more is accepted.
    Finished,
}

/// The model-facing tools plus the scratchpad reply, for failure accounting (§4.9).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    /// `query(inputs)`.
    Query,
    /// `submit_predictions(predictions)`.
    SubmitPredictions,
    /// `execute_python(code)`.
    ExecutePython,
    /// The plain-text scratchpad reply.
    Scratchpad,
}

impl Tool {
    /// Index of the per-phase attempt counter.
    pub(super) fn slot(self) -> usize {
        match self {
            Tool::Query => 0,
            Tool::SubmitPredictions => 1,
            Tool::ExecutePython => 2,
            Tool::Scratchpad => 3,
        }
    }
}

/// One answered query: the input (as parsed) and its exact output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryResult {
    /// The validated input.
    pub input: Input,
    /// The hidden function's output.
    pub output: Output,
}

/// What a successful `query` returns to the model (§4.8).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueryResponse {
    /// Results in batch order.
    pub results: Vec<QueryResult>,
    /// Budget left after this batch.
    pub remaining_budget: u32,
}

/// Outcome of one evaluation phase; the per-item correctness is for records, never the model.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evaluation {
    /// Whether each prediction matched, in test order.
    pub correct: Vec<bool>,
    /// Whether all predictions matched (the task is solved).
    pub all_correct: bool,
}

/// A failed attempt (§4.9), logged with where it happened and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolFailure {
    /// Round of the failure.
    pub round: u32,
    /// Phase of the failure.
    pub phase: Phase,
    /// Tool that failed.
    pub tool: Tool,
    /// Error text.
    pub cause: String,
}

/// A tool given up after `max_attempts` failures in one phase (§4.9 consequences apply).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forfeit {
    /// Round of the forfeit.
    pub round: u32,
    /// Phase forfeited.
    pub phase: Phase,
    /// Tool given up.
    pub tool: Tool,
}

/// Everything that happened in one round, for the episode record.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RoundRecord {
    /// Round number (0 = samples-only evaluation).
    pub round: u32,
    /// Queries answered this round.
    pub queries: Vec<QueryResult>,
    /// Whether the query phase was forfeited (no queries this round).
    pub query_forfeited: bool,
    /// Scratchpad in effect after this round's scratchpad phase (`None` in round 0).
    pub scratchpad: Option<String>,
    /// Predictions as submitted (`None` if the evaluation was forfeited or not reached).
    pub predictions: Option<Vec<String>>,
    /// Per-prediction correctness.
    pub correct: Vec<bool>,
    /// Whether this round's evaluation solved the task.
    pub solved: bool,
    /// Whether the evaluation was forfeited (counts as not solved).
    pub evaluation_forfeited: bool,
}

/// The serialisable result of one task-run: all rounds plus the solve point and failures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EpisodeRecord {
    /// Task played.
    pub task: TaskId,
    /// Generator seed (`bbq.test_seed`).
    pub seed: u64,
    /// Parameters in effect.
    pub params: TaskParams,
    /// Query budget.
    pub total_queries: u32,
    /// Batch limit.
    pub query_batch_size: u32,
    /// Rounds after round 0.
    pub max_rounds: u32,
    /// Rounds played, in order.
    pub rounds: Vec<RoundRecord>,
    /// Whether an evaluation was fully correct.
    pub solved: bool,
    /// Round of the first fully correct evaluation.
    pub solved_round: Option<u32>,
    /// Queries used when it was solved.
    pub solved_at_queries: Option<u32>,
    /// Queries used in total.
    pub queries_used: u32,
    /// Every failed attempt.
    pub failures: Vec<ToolFailure>,
    /// Every forfeited phase.
    pub forfeits: Vec<Forfeit>,
}
