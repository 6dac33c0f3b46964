//! The pipeline's own WeirdML runs on the author's time-horizon timeline (`report.weirdml`,
//! spec `weirdml-published.md`): each seed of a cell is one run scored by its run accuracy
//! (the max over its submissions, as the author scores a run), fitted with the importer's
//! [`horizon`] code and seeded bootstrap, and drawn beside the published models.
//!
//! The tables are computed in the metrics step (the benchmark-sections hook); the setting's
//! files are in the metrics key by content hash, so editing the estimates refits.

use rayon::prelude::*;
use serde_json::Value;

use super::horizon::{Estimates, Horizon, horizon, parse_estimates};
use super::published::parse_results;
use crate::envs::benchmark::{FigureInput, SectionInput};
use crate::exhibit::{Figure, FigureKind, Section, Series};
use crate::spec::WeirdMlReport;

/// Title start of the table of the pipeline's models (the figure finds it by this).
pub const OWN_TITLE: &str = "WeirdML time horizons of this pipeline's models";
/// Title start of the table of the published models drawn for context.
pub const PUBLISHED_TITLE: &str = "WeirdML time horizons of published models (context)";
/// The columns of the importer's `horizons.csv` that are numbers (x50 in log10 hours).
pub const COLUMNS: [&str; 9] = ["n_data", "n_success", "x50_q025", "x50_q50", "x50_q975", "hours_q025", "hours_q50", "hours_q975", "beta_q50"];

/// The benchmark prefix of qualified task ids in cells.
const PREFIX: &str = "weirdml/";

fn row(label: &str, h: &Horizon) -> (String, Vec<Option<f64>>) {
    let [lo, mid, hi] = h.x50;
    #[expect(clippy::cast_precision_loss, reason = "point counts are far below 2^52")]
    let counts = [h.n_data as f64, h.n_success as f64];
    let values = counts.into_iter().chain([lo, mid, hi]).chain([lo, mid, hi].map(|x| 10f64.powf(x))).chain([h.beta_q50]).map(Some).collect();
    (label.to_owned(), values)
}

fn section(title: String, rows: Vec<(String, Vec<Option<f64>>)>) -> Section {
    Section { title, columns: COLUMNS.iter().map(|c| (*c).to_owned()).collect(), rows }
}

fn list(items: &[String]) -> String {
    items.iter().map(|t| format!("`{t}`")).collect::<Vec<_>>().join(", ")
}

/// Run scores per task, as [`horizon`] takes them.
type Scores = Vec<(String, Vec<f64>)>;

/// Run scores of `model` per task of `tasks` (seed order), or the tasks it has no run on.
fn model_scores(input: &SectionInput<'_>, model: &str, tasks: &[String]) -> Result<Scores, Vec<String>> {
    let mut scores = Vec::new();
    let mut missing = Vec::new();
    for task in tasks {
        let runs: Vec<f64> = input
            .cells
            .iter()
            .filter(|c| c.model == model && c.task.strip_prefix(PREFIX) == Some(task.as_str()))
            .filter_map(|c| c.score["run_accuracy"].as_f64())
            .collect();
        if runs.is_empty() {
            missing.push(task.clone());
        } else {
            scores.push((task.clone(), runs));
        }
    }
    if missing.is_empty() { Ok(scores) } else { Err(missing) }
}

