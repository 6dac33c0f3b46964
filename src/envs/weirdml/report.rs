//! WeirdML's report figures: accuracy after k submissions, and max@k over first tries
//! (the unbiased estimator), one curve per model; with `report.weirdml`, the time-horizon
//! timeline ([`super::timeline`]).

use super::max_at_k;
use crate::envs::benchmark::FigureInput;
use crate::exhibit::{Figure, FigureKind, Series};

fn line(id: &str, title: &str, x: &str, y: &str, series: Vec<Series>) -> Figure {
    Figure { id: id.into(), title: title.into(), kind: FigureKind::Line, x_label: x.into(), y_label: y.into(), series, diagonal: false }
}

/// Accuracy after k submissions (from the summary rows) and max@k (from the scores).
pub fn figures(input: &FigureInput<'_>) -> Vec<Figure> {
    let mut out = Vec::new();
    for t in &input.tables {
        let after: Vec<Series> = t
            .by_model
            .iter()
            .map(|r| Series::new(&r.model, (1..=5).filter_map(|k| t.value(r, &format!("accuracy_after_{k}")).map(|y| (f64::from(k), y))).collect()))
            .collect();
        if !after.is_empty() {
            out.push(line("weirdml-after-k", "WeirdML: accuracy after k submissions", "submissions k", "accuracy", after));
        }
    }
    let mut max_k = Vec::new();
    for m in input.models {
        let firsts: Vec<f64> = input.cells.iter().filter(|c| c.model == m.id).filter_map(|c| c.score["first_try_accuracy"].as_f64()).collect();
        let pts: Vec<(f64, f64)> = (1..=firsts.len()).filter_map(|k| max_at_k(&firsts, k).map(|v| (k as f64, v))).collect();
        if !pts.is_empty() {
            max_k.push(Series::new(&m.id, pts));
        }
    }
    if !max_k.is_empty() {
        out.push(line("weirdml-max-at-k", "WeirdML: max@k over first tries (unbiased estimator)", "k", "expected best accuracy", max_k));
    }
    out.extend(super::timeline::figure(input));
    out
}
