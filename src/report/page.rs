//! Builds the HTML report's inputs from cached results: the figures each
//! benchmark's findings are read from, the per-cell table with transcript
//! links, and the provenance block; returns every file to write.

use std::collections::BTreeMap;

use serde_json::Value;

use super::html::{CellLine, CellState, HtmlReport, Transcript, render_html, render_transcript_html};
use super::render::{ModelUsage, Section};
use super::svg::{Figure, figure_csv, figure_file_stem, figure_svg};
use crate::cache::{CacheError, Store};
use crate::envs::registry;
use crate::envs::{FigureInput, ScoredCell, transcript};
use crate::exhibit::{RowView, TableView};
use crate::metrics::BenchmarkTables;
use crate::plan::{Cell, Plan};
use crate::spec::Pipeline;

/// Grids larger than this get no per-cell transcript pages (the cells table
/// and `evalgrid show` still cover every cell).
pub(crate) const MAX_TRANSCRIPT_PAGES: usize = 5_000;

/// Everything the page needs besides the pipeline and plan.
pub struct PageInput<'a> {
    /// Aggregate tables.
    pub tables: &'a [BenchmarkTables],
    /// Extra tables (model outcomes, then each benchmark's own).
    pub sections: &'a [Section],
    /// The benchmark that made each section (empty for evalgrid's own).
    pub section_owners: &'a [String],
    /// Scored cells with their score records.
    pub scored: &'a [(&'a Cell, Value)],
    /// Tokens and cost.
    pub usage: Vec<ModelUsage>,
    /// Per model id: the model ids the servers said answered.
    pub answered_by: &'a std::collections::BTreeMap<String, Vec<String>>,
    /// Paired model comparisons, for the ties with the best and the pairwise matrices.
    pub comparisons: &'a [crate::metrics::Comparison],
    /// Notes shown with the warnings (a judge that left replies without a grade).
    pub notes: &'a [String],
}

/// The report's rendered files, and the transcript pages it links.
pub struct PageFiles {
    /// (relative path, bytes) of every file but the transcript pages, in path order.
    pub files: Vec<(String, Vec<u8>)>,
    /// Transcript page path → the id of the cell it shows. The pages are rendered from the
    /// cells' cached episodes as they are written ([`transcript_page`]), never kept whole
    /// in memory or stored again: they are most of a report's bytes.
    pub transcripts: BTreeMap<String, String>,
}

/// Where a cell's transcript page lives in the report.
pub(crate) fn transcript_path(cell: &Cell) -> String {
    format!("transcripts/{}.html", cell.episode_key.short())
}

/// A cell's transcript page, rendered from its cached episode; a page saying so when the
/// episode is no longer in the cache (the link on the index never dangles).
pub fn transcript_page(pipeline: &Pipeline, cell: &Cell, store: &Store) -> Result<Vec<u8>, CacheError> {
    Ok(transcript_page_of(pipeline, cell, store.get(cell.episode_key)?.as_ref().map(|e| &e.output)))
}

/// [`transcript_page`] of an episode record already read (`None`: not in the cache).
pub(super) fn transcript_page_of(pipeline: &Pipeline, cell: &Cell, episode: Option<&Value>) -> Vec<u8> {
    let benchmark = &pipeline.tasks[cell.task].benchmark;
    let text = match episode {
        Some(output) => transcript(benchmark, output),
        None => "This cell's episode is no longer in the cache (removed or damaged); `evalgrid run` computes it again.".to_owned(),
    };
    render_transcript_html(&cell.id, &text).into_bytes()
}

