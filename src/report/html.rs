//! The self-contained HTML report (`reports/<pipeline>/index.html`): summary
//! tables with CIs and `n`, inline SVG figures, a per-cell table linking each
//! cell's transcript, and provenance; plus standalone transcript pages.
//!
//! Safety: every piece of text (model output above all) reaches the page
//! through [`push_escaped`], attribute values included, and only links that
//! pass [`safe_href`] are emitted. A Content-Security-Policy pinned to the
//! hashes of the page's own style and script blocks anything else, so the
//! page makes no network request and runs no foreign script even if escaping
//! were bypassed. Output is a pure function of the input (no timestamps, input
//! order kept), and its size is bounded: at most [`MAX_CELL_ROWS`] cell rows
//! and [`INLINE_TRANSCRIPTS_TOTAL_BYTES`] of inline transcripts.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

pub use super::escape::{escape_html, push_escaped};
use super::render::{ModelUsage, Section};
pub use super::svg::{Figure, FigureKind, Series, figure_csv, figure_file_stem, figure_svg};
use crate::metrics::comparison::{Ties, ties_with_best};
use crate::metrics::{Agg, BenchmarkTables, Comparison, TableRow};

/// Most per-cell rows rendered inline; the rest are in [`CELLS_CSV`].
pub const MAX_CELL_ROWS: usize = 5_000;
/// Most model × task rows rendered per benchmark; the rest are in `summary.csv`.
pub const MAX_TASK_ROWS: usize = 5_000;
/// Largest transcript inlined into the page; larger ones must be linked.
pub const INLINE_TRANSCRIPT_MAX_BYTES: usize = 16 * 1024;
/// Budget for all inline transcripts together, keeping the page far below 20 MB.
pub const INLINE_TRANSCRIPTS_TOTAL_BYTES: usize = 4 * 1024 * 1024;
/// The full per-cell list the integrator writes next to `index.html`.
pub const CELLS_CSV: &str = "cells.csv";
/// Folder (next to `index.html`) holding `<stem>.svg` and `<stem>.csv` per figure.
pub const FIGURES_DIR: &str = "figures";

/// Everything the page shows, as plain data filled by the report step.
#[derive(Clone, Debug)]
pub struct HtmlReport<'a> {
    /// Page title (the pipeline's report title).
    pub title: &'a str,
    /// Aggregate tables, one per benchmark, in pipeline order.
    pub tables: &'a [BenchmarkTables],
    /// Figures, drawn in this order.
    pub figures: Vec<Figure>,
    /// One line per cell, in grid order.
    pub cells: Vec<CellLine>,
    /// Provenance facts (label → value), shown as a definition list.
    pub provenance: Vec<(String, String)>,
    /// Tokens and cost per model.
    pub usage: Vec<ModelUsage>,
    /// Decimals for the summary tables.
    pub decimals: u32,
    /// Warnings shown first, above everything (e.g. model code ran unsandboxed).
    pub warnings: Vec<String>,
    /// Extra tables after the summary (model outcomes, the Eleusis §5 metrics).
    pub sections: &'a [Section],
    /// Paired model comparisons (`comparisons.csv`): the ties with the best and the
    /// pairwise matrix per suite, so a reader sees which differences are real.
    pub comparisons: &'a [Comparison],
    /// (suite, file) of each suite's item page, linked from the navigation.
    pub item_pages: Vec<(String, String)>,
}

/// One cell of the grid as listed in the per-cell table.
#[derive(Clone, Debug, PartialEq)]
pub struct CellLine {
    /// Cell id (`model/suite/task/seed`), what `evalgrid show` takes.
    pub id: String,
    /// Model id.
    pub model: String,
    /// Task id.
    pub task: String,
    /// Seed.
    pub seed: u64,
    /// Whether the cell finished.
    pub state: CellState,
    /// Headline value, already formatted (or the error for failed cells).
    pub headline: String,
    /// Where its transcript is.
    pub transcript: Transcript,
    /// Its step keys, shortened (`episode … · score …`), shown on hover over the cell id
    /// so a number can be tied to the cache entries that made it (in full in `cells.csv`).
    pub keys: String,
}

