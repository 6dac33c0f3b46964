//! The pipeline-level steps: metrics over every scored cell, then the
//! rendered report, each cached under its own key, then written to
//! `reports/<pipeline>/`.
//!
//! The metrics key covers exactly the cells that have a score, so a later
//! run that fills in failed cells re-aggregates; the report key covers the
//! metrics key and the report options, so editing only `report:` re-renders
//! without touching metrics or episodes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::early::{Early, Written};
use super::page::{PageInput, files as page_files, transcript_page};
use super::partial::write_if_changed;
use super::render::{ModelUsage, RunFacts, Section, csv, latex, markdown};
use crate::cache::{CacheError, DerivedError, Store};
use crate::envs::registry::{self, Registry};
use crate::envs::{ScoredCell, SectionInput};
use crate::exec::StepError;
use crate::metrics::{
    BenchmarkTables, CellRow, Comparison, MetricColumn, MetricsError, Planned, SuiteUnits, UnitRow, aggregate, cells_parquet, compare, comparisons_csv,
    fill_pooled, items_files, with_unit_columns,
};
use crate::plan::{Cell, Plan, StepKey, StepKind, metrics_components, report_components};
use crate::spec::Pipeline;

/// Errors while building a report.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// Cache failure.
    #[error(transparent)]
    Cache(#[from] CacheError),
    /// polars failure.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// A cached output had an unexpected shape.
    #[error("cached {0} output is malformed; run `evalgrid cache verify`")]
    Malformed(&'static str),
    /// A file of a cached report is missing from the cache or damaged; the report is
    /// rendered again rather than failing every later run.
    #[error("cached report file `{0}` is missing or damaged; run `evalgrid cache verify`")]
    MissingBlob(String),
    /// A benchmark could not compute its extra tables.
    #[error("benchmark tables: {0}")]
    Benchmark(String),
    /// Writing the report files failed.
    #[error("cannot write report file `{path}`")]
    Write {
        /// File.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
}

/// What the metrics step stores.
#[derive(Debug, Serialize, Deserialize)]
struct MetricsOutput {
    tables: Vec<BenchmarkTables>,
    cells_scored: usize,
    cells_parquet: String,
    /// Per model (pipeline order): Σ input tokens, Σ output tokens.
    tokens: Vec<(String, u64, u64)>,
    /// Extra tables: the model outcomes, then each benchmark's own.
    #[serde(default)]
    sections: Vec<Section>,
    /// The benchmark that made each section (empty for evalgrid's own).
    #[serde(default)]
    section_owners: Vec<String>,
    /// Per model id: the model ids the servers said answered its scored cells.
    #[serde(default)]
    answered_by: BTreeMap<String, Vec<String>>,
    /// Per model id that made calls (pipeline models and helpers such as the Eleusis rule
    /// compiler): input, cached input and output tokens of every answer the cells used.
    #[serde(default)]
    call_tokens: Vec<(String, u64, u64, u64)>,
    /// Per model id: the part of `call_tokens` paid at the batch price (input, cached,
    /// output of the answers read from a batch API).
    #[serde(default)]
    batch_tokens: Vec<(String, u64, u64, u64)>,
    /// Blob hashes of `items.csv` and `items.parquet` (one row per scored unit).
    #[serde(default)]
    items_csv: String,
    #[serde(default)]
    items_parquet: String,
    /// Every pair of models per suite and per-unit metric (`comparisons.csv`).
    #[serde(default)]
    comparisons: Vec<Comparison>,
    /// One line per judge that left replies without a grade (the summary's notes).
    #[serde(default)]
    judge_notes: Vec<String>,
}

/// What the report step stores: file name → blob hash, and transcript page → cell id.
#[derive(Debug, Serialize, Deserialize)]
struct ReportOutput {
    files: BTreeMap<String, String>,
    /// Rendered from the cells' cached episodes whenever the files are written, never
    /// stored twice: they are most of a report's bytes (every prompt and every answer).
    /// Reports cached before this field keep their transcript pages in `files`.
    #[serde(default)]
    transcripts: BTreeMap<String, String>,
}

/// Result of building a report.
#[derive(Debug, Serialize)]
pub struct ReportOutcome {
    /// Folder the files were written to.
    pub dir: PathBuf,
    /// Files written.
    pub files: Vec<String>,
    /// Whether the metrics step came from the cache.
    pub metrics_cached: bool,
    /// Whether the report step came from the cache.
    pub report_cached: bool,
}

/// Computes (or reuses) metrics and report for `plan`, and writes the files
/// under `reports_root/<pipeline name>/`. When a cached report names a file that is gone
/// from the cache (removed, or damaged and removed on read), metrics and report are
/// computed again once, so a damaged blob costs a re-render, not every later run.
pub fn build(pipeline: &Pipeline, plan: &Plan, store: &Store, reports_root: &Path) -> Result<ReportOutcome, ReportError> {
    build_after(pipeline, plan, store, reports_root, &Early::default())
}

/// [`build`], where the transcript pages in `early` were written during the run
/// ([`super::early::EarlyPages`]) and are not rendered again, nor the episodes whose call
/// tallies it read on the way read again.
pub fn build_after(pipeline: &Pipeline, plan: &Plan, store: &Store, reports_root: &Path, early: &Early) -> Result<ReportOutcome, ReportError> {
    let mut outcome = match build_once(pipeline, plan, store, (reports_root, early), false) {
        Err(ReportError::MissingBlob(name)) => {
            tracing::warn!("cached report file `{name}` is missing or damaged; computing metrics and report again");
            build_once(pipeline, plan, store, (reports_root, early), true)
        }
        other => other,
    }?;
    if let Some(file) = super::diff::write_diff_page(pipeline, plan, store, &outcome.dir) {
        outcome.files.push(file);
        outcome.files.sort();
    }
    Ok(outcome)
}

/// Every pair of models per suite and per-unit metric over the scored cells of `plan`,
/// as `comparisons.csv` holds them, computed from the cached scores without writing
/// anything (for `status --power`).
pub fn comparisons(pipeline: &Pipeline, plan: &Plan, store: &Store) -> Result<Vec<Comparison>, ReportError> {
    let read: Vec<Option<Value>> = plan.cells.par_iter().map(|cell| store.get(cell.score_key).map(|e| e.map(|e| e.output))).collect::<Result<_, _>>()?;
    let scored: Vec<(&Cell, Value)> = plan.cells.iter().zip(read).filter_map(|(c, v)| v.map(|v| (c, v))).collect();
    Ok(suite_units(pipeline, &suites_of(pipeline), &scored).iter().flat_map(compare).collect())
}

/// The units of `scored` per suite (pipeline order), as `items.csv` lists them.
pub(crate) fn units_of(pipeline: &Pipeline, scored: &[(&Cell, Value)]) -> Vec<SuiteUnits> {
    suite_units(pipeline, &suites_of(pipeline), scored)
}

/// The tasks of one suite, in pipeline order.
fn suite_tasks<'a>(pipeline: &'a Pipeline, suite: &str) -> Vec<&'a crate::spec::TaskInstance> {
    pipeline.tasks.iter().filter(|t| t.suite == suite).collect()
}

