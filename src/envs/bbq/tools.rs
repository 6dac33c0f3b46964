//! BBQ-Bench's command-line tool, `evalgrid bbq call <task> '<input>'`: a hidden function's
//! output for one input exactly as the model sees it (added to the CLI by
//! [`Benchmark::tools`](crate::envs::Benchmark::tools)).

use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _, Parser};

use super::function::call;
use super::parse::InputError;
use crate::envs::tool::{ToolError, ToolOutcome, ToolOutput};

/// BBQ-Bench tools: call a hidden function as the model would.
#[derive(Debug, Parser)]
#[command(name = "bbq")]
enum BbqTool {
    /// Print a function's output for one input exactly as the model sees it.
    #[command(after_help = "Example:\n  evalgrid bbq call is_prime 97\n  evalgrid bbq call caesar_cipher hello")]
    Call {
        /// Function id, e.g. `is_prime`.
        task: String,
        /// Input in the form the model would send (may start with a minus: `-7`, `-abc`).
        #[arg(allow_hyphen_values = true)]
        input: String,
    },
}

/// The `bbq` command and its tools.
pub(super) fn command() -> clap::Command {
    BbqTool::command()
}

/// Runs `bbq call`: the function's output, or the error the model would be told (which
/// is the tool's finding, exit 1, not a failure of the command); an unknown task is
/// invalid input.
pub(super) fn run(matches: &ArgMatches) -> Result<ToolOutput, ToolError> {
    let BbqTool::Call { task, input } = BbqTool::from_arg_matches(matches).map_err(ToolError::arguments)?;
    match call(&task, &input) {
        Ok(out) => Ok(ToolOutput::ok(vec![out])),
        Err(e @ InputError::UnknownTask(_)) => Err(ToolError::Invalid(Box::new(e))),
        Err(e) => Ok(ToolOutput { lines: vec![format!("error: {e}")], outcome: ToolOutcome::Failed }),
    }
}
