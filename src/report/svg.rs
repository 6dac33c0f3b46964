//! A tiny hand-written SVG chart module for the HTML report: line charts
//! (several series, optional diagonal), scatter plots with point labels and
//! grouped bar charts with an optional reference series drawn as markers.
//!
//! Output is a pure function of the [`Figure`]: coordinates are printed with
//! two fixed decimals (trailing zeros trimmed), tick values come from integer
//! multiples of a 1/2/5 step, and all text goes through
//! [`escape_html`](super::escape::escape_html), so the same figure gives the
//! same bytes and model-chosen names never become markup. Data marks carry
//! `class="mark"`; axes, grid and the diagonal are `<line>`s.

use crate::exhibit::csv_field;
use std::fmt::Write as _;

use super::escape::{escape_html, push_escaped};

/// Most marks drawn per series; longer series are thinned to every k-th
/// point (the CSV keeps them all) so one figure cannot blow up the page.
pub const MAX_MARKS_PER_SERIES: usize = 2_000;

pub use crate::exhibit::{Figure, FigureKind, Series};

/// File-name-safe stem for a figure's `.svg`/`.csv` files: ASCII letters,
/// digits, `-` and `_` kept, everything else `-` (never empty).
#[must_use]
pub fn figure_file_stem(id: &str) -> String {
    let s: String = id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '-' }).collect();
    if s.is_empty() { "figure".to_owned() } else { s }
}

/// The figure's data as CSV (`series,x,y,label`), every point at full
/// precision, so each figure can be re-plotted elsewhere.
#[must_use]
pub fn figure_csv(figure: &Figure) -> String {
    let mut out = String::from("series,x,y,label\n");
    for s in &figure.series {
        for (i, (x, y)) in s.points.iter().enumerate() {
            let _ = writeln!(out, "{},{x},{y},{}", csv_field(&s.name), csv_field(s.label(i)));
        }
    }
    out
}

const PALETTE: [&str; 10] = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#8c8c8c"];
const REFERENCE_COLOUR: &str = "#333333";
const WIDTH: f64 = 760.0;
const LEFT: f64 = 72.0;
const TOP: f64 = 40.0;
const PLOT_HEIGHT: f64 = 300.0;
const LEGEND_WIDTH: f64 = 190.0;
const LEGEND_ROW: f64 = 18.0;

/// Coordinate text: two decimals, trailing zeros trimmed, no `-0`.
pub(crate) fn num(x: f64) -> String {
    trim(format!("{x:.2}"))
}

fn trim(mut s: String) -> String {
    if s.contains('.') {
        while s.ends_with('0') {
            s.pop();
        }
        if s.ends_with('.') {
            s.pop();
        }
    }
    if s == "-0" { "0".to_owned() } else { s }
}

/// A linear axis: domain expanded to whole steps, ticks at `i · step`.
#[derive(Debug, PartialEq)]
pub(crate) struct Axis {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    step: f64,
    first: i64,
    last: i64,
}

