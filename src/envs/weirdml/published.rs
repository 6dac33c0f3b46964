//! The WeirdML author's published per-run results (`weirdml_results.json`, spec
//! `weirdml-published.md`): parsed, checked and turned into `models.csv` / `tasks.csv`, so the
//! published averages can be reproduced from the run scores they are made of.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use super::metrics::{max_at_k, standard_error};

/// Why a published results or estimates file cannot be used (always invalid input, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum PublishedError {
    /// The file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not the JSON shape expected (truncated, not JSON, a field missing).
    #[error("{path}: not a WeirdML {what} file: {source}")]
    Json {
        /// The file.
        path: String,
        /// `results` or `estimates`.
        what: &'static str,
        /// serde's message, with line and column.
        source: serde_json::Error,
    },
    /// A value the method needs is absent or unusable.
    #[error("{path}: {message}")]
    Content {
        /// The file.
        path: String,
        /// What is wrong and where.
        message: String,
    },
}

/// One run of a model on a task.
#[derive(Debug, Clone, Deserialize)]
pub struct Run {
    /// Max test accuracy over the run's 5 iterations (rounded by the author).
    pub score: f64,
}

/// A model's results on one task.
#[derive(Debug, Clone, Deserialize)]
pub struct TaskResult {
    /// Runs as counted by the author.
    pub num_runs: usize,
    /// The author's rounded mean of the run scores.
    pub mean_accuracy: f64,
    /// The runs.
    pub runs: Vec<Run>,
}

/// The author's aggregate scores.
#[derive(Debug, Clone, Deserialize)]
pub struct Aggregate {
    /// Mean over the 17 tasks of the task means.
    pub avg_acc: f64,
    /// Published standard error (method unknown, shown beside ours).
    pub avg_acc_standard_error: f64,
}

/// One published model.
#[derive(Debug, Clone, Deserialize)]
pub struct PublishedModel {
    /// Human-readable name (the results-file key is the model id).
    pub display_name: String,
    /// `YYYY-MM-DD`.
    pub release_date: String,
    /// Mean API cost per run in USD (absent for some models).
    #[serde(default)]
    pub cost_per_run_usd: Option<f64>,
    /// The published averages.
    pub aggregate_scores: Aggregate,
    /// Task name → results.
    pub tasks: BTreeMap<String, TaskResult>,
}

/// The whole results file.
#[derive(Debug, Clone, Deserialize)]
pub struct Published {
    /// The v2 task names, in the author's order.
    pub tasks: Vec<String>,
    /// Results-file key → model.
    pub models: BTreeMap<String, PublishedModel>,
}

/// Reads `weirdml_results.json`.
///
/// # Errors
/// Unreadable file, JSON that is not this shape, or a model with a task the file does not list.
pub fn load_results(path: &Path) -> Result<Published, PublishedError> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| PublishedError::Read { path: shown.clone(), source })?;
    parse_results(&bytes, &shown)
}

/// [`load_results`] on bytes already read (`shown` names them in messages).
///
/// # Errors
/// JSON that is not this shape, or a model with a task the file does not list.
pub fn parse_results(bytes: &[u8], shown: &str) -> Result<Published, PublishedError> {
    let shown = shown.to_owned();
    let published: Published = serde_json::from_slice(bytes).map_err(|source| PublishedError::Json { path: shown.clone(), what: "results", source })?;
    if published.tasks.is_empty() {
        return Err(PublishedError::Content { path: shown, message: "`tasks` is empty".into() });
    }
    for (key, model) in &published.models {
        if let Some(unknown) = model.tasks.keys().find(|t| !published.tasks.contains(t)) {
            return Err(PublishedError::Content { path: shown, message: format!("model `{key}` has task `{unknown}`, which `tasks` does not list") });
        }
        if let Some((task, _)) = model.tasks.iter().find(|(_, r)| r.runs.iter().any(|run| !run.score.is_finite())) {
            return Err(PublishedError::Content { path: shown, message: format!("model `{key}`, task `{task}`: a run score is not a number") });
        }
    }
    Ok(published)
}

