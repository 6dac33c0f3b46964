//! Per-benchmark aggregate tables computed with polars' lazy API.
//!
//! Input is one row per finished cell (its score record flattened to numeric
//! fields); output is a model × task table and a per-model table, each with
//! `n` and the mean of every selected metric, in pipeline order.

use std::collections::BTreeMap;

use polars::prelude::*;
use serde::{Deserialize, Serialize};

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

/// A metric: the mean of one score field over the cells of a group.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct MetricColumn {
    /// Column name in tables (`mean_score`).
    pub name: String,
    /// Score field averaged (`score`).
    pub field: String,
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
    /// Metric values by column name, in column order.
    pub values: Vec<Option<f64>>,
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
    let mut fields: Vec<&str> = columns.iter().map(|c| c.field.as_str()).collect();
    fields.sort_unstable();
    fields.dedup();
    for field in fields {
        let values: Vec<Option<f64>> = rows.iter().map(|r| r.fields.get(field).copied()).collect();
        cols.push(Column::new(field.into(), values));
    }
    Ok(DataFrame::new_infer_height(cols)?)
}

/// Computes both tables for one benchmark.
pub fn aggregate(benchmark: &str, rows: &[&CellRow], columns: &[MetricColumn]) -> Result<BenchmarkTables, MetricsError> {
    let frame = cells_frame(rows, columns)?;
    let aggs = |_: ()| {
        let mut a = vec![len().alias("n")];
        a.extend(columns.iter().map(|c| col(c.field.as_str()).mean().alias(c.name.as_str())));
        a
    };
    let by_task = frame
        .clone()
        .lazy()
        .group_by([col("model_index"), col("model"), col("task_index"), col("task")])
        .agg(aggs(()))
        .sort(["model_index", "task_index"], SortMultipleOptions::default())
        .collect()?;
    let by_model = frame
        .lazy()
        .group_by([col("model_index"), col("model")])
        .agg(aggs(()))
        .sort(["model_index"], SortMultipleOptions::default())
        .collect()?;
    Ok(BenchmarkTables {
        benchmark: benchmark.to_owned(),
        columns: columns.to_vec(),
        by_task: rows_of(&by_task, columns, true)?,
        by_model: rows_of(&by_model, columns, false)?,
    })
}

fn rows_of(df: &DataFrame, columns: &[MetricColumn], with_task: bool) -> Result<Vec<TableRow>, MetricsError> {
    let model = df.column("model")?.str()?;
    let n = df.column("n")?.cast(&DataType::UInt64)?;
    let n = n.u64()?;
    let task = if with_task { Some(df.column("task")?.str()?) } else { None };
    let values: Vec<Column> =
        columns.iter().map(|c| df.column(&c.name).and_then(|s| s.cast(&DataType::Float64))).collect::<Result<_, _>>()?;
    let values: Vec<&Float64Chunked> = values.iter().map(Column::f64).collect::<Result<_, _>>()?;
    Ok((0..df.height())
        .map(|i| TableRow {
            model: model.get(i).unwrap_or_default().to_owned(),
            task: task.and_then(|t| t.get(i)).map(str::to_owned),
            n: n.get(i).unwrap_or(0),
            values: values.iter().map(|v| v.get(i)).collect(),
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
        let rows = vec![
            row("z", 0, "t2", 1, 0, 4.0),
            row("z", 0, "t1", 0, 0, 1.0),
            row("z", 0, "t1", 0, 1, 3.0),
            row("a", 1, "t1", 0, 0, 0.0),
        ];
        let refs: Vec<&CellRow> = rows.iter().collect();
        let cols = vec![
            MetricColumn { name: "mean_score".into(), field: "score".into() },
            MetricColumn { name: "success_rate".into(), field: "success".into() },
        ];
        let t = aggregate("b", &refs, &cols).unwrap();
        let by_task: Vec<(String, Option<String>, u64, Vec<Option<f64>>)> =
            t.by_task.iter().map(|r| (r.model.clone(), r.task.clone(), r.n, r.values.clone())).collect();
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
