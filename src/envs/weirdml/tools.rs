//! WeirdML's command-line tool, `evalgrid weirdml import RESULTS.json [--estimates FILE]
//! [--models a,b] --out DIR`: the author's published per-run results recomputed into
//! `models.csv` / `tasks.csv`, time horizons into `horizons.csv`, and a report page with a
//! timeline (added to the CLI by [`Benchmark::tools`](crate::envs::Benchmark::tools)).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::{ArgMatches, CommandFactory as _, FromArgMatches as _, Parser};
use rayon::prelude::*;

use super::horizon::{Estimates, Horizon, RESAMPLES, duration_text, horizon, load_estimates};
use super::published::{Published, PublishedError, csv_field, load_results, models_csv, tasks_csv};
use crate::envs::tool::{ToolError, ToolOutput};

/// WeirdML tools: import the author's published results and time horizons.
#[derive(Debug, Parser)]
#[command(name = "weirdml")]
enum WeirdMlTool {
    /// Import published `weirdml_results.json`: recompute averages, max@k and time horizons.
    #[command(
        after_help = "Example:\n  evalgrid weirdml import ../shared/data/weirdml/weirdml_results.json \\\n    --estimates ../shared/data/weirdml/all_estimates.json --models gpt-4,o3-pro-2025-06-10 --out horizons/"
    )]
    Import {
        /// The author's results file.
        results: PathBuf,
        /// Human-time estimates (`all_estimates.json`); with it, `horizons.csv` is written.
        #[arg(long)]
        estimates: Option<PathBuf>,
        /// Results-file keys to fit horizons for (default: every model with all tasks).
        #[arg(long, value_delimiter = ',')]
        models: Vec<String>,
        /// Bootstrap resamples per model.
        #[arg(long, default_value_t = RESAMPLES)]
        resamples: usize,
        /// Output folder.
        #[arg(long)]
        out: PathBuf,
    },
}

