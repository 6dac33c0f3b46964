//! BBEH's report figure: accuracy per task, one bar per model, built-in baseline as a
//! reference marker (one figure per suite: full and Mini).

use crate::envs::benchmark::FigureInput;
use crate::exhibit::{Figure, FigureKind, Series};

/// Accuracy per task for every suite table.
pub fn figures(input: &FigureInput<'_>) -> Vec<Figure> {
    let mut out = Vec::new();
    for t in &input.tables {
        if t.column("accuracy").is_none() {
            continue;
        }
        let series: Vec<Series> = input
            .models
            .iter()
            .filter_map(|m| {
                let values: Vec<(String, f64)> = t
                    .by_task
                    .iter()
                    .filter(|r| r.model == m.id)
                    .filter_map(|r| Some((r.task.clone()?.trim_start_matches("bbeh_").trim_end_matches("/mini").to_owned(), t.value(r, "accuracy")?)))
                    .collect();
                if values.is_empty() {
                    return None;
                }
                let s = Series::labelled(&m.id, values);
                Some(if m.is_builtin() { s.as_reference() } else { s })
            })
            .collect();
        if !series.is_empty() {
            // The title names a baseline only when the grid has one.
            let reference = if series.iter().any(|s| s.reference) { " (built-in baseline as reference)" } else { "" };
            out.push(Figure {
                id: format!("{}-accuracy", t.suite),
                title: format!("{}: accuracy per task{reference}", t.suite),
                kind: FigureKind::Bars,
                x_label: "task".into(),
                y_label: "accuracy".into(),
                series,
                diagonal: false,
            });
        }
    }
    out
}