/// Outcome of a cell, for the table and the error counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CellState {
    /// Scored.
    Ok,
    /// Failed (no score).
    Failed,
}

/// A cell's transcript: linked (relative path) or inlined (small ones only).
#[derive(Clone, Debug, PartialEq)]
pub enum Transcript {
    /// No transcript.
    None,
    /// Relative path of a page written by [`render_transcript_html`].
    Link(String),
    /// The transcript text; inlined only up to [`INLINE_TRANSCRIPT_MAX_BYTES`].
    Inline(String),
}

/// A relative link target made safe for `href`: `None` for empty or absolute
/// (`/x`, `//host`, `\x`) paths; bytes outside `A-Za-z0-9-._~/` are
/// percent-encoded, so a `:` can never start a scheme (`javascript:`).
#[must_use]
pub fn safe_href(path: &str) -> Option<String> {
    if path.is_empty() || path.starts_with(['/', '\\']) {
        return None;
    }
    let mut out = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    Some(out)
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:0 auto;max-width:1200px;padding:0 16px;color:#1a1a1a}\
h1{font-size:24px}h2{border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:32px}\
table{border-collapse:collapse;margin:8px 0 16px}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}\
th{background:#f4f4f4}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}\
tr.failed td{background:#fdecea}#cells-table th{cursor:pointer}\
figure{margin:16px 0}svg.figure{max-width:100%;height:auto}figcaption{font-size:12px;color:#555}\
pre{white-space:pre-wrap;word-break:break-word;background:#f8f8f8;padding:8px;border:1px solid #eee}\
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px}dt{font-weight:600}dd{margin:0;word-break:break-all}\
p.note{color:#555;font-size:13px}\
table.pairwise td.pair{text-align:center;font-variant-numeric:tabular-nums;white-space:nowrap}table.pairwise td.diag{background:#f4f4f4}\
td.sig-pos{background:#d4f0dc;color:#0b4d1e}td.sig-neg{background:#f9d9d9;color:#7a1010}span.ci{display:block;font-size:12px;color:#555}\
span.best,span.tied{font-size:11px;border-radius:3px;padding:0 4px;margin-left:6px}span.best{background:#1a7f37;color:#fff}span.tied{background:#ddf4ff;color:#0a3069}div.scroll{overflow-x:auto;max-width:100%}td.incomplete{color:#8a5a00}p.warning{background:#fde8e8;border:1px solid #c00;padding:8px}nav a{margin-right:12px}";

const SCRIPT: &str = "(function(){var t=document.getElementById('cells-table');if(!t||!t.tBodies.length)return;\
var b=t.tBodies[0],hs=t.tHead.rows[0].cells,f=document.getElementById('cell-filter');\
if(f){f.hidden=false;f.addEventListener('input',function(){var q=f.value.toLowerCase();\
for(var i=0;i<b.rows.length;i++){var r=b.rows[i];r.hidden=q!==''&&r.textContent.toLowerCase().indexOf(q)<0;}});}\
function key(r,c){return r.cells[c]?r.cells[c].textContent:'';}\
function sortBy(c){var h=hs[c],dir=h.getAttribute('aria-sort')==='ascending'?-1:1;\
for(var k=0;k<hs.length;k++)hs[k].removeAttribute('aria-sort');h.setAttribute('aria-sort',dir>0?'ascending':'descending');\
var rows=Array.prototype.slice.call(b.rows);rows.sort(function(x,y){var a=key(x,c),z=key(y,c),na=parseFloat(a),nz=parseFloat(z);\
return dir*((isNaN(na)||isNaN(nz))?(a<z?-1:a>z?1:0):na-nz);});for(var j=0;j<rows.length;j++)b.appendChild(rows[j]);}\
for(var c=0;c<hs.length;c++){hs[c].addEventListener('click',sortBy.bind(null,c));}})();";

/// `<!DOCTYPE html>` through `<body>`, with a CSP allowing only our own
/// style (and script, when `script`) by hash.
pub(super) fn head(out: &mut String, title: &str, script: bool) {
    let script_src = if script { format!("'{}'", csp_hash(SCRIPT)) } else { "'none'".to_owned() };
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src '{}'; script-src {script_src}; base-uri 'none'; form-action 'none'\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<meta name=\"referrer\" content=\"no-referrer\">\n<title>",
        csp_hash(STYLE)
    );
    push_escaped(out, title);
    let _ = write!(out, "</title>\n<style>{STYLE}</style>\n</head>\n<body>\n");
}

/// `sha256-<base64>` of a style or script block, as CSP expects.
pub(super) fn csp_hash(text: &str) -> String {
    use base64::Engine as _;
    format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes())))
}

/// The whole report page.
#[must_use]
pub fn render_html(report: &HtmlReport) -> String {
    let mut out = String::with_capacity(64 * 1024 + report.cells.len().min(MAX_CELL_ROWS) * 256);
    head(&mut out, report.title, true);
    out.push_str("<header>\n<h1>");
    push_escaped(&mut out, report.title);
    out.push_str(
        "</h1>\n<nav><a href=\"#summary\">Summary</a><a href=\"#figures\">Figures</a><a href=\"#cells\">Cells</a><a href=\"#provenance\">Provenance</a>",
    );
    for (suite, file) in &report.item_pages {
        if let Some(href) = safe_href(file) {
            let _ = write!(out, "<a href=\"{}\">items of ", escape_html(&href));
            push_escaped(&mut out, suite);
            out.push_str("</a>");
        }
    }
    out.push_str("</nav>\n</header>\n");
    for w in &report.warnings {
        out.push_str("<p class=\"warning\" role=\"alert\"><strong>Warning:</strong> ");
        push_escaped(&mut out, w);
        out.push_str("</p>\n");
    }
    summary(&mut out, report);
    figures(&mut out, &report.figures);
    cells(&mut out, &report.cells);
    provenance(&mut out, report);
    let _ = write!(out, "<script>{SCRIPT}</script>\n</body>\n</html>\n");
    out
}

/// A standalone page showing one transcript, escaped, for a cell's link.
#[must_use]
pub fn render_transcript_html(title: &str, text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 16 + 2048);
    head(&mut out, title, false);
    out.push_str("<h1>");
    push_escaped(&mut out, title);
    out.push_str("</h1>\n<pre>");
    push_escaped(&mut out, text);
    out.push_str("</pre>\n</body>\n</html>\n");
    out
}

/// A rendered column of a summary table: a metric, with its Wilson interval
/// columns folded in when the benchmark has them for the same ratio.
struct Col<'t> {
    name: &'t str,
    index: usize,
    ci: Option<(usize, usize)>,
}

fn summary_columns(t: &BenchmarkTables) -> Vec<Col<'_>> {
    let find = |want: &dyn Fn(&Agg) -> bool| t.columns.iter().position(|c| want(&c.agg));
    let mut out = Vec::new();
    for (index, c) in t.columns.iter().enumerate() {
        match &c.agg {
            Agg::WilsonLow(n, d) | Agg::WilsonHigh(n, d) if find(&|a| matches!(a, Agg::Ratio(x, y) if x == n && y == d)).is_some() => {}
            Agg::Ratio(n, d) => {
                let lo = find(&|a| matches!(a, Agg::WilsonLow(x, y) if x == n && y == d));
                let hi = find(&|a| matches!(a, Agg::WilsonHigh(x, y) if x == n && y == d));
                out.push(Col { name: &c.name, index, ci: lo.zip(hi) });
            }
            _ => out.push(Col { name: &c.name, index, ci: None }),
        }
    }
    out
}