/// The horizon tables of `report.weirdml` (none when it is not set): the pipeline's models
/// whose cells cover every task that has estimates, with the others listed as left out, and
/// the published models drawn for context. What cannot be fitted is said in the table's
/// title, plainly; it never fails the report.
#[must_use]
pub fn sections(input: &SectionInput<'_>) -> Vec<Section> {
    let Some(setting) = &input.report.weirdml else { return Vec::new() };
    let mut tasks: Vec<String> = Vec::new();
    for c in &input.cells {
        if let Some(t) = c.task.strip_prefix(PREFIX).filter(|t| !tasks.iter().any(|k| k == t)) {
            tasks.push(t.to_owned());
        }
    }
    let shown = setting.estimates.path.display().to_string();
    let root: Value = serde_json::from_slice(&setting.estimates.bytes).unwrap_or(Value::Null);
    let (fit_tasks, unestimated): (Vec<String>, Vec<String>) = tasks.iter().cloned().partition(|t| root.get(t).is_some());
    let mut out = Vec::new();
    if fit_tasks.is_empty() {
        let known: Vec<String> = root.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
        let title = format!(
            "{OWN_TITLE}: no fit. The estimates file `{shown}` has no human-time estimates for this pipeline's WeirdML tasks ({}); it has estimates for {} task(s){}. Add estimates for these tasks to place the models on the timeline.",
            list(&tasks),
            known.len(),
            if known.is_empty() { String::new() } else { format!(": {}", list(&known)) }
        );
        out.push(section(title, Vec::new()));
    } else {
        match parse_estimates(&setting.estimates.bytes, &shown, &fit_tasks) {
            Err(e) => out.push(section(format!("{OWN_TITLE}: no fit. {e}"), Vec::new())),
            Ok(estimates) => out.push(own_section(input, setting, &estimates, &fit_tasks, &unestimated)),
        }
    }
    if let Some(context) = published_section(setting, &root) {
        out.push(context);
    }
    out
}

/// The table of the pipeline's models fitted on `tasks`.
fn own_section(input: &SectionInput<'_>, setting: &WeirdMlReport, estimates: &Estimates, tasks: &[String], unestimated: &[String]) -> Section {
    let per_model: Vec<(&str, Result<Scores, Vec<String>>)> = input.models.iter().map(|m| (m.id.as_str(), model_scores(input, &m.id, tasks))).collect();
    // Each model's bootstrap is seeded by its id alone (as the importer seeds by the results
    // key), so the same cache gives the same bytes and a model's interval does not move when
    // other cells change.
    let rows: Vec<(String, Vec<Option<f64>>)> =
        per_model.par_iter().filter_map(|(model, scores)| scores.as_ref().ok().map(|s| row(model, &horizon(model, s, estimates, setting.resamples)))).collect();
    let mut title = format!(
        "{OWN_TITLE} ({} task-level bootstrap resamples seeded by model id; x50 in log10 hours, hours as 10^x50; p(run score ≥ θ) = σ(β·(x − x50)), x = log10 of each estimator's human hours for θ; a run is one seed, scored by its best submission). Fitted on {}.",
        setting.resamples,
        list(tasks)
    );
    for (model, scores) in &per_model {
        if let Err(missing) = scores {
            title.push_str(&format!(" Left out: `{model}` has no scored run on {}.", list(missing)));
        }
    }
    if !unestimated.is_empty() {
        title.push_str(&format!(" Not in the estimates file, so not fitted: {}.", list(unestimated)));
    }
    if !estimates.skipped.is_empty() {
        title.push_str(&format!(" {} estimate(s) with non-positive hours skipped: {}.", estimates.skipped.len(), estimates.skipped.join(", ")));
    }
    section(title, rows)
}