/// Why `weirdml import` stopped.
#[derive(Debug, thiserror::Error)]
enum ImportToolError {
    /// An input file cannot be used.
    #[error(transparent)]
    Input(#[from] PublishedError),
    /// `--models` names a model that cannot be fitted.
    #[error("{0}")]
    Models(String),
    /// An output file cannot be written.
    #[error(transparent)]
    Write(std::io::Error),
}

impl From<ImportToolError> for ToolError {
    fn from(e: ImportToolError) -> Self {
        match e {
            ImportToolError::Input(_) | ImportToolError::Models(_) => Self::Invalid(Box::new(e)),
            ImportToolError::Write(_) => Self::Failed(Box::new(e)),
        }
    }
}

/// The `weirdml` command and its tools.
pub(super) fn command() -> clap::Command {
    WeirdMlTool::command()
}

/// Runs `weirdml import`.
pub(super) fn run(matches: &ArgMatches) -> Result<ToolOutput, ToolError> {
    let WeirdMlTool::Import { results, estimates, models, resamples, out } = WeirdMlTool::from_arg_matches(matches).map_err(ToolError::arguments)?;
    Ok(import(&results, estimates.as_deref(), &models, resamples, &out)?)
}

/// One fitted model for the horizon table and timeline.
struct Fitted {
    key: String,
    display: String,
    release: String,
    horizon: Horizon,
}

fn import(results: &Path, estimates: Option<&Path>, wanted: &[String], resamples: usize, out: &Path) -> Result<ToolOutput, ImportToolError> {
    let published = load_results(results)?;
    let estimates = estimates.map(|p| load_estimates(p, &published.tasks)).transpose()?;
    let mut lines = Vec::new();
    let incomplete: Vec<(String, Vec<String>)> =
        published.models.iter().map(|(k, m)| (k.clone(), m.missing(&published.tasks))).filter(|(_, missing)| !missing.is_empty()).collect();
    for (key, missing) in &incomplete {
        lines.push(format!("model `{key}` has no runs on {}: left out of the averages and horizons", missing.join(", ")));
    }
    for w in wanted {
        match published.models.get(w) {
            None => {
                let hint = published.models.keys().min_by_key(|k| strsim::levenshtein(k, w)).map(|k| format!(" (did you mean `{k}`?)")).unwrap_or_default();
                return Err(ImportToolError::Models(format!("{}: --models names `{w}`, which is not a model of the results file{hint}", results.display())));
            }
            Some(m) if estimates.is_some() && !m.missing(&published.tasks).is_empty() => {
                return Err(ImportToolError::Models(format!(
                    "{}: --models names `{w}`, which has no runs on {}: its horizon cannot be fitted",
                    results.display(),
                    m.missing(&published.tasks).join(", ")
                )));
            }
            Some(_) => {}
        }
    }
    let fitted = estimates.as_ref().map(|e| fit_all(&published, e, wanted, resamples));
    fs_err::create_dir_all(out).map_err(ImportToolError::Write)?;
    let models = models_csv(&published);
    let tasks = tasks_csv(&published);
    write(out, "models.csv", &models)?;
    write(out, "tasks.csv", &tasks)?;
    let mut written = vec!["models.csv", "tasks.csv"];
    if let (Some(fitted), Some(e)) = (&fitted, &estimates) {
        write(out, "horizons.csv", &horizons_csv(fitted))?;
        write(out, "timeline.svg", &timeline_svg(&series(fitted)))?;
        written.extend(["horizons.csv", "timeline.svg"]);
        if !e.skipped.is_empty() {
            lines.push(format!("{} estimate(s) with non-positive hours skipped: {}", e.skipped.len(), e.skipped.join(", ")));
        }
    }
    let summary = summary_md(&published, &incomplete, fitted.as_deref(), estimates.as_ref(), resamples);
    write(out, "summary.md", &summary)?;
    write(out, "index.html", &index_html(&published, &incomplete, fitted.as_deref(), estimates.as_ref(), resamples))?;
    written.extend(["summary.md", "index.html"]);
    lines.push(format!(
        "{} models, {} tasks; {} horizons; wrote {}/{}",
        published.models.len(),
        published.tasks.len(),
        fitted.as_ref().map_or(0, Vec::len),
        out.display(),
        written.join(", ")
    ));
    Ok(ToolOutput::ok(lines))
}

fn write(out: &Path, name: &str, text: &str) -> Result<(), ImportToolError> {
    fs_err::write(out.join(name), text).map_err(ImportToolError::Write)
}

/// Fits `wanted` (or every complete model), in parallel; each model's bootstrap is seeded by its
/// key, so the result does not depend on the thread count.
fn fit_all(published: &Published, estimates: &Estimates, wanted: &[String], resamples: usize) -> Vec<Fitted> {
    let keys: Vec<&String> = if wanted.is_empty() {
        published.models.iter().filter(|(_, m)| m.missing(&published.tasks).is_empty()).map(|(k, _)| k).collect()
    } else {
        let mut keys: Vec<&String> = wanted.iter().collect();
        keys.sort();
        keys.dedup();
        keys
    };
    keys.par_iter()
        .filter_map(|key| {
            let m = published.models.get(*key)?;
            let horizon = horizon(key, &m.scores(&published.tasks), estimates, resamples);
            Some(Fitted { key: (*key).clone(), display: m.display_name.clone(), release: m.release_date.clone(), horizon })
        })
        .collect()
}

/// (display name, release date, x50 percentiles) of every fitted model, for the timeline.
fn series(fitted: &[Fitted]) -> Vec<(String, String, [f64; 3])> {
    fitted.iter().map(|f| (f.display.clone(), f.release.clone(), f.horizon.x50)).collect()
}

fn horizons_csv(fitted: &[Fitted]) -> String {
    let mut out = String::from("model,display_name,release_date,n_data,n_success,x50_q025,x50_q50,x50_q975,hours_q025,hours_q50,hours_q975,beta_q50\n");
    for f in fitted {
        let h = &f.horizon;
        let [lo, mid, hi] = h.x50;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{lo:.6},{mid:.6},{hi:.6},{:.6},{:.6},{:.6},{:.6}",
            csv_field(&f.key),
            csv_field(&f.display),
            csv_field(&f.release),
            h.n_data,
            h.n_success,
            10f64.powf(lo),
            10f64.powf(mid),
            10f64.powf(hi),
            h.beta_q50
        );
    }
    out
}

const METHOD: &str = "avg_acc: mean over the 17 tasks of the mean run score. standard_error (ours): (1/T)·sqrt(Σ_t s²_t/n_t), s²_t the sample variance (ddof 1) of task t's run scores; the published one uses an unstated method and is shown beside it. Horizons: p(score ≥ θ) = σ(β·(x − x50)), x = log10 of each estimator's human hours for θ on the task (thresholds 25/50/70/90/95 %, 4 estimators, non-positive hours skipped), maximum likelihood with x50 ∈ [−3, 7], −β ∈ [1e-6, 50]; 95 % intervals from a task-level bootstrap seeded by the model key. 1 day = 8 work-hours, 1 week = 40, 1 month = 160.";

