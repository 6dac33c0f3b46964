//! Responses API streams (`response.created`, `response.output_item.*`,
//! `response.output_text.delta`, …, then `response.completed`, `response.incomplete` or
//! `response.failed`) folded into the final response object.
//!
//! The terminal event carries the whole response, so it is the body; the items of
//! `response.output_item.done` fill in its `output` only where a server sends the terminal
//! response without one. An `error` event is the body as sent, which the parser classifies.
//! Every `response` an event carries names its model: they must agree.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{Budget, ModelIds, SseEvent, event_json, json_len, stream_cut};
use crate::providers::CallError;

/// The events of one Responses stream so far.
#[derive(Debug, Default)]
pub(super) struct ResponsesStream {
    response: Option<Value>,
    /// What the kept non-terminal `response` costs.
    response_cost: usize,
    items: BTreeMap<u64, Value>,
    models: ModelIds,
    terminal: bool,
    error: Option<Value>,
}

impl ResponsesStream {
    /// Folds one event in; `true` once the stream is over (a terminal event or an error).
    pub(super) fn push(&mut self, event: &SseEvent, budget: &mut Budget) -> Result<bool, CallError> {
        let json = event_json(event)?;
        let kind = json.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str()).to_owned();
        let index = json.get("output_index").and_then(Value::as_u64);
        if let Some(model) = json.pointer("/response/model").and_then(Value::as_str) {
            self.models.see(model);
        }
        match kind.as_str() {
            "response.created" | "response.in_progress" | "response.queued" => {
                let response = json.get("response").cloned();
                let cost = response.as_ref().map_or(0, json_len);
                budget.take(cost)?;
                budget.give(std::mem::replace(&mut self.response_cost, cost));
                self.response = response;
            }
            "response.output_item.added" => {
                if let (Some(index), Some(item)) = (index, json.get("item"))
                    && !self.items.contains_key(&index)
                {
                    budget.take(json_len(item))?;
                    self.items.insert(index, item.clone());
                }
            }
            "response.output_item.done" => {
                if let (Some(index), Some(item)) = (index, json.get("item")) {
                    budget.take(json_len(item))?;
                    if let Some(old) = self.items.insert(index, item.clone()) {
                        budget.give(json_len(&old));
                    }
                }
            }
            "response.completed" | "response.incomplete" | "response.failed" => {
                // The whole answer, once: the client checks the assembled body against the cap.
                self.response = json.get("response").cloned();
                self.terminal = true;
                return Ok(true);
            }
            "error" => {
                self.error = Some(json);
                return Ok(true);
            }
            _ => {}
        }
        Ok(false)
    }

    /// The response object the same call returns without streaming.
    pub(super) fn finish(self) -> Result<Value, CallError> {
        if let Some(error) = self.error {
            return Ok(error);
        }
        let (true, Some(mut response)) = (self.terminal, self.response) else {
            return Err(stream_cut("no `response.completed`, `response.incomplete` or `response.failed` event"));
        };
        if let Some(map) = response.as_object_mut() {
            self.models.write(map, "model");
        }
        let output_missing = response.get("output").and_then(Value::as_array).is_none_or(Vec::is_empty);
        if let Some(map) = response.as_object_mut().filter(|_| output_missing && !self.items.is_empty()) {
            map.insert("output".into(), Value::Array(self.items.into_values().collect()));
        }
        Ok(response)
    }
}
