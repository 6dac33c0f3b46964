//! Eleusis' report exhibits: the spec §5 tables (headline metrics with bootstrap CI,
//! calibration, guess rate) computed by the code that reproduces the published tables,
//! and the figures drawn from them (calibration, guess rate, score vs tokens, boldness).

use std::collections::BTreeMap;

use rayon::prelude::*;
use serde_json::Value;

use super::analysis::export::analyze_rounds;
use crate::envs::benchmark::{FigureInput, SectionInput};
use crate::exec::StepError;
use crate::exhibit::{Figure, FigureKind, Section, Series};

/// Title prefixes of the three tables (the figures find them by these).
const HEADLINE: &str = "eleusis: spec §5 metrics";
const CALIBRATION: &str = "eleusis: calibration";
const GUESS_RATE: &str = "eleusis: guess rate";

/// The spec §5 tables per model; a model with unscored rounds gets no row (no model
/// average over the rounds that happened to finish).
pub fn sections(input: &SectionInput<'_>) -> Result<Vec<Section>, StepError> {
    let mut headline = Section { title: format!("{HEADLINE} (95 % bootstrap CI of the floored score)"), ..Section::default() };
    let mut calibration = Section {
        title: format!("{CALIBRATION} (checks with confidence ≥ 5)"),
        columns: vec!["level".into(), "accuracy".into(), "n".into()],
        ..Section::default()
    };
    let mut guess_rate = Section {
        title: format!("{GUESS_RATE} per confidence level"),
        columns: vec!["level".into(), "guess_rate".into(), "turns".into()],
        ..Section::default()
    };
    for model in input.models {
        let cells: Vec<usize> = (0..input.cells.len()).filter(|&i| input.cells[i].model == model.id).collect();
        if cells.is_empty() || cells.len() < (input.planned)(&model.id) {
            continue;
        }
        let read: Vec<Option<Value>> = cells.par_iter().map(|&i| (input.episode)(i)).collect::<Result<_, _>>()?;
        let rounds: Vec<Value> = read.into_iter().flatten().collect();
        let Some(m) = analyze_rounds(&model.id, &rounds) else { continue };
        if headline.columns.is_empty() {
            headline.columns = m.headline.values().iter().map(|(n, _)| (*n).to_owned()).collect();
            headline.columns.extend(["floored_ci_low", "floored_ci_high", "ece", "brier"].map(str::to_owned));
        }
        let ci = m.bootstrap.iter().find(|b| b.metric == "avg_floored_score");
        let mut values: Vec<Option<f64>> = m.headline.values().iter().map(|(_, v)| *v).collect();
        values.extend([ci.and_then(|c| c.lower), ci.and_then(|c| c.upper), m.calibration.ece, m.calibration.brier]);
        headline.rows.push((model.id.clone(), values));
        for g in m.guess_rate.iter().filter(|g| g.total_turns > 0) {
            #[expect(clippy::cast_precision_loss, reason = "levels are 5..=10")]
            guess_rate.rows.push((model.id.clone(), vec![Some(g.level as f64), g.rate, Some(f64::from(g.total_turns))]));
        }
        for l in &m.calibration.levels {
            #[expect(clippy::cast_precision_loss, reason = "levels are 5..=10")]
            calibration.rows.push((model.id.clone(), vec![Some(l.level as f64), Some(l.accuracy), Some(f64::from(l.n))]));
        }
    }
    Ok([headline, calibration, guess_rate].into_iter().filter(|s| !s.rows.is_empty()).collect())
}

fn figure(id: &str, title: &str, kind: FigureKind, x: &str, y: &str, series: Vec<Series>, diagonal: bool) -> Figure {
    Figure { id: id.into(), title: title.into(), kind, x_label: x.into(), y_label: y.into(), series, diagonal }
}

/// Per model, the `(level / 10, value)` points of a per-level table.
fn per_level(s: &Section) -> Vec<Series> {
    let mut by_model: BTreeMap<&str, Vec<(f64, f64)>> = BTreeMap::new();
    for (model, v) in &s.rows {
        if let (Some(Some(level)), Some(Some(y))) = (v.first(), v.get(1)) {
            by_model.entry(model).or_default().push((level / 10.0, *y));
        }
    }
    by_model.into_iter().map(|(m, pts)| Series::new(m, pts)).collect()
}

/// Calibration and guess-rate curves, score vs tokens and no-stakes scatters, boldness bars.
pub fn figures(input: &FigureInput<'_>) -> Vec<Figure> {
    let mut out = Vec::new();
    let find = |prefix: &str| input.sections.iter().find(|s| s.title.starts_with(prefix)).copied();
    if let Some(cal) = find(CALIBRATION) {
        out.push(figure(
            "eleusis-calibration",
            "Eleusis: calibration (accuracy of checks by stated confidence)",
            FigureKind::Line,
            "stated confidence",
            "accuracy",
            per_level(cal),
            true,
        ));
    }
    if let Some(g) = find(GUESS_RATE) {
        out.push(figure(
            "eleusis-guess-rate",
            "Eleusis: formal-guess rate by stated confidence",
            FigureKind::Line,
            "stated confidence",
            "share of turns with a formal guess",
            per_level(g),
            false,
        ));
    }
    if let Some(h) = find(HEADLINE) {
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
            out.push(figure(
                "eleusis-boldness",
                "Eleusis: boldness index (> 0 reckless, < 0 cautious)",
                FigureKind::Bars,
                "model",
                "boldness index",
                vec![Series::labelled("boldness", values)],
                false,
            ));
        }
    }
    out
}
