//! Pipeline specification: YAML file → validated [`Pipeline`].
//!
//! `load` reads the file, parses it through [`yaml`] (the single module that
//! knows the YAML crate), and resolves it against a [`Catalog`] of benchmarks,
//! reporting every problem as `file:line:col: message` with a hint.

pub mod catalog;
pub mod diagnostic;
pub mod pipeline;
pub mod raw;
pub mod resolve;
pub mod yaml;

use std::path::{Path, PathBuf};

pub use catalog::{Catalog, CatalogIssue, IssueSite, Selection};
pub use diagnostic::{Diagnostic, Position, Report};
pub use pipeline::{
    CellFilter, MetricsConfig, ModelConfig, Params, Pipeline, ReportConfig, TaskInstance,
    glob_match,
};

/// Why a pipeline could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// The file could not be read.
    #[error("cannot read pipeline `{path}`")]
    Read {
        /// File named by the user.
        path: PathBuf,
        /// Underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file was read but is invalid; the report lists every problem.
    #[error("{0}")]
    Invalid(Box<Report>),
}

/// Reads and validates the pipeline at `path`.
pub fn load(path: &Path, catalog: &dyn Catalog) -> Result<Pipeline, SpecError> {
    let bytes = fs_err::read(path).map_err(|source| SpecError::Read { path: path.to_owned(), source })?;
    let source = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => {
            let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
            let line = u32::try_from(valid.iter().filter(|b| **b == b'\n').count() + 1).unwrap_or(u32::MAX);
            return Err(SpecError::Invalid(Box::new(Report {
                path: path.to_owned(),
                source: String::new(),
                diagnostics: vec![Diagnostic::new(Position { line, column: 1 }, "file is not valid UTF-8")],
            })));
        }
    };
    load_str(&source, path, catalog)
}

/// Validates pipeline text; `path` is only used in messages and provenance.
pub fn load_str(source: &str, path: &Path, catalog: &dyn Catalog) -> Result<Pipeline, SpecError> {
    let invalid = |diagnostics| {
        SpecError::Invalid(Box::new(Report { path: path.to_owned(), source: source.to_owned(), diagnostics }))
    };
    let raw: raw::RawPipeline = yaml::parse(source).map_err(|d| invalid(vec![d]))?;
    let hash = blake3::hash(source.as_bytes()).to_hex().to_string();
    resolve::resolve(raw, catalog, path.to_owned(), hash).map_err(invalid)
}