/// Renders `index.html`, `cells.csv`, figure SVG/CSV files and transcript
/// pages, in a stable order.
pub fn files(pipeline: &Pipeline, plan: &Plan, input: &PageInput<'_>, store: &Store) -> Result<PageFiles, CacheError> {
    let mut out = Vec::new();
    let figures = figures(pipeline, input);
    for f in &figures {
        let stem = figure_file_stem(&f.id);
        out.push((format!("figures/{stem}.svg"), figure_svg(f).into_bytes()));
        out.push((format!("figures/{stem}.csv"), figure_csv(f).into_bytes()));
    }
    let scored: BTreeMap<&str, &Value> = input.scored.iter().map(|(c, v)| (c.id.as_str(), v)).collect();
    let with_pages = plan.cells.len() <= MAX_TRANSCRIPT_PAGES;
    let mut transcripts = BTreeMap::new();
    let mut cells = Vec::with_capacity(plan.cells.len());
    let mut cells_csv = String::from("cell,model,task,seed,state,episode_key,score_key\n");
    for cell in &plan.cells {
        let model = &pipeline.models[cell.model];
        let task = &pipeline.tasks[cell.task];
        let score = scored.get(cell.id.as_str());
        let state = if score.is_some() { CellState::Ok } else { CellState::Failed };
        let transcript_link = if with_pages && score.is_some() && store.contains(cell.episode_key) {
            let path = transcript_path(cell);
            transcripts.insert(path.clone(), cell.id.clone());
            Transcript::Link(path)
        } else {
            Transcript::None
        };
        cells_csv.push_str(&format!(
            "{},{},{},{},{},{},{}\n",
            cell.id,
            model.id,
            task.qualified(),
            cell.seed,
            if score.is_some() { "ok" } else { "missing" },
            cell.episode_key.to_hex(),
            cell.score_key.to_hex()
        ));
        cells.push(CellLine {
            id: cell.id.clone(),
            model: model.id.clone(),
            task: task.qualified(),
            seed: cell.seed,
            state,
            headline: score.map(|s| headline(&task.benchmark, s)).unwrap_or_default(),
            transcript: transcript_link,
            keys: format!("episode {} · score {}", cell.episode_key.short(), cell.score_key.short()),
        });
    }
    out.push(("cells.csv".to_owned(), cells_csv.into_bytes()));
    let links: BTreeMap<String, String> = transcripts.iter().map(|(path, cell)| (cell.clone(), path.clone())).collect();
    let items = super::items::suite_items(pipeline, plan, input.scored, &super::items_page::safe_links(&links));
    let item_pages: Vec<(String, String)> = items.iter().map(|i| (i.suite.clone(), super::items_page::items_file(&i.suite))).collect();
    let report = HtmlReport {
        title: &pipeline.report.title,
        tables: input.tables,
        figures,
        cells,
        provenance: provenance(pipeline, plan, input),
        usage: input.usage.clone(),
        decimals: pipeline.report.decimals,
        warnings: warnings(pipeline).into_iter().chain(input.notes.iter().cloned()).collect(),
        sections: input.sections,
        comparisons: input.comparisons,
        item_pages,
    };
    // The item pages (most of the report's rendering on a big grid) beside the index.
    let render_items = || -> Vec<(String, Vec<u8>)> {
        use rayon::prelude::*;
        items
            .par_iter()
            .map(|i| (super::items_page::items_file(&i.suite), super::items_page::render_items_page(&pipeline.report.title, i).into_bytes()))
            .collect()
    };
    let (pages, index) = rayon::join(render_items, || render_html(&report).into_bytes());
    out.extend(pages);
    out.push(("index.html".to_owned(), index));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(PageFiles { files: out, transcripts })
}

/// First-screen warnings: model-written code that may have run without bubblewrap.
#[must_use]
pub fn warnings(pipeline: &Pipeline) -> Vec<String> {
    let runs_code = pipeline.models.iter().any(|m| pipeline.tasks.iter().any(|t| crate::envs::Registry::runs_model_code(&t.benchmark, m)));
    if pipeline.sandbox == crate::spec::SandboxMode::None && runs_code {
        vec!["sandbox opt-out (`sandbox: none` / --unsafe-no-sandbox): where bubblewrap was missing, model-written code ran with resource limits only, without network or filesystem isolation.".to_owned()]
    } else {
        Vec::new()
    }
}

/// One short number per cell for the cells table.
fn headline(benchmark: &str, score: &Value) -> String {
    let bench = registry::get(benchmark);
    if let Some(line) = bench.and_then(|b| b.cell_headline(score)) {
        return line;
    }
    let Some(field) = bench.and_then(|b| b.headline_field()) else {
        return String::new();
    };
    match &score[field] {
        Value::Number(n) => format!("{field} {n}"),
        Value::Bool(b) => format!("{field} {b}"),
        _ => String::new(),
    }
}

