//! Exports of a pipeline's cached results to other tools' formats: Inspect AI's JSON eval
//! logs ([`inspect`]) and Every Eval Ever's aggregate and instance-level files ([`eee`]).
//!
//! Both read the same rows as `items.csv` ([`crate::report::build::suite_units`]) paired with
//! each unit's prompt and answer ([`crate::envs::Exchange`]); every file carries the
//! provenance ([`provenance`]) that ties its numbers to the cache entries that made them,
//! and is written as printable ASCII ([`ascii`]): text from a provider or a dataset reaches
//! it JSON-escaped, never as raw markup, control or bidi characters.

pub mod ascii;
pub mod eee;
pub mod inspect;
pub mod provenance;
pub mod samples;

use std::path::{Path, PathBuf};

use crate::cache::{CacheError, Store};
use crate::plan::Plan;
use crate::spec::Pipeline;

pub use samples::{Group, Sample, groups};

/// The formats `evalgrid export` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Inspect AI's JSON eval log, one per task × model.
    Inspect,
    /// Every Eval Ever: an aggregate `.json` and an instance-level `_samples.jsonl` per task × model.
    Eee,
}

/// Errors while exporting.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// Reading the cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// Nothing to export: no cell of the pipeline has a cached score.
    #[error("no cell of this pipeline has a result in the cache; run `evalgrid run` first")]
    Empty,
    /// Writing a file failed.
    #[error("cannot write `{path}`")]
    Write {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// Files written by [`export`], relative to its folder.
#[derive(Debug, serde::Serialize)]
pub struct ExportOutcome {
    /// Folder written to.
    pub dir: PathBuf,
    /// File names, in order.
    pub files: Vec<String>,
    /// Samples (scored units) exported over all files.
    pub samples: usize,
}

/// Writes `format`'s files for every task × model of `plan` that has a scored cell into `out`.
///
/// # Errors
/// Cache failures, nothing scored, unwritable files.
pub fn export(pipeline: &Pipeline, plan: &Plan, store: &Store, data_dir: &Path, format: Format, out: &Path) -> Result<ExportOutcome, ExportError> {
    let groups = groups(pipeline, plan, store, data_dir)?;
    if groups.is_empty() {
        return Err(ExportError::Empty);
    }
    let files: Vec<(String, Vec<u8>)> = match format {
        Format::Inspect => inspect::files(pipeline, &groups),
        Format::Eee => eee::files(pipeline, &groups),
    };
    let write_err = |path: &Path| {
        let path = path.to_owned();
        move |source| ExportError::Write { path, source }
    };
    std::fs::create_dir_all(out).map_err(write_err(out))?;
    // Each file whole or not at all: a reader never meets half a log after a killed export.
    for (name, bytes) in &files {
        crate::report::partial::write_if_changed(&out.join(name), bytes).map_err(|(path, source)| ExportError::Write { path, source })?;
    }
    crate::report::partial::sweep(out, files.iter().map(|(name, _)| name.as_str()));
    let samples = groups.iter().map(|g| g.samples.len()).sum();
    Ok(ExportOutcome { dir: out.to_owned(), files: files.into_iter().map(|(n, _)| n).collect(), samples })
}

/// A file-name stem from free text: ASCII letters, digits, `.`, `_` and `-` kept, anything
/// else `-`, so a task or model label never makes a path.
#[must_use]
pub fn stem(text: &str) -> String {
    let s: String = text.chars().map(|c| if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') { c } else { '-' }).collect();
    s.trim_start_matches('.').to_owned()
}
