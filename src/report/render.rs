//! Rendering of `summary.md` and `summary.csv` from aggregate tables.
//!
//! Output is a pure function of the tables and the report config (no
//! timestamps, no paths), so an unchanged rerun is byte-identical.

use crate::exhibit::csv_field;
use std::fmt::Write as _;

use crate::metrics::{BenchmarkTables, TableRow};
use crate::spec::ReportConfig;

/// Facts about the run shown under the title.
#[derive(Clone, Debug, Default)]
pub struct RunFacts {
    /// Cells in the grid.
    pub cells_total: usize,
    /// Cells with a score (aggregated).
    pub cells_scored: usize,
    /// Per-model token totals and cost (empty when no model was called).
    pub usage: Vec<ModelUsage>,
    /// Warnings shown before anything else.
    pub warnings: Vec<String>,
    /// Paired model comparisons (ties with the best and minimum detectable differences).
    pub comparisons: Vec<crate::metrics::Comparison>,
}

pub use crate::exhibit::Section;

/// Token totals of one model over its scored cells.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ModelUsage {
    /// Model id.
    pub model: String,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens (reasoning included).
    pub output_tokens: u64,
    /// Cost in US dollars when the model has a price.
    pub cost_usd: Option<f64>,
    /// What the answers read from a batch API cost less than at the normal price (USD).
    pub batch_saved_usd: Option<f64>,
}

/// The report's line on batching: what answers read from a batch API saved, per model.
#[must_use]
pub fn batch_savings(usage: &[ModelUsage]) -> Option<String> {
    let saved: Vec<(&str, f64)> = usage.iter().filter_map(|u| u.batch_saved_usd.filter(|s| *s > 0.0).map(|s| (u.model.as_str(), s))).collect();
    if saved.is_empty() {
        return None;
    }
    let total: f64 = saved.iter().map(|(_, s)| s).sum();
    let each: Vec<String> = saved.iter().map(|(m, s)| format!("{m} ${s:.4}")).collect();
    Some(format!("Answers read from a batch API are priced at the batch price: ${total:.4} saved against the normal price ({}).", each.join(", ")))
}

/// Markdown summary, one section per benchmark.
#[must_use]
pub fn markdown(config: &ReportConfig, tables: &[BenchmarkTables], sections: &[Section], facts: &RunFacts) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# {}\n", escape_md(&config.title));
    for w in &facts.warnings {
        let _ = writeln!(out, "> **Warning:** {}\n", escape_md(w));
    }
    let _ = writeln!(out, "{} of {} cells scored.\n", facts.cells_scored, facts.cells_total);
    if !facts.usage.is_empty() {
        let _ = writeln!(out, "## Tokens and cost\n\n| model | input tokens | output tokens | cost (USD) |\n|---|---:|---:|---:|");
        for u in &facts.usage {
            let cost = u.cost_usd.map_or_else(|| "–".to_owned(), |c| format!("{c:.4}"));
            let _ = writeln!(out, "| {} | {} | {} | {cost} |", escape_md(&u.model), u.input_tokens, u.output_tokens);
        }
        out.push('\n');
        if let Some(line) = batch_savings(&facts.usage) {
            let _ = writeln!(out, "{}\n", escape_md(&line));
        }
    }
    for t in tables {
        let _ = writeln!(out, "## {}\n", escape_md(&t.benchmark));
        let _ = writeln!(out, "### By model\n");
        table(&mut out, t, &t.by_model, false, config.decimals);
        ties(&mut out, &facts.comparisons, &t.benchmark, config.decimals);
        let _ = writeln!(out, "\n### By model × task\n");
        table(&mut out, t, &t.by_task, true, config.decimals);
        out.push('\n');
    }
    for s in sections {
        let _ = writeln!(out, "## {}\n\n| | {} |\n|---|{}", escape_md(&s.title), s.columns.join(" | "), "---:|".repeat(s.columns.len()));
        let formats = column_formats(s);
        for (label, values) in &s.rows {
            let cells: Vec<String> = values.iter().zip(&formats).map(|(v, f)| f.text(*v, config.decimals)).collect();
            let _ = writeln!(out, "| {} | {} |", escape_md(label), cells.join(" | "));
        }
        out.push('\n');
    }
    out
}

/// How a column of an extra table prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnFormat {
    /// A share (header ending in `%`), printed as a percentage: `12.5 %`.
    Percent,
    /// A count: every value a whole number, printed without decimals (`47`, not `47.000`).
    Integer,
    /// Anything else, with the report's decimals.
    Decimal,
}

/// Headers that name counts, printed as integers even when every value is 0 or 1.
const COUNT_COLUMNS: [&str; 6] = ["answers", "no_usage", "n", "turns", "cells", "no grade"];

