//! Per-unit results (`items.csv` / `items.parquet`): one row per scored unit of every
//! benchmark, so a user can load which item each model got right, and every clustered
//! standard error and paired difference can be recomputed from the file.

use polars::prelude::*;

use super::table::MetricsError;
use crate::envs::metric::UnitMetric;

/// One scored unit.
#[derive(Clone, Debug, PartialEq)]
pub struct UnitRow {
    /// Position of the model in the pipeline.
    pub model_index: u32,
    /// Position of the task in the pipeline (the cluster).
    pub task_index: u32,
    /// Seed.
    pub seed: u64,
    /// Item number inside the task (0 when the unit is the cell).
    pub item: u64,
    /// One value per unit metric of the suite.
    pub values: Vec<Option<f64>>,
}

/// The units of one suite, with the names needed to write them out.
#[derive(Clone, Debug, Default)]
pub struct SuiteUnits {
    /// Suite name.
    pub suite: String,
    /// The benchmark's per-unit metrics (columns of `values`).
    pub metrics: Vec<UnitMetric>,
    /// Model ids by pipeline position.
    pub models: Vec<String>,
    /// Task ids by pipeline position.
    pub tasks: Vec<String>,
    /// Units in plan order.
    pub rows: Vec<UnitRow>,
}

impl SuiteUnits {
    /// Position of the unit metric `name`.
    #[must_use]
    pub fn metric(&self, name: &str) -> Option<usize> {
        self.metrics.iter().position(|m| m.name == name)
    }
}

/// The `items` frame: `suite, model, task, seed, item`, then one column per unit metric
/// of any suite (empty where a suite's benchmark has no such metric).
pub fn items_frame(suites: &[SuiteUnits]) -> Result<DataFrame, MetricsError> {
    let mut names: Vec<&str> = Vec::new();
    for s in suites {
        for m in &s.metrics {
            if !names.contains(&m.name.as_str()) {
                names.push(&m.name);
            }
        }
    }
    let all = || suites.iter().flat_map(|s| s.rows.iter().map(move |r| (s, r)));
    let mut cols = vec![
        Column::new("suite".into(), all().map(|(s, _)| s.suite.as_str()).collect::<Vec<_>>()),
        Column::new("model".into(), all().map(|(s, r)| s.models[r.model_index as usize].as_str()).collect::<Vec<_>>()),
        Column::new("task".into(), all().map(|(s, r)| s.tasks[r.task_index as usize].as_str()).collect::<Vec<_>>()),
        Column::new("seed".into(), all().map(|(_, r)| r.seed).collect::<Vec<_>>()),
        Column::new("item".into(), all().map(|(_, r)| r.item).collect::<Vec<_>>()),
    ];
    for name in names {
        let values: Vec<Option<f64>> = all().map(|(s, r)| s.metric(name).and_then(|i| r.values[i])).collect();
        cols.push(Column::new(name.into(), values));
    }
    Ok(DataFrame::new_infer_height(cols)?)
}

/// `items.csv` and `items.parquet` bytes.
pub fn items_files(suites: &[SuiteUnits]) -> Result<(Vec<u8>, Vec<u8>), MetricsError> {
    let mut frame = items_frame(suites)?;
    let mut csv = Vec::new();
    CsvWriter::new(&mut csv).finish(&mut frame)?;
    let mut parquet = Vec::new();
    ParquetWriter::new(&mut parquet).finish(&mut frame)?;
    Ok((csv, parquet))
}