/// The pipeline's suites with their benchmarks, each once, in pipeline order.
#[must_use]
pub fn suites_of(pipeline: &Pipeline) -> Vec<(&str, &str)> {
    let mut suites: Vec<(&str, &str)> = Vec::new();
    for t in &pipeline.tasks {
        if !suites.iter().any(|(s, _)| *s == t.suite) {
            suites.push((&t.suite, &t.benchmark));
        }
    }
    suites
}

/// One attempt of [`build`]; `fresh` evicts the cached metrics and report entries first.
fn build_once(pipeline: &Pipeline, plan: &Plan, store: &Store, (reports_root, early): (&Path, &Early), fresh: bool) -> Result<ReportOutcome, ReportError> {
    // Reading and verifying entries is the bulk of the work on big grids;
    // rayon keeps the order (collect on an indexed iterator).
    let read: Vec<Option<Value>> = plan.cells.par_iter().map(|cell| store.get(cell.score_key).map(|e| e.map(|e| e.output))).collect::<Result<_, _>>()?;
    let scored: Vec<(&Cell, Value)> = plan.cells.iter().zip(read).filter_map(|(c, v)| v.map(|v| (c, v))).collect();
    let scored_cells: Vec<Cell> = scored.iter().map(|(c, _)| (*c).clone()).collect();
    let metrics_comp = metrics_components(pipeline, &plan.cells, &scored_cells);
    let metrics_key = StepKey::compute(&metrics_comp);
    let (metrics, metrics_cached) = store
        .cached_step((metrics_key, StepKind::Metrics, metrics_comp), fresh, || {
            compute_metrics(pipeline, plan, (&scored, &early.tallies), store, seed_of(metrics_key))
        })
        .map_err(derived("metrics"))?;
    let report_comp = report_components(pipeline, metrics_key);
    let report_key = StepKey::compute(&report_comp);
    // The files rendered by this call (transcript pages aside), so writing them out does
    // not read them back.
    let mut rendered: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let (report, report_cached) = store
        .cached_step((report_key, StepKind::Report, report_comp), fresh, || {
            let usage = usage_rows(pipeline, &metrics);
            let facts = RunFacts {
                cells_total: plan.cells.len(),
                cells_scored: metrics.cells_scored,
                usage: usage.clone(),
                warnings: super::page::warnings(pipeline).into_iter().chain(metrics.judge_notes.iter().cloned()).collect(),
                comparisons: metrics.comparisons.clone(),
            };
            rendered.insert("summary.md".to_owned(), markdown(&pipeline.report, &metrics.tables, &metrics.sections, &facts).into_bytes());
            rendered.insert("summary.csv".to_owned(), csv(&metrics.tables).into_bytes());
            rendered.insert("summary.tex".to_owned(), latex(&metrics.tables, &metrics.comparisons, pipeline.report.decimals).into_bytes());
            rendered.insert("comparisons.csv".to_owned(), comparisons_csv(&metrics.comparisons).into_bytes());
            rendered.insert(super::diff::KEYS_CSV.to_owned(), super::diff::keys_csv(&scored).into_bytes());
            let input = PageInput {
                tables: &metrics.tables,
                sections: &metrics.sections,
                section_owners: &metrics.section_owners,
                scored: &scored,
                usage,
                answered_by: &metrics.answered_by,
                comparisons: &metrics.comparisons,
                notes: &metrics.judge_notes,
            };
            let pages = page_files(pipeline, plan, &input, store)?;
            rendered.extend(pages.files);
            let mut files: BTreeMap<String, String> =
                rendered.par_iter().map(|(name, bytes)| Ok((name.clone(), store.put_blob(bytes)?))).collect::<Result<_, CacheError>>()?;
            files.insert("cells.parquet".to_owned(), metrics.cells_parquet.clone());
            files.insert("items.csv".to_owned(), metrics.items_csv.clone());
            files.insert("items.parquet".to_owned(), metrics.items_parquet.clone());
            Ok::<_, ReportError>(ReportOutput { files, transcripts: pages.transcripts })
        })
        .map_err(derived("report"))?;
    let dir = reports_root.join(&pipeline.name);
    write_files(&dir, &report, (&rendered, &early.pages), (pipeline, plan), store)?;
    let files: std::collections::BTreeSet<&String> = report.files.keys().chain(report.transcripts.keys()).collect();
    Ok(ReportOutcome { dir, files: files.into_iter().cloned().collect(), metrics_cached, report_cached })
}