impl ColumnFormat {
    /// `v` as this column shows it (`–` for no value).
    #[must_use]
    pub fn text(self, v: Option<f64>, decimals: u32) -> String {
        let Some(x) = v.filter(|x| x.is_finite()) else { return "–".to_owned() };
        match self {
            Self::Percent => format!("{:.1} %", 100.0 * x),
            Self::Integer => format!("{x:.0}"),
            Self::Decimal => format!("{x:.d$}", d = decimals as usize),
        }
    }
}

/// Each column's format: shares by their `%` header; counts when every value is whole and
/// the header names a count or some value is above 1 (so a column of 0/1 rates keeps its
/// decimals).
#[must_use]
pub fn column_formats(s: &Section) -> Vec<ColumnFormat> {
    (0..s.columns.len())
        .map(|i| {
            let name = s.columns[i].as_str();
            let values = || s.rows.iter().filter_map(|(_, v)| v.get(i).copied().flatten()).filter(|x| x.is_finite());
            if name.ends_with('%') {
                ColumnFormat::Percent
            } else if values().all(|x| x.fract() == 0.0) && (COUNT_COLUMNS.contains(&name) || values().any(|x| x.abs() > 1.0)) {
                ColumnFormat::Integer
            } else {
                ColumnFormat::Decimal
            }
        })
        .collect()
}

/// The models statistically tied with the best (Holm-adjusted p ≥ 0.05, paired and clustered
/// by task, see `comparisons.csv`) and each pair's minimum detectable difference.
fn ties(out: &mut String, comparisons: &[crate::metrics::Comparison], suite: &str, decimals: u32) {
    let Some((metric, best, others)) = crate::metrics::comparison::ties_with_best(comparisons, suite) else {
        if let Some(note) = item_level_note(comparisons, suite) {
            let _ = writeln!(out, "\n{note}");
        }
        return;
    };
    let d = decimals as usize + 1;
    let tied: Vec<String> = others.iter().filter(|o| o.1).map(|o| escape_md(o.0)).collect();
    let mde: Vec<String> =
        others.iter().map(|(m, _, mde)| format!("{} {}", escape_md(m), mde.map_or_else(|| "–".to_owned(), |x| format!("{x:.d$}")))).collect();
    let _ = writeln!(
        out,
        "\nBest on `{metric}`: {}. Not distinguishable from it (equal mean, or paired Holm-adjusted p ≥ 0.05, or no p-value): {}. \
         Minimum detectable difference against it at 80 % power: {}.",
        escape_md(best),
        if tied.is_empty() { "none".to_owned() } else { tied.join(", ") },
        mde.join(", ")
    );
    if let Some(note) = item_level_note(comparisons, suite) {
        let _ = writeln!(out, "\n{note}");
    }
}

/// The note a suite's comparisons need when fewer than two task clusters left no clustered
/// SE and the item-level paired SE stood in (`se_level = item` in `comparisons.csv`). It names
/// the metrics concerned: on a grid of several tasks, a metric only one task scores (a `qa`
/// task's `choice`) has one cluster, which surprised users reading "fewer than two tasks".
#[must_use]
pub fn item_level_note(comparisons: &[crate::metrics::Comparison], suite: &str) -> Option<String> {
    let mut metrics: Vec<&str> = Vec::new();
    for c in comparisons.iter().filter(|c| c.suite == suite && c.se_level == "item") {
        if !metrics.contains(&c.metric.as_str()) {
            metrics.push(&c.metric);
        }
    }
    if metrics.is_empty() {
        return None;
    }
    let named = metrics.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", ");
    let which = if metrics.len() == 1 { "it is" } else { "each is" };
    Some(format!(
        "Note: fewer than two task clusters, so the paired SEs, CIs and p-values here use the item-level paired SE (items treated as independent; \
         with correlated items this understates the uncertainty). This holds for {named}: a metric's clusters are the tasks that score it, and \
         {which} scored in fewer than two tasks, however many tasks the grid has. `se_level` in comparisons.csv says which SE each pair has."
    ))
}

fn table(out: &mut String, t: &BenchmarkTables, rows: &[TableRow], with_task: bool, decimals: u32) {
    let mut header = vec!["model"];
    if with_task {
        header.push("task");
    }
    header.push("cells");
    header.extend(t.columns.iter().map(|c| c.name.as_str()));
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let align: Vec<&str> = header.iter().enumerate().map(|(i, _)| if i < 1 + usize::from(with_task) { "---" } else { "---:" }).collect();
    let _ = writeln!(out, "|{}|", align.join("|"));
    let d = decimals as usize;
    for r in rows {
        let mut cells = vec![escape_md(&r.model)];
        if with_task {
            cells.push(escape_md(r.task.as_deref().unwrap_or("")));
        }
        cells.push(r.incomplete().unwrap_or_else(|| r.n.to_string()));
        cells.extend(r.values.iter().map(|v| v.map_or_else(|| "–".to_owned(), |x| format!("{x:.d$}"))));
        let _ = writeln!(out, "| {} |", cells.join(" | "));
    }
}

