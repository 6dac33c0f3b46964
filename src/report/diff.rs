//! `evalgrid diff`: what changed since the previous run of a pipeline. Which cells changed
//! and the key fields that changed them (the reason `status --explain` gives), which units
//! flipped per model, and the paired test of now against before on the changed cells.
//!
//! The previous run is known from the report folder: every report writes `keys.csv` (each
//! scored cell's episode and score keys), and when a rerun's keys differ from the folder's,
//! the old `items.csv` and `keys.csv` move to `previous/` first ([`keep_previous`]). With
//! `--against`, another report folder (its `items.csv`, and `keys.csv` where present) or
//! another cache (each cell's last keys and scores) is the previous run instead.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;
use serde_json::Value;

use super::build::{ReportError, units_of};
use crate::cache::{CacheError, Head, Store};
use crate::metrics::flips::{ModelFlips, RunUnits, flips};
use crate::plan::{Cell, Plan, StepKey};
use crate::spec::Pipeline;

/// Folder inside a report that keeps the previous run's `items.csv` and `keys.csv`.
pub const PREVIOUS_DIR: &str = "previous";
/// Each scored cell's keys: `cell,episode_key,score_key`.
pub const KEYS_CSV: &str = "keys.csv";

/// Errors of `evalgrid diff`.
#[derive(Debug, thiserror::Error)]
pub enum DiffError {
    /// Nothing to compare with.
    #[error("no previous run at `{0}`: it is kept once a rerun changes cells (or give --against a report folder or cache)")]
    NoPrevious(PathBuf),
    /// A previous run's file is unreadable.
    #[error("`{path}`: {message}")]
    Bad {
        /// File.
        path: PathBuf,
        /// What is wrong (line numbers included).
        message: String,
    },
    /// Reading the cache failed.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// Computing the units failed.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// A cell whose keys differ from the previous run's, and why.
#[derive(Debug, Serialize)]
pub struct ChangedCell {
    /// Cell id.
    pub cell: String,
    /// The changed fields (`model.params.temperature: 0.7 → 0.2`), as `status --explain`.
    pub reasons: Vec<String>,
}

/// What `evalgrid diff` reports.
#[derive(Debug, Serialize)]
pub struct RunDiff {
    /// Pipeline name.
    pub pipeline: String,
    /// Where the previous run came from, as given.
    pub previous: String,
    /// Cells scored now.
    pub cells_scored: usize,
    /// Whether the previous run's keys were known (else every common unit is compared).
    pub keys_known: bool,
    /// Cells whose keys changed.
    pub cells_changed: Vec<ChangedCell>,
    /// Cells scored now that the previous run had not scored.
    pub cells_new: Vec<String>,
    /// Per suite, metric and model: the flips and the paired test.
    pub models: Vec<ModelFlips>,
}

/// The previous run: per cell its keys (with components) where known, and its units.
struct Before {
    heads: Option<BTreeMap<String, Head>>,
    units: RunUnits,
}

/// Compares the scored cells of `plan` with the previous run at `against` (a report folder
/// or a cache folder); `label` names it in the output.
pub fn run_diff(pipeline: &Pipeline, plan: &Plan, store: &Store, against: &Path, label: &str) -> Result<RunDiff, DiffError> {
    let read: Vec<Option<Value>> = plan.cells.par_iter().map(|c| store.get(c.score_key).map(|e| e.map(|e| e.output))).collect::<Result<_, _>>()?;
    let scored: Vec<(&Cell, Value)> = plan.cells.iter().zip(read).filter_map(|(c, v)| v.map(|v| (c, v))).collect();
    let now = RunUnits::from_suites(&units_of(pipeline, &scored));
    let before = if against.join("items.csv").is_file() {
        from_report(against, store)?
    } else if against.join("v1").is_dir() {
        from_cache(pipeline, plan, against)?
    } else {
        return Err(DiffError::NoPrevious(against.to_owned()));
    };
    let (mut cells_changed, mut cells_new, mut changed) = (Vec::new(), Vec::new(), BTreeSet::new());
    if let Some(heads) = &before.heads {
        for (cell, _) in &scored {
            match heads.get(&cell.id) {
                None => cells_new.push(cell.id.clone()),
                Some(head) if head.episode_key != cell.episode_key || head.score_key != cell.score_key => {
                    let reasons = if head.episode_components.is_null() {
                        vec!["the previous run's entries are no longer in this cache (its keys differ)".to_owned()]
                    } else {
                        // The edited rows of a `qa` dataset by name, as `status --explain`.
                        let mut reasons = crate::cache::explain::changes_since(pipeline, store, cell, head);
                        reasons.extend(task_changes(pipeline, store, cell, head));
                        reasons
                    };
                    cells_changed.push(ChangedCell { cell: cell.id.clone(), reasons });
                    changed.insert((pipeline.models[cell.model].id.clone(), pipeline.tasks[cell.task].task.clone(), cell.seed));
                }
                Some(_) => {}
            }
        }
    }
    let keys_known = before.heads.is_some();
    let models = flips(&before.units, &now, keys_known.then_some(&changed));
    Ok(RunDiff { pipeline: pipeline.name.clone(), previous: label.to_owned(), cells_scored: scored.len(), keys_known, cells_changed, cells_new, models })
}

/// What the cell's benchmark says changed in its task since the run that made `head` (the
/// edited rows of a `qa` dataset, by id and line), read against that run's episode record;
/// none when the episode is unchanged or its record is gone. `status --explain` and `diff`
/// both name changed rows this way.
#[must_use]
pub fn task_changes(pipeline: &Pipeline, store: &Store, cell: &Cell, head: &Head) -> Vec<String> {
    if head.episode_key == cell.episode_key {
        return Vec::new();
    }
    let task = &pipeline.tasks[cell.task];
    let Some(bench) = crate::envs::registry::get(&task.benchmark) else { return Vec::new() };
    match store.get_output::<Value>(head.episode_key) {
        Ok(Some(previous)) => bench.explain(task, &previous),
        _ => Vec::new(),
    }
}

/// A report folder's `items.csv`, and its `keys.csv` with each key's components read from
/// `store` (null when the entry is gone).
fn from_report(dir: &Path, store: &Store) -> Result<Before, DiffError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(|e| DiffError::Bad { path, message: e.to_string() })
    };
    let bad = |name: &str| {
        let path = dir.join(name);
        move |message: String| DiffError::Bad { path, message }
    };
    let units = RunUnits::parse_items_csv(&read("items.csv")?).map_err(bad("items.csv"))?;
    if !dir.join(KEYS_CSV).is_file() {
        return Ok(Before { heads: None, units });
    }
    let mut heads = BTreeMap::new();
    for (line, f) in crate::exhibit::csv_records(&read(KEYS_CSV)?).map_err(bad(KEYS_CSV))?.into_iter().skip(1) {
        let parsed = match &f[..] {
            [cell, episode, score] => score.parse::<StepKey>().ok().zip(episode.parse::<StepKey>().ok()).map(|(s, e)| (cell.clone(), e, s)),
            _ => None,
        };
        let (cell, episode_key, score_key) = parsed.ok_or_else(|| bad(KEYS_CSV)(format!("line {line}: malformed row")))?;
        let components = |key: StepKey| store.get(key).map(|e| e.map_or(Value::Null, |e| e.components));
        let (episode_components, score_components) = (components(episode_key)?, components(score_key)?);
        heads.insert(cell.clone(), Head { cell, episode_key, episode_components, score_key, score_components });
    }
    Ok(Before { heads: Some(heads), units })
}

