//! Seeds are repeats: per model, task and scorer, the mean over items of each item's mean
//! over seeds, `pass@1`, `pass@k` (the unbiased estimator of Chen et al. 2021 with k the
//! number of seeds), `max@k` and `maj@k` (the score of the answer given most often). A
//! table computed in the metrics step from the cells' score records.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::envs::benchmark::SectionInput;
use crate::exhibit::Section;

/// Title of the table.
pub const TITLE: &str = "Repeats per item (seeds as samples)";

/// `pass@k` = 1 − C(n − c, k) / C(n, k): the chance that at least one of k draws without
/// replacement from n samples, c of them correct, is correct.
#[must_use]
pub fn pass_at_k(n: u64, c: u64, k: u64) -> f64 {
    if n < k || k == 0 {
        return f64::NAN;
    }
    if n - c < k {
        return 1.0;
    }
    // ∏_{i = n−c+1}^{n} (1 − k / i)
    1.0 - ((n - c + 1)..=n).map(|i| 1.0 - k as f64 / i as f64).product::<f64>()
}

/// One item's samples: (answer key, value) per seed.
type Samples = Vec<(String, Option<f64>)>;

/// Per (model, task): the scorer names seen, and per item, per scorer, its samples.
type Groups = BTreeMap<(usize, String), (Vec<String>, BTreeMap<u64, BTreeMap<String, Samples>>)>;

/// The reducer table over `input`'s cells.
#[must_use]
pub fn sections(input: &SectionInput<'_>) -> Vec<Section> {
    // (model, task) → scorer → item → samples
    let mut groups: Groups = BTreeMap::new();
    for cell in &input.cells {
        let model = input.models.iter().position(|m| m.id == cell.model).unwrap_or(usize::MAX);
        let entry = groups.entry((model, cell.task.clone())).or_default();
        for name in cell.score.get("scorers").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            if !entry.0.iter().any(|n| n == name) {
                entry.0.push(name.to_owned());
            }
        }
        for row in cell.score.get("items").and_then(Value::as_array).into_iter().flatten() {
            let index = row.get("index").and_then(Value::as_u64).unwrap_or(0);
            let answer = row.get("answer").and_then(Value::as_str).unwrap_or_default().to_owned();
            for (name, v) in row.get("scores").and_then(Value::as_object).into_iter().flatten() {
                entry.1.entry(index).or_default().entry(name.clone()).or_default().push((answer.clone(), v.as_f64()));
            }
        }
    }
    let columns = ["items", "k", "mean", "pass@1", "pass@k", "max@k", "maj@k"].map(str::to_owned).to_vec();
    let mut rows = Vec::new();
    for ((model, task), (names, items)) in &groups {
        let model = input.models.get(*model).map_or("?", |m| m.id.as_str());
        for name in names {
            let mut acc = [0.0f64; 5];
            let (mut n_items, mut k_min) = (0u64, u64::MAX);
            for samples in items.values().filter_map(|s| s.get(name)) {
                let values: Vec<f64> = samples.iter().filter_map(|(_, v)| *v).collect();
                if values.is_empty() {
                    continue;
                }
                let n = values.len() as u64;
                let c = values.iter().filter(|v| **v >= 1.0).count() as u64;
                n_items += 1;
                k_min = k_min.min(n);
                acc[0] += values.iter().sum::<f64>() / n as f64;
                acc[1] += c as f64 / n as f64;
                acc[2] += pass_at_k(n, c, n);
                acc[3] += values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                // The most frequent answer (ties: the earliest seed's), and its score.
                let mut counts: Vec<(&str, usize, Option<f64>)> = Vec::new();
                for (a, v) in samples {
                    match counts.iter_mut().find(|(k, _, _)| k == a) {
                        Some(e) => e.1 += 1,
                        None => counts.push((a, 1, *v)),
                    }
                }
                let best = counts.iter().max_by(|a, b| a.1.cmp(&b.1).then(std::cmp::Ordering::Greater)).and_then(|e| e.2).unwrap_or(0.0);
                acc[4] += best;
            }
            if n_items == 0 {
                continue;
            }
            let mean = |x: f64| Some(x / n_items as f64);
            rows.push((
                format!("{model} · {task} · {name}"),
                vec![Some(n_items as f64), Some(k_min as f64), mean(acc[0]), mean(acc[1]), mean(acc[2]), mean(acc[3]), mean(acc[4])],
            ));
        }
    }
    if rows.is_empty() {
        return Vec::new();
    }
    vec![Section { title: TITLE.into(), columns, rows }]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pass_at_k_is_the_unbiased_estimator() {
        assert!((pass_at_k(3, 0, 3) - 0.0).abs() < 1e-12);
        assert!((pass_at_k(3, 1, 3) - 1.0).abs() < 1e-12);
        assert!((pass_at_k(4, 1, 1) - 0.25).abs() < 1e-12);
        // 1 − C(3, 2) / C(5, 2) = 1 − 3/10
        assert!((pass_at_k(5, 2, 2) - 0.7).abs() < 1e-12);
    }
}