/// CSV with one row per model × task and per model (`task` = `*`), full
/// precision, columns = union of all benchmarks' metrics.
#[must_use]
pub fn csv(tables: &[BenchmarkTables]) -> String {
    let mut columns: Vec<&str> = Vec::new();
    for t in tables {
        for c in &t.columns {
            if !columns.contains(&c.name.as_str()) {
                columns.push(&c.name);
            }
        }
    }
    let mut out = format!("suite,model,task,cells,{},status\n", columns.join(","));
    for t in tables {
        for r in t.by_model.iter().chain(&t.by_task) {
            let mut fields = vec![csv_field(&t.benchmark), csv_field(&r.model), csv_field(r.task.as_deref().unwrap_or("*")), r.n.to_string()];
            for name in &columns {
                let v = t.columns.iter().position(|c| c.name == *name).and_then(|i| r.values.get(i).copied().flatten());
                fields.push(v.map(|x| x.to_string()).unwrap_or_default());
            }
            fields.push(r.incomplete().unwrap_or_default());
            out.push_str(&fields.join(","));
            out.push('\n');
        }
    }
    out
}

/// LaTeX (booktabs) tables, one per benchmark, per model, for papers. With paired
/// comparisons, the best model is bold, those statistically tied with it carry a `$^{=}$`,
/// and a last column gives each model's minimum detectable difference against the best.
#[must_use]
pub fn latex(tables: &[BenchmarkTables], comparisons: &[crate::metrics::Comparison], decimals: u32) -> String {
    let d = decimals as usize;
    let mut out = String::new();
    for t in tables {
        let ties = crate::metrics::comparison::ties_with_best(comparisons, &t.benchmark);
        let cols = t.columns.len() + 2 + usize::from(ties.is_some());
        let _ = writeln!(out, "% {} (evalgrid)\n\\begin{{tabular}}{{l{}}}\n\\toprule", latex_escape(&t.benchmark), "r".repeat(cols - 1));
        let mut header: Vec<String> = ["model".to_owned(), "n".to_owned()].into_iter().chain(t.columns.iter().map(|c| latex_escape(&c.name))).collect();
        if ties.is_some() {
            header.push("MDE".to_owned());
        }
        let _ = writeln!(out, "{} \\\\\n\\midrule", header.join(" & "));
        for r in &t.by_model {
            let mut model = latex_escape(&r.model);
            let mut mde = None;
            if let Some((_, best, others)) = &ties {
                if *best == r.model {
                    model = format!("\\textbf{{{model}}}");
                    mde = Some("--".to_owned());
                } else if let Some((_, tied, m)) = others.iter().find(|o| o.0 == r.model) {
                    if *tied {
                        model.push_str("$^{=}$");
                    }
                    mde = Some(m.map_or_else(|| "--".to_owned(), |x| format!("{x:.p$}", p = d + 1)));
                } else {
                    mde = Some("--".to_owned());
                }
            }
            let mut cells = vec![model, r.incomplete().unwrap_or_else(|| r.n.to_string())];
            cells.extend(r.values.iter().map(|v| v.map_or_else(|| "--".to_owned(), |x| format!("{x:.d$}"))));
            cells.extend(mde);
            let _ = writeln!(out, "{} \\\\", cells.join(" & "));
        }
        let _ = writeln!(out, "\\bottomrule\n\\end{{tabular}}");
        if let Some((metric, ..)) = &ties {
            let _ = writeln!(
                out,
                "\\par\\footnotesize Bold: best on {m}; $^{{=}}$: statistically tied with it (paired, clustered by task, Holm-adjusted $p \\ge 0.05$). \
                 MDE: minimum detectable difference against the best at 80\\,\\% power.",
                m = latex_escape(metric)
            );
        }
        out.push('\n');
    }
    out
}

fn latex_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\textbackslash{}"),
            '&' | '%' | '$' | '#' | '_' | '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            '~' => out.push_str("\\textasciitilde{}"),
            '^' => out.push_str("\\textasciicircum{}"),
            _ => out.push(c),
        }
    }
    out
}