/// The published models drawn for context (`report.weirdml.published`), fitted on the
/// author's tasks; `None` when no results file is set.
fn published_section(setting: &WeirdMlReport, estimates_root: &Value) -> Option<Section> {
    let file = setting.published.as_ref()?;
    let no = |why: String| Some(section(format!("{PUBLISHED_TITLE}: not drawn. {why}"), Vec::new()));
    let published = match parse_results(&file.bytes, &file.path.display().to_string()) {
        Ok(p) => p,
        Err(e) => return no(e.to_string()),
    };
    let lacking: Vec<String> = published.tasks.iter().filter(|t| estimates_root.get(t.as_str()).is_none()).cloned().collect();
    if !lacking.is_empty() {
        return no(format!("The estimates file has no estimates for the published task(s) {}.", list(&lacking)));
    }
    let estimates = match parse_estimates(&setting.estimates.bytes, &setting.estimates.path.display().to_string(), &published.tasks) {
        Ok(e) => e,
        Err(e) => return no(e.to_string()),
    };
    let mut notes = String::new();
    let keys: Vec<&String> = if setting.published_models.is_empty() {
        published.models.iter().filter(|(_, m)| m.missing(&published.tasks).is_empty()).map(|(k, _)| k).collect()
    } else {
        let mut keys = Vec::new();
        for k in &setting.published_models {
            match published.models.get(k) {
                None => notes.push_str(&format!(" `{k}` is not a model of the results file.")),
                Some(m) if !m.missing(&published.tasks).is_empty() => {
                    notes.push_str(&format!(" `{k}` has no runs on {}: left out.", list(&m.missing(&published.tasks))));
                }
                Some(_) if !keys.contains(&k) => keys.push(k),
                Some(_) => {}
            }
        }
        keys.sort();
        keys
    };
    let rows = keys.par_iter().map(|k| row(k, &horizon(k, &published.models[*k].scores(&published.tasks), &estimates, setting.resamples))).collect();
    Some(section(format!("{PUBLISHED_TITLE}: the author's run scores, fitted the same way ({} resamples).{notes}", setting.resamples), rows))
}

/// `YYYY-MM-DD` as a fractional year, for the timeline's x axis.
fn year(date: &str) -> Option<f64> {
    #[expect(clippy::cast_precision_loss, reason = "day counts are far below 2^52")]
    super::tools::days(date).map(|d| 1970.0 + d as f64 / 365.2425)
}

/// The timeline: median time horizon against release date, the published models (grey, the
/// reference series) beside the pipeline's (in colour, each labelled); intervals are in the
/// tables. `None` without a fitted table.
#[must_use]
pub fn figure(input: &FigureInput<'_>) -> Option<Figure> {
    let setting = input.report.weirdml.as_ref()?;
    let own = input.sections.iter().find(|s| s.title.starts_with(OWN_TITLE) && !s.rows.is_empty())?;
    let median = COLUMNS.iter().position(|c| *c == "x50_q50")?;
    let mut series = Vec::new();
    if let Some(context) = input.sections.iter().find(|s| s.title.starts_with(PUBLISHED_TITLE))
        && let Some(published) = setting.published.as_ref().and_then(|f| parse_results(&f.bytes, "").ok())
    {
        let (mut points, mut labels) = (Vec::new(), Vec::new());
        for (key, values) in &context.rows {
            let Some(m) = published.models.get(key) else { continue };
            if let (Some(x), Some(y)) = (year(&m.release_date), values[median]) {
                points.push((x, y));
                labels.push(m.display_name.clone());
            }
        }
        series.push(Series { name: "published models".into(), points, labels, reference: true });
    }
    let (mut points, mut labels, mut undated) = (Vec::new(), Vec::new(), Vec::new());
    for (model, values) in &own.rows {
        match (setting.release_dates.get(model).and_then(|d| year(d)), values[median]) {
            (Some(x), Some(y)) => {
                points.push((x, y));
                labels.push(model.clone());
            }
            _ => undated.push(model.clone()),
        }
    }
    series.push(Series { name: "this pipeline".into(), points, labels, reference: false });
    let mut title = "WeirdML: time horizon (x50 median) against release date".to_owned();
    if !undated.is_empty() {
        title.push_str(&format!(" (not drawn, no date in `report.weirdml.release_dates`: {})", undated.join(", ")));
    }
    Some(Figure {
        id: "weirdml-timeline".into(),
        title,
        kind: FigureKind::Scatter,
        x_label: "release date (year)".into(),
        y_label: "time horizon x50 (log10 hours)".into(),
        series,
        diagonal: false,
    })
}
