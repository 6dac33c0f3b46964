//! What a benchmark's command-line tools (`evalgrid bbeh score`, …) get and give back, so the
//! CLI adds, runs and prints them without naming the benchmark (see
//! [`super::Benchmark::tools`]).

use std::path::Path;

/// What a tool may use besides its own arguments: the CLI's global settings.
#[derive(Clone, Copy, Debug)]
pub struct ToolContext<'a> {
    /// Where datasets are installed (`--data-dir`).
    pub data_dir: &'a Path,
}

/// How a tool that ran to the end came out, so the CLI picks exit code 0 or 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolOutcome {
    /// Everything asked for succeeded.
    Ok,
    /// The tool ran, but what it checked has a problem (a replay difference, an input the
    /// hidden function rejects).
    Failed,
}

/// What a tool that ran to the end prints on stdout, and how it came out; the tool itself
/// prints nothing, so all printing stays at the CLI edge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutput {
    /// Result lines, printed in order.
    pub lines: Vec<String>,
    /// Ok or a problem found.
    pub outcome: ToolOutcome,
}

impl ToolOutput {
    /// Lines of a tool that succeeded.
    #[must_use]
    pub fn ok(lines: Vec<String>) -> Self {
        Self { lines, outcome: ToolOutcome::Ok }
    }
}

/// Why a tool stopped, sorted by the exit code it maps to; the message (and its source
/// chain) is the benchmark's own typed error, shown unchanged.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    /// Invalid input: arguments, an input file, an unknown task, a dataset not installed
    /// (exit 2).
    #[error(transparent)]
    Invalid(Box<dyn std::error::Error + Send + Sync>),
    /// The tool could not finish: an output it cannot write (exit 1).
    #[error(transparent)]
    Failed(Box<dyn std::error::Error + Send + Sync>),
}

impl ToolError {
    /// Arguments that the tool's own command parsed but cannot be read back (a tool whose
    /// `run_tool` does not match its `tools` command).
    #[must_use]
    pub fn arguments(error: clap::Error) -> Self {
        Self::Invalid(Box::new(error))
    }
}