fn summary_md(
    published: &Published,
    incomplete: &[(String, Vec<String>)],
    fitted: Option<&[Fitted]>,
    estimates: Option<&Estimates>,
    resamples: usize,
) -> String {
    let mut md = String::from("# WeirdML: published results reproduced\n\n");
    let _ = writeln!(md, "{} models, {} tasks. {METHOD}\n", published.models.len(), published.tasks.len());
    for (key, missing) in incomplete {
        let _ = writeln!(md, "- `{key}` has no runs on {}: left out of the averages and horizons.", missing.join(", "));
    }
    if let Some(fitted) = fitted {
        let _ = writeln!(md, "## Time horizons ({resamples} bootstrap resamples)\n");
        if let Some(e) = estimates.filter(|e| !e.skipped.is_empty()) {
            let _ = writeln!(md, "{} estimate(s) with non-positive hours skipped: {}.\n", e.skipped.len(), e.skipped.join(", "));
        }
        md.push_str("| model | display name | release | n_data | n_success | x50 2.5 % | x50 median | x50 97.5 % | median as time |\n|---|---|---|---:|---:|---:|---:|---:|---|\n");
        for f in fitted {
            let [lo, mid, hi] = f.horizon.x50;
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {lo:.3} | {mid:.3} | {hi:.3} | {} |",
                f.key,
                f.display,
                f.release,
                f.horizon.n_data,
                f.horizon.n_success,
                duration_text(10f64.powf(mid))
            );
        }
        md.push_str("\n![time horizon against release date, 95 % intervals](timeline.svg)\n");
    }
    md.push_str("\n## Models\n\n| model | display name | release | tasks | runs | avg_acc | SE (ours) | published avg_acc | published SE |\n|---|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (key, m) in &published.models {
        let _ = writeln!(md, "| {} |", model_cells(key, m, &published.tasks).join(" | "));
    }
    md
}