/// Tokens and cost per model: from the answers the cells used (cached input priced apart
/// where the provider reported it), else from the score records; then one line per
/// helper model that is not a pipeline model (the Eleusis rule compiler), priced from
/// `report.prices`.
fn usage_rows(pipeline: &Pipeline, metrics: &MetricsOutput) -> Vec<ModelUsage> {
    let mut rows = Vec::new();
    for (model, input, output) in &metrics.tokens {
        let price = pipeline.models.iter().find(|m| &m.id == model).and_then(|m| m.price);
        let (input, cached, output) = match metrics.call_tokens.iter().find(|(m, ..)| m == model) {
            Some((_, i, c, o)) => (*i, *c, *o),
            None => (*input, 0, *output),
        };
        if input + output > 0 {
            let (cost_usd, batch_saved_usd) = price.map(|p| priced(&p, model, (input, cached, output), &metrics.batch_tokens)).unzip();
            rows.push(ModelUsage { model: model.clone(), input_tokens: input, output_tokens: output, cost_usd, batch_saved_usd });
        }
    }
    for (model, input, cached, output) in &metrics.call_tokens {
        if input + output > 0 && !pipeline.models.iter().any(|m| &m.id == model) {
            let (cost_usd, batch_saved_usd) =
                pipeline.report.prices.get(model).map(|p| priced(p, model, (*input, *cached, *output), &metrics.batch_tokens)).unzip();
            rows.push(ModelUsage { model: model.clone(), input_tokens: *input, output_tokens: *output, cost_usd, batch_saved_usd });
        }
    }
    rows
}

