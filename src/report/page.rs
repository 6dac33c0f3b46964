//! Builds the HTML report's inputs from cached results: the figures each
//! benchmark's findings are read from, the per-cell table with transcript
//! links, and the provenance block; returns every file to write.

use std::collections::BTreeMap;

use serde_json::Value;

use super::html::{CellLine, CellState, HtmlReport, Transcript, render_html, render_transcript_html};
use super::render::{ModelUsage, Section};
use super::svg::{Figure, FigureKind, Series, figure_csv, figure_file_stem, figure_svg};
use crate::cache::{CacheError, Store};
use crate::envs::transcript;
use crate::envs::weirdml::max_at_k;
use crate::metrics::BenchmarkTables;
use crate::plan::{Cell, Plan};
use crate::spec::Pipeline;

/// Grids larger than this get no per-cell transcript pages (the cells table
/// and `evalgrid show` still cover every cell).
const MAX_TRANSCRIPT_PAGES: usize = 5_000;

/// Everything the page needs besides the pipeline and plan.
pub struct PageInput<'a> {
    /// Aggregate tables.
    pub tables: &'a [BenchmarkTables],
    /// Benchmark-specific extra tables.
    pub sections: &'a [Section],
    /// Scored cells with their score records.
    pub scored: &'a [(&'a Cell, Value)],
    /// Tokens and cost.
    pub usage: Vec<ModelUsage>,
    /// Per model id: the model ids the servers said answered.
    pub answered_by: &'a std::collections::BTreeMap<String, Vec<String>>,
}

/// Renders `index.html`, `cells.csv`, figure SVG/CSV files and transcript
/// pages; returns (relative path, bytes) pairs in a stable order.
pub fn files(pipeline: &Pipeline, plan: &Plan, input: &PageInput<'_>, store: &Store) -> Result<Vec<(String, Vec<u8>)>, CacheError> {
    let mut out = Vec::new();
    let figures = figures(pipeline, input);
    for f in &figures {
        let stem = figure_file_stem(&f.id);
        out.push((format!("figures/{stem}.svg"), figure_svg(f).into_bytes()));
        out.push((format!("figures/{stem}.csv"), figure_csv(f).into_bytes()));
    }
    let scored: BTreeMap<&str, &Value> = input.scored.iter().map(|(c, v)| (c.id.as_str(), v)).collect();
    let with_pages = plan.cells.len() <= MAX_TRANSCRIPT_PAGES;
    let mut cells = Vec::with_capacity(plan.cells.len());
    let mut cells_csv = String::from("cell,model,task,seed,state\n");
    for cell in &plan.cells {
        let model = &pipeline.models[cell.model];
        let task = &pipeline.tasks[cell.task];
        let score = scored.get(cell.id.as_str());
        let state = if score.is_some() { CellState::Ok } else { CellState::Failed };
        let transcript_link = if with_pages && score.is_some() {
            match store.get(cell.episode_key)? {
                Some(e) => {
                    let path = format!("transcripts/{}.html", cell.episode_key.short());
                    out.push((path.clone(), render_transcript_html(&cell.id, &transcript(&task.benchmark, &e.output)).into_bytes()));
                    Transcript::Link(path)
                }
                None => Transcript::None,
            }
        } else {
            Transcript::None
        };
        cells_csv.push_str(&format!("{},{},{},{},{}\n", cell.id, model.id, task.qualified(), cell.seed, if score.is_some() { "ok" } else { "missing" }));
        cells.push(CellLine {
            id: cell.id.clone(),
            model: model.id.clone(),
            task: task.qualified(),
            seed: cell.seed,
            state,
            headline: score.map(|s| headline(&task.benchmark, s)).unwrap_or_default(),
            transcript: transcript_link,
        });
    }
    out.push(("cells.csv".to_owned(), cells_csv.into_bytes()));
    let report = HtmlReport {
        title: &pipeline.report.title,
        tables: input.tables,
        figures,
        cells,
        provenance: provenance(pipeline, plan, input),
        usage: input.usage.clone(),
        decimals: pipeline.report.decimals,
        warnings: warnings(pipeline),
        sections: input.sections,
    };
    out.push(("index.html".to_owned(), render_html(&report).into_bytes()));
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
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
    let field = match benchmark {
        "eleusis" => "score",
        "bbeh" => "accuracy",
        "bbq" => "solved",
        "weirdml" => "run_accuracy",
        _ => return String::new(),
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
        ("cells".to_owned(), format!("{} planned, {} scored, {} without a result", plan.cells.len(), input.scored.len(), plan.cells.len() - input.scored.len())),
    ];
    for m in &pipeline.models {
        let url = m.base_url.as_deref().unwrap_or("default endpoint");
        let mut line = format!("{} `{}` ({url})", m.provider, m.model);
        // Snapshots (and, where accepted, other models) that answered, as the server said.
        let answered: Vec<&String> = input.answered_by.get(&m.id).into_iter().flatten().filter(|id| **id != m.model).collect();
        if !answered.is_empty() {
            let ids: Vec<String> = answered.iter().map(|id| format!("`{id}`")).collect();
            line.push_str(&format!(", answered as {}", ids.join(", ")));
        }
        p.push((format!("model {}", m.id), line));
    }
    for t in &pipeline.tasks {
        p.push((format!("task {}", t.qualified()), format!("content blake3 {}", &t.content_hash[..t.content_hash.len().min(16)])));
    }
    p
}

