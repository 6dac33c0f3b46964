//! WeirdML code-run executor core (spec `shared/specs/weirdml.md`): task manifests, the
//! deterministic CPU stand-in task "mini-shapes", a sandboxed Python runner (bubblewrap or
//! rlimits-only), a GPU/CPU slot pool, the model-independent 5-submission episode state
//! machine with its scorer and feedback text, plain-Rust metrics (incl. unbiased max@k) and a
//! scripted offline agent.

pub mod benchmark;
pub mod codeblock;
pub mod episode;
pub mod horizon;
pub mod metrics;
pub mod minishapes;
pub mod npy;
pub mod published;
pub mod pyfmt;
pub mod report;
pub mod scorer;
pub mod scripted;
pub mod task;
pub mod timeline;
mod tools;

#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

pub use crate::sandbox;
/// The sandbox moved to [`crate::sandbox`]; these names stay for WeirdML's own code.
pub use crate::sandbox::{gpu, output, process, provenance};

pub use crate::sandbox::gpu::{GpuError, GpuInfo, GpuPool, GpuSelection, Lease, PoolConfig, Slot, discover, parse_gpu_csv};
pub use crate::sandbox::output::{CapturedOutput, OutputCapture, truncate_view};
pub use crate::sandbox::provenance::{Provenance, PythonInfo, probe_python};
pub use crate::sandbox::{
    Backend, BackendChoice, ExitInfo, Isolation, IsolationReport, LimitKind, Limits, OutputLimits, Predictions, PrivilegeDrop, RunResult, RunSpec, Sandbox,
    SandboxConfig, SandboxError,
};
pub use codeblock::{CodeBlock, extract_code, fenced_blocks};
pub use episode::{
    CodeRunner, Episode, EpisodeError, EpisodeRecord, FEEDBACK_ASSET, FailureKind, NO_CODE_FEEDBACK, SandboxRunner, Step, SubmissionRecord, classify,
    feedback_text,
};
pub use metrics::{
    ModelAverage, accuracy_after_k, best_so_far, failure_rate, max_at_k, max_at_k_weights, model_average, pass_at_k, per_run_failure_rate, run_accuracy,
    standard_error, task_score,
};
pub use minishapes::{MiniShapes, MiniShapesError, Sample, Solution, Split, SplitMix64, TaskFiles};
pub use pyfmt::{py_float_repr, seconds_text};
pub use scorer::{Labels, ScoreError, ScoreOutcome, parse_predictions, score_predictions};
pub use scripted::{Agent, ScriptedAgent, play};
pub use task::{TaskError, TaskManifest};
