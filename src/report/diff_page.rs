//! `evalgrid diff` as text and as a self-contained HTML page (`diff.html` in the report
//! folder after a rerun changed cells): changed cells with their reasons, then per model the
//! flips and the paired test of now against before.

use std::fmt::Write as _;

use super::diff::RunDiff;
use super::escape::push_escaped;
use crate::metrics::flips::ModelFlips;
use crate::text::one_line;

/// Most flipped units listed per model on the page and in the text (all are in `--json`).
const MAX_LISTED: usize = 200;

fn num(v: Option<f64>, places: usize) -> String {
    v.filter(|x| x.is_finite()).map_or_else(|| "–".to_owned(), |x| format!("{x:.places$}"))
}

/// One model's summary line: units, flips each way, means, the difference with its CI and
/// the SE's level, McNemar's mid-p.
fn summary(m: &ModelFlips) -> String {
    let t = &m.test;
    let mut line = format!("{} units", m.n_pairs);
    if m.binary {
        let _ = write!(line, ", right→wrong {}, wrong→right {}", m.right_to_wrong, m.wrong_to_right);
    } else {
        let _ = write!(line, ", {} changed", m.flips.len());
    }
    let level = if t.se_level == "item" { "item-level SE: fewer than two tasks" } else { "clustered by task" };
    let _ = write!(
        line,
        "; mean {} → {}, diff {} [{}, {}] ({level})",
        num(t.mean_b, 3),
        num(t.mean_a, 3),
        t.diff.filter(|x| x.is_finite()).map_or_else(|| "–".to_owned(), |x| format!("{x:+.3}")),
        num(t.ci_low, 3),
        num(t.ci_high, 3)
    );
    if let Some(p) = m.mcnemar_mid_p {
        let _ = write!(line, ", McNemar mid-p {p:.4}");
    }
    line
}

/// The diff as plain text.
#[must_use]
pub fn diff_text(d: &RunDiff) -> String {
    let mut out = format!("previous run: {}\ncells scored now: {}", one_line(&d.previous), d.cells_scored);
    if d.keys_known {
        let _ = write!(out, "; changed since the previous run: {}; new: {}", d.cells_changed.len(), d.cells_new.len());
    } else {
        out.push_str("; the previous run's keys are unknown: every common unit compared");
    }
    out.push('\n');
    for c in &d.cells_changed {
        let _ = writeln!(out, "  changed {}: {}", one_line(&c.cell), one_line(&c.reasons.join("; ")));
    }
    for m in &d.models {
        let _ = writeln!(out, "{} {} {}: {}", one_line(&m.suite), one_line(&m.metric), one_line(&m.model), summary(m));
        for f in m.flips.iter().take(MAX_LISTED) {
            let _ = writeln!(out, "  {} seed {} item {}: {} → {}", one_line(&f.task), f.seed, f.item, f.before, f.after);
        }
        if m.flips.len() > MAX_LISTED {
            let _ = writeln!(out, "  … {} more (--json lists all)", m.flips.len() - MAX_LISTED);
        }
    }
    if d.models.is_empty() {
        out.push_str("no unit changed\n");
    }
    out
}

/// The diff as a self-contained HTML page (no script; every string escaped).
#[must_use]
pub fn diff_html(title: &str, d: &RunDiff) -> String {
    let mut out = String::with_capacity(16 * 1024);
    super::html::head(&mut out, &format!("{title}: changes since the previous run"), false);
    out.push_str("<h1>Changes since the previous run</h1>\n<p><a href=\"index.html\">back to the report</a></p>\n<p class=\"note\">Previous run: <code>");
    push_escaped(&mut out, &d.previous);
    let _ = write!(out, "</code>. Cells scored now: {}; changed: {}; new: {}.", d.cells_scored, d.cells_changed.len(), d.cells_new.len());
    out.push_str(
        " Per model: the units of the changed cells both runs scored, now against before: the paired difference with its 95 % CI (clustered by task) and McNemar's mid-p on the flips.</p>\n",
    );
    if !d.cells_changed.is_empty() {
        out.push_str("<h2>Changed cells</h2>\n<table>\n<thead><tr><th>cell</th><th>what changed</th></tr></thead>\n<tbody>\n");
        for c in &d.cells_changed {
            out.push_str("<tr><td>");
            push_escaped(&mut out, &c.cell);
            out.push_str("</td><td>");
            push_escaped(&mut out, &c.reasons.join("; "));
            out.push_str("</td></tr>\n");
        }
        out.push_str("</tbody>\n</table>\n");
    }
    out.push_str("<h2>Flips per model</h2>\n");
    for m in &d.models {
        out.push_str("<h3>");
        push_escaped(&mut out, &format!("{} · {} · {}", m.suite, m.metric, m.model));
        out.push_str("</h3>\n<p>");
        push_escaped(&mut out, &summary(m));
        out.push_str("</p>\n");
        if !m.flips.is_empty() {
            out.push_str("<table>\n<thead><tr><th>task</th><th class=\"num\">seed</th><th class=\"num\">item</th><th class=\"num\">before</th><th class=\"num\">now</th></tr></thead>\n<tbody>\n");
            for f in m.flips.iter().take(MAX_LISTED) {
                out.push_str("<tr><td>");
                push_escaped(&mut out, &f.task);
                let _ = writeln!(
                    out,
                    "</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                    f.seed, f.item, f.before, f.after
                );
            }
            out.push_str("</tbody>\n</table>\n");
        }
    }
    if d.models.is_empty() {
        out.push_str("<p>No unit changed.</p>\n");
    }
    out.push_str("</body>\n</html>\n");
    out
}
