//! The data behind the report's item pages (`items-<suite>.html`): one row per unit of a
//! suite (task, seed, item) with, per unit metric and model, the unit's value, and per model
//! the answer's first line and the cell's transcript link. The same units as
//! `items.csv` (read by the same `units_for`), plus the cells that failed, so a reader
//! sees which models errored on a unit.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::envs::registry;
use crate::plan::{Cell, Plan};
use crate::spec::Pipeline;

/// Longest answer line kept per unit and model (characters): the page shows a glance,
/// the transcript the whole answer.
const ANSWER_CHARS: usize = 80;

/// One model's entry for a unit: its value, `"E"` when the model's cell failed, or null
/// when the cell holds no value for the unit.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Entry {
    /// The unit's value on the metric.
    Value(f64),
    /// The cell failed (no score record).
    Errored(&'static str),
    /// The cell was scored but holds no value on this metric for the unit (a scorer that
    /// does not apply to its task, a judge that gave no grade): not an error.
    Missing(()),
}

/// One row: task, seed, item (its id where the dataset names one, as in `items.csv`, else
/// its number), per metric an entry per model, an answer per model.
pub type ItemRow = (u32, u64, Value, Vec<Vec<Entry>>, Vec<String>);

/// A unit metric the page can show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MetricColumn {
    /// Its name (an `items.csv` column).
    pub name: String,
    /// Whether it is 0/1 (`failed` means 0; else 0 or below).
    pub binary: bool,
}

/// One suite's item table, serialised into its page.
#[derive(Debug, Serialize)]
pub struct SuiteItems {
    /// Suite name.
    pub suite: String,
    /// Every unit metric of the suite, in `items.csv` order; the page shows one at a time,
    /// the first to begin with.
    pub metrics: Vec<MetricColumn>,
    /// Model ids, in pipeline order (columns).
    pub models: Vec<String>,
    /// Task ids by position.
    pub tasks: Vec<String>,
    /// `[task, seed, item, [[entry per model] per metric], [answer per model]]`, sorted by task, seed, item.
    pub rows: Vec<ItemRow>,
    /// `"task:seed:model"` → transcript page, for the cells that have one.
    pub links: BTreeMap<String, String>,
}

/// The item tables of every suite with a unit metric, in pipeline order; `links` maps a
/// cell id to its transcript page.
#[must_use]
pub fn suite_items(pipeline: &Pipeline, plan: &Plan, scored: &[(&Cell, Value)], links: &BTreeMap<String, String>) -> Vec<SuiteItems> {
    let scores: BTreeMap<&str, &Value> = scored.iter().map(|(c, v)| (c.id.as_str(), v)).collect();
    let mut suites: Vec<(&str, &str)> = Vec::new();
    for t in &pipeline.tasks {
        if !suites.iter().any(|(s, _)| *s == t.suite) {
            suites.push((&t.suite, &t.benchmark));
        }
    }
    suites.into_iter().filter_map(|(suite, benchmark)| one_suite(pipeline, plan, (suite, benchmark), &scores, links)).collect()
}

/// One suite's table; `None` when its benchmark has no unit metric.
fn one_suite(
    pipeline: &Pipeline,
    plan: &Plan,
    (suite, benchmark): (&str, &str),
    scores: &BTreeMap<&str, &Value>,
    links: &BTreeMap<String, String>,
) -> Option<SuiteItems> {
    let bench = registry::get(benchmark)?;
    let tasks: Vec<&crate::spec::TaskInstance> = pipeline.tasks.iter().filter(|t| t.suite == suite).collect();
    let metrics = bench.unit_metrics_for(&tasks);
    if metrics.is_empty() {
        return None;
    }
    let cells: Vec<&Cell> = plan.cells.iter().filter(|c| pipeline.tasks[c.task].suite == suite).collect();
    let mut models: Vec<usize> = cells.iter().map(|c| c.model).collect();
    models.sort_unstable();
    models.dedup();
    let column = |model: usize| models.iter().position(|m| *m == model).unwrap_or(0);
    type Columns = (Value, Vec<Vec<Entry>>, Vec<String>);
    let mut rows: BTreeMap<(u32, u64, u64), Columns> = BTreeMap::new();
    let mut failed: Vec<(u32, u64, usize)> = Vec::new();
    let mut out_links = BTreeMap::new();
    for cell in &cells {
        let task = u32::try_from(cell.task).unwrap_or(u32::MAX);
        let Some(score) = scores.get(cell.id.as_str()) else {
            failed.push((task, cell.seed, column(cell.model)));
            continue;
        };
        if let Some(path) = links.get(&cell.id) {
            out_links.insert(format!("{task}:{}:{}", cell.seed, column(cell.model)), path.clone());
        }
        let answers = bench.unit_answers(score);
        for (i, unit) in bench.units_for(score, &metrics).into_iter().enumerate() {
            let label = unit.id.map_or_else(|| Value::from(unit.item), Value::from);
            let row = rows
                .entry((task, cell.seed, unit.item))
                .or_insert_with(|| (label, vec![vec![Entry::Missing(()); models.len()]; metrics.len()], vec![String::new(); models.len()]));
            for (k, v) in unit.values.iter().enumerate().take(metrics.len()) {
                row.1[k][column(cell.model)] = v.map_or(Entry::Missing(()), Entry::Value);
            }
            row.2[column(cell.model)] = answers.get(i).cloned().flatten().map(|a| first_line(&a)).unwrap_or_default();
        }
    }
    for (key, (_, entries, _)) in &mut rows {
        for (task, seed, col) in &failed {
            if key.0 == *task && key.1 == *seed {
                for per_model in entries.iter_mut() {
                    per_model[*col] = Entry::Errored("E");
                }
            }
        }
    }
    Some(SuiteItems {
        suite: suite.to_owned(),
        metrics: metrics.iter().map(|m| MetricColumn { name: m.name.clone(), binary: m.binary }).collect(),
        models: models.iter().map(|m| pipeline.models[*m].id.clone()).collect(),
        tasks: pipeline.tasks.iter().map(|t| t.task.clone()).collect(),
        rows: rows.into_iter().map(|((t, s, _), (i, e, a))| (t, s, i, e, a)).collect(),
        links: out_links,
    })
}

/// The first non-empty line of an answer, cut to [`ANSWER_CHARS`] characters.
fn first_line(answer: &str) -> String {
    let line = answer.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    match line.char_indices().nth(ANSWER_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_serialise_as_number_e_or_null_and_answers_are_cut() {
        let json = serde_json::to_string(&[Entry::Value(1.0), Entry::Errored("E"), Entry::Missing(())]).unwrap();
        assert_eq!(json, "[1.0,\"E\",null]");
        assert_eq!(first_line("\n  (A)  \nmore"), "(A)");
        assert_eq!(first_line(&"é".repeat(100)).chars().count(), ANSWER_CHARS + 1);
    }
}