fn column(t: &BenchmarkTables, name: &str) -> Option<usize> {
    t.columns.iter().position(|c| c.name == name)
}

/// Figures per benchmark, from the tables and sections.
fn figures(pipeline: &Pipeline, input: &PageInput<'_>) -> Vec<Figure> {
    let mut out = Vec::new();
    for t in input.tables {
        match t.benchmark.as_str() {
            "bbq" => out.extend(bbq_curve(t)),
            "bbeh" | "bbeh-mini" => out.extend(bbeh_bars(pipeline, t)),
            "weirdml" => out.extend(weirdml_figures(pipeline, t, input.scored)),
            _ => {}
        }
    }
    out.extend(eleusis_figures(input.sections));
    out
}

fn figure(id: &str, title: &str, kind: FigureKind, x: &str, y: &str, series: Vec<Series>, diagonal: bool) -> Figure {
    Figure { id: id.into(), title: title.into(), kind, x_label: x.into(), y_label: y.into(), series, diagonal }
}

fn bbq_curve(t: &BenchmarkTables) -> Option<Figure> {
    let points = [("solved_by_10pct", 0.10), ("solved_by_25pct", 0.25), ("solved_by_50pct", 0.50), ("solved_by_75pct", 0.75), ("solve_rate", 1.0)];
    let series: Vec<Series> = t
        .by_model
        .iter()
        .map(|r| {
            let mut pts = vec![(0.0, 0.0)];
            pts.extend(points.iter().filter_map(|(name, x)| column(t, name).and_then(|i| r.values[i]).map(|y| (*x, y))));
            Series::new(&r.model, pts)
        })
        .collect();
    (!series.is_empty()).then(|| figure("bbq-curve", "BBQ-Bench: solved fraction vs fraction of query budget", FigureKind::Line, "fraction of budget used", "fraction of tasks solved", series, false))
}

fn bbeh_bars(pipeline: &Pipeline, t: &BenchmarkTables) -> Option<Figure> {
    let acc = column(t, "accuracy")?;
    let is_baseline = |model: &str| pipeline.models.iter().any(|m| m.id == model && m.provider == "builtin");
    let series: Vec<Series> = pipeline
        .models
        .iter()
        .filter_map(|m| {
            let values: Vec<(String, f64)> = t
                .by_task
                .iter()
                .filter(|r| r.model == m.id)
                .filter_map(|r| Some((r.task.clone()?.trim_start_matches("bbeh_").trim_end_matches("/mini").to_owned(), r.values[acc]?)))
                .collect();
            if values.is_empty() {
                return None;
            }
            let s = Series::labelled(&m.id, values);
            Some(if is_baseline(&m.id) { s.as_reference() } else { s })
        })
        .collect();
    (!series.is_empty()).then(|| figure(&format!("{}-accuracy", t.benchmark), &format!("{}: accuracy per task (built-in baseline as reference)", t.benchmark), FigureKind::Bars, "task", "accuracy", series, false))
}

