//! `evalgrid export P --format inspect|eee --out DIR`: a pipeline's cached results as
//! Inspect AI eval logs or Every Eval Ever files (see `evalgrid::export`).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use evalgrid::export::{Format, export as write_export};
use evalgrid::plan::plan;
use serde_json::json;

use super::exit::Exit;
use super::{Env, Failure, load_pipeline, output};

/// Arguments of `evalgrid export`.
#[derive(Debug, Args)]
pub(crate) struct ExportArgs {
    /// Pipeline file (YAML).
    pub(crate) pipeline: PathBuf,
    /// `inspect`: one Inspect AI JSON eval log per task × model (`inspect view DIR` opens
    /// them); `eee`: Every Eval Ever 0.3.0 aggregate `.json` and instance `_samples.jsonl`.
    #[arg(long, value_enum)]
    pub(crate) format: ExportFormat,
    /// Folder to write into (created if missing; files of the same name are replaced).
    #[arg(long)]
    pub(crate) out: PathBuf,
    /// Print one JSON object (`files`, `samples`) on stdout.
    #[arg(long)]
    pub(crate) json: bool,
}

/// The formats on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum ExportFormat {
    /// Inspect AI's JSON eval log.
    Inspect,
    /// Every Eval Ever.
    Eee,
}

/// Writes the export from the cache only (never runs a cell).
pub(crate) fn export(env: &Env, args: &ExportArgs) -> Result<Exit, Failure> {
    let pipeline = load_pipeline(env, &args.pipeline)?;
    let plan = plan(&pipeline, None);
    let store = env.store()?;
    let format = match args.format {
        ExportFormat::Inspect => Format::Inspect,
        ExportFormat::Eee => Format::Eee,
    };
    let outcome = write_export(&pipeline, &plan, &store, env.registry.data_dir(), format, &args.out)?;
    if args.json {
        output::json(&json!({"dir": outcome.dir.display().to_string(), "files": outcome.files, "samples": outcome.samples}));
    } else {
        output::line(&format!("export: {}/ ({} files, {} samples)", outcome.dir.display(), outcome.files.len(), outcome.samples));
    }
    Ok(Exit::Ok)
}
