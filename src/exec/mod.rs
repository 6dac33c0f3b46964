//! Execution: the scheduler that runs cells and lands their steps, the cached
//! sub-step helper and the cached model-call context episodes use.

pub mod calls;
pub mod check;
pub mod estimate;
pub mod flight;
pub mod progress;
pub mod runner;
pub mod scheduler;
pub mod spend;
pub mod step_error;
pub mod substep;

pub use calls::{CallContext, CallSite, call_components, call_key};
pub use runner::{BoxFuture, EpisodeContext, EpisodeRunner, StepError, on_cpu};
pub use scheduler::{Cancel, CellState, RunCounts, RunOptions, RunSummary, classify, has_outcome, run_cells};
pub use substep::{Done, Fresh, SubStep, SubStepError};