impl Axis {
    /// Axis over the finite values in `values` (plus 0 when `zero`).
    pub(crate) fn over(values: impl Iterator<Item = f64>, zero: bool) -> Self {
        let (mut lo, mut hi) = values.filter(|v| v.is_finite()).fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), v| (l.min(v), h.max(v)));
        if zero {
            lo = lo.min(0.0);
            hi = hi.max(0.0);
        }
        if !lo.is_finite() || !hi.is_finite() {
            (lo, hi) = (0.0, 1.0);
        }
        if hi - lo <= f64::EPSILON * hi.abs().max(1.0) {
            let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
            (lo, hi) = (if zero && lo >= 0.0 { lo.min(0.0) } else { lo - pad }, hi + pad);
        }
        let step = nice_step((hi - lo) / 5.0);
        #[expect(clippy::cast_possible_truncation, reason = "tick indices of a finite domain over a 1/2/5 step are small")]
        let (first, last) = ((lo / step + 1e-9).floor() as i64, (hi / step - 1e-9).ceil() as i64);
        Self { lo: first as f64 * step, hi: last as f64 * step, step, first, last }
    }

    /// Tick values with their label text.
    pub(crate) fn ticks(&self) -> Vec<(f64, String)> {
        let max_abs = self.lo.abs().max(self.hi.abs());
        let (div, suffix) = if max_abs >= 1e10 {
            (1e9, "G")
        } else if max_abs >= 1e7 {
            (1e6, "M")
        } else if max_abs >= 1e4 {
            (1e3, "k")
        } else {
            (1.0, "")
        };
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "clamped to 0..=12 first")]
        let decimals = (-((self.step / div).log10() + 1e-9).floor()).clamp(0.0, 12.0) as usize;
        (self.first..=self.last)
            .map(|i| {
                let v = i as f64 * self.step;
                let text = format!("{:.decimals$}", v / div);
                if text.trim_start_matches(['-', '0', '.']).is_empty() {
                    // Zero: no sign, and no unit suffix ("0", not "-0.0k").
                    let zero = text.trim_start_matches('-');
                    (v, if suffix.is_empty() { zero.to_owned() } else { "0".to_owned() })
                } else {
                    (v, format!("{text}{suffix}"))
                }
            })
            .collect()
    }

    /// Position of `v` in `[a, b]` (screen units).
    fn map(&self, v: f64, a: f64, b: f64) -> f64 {
        a + (v - self.lo) / (self.hi - self.lo) * (b - a)
    }
}

fn nice_step(raw: f64) -> f64 {
    let raw = if raw.is_finite() && raw > 0.0 { raw } else { 1.0 };
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 + 1e-9 {
        1.0
    } else if norm <= 2.0 + 1e-9 {
        2.0
    } else if norm <= 5.0 + 1e-9 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// Shortens `s` to `max` characters with an ellipsis.
fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max { s.to_owned() } else { format!("{}…", s.chars().take(max.saturating_sub(1)).collect::<String>()) }
}

fn colour(series_index: usize, s: &Series) -> &'static str {
    if s.reference { REFERENCE_COLOUR } else { PALETTE[series_index % PALETTE.len()] }
}

/// Finite points of a series, thinned to at most [`MAX_MARKS_PER_SERIES`]
/// (every k-th point, deterministic), with their original indices.
fn drawn(s: &Series) -> (Vec<(usize, f64, f64)>, usize) {
    let finite: Vec<(usize, f64, f64)> =
        s.points.iter().enumerate().filter(|(_, (x, y))| x.is_finite() && y.is_finite()).map(|(i, (x, y))| (i, *x, *y)).collect();
    let stride = finite.len().div_ceil(MAX_MARKS_PER_SERIES).max(1);
    (finite.into_iter().step_by(stride).collect(), stride)
}