/// What `model`'s answers cost: the part read from a batch API (`batch`) at the batch
/// price, the rest at `price`; and what the batched part saved against `price`.
fn priced(price: &crate::spec::Price, model: &str, (input, cached, output): (u64, u64, u64), batch: &[(String, u64, u64, u64)]) -> (f64, f64) {
    let (b_in, b_cached, b_out) = batch.iter().find(|(m, ..)| m == model).map_or((0, 0, 0), |(_, i, c, o)| (*i, *c, *o));
    let (b_in, b_cached, b_out) = (b_in.min(input), b_cached.min(cached), b_out.min(output));
    let batched = price.batched().cost(b_in, b_cached, b_out);
    (price.cost(input - b_in, cached - b_cached, output - b_out) + batched, price.cost(b_in, b_cached, b_out) - batched)
}

/// A derived step's failure as the report's: its output named when malformed.
fn derived(what: &'static str) -> impl Fn(DerivedError<ReportError>) -> ReportError {
    move |error| match error {
        DerivedError::Cache(error) => ReportError::Cache(error),
        DerivedError::Malformed => ReportError::Malformed(what),
        DerivedError::Compute(error) => error,
    }
}

/// The bootstrap's seed: the metrics key, so the same cache gives the same report (the
/// report key is derived from it; report options cannot change an interval).
fn seed_of(key: StepKey) -> u64 {
    u64::from_str_radix(&key.to_hex()[..16], 16).unwrap_or(0)
}

/// One [`SuiteUnits`] per suite (pipeline order), filled with every scored cell's units as
/// its benchmark lists them: the rows of `items.csv` (exports read the same rows).
#[must_use]
pub fn suite_units(pipeline: &Pipeline, suites: &[(&str, &str)], scored: &[(&Cell, Value)]) -> Vec<SuiteUnits> {
    let models: Vec<String> = pipeline.models.iter().map(|m| m.id.clone()).collect();
    let tasks: Vec<String> = pipeline.tasks.iter().map(|t| t.task.clone()).collect();
    let mut out: Vec<SuiteUnits> = suites
        .iter()
        .map(|(suite, benchmark)| SuiteUnits {
            suite: (*suite).to_owned(),
            metrics: registry::get(benchmark).map(|b| b.unit_metrics_for(&suite_tasks(pipeline, suite))).unwrap_or_default(),
            models: models.clone(),
            tasks: tasks.clone(),
            rows: Vec::new(),
        })
        .collect();
    for (cell, score) in scored {
        let task = &pipeline.tasks[cell.task];
        let (Some(i), Some(bench)) = (suites.iter().position(|(s, _)| *s == task.suite), registry::get(&task.benchmark)) else { continue };
        for unit in bench.units_for(score, &out[i].metrics) {
            out[i].rows.push(UnitRow {
                model_index: u32::try_from(cell.model).unwrap_or(u32::MAX),
                task_index: u32::try_from(cell.task).unwrap_or(u32::MAX),
                seed: cell.seed,
                item: unit.item,
                id: unit.id,
                values: unit.values,
            });
        }
    }
    out
}

