//! Metrics: per-cell score records → aggregate tables (polars, lazy API).
//!
//! polars is confined to this module and `report`.

pub mod table;

pub use crate::envs::metric::{Agg, MetricDef};
pub use table::{BenchmarkTables, CellRow, MetricColumn, MetricsError, Planned, TableRow, aggregate, cells_parquet};
