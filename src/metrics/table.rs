//! Per-benchmark aggregate tables computed with polars' lazy API.
//!
//! Input is one row per finished cell (its score record flattened to numeric
//! fields); output is a model × task table and a per-model table, each with
//! `n` and the mean of every selected metric, in pipeline order.

use std::collections::BTreeMap;

use polars::prelude::*;
use serde::{Deserialize, Serialize};

use crate::envs::metric::{Agg, MetricDef};

/// One finished cell's numbers.
#[derive(Clone, Debug)]
pub struct CellRow {
    /// Model id.
    pub model: String,
    /// Position of the model in the pipeline (for ordering).
    pub model_index: u32,
    /// Benchmark name.
    pub benchmark: String,
    /// Task id.
    pub task: String,
    /// Position of the task in the pipeline (for ordering).
    pub task_index: u32,
    /// Seed.
    pub seed: u64,
    /// Numeric score fields by name (booleans as 0/1).
    pub fields: BTreeMap<String, f64>,
}

/// One row of an aggregate table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TableRow {
    /// Model id.
    pub model: String,
    /// Task id, or `None` in the per-model table.
    pub task: Option<String>,
    /// Number of cells aggregated.
    pub n: u64,
    /// Metric values by column name, in column order (all empty when incomplete).
    pub values: Vec<Option<f64>>,
    /// Cells planned for this row; more than `n` means the row is incomplete.
    #[serde(default)]
    pub planned: u64,
}

impl TableRow {
    /// `incomplete (k of n)` when some planned cells are not scored: no aggregate of a
    /// subset is ever shown as the model's number.
    #[must_use]
    pub fn incomplete(&self) -> Option<String> {
        (self.planned > self.n).then(|| format!("incomplete ({} of {})", self.n, self.planned))
    }
}

/// How many cells the plan holds per model and per model × task.
#[derive(Clone, Debug, Default)]
pub struct Planned {
    models: Vec<(u32, String, u64)>,
    tasks: BTreeMap<(String, String), u64>,
    order: Vec<(String, String)>,
}

impl Planned {
    /// Counts one planned cell.
    pub fn add(&mut self, model_index: u32, model: &str, task: &str) {
        match self.models.iter_mut().find(|m| m.1 == model) {
            Some(m) => m.2 += 1,
            None => self.models.push((model_index, model.to_owned(), 1)),
        }
        let key = (model.to_owned(), task.to_owned());
        if !self.tasks.contains_key(&key) {
            self.order.push(key.clone());
        }
        *self.tasks.entry(key).or_default() += 1;
    }
}

/// Aggregates of one benchmark.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BenchmarkTables {
    /// Benchmark name.
    pub benchmark: String,
    /// Metric columns, in order.
    pub columns: Vec<MetricColumn>,
    /// Per model × task.
    pub by_task: Vec<TableRow>,
    /// Per model.
    pub by_model: Vec<TableRow>,
}