fn compute_metrics(
    pipeline: &Pipeline,
    plan: &Plan,
    (scored, tallies): (&[(&Cell, Value)], &Tallies),
    store: &Store,
    seed: u64,
) -> Result<MetricsOutput, ReportError> {
    let rows: Vec<CellRow> = scored
        .iter()
        .map(|(cell, output)| {
            let task = &pipeline.tasks[cell.task];
            CellRow {
                model: pipeline.models[cell.model].id.clone(),
                model_index: u32::try_from(cell.model).unwrap_or(u32::MAX),
                benchmark: task.suite.clone(),
                task: task.task.clone(),
                task_index: u32::try_from(cell.task).unwrap_or(u32::MAX),
                seed: cell.seed,
                fields: numeric_fields(output),
            }
        })
        .collect();
    // One table per suite, in pipeline order; a suite belongs to one benchmark.
    let suites = suites_of(pipeline);
    let units = suite_units(pipeline, &suites, scored);
    let mut tables = Vec::new();
    let mut all_columns: Vec<MetricColumn> = Vec::new();
    let mut comparisons = Vec::new();
    for (units, (suite, benchmark)) in units.iter().zip(suites) {
        let columns: Vec<MetricColumn> = Registry::metric_defs_for(benchmark, &suite_tasks(pipeline, suite))
            .into_iter()
            .filter(|m| pipeline.metrics.select.is_empty() || pipeline.metrics.select.contains(&m.name))
            .collect();
        let columns = with_unit_columns(columns, &units.metrics);
        let subset: Vec<&CellRow> = rows.iter().filter(|r| r.benchmark == suite).collect();
        if !subset.is_empty() {
            let mut planned = Planned::default();
            for c in plan.cells.iter().filter(|c| pipeline.tasks[c.task].suite == suite) {
                let model = &pipeline.models[c.model].id;
                planned.add(u32::try_from(c.model).unwrap_or(u32::MAX), model, &pipeline.tasks[c.task].task);
            }
            let mut table = aggregate(suite, &subset, &columns, &planned)?;
            fill_pooled(&mut table, units, seed);
            tables.push(table);
            comparisons.extend(compare(units));
        }
        for c in columns {
            if !all_columns.contains(&c) {
                all_columns.push(c);
            }
        }
    }
    let all: Vec<&CellRow> = rows.iter().collect();
    // Encoding the Parquet and CSV files is CPU work; reading the episodes' call tallies
    // is mostly waiting on the cache: side by side, neither waits for the other.
    let (files, outcomes) = rayon::join(
        || -> Result<_, ReportError> { Ok((cells_parquet(&all, &all_columns)?, items_files(&units)?)) },
        || outcome_sections(scored, tallies, store),
    );
    let (parquet, (items_csv, items_parquet)) = files?;
    let tokens = pipeline
        .models
        .iter()
        .map(|m| {
            let sum = |field: &str| -> u64 {
                #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "token counts are non-negative integers")]
                rows.iter().filter(|r| r.model == m.id).filter_map(|r| r.fields.get(field)).map(|v| *v as u64).fold(0, u64::saturating_add)
            };
            (m.id.clone(), sum("input_tokens"), sum("output_tokens"))
        })
        .collect();
    let (mut outcomes, answered_by, call_tokens, batch_tokens) = outcomes?;
    let judged = judge_counts(pipeline, scored);
    no_grade_column(&mut outcomes, &judged);
    let judge_notes = judge_notes(&judged);
    let mut section_owners = vec![String::new(); outcomes.len()];
    let mut sections = outcomes;
    for (owner, section) in benchmark_sections(pipeline, plan, scored, store)? {
        section_owners.push(owner);
        sections.push(section);
    }
    Ok(MetricsOutput {
        tables,
        cells_scored: rows.len(),
        cells_parquet: store.put_blob(&parquet)?,
        tokens,
        sections,
        section_owners,
        answered_by,
        call_tokens,
        batch_tokens,
        items_csv: store.put_blob(&items_csv)?,
        items_parquet: store.put_blob(&items_parquet)?,
        comparisons,
        judge_notes,
    })
}

/// Per judge scorer and answering model: replies with no grade, and replies.
type JudgeCounts = BTreeMap<(String, String), (u64, u64)>;

/// How many of each model's answers each judge graded, from the scored cells' records.
fn judge_counts(pipeline: &Pipeline, scored: &[(&Cell, Value)]) -> JudgeCounts {
    let mut out = JudgeCounts::new();
    for (cell, score) in scored {
        let task = &pipeline.tasks[cell.task];
        let Some(bench) = registry::get(&task.benchmark) else { continue };
        for (scorer, ungraded, replies) in bench.ungraded(task, score) {
            let entry = out.entry((scorer, pipeline.models[cell.model].id.clone())).or_default();
            entry.0 += ungraded;
            entry.1 += replies;
        }
    }
    out
}

/// The outcomes table's `no grade` column, where the grid has a judge: per model, the
/// judges' replies to its answers that gave no grade; on the judges' own row, all of them.
fn no_grade_column(sections: &mut [Section], judged: &JudgeCounts) {
    let Some(outcomes) = sections.first_mut() else { return };
    if judged.is_empty() {
        return;
    }
    #[expect(clippy::cast_precision_loss, reason = "reply counts are far below 2^52")]
    let of = |model: Option<&str>| -> Option<f64> {
        let mine: Vec<u64> = judged.iter().filter(|((_, m), _)| model.is_none_or(|x| x == m)).map(|(_, (n, _))| *n).collect();
        (!mine.is_empty()).then(|| mine.iter().sum::<u64>() as f64)
    };
    outcomes.columns.push("no grade".to_owned());
    for (label, values) in &mut outcomes.rows {
        let value = if label == crate::envs::JUDGE_ID { of(None) } else { of(Some(label)) };
        values.push(value);
    }
    outcomes.title.push_str(
        "; no grade = judge replies without a usable `GRADE:` to the model's answers (on the judge's row, all of them): those units have no judge value",
    );
}