/// Category keys of a bar chart: labels (or formatted x) in first-seen order.
fn categories(figure: &Figure) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for s in &figure.series {
        for (i, (x, _)) in s.points.iter().enumerate() {
            let key = category_key(s, i, *x);
            if !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

fn category_key(s: &Series, i: usize, x: f64) -> String {
    let l = s.label(i);
    if l.is_empty() { trim(format!("{x}")) } else { l.to_owned() }
}

/// Plot geometry shared by the drawing helpers.
struct Frame {
    left: f64,
    right: f64,
    top: f64,
    bottom: f64,
    height: f64,
}

/// The figure as a standalone SVG document (also inlined in the page);
/// `class="figure"` on the root, data marks have `class="mark"`.
#[must_use]
pub fn figure_svg(figure: &Figure) -> String {
    let legend = figure.series.len() > 1 || figure.diagonal || figure.series.iter().any(|s| s.reference);
    let cats = if figure.kind == FigureKind::Bars { categories(figure) } else { Vec::new() };
    let rotate = figure.kind == FigureKind::Bars && (cats.len() > 8 || cats.iter().any(|c| c.chars().count() > 10));
    let bottom_margin = if rotate { 130.0 } else { 56.0 };
    let legend_rows = figure.series.len() + usize::from(figure.diagonal);
    let right = WIDTH - if legend { LEGEND_WIDTH } else { 24.0 };
    let height = (TOP + PLOT_HEIGHT + bottom_margin).max(TOP + legend_rows as f64 * LEGEND_ROW + 24.0);
    let f = Frame { left: LEFT, right, top: TOP, bottom: TOP + PLOT_HEIGHT, height };

    let mut out = String::with_capacity(4096);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="figure" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" font-family="sans-serif" font-size="12">"#,
        w = num(WIDTH),
        h = num(f.height)
    );
    let _ = write!(out, "<title>{}</title>", escape_html(&figure.title));
    let _ =
        write!(out, r#"<text x="{}" y="22" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#, num(WIDTH / 2.0), escape_html(&figure.title));

    let all = || figure.series.iter().flat_map(|s| s.points.iter().copied());
    let y_axis = Axis::over(all().map(|p| p.1).chain(figure.diagonal.then_some(all().map(|p| p.0)).into_iter().flatten()), figure.kind != FigureKind::Scatter);
    let x_axis = (figure.kind != FigureKind::Bars)
        .then(|| Axis::over(all().map(|p| p.0).chain(figure.diagonal.then_some(all().map(|p| p.1)).into_iter().flatten()), false));

    // Grid, axes and ticks.
    out.push_str(r##"<g stroke="#e6e6e6">"##);
    for (v, _) in y_axis.ticks() {
        let y = num(y_axis.map(v, f.bottom, f.top));
        let _ = write!(out, r#"<line x1="{}" x2="{}" y1="{y}" y2="{y}"/>"#, num(f.left), num(f.right));
    }
    if let Some(xa) = &x_axis {
        for (v, _) in xa.ticks() {
            let x = num(xa.map(v, f.left, f.right));
            let _ = write!(out, r#"<line x1="{x}" x2="{x}" y1="{}" y2="{}"/>"#, num(f.top), num(f.bottom));
        }
    }
    out.push_str("</g>");
    let _ = write!(
        out,
        r##"<g stroke="#333333"><line x1="{l}" x2="{l}" y1="{t}" y2="{b}"/><line x1="{l}" x2="{r}" y1="{b}" y2="{b}"/></g>"##,
        l = num(f.left),
        r = num(f.right),
        t = num(f.top),
        b = num(f.bottom)
    );
    out.push_str(r##"<g fill="#333333">"##);
    for (v, text) in y_axis.ticks() {
        let _ =
            write!(out, r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#, num(f.left - 6.0), num(y_axis.map(v, f.bottom, f.top) + 4.0), escape_html(&text));
    }
    if let Some(xa) = &x_axis {
        for (v, text) in xa.ticks() {
            let _ =
                write!(out, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, num(xa.map(v, f.left, f.right)), num(f.bottom + 16.0), escape_html(&text));
        }
    }
    out.push_str("</g>");
    let _ =
        write!(out, r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#, num((f.left + f.right) / 2.0), num(f.height - 8.0), escape_html(&figure.x_label));
    let (yx, yy) = (num(16.0), num((f.top + f.bottom) / 2.0));
    let _ = write!(out, r#"<text x="{yx}" y="{yy}" text-anchor="middle" transform="rotate(-90 {yx} {yy})">{}</text>"#, escape_html(&figure.y_label));

    let thinned = match (&x_axis, figure.kind) {
        (Some(xa), FigureKind::Line | FigureKind::Scatter) => {
            if figure.diagonal {
                let lo = xa.lo.max(y_axis.lo);
                let hi = xa.hi.min(y_axis.hi);
                if lo < hi {
                    let _ = write!(
                        out,
                        r##"<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="#999999" stroke-dasharray="4 4"/>"##,
                        num(xa.map(lo, f.left, f.right)),
                        num(y_axis.map(lo, f.bottom, f.top)),
                        num(xa.map(hi, f.left, f.right)),
                        num(y_axis.map(hi, f.bottom, f.top))
                    );
                }
            }
            let mut thinned = 1;
            for (i, s) in figure.series.iter().enumerate() {
                thinned = thinned.max(points_series(&mut out, figure.kind, s, colour(i, s), xa, &y_axis, &f));
            }
            thinned
        }
        _ => bars(&mut out, figure, &cats, &y_axis, &f, rotate),
    };
    if thinned > 1 {
        let _ = write!(
            out,
            r##"<text x="{}" y="{}" text-anchor="end" font-size="10" fill="#666666">1 in {thinned} points drawn; all in CSV</text>"##,
            num(f.right),
            num(f.top - 4.0)
        );
    }
    if legend {
        legend_svg(&mut out, figure, &f);
    }
    if figure.series.iter().all(|s| s.points.iter().all(|(x, y)| !x.is_finite() || !y.is_finite())) {
        let _ = write!(
            out,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#666666">no data</text>"##,
            num((f.left + f.right) / 2.0),
            num((f.top + f.bottom) / 2.0)
        );
    }
    out.push_str("</svg>");
    out
}

/// Draws one line or scatter series; returns its thinning stride.
fn points_series(out: &mut String, kind: FigureKind, s: &Series, c: &str, xa: &Axis, ya: &Axis, f: &Frame) -> usize {
    let (pts, stride) = drawn(s);
    let xy = |x: f64, y: f64| (num(xa.map(x, f.left, f.right)), num(ya.map(y, f.bottom, f.top)));
    out.push_str("<g>");
    if kind == FigureKind::Line && pts.len() > 1 {
        let coords: Vec<String> = pts
            .iter()
            .map(|(_, x, y)| {
                let (a, b) = xy(*x, *y);
                format!("{a},{b}")
            })
            .collect();
        let dash = if s.reference { r#" stroke-dasharray="6 4""# } else { "" };
        let _ = write!(out, r#"<polyline class="mark" fill="none" stroke="{c}" stroke-width="2"{dash} points="{}"/>"#, coords.join(" "));
    }
    if kind == FigureKind::Scatter || pts.len() <= 60 {
        let r = if kind == FigureKind::Scatter { "3.5" } else { "2.5" };
        for (i, x, y) in &pts {
            let (a, b) = xy(*x, *y);
            let _ = write!(out, r#"<circle class="mark" cx="{a}" cy="{b}" r="{r}" fill="{c}"><title>"#);
            push_escaped(out, &s.name);
            let label = s.label(*i);
            if !label.is_empty() {
                out.push_str(" · ");
                push_escaped(out, label);
            }
            let _ = write!(out, " ({}, {})</title></circle>", num_label(*x), num_label(*y));
            if kind == FigureKind::Scatter && !label.is_empty() {
                // Labels right of the dot, or left of it near the right edge.
                let px = xa.map(*x, f.left, f.right);
                let (lx, anchor) = if px > f.right - 140.0 { (px - 5.0, r#" text-anchor="end""#) } else { (px + 5.0, "") };
                let _ = write!(out, r#"<text x="{}" y="{}" font-size="10"{anchor}>"#, num(lx), num(ya.map(*y, f.bottom, f.top) - 5.0));
                push_escaped(out, &clip(label, 24));
                out.push_str("</text>");
            }
        }
    }
    out.push_str("</g>");
    stride
}

/// Tooltip number: up to 4 decimals, trimmed.
fn num_label(x: f64) -> String {
    trim(format!("{x:.4}"))
}

/// Draws grouped bars (and reference markers); returns the thinning stride.
fn bars(out: &mut String, figure: &Figure, cats: &[String], ya: &Axis, f: &Frame, rotate: bool) -> usize {
    let bar_series: Vec<(usize, &Series)> = figure.series.iter().enumerate().filter(|(_, s)| !s.reference).collect();
    let band = (f.right - f.left) / cats.len().max(1) as f64;
    let inner = band * 0.8;
    let width = inner / bar_series.len().max(1) as f64;
    let zero = ya.map(0.0, f.bottom, f.top);
    let index_of = |key: &str| cats.iter().position(|c| c == key).unwrap_or(0);
    let mut stride = 1;
    for (i, s) in figure.series.iter().enumerate() {
        let (pts, st) = drawn(s);
        stride = stride.max(st);
        let c = colour(i, s);
        out.push_str("<g>");
        let slot = bar_series.iter().position(|(j, _)| *j == i).unwrap_or(0);
        for (p, x, y) in pts {
            let key = category_key(s, p, x);
            let band_left = f.left + index_of(&key) as f64 * band + (band - inner) / 2.0;
            let py = ya.map(y, f.bottom, f.top);
            if s.reference {
                let _ = write!(
                    out,
                    r#"<path class="mark" d="M{} {}H{}" stroke="{c}" stroke-width="2" stroke-dasharray="4 2" fill="none"><title>"#,
                    num(band_left),
                    num(py),
                    num(band_left + inner)
                );
            } else {
                let _ = write!(
                    out,
                    r#"<rect class="mark" x="{}" y="{}" width="{}" height="{}" fill="{c}"><title>"#,
                    num(band_left + slot as f64 * width),
                    num(py.min(zero)),
                    num((width - 1.0).max(0.5)),
                    num((py - zero).abs())
                );
            }
            push_escaped(out, &s.name);
            out.push_str(" · ");
            push_escaped(out, &key);
            let _ = write!(out, ": {}</title></{}>", num_label(y), if s.reference { "path" } else { "rect" });
        }
        out.push_str("</g>");
    }
    out.push_str(r##"<g fill="#333333">"##);
    for (i, c) in cats.iter().enumerate() {
        let x = num(f.left + (i as f64 + 0.5) * band);
        let y = num(f.bottom + 14.0);
        if rotate {
            let _ = write!(out, r#"<text x="{x}" y="{y}" text-anchor="end" font-size="10" transform="rotate(-40 {x} {y})">"#);
        } else {
            let _ = write!(out, r#"<text x="{x}" y="{y}" text-anchor="middle">"#);
        }
        push_escaped(out, &clip(c, 26));
        out.push_str("</text>");
    }
    out.push_str("</g>");
    stride
}

fn legend_svg(out: &mut String, figure: &Figure, f: &Frame) {
    // (colour, stroke width, dash pattern, name) per row.
    let mut rows: Vec<(&str, &str, &str, &str)> = figure
        .series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let width = if figure.kind == FigureKind::Bars && !s.reference { "10" } else { "2" };
            (colour(i, s), width, if s.reference { "4 2" } else { "" }, s.name.as_str())
        })
        .collect();
    if figure.diagonal {
        rows.push(("#999999", "2", "4 4", "y = x"));
    }
    let x = f.right + 16.0;
    out.push_str(r#"<g font-size="11">"#);
    for (i, (c, width, dash, name)) in rows.into_iter().enumerate() {
        let y = f.top + 6.0 + i as f64 * LEGEND_ROW;
        let dash = if dash.is_empty() { String::new() } else { format!(r#" stroke-dasharray="{dash}""#) };
        let _ = write!(out, r#"<line x1="{}" x2="{}" y1="{y1}" y2="{y1}" stroke="{c}" stroke-width="{width}"{dash}/>"#, num(x), num(x + 16.0), y1 = num(y));
        let _ = write!(out, r#"<text x="{}" y="{}">"#, num(x + 22.0), num(y + 4.0));
        push_escaped(out, &clip(name, 24));
        out.push_str("</text>");
    }
    out.push_str("</g>");
}

#[cfg(test)]
mod tests;
