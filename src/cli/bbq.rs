//! `evalgrid bbq call <task> '<input>'`.

use super::exit::Exit;
use evalgrid::envs::bbq::{InputError, call};

use super::args::BbqCommand;
use super::{Failure, output};

pub(crate) fn bbq(command: &BbqCommand) -> Result<Exit, Failure> {
    let BbqCommand::Call { task, input } = command;
    match call(task, input) {
        Ok(out) => {
            output::line(&out);
            Ok(Exit::Ok)
        }
        Err(e @ InputError::UnknownTask(_)) => Err(Failure::invalid(e)),
        Err(e) => {
            // What the model would be told; not a failure of the command.
            output::line(&format!("error: {e}"));
            Ok(Exit::Failed)
        }
    }
}
