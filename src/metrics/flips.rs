//! What changed between two runs of a pipeline, unit by unit (`evalgrid diff`): per
//! suite, metric and model, the units whose value moved (right → wrong, wrong → right on a
//! 0/1 metric) and the paired test of after against before on those units' cells: the
//! paired difference with its clustered CI (the statistics stage's [`paired`]) and
//! McNemar's mid-p.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use super::comparison::{Comparison, mcnemar_mid_p, paired};
use super::units::SuiteUnits;

/// A unit: suite, model, task, seed, item.
pub type UnitKey = (String, String, String, u64, String);

/// A compared unit: task, seed, item, value before, value now.
type Pair = (String, u64, String, f64, f64);

/// One run's per-unit values, as `items.csv` holds them.
#[derive(Debug, Default, PartialEq)]
pub struct RunUnits {
    /// Unit → metric → value (units without a value for a metric leave it out).
    pub values: BTreeMap<UnitKey, BTreeMap<String, f64>>,
}

impl RunUnits {
    /// The units of `suites` (what `items.csv` is written from).
    #[must_use]
    pub fn from_suites(suites: &[SuiteUnits]) -> Self {
        let mut values = BTreeMap::new();
        for s in suites {
            for r in &s.rows {
                let key = (
                    s.suite.clone(),
                    s.models[r.model_index as usize].clone(),
                    s.tasks[r.task_index as usize].clone(),
                    r.seed,
                    r.id.clone().unwrap_or_else(|| r.item.to_string()),
                );
                let row: BTreeMap<String, f64> = s.metrics.iter().zip(&r.values).filter_map(|(m, v)| Some((m.name.clone(), (*v)?))).collect();
                values.insert(key, row);
            }
        }
        Self { values }
    }

    /// Parses an `items.csv` (`suite,model,task,seed,item,<metric>…`) with the rules it is
    /// written with: RFC 4180 quoting (an id may hold commas, quotes and line breaks) and
    /// text cells guarded against formulas ([`crate::exhibit::csv_text`]) read back as
    /// written before; `Err` names the line.
    pub fn parse_items_csv(text: &str) -> Result<Self, String> {
        use crate::exhibit::csv_text_value as text_of;
        let mut records = crate::exhibit::csv_records(text)?.into_iter();
        let header: Vec<String> = records.next().map(|(_, h)| h.iter().map(|f| text_of(f).to_owned()).collect()).ok_or("empty file")?;
        if header.len() < 5 || header[..5] != ["suite", "model", "task", "seed", "item"] {
            return Err("line 1: not an items.csv header (suite,model,task,seed,item,…)".to_owned());
        }
        let mut values = BTreeMap::new();
        for (line, f) in records {
            let bad = || format!("line {line}: malformed row");
            if f.len() != header.len() {
                return Err(bad());
            }
            let seed = f[3].parse().map_err(|_| bad())?;
            let mut row = BTreeMap::new();
            for (name, v) in header[5..].iter().zip(&f[5..]) {
                if !v.is_empty() {
                    row.insert(name.clone(), v.parse::<f64>().map_err(|_| bad())?);
                }
            }
            values.insert((text_of(&f[0]).to_owned(), text_of(&f[1]).to_owned(), text_of(&f[2]).to_owned(), seed, text_of(&f[4]).to_owned()), row);
        }
        Ok(Self { values })
    }
}

/// One unit whose value changed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Flip {
    /// Task.
    pub task: String,
    /// Seed.
    pub seed: u64,
    /// Item: its id where the dataset names one, else its number (as in `items.csv`).
    pub item: String,
    /// Value in the previous run.
    pub before: f64,
    /// Value now.
    pub after: f64,
}

/// What moved for one model on one suite's metric.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ModelFlips {
    /// Suite.
    pub suite: String,
    /// Per-unit metric.
    pub metric: String,
    /// Model.
    pub model: String,
    /// Whether every value of the metric, before and after, is 0 or 1.
    pub binary: bool,
    /// Units compared: in both runs, in a cell that changed.
    pub n_pairs: u64,
    /// Units whose value went from 1 to 0 (binary metrics).
    pub right_to_wrong: u64,
    /// Units whose value went from 0 to 1 (binary metrics).
    pub wrong_to_right: u64,
    /// Every unit whose value changed.
    pub flips: Vec<Flip>,
    /// The paired test, `model_a` = now, `model_b` = before: `diff` = after − before with
    /// its clustered (by task) SE and CI, as `comparisons.csv` computes them.
    pub test: Comparison,
    /// McNemar's mid-p on the flips (binary metrics).
    pub mcnemar_mid_p: Option<f64>,
}

/// Per suite, metric and model (in `now`'s order): the units of the cells in `changed`
/// (`(model, task, seed)`; every cell when `None`) that both runs scored, compared.
#[must_use]
pub fn flips(before: &RunUnits, now: &RunUnits, changed: Option<&BTreeSet<(String, String, u64)>>) -> Vec<ModelFlips> {
    // (suite, metric, model) → [(task, seed, item, before, after)]
    let mut groups: BTreeMap<(String, String, String), Vec<Pair>> = BTreeMap::new();
    for (key, row) in &now.values {
        let (suite, model, task, seed, item) = key;
        if changed.is_some_and(|c| !c.contains(&(model.clone(), task.clone(), *seed))) {
            continue;
        }
        let Some(old) = before.values.get(key) else { continue };
        for (metric, after) in row {
            if let Some(b) = old.get(metric) {
                groups.entry((suite.clone(), metric.clone(), model.clone())).or_default().push((task.clone(), *seed, item.clone(), *b, *after));
            }
        }
    }
    groups.into_iter().map(|((suite, metric, model), units)| one(suite, metric, model, &units)).collect()
}