fn value_text(v: Option<f64>, decimals: u32) -> String {
    let d = decimals as usize;
    v.filter(|x| x.is_finite()).map_or_else(|| "–".to_owned(), |x| format!("{x:.d$}"))
}

fn summary(out: &mut String, report: &HtmlReport) {
    out.push_str("<section id=\"summary\">\n<h2>Summary</h2>\n");
    if report.tables.is_empty() {
        out.push_str("<p class=\"note\">No scored cells yet.</p>\n");
    }
    for t in report.tables {
        let cols = summary_columns(t);
        out.push_str("<h3>");
        push_escaped(out, &t.benchmark);
        out.push_str("</h3>\n");
        let ties = ties_with_best(report.comparisons, &t.benchmark);
        summary_table(out, &cols, &t.by_model, false, report.decimals, ties.as_ref());
        if let Some(ties) = &ties {
            ties_note(out, ties, report.decimals);
            pairwise(out, report.comparisons, &t.benchmark, report.decimals);
        }
        if !t.by_task.is_empty() {
            let _ = writeln!(out, "<details>\n<summary>By model × task ({} row{})</summary>", t.by_task.len(), if t.by_task.len() == 1 { "" } else { "s" });
            summary_table(out, &cols, &t.by_task[..t.by_task.len().min(MAX_TASK_ROWS)], true, report.decimals, None);
            if t.by_task.len() > MAX_TASK_ROWS {
                let _ = writeln!(
                    out,
                    "<p class=\"note\">First {MAX_TASK_ROWS} of {} rows; all are in <a href=\"summary.csv\">summary.csv</a>.</p>",
                    t.by_task.len()
                );
            }
            out.push_str("</details>\n");
        }
    }
    for s in report.sections {
        section_table(out, s, report.decimals);
    }
    out.push_str("<p class=\"note\">Intervals in brackets are 95 % Wilson score intervals; n is the number of cells.</p>\n</section>\n");
}

