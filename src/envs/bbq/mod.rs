//! BBQ-Bench core (black-box function queries, spec `shared/specs/bbq.md`, id `bbq_bench`):
//! the 20 tasks and their evalgrid-default parameters, the hidden functions with query
//! validation, the deterministic test-set/sample generator, the model-independent episode
//! state machine, plain-Rust metrics and two offline agents (random baseline, solver), and
//! the driver that lets API models play it ([`llm_episode`], with [`prompt`], [`reply`] and
//! the sandboxed `execute_python` of [`python`]); `tools` is `evalgrid bbq call`.

pub mod agents;
pub mod alternatives;
pub mod benchmark;
pub mod episode;
pub mod function;
pub mod generator;
mod hypotheses;
pub mod llm_episode;
pub mod metrics;
pub mod parse;
pub mod prompt;
pub mod python;
pub mod record;
pub mod reply;
pub mod report;
pub mod solver;
pub mod task;
mod tools;
pub mod value;

pub use agents::{Agent, Observation, RandomAgent, play};
pub use alternatives::{Alternative, alternatives, unseparated};
pub use episode::{Episode, EpisodeError, truncate_words};
pub use function::{Input, Output, call, evaluate, evaluate_with};
pub use generator::{Case, GenError, SplitMix64, fnv1a64, samples, test_set};
pub use metrics::{CurvePoint, Rate, Summary, efficiency_curve, mean_ci50, score, summarize};
pub use parse::{InputError, parse_input, parse_input_with, parse_json_input_with, validate, validate_with};
pub use record::{EpisodeRecord, Evaluation, Forfeit, Phase, QueryResponse, QueryResult, RoundRecord, Tool, ToolFailure};
pub use solver::SolverAgent;
pub use task::{BENCHMARK_ID, DEFAULT_TEST_SEED, Family, GapComparison, IndexRule, InputKind, OutputKind, Task, TaskId, TaskParams, UnknownTask};
