//! The rows every export writes: per task × model, each scored unit (the rows of
//! `items.csv`, read through the same code) with its prompt and answer.

use std::collections::HashMap;
use std::path::Path;
use std::time::SystemTime;

use rayon::prelude::*;
use serde_json::Value;

use super::provenance::CellKeys;
use crate::cache::{CacheError, Store};
use crate::envs::metric::UnitMetric;
use crate::envs::{Exchange, registry};
use crate::metrics::UnitRow;
use crate::plan::{Cell, Plan};
use crate::report::build::{suite_units, suites_of};
use crate::spec::{ModelConfig, Pipeline, TaskInstance};

/// One scored unit: where it came from, its values as in `items.csv`, and its exchange.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Seed of its cell.
    pub seed: u64,
    /// 1-based position of the seed in the pipeline's seeds (Inspect's epoch).
    pub epoch: usize,
    /// The cell's id.
    pub cell: String,
    /// Item number (pairs units across models).
    pub item: u64,
    /// The dataset's id for the item, which `items.csv` shows instead of the number.
    pub id: Option<String>,
    /// `(unit metric, value)` for every metric with a value, in the suite's order.
    pub scores: Vec<(String, f64)>,
    /// Prompt and answer; for a benchmark without per-unit exchanges, the cell's transcript.
    pub exchange: Exchange,
}

impl Sample {
    /// The item as `items.csv` names it: its dataset id (text), else its number.
    #[must_use]
    pub fn label(&self) -> serde_json::Value {
        self.id.clone().map_or_else(|| self.item.into(), Into::into)
    }
}

/// Every scored unit of one task × model.
#[derive(Debug)]
pub struct Group<'a> {
    /// The task.
    pub task: &'a TaskInstance,
    /// The model.
    pub model: &'a ModelConfig,
    /// The suite's unit metrics (names of `items.csv` columns).
    pub metrics: Vec<UnitMetric>,
    /// Cells planned for this task × model.
    pub planned: usize,
    /// Step keys of the scored cells, in plan order.
    pub cells: Vec<CellKeys>,
    /// Units in plan order, then in the order the benchmark lists them.
    pub samples: Vec<Sample>,
    /// When the earliest and the latest of its cache entries were written.
    pub span: (SystemTime, SystemTime),
}

/// The task × model groups of `plan` that have at least one scored cell, in plan order.
///
/// # Errors
/// A cache read that failed.
pub fn groups<'a>(pipeline: &'a Pipeline, plan: &Plan, store: &Store, data_dir: &Path) -> Result<Vec<Group<'a>>, CacheError> {
    let read: Vec<Option<(Value, Value)>> = plan.cells.par_iter().map(|c| read_cell(store, c)).collect::<Result<_, _>>()?;
    let scored: Vec<(&Cell, Value)> = plan.cells.iter().zip(&read).filter_map(|(c, r)| r.as_ref().map(|(_, s)| (c, s.clone()))).collect();
    let suites = suites_of(pipeline);
    let units = suite_units(pipeline, &suites, &scored);
    let mut rows_of: HashMap<(usize, usize, u64), Vec<&UnitRow>> = HashMap::new();
    for row in units.iter().flat_map(|u| &u.rows) {
        rows_of.entry((row.model_index as usize, row.task_index as usize, row.seed)).or_default().push(row);
    }
    let mut out: Vec<Group<'a>> = Vec::new();
    let mut index: HashMap<(usize, usize), usize> = HashMap::new();
    for (cell, record) in plan.cells.iter().zip(&read) {
        let at = *index.entry((cell.task, cell.model)).or_insert_with(|| {
            let task = &pipeline.tasks[cell.task];
            let metrics = suites.iter().position(|(s, _)| *s == task.suite).map(|i| units[i].metrics.clone()).unwrap_or_default();
            let epoch = SystemTime::UNIX_EPOCH;
            out.push(Group { task, model: &pipeline.models[cell.model], metrics, planned: 0, cells: Vec::new(), samples: Vec::new(), span: (epoch, epoch) });
            out.len() - 1
        });
        out[at].planned += 1;
        if let Some((episode, _)) = record {
            let rows = rows_of.get(&(cell.model, cell.task, cell.seed)).map_or(&[][..], Vec::as_slice);
            add_cell(&mut out[at], (pipeline, store, data_dir), cell, episode, rows);
        }
    }
    out.retain(|g| !g.cells.is_empty());
    Ok(out)
}

/// Adds a scored cell to its group: its keys, its units (`rows`, as in `items.csv`) each
/// with its exchange, and the times of its entries.
fn add_cell(group: &mut Group<'_>, (pipeline, store, data_dir): (&Pipeline, &Store, &Path), cell: &Cell, episode: &Value, rows: &[&UnitRow]) {
    group.cells.push(CellKeys::of(cell));
    let exchanges = registry::get(&group.task.benchmark).map(|b| b.exchanges(data_dir, group.task, episode, cell.seed)).unwrap_or_default();
    let exchanges: HashMap<u64, &Exchange> = exchanges.iter().map(|e| (e.item, e)).collect();
    let epoch = pipeline.seeds.iter().position(|s| *s == cell.seed).map_or(1, |i| i + 1);
    for row in rows {
        let scores = group.metrics.iter().zip(&row.values).filter_map(|(m, v)| v.map(|v| (m.name.clone(), v))).collect();
        let exchange = exchanges.get(&row.item).map_or_else(|| transcript_exchange(group.task, cell, episode, row.item), |e| (*e).clone());
        group.samples.push(Sample { seed: cell.seed, epoch, cell: cell.id.clone(), item: row.item, id: row.id.clone(), scores, exchange });
    }
    let (first, last) = written(store, cell);
    group.span = if group.cells.len() == 1 { (first, last) } else { (group.span.0.min(first), group.span.1.max(last)) };
}

/// A cell's episode and score records, when both are cached.
fn read_cell(store: &Store, cell: &Cell) -> Result<Option<(Value, Value)>, CacheError> {
    let Some(score) = store.get(cell.score_key)? else { return Ok(None) };
    Ok(store.get(cell.episode_key)?.map(|e| (e.output, score.output)))
}

/// When a cell's episode and score entries were written (their files' times; the epoch
/// where the local copy has none).
fn written(store: &Store, cell: &Cell) -> (SystemTime, SystemTime) {
    let time = |key| std::fs::metadata(store.entry_path(key)).and_then(|m| m.modified()).unwrap_or(SystemTime::UNIX_EPOCH);
    let (a, b) = (time(cell.episode_key), time(cell.score_key));
    (a.min(b), a.max(b))
}

/// The unit of a benchmark that keeps no per-unit prompt (a game, a tool session): the
/// cell named as the input, its transcript as the answer.
fn transcript_exchange(task: &TaskInstance, cell: &Cell, episode: &Value, item: u64) -> Exchange {
    let input = format!("{} task `{}`, seed {}", task.benchmark, task.task, cell.seed);
    Exchange {
        item,
        prompt: vec![crate::providers::Message::user(input.clone())],
        input,
        answer: registry::transcript(&task.benchmark, episode),
        ..Exchange::default()
    }
}

/// Sum of a metric's values over samples, with the count that had one.
#[must_use]
pub fn mean(samples: &[Sample], metric: &str) -> Option<(f64, usize)> {
    let values: Vec<f64> = samples.iter().filter_map(|s| s.scores.iter().find(|(m, _)| m == metric).map(|(_, v)| *v)).collect();
    #[expect(clippy::cast_precision_loss, reason = "sample counts are far below 2^52")]
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    (!values.is_empty()).then_some((mean, values.len()))
}
