//! BBEH's command-line tool, `evalgrid bbeh score <responses.jsonl> --out <dir>`: rescore
//! responses produced by another harness with the official scorer, and say per item what
//! was extracted and why it was marked wrong (added to the CLI by
//! [`Benchmark::tools`](crate::envs::Benchmark::tools)).

use crate::exhibit::csv_field;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _, Parser};
use serde::Deserialize;
use serde_json::json;

use super::aggregate::harmonic_mean;
use super::dataset::data_path;
use super::dataset::{DatasetError, Item, TASKS, load_task, mini_indices};
use super::scorer::{ScoreDetail, score};
use crate::envs::tool::{ToolContext, ToolError, ToolOutput};

/// BBEH tools: rescore responses produced elsewhere.
#[derive(Debug, Parser)]
#[command(name = "bbeh")]
enum BbehTool {
    /// Score a JSONL file of `{task, index, response[, subset]}` lines.
    #[command(after_help = "Example:\n  evalgrid bbeh score responses.jsonl --out rescored/")]
    Score {
        /// Responses, one JSON object per line.
        responses: PathBuf,
        /// Output folder for items.csv, per_task.csv and summary.json.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Why `bbeh score` stopped. Errors about one line carry its `file:line` as the message
/// and the parse error as their source.
#[derive(Debug, thiserror::Error)]
enum ScoreError {
    /// The responses file cannot be read.
    #[error(transparent)]
    Read(std::io::Error),
    /// A line is not a `{task, index, response[, subset]}` object.
    #[error("{at}")]
    Line { at: String, source: serde_json::Error },
    /// A line names a task BBEH does not have.
    #[error("{at}: unknown task `{task}`")]
    UnknownTask { at: String, task: String },
    /// A line's index is past the task's items.
    #[error("{at}: task `{task}` has no item {index}")]
    NoItem { at: String, task: &'static str, index: usize },
    /// A line claims BBEH Mini for an item Mini does not have.
    #[error("{at}: item {index} of `{task}` is not in BBEH Mini")]
    NotMini { at: String, task: &'static str, index: usize },
    /// The dataset is not installed. The hint follows the cause, so the cause is part of
    /// the message rather than a source.
    #[error("{error} (run `evalgrid datasets fetch bbeh` first)")]
    Dataset { error: DatasetError },
    /// An output file cannot be written.
    #[error(transparent)]
    Write(std::io::Error),
    /// The summary cannot be encoded.
    #[error(transparent)]
    Json(serde_json::Error),
}

impl From<ScoreError> for ToolError {
    fn from(e: ScoreError) -> Self {
        match e {
            ScoreError::Write(_) | ScoreError::Json(_) => Self::Failed(Box::new(e)),
            // A dataset not installed is invalid input, as for `evalgrid run` (exit 2).
            ScoreError::Dataset { .. }
            | ScoreError::Read(_)
            | ScoreError::Line { .. }
            | ScoreError::UnknownTask { .. }
            | ScoreError::NoItem { .. }
            | ScoreError::NotMini { .. } => Self::Invalid(Box::new(e)),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line {
    task: String,
    index: usize,
    response: String,
    #[serde(default)]
    subset: Option<String>,
}

/// The `bbeh` command and its tools.
pub(super) fn command() -> clap::Command {
    BbehTool::command()
}

/// Runs `bbeh score`: reads the responses, scores each against the installed dataset and
/// writes `items.csv`, `per_task.csv` and `summary.json` under `--out`.
pub(super) fn run(matches: &ArgMatches, ctx: &ToolContext<'_>) -> Result<ToolOutput, ToolError> {
    let BbehTool::Score { responses, out } = BbehTool::from_arg_matches(matches).map_err(ToolError::arguments)?;
    let rows = score_file(&responses, ctx.data_dir)?;
    write_outputs(&out, &rows)?;
    let correct = rows.iter().filter(|r| r.2.correct).count();
    Ok(ToolOutput::ok(vec![format!("scored {} responses: {correct} correct; wrote {}/items.csv, per_task.csv, summary.json", rows.len(), out.display())]))
}

fn score_file(responses: &Path, data_dir: &Path) -> Result<Vec<(String, usize, ScoreDetail)>, ScoreError> {
    let text = fs_err::read_to_string(responses).map_err(ScoreError::Read)?;
    let dir = data_path(data_dir);
    let mut items: BTreeMap<String, Vec<Item>> = BTreeMap::new();
    let mut rows = Vec::new();
    for (n, raw) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let at = || format!("{}:{}", responses.display(), n + 1);
        let line: Line = serde_json::from_str(raw).map_err(|source| ScoreError::Line { at: at(), source })?;
        let task = TASKS
            .iter()
            .find(|t| **t == line.task || t.strip_prefix("bbeh_") == Some(line.task.as_str()))
            .ok_or_else(|| ScoreError::UnknownTask { at: at(), task: line.task.clone() })?;
        if !items.contains_key(*task) {
            let loaded = load_task(&dir, task).map_err(|error| ScoreError::Dataset { error })?;
            items.insert((*task).to_owned(), loaded);
        }
        let task_items = &items[*task];
        let item = task_items.get(line.index).ok_or_else(|| ScoreError::NoItem { at: at(), task, index: line.index })?;
        if line.subset.as_deref() == Some("mini") && !mini_indices(task, task_items.len()).contains(&line.index) {
            return Err(ScoreError::NotMini { at: at(), task, index: line.index });
        }
        let detail = score(&line.response, &item.target);
        rows.push(((*task).to_owned(), line.index, detail));
    }
    Ok(rows)
}

fn write_outputs(out: &Path, rows: &[(String, usize, ScoreDetail)]) -> Result<(), ScoreError> {
    fs_err::create_dir_all(out).map_err(ScoreError::Write)?;
    let mut items_csv = String::from("task,index,extracted,correct,answer_found\n");
    let mut per_task: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (task, index, d) in rows {
        let _ = writeln!(items_csv, "{task},{index},{},{},{}", csv_field(&d.prediction_after_preprocess), d.correct, d.extraction_found_prefix);
        let e = per_task.entry(task).or_default();
        e.0 += 1;
        e.1 += usize::from(d.correct);
    }
    let mut per_task_csv = String::from("task,n,correct,accuracy\n");
    let mut accs = Vec::new();
    for (task, (n, c)) in &per_task {
        let acc = *c as f64 / *n as f64;
        accs.push(100.0 * acc);
        let _ = writeln!(per_task_csv, "{task},{n},{c},{acc}");
    }
    let n: usize = per_task.values().map(|v| v.0).sum();
    let correct: usize = per_task.values().map(|v| v.1).sum();
    let summary = json!({
        "n": n,
        "correct": correct,
        "micro": if n == 0 { serde_json::Value::Null } else { json!(correct as f64 / n as f64) },
        "harmonic_mean": if accs.is_empty() { serde_json::Value::Null } else { json!(harmonic_mean(&accs)) },
        "tasks": per_task.len(),
    });
    fs_err::write(out.join("items.csv"), items_csv).map_err(ScoreError::Write)?;
    fs_err::write(out.join("per_task.csv"), per_task_csv).map_err(ScoreError::Write)?;
    fs_err::write(out.join("summary.json"), serde_json::to_string_pretty(&summary).map_err(ScoreError::Json)? + "\n").map_err(ScoreError::Write)?;
    Ok(())
}