/// The summary's note for each judge that left replies without a grade, per model.
fn judge_notes(judged: &JudgeCounts) -> Vec<String> {
    let mut per_judge: BTreeMap<&str, Vec<(&str, u64, u64)>> = BTreeMap::new();
    for ((scorer, model), (ungraded, replies)) in judged {
        per_judge.entry(scorer).or_default().push((model, *ungraded, *replies));
    }
    per_judge
        .into_iter()
        .filter_map(|(scorer, models)| {
            let ungraded: u64 = models.iter().map(|m| m.1).sum();
            let replies: u64 = models.iter().map(|m| m.2).sum();
            (ungraded > 0).then(|| {
                let each: Vec<String> = models.iter().map(|(m, n, of)| format!("{m} {n} of {of}")).collect();
                format!(
                    "judge `{scorer}` gave no grade in {ungraded} of {replies} replies ({}): those units have no `{scorer}` value and are left out of its mean. Read the replies with `evalgrid show`; a judge that never writes `GRADE:` needs another model or rubric.",
                    each.join(", ")
                )
            })
        })
        .collect()
}

/// What the models did in the scored cells' calls (issue 12): the share of answers cut at
/// the token limit, filtered, refused or malformed, and the answers with no usage reported
/// (their tokens and cost read 0). Each benchmark has already scored these by its rules.
/// Episode key → the `call_outcomes` of its record, where already read ([`Early::tallies`]).
type Tallies = std::collections::HashMap<crate::plan::StepKey, Option<Value>>;

type Outcomes = (Vec<Section>, BTreeMap<String, Vec<String>>, Vec<(String, u64, u64, u64)>, Vec<(String, u64, u64, u64)>);

