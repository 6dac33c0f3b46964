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
    /// BBEH's headline, the adjusted harmonic mean `T / Σ_t 1/(acc_t% + 1)` over a row's
    /// tasks: per model over its tasks, per task over that one task (accuracy % + 1).
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
    /// Clustered standard error (clusters = tasks) of the mean of the named per-unit
    /// metric; filled on each model's pooled row from the units, empty on per-task rows.
    ClusteredSe(String),
    /// Lower bound of the stratified bootstrap 95 % interval of a `HarmonicPercent`
    /// column, resampling the named per-unit metric within tasks (pooled rows only).
    HarmonicCiLow(String),
    /// Upper bound of that interval.
    HarmonicCiHigh(String),
}

/// A per-unit metric: a column of `items.csv`, read from each unit of a score record.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnitMetric {
    /// Column name in `items.csv` and `metric` in `comparisons.csv` (`correct`, `score`, ...).
    pub name: String,
    /// Score-record field it is read from when the unit is the whole cell.
    pub field: String,
    /// The summary column that is its mean over units (it gets `<summary>_se`), if any.
    pub summary: Option<String>,
    /// Whether values are 0/1, so pairs also get McNemar's exact test.
    pub binary: bool,
}

impl UnitMetric {
    /// A metric read from `field` of the cell's score record, averaged into `summary`.
    #[must_use]
    pub fn new(name: &str, field: &str, summary: &str, binary: bool) -> Self {
        Self { name: name.into(), field: field.into(), summary: Some(summary.into()), binary }
    }
}

/// One scored unit of a cell: its item number (0 when the unit is the cell) and one value
/// per [`UnitMetric`] of the benchmark, in order (`None` where the record has none).
#[derive(Clone, Debug, PartialEq)]
pub struct Unit {
    /// Item number inside the cell's task: what pairs units across models.
    pub item: u64,
    /// The item's own id where its dataset names one (`qa`'s `id` column); `items.csv` shows it.
    pub id: Option<String>,
    /// Values, one per unit metric.
    pub values: Vec<Option<f64>>,
}

/// The usual units of a cell: the cell itself, each metric read from its score record's
/// top-level field (booleans as 0/1).
#[must_use]
pub fn cell_unit(score: &serde_json::Value, metrics: &[UnitMetric]) -> Vec<Unit> {
    vec![Unit { item: 0, id: None, values: metrics.iter().map(|m| number(score.get(&m.field))).collect() }]
}

/// A JSON number or boolean as f64.
#[must_use]
pub fn number(v: Option<&serde_json::Value>) -> Option<f64> {
    match v? {
        serde_json::Value::Bool(b) => Some(f64::from(u8::from(*b))),
        serde_json::Value::Number(n) => n.as_f64(),
        _ => None,
    }
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
            Agg::ClusteredSe(_) | Agg::HarmonicCiLow(_) | Agg::HarmonicCiHigh(_) => Vec::new(),
        }
    }
}