fn provenance(pipeline: &Pipeline, plan: &Plan, input: &PageInput<'_>) -> Vec<(String, String)> {
    let mut p = vec![
        ("evalgrid".to_owned(), format!("{} ({})", env!("CARGO_PKG_VERSION"), option_env!("EVALGRID_GIT_COMMIT").unwrap_or("commit unknown"))),
        ("pipeline file".to_owned(), pipeline.source_path.display().to_string()),
        ("pipeline blake3".to_owned(), pipeline.source_hash.clone()),
        (
            "cells".to_owned(),
            format!("{} planned, {} scored, {} without a result", plan.cells.len(), input.scored.len(), plan.cells.len() - input.scored.len()),
        ),
    ];
    for m in &pipeline.models {
        // A served model is its weights and engine; its URL was a port of one run.
        let url = match &m.serve {
            Some(serve) => {
                let identity = serve.identity.as_ref();
                let weights =
                    identity.and_then(|i| i.weights.as_deref()).map_or_else(|| serve.written.clone(), |w| format!("blake3 {}", &w[..w.len().min(16)]));
                format!("served by {} {}, weights {weights}", serve.engine, identity.map_or("", |i| i.engine_version.as_str()))
            }
            None => m.base_url.as_deref().unwrap_or("default endpoint").to_owned(),
        };
        let mut line = format!("{} `{}` ({url})", m.provider, m.model);
        // Snapshots (and, where accepted, other models) that answered, as the server said.
        let answered: Vec<&String> = input.answered_by.get(&m.id).into_iter().flatten().filter(|id| **id != m.model).collect();
        if !answered.is_empty() {
            let ids: Vec<String> = answered.iter().map(|id| format!("`{id}`")).collect();
            line.push_str(&format!(", answered as {}", ids.join(", ")));
        }
        for b in pipeline.benchmarks() {
            let added = crate::envs::Registry::injected_params(b, m);
            if !added.is_empty() {
                line.push_str(&format!("; {b} adds {}", added.join(", ")));
            }
        }
        p.push((format!("model {}", m.id), line));
    }
    for t in &pipeline.tasks {
        p.push((format!("task {}", t.qualified()), format!("content blake3 {}", &t.content_hash[..t.content_hash.len().min(16)])));
    }
    p
}

/// Figures per benchmark, drawn by the benchmark from its tables, sections and scores.
fn figures(pipeline: &Pipeline, input: &PageInput<'_>) -> Vec<Figure> {
    let mut out = Vec::new();
    for name in pipeline.benchmarks() {
        let Some(bench) = registry::get(name) else { continue };
        let suites: Vec<&str> = pipeline.tasks.iter().filter(|t| t.benchmark == name).map(|t| t.suite.as_str()).collect();
        let tables = input.tables.iter().filter(|t| suites.contains(&t.benchmark.as_str())).map(table_view).collect();
        let sections = input.sections.iter().zip(input.section_owners).filter(|(_, owner)| *owner == name).map(|(s, _)| s).collect();
        let cells = input
            .scored
            .iter()
            .filter(|(c, _)| pipeline.tasks[c.task].benchmark == name)
            .map(|(c, v)| ScoredCell { model: &pipeline.models[c.model].id, task: pipeline.tasks[c.task].qualified(), seed: c.seed, score: v })
            .collect();
        out.extend(bench.figures(&FigureInput { models: &pipeline.models, tables, sections, cells, report: &pipeline.report }));
    }
    out
}

/// A summary table as plain numbers for a benchmark's figure code.
fn table_view(t: &BenchmarkTables) -> TableView {
    let row = |r: &crate::metrics::TableRow| RowView { model: r.model.clone(), task: r.task.clone(), values: r.values.clone() };
    TableView {
        suite: t.benchmark.clone(),
        columns: t.columns.iter().map(|c| c.name.clone()).collect(),
        by_model: t.by_model.iter().map(row).collect(),
        by_task: t.by_task.iter().map(row).collect(),
    }
}