fn one(suite: String, metric: String, model: String, units: &[Pair]) -> ModelFlips {
    let binary = units.iter().all(|u| [u.3, u.4].iter().all(|v| *v == 0.0 || *v == 1.0));
    let tasks: Vec<&str> = units.iter().map(|u| u.0.as_str()).collect::<BTreeSet<_>>().into_iter().collect();
    let cluster = |t: &str| u32::try_from(tasks.binary_search(&t).unwrap_or(0)).unwrap_or(u32::MAX);
    let pairs: Vec<(u32, f64, f64)> = units.iter().map(|u| (cluster(&u.0), u.4, u.3)).collect();
    let mut test = paired(&pairs, binary);
    test.suite.clone_from(&suite);
    test.metric.clone_from(&metric);
    test.model_a = "now".to_owned();
    test.model_b = "before".to_owned();
    let count = |b: f64, a: f64| units.iter().filter(|u| u.3 == b && u.4 == a).count() as u64;
    let (right_to_wrong, wrong_to_right) = if binary { (count(1.0, 0.0), count(0.0, 1.0)) } else { (0, 0) };
    let flips: Vec<Flip> =
        units.iter().filter(|u| u.3 != u.4).map(|u| Flip { task: u.0.clone(), seed: u.1, item: u.2.clone(), before: u.3, after: u.4 }).collect();
    ModelFlips {
        suite,
        metric,
        model,
        binary,
        n_pairs: units.len() as u64,
        right_to_wrong,
        wrong_to_right,
        flips,
        test,
        mcnemar_mid_p: (binary && !units.is_empty()).then(|| mcnemar_mid_p(right_to_wrong, wrong_to_right)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_csv_round_trips_quoted_names_and_missing_values() {
        let text = "suite,model,task,seed,item,correct,score\nbbeh,\"m,1\",\"t \"\"x\"\"\",0,3,1.0,\nbbeh,m2,t,1,4,,0.5\n";
        let run = RunUnits::parse_items_csv(text).unwrap();
        let first = &run.values[&("bbeh".into(), "m,1".into(), "t \"x\"".into(), 0, "3".into())];
        assert_eq!(first.get("correct"), Some(&1.0));
        assert!(!first.contains_key("score"));
        assert!(RunUnits::parse_items_csv("a,b\n").is_err());
        assert!(RunUnits::parse_items_csv("suite,model,task,seed,item\nx,y,z,notanumber,1\n").unwrap_err().starts_with("line 2"));
        // A quoted id over two lines is one row; the next row's line is counted past it.
        let text = "suite,model,task,seed,item,correct\nqa,m,t,0,\"a\nb\",1.0\nqa,m,t,0,\"'=1+1\",-0.5\nqa,m,t,x,c,1.0\n";
        let err = RunUnits::parse_items_csv(text).unwrap_err();
        assert_eq!(err, "line 5: malformed row");
        let run = RunUnits::parse_items_csv(&text[..text.rfind("qa,m,t,x").unwrap()]).unwrap();
        assert_eq!(run.values[&("qa".into(), "m".into(), "t".into(), 0, "a\nb".into())].get("correct"), Some(&1.0));
        assert_eq!(run.values[&("qa".into(), "m".into(), "t".into(), 0, "=1+1".into())].get("correct"), Some(&-0.5));
    }

    #[test]
    fn flips_count_both_directions_in_changed_cells_only() {
        let row = |model: &str, task: &str, item: u64, v: f64| {
            (("s".to_owned(), model.to_owned(), task.to_owned(), 0, item.to_string()), BTreeMap::from([("correct".to_owned(), v)]))
        };
        let before = RunUnits { values: [row("m", "t1", 0, 1.0), row("m", "t1", 1, 0.0), row("m", "t2", 0, 1.0), row("k", "t1", 0, 1.0)].into() };
        let now = RunUnits { values: [row("m", "t1", 0, 0.0), row("m", "t1", 1, 1.0), row("m", "t2", 0, 0.0), row("k", "t1", 0, 0.0)].into() };
        let changed = BTreeSet::from([("m".to_owned(), "t1".to_owned(), 0), ("m".to_owned(), "t2".to_owned(), 0)]);
        let out = flips(&before, &now, Some(&changed));
        assert_eq!(out.len(), 1, "k's cell did not change: {out:?}");
        let m = &out[0];
        assert_eq!((m.n_pairs, m.right_to_wrong, m.wrong_to_right, m.flips.len()), (3, 2, 1, 3));
        assert_eq!(m.test.diff, Some(-1.0 / 3.0));
        assert_eq!(m.mcnemar_mid_p, Some(mcnemar_mid_p(2, 1)));
    }
}
