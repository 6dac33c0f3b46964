//! Benchmarks: each folder holds one benchmark's episode logic, scorer, built-in agents and
//! report exhibits behind the [`Benchmark`] trait; [`registry`] lists them and exposes them
//! to the spec and exec layers.

pub mod bbeh;
pub mod bbq;
pub mod benchmark;
pub mod eleusis;
pub mod exchange;
pub mod fetch;
pub mod guess;
pub mod harbor;
// Every step kind's key reacts to every input (all benchmarks' sub-step builders).
#[cfg(test)]
mod key_coverage;
pub mod metric;
pub mod pystr;
pub mod qa;
pub mod registry;
pub mod splitmix;
pub mod tool;
pub mod weirdml;

pub use benchmark::{Benchmark, FigureInput, ScoredCell, SectionInput};
pub use exchange::{Exchange, ScoreDetail};
/// The id a grading model's calls are counted under (the report's outcomes table).
pub use qa::judge::JUDGE_ID;
pub use registry::{PROVIDERS, Registry, transcript};
pub use tool::{ToolContext, ToolError, ToolOutcome, ToolOutput};
