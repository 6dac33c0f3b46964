//! WeirdML task manifest (spec §2): prompt, the data directory the sandbox sees as `data/`,
//! the hidden labels kept outside the sandbox, the predictions contract and run limits.
//! Deserialize-only input format (JSON here; the integrator parses YAML into the same type).

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// Where every public WeirdML task expects predictions (§2).
pub const DEFAULT_PREDICTIONS: &str = "results/test_preds.txt";
/// v1 per-submission wall-clock limit (§1); v2 uses 120 s.
pub const DEFAULT_TIME_LIMIT_S: f64 = 600.0;
/// Submissions per run (§1).
pub const DEFAULT_ITERATIONS: u32 = 5;

fn default_predictions() -> String {
    DEFAULT_PREDICTIONS.to_string()
}
fn default_time_limit() -> f64 {
    DEFAULT_TIME_LIMIT_S
}
fn default_iterations() -> u32 {
    DEFAULT_ITERATIONS
}
fn default_width() -> usize {
    1
}

/// One task: everything the executor needs to run and score submissions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskManifest {
    /// Task id (e.g. `shapes_easy`, `mini_shapes_seed42`).
    pub id: String,
    /// Task prompt text sent to the model.
    pub prompt: String,
    /// Directory copied read-only into the sandbox as `data/`.
    pub data_dir: PathBuf,
    /// Training files (names relative to `data_dir`); checked to exist.
    #[serde(default)]
    pub train_files: Vec<String>,
    /// Test input files (relative to `data_dir`); checked to exist.
    #[serde(default)]
    pub test_inputs: Vec<String>,
    /// Hidden test labels (`.npy`), must lie outside `data_dir`; never mounted.
    pub labels_path: PathBuf,
    /// Predictions file relative to the working directory, under `results/`.
    #[serde(default = "default_predictions")]
    pub predictions_file: String,
    /// Number of test rows the predictions must have.
    pub test_size: usize,
    /// Integers per prediction row (1, or 9 for the shuffle tasks).
    #[serde(default = "default_width")]
    pub pred_width: usize,
    /// Per-submission wall-clock limit in seconds (600 v1, 120 v2).
    #[serde(default = "default_time_limit")]
    pub time_limit_s: f64,
    /// Submissions per run.
    #[serde(default = "default_iterations")]
    pub iterations: u32,
}

/// Manifest loading or validation failures.
#[derive(Debug, Error)]
pub enum TaskError {
    /// The manifest file could not be read.
    #[error("reading task manifest {path}: {source}")]
    Read {
        /// Manifest path.
        path: PathBuf,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The JSON did not match the manifest schema.
    #[error("parsing task manifest: {0}")]
    Parse(#[from] serde_json::Error),
    /// A field has an invalid value.
    #[error("invalid task manifest field `{field}`: {reason}")]
    Invalid {
        /// Field name.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
}

fn invalid(field: &'static str, reason: impl Into<String>) -> TaskError {
    TaskError::Invalid { field, reason: reason.into() }
}

/// True when `p` is relative and has only normal components (no `..`, no root).
fn is_plain_relative(p: &Path) -> bool {
    !p.as_os_str().is_empty() && p.components().all(|c| matches!(c, Component::Normal(_)))
}

impl TaskManifest {
    /// Parses a JSON manifest; relative paths resolve against `base_dir`; then validates.
    pub fn from_json_str(text: &str, base_dir: &Path) -> Result<Self, TaskError> {
        let mut m: TaskManifest = serde_json::from_str(text)?;
        m.resolve(base_dir);
        m.validate()?;
        Ok(m)
    }

    /// Reads and parses a JSON manifest file (paths relative to its directory).
    pub fn from_path(path: &Path) -> Result<Self, TaskError> {
        let text = std::fs::read_to_string(path).map_err(|source| TaskError::Read { path: path.to_path_buf(), source })?;
        let base = path.parent().unwrap_or(Path::new("."));
        Self::from_json_str(&text, base)
    }

    /// Makes `data_dir` and `labels_path` absolute relative to `base_dir` (for YAML callers).
    pub fn resolve(&mut self, base_dir: &Path) {
        if self.data_dir.is_relative() {
            self.data_dir = base_dir.join(&self.data_dir);
        }
        if self.labels_path.is_relative() {
            self.labels_path = base_dir.join(&self.labels_path);
        }
    }

    /// Checks limits, the predictions contract, file existence and label confidentiality.
    pub fn validate(&self) -> Result<(), TaskError> {
        if self.id.trim().is_empty() {
            return Err(invalid("id", "empty"));
        }
        if !(self.time_limit_s.is_finite() && self.time_limit_s > 0.0) {
            return Err(invalid("time_limit_s", format!("{} is not a positive number", self.time_limit_s)));
        }
        if self.iterations == 0 {
            return Err(invalid("iterations", "must be at least 1"));
        }
        if self.test_size == 0 || self.pred_width == 0 {
            return Err(invalid("test_size", "test_size and pred_width must be positive"));
        }
        let preds = Path::new(&self.predictions_file);
        if !is_plain_relative(preds) || !preds.starts_with("results") || preds == Path::new("results") {
            return Err(invalid("predictions_file", "must be a relative path under results/"));
        }
        if !self.data_dir.is_dir() {
            return Err(invalid("data_dir", format!("{} is not a directory", self.data_dir.display())));
        }
        for (field, names) in [("train_files", &self.train_files), ("test_inputs", &self.test_inputs)] {
            for name in names {
                if !is_plain_relative(Path::new(name)) {
                    return Err(invalid(field, format!("{name:?} is not a plain relative path")));
                }
                if !self.data_dir.join(name).is_file() {
                    return Err(invalid(field, format!("{name} missing in data_dir")));
                }
            }
        }
        if !self.labels_path.is_file() {
            return Err(invalid("labels_path", format!("{} is not a file", self.labels_path.display())));
        }
        let data = self.data_dir.canonicalize().map_err(|e| invalid("data_dir", e.to_string()))?;
        let labels = self.labels_path.canonicalize().map_err(|e| invalid("labels_path", e.to_string()))?;
        if labels.starts_with(&data) {
            return Err(invalid("labels_path", "hidden labels must not lie inside data_dir"));
        }
        Ok(())
    }

    /// The per-submission time limit as a `Duration` (validated positive and finite).
    pub fn time_limit(&self) -> std::time::Duration {
        std::time::Duration::try_from_secs_f64(self.time_limit_s).unwrap_or(std::time::Duration::from_secs(600))
    }
}

#[cfg(test)]
mod tests;
