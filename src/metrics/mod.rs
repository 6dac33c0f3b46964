//! Metrics: per-cell score records → aggregate tables (polars, lazy API), and per-unit
//! results → clustered errors, paired comparisons and bootstrap intervals.
//!
//! polars is confined to this module and `report`.

pub mod bootstrap;
pub mod cluster;
pub mod comparison;
pub mod flips;
pub mod pooled;
pub mod power;
pub mod table;
pub mod units;

pub use crate::envs::metric::{Agg, MetricDef};
pub use comparison::{Comparison, compare, comparisons_csv};
pub use pooled::{fill_pooled, with_unit_columns};
pub use table::{BenchmarkTables, CellRow, MetricColumn, MetricsError, Planned, TableRow, aggregate, cells_parquet};
pub use units::{SuiteUnits, UnitRow, items_files};
