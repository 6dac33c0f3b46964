//! Execution: the scheduler that runs cells and lands their steps.

pub mod progress;
pub mod runner;
pub mod scheduler;

pub use runner::{BoxFuture, EpisodeRunner, StepError, on_cpu};
pub use scheduler::{Cancel, CellOutcome, CellState, RunOptions, RunSummary, classify, run_cells};
