//! Grid expansion: models × tasks × seeds → cells, each a chain of steps.
//!
//! Only keys are kept per cell; components are rebuilt on demand so a
//! 100,000-cell plan stays small in memory.

use serde_json::{Map, Value, json};

use super::key::{StepKey, StepKind, key_components};
use crate::spec::{CellFilter, Pipeline};

/// Version of the metrics stage code (bump when its output changes).
pub const METRICS_VERSION: u32 = 1;
/// Version of the report rendering code (bump when its output changes).
pub const REPORT_VERSION: u32 = 1;

/// One model × task × seed combination and the keys of its steps.
#[derive(Clone, Debug)]
pub struct Cell {
    /// `model/benchmark/task/seed`, what users type to name a cell.
    pub id: String,
    /// Index into [`Pipeline::models`].
    pub model: usize,
    /// Index into [`Pipeline::tasks`].
    pub task: usize,
    /// Seed (for Eleusis: the repetition index of the round).
    pub seed: u64,
    /// Key of the episode step.
    pub episode_key: StepKey,
    /// Key of the score step (depends on the episode key).
    pub score_key: StepKey,
}

/// The expanded grid plus the two pipeline-level steps.
#[derive(Clone, Debug)]
pub struct Plan {
    /// Cells in grid order (model, task, seed).
    pub cells: Vec<Cell>,
    /// Whether a `--filter` narrowed the grid (no report is built then).
    pub filtered: bool,
    /// Key of the metrics step over all cells.
    pub metrics_key: StepKey,
    /// Key of the report step.
    pub report_key: StepKey,
}

/// Expands `pipeline` into a plan; `filter` (from `--filter`) narrows it.
#[must_use]
pub fn plan(pipeline: &Pipeline, filter: Option<&CellFilter>) -> Plan {
    let mut cells = Vec::new();
    for (mi, model) in pipeline.models.iter().enumerate() {
        let model_value = model.key_value();
        for (ti, task) in pipeline.tasks.iter().enumerate() {
            let qualified = task.qualified();
            for &seed in &pipeline.seeds {
                let kept = (pipeline.include.is_empty()
                    || pipeline.include.iter().any(|f| f.matches(&model.id, &qualified, seed)))
                    && !pipeline.exclude.iter().any(|f| f.matches(&model.id, &qualified, seed))
                    && filter.is_none_or(|f| f.matches(&model.id, &qualified, seed));
                if !kept {
                    continue;
                }
                let episode = episode_components_with(&model_value, pipeline, ti, seed);
                let episode_key = StepKey::compute(&episode);
                let score_key = StepKey::compute(&score_components(pipeline, ti, episode_key));
                cells.push(Cell {
                    id: format!("{}/{qualified}/{seed}", model.id),
                    model: mi,
                    task: ti,
                    seed,
                    episode_key,
                    score_key,
                });
            }
        }
    }
    let metrics_key = StepKey::compute(&metrics_components(pipeline, &cells));
    let report_key = StepKey::compute(&report_components(pipeline, metrics_key));
    Plan { cells, filtered: filter.is_some(), metrics_key, report_key }
}

/// Key components of a cell's episode step: the model as it answers, the
/// task and its content, the seed, and the benchmark code version.
#[must_use]
pub fn episode_components(pipeline: &Pipeline, cell: &Cell) -> Value {
    episode_components_with(&pipeline.models[cell.model].key_value(), pipeline, cell.task, cell.seed)
}

fn episode_components_with(model: &Value, pipeline: &Pipeline, task: usize, seed: u64) -> Value {
    let t = &pipeline.tasks[task];
    let mut fields = Map::new();
    fields.insert("model".into(), model.clone());
    fields.insert(
        "task".into(),
        json!({"benchmark": t.benchmark, "id": t.task, "content": t.content_hash, "params": t.params}),
    );
    fields.insert("seed".into(), Value::from(seed));
    key_components(StepKind::Episode, &t.benchmark, t.episode_version, fields)
}

/// Key components of a cell's score step: scorer version and episode key.
#[must_use]
pub fn score_components(pipeline: &Pipeline, task: usize, episode_key: StepKey) -> Value {
    let t = &pipeline.tasks[task];
    let mut fields = Map::new();
    fields.insert("inputs".into(), json!({"episode": episode_key}));
    key_components(StepKind::Score, &format!("{}.score", t.benchmark), t.score_version, fields)
}

/// Key components of the metrics step: its config and a digest of every
/// (cell id, score key) pair, so any cell change or relabel re-aggregates.
#[must_use]
pub fn metrics_components(pipeline: &Pipeline, cells: &[Cell]) -> Value {
    let mut digest = blake3::Hasher::new();
    for c in cells {
        digest.update(c.id.as_bytes());
        digest.update(b"\0");
        digest.update(c.score_key.to_hex().as_bytes());
        digest.update(b"\n");
    }
    let mut fields = Map::new();
    fields.insert("config".into(), json!(pipeline.metrics));
    fields.insert("inputs".into(), json!({"cells": cells.len(), "digest": digest.finalize().to_hex().to_string()}));
    key_components(StepKind::Metrics, "metrics", METRICS_VERSION, fields)
}

/// Key components of the report step: presentation config and metrics key.
#[must_use]
pub fn report_components(pipeline: &Pipeline, metrics_key: StepKey) -> Value {
    let mut fields = Map::new();
    fields.insert("config".into(), json!(pipeline.report));
    fields.insert("pipeline".into(), Value::from(pipeline.name.clone()));
    fields.insert("inputs".into(), json!({"metrics": metrics_key}));
    key_components(StepKind::Report, "report", REPORT_VERSION, fields)
}