/// Another cache: each planned cell's last keys there, and the units of its scores.
fn from_cache(pipeline: &Pipeline, plan: &Plan, dir: &Path) -> Result<Before, DiffError> {
    let other = Store::open(dir)?;
    let heads: BTreeMap<String, Head> = plan.cells.iter().filter_map(|c| other.head(&c.id).map(|h| (c.id.clone(), h))).collect();
    let mut scored = Vec::new();
    for cell in &plan.cells {
        if let Some(head) = heads.get(&cell.id)
            && let Some(entry) = other.get(head.score_key)?
        {
            scored.push((cell, entry.output));
        }
    }
    Ok(Before { units: RunUnits::from_suites(&units_of(pipeline, &scored)), heads: Some(heads) })
}

/// `keys.csv`: each scored cell's episode and score keys.
#[must_use]
pub fn keys_csv(scored: &[(&Cell, Value)]) -> String {
    let mut out = String::from("cell,episode_key,score_key\n");
    for (cell, _) in scored {
        out.push_str(&format!("{},{},{}\n", crate::exhibit::csv_field(&cell.id), cell.episode_key.to_hex(), cell.score_key.to_hex()));
    }
    out
}

/// Before a report is written into `dir`: when the folder holds a `keys.csv` that differs
/// from `new_keys` (a rerun changed cells), its `items.csv` and `keys.csv` move to
/// `previous/`, the run `evalgrid diff` compares with.
pub fn keep_previous(dir: &Path, new_keys: &[u8]) -> std::io::Result<()> {
    let old = dir.join(KEYS_CSV);
    match std::fs::read(&old) {
        Ok(bytes) if bytes != new_keys && dir.join("items.csv").is_file() => {
            let previous = dir.join(PREVIOUS_DIR);
            std::fs::create_dir_all(&previous)?;
            std::fs::rename(dir.join("items.csv"), previous.join("items.csv"))?;
            std::fs::rename(old, previous.join(KEYS_CSV))
        }
        _ => Ok(()),
    }
}

/// After a report is written into `dir`: with a previous run kept in `previous/`, the diff
/// against it as `diff.html` (its name returned). A failure is logged, never fatal: the
/// report itself is complete.
pub fn write_diff_page(pipeline: &Pipeline, plan: &Plan, store: &Store, dir: &Path) -> Option<String> {
    const FILE: &str = "diff.html";
    let previous = dir.join(PREVIOUS_DIR);
    if !previous.join("items.csv").is_file() {
        return None;
    }
    let written = run_diff(pipeline, plan, store, &previous, PREVIOUS_DIR).map_err(|e| e.to_string()).and_then(|d| {
        super::partial::write_if_changed(&dir.join(FILE), super::diff_page::diff_html(&pipeline.report.title, &d).as_bytes()).map_err(|(_, e)| e.to_string())
    });
    match written {
        Ok(()) => Some(FILE.to_owned()),
        Err(e) => {
            tracing::warn!("diff against the previous run not written: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_previous_run_is_kept_only_when_the_keys_change() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        keep_previous(d, b"k1").unwrap();
        assert!(!d.join(PREVIOUS_DIR).exists(), "a first report keeps nothing");
        std::fs::write(d.join("items.csv"), "old items").unwrap();
        std::fs::write(d.join(KEYS_CSV), "k1").unwrap();
        keep_previous(d, b"k1").unwrap();
        assert!(!d.join(PREVIOUS_DIR).exists() && d.join("items.csv").is_file(), "same keys: a re-render, not a rerun");
        keep_previous(d, b"k2").unwrap();
        assert_eq!(std::fs::read_to_string(d.join(PREVIOUS_DIR).join("items.csv")).unwrap(), "old items");
        assert_eq!(std::fs::read_to_string(d.join(PREVIOUS_DIR).join(KEYS_CSV)).unwrap(), "k1");
        assert!(!d.join("items.csv").exists(), "the new report writes its own");
    }
}