fn weirdml_figures(pipeline: &Pipeline, t: &BenchmarkTables, scored: &[(&Cell, Value)]) -> Vec<Figure> {
    let mut out = Vec::new();
    let after: Vec<Series> = t
        .by_model
        .iter()
        .map(|r| Series::new(&r.model, (1..=5).filter_map(|k| column(t, &format!("accuracy_after_{k}")).and_then(|i| r.values[i]).map(|y| (f64::from(k), y))).collect()))
        .collect();
    if !after.is_empty() {
        out.push(figure("weirdml-after-k", "WeirdML: accuracy after k submissions", FigureKind::Line, "submissions k", "accuracy", after, false));
    }
    let mut max_k = Vec::new();
    for m in &pipeline.models {
        let firsts: Vec<f64> = scored
            .iter()
            .filter(|(c, _)| pipeline.models[c.model].id == m.id && pipeline.tasks[c.task].benchmark == "weirdml")
            .filter_map(|(_, s)| s["first_try_accuracy"].as_f64())
            .collect();
        let pts: Vec<(f64, f64)> = (1..=firsts.len()).filter_map(|k| max_at_k(&firsts, k).map(|v| (k as f64, v))).collect();
        if !pts.is_empty() {
            max_k.push(Series::new(&m.id, pts));
        }
    }
    if !max_k.is_empty() {
        out.push(figure("weirdml-max-at-k", "WeirdML: max@k over first tries (unbiased estimator)", FigureKind::Line, "k", "expected best accuracy", max_k, false));
    }
    out
}

fn eleusis_figures(sections: &[Section]) -> Vec<Figure> {
    let mut out = Vec::new();
    if let Some(cal) = sections.iter().find(|s| s.title.starts_with("eleusis: calibration")) {
        let mut by_model: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for (model, v) in &cal.rows {
            if let (Some(Some(level)), Some(Some(acc))) = (v.first(), v.get(1)) {
                by_model.entry(model).or_default().push((level / 10.0, *acc));
            }
        }
        let series = by_model.into_iter().map(|(m, pts)| Series::new(m, pts)).collect();
        out.push(figure("eleusis-calibration", "Eleusis: calibration (accuracy of checks by stated confidence)", FigureKind::Line, "stated confidence", "accuracy", series, true));
    }
    if let Some(g) = sections.iter().find(|s| s.title.starts_with("eleusis: guess rate")) {
        let mut by_model: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
        for (model, v) in &g.rows {
            if let (Some(Some(level)), Some(Some(rate))) = (v.first(), v.get(1)) {
                by_model.entry(model).or_default().push((level / 10.0, *rate));
            }
        }
        let series = by_model.into_iter().map(|(m, pts)| Series::new(m, pts)).collect();
        out.push(figure("eleusis-guess-rate", "Eleusis: formal-guess rate by stated confidence", FigureKind::Line, "stated confidence", "share of turns with a formal guess", series, false));
    }
    if let Some(h) = sections.iter().find(|s| s.title.starts_with("eleusis: spec")) {
        let col = |name: &str| h.columns.iter().position(|c| c == name);
        // One labelled point per model.
        let point = |x: Option<usize>, y: Option<usize>| -> Vec<Series> {
            h.rows
                .iter()
                .filter_map(|(m, v)| {
                    let (px, py) = (v[x?]?, v[y?]?);
                    Some(Series { points: vec![(px, py)], labels: vec![m.clone()], ..Series::new(m, Vec::new()) })
                })
                .collect()
        };
        let scatter = |id: &str, title: &str, xn: &str, yn: &str| figure(id, title, FigureKind::Scatter, xn, yn, point(col(xn), col(yn)), false);
        out.push(scatter("eleusis-score-vs-tokens", "Eleusis: score vs output tokens per turn", "avg_output_tokens_per_turn", "avg_floored_score"));
        out.push(scatter("eleusis-no-stakes", "Eleusis: no-stakes score vs score", "avg_floored_score", "avg_no_stakes_score"));
        if let Some(b) = col("boldness_index") {
            let values: Vec<(String, f64)> = h.rows.iter().filter_map(|(m, v)| Some((m.clone(), v[b]?))).collect();
            out.push(figure("eleusis-boldness", "Eleusis: boldness index (> 0 reckless, < 0 cautious)", FigureKind::Bars, "model", "boldness index", vec![Series::labelled("boldness", values)], false));
        }
    }
    out
}