/// Recomputed numbers of one model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelRow {
    /// Tasks with at least one run.
    pub tasks: usize,
    /// Runs over all tasks.
    pub runs: usize,
    /// Mean over tasks of the mean run score; `None` when a task is missing.
    pub avg_acc: Option<f64>,
    /// (1/T)·sqrt(Σ_t s²_t / n_t), s² the sample variance (ddof 1) of task t's run scores;
    /// `None` when a task is missing or has a single run.
    pub standard_error: Option<f64>,
}

impl PublishedModel {
    /// Run scores per task in `tasks` order; a missing or run-less task is absent.
    pub fn scores(&self, tasks: &[String]) -> Vec<(String, Vec<f64>)> {
        tasks.iter().filter_map(|t| self.tasks.get(t).filter(|r| !r.runs.is_empty()).map(|r| (t.clone(), r.runs.iter().map(|x| x.score).collect()))).collect()
    }

    /// The tasks of `tasks` this model has no runs for.
    pub fn missing(&self, tasks: &[String]) -> Vec<String> {
        tasks.iter().filter(|t| self.tasks.get(*t).is_none_or(|r| r.runs.is_empty())).cloned().collect()
    }

    /// avg_acc and our standard error, recomputed from the run scores.
    pub fn row(&self, tasks: &[String]) -> ModelRow {
        let scores = self.scores(tasks);
        let complete = scores.len() == tasks.len();
        let means: Vec<f64> = scores.iter().map(|(_, s)| s.iter().sum::<f64>() / s.len() as f64).collect();
        let runs: Vec<Vec<f64>> = scores.iter().map(|(_, s)| s.clone()).collect();
        ModelRow {
            tasks: scores.len(),
            runs: runs.iter().map(Vec::len).sum(),
            avg_acc: complete.then(|| means.iter().sum::<f64>() / means.len() as f64),
            standard_error: if complete { standard_error(&runs, 1) } else { None },
        }
    }
}

/// A CSV field: quoted when it holds a comma, quote or newline.
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

fn opt(v: Option<f64>) -> String {
    v.map_or_else(String::new, |x| format!("{x:.8}"))
}

/// `models.csv`: one row per model, recomputed numbers beside the published ones.
pub fn models_csv(published: &Published) -> String {
    let mut out = String::from("model,display_name,release_date,tasks,runs,avg_acc,standard_error,published_standard_error,cost_per_run_usd\n");
    for (key, m) in &published.models {
        let row = m.row(&published.tasks);
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{:.8},{}",
            csv_field(key),
            csv_field(&m.display_name),
            csv_field(&m.release_date),
            row.tasks,
            row.runs,
            opt(row.avg_acc),
            opt(row.standard_error),
            m.aggregate_scores.avg_acc_standard_error,
            m.cost_per_run_usd.map_or_else(String::new, |c| format!("{c:.6}")),
        );
    }
    out
}

/// `tasks.csv`: one row per model and task with the unbiased max@k for k = 1 … runs
/// (columns up to the largest run count; empty where k exceeds the row's runs).
pub fn tasks_csv(published: &Published) -> String {
    let widest = published.models.values().flat_map(|m| m.tasks.values().map(|t| t.runs.len())).max().unwrap_or(0);
    let mut out = String::from("model,task,runs,mean_accuracy");
    for k in 1..=widest {
        let _ = write!(out, ",max_at_{k}");
    }
    out.push('\n');
    for (key, m) in &published.models {
        for (task, scores) in m.scores(&published.tasks) {
            let mean = scores.iter().sum::<f64>() / scores.len() as f64;
            let _ = write!(out, "{},{},{},{mean:.8}", csv_field(key), csv_field(&task), scores.len());
            for k in 1..=widest {
                let _ = write!(out, ",{}", opt(max_at_k(&scores, k)));
            }
            out.push('\n');
        }
    }
    out
}
