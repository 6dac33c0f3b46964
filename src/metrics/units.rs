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
    /// Item number inside the task (0 when the unit is the cell): pairs units across models.
    pub item: u64,
    /// The item's own id where the dataset names one, shown as `item` instead of the number.
    pub id: Option<String>,
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
        item_column(suites),
    ];
    for name in names {
        let values: Vec<Option<f64>> = all().map(|(s, r)| s.metric(name).and_then(|i| r.values[i])).collect();
        cols.push(Column::new(name.into(), values));
    }
    Ok(DataFrame::new_infer_height(cols)?)
}

/// The `item` column: item numbers, or text when some dataset names its items (`qa`'s `id`),
/// where items without an id show their number.
fn item_column(suites: &[SuiteUnits]) -> Column {
    let rows = || suites.iter().flat_map(|s| &s.rows);
    if rows().all(|r| r.id.is_none()) {
        return Column::new("item".into(), rows().map(|r| r.item).collect::<Vec<_>>());
    }
    Column::new("item".into(), rows().map(|r| r.id.clone().unwrap_or_else(|| r.item.to_string())).collect::<Vec<_>>())
}

/// `items.csv` and `items.parquet` bytes. The CSV is written directly (one pass, names
/// escaped once per suite, model and task): through polars it was most of the metrics
/// step's time on a large grid; the Parquet file keeps polars' encoding.
pub fn items_files(suites: &[SuiteUnits]) -> Result<(Vec<u8>, Vec<u8>), MetricsError> {
    let mut frame = items_frame(suites)?;
    let csv = items_csv(suites);
    let mut parquet = Vec::new();
    ParquetWriter::new(&mut parquet).finish(&mut frame)?;
    Ok((csv, parquet))
}

/// The `items.csv` text: the columns of [`items_frame`], numbers as polars writes them
/// (`1.0`, `-4.0`, `0.25`), an empty field for no value, text cells that a spreadsheet
/// would take for a formula quoted with a `'` in front.
fn items_csv(suites: &[SuiteUnits]) -> Vec<u8> {
    use std::io::Write as _;
    let mut names: Vec<&str> = Vec::new();
    for s in suites {
        for m in &s.metrics {
            if !names.contains(&m.name.as_str()) {
                names.push(&m.name);
            }
        }
    }
    let rows: usize = suites.iter().map(|s| s.rows.len()).sum();
    let mut out = Vec::with_capacity(64 + rows * (24 + 8 * names.len()));
    let mut header = vec!["suite", "model", "task", "seed", "item"];
    header.extend(&names);
    out.extend_from_slice(header.iter().map(|h| crate::exhibit::csv_text(h)).collect::<Vec<_>>().join(",").as_bytes());
    out.push(b'\n');
    for s in suites {
        let suite = crate::exhibit::csv_text(&s.suite);
        let models: Vec<String> = s.models.iter().map(|m| crate::exhibit::csv_text(m)).collect();
        let tasks: Vec<String> = s.tasks.iter().map(|t| crate::exhibit::csv_text(t)).collect();
        let columns: Vec<Option<usize>> = names.iter().map(|n| s.metric(n)).collect();
        for r in &s.rows {
            let _ = write!(out, "{suite},{},{},{},", models[r.model_index as usize], tasks[r.task_index as usize], r.seed);
            match &r.id {
                // An empty text is quoted, as polars writes it, so it reads back as text, not as no value.
                Some(id) if id.is_empty() => out.extend_from_slice(b"\"\""),
                // Text cells are guarded against spreadsheet formulas (`-1` as an id is `"'-1"`);
                // `evalgrid diff` reads the id back as written.
                Some(id) => out.extend_from_slice(crate::exhibit::csv_text(id).as_bytes()),
                None => {
                    let _ = write!(out, "{}", r.item);
                }
            }
            for c in &columns {
                out.push(b',');
                if let Some(x) = c.and_then(|i| r.values[i]) {
                    let _ = write!(out, "{x:?}");
                }
            }
            out.push(b'\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written `items.csv` is byte for byte what polars' CSV writer made of the
    /// same frame (the file's format before the writer was replaced): quoting, missing
    /// values, integer-valued and fractional floats, two suites with different metrics.
    #[test]
    fn items_csv_is_what_polars_writes() {
        let row = |model_index, task_index, seed, item, values| UnitRow { model_index, task_index, seed, item, id: None, values };
        let suites = vec![
            SuiteUnits {
                suite: "bbeh".into(),
                metrics: vec![UnitMetric::new("correct", "correct", "accuracy", true)],
                models: vec!["m,1".into(), "m\"2".into()],
                tasks: vec!["t1".into()],
                rows: vec![row(0, 0, 0, 3, vec![Some(1.0)]), row(1, 0, 2, 4, vec![Some(0.0)]), row(1, 0, 2, 5, vec![None])],
            },
            SuiteUnits {
                suite: "eleusis".into(),
                metrics: vec![UnitMetric::new("score", "score", "mean_score", false), UnitMetric::new("success", "success", "success_rate", true)],
                models: vec!["oracle".into()],
                tasks: vec!["only aces".into()],
                rows: vec![
                    row(0, 0, 1, 0, vec![Some(-4.0), Some(1.0)]),
                    row(0, 0, 1, 0, vec![Some(0.125), None]),
                    row(0, 0, 1, 0, vec![Some(1e-7), Some(0.0)]),
                ],
            },
        ];
        assert_same_as_polars(&suites);
        let mut qa = suites.clone();
        qa.push(SuiteUnits {
            suite: "qa".into(),
            metrics: vec![UnitMetric::new("match", "match", "match", true)],
            models: vec!["oracle".into()],
            tasks: vec!["arith".into()],
            rows: ["q-1", "a,b", "say \"hi\"", "007", ""]
                .iter()
                .enumerate()
                .map(|(i, id)| UnitRow { model_index: 0, task_index: 0, seed: 0, item: i as u64, id: Some((*id).to_owned()), values: vec![Some(1.0)] })
                .collect(),
        });
        assert_same_as_polars(&qa);
        assert!(String::from_utf8(items_csv(&qa)).unwrap().contains("qa,oracle,arith,0,007,"), "a text id is written as it is, leading zeros kept");
    }

    fn assert_same_as_polars(suites: &[SuiteUnits]) {
        let mut frame = items_frame(suites).unwrap();
        let mut polars = Vec::new();
        CsvWriter::new(&mut polars).finish(&mut frame).unwrap();
        assert_eq!(String::from_utf8(items_csv(suites)).unwrap(), String::from_utf8(polars).unwrap());
    }
}