/// One extra table: a row label (the model) and numbers, scrolling inside its box.
fn section_table(out: &mut String, s: &Section, decimals: u32) {
    out.push_str("<h3>");
    push_escaped(out, &s.title);
    out.push_str("</h3>\n<div class=\"scroll\"><table class=\"section\">\n<thead><tr><th>model</th>");
    for c in &s.columns {
        out.push_str("<th class=\"num\">");
        push_escaped(out, c);
        out.push_str("</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    let formats = super::render::column_formats(s);
    for (label, values) in &s.rows {
        out.push_str("<tr><td>");
        push_escaped(out, label);
        out.push_str("</td>");
        for (v, f) in values.iter().zip(&formats) {
            let _ = write!(out, "<td class=\"num\">{}</td>", f.text(*v, decimals));
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// `ties` marks the best model of a by-model table and those statistically tied with it.
fn summary_table(out: &mut String, cols: &[Col], rows: &[TableRow], with_task: bool, decimals: u32, ties: Option<&Ties<'_>>) {
    out.push_str("<div class=\"scroll\"><table class=\"summary\">\n<thead><tr><th>model</th>");
    if with_task {
        out.push_str("<th>task</th>");
    }
    out.push_str("<th class=\"num\">n</th>");
    for c in cols {
        out.push_str("<th class=\"num\">");
        push_escaped(out, c.name);
        if c.ci.is_some() {
            out.push_str(" [95 % CI]");
        }
        out.push_str("</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for r in rows {
        out.push_str("<tr><td>");
        push_escaped(out, &r.model);
        if let Some((_, best, others)) = ties {
            if *best == r.model {
                out.push_str("<span class=\"best\">best</span>");
            } else if others.iter().any(|(m, tied, _)| *tied && *m == r.model) {
                out.push_str("<span class=\"tied\" title=\"not distinguishable from the best (equal mean, p ≥ 0.05, or no p-value)\">tied</span>");
            }
        }
        out.push_str("</td>");
        if with_task {
            out.push_str("<td>");
            push_escaped(out, r.task.as_deref().unwrap_or(""));
            out.push_str("</td>");
        }
        match r.incomplete() {
            Some(why) => {
                let _ = write!(out, "<td class=\"num incomplete\">{why}</td>");
            }
            None => {
                let _ = write!(out, "<td class=\"num\">{}</td>", r.n);
            }
        }
        let at = |i: usize| r.values.get(i).copied().flatten();
        for c in cols {
            let _ = write!(out, "<td class=\"num\">{}", value_text(at(c.index), decimals));
            if let Some((lo, hi)) = c.ci {
                let _ = write!(out, " [{}, {}]", value_text(at(lo), decimals), value_text(at(hi), decimals));
            }
            out.push_str("</td>");
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
}

/// The best model, those tied with it and each pair's minimum detectable difference.
fn ties_note(out: &mut String, (metric, best, others): &Ties<'_>, decimals: u32) {
    out.push_str("<p class=\"note ties\">Best on <code>");
    push_escaped(out, metric);
    out.push_str("</code>: ");
    push_escaped(out, best);
    out.push_str(". Not distinguishable from it (equal mean, or paired Holm-adjusted p ≥ 0.05 clustered by task, or McNemar's p ≥ 0.05 with fewer than two task clusters, or no p-value): ");
    let tied: Vec<&str> = others.iter().filter(|o| o.1).map(|o| o.0).collect();
    push_escaped(out, &if tied.is_empty() { "none".to_owned() } else { tied.join(", ") });
    out.push_str(". Minimum detectable difference against it at 80 % power: ");
    let mde: Vec<String> = others.iter().map(|(m, _, mde)| format!("{m} {}", value_text(*mde, decimals + 1))).collect();
    push_escaped(out, &mde.join(", "));
    out.push_str(".</p>\n");
}

/// The suite's pairwise matrix on its first per-unit metric: row minus column, paired over
/// the common units, with the clustered 95 % CI; cells where the Holm-adjusted p < 0.05
/// are coloured by sign.
fn pairwise(out: &mut String, comparisons: &[Comparison], suite: &str, decimals: u32) {
    let Some(metric) = comparisons.iter().find(|c| c.suite == suite).map(|c| c.metric.as_str()) else { return };
    let family: Vec<&Comparison> = comparisons.iter().filter(|c| c.suite == suite && c.metric == metric).collect();
    let mut models: Vec<&str> = Vec::new();
    for c in &family {
        for m in [c.model_a.as_str(), c.model_b.as_str()] {
            if !models.contains(&m) {
                models.push(m);
            }
        }
    }
    let d = decimals + 1;
    out.push_str("<p class=\"note\">Pairwise differences in <code>");
    push_escaped(out, metric);
    out.push_str("</code>: row − column, paired over common units, with the 95 % CI clustered by task; coloured where the Holm-adjusted p &lt; 0.05 (green: row higher, red: row lower).</p>\n");
    out.push_str("<div class=\"scroll\"><table class=\"pairwise\" data-suite=\"");
    push_escaped(out, suite);
    out.push_str("\">\n<thead><tr><th></th>");
    for m in &models {
        out.push_str("<th>");
        push_escaped(out, m);
        out.push_str("</th>");
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for row in &models {
        out.push_str("<tr><th>");
        push_escaped(out, row);
        out.push_str("</th>");
        for col in &models {
            if row == col {
                out.push_str("<td class=\"diag\">—</td>");
                continue;
            }
            // Stored as model_a − model_b; the mirrored cell flips the sign and the interval.
            let (c, sign) = match family.iter().find(|c| c.model_a == *row && c.model_b == *col) {
                Some(c) => (Some(*c), 1.0),
                None => (family.iter().find(|c| c.model_a == *col && c.model_b == *row).copied(), -1.0),
            };
            let Some(c) = c else {
                out.push_str("<td class=\"pair\">–</td>");
                continue;
            };
            let diff = c.diff.map(|x| sign * x);
            let (lo, hi) = if sign > 0.0 { (c.ci_low, c.ci_high) } else { (c.ci_high.map(|x| -x), c.ci_low.map(|x| -x)) };
            let significant = c.p_holm.is_some_and(|p| p < 0.05);
            let class = match (significant, diff) {
                (true, Some(x)) if x > 0.0 => "pair sig-pos",
                (true, Some(x)) if x < 0.0 => "pair sig-neg",
                _ => "pair",
            };
            let _ = write!(
                out,
                "<td class=\"{class}\" title=\"Holm-adjusted p = {}, {} pairs\">{}<span class=\"ci\">[{}, {}]</span></td>",
                value_text(c.p_holm, 4),
                c.n_pairs,
                diff.filter(|x| x.is_finite()).map_or_else(|| "–".to_owned(), |x| format!("{x:+.p$}", p = d as usize)),
                value_text(lo, d),
                value_text(hi, d)
            );
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table></div>\n");
    if let Some(note) = super::render::item_level_note(comparisons, suite) {
        out.push_str("<p class=\"note se-note\">");
        push_escaped(out, &note);
        out.push_str("</p>\n");
    }
}

fn figures(out: &mut String, figures: &[Figure]) {
    out.push_str("<section id=\"figures\">\n<h2>Figures</h2>\n");
    if figures.is_empty() {
        out.push_str("<p class=\"note\">No figures for these benchmarks.</p>\n");
    }
    for f in figures {
        let stem = figure_file_stem(&f.id);
        let _ = write!(out, "<figure id=\"fig-{stem}\">\n{}\n<figcaption>", figure_svg(f));
        push_escaped(out, &f.title);
        let _ = writeln!(out, " — data: <a href=\"{FIGURES_DIR}/{stem}.csv\">CSV</a> · <a href=\"{FIGURES_DIR}/{stem}.svg\">SVG</a></figcaption>\n</figure>");
    }
    out.push_str("</section>\n");
}

/// Indices of the cells rendered inline: all when they fit, otherwise
/// failed cells first, then the rest, kept in grid order.
fn shown_cells(cells: &[CellLine]) -> Vec<usize> {
    if cells.len() <= MAX_CELL_ROWS {
        return (0..cells.len()).collect();
    }
    let failed = (0..cells.len()).filter(|i| cells[*i].state == CellState::Failed);
    let ok = (0..cells.len()).filter(|i| cells[*i].state == CellState::Ok);
    let mut shown: Vec<usize> = failed.chain(ok).take(MAX_CELL_ROWS).collect();
    shown.sort_unstable();
    shown
}

fn cells(out: &mut String, cells: &[CellLine]) {
    out.push_str("<section id=\"cells\">\n<h2>Cells</h2>\n");
    let shown = shown_cells(cells);
    if shown.len() < cells.len() {
        let _ = writeln!(
            out,
            "<p class=\"note\">Showing {} of {} cells (failed cells first, then grid order); the full list is in <a href=\"{CELLS_CSV}\">{CELLS_CSV}</a>.</p>",
            shown.len(),
            cells.len()
        );
    }
    out.push_str("<p><input type=\"search\" id=\"cell-filter\" placeholder=\"filter cells\" aria-label=\"filter cells\" hidden></p>\n");
    out.push_str("<table id=\"cells-table\">\n<thead><tr><th>cell</th><th>model</th><th>task</th><th class=\"num\">seed</th><th>state</th><th class=\"num\">value</th><th>transcript</th></tr></thead>\n<tbody>\n");
    let mut budget = INLINE_TRANSCRIPTS_TOTAL_BYTES;
    let mut inline: Vec<(usize, &str)> = Vec::new();
    for &i in &shown {
        let c = &cells[i];
        let failed = c.state == CellState::Failed;
        out.push_str(if failed { "<tr class=\"failed\"><td" } else { "<tr><td" });
        if !c.keys.is_empty() {
            out.push_str(" title=\"");
            push_escaped(out, &c.keys);
            out.push('"');
        }
        out.push('>');
        push_escaped(out, &c.id);
        out.push_str("</td><td>");
        push_escaped(out, &c.model);
        out.push_str("</td><td>");
        push_escaped(out, &c.task);
        let _ = write!(out, "</td><td class=\"num\">{}</td><td>{}</td><td class=\"num\">", c.seed, if failed { "failed" } else { "ok" });
        push_escaped(out, &c.headline);
        out.push_str("</td><td>");
        match &c.transcript {
            Transcript::Link(p) => match safe_href(p) {
                Some(href) => {
                    let _ = write!(out, "<a href=\"{}\">transcript</a>", escape_html(&href));
                }
                None => out.push('–'),
            },
            Transcript::Inline(text) if text.len() <= INLINE_TRANSCRIPT_MAX_BYTES && text.len() <= budget => {
                budget -= text.len();
                inline.push((i, text));
                let _ = write!(out, "<a href=\"#tr-{i}\">transcript</a>");
            }
            Transcript::Inline(text) => {
                let _ = write!(out, "not inlined ({} KB)", text.len().div_ceil(1024));
            }
            Transcript::None => out.push('–'),
        }
        out.push_str("</td></tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    if !inline.is_empty() {
        out.push_str("<h3>Transcripts</h3>\n");
        for (i, text) in inline {
            let _ = write!(out, "<details id=\"tr-{i}\"><summary>");
            push_escaped(out, &cells[i].id);
            out.push_str("</summary><pre>");
            push_escaped(out, text);
            out.push_str("</pre></details>\n");
        }
    }
    out.push_str("<p class=\"note\">Transcripts not linked or inlined here: <code>evalgrid show &lt;pipeline&gt; &lt;cell&gt;</code>.</p>\n</section>\n");
}

fn provenance(out: &mut String, report: &HtmlReport) {
    out.push_str("<section id=\"provenance\">\n<h2>Provenance</h2>\n<dl>\n");
    let failed = report.cells.iter().filter(|c| c.state == CellState::Failed).count();
    let counts = [
        ("cells".to_owned(), report.cells.len().to_string()),
        ("cells ok".to_owned(), (report.cells.len() - failed).to_string()),
        ("cells failed".to_owned(), failed.to_string()),
    ];
    for (label, value) in report.provenance.iter().chain(counts.iter()) {
        out.push_str("<dt>");
        push_escaped(out, label);
        out.push_str("</dt><dd>");
        push_escaped(out, value);
        out.push_str("</dd>\n");
    }
    out.push_str("</dl>\n");
    if !report.usage.is_empty() {
        out.push_str("<h3>Tokens and cost</h3>\n<table class=\"usage\">\n<thead><tr><th>model</th><th class=\"num\">input tokens</th><th class=\"num\">output tokens</th><th class=\"num\">cost (USD)</th></tr></thead>\n<tbody>\n");
        let cost = |c: Option<f64>| c.map_or_else(|| "–".to_owned(), |c| format!("{c:.4}"));
        for u in &report.usage {
            out.push_str("<tr><td>");
            push_escaped(out, &u.model);
            let _ = writeln!(
                out,
                "</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                u.input_tokens,
                u.output_tokens,
                cost(u.cost_usd)
            );
        }
        let input: u64 = report.usage.iter().map(|u| u.input_tokens).fold(0, u64::saturating_add);
        let output: u64 = report.usage.iter().map(|u| u.output_tokens).fold(0, u64::saturating_add);
        let priced: Vec<f64> = report.usage.iter().filter_map(|u| u.cost_usd).collect();
        let unpriced = report.usage.len() - priced.len();
        let total = if priced.is_empty() { "–".to_owned() } else { cost(Some(priced.iter().sum())) };
        let note = if unpriced > 0 && !priced.is_empty() { format!(" (+{unpriced} unpriced)") } else { String::new() };
        let _ = writeln!(out, "<tr><th>total</th><th class=\"num\">{input}</th><th class=\"num\">{output}</th><th class=\"num\">{total}{note}</th></tr>");
        out.push_str("</tbody>\n</table>\n");
        if let Some(line) = super::render::batch_savings(&report.usage) {
            out.push_str("<p class=\"note\">");
            push_escaped(out, &line);
            out.push_str("</p>\n");
        }
    }
    out.push_str("</section>\n");
}

#[cfg(test)]
mod tests;