/// Failure inside polars (should not happen on well-formed rows).
#[derive(Debug, thiserror::Error)]
#[error("metrics computation failed")]
pub struct MetricsError(#[from] PolarsError);

/// Builds the cells DataFrame for one benchmark's rows.
pub fn cells_frame(rows: &[&CellRow], columns: &[MetricColumn]) -> Result<DataFrame, MetricsError> {
    let mut cols = vec![
        Column::new("model".into(), rows.iter().map(|r| r.model.as_str()).collect::<Vec<_>>()),
        Column::new("model_index".into(), rows.iter().map(|r| r.model_index).collect::<Vec<_>>()),
        Column::new("benchmark".into(), rows.iter().map(|r| r.benchmark.as_str()).collect::<Vec<_>>()),
        Column::new("task".into(), rows.iter().map(|r| r.task.as_str()).collect::<Vec<_>>()),
        Column::new("task_index".into(), rows.iter().map(|r| r.task_index).collect::<Vec<_>>()),
        Column::new("seed".into(), rows.iter().map(|r| r.seed).collect::<Vec<_>>()),
    ];
    let mut fields: Vec<&str> = columns.iter().flat_map(MetricDef::fields).collect();
    fields.sort_unstable();
    fields.dedup();
    for field in fields {
        let values: Vec<Option<f64>> = rows.iter().map(|r| r.fields.get(field).copied()).collect();
        cols.push(Column::new(field.into(), values));
    }
    Ok(DataFrame::new_infer_height(cols)?)
}

/// A table column: its name and aggregation (see [`Agg`]).
pub type MetricColumn = MetricDef;

/// Polars expressions for one column: a mean, or the two sums a ratio-like
/// column is derived from (named `__num_<col>` / `__den_<col>`).
fn column_exprs(c: &MetricColumn) -> Vec<Expr> {
    match &c.agg {
        Agg::Mean(f) => vec![col(f.as_str()).mean().alias(c.name.as_str())],
        Agg::MeanCiLow(f) | Agg::MeanCiHigh(f) => vec![
            col(f.as_str()).mean().alias(format!("__mean_{}", c.name).as_str()),
            col(f.as_str()).std(1).alias(format!("__std_{}", c.name).as_str()),
            col(f.as_str()).count().alias(format!("__n_{}", c.name).as_str()),
        ],
        Agg::Ratio(n, d) | Agg::HarmonicPercent(n, d) | Agg::WilsonLow(n, d) | Agg::WilsonHigh(n, d) => {
            vec![col(n.as_str()).sum().alias(format!("__num_{}", c.name).as_str()), col(d.as_str()).sum().alias(format!("__den_{}", c.name).as_str())]
        }
        // Computed from the units afterwards (see `pooled`).
        Agg::ClusteredSe(_) | Agg::HarmonicCiLow(_) | Agg::HarmonicCiHigh(_) => Vec::new(),
    }
}

/// Computes both tables for one benchmark.
pub fn aggregate(benchmark: &str, rows: &[&CellRow], columns: &[MetricColumn], planned: &Planned) -> Result<BenchmarkTables, MetricsError> {
    let frame = cells_frame(rows, columns)?;
    let aggs = || {
        let mut a = vec![len().alias("n")];
        a.extend(columns.iter().flat_map(column_exprs));
        a
    };
    let by_task = frame
        .clone()
        .lazy()
        .group_by([col("model_index"), col("model"), col("task_index"), col("task")])
        .agg(aggs())
        .sort(["model_index", "task_index"], SortMultipleOptions::default())
        .collect()?;
    let by_model = frame.lazy().group_by([col("model_index"), col("model")]).agg(aggs()).sort(["model_index"], SortMultipleOptions::default()).collect()?;
    let mut by_task_rows = rows_of(&by_task, columns, true)?;
    let mut by_model_rows = rows_of(&by_model, columns, false)?;
    harmonic_over_tasks(&mut by_task_rows, &mut by_model_rows, columns);
    withhold_incomplete(&mut by_task_rows, &mut by_model_rows, planned, columns.len());
    Ok(BenchmarkTables { benchmark: benchmark.to_owned(), columns: columns.to_vec(), by_task: by_task_rows, by_model: by_model_rows })
}

/// Empties every row with planned cells unscored (issue 12: a harmonic mean over the
/// tasks that happened to finish ranks a worse model higher) and adds a row for a model
/// with no scored cell at all.
fn withhold_incomplete(by_task: &mut Vec<TableRow>, by_model: &mut Vec<TableRow>, planned: &Planned, width: usize) {
    for r in by_task.iter_mut() {
        let task = r.task.clone().unwrap_or_default();
        r.planned = planned.tasks.get(&(r.model.clone(), task)).copied().unwrap_or(r.n);
    }
    // A planned model × task with no scored cell still gets its row, in plan order.
    let mut tasks: Vec<TableRow> = Vec::new();
    for (model, task) in &planned.order {
        match by_task.iter().position(|r| &r.model == model && r.task.as_deref() == Some(task.as_str())) {
            Some(i) => tasks.push(by_task[i].clone()),
            None => tasks.push(TableRow {
                model: model.clone(),
                task: Some(task.clone()),
                n: 0,
                values: vec![None; width],
                planned: planned.tasks[&(model.clone(), task.clone())],
            }),
        }
    }
    for r in by_task.iter().filter(|r| !planned.order.iter().any(|(m, t)| *m == r.model && r.task.as_deref() == Some(t.as_str()))) {
        tasks.push(r.clone());
    }
    *by_task = tasks;
    let mut out: Vec<TableRow> = Vec::new();
    for (_, model, count) in &planned.models {
        let mut row = match by_model.iter().position(|r| &r.model == model) {
            Some(i) => by_model[i].clone(),
            None => TableRow { model: model.clone(), task: None, n: 0, values: vec![None; width], planned: 0 },
        };
        row.planned = *count;
        out.push(row);
    }
    for r in by_model.iter().filter(|r| !planned.models.iter().any(|m| m.1 == r.model)) {
        out.push(r.clone());
    }
    *by_model = out;
    for r in by_task.iter_mut().chain(by_model.iter_mut()) {
        if r.incomplete().is_some() {
            r.values.iter_mut().for_each(|v| *v = None);
        }
    }
}

/// Percentage points BBEH adds to each task accuracy before its harmonic mean (the paper's
/// adjustment, `envs::bbeh::HM_OFFSET`).
const HARMONIC_OFFSET: f64 = 1.0;

/// Gives `HarmonicPercent` columns one meaning on every row: the adjusted harmonic mean
/// `T / Σ_t 1/(acc_t% + 1)` over the row's tasks. A model's pooled row takes it over its
/// tasks; a model × task row over its one task, which is that task's accuracy + 1 (so a
/// one-task grid shows the same number on both rows).
fn harmonic_over_tasks(by_task: &mut [TableRow], by_model: &mut [TableRow], columns: &[MetricColumn]) {
    for (i, c) in columns.iter().enumerate() {
        if !matches!(c.agg, Agg::HarmonicPercent(..)) {
            continue;
        }
        for m in by_model.iter_mut() {
            let accs: Vec<f64> = by_task.iter().filter(|t| t.model == m.model).filter_map(|t| t.values[i]).collect();
            let denominator: f64 = accs.iter().map(|a| 1.0 / (a + HARMONIC_OFFSET)).sum();
            m.values[i] = (!accs.is_empty()).then(|| accs.len() as f64 / denominator);
        }
        for t in by_task.iter_mut() {
            t.values[i] = t.values[i].map(|acc| acc + HARMONIC_OFFSET);
        }
    }
}

/// 95 % Wilson score interval of `k` successes in `n` trials.
fn wilson(k: f64, n: f64) -> Option<(f64, f64)> {
    if n <= 0.0 {
        return None;
    }
    let z = 1.959_963_984_540_054_f64;
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

type ValueAt = Box<dyn Fn(usize) -> Option<f64>>;

fn rows_of(df: &DataFrame, columns: &[MetricColumn], with_task: bool) -> Result<Vec<TableRow>, MetricsError> {
    let model = df.column("model")?.str()?;
    let n = df.column("n")?.cast(&DataType::UInt64)?;
    let n = n.u64()?;
    let task = if with_task { Some(df.column("task")?.str()?) } else { None };
    let float = |name: &str| -> Result<Float64Chunked, MetricsError> { Ok(df.column(name)?.cast(&DataType::Float64)?.f64()?.clone()) };
    let mut per_column: Vec<ValueAt> = Vec::new();
    for c in columns {
        if let Agg::Mean(_) = c.agg {
            let v = float(&c.name)?;
            per_column.push(Box::new(move |i| v.get(i)));
            continue;
        }
        if let Agg::MeanCiLow(_) | Agg::MeanCiHigh(_) = c.agg {
            let (mean, std, n) = (float(&format!("__mean_{}", c.name))?, float(&format!("__std_{}", c.name))?, float(&format!("__n_{}", c.name))?);
            let sign = if matches!(c.agg, Agg::MeanCiLow(_)) { -1.0 } else { 1.0 };
            per_column.push(Box::new(move |i| {
                let (m, s, n) = (mean.get(i)?, std.get(i)?, n.get(i)?);
                (n >= 2.0).then(|| m + sign * 1.959_963_984_540_054 * s / n.sqrt())
            }));
            continue;
        }
        if let Agg::ClusteredSe(_) | Agg::HarmonicCiLow(_) | Agg::HarmonicCiHigh(_) = c.agg {
            per_column.push(Box::new(|_| None));
            continue;
        }
        let num = float(&format!("__num_{}", c.name))?;
        let den = float(&format!("__den_{}", c.name))?;
        let agg = c.agg.clone();
        per_column.push(Box::new(move |i| {
            let (k, d) = (num.get(i)?, den.get(i)?);
            match agg {
                Agg::Ratio(..) => (d > 0.0).then(|| k / d),
                Agg::HarmonicPercent(..) => (d > 0.0).then(|| 100.0 * k / d),
                Agg::WilsonLow(..) => wilson(k, d).map(|w| w.0),
                Agg::WilsonHigh(..) => wilson(k, d).map(|w| w.1),
                _ => None,
            }
        }));
    }
    Ok((0..df.height())
        .map(|i| TableRow {
            model: model.get(i).unwrap_or_default().to_owned(),
            task: task.and_then(|t| t.get(i)).map(str::to_owned),
            n: n.get(i).unwrap_or(0),
            values: per_column.iter().map(|f| f(i)).collect(),
            planned: 0,
        })
        .collect())
}

/// Encodes the per-cell table as Parquet (for `cells.parquet`).
pub fn cells_parquet(rows: &[&CellRow], columns: &[MetricColumn]) -> Result<Vec<u8>, MetricsError> {
    let mut frame = cells_frame(rows, columns)?;
    frame = frame.drop_many(["model_index", "task_index"]);
    let mut buf = Vec::new();
    ParquetWriter::new(&mut buf).finish(&mut frame)?;
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::envs::metric::MetricDef;

    fn row(model: &str, mi: u32, task: &str, ti: u32, seed: u64, score: f64) -> CellRow {
        CellRow {
            model: model.into(),
            model_index: mi,
            benchmark: "b".into(),
            task: task.into(),
            task_index: ti,
            seed,
            fields: [("score".to_owned(), score), ("success".to_owned(), f64::from(u8::from(score > 0.0)))].into(),
        }
    }

    #[test]
    fn means_and_counts_in_pipeline_order() {
        let rows = [row("z", 0, "t2", 1, 0, 4.0), row("z", 0, "t1", 0, 0, 1.0), row("z", 0, "t1", 0, 1, 3.0), row("a", 1, "t1", 0, 0, 0.0)];
        let refs: Vec<&CellRow> = rows.iter().collect();
        let cols = vec![MetricDef::mean("mean_score", "score"), MetricDef::mean("success_rate", "success")];
        let t = aggregate("b", &refs, &cols, &Planned::default()).unwrap();
        type Row = (String, Option<String>, u64, Vec<Option<f64>>);
        let by_task: Vec<Row> = t.by_task.iter().map(|r| (r.model.clone(), r.task.clone(), r.n, r.values.clone())).collect();
        assert_eq!(
            by_task,
            vec![
                ("z".into(), Some("t1".into()), 2, vec![Some(2.0), Some(1.0)]),
                ("z".into(), Some("t2".into()), 1, vec![Some(4.0), Some(1.0)]),
                ("a".into(), Some("t1".into()), 1, vec![Some(0.0), Some(0.0)]),
            ]
        );
        assert_eq!(t.by_model[0].values, vec![Some(8.0 / 3.0), Some(1.0)]);
        assert_eq!(t.by_model[1].n, 1);
        let pq = cells_parquet(&refs, &cols).unwrap();
        assert_eq!(&pq[..4], b"PAR1");
        assert_eq!(pq, cells_parquet(&refs, &cols).unwrap(), "parquet output must be deterministic");
    }
}

#[cfg(test)]
mod ratio_tests {
    use super::*;

    fn row(task: &str, ti: u32, correct: f64, n: f64) -> CellRow {
        CellRow {
            model: "m".into(),
            model_index: 0,
            benchmark: "b".into(),
            task: task.into(),
            task_index: ti,
            seed: 0,
            fields: [("correct".to_owned(), correct), ("n".to_owned(), n)].into(),
        }
    }

    #[test]
    fn micro_harmonic_and_wilson() {
        let rows = [row("t1", 0, 50.0, 100.0), row("t2", 1, 0.0, 100.0), row("t2", 1, 0.0, 100.0)];
        let refs: Vec<&CellRow> = rows.iter().collect();
        let cols = vec![
            MetricDef { name: "accuracy".into(), agg: Agg::Ratio("correct".into(), "n".into()) },
            MetricDef { name: "hm".into(), agg: Agg::HarmonicPercent("correct".into(), "n".into()) },
            MetricDef { name: "lo".into(), agg: Agg::WilsonLow("correct".into(), "n".into()) },
        ];
        let t = aggregate("b", &refs, &cols, &Planned::default()).unwrap();
        assert_eq!(t.by_task[0].values[0], Some(0.5));
        assert_eq!(t.by_task[0].values[1], Some(51.0), "a task row holds the adjusted harmonic mean over its one task");
        // Micro: 50 / 300; harmonic: 2 / (1/51 + 1/1).
        assert_eq!(t.by_model[0].values[0], Some(50.0 / 300.0));
        let hm = t.by_model[0].values[1].unwrap();
        assert!((hm - 2.0 / (1.0 / 51.0 + 1.0)).abs() < 1e-12, "{hm}");
        // Wilson lower bound of 50/100 (textbook value 0.4038).
        assert!((t.by_task[0].values[2].unwrap() - 0.4038).abs() < 1e-4);
    }

    #[test]
    fn a_one_task_grid_shows_one_harmonic_mean_on_both_rows() {
        // Issue 34: 5 % on the only task used to read 6.000 pooled next to 5.000 per task.
        let rows = [row("t1", 0, 5.0, 100.0)];
        let refs: Vec<&CellRow> = rows.iter().collect();
        let cols = vec![
            MetricDef { name: "accuracy".into(), agg: Agg::Ratio("correct".into(), "n".into()) },
            MetricDef { name: "hm".into(), agg: Agg::HarmonicPercent("correct".into(), "n".into()) },
        ];
        let t = aggregate("b", &refs, &cols, &Planned::default()).unwrap();
        assert_eq!(t.by_task[0].values, vec![Some(0.05), Some(6.0)]);
        assert_eq!(t.by_model[0].values, t.by_task[0].values, "the column means the same on both rows");
    }

    #[test]
    fn a_model_with_a_cell_missing_gets_no_aggregate_only_incomplete() {
        // Spec example of issue 12: dropping the weak task would raise the harmonic mean.
        let rows = [row("t1", 0, 40.0, 100.0), row("t2", 1, 2.0, 100.0), row("t2", 1, 2.0, 100.0)];
        let refs: Vec<&CellRow> = rows.iter().collect();
        let cols = vec![MetricDef { name: "hm".into(), agg: Agg::HarmonicPercent("correct".into(), "n".into()) }];
        let mut planned = Planned::default();
        planned.add(0, "m", "t1");
        for _ in 0..3 {
            planned.add(0, "m", "t2");
        }
        planned.add(1, "silent", "t1");
        let t = aggregate("b", &refs, &cols, &planned).unwrap();
        assert_eq!(t.by_task[0].values, vec![Some(41.0)], "a complete task keeps its number (accuracy + 1)");
        assert_eq!(t.by_task[1].values, vec![None]);
        assert_eq!(t.by_task[1].incomplete().as_deref(), Some("incomplete (2 of 3)"));
        assert_eq!(t.by_model[0].values, vec![None], "no harmonic mean over the tasks that finished");
        assert_eq!(t.by_model[0].incomplete().as_deref(), Some("incomplete (3 of 4)"));
        assert_eq!((t.by_model[1].model.as_str(), t.by_model[1].incomplete().as_deref()), ("silent", Some("incomplete (0 of 1)")));
        assert_eq!((t.by_task[2].model.as_str(), t.by_task[2].incomplete().as_deref()), ("silent", Some("incomplete (0 of 1)")));
        let mut all = Planned::default();
        for task in ["t1", "t2", "t2"] {
            all.add(0, "m", task);
        }
        let t = aggregate("b", &refs, &cols, &all).unwrap();
        assert!(t.by_model[0].values[0].is_some() && t.by_model[0].incomplete().is_none());
    }
}