/// The cells of one model's row in the Models table, as text (the markdown and HTML pages
/// show the same row).
fn model_cells(key: &str, m: &super::published::PublishedModel, tasks: &[String]) -> [String; 9] {
    let row = m.row(tasks);
    let f = |v: Option<f64>| v.map_or_else(|| "–".to_owned(), |x| format!("{x:.4}"));
    [
        key.to_owned(),
        m.display_name.clone(),
        m.release_date.clone(),
        row.tasks.to_string(),
        row.runs.to_string(),
        f(row.avg_acc),
        f(row.standard_error),
        format!("{:.4}", m.aggregate_scores.avg_acc),
        format!("{:.4}", m.aggregate_scores.avg_acc_standard_error),
    ]
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// Days since 1970-01-01 of `YYYY-MM-DD` (civil calendar), `None` if malformed.
pub(super) fn days(date: &str) -> Option<i64> {
    let mut it = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// SVG timeline: time horizon (log scale) against release date, with 95 % intervals.
pub(super) fn timeline_svg(fitted: &[(String, String, [f64; 3])]) -> String {
    let points: Vec<(i64, &str, [f64; 3])> = fitted.iter().filter_map(|(name, date, x)| Some((days(date)?, name.as_str(), *x))).collect();
    let (w, h, left, right, top, bottom) = (900.0, 480.0, 70.0, 20.0, 20.0, 40.0);
    let mut svg = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" aria-label=\"time horizon against release date\">\n"
    );
    if points.is_empty() {
        svg.push_str("<text x=\"20\" y=\"40\">no horizons</text>\n</svg>\n");
        return svg;
    }
    let d0 = points.iter().map(|p| p.0).min().unwrap_or(0) - 30;
    let d1 = points.iter().map(|p| p.0).max().unwrap_or(0) + 30;
    let y0 = points.iter().map(|p| p.2[0]).fold(f64::INFINITY, f64::min).floor().min(-1.0);
    let y1 = points.iter().map(|p| p.2[2]).fold(f64::NEG_INFINITY, f64::max).ceil().max(1.0);
    let sx = |d: i64| left + (w - left - right) * (d - d0) as f64 / (d1 - d0).max(1) as f64;
    let sy = |y: f64| top + (h - top - bottom) * (y1 - y) / (y1 - y0);
    // Log-scale axis: one gridline per power of ten hours.
    for e in (y0 as i64)..=(y1 as i64) {
        let y = sy(e as f64);
        let label = duration_text(10f64.powi(e as i32));
        let _ = writeln!(
            svg,
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\">{}</text>",
            w - right,
            left - 4.0,
            y + 4.0,
            escape(&label)
        );
    }
    let _ = writeln!(svg, "<text x=\"{left}\" y=\"{:.1}\" font-size=\"11\">release date →</text>", h - 8.0);
    for (d, name, [lo, mid, hi]) in &points {
        let x = sx(*d);
        let _ = writeln!(
            svg,
            "<g><title>{}: {} (95 % {} – {})</title><line x1=\"{x:.1}\" x2=\"{x:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#4a78b5\"/><circle cx=\"{x:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"#1f4e8c\"/><text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\">{}</text></g>",
            escape(name),
            escape(&duration_text(10f64.powf(*mid))),
            escape(&duration_text(10f64.powf(*lo))),
            escape(&duration_text(10f64.powf(*hi))),
            sy(*lo),
            sy(*hi),
            sy(*mid),
            x + 6.0,
            sy(*mid) - 6.0,
            escape(name)
        );
    }
    svg.push_str("</svg>\n");
    svg
}

fn index_html(
    published: &Published,
    incomplete: &[(String, Vec<String>)],
    fitted: Option<&[Fitted]>,
    estimates: Option<&Estimates>,
    resamples: usize,
) -> String {
    let mut html = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>WeirdML: published results reproduced</title>\n<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}td.n{text-align:right}</style></head><body>\n<h1>WeirdML: published results reproduced</h1>\n",
    );
    let _ = writeln!(html, "<p>{} models, {} tasks. {}</p>", published.models.len(), published.tasks.len(), escape(METHOD));
    for (key, missing) in incomplete {
        let _ = writeln!(
            html,
            "<p class=\"warn\"><code>{}</code> has no runs on {}: left out of the averages and horizons.</p>",
            escape(key),
            escape(&missing.join(", "))
        );
    }
    if let Some(fitted) = fitted {
        let _ = writeln!(html, "<h2>Time horizons ({resamples} bootstrap resamples)</h2>");
        if let Some(e) = estimates.filter(|e| !e.skipped.is_empty()) {
            let _ = writeln!(html, "<p>{} estimate(s) with non-positive hours skipped: {}.</p>", e.skipped.len(), escape(&e.skipped.join(", ")));
        }
        html.push_str(&timeline_svg(&series(fitted)));
        html.push_str("<table><tr><th>model</th><th>display name</th><th>release</th><th>n_data</th><th>n_success</th><th>x50 2.5 %</th><th>x50 median</th><th>x50 97.5 %</th><th>median as time</th></tr>\n");
        for f in fitted {
            let [lo, mid, hi] = f.horizon.x50;
            let _ = writeln!(
                html,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{lo:.3}</td><td class=\"n\">{mid:.3}</td><td class=\"n\">{hi:.3}</td><td>{}</td></tr>",
                escape(&f.key),
                escape(&f.display),
                escape(&f.release),
                f.horizon.n_data,
                f.horizon.n_success,
                escape(&duration_text(10f64.powf(mid)))
            );
        }
        html.push_str("</table>\n");
    }
    html.push_str("<h2>Models</h2>\n<table><tr><th>model</th><th>display name</th><th>release</th><th>tasks</th><th>runs</th><th>avg_acc</th><th>SE (ours)</th><th>published avg_acc</th><th>published SE</th></tr>\n");
    for (key, m) in &published.models {
        let cells = model_cells(key, m, &published.tasks).map(|c| escape(&c));
        let _ = writeln!(
            html,
            "<tr><td>{}</td><td>{}</td><td>{}</td>{}</tr>",
            cells[0],
            cells[1],
            cells[2],
            cells[3..].iter().map(|c| format!("<td class=\"n\">{c}</td>")).collect::<String>()
        );
    }
    html.push_str("</table>\n</body></html>\n");
    html
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_days_and_svg_shape() {
        assert_eq!(days("1970-01-01"), Some(0));
        assert_eq!(days("2025-06-10"), Some(20_249));
        assert_eq!(days("2025-13-01"), None);
        let svg = timeline_svg(&[("a<b".into(), "2024-01-01".into(), [-1.0, 0.0, 0.5]), ("c".into(), "2025-01-01".into(), [0.5, 1.0, 1.5])]);
        assert!(svg.starts_with("<svg") && svg.contains("a&lt;b") && svg.matches("<circle").count() == 2, "{svg}");
    }
}
