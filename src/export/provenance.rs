//! What ties an exported number to the cache that made it (issue 34 item 8): evalgrid's
//! version, the pipeline file's hash, and each cell's step keys.

use serde::Serialize;

use crate::plan::Cell;
use crate::spec::Pipeline;

/// One cell's identity and step keys.
#[derive(Clone, Debug, Serialize)]
pub struct CellKeys {
    /// `model/benchmark/task/seed`.
    pub cell: String,
    /// Seed.
    pub seed: u64,
    /// Key of its episode step (hex).
    pub episode_key: String,
    /// Key of its score step (hex).
    pub score_key: String,
}

impl CellKeys {
    /// The keys of `cell`.
    #[must_use]
    pub fn of(cell: &Cell) -> Self {
        Self { cell: cell.id.clone(), seed: cell.seed, episode_key: cell.episode_key.to_hex(), score_key: cell.score_key.to_hex() }
    }
}

/// evalgrid's version and build commit, as the report's provenance block shows them.
#[must_use]
pub fn evalgrid_version() -> String {
    format!("{} ({})", env!("CARGO_PKG_VERSION"), option_env!("EVALGRID_GIT_COMMIT").unwrap_or("commit unknown"))
}

/// The provenance record of one export file: no path, no URL, no secret (a pipeline file
/// is named by its blake3 only).
#[must_use]
pub fn record(pipeline: &Pipeline, cells: &[CellKeys]) -> serde_json::Value {
    serde_json::json!({
        "evalgrid_version": evalgrid_version(),
        "pipeline": pipeline.name,
        "pipeline_blake3": pipeline.source_hash,
        "cells": cells,
    })
}
