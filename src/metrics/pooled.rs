//! Each model's pooled row from its units: clustered SEs (`<metric>_se`), the pooled
//! intervals built from them (per-task rows keep their Wilson intervals, since items inside
//! one task are the unit there) and the bootstrap interval of a harmonic mean.

use std::collections::BTreeMap;

use super::bootstrap::harmonic_interval;
use super::cluster::{Z95, clustered_se};
use super::table::{BenchmarkTables, MetricColumn};
use super::units::SuiteUnits;
use crate::envs::metric::{Agg, MetricDef, UnitMetric};

/// `columns` with `<M>_se` after each column M that is the mean of a unit metric, and
/// `<H>_ci_low` / `<H>_ci_high` after each harmonic-mean column over a binary unit metric.
#[must_use]
pub fn with_unit_columns(columns: Vec<MetricColumn>, metrics: &[UnitMetric]) -> Vec<MetricColumn> {
    let mut out = Vec::with_capacity(columns.len() + 2);
    for c in columns {
        let se = metrics
            .iter()
            .find(|m| m.summary.as_deref() == Some(c.name.as_str()))
            .map(|m| MetricDef { name: format!("{}_se", c.name), agg: Agg::ClusteredSe(m.name.clone()) });
        let harmonic = match &c.agg {
            Agg::HarmonicPercent(num, _) => metrics.iter().find(|m| m.binary && &m.field == num).map(|m| {
                [
                    MetricDef { name: format!("{}_ci_low", c.name), agg: Agg::HarmonicCiLow(m.name.clone()) },
                    MetricDef { name: format!("{}_ci_high", c.name), agg: Agg::HarmonicCiHigh(m.name.clone()) },
                ]
            }),
            _ => None,
        };
        out.push(c);
        out.extend(se);
        out.extend(harmonic.into_iter().flatten());
    }
    out
}

/// Fills the unit-based columns of every complete pooled row of `table` from `units`,
/// and replaces the pooled interval of each metric that has a clustered SE with
/// `mean ± 1.96·SE`. `seed` seeds the bootstrap (derive it from the metrics key).
pub fn fill_pooled(table: &mut BenchmarkTables, units: &SuiteUnits, seed: u64) {
    let columns = table.columns.clone();
    // One seed per suite: every model is resampled with the same draws, so identical
    // results get identical intervals.
    let seed = suite_seed(seed, &units.suite);
    for row in &mut table.by_model {
        if row.incomplete().is_some() || row.n == 0 {
            continue;
        }
        let Some(model) = units.models.iter().position(|m| *m == row.model) else { continue };
        let mine: Vec<_> = units.rows.iter().filter(|r| r.model_index as usize == model).collect();
        let values_of = |metric: &str| -> Vec<(u32, f64)> {
            let Some(i) = units.metric(metric) else { return Vec::new() };
            mine.iter().filter_map(|r| Some((r.task_index, r.values[i]?))).collect()
        };
        let mut harmonic: BTreeMap<&str, Option<(f64, f64)>> = BTreeMap::new();
        for (i, c) in columns.iter().enumerate() {
            match &c.agg {
                Agg::ClusteredSe(metric) => {
                    let se = clustered_se(&values_of(metric));
                    row.values[i] = se;
                    let Some(mean_col) = columns.iter().position(|m| format!("{}_se", m.name) == c.name) else { continue };
                    let (Some(se), Some(mean)) = (se, row.values[mean_col]) else { continue };
                    let fields = columns[mean_col].fields();
                    for (j, ci) in columns.iter().enumerate() {
                        let sign = match ci.agg {
                            Agg::WilsonLow(..) | Agg::MeanCiLow(_) => -1.0,
                            Agg::WilsonHigh(..) | Agg::MeanCiHigh(_) => 1.0,
                            _ => continue,
                        };
                        if ci.fields() == fields {
                            row.values[j] = Some(mean + sign * Z95 * se);
                        }
                    }
                }
                Agg::HarmonicCiLow(metric) | Agg::HarmonicCiHigh(metric) => {
                    let interval = *harmonic.entry(metric).or_insert_with(|| {
                        let mut per_task: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
                        for (task, x) in values_of(metric) {
                            per_task.entry(task).or_default().push(x);
                        }
                        let tasks: Vec<Vec<f64>> = per_task.into_values().collect();
                        harmonic_interval(&tasks, seed)
                    });
                    row.values[i] = interval.map(|(lo, hi)| if matches!(c.agg, Agg::HarmonicCiLow(_)) { lo } else { hi });
                }
                _ => {}
            }
        }
    }
}

/// A suite's bootstrap seed, from the metrics step's seed and the suite.
fn suite_seed(seed: u64, suite: &str) -> u64 {
    let mut h = blake3::Hasher::new_derive_key("evalgrid bootstrap seed v1");
    h.update(&seed.to_le_bytes());
    h.update(suite.as_bytes());
    let bytes = h.finalize();
    u64::from_le_bytes(bytes.as_bytes()[..8].try_into().unwrap_or([0; 8]))
}
