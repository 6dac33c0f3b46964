//! Eleusis's command-line tool, `evalgrid eleusis import <results.json>... --out <dir>`:
//! every published metric from result files made elsewhere, plus an engine replay of every
//! round that lists any turn where hand, board or verdict differ (added to the CLI by
//! [`Benchmark::tools`](crate::envs::Benchmark::tools)).

use std::fmt::Write as _;
use std::path::PathBuf;

use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _, Parser};

use super::analysis::replay::{ImportError, import, metrics_csv};
use crate::envs::tool::{ToolError, ToolOutcome, ToolOutput};

/// Eleusis tools: import published results and compute every metric.
#[derive(Debug, Parser)]
#[command(name = "eleusis")]
enum EleusisTool {
    /// Import published `results.json` files, compute every metric, replay every round.
    #[command(after_help = "Example:\n  evalgrid eleusis import ../shared/data/eleusis/results/*.gz --out imported/")]
    Import {
        /// Result files (`.json` or `.json.gz`).
        #[arg(required = true)]
        files: Vec<PathBuf>,
        /// Output folder for `metrics.csv` and `replay.txt`.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Why `eleusis import` stopped.
#[derive(Debug, thiserror::Error)]
enum ImportToolError {
    /// A results file cannot be read or parsed.
    #[error(transparent)]
    Import(ImportError),
    /// An output file cannot be written.
    #[error(transparent)]
    Write(std::io::Error),
    /// The metrics cannot be encoded.
    #[error(transparent)]
    Json(serde_json::Error),
}

impl From<ImportToolError> for ToolError {
    fn from(e: ImportToolError) -> Self {
        match e {
            ImportToolError::Import(_) => Self::Invalid(Box::new(e)),
            ImportToolError::Write(_) | ImportToolError::Json(_) => Self::Failed(Box::new(e)),
        }
    }
}

/// The `eleusis` command and its tools.
pub(super) fn command() -> clap::Command {
    EleusisTool::command()
}

/// Runs `eleusis import`: writes `metrics.csv`, `metrics.json` and `replay.txt` under
/// `--out`; any replay difference is a problem found (exit 1).
pub(super) fn run(matches: &ArgMatches) -> Result<ToolOutput, ToolError> {
    let EleusisTool::Import { files, out } = EleusisTool::from_arg_matches(matches).map_err(ToolError::arguments)?;
    Ok(import_files(&files, &out)?)
}

fn import_files(files: &[PathBuf], out: &std::path::Path) -> Result<ToolOutput, ImportToolError> {
    let report = import(files).map_err(ImportToolError::Import)?;
    fs_err::create_dir_all(out).map_err(ImportToolError::Write)?;
    fs_err::write(out.join("metrics.csv"), metrics_csv(&report)).map_err(ImportToolError::Write)?;
    let json = serde_json::to_string_pretty(&report).map_err(ImportToolError::Json)? + "\n";
    fs_err::write(out.join("metrics.json"), json).map_err(ImportToolError::Write)?;
    let mut replay = String::new();
    let mut diffs = 0;
    for f in &report.files {
        let _ = writeln!(replay, "{} ({}): {} rounds, {} turns, {} differences", f.path, f.model, f.rounds, f.turns, f.replay_diffs.len());
        for d in &f.replay_diffs {
            diffs += 1;
            let turn = d.turn.map_or_else(|| "round".to_owned(), |t| format!("turn {t}"));
            let _ = writeln!(replay, "  round {} {turn}: {} recorded `{}`, replayed `{}`", d.round, d.field, d.recorded, d.replayed);
        }
    }
    fs_err::write(out.join("replay.txt"), &replay).map_err(ImportToolError::Write)?;
    let lines = vec![replay.trim_end().to_owned(), format!("wrote {}/metrics.csv, metrics.json, replay.txt", out.display())];
    Ok(ToolOutput { lines, outcome: if diffs > 0 { ToolOutcome::Failed } else { ToolOutcome::Ok } })
}
