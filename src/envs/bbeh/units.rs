//! BBEH's scored units: one item of one task for one seed, read from the `items` rows
//! of a cell's score record, so `items.csv` and paired comparisons see every item.

use serde_json::Value;

use crate::envs::Exchange;
use crate::envs::metric::{Unit, UnitMetric, number};

/// `correct` per item (0/1), whose mean over items is the `accuracy` column.
#[must_use]
pub fn unit_metrics() -> Vec<UnitMetric> {
    vec![UnitMetric::new("correct", "correct", "accuracy", true)]
}

/// One unit per scored item of the record, numbered by the item's index in its task.
#[must_use]
pub fn units(score: &Value) -> Vec<Unit> {
    score
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|row| Some(Unit { item: row.get("index")?.as_u64()?, id: None, values: vec![number(row.get("correct"))] }))
        .collect()
}

/// The extracted answer of each unit of [`units`], in the same order.
#[must_use]
pub fn answers(score: &Value) -> Vec<Option<String>> {
    score
        .get("items")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|row| row.get("index").and_then(Value::as_u64).is_some())
        .map(|row| row.get("extracted").and_then(Value::as_str).map(str::to_owned))
        .collect()
}

/// Each answered item's prompt (from the dataset), target and answer (from the record);
/// none when the dataset is not installed.
#[must_use]
pub fn exchanges(data_dir: &std::path::Path, task: &crate::spec::TaskInstance, episode: &Value) -> Vec<Exchange> {
    let Ok(items) = super::benchmark::load_selected(data_dir, task) else { return Vec::new() };
    let answers = episode.get("answers").and_then(Value::as_array).into_iter().flatten();
    answers
        .filter_map(|a| {
            let index = a.get("index")?.as_u64()?;
            let item = items.iter().find(|i| i.index as u64 == index)?;
            let tokens = |k: &str| a.get(k).and_then(Value::as_u64).unwrap_or(0);
            Some(Exchange {
                item: index,
                prompt: vec![crate::providers::Message::user(super::benchmark::item_prompt(task, item))],
                input: item.input.clone(),
                targets: vec![item.target.clone()],
                answer: a.get("response").and_then(Value::as_str).unwrap_or_default().to_owned(),
                finish_reason: a.get("finish_reason").and_then(Value::as_str).map(str::to_owned),
                input_tokens: tokens("input_tokens"),
                output_tokens: tokens("output_tokens"),
                ..Exchange::default()
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_item_row_is_a_unit() {
        let score = serde_json::json!({"correct": 1, "n": 2, "items": [{"index": 7, "correct": true}, {"index": 3, "correct": false}]});
        assert_eq!(units(&score), vec![Unit { item: 7, id: None, values: vec![Some(1.0)] }, Unit { item: 3, id: None, values: vec![Some(0.0)] }]);
    }
}