fn outcome_sections(scored: &[(&Cell, Value)], tallies: &Tallies, store: &Store) -> Result<Outcomes, ReportError> {
    use crate::exec::runner::{LENGTH_INFERRED, OUTCOME_FIELDS};
    /// The one field of an episode record read here (the rest is skipped unparsed).
    #[derive(Deserialize)]
    struct Tally {
        #[serde(default)]
        call_outcomes: Option<Value>,
    }
    // Episodes whose tally the early page writer already read are not read again.
    let read: Vec<Option<Value>> = scored
        .par_iter()
        .map(|(c, _)| match tallies.get(&c.episode_key) {
            Some(tally) => Ok(tally.clone()),
            None => store.get_output::<Tally>(c.episode_key).map(|t| t.and_then(|t| t.call_outcomes)),
        })
        .collect::<Result<_, _>>()?;
    let mut totals: Vec<(String, BTreeMap<String, u64>, Vec<u64>)> = Vec::new();
    let mut answered_by: BTreeMap<String, Vec<String>> = BTreeMap::new();
    // The outcome classes counted, `context_exceeded` (a prompt longer than the model's
    // context) included whether or not the tally lists it yet.
    let mut fields: Vec<&str> = OUTCOME_FIELDS.to_vec();
    for extra in [
        CONTEXT_EXCEEDED,
        LENGTH_INFERRED,
        "input_tokens",
        "cached_tokens",
        "output_tokens",
        "batch_input_tokens",
        "batch_cached_tokens",
        "batch_output_tokens",
    ] {
        if !fields.contains(&extra) {
            fields.push(extra);
        }
    }
    for tally in read.into_iter().flatten() {
        let Some(models) = tally.as_object() else { continue };
        for (model, counts) in models {
            let i = match totals.iter().position(|(m, ..)| m == model) {
                Some(i) => i,
                None => {
                    totals.push((model.clone(), BTreeMap::new(), Vec::new()));
                    totals.len() - 1
                }
            };
            for field in &fields {
                let total = totals[i].1.entry((*field).to_owned()).or_default();
                *total = total.saturating_add(counts.get(*field).and_then(Value::as_u64).unwrap_or(0));
            }
            totals[i].2.extend(counts.get("latency_ms").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_u64));
            let ids = answered_by.entry(model.clone()).or_default();
            for id in counts.get("answered_by").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
                if !ids.iter().any(|known| known == id) {
                    ids.push(id.to_owned());
                }
            }
            ids.sort();
        }
    }
    if totals.is_empty() {
        return Ok((Vec::new(), answered_by, Vec::new(), Vec::new()));
    }
    let call_tokens = totals.iter().map(|(m, c, _)| (m.clone(), c["input_tokens"], c["cached_tokens"], c["output_tokens"])).collect();
    let batch_tokens = totals
        .iter()
        .filter(|(_, c, _)| c["batch_input_tokens"] + c["batch_output_tokens"] > 0)
        .map(|(m, c, _)| (m.clone(), c["batch_input_tokens"], c["batch_cached_tokens"], c["batch_output_tokens"]))
        .collect();
    let columns =
        ["answers", "truncated %", "filtered %", "refused %", "context_exceeded %", "malformed %", "no_usage", "median latency (s)", "output tokens/s"]
            .map(str::to_owned)
            .to_vec();
    let exceeded: u64 = totals.iter().map(|(_, c, _)| c.get(CONTEXT_EXCEEDED).copied().unwrap_or(0)).sum();
    let inferred: Vec<(String, u64)> =
        totals.iter().filter_map(|(m, c, _)| c.get(LENGTH_INFERRED).copied().filter(|n| *n > 0).map(|n| (m.clone(), n))).collect();
    #[expect(clippy::cast_precision_loss, reason = "call counts and milliseconds are far below 2^52")]
    let rows = totals
        .into_iter()
        .map(|(model, c, mut times)| {
            let n = c["answers"] as f64;
            let share = |f: &str| (n > 0.0).then(|| c[f] as f64 / n);
            // Answers recorded before episodes kept their times have none: no figure, not 0.
            times.sort_unstable();
            let median = (!times.is_empty()).then(|| {
                let mid = times.len() / 2;
                let ms = if times.len() % 2 == 1 { times[mid] as f64 } else { (times[mid - 1] + times[mid]) as f64 / 2.0 };
                ms / 1000.0
            });
            let seconds = times.iter().sum::<u64>() as f64 / 1000.0;
            let rate = (seconds > 0.0 && times.len() as f64 == n).then(|| c["output_tokens"] as f64 / seconds);
            let values = vec![
                Some(n),
                share("length"),
                share("content_filter"),
                share("refusal"),
                share(CONTEXT_EXCEEDED),
                share("malformed"),
                Some(c["no_usage"] as f64),
                median,
                rate,
            ];
            (model, values)
        })
        .collect();
    Ok((vec![Section { title: outcomes_title(exceeded, &inferred), columns, rows }], answered_by, call_tokens, batch_tokens))
}

/// The outcomes table's title; with answers whose prompt did not fit, it says how to ask
/// them again once the model is served with a larger context.
fn outcomes_title(exceeded: u64, inferred: &[(String, u64)]) -> String {
    let mut title = "model outcomes (% of answers; no_usage = answers without reported usage, counted as 0 tokens; output tokens/s = output tokens over the answers' summed wall time)".to_owned();
    if !inferred.is_empty() {
        let each: Vec<String> = inferred.iter().map(|(m, n)| format!("{m} {n}")).collect();
        title.push_str(&format!(
            "; truncated % includes answers inferred as truncated: the server said completed but the output tokens equal the cap (max_tokens) ({})",
            each.join(", ")
        ));
    }
    if exceeded > 0 {
        title.push_str(&format!(
            "; {exceeded} answer(s) context_exceeded: the prompt did not fit the model's context window, scored by each benchmark's rules. Serve the model with a larger context, then `evalgrid run <pipeline> --retry-outcome context_exceeded` asks exactly those calls again"
        ));
    }
    title
}

/// The finish class of an answer refused because the prompt did not fit the model's
/// context (issue 23), read from the tally like `length` (truncated).
const CONTEXT_EXCEEDED: &str = "context_exceeded";

