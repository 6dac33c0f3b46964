//! The benchmarks' own commands (`evalgrid bbeh score`, `evalgrid bbq call`, …): every
//! benchmark in the registry that has tools adds its command beside the built-in ones, and
//! its output and errors are printed and mapped to exit codes like theirs.

use clap::ArgMatches;
use evalgrid::envs::{Benchmark, ToolContext, ToolError, ToolOutcome, registry};

use super::exit::Exit;
use super::{Env, Failure, output};

/// `cli` with every benchmark's tool command added, listed in `--help` right after the
/// built-in command `after`, by name.
pub(crate) fn add(mut cli: clap::Command, after: &str) -> clap::Command {
    let mut tools: Vec<clap::Command> = registry::ALL.iter().filter_map(|b| b.tools()).collect();
    tools.sort_by(|a, b| a.get_name().cmp(b.get_name()));
    let built_in: Vec<String> = cli.get_subcommands().map(|c| c.get_name().to_owned()).collect();
    let slot = built_in.iter().position(|n| n == after).map_or(built_in.len(), |i| i + 1);
    for (i, name) in built_in.iter().enumerate() {
        let order = if i < slot { i } else { i + tools.len() };
        cli = cli.mut_subcommand(name, |c| c.display_order(order));
    }
    for (j, tool) in tools.into_iter().enumerate() {
        cli = cli.subcommand(tool.display_order(slot + j));
    }
    cli
}

/// The benchmark whose tool command is called `name` (a tool command is named after its
/// benchmark: `envs::registry`'s tests hold every benchmark to it).
pub(crate) fn find(name: &str) -> Option<&'static dyn Benchmark> {
    registry::get(name).filter(|b| b.tools().is_some())
}

/// Runs `benchmark`'s tool on its parsed arguments and prints what it says.
pub(crate) fn run(env: &Env, benchmark: &dyn Benchmark, matches: &ArgMatches) -> Result<Exit, Failure> {
    let ctx = ToolContext { data_dir: env.registry.data_dir() };
    match benchmark.run_tool(matches, &ctx) {
        Ok(out) => {
            for line in &out.lines {
                output::line(line);
            }
            Ok(Exit::failed_if(out.outcome == ToolOutcome::Failed))
        }
        Err(e @ ToolError::Invalid(_)) => Err(Failure::invalid(e)),
        Err(e @ ToolError::Failed(_)) => Err(Failure::from(e)),
    }
}