fn escape_md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::MetricColumn;

    fn tables() -> Vec<BenchmarkTables> {
        vec![BenchmarkTables {
            benchmark: "eleusis".into(),
            columns: vec![MetricColumn::mean("mean_score", "score")],
            by_task: vec![TableRow { model: "a|b".into(), task: Some("t,1".into()), n: 3, values: vec![Some(1.0 / 3.0)], planned: 0 }],
            by_model: vec![TableRow { model: "a|b".into(), task: None, n: 3, values: vec![None], planned: 0 }],
        }]
    }

    #[test]
    fn markdown_snapshot() {
        let cfg = ReportConfig { title: "demo".into(), decimals: 2, prices: std::collections::BTreeMap::new(), weirdml: None };
        insta::assert_snapshot!(markdown(&cfg, &tables(), &[], &RunFacts { cells_total: 4, cells_scored: 3, ..RunFacts::default() }), @r"
        # demo

        3 of 4 cells scored.

        ## eleusis

        ### By model

        | model | cells | mean_score |
        |---|---:|---:|
        | a\|b | 3 | – |

        ### By model × task

        | model | task | cells | mean_score |
        |---|---|---:|---:|
        | a\|b | t,1 | 3 | 0.33 |
        ");
    }

    #[test]
    fn counts_print_as_integers_and_shares_as_percentages() {
        let section = Section {
            title: "model outcomes".into(),
            columns: ["answers", "truncated %", "no_usage", "median latency (s)", "rate"].map(str::to_owned).to_vec(),
            rows: vec![
                ("m".into(), vec![Some(47.0), Some(0.125), Some(0.0), Some(1.5), Some(1.0)]),
                ("n".into(), vec![Some(3.0), None, Some(1.0), Some(2.0), Some(0.0)]),
            ],
        };
        let cfg = ReportConfig { title: "t".into(), decimals: 3, prices: std::collections::BTreeMap::new(), weirdml: None };
        let md = markdown(&cfg, &[], &[section], &RunFacts::default());
        // `rate` is whole but 0/1 and not a count: it keeps its decimals.
        assert!(md.contains("| m | 47 | 12.5 % | 0 | 1.500 | 1.000 |") && md.contains("| n | 3 | – | 1 | 2.000 | 0.000 |"), "{md}");
    }

    #[test]
    fn latex_escapes_and_formats() {
        insta::assert_snapshot!(latex(&tables(), &[], 2), @r"
        % eleusis (evalgrid)
        \begin{tabular}{lrr}
        \toprule
        model & n & mean\_score \\
        \midrule
        a|b & 3 & -- \\
        \bottomrule
        \end{tabular}
        ");
    }

    #[test]
    fn latex_marks_the_best_and_its_ties_with_the_mde() {
        let mut t = tables();
        t[0].by_model = ["a", "b", "c"].iter().map(|m| TableRow { model: (*m).into(), task: None, n: 3, values: vec![Some(1.0)], planned: 0 }).collect();
        let pair = |a: &str, b: &str, mean_a: f64, mean_b: f64, p: f64| crate::metrics::Comparison {
            suite: "eleusis".into(),
            metric: "score".into(),
            model_a: a.into(),
            model_b: b.into(),
            n_pairs: 3,
            clusters: 3,
            mean_a: Some(mean_a),
            mean_b: Some(mean_b),
            diff: Some(mean_a - mean_b),
            se: Some(0.1),
            ci_low: None,
            ci_high: None,
            p_value: Some(p),
            p_holm: Some(p),
            mcnemar_p: None,
            mde: Some(0.28),
            se_level: "task".into(),
        };
        let rows = [pair("a", "b", 0.5, 0.9, 0.3), pair("a", "c", 0.5, 0.1, 0.01), pair("b", "c", 0.9, 0.1, 0.001)];
        insta::assert_snapshot!(latex(&t, &rows, 2), @r"
        % eleusis (evalgrid)
        \begin{tabular}{lrrr}
        \toprule
        model & n & mean\_score & MDE \\
        \midrule
        a$^{=}$ & 3 & 1.00 & 0.280 \\
        \textbf{b} & 3 & 1.00 & -- \\
        c & 3 & 1.00 & 0.280 \\
        \bottomrule
        \end{tabular}
        \par\footnotesize Bold: best on score; $^{=}$: statistically tied with it (paired, clustered by task, Holm-adjusted $p \ge 0.05$). MDE: minimum detectable difference against the best at 80\,\% power.
        ");
    }

    #[test]
    fn csv_quotes_and_keeps_precision() {
        insta::assert_snapshot!(csv(&tables()), @r#"
        suite,model,task,cells,mean_score,status
        eleusis,a|b,*,3,,
        eleusis,a|b,"t,1",3,0.3333333333333333,
        "#);
    }
}
