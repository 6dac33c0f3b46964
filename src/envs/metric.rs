//! How a benchmark's score records aggregate into table columns (plain
//! data; the polars code that evaluates it lives in `metrics`).

use serde::{Deserialize, Serialize};

/// Aggregation of score fields over the cells of a table row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agg {
    /// Mean of a field over cells.
    Mean(String),
    /// Σ numerator / Σ denominator over cells (a micro average).
    Ratio(String, String),
    /// Per task: 100 · Σnum/Σden; per model: the adjusted harmonic mean
    /// `T / Σ_t 1/(acc_t% + 1)` over its tasks (BBEH's headline).
    HarmonicPercent(String, String),
    /// Lower bound of the 95 % Wilson interval of Σnum/Σden.
    WilsonLow(String, String),
    /// Upper bound of the 95 % Wilson interval of Σnum/Σden.
    WilsonHigh(String, String),
    /// Lower bound of a normal 95 % interval of the mean of a field
    /// (mean − 1.96·s/√n; none for n < 2).
    MeanCiLow(String),
    /// Upper bound of that interval.
    MeanCiHigh(String),
}

/// One table column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricDef {
    /// Column name (`mean_score`, `accuracy`, ...).
    pub name: String,
    /// How it is computed.
    pub agg: Agg,
}

impl MetricDef {
    /// Mean of `field`.
    #[must_use]
    pub fn mean(name: &str, field: &str) -> Self {
        Self { name: name.into(), agg: Agg::Mean(field.into()) }
    }

    /// Score fields this column reads.
    #[must_use]
    pub fn fields(&self) -> Vec<&str> {
        match &self.agg {
            Agg::Mean(f) | Agg::MeanCiLow(f) | Agg::MeanCiHigh(f) => vec![f],
            Agg::Ratio(n, d) | Agg::HarmonicPercent(n, d) | Agg::WilsonLow(n, d) | Agg::WilsonHigh(n, d) => vec![n, d],
        }
    }
}