/// Each benchmark's extra tables over its scored cells (e.g. Eleusis' spec §5 metrics),
/// with the benchmark that made each, in pipeline order.
fn benchmark_sections(pipeline: &Pipeline, plan: &Plan, scored: &[(&Cell, Value)], store: &Store) -> Result<Vec<(String, Section)>, ReportError> {
    let mut out = Vec::new();
    for name in pipeline.benchmarks() {
        let Some(bench) = registry::get(name) else { continue };
        let mine: Vec<&(&Cell, Value)> = scored.iter().filter(|(c, _)| pipeline.tasks[c.task].benchmark == name).collect();
        if mine.is_empty() {
            continue;
        }
        let cells: Vec<ScoredCell<'_>> = mine
            .iter()
            .map(|(c, v)| ScoredCell { model: &pipeline.models[c.model].id, task: pipeline.tasks[c.task].qualified(), seed: c.seed, score: v })
            .collect();
        let planned = |model: &str| plan.cells.iter().filter(|c| pipeline.tasks[c.task].benchmark == name && pipeline.models[c.model].id == model).count();
        let episode = |i: usize| store.get(mine[i].0.episode_key).map(|e| e.map(|e| e.output)).map_err(StepError::episode);
        let input = SectionInput { models: &pipeline.models, cells, planned: &planned, episode: &episode, report: &pipeline.report };
        let sections = bench.sections(&input).map_err(|e| ReportError::Benchmark(e.to_string()))?;
        out.extend(sections.into_iter().map(|s| (name.to_owned(), s)));
    }
    Ok(out)
}

/// Numbers and booleans at the top level of a score record, as f64.
fn numeric_fields(output: &Value) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    if let Some(map) = output.as_object() {
        for (k, v) in map {
            let x = match v {
                Value::Bool(b) => Some(f64::from(u8::from(*b))),
                Value::Number(n) => n.as_f64(),
                _ => None,
            };
            if let Some(x) = x {
                out.insert(k.clone(), x);
            }
        }
    }
    out
}

/// Writes the report's files into `dir` (each only when it changed), all cores at once:
/// those `rendered` by this call as they are, blobs from the cache, and transcript pages
/// rendered from their cells' episodes one at a time (never all in memory).
fn write_files(
    dir: &Path,
    report: &ReportOutput,
    (rendered, early): (&BTreeMap<String, Vec<u8>>, &Written),
    (pipeline, plan): (&Pipeline, &Plan),
    store: &Store,
) -> Result<(), ReportError> {
    let write_err = |path: &Path| {
        let path = path.to_owned();
        move |source| ReportError::Write { path, source }
    };
    std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    // A rerun that changed cells keeps the folder's run in `previous/` for `evalgrid diff`.
    if let Some(hash) = report.files.get(super::diff::KEYS_CSV) {
        let keys = match rendered.get(super::diff::KEYS_CSV) {
            Some(bytes) => std::borrow::Cow::Borrowed(bytes),
            None => std::borrow::Cow::Owned(store.get_blob(hash)?.ok_or_else(|| ReportError::MissingBlob(super::diff::KEYS_CSV.to_owned()))?),
        };
        super::diff::keep_previous(dir, &keys).map_err(write_err(&dir.join(super::diff::PREVIOUS_DIR)))?;
    }
    let cells: BTreeMap<&str, &Cell> = plan.cells.iter().map(|c| (c.id.as_str(), c)).collect();
    let blobs = report.files.iter().map(|(name, hash)| (name, Source::Blob(hash)));
    // A page written during the run for the same cell is these bytes already.
    let pages = report.transcripts.iter().filter(|(name, cell)| early.get(*name) != Some(*cell)).map(|(name, cell)| (name, Source::Transcript(cell)));
    let jobs: Vec<(&String, Source<'_>)> = blobs.chain(pages).collect();
    let folders: Vec<&str> = report.files.keys().chain(report.transcripts.keys()).map(String::as_str).collect();
    jobs.into_par_iter().try_for_each(|(name, source)| {
        let read;
        let bytes = match (rendered.get(name), source) {
            (Some(bytes), _) => bytes,
            (None, Source::Blob(hash)) => {
                read = store.get_blob(hash)?.ok_or_else(|| ReportError::MissingBlob(name.clone()))?;
                &read
            }
            (None, Source::Transcript(cell)) => {
                let cell = cells.get(cell.as_str()).ok_or(ReportError::Malformed("transcript cell"))?;
                read = transcript_page(pipeline, cell, store)?;
                &read
            }
        };
        write_if_changed(&dir.join(name), bytes).map_err(|(path, source)| ReportError::Write { path, source })
    })?;
    // What a run killed mid-write left here is no file of any report.
    super::partial::sweep(dir, folders);
    Ok(())
}

/// Where a report file's bytes come from when this call did not render it.
#[derive(Clone, Copy)]
enum Source<'a> {
    /// A cache blob, by hash.
    Blob(&'a String),
    /// A transcript page, by the id of its cell.
    Transcript(&'a String),
}
