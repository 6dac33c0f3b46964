//! BBQ-Bench's report figure: the fraction of tasks solved against the fraction of the
//! query budget used, one curve per model.

use crate::envs::benchmark::FigureInput;
use crate::exhibit::{Figure, FigureKind, Series};

/// The solved-fraction curve from the per-model summary rows.
pub fn figures(input: &FigureInput<'_>) -> Vec<Figure> {
    let points = [("solved_by_10pct", 0.10), ("solved_by_25pct", 0.25), ("solved_by_50pct", 0.50), ("solved_by_75pct", 0.75), ("solve_rate", 1.0)];
    let mut out = Vec::new();
    for t in &input.tables {
        let series: Vec<Series> = t
            .by_model
            .iter()
            .map(|r| {
                let mut pts = vec![(0.0, 0.0)];
                pts.extend(points.iter().filter_map(|(name, x)| t.value(r, name).map(|y| (*x, y))));
                Series::new(&r.model, pts)
            })
            .collect();
        if !series.is_empty() {
            out.push(Figure {
                id: "bbq-curve".into(),
                title: "BBQ-Bench: solved fraction vs fraction of query budget".into(),
                kind: FigureKind::Line,
                x_label: "fraction of budget used".into(),
                y_label: "fraction of tasks solved".into(),
                series,
                diagonal: false,
            });
        }
    }
    out
}
