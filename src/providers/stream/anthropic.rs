//! Anthropic Messages streams (`message_start`, `content_block_start` / `_delta` / `_stop`,
//! `message_delta`, `message_stop`, with `ping` and `error` events) folded into one
//! `message` body.
//!
//! Blocks keep everything the non-streaming body has: `text`, `thinking` with its
//! `signature` (`signature_delta` sets it, as the official SDKs do), `redacted_thinking` as
//! started, and `tool_use` whose `input` is the concatenated `input_json_delta` text parsed
//! (kept as a string when it does not parse, so a cut call reads as malformed). The stop
//! reason and the final usage come from `message_delta`, whose counts are cumulative; a
//! stream whose `message_stop` came without a stop reason before it was cut.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::{Budget, ModelIds, SseEvent, event_json, json_len, stream_cut};
use crate::providers::CallError;

/// The events of one Messages stream so far.
#[derive(Debug, Default)]
pub(super) struct AnthropicStream {
    message: Option<Map<String, Value>>,
    /// What the kept `message` of `message_start` costs.
    message_cost: usize,
    models: ModelIds,
    blocks: BTreeMap<u64, Value>,
    partial_json: BTreeMap<u64, String>,
    done: bool,
    error: Option<Value>,
}

impl AnthropicStream {
    /// Folds one event in; `true` once the stream is over (`message_stop` or an error).
    pub(super) fn push(&mut self, event: &SseEvent, budget: &mut Budget) -> Result<bool, CallError> {
        let json = event_json(event)?;
        let kind = json.get("type").and_then(Value::as_str).unwrap_or(event.event.as_str()).to_owned();
        let index = json.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind.as_str() {
            "message_start" => {
                let message = json.get("message").and_then(Value::as_object).cloned();
                if let Some(model) = message.as_ref().and_then(|message| message.get("model")).and_then(Value::as_str) {
                    self.models.see(model);
                }
                let cost = json.get("message").map_or(0, json_len);
                budget.take(cost)?;
                budget.give(std::mem::replace(&mut self.message_cost, cost));
                self.message = message;
            }
            "content_block_start" => {
                if let Some(block) = json.get("content_block") {
                    budget.take(json_len(block))?;
                    if let Some(old) = self.blocks.insert(index, block.clone()) {
                        budget.give(json_len(&old));
                    }
                }
            }
            "content_block_delta" => {
                if let Some(delta) = json.get("delta") {
                    self.delta(index, delta, budget)?;
                }
            }
            "content_block_stop" => self.close_block(index),
            "message_delta" => self.message_delta(&json, budget)?,
            "message_stop" => {
                self.done = true;
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

    fn delta(&mut self, index: u64, delta: &Value, budget: &mut Budget) -> Result<(), CallError> {
        let text = |key: &str| delta.get(key).and_then(Value::as_str).unwrap_or_default();
        if !self.blocks.contains_key(&index) {
            budget.take(json_len(&Value::Object(Map::new())))?;
        }
        let block = self.blocks.entry(index).or_insert_with(|| Value::Object(Map::new()));
        let Some(block) = block.as_object_mut() else { return Ok(()) };
        let append = |block: &mut Map<String, Value>, budget: &mut Budget, key: &str, piece: &str| match block.get_mut(key) {
            Some(Value::String(existing)) => budget.append(existing, piece),
            _ => budget.put(block, key, Value::String(piece.to_owned())),
        };
        match delta.get("type").and_then(Value::as_str).unwrap_or_default() {
            "text_delta" => append(block, budget, "text", text("text"))?,
            "thinking_delta" => append(block, budget, "thinking", text("thinking"))?,
            "signature_delta" => budget.put(block, "signature", Value::String(text("signature").to_owned()))?,
            "input_json_delta" => budget.append(self.partial_json.entry(index).or_default(), text("partial_json"))?,
            "citations_delta" => {
                if let Some(citation) = delta.get("citation") {
                    budget.take(json_len(citation))?;
                    match block.entry("citations").or_insert_with(|| Value::Array(Vec::new())) {
                        Value::Array(citations) => citations.push(citation.clone()),
                        other => *other = Value::Array(vec![citation.clone()]),
                    }
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Sets a tool block's `input` from its streamed JSON text.
    fn close_block(&mut self, index: u64) {
        let Some(raw) = self.partial_json.remove(&index) else { return };
        if raw.trim().is_empty() {
            return;
        }
        let input = serde_json::from_str(&raw).unwrap_or(Value::String(raw));
        if let Some(block) = self.blocks.get_mut(&index).and_then(Value::as_object_mut) {
            block.insert("input".into(), input);
        }
    }

    fn message_delta(&mut self, json: &Value, budget: &mut Budget) -> Result<(), CallError> {
        let Some(message) = self.message.as_mut() else { return Ok(()) };
        if let Some(delta) = json.get("delta").and_then(Value::as_object) {
            for (key, value) in delta {
                budget.put(message, key, value.clone())?;
            }
        }
        if let Some(usage) = json.get("usage").and_then(Value::as_object) {
            let target = message.entry("usage").or_insert_with(|| Value::Object(Map::new()));
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Some(target) = target.as_object_mut() {
                for (key, value) in usage.iter().filter(|(_, value)| !value.is_null()) {
                    budget.put(target, key, value.clone())?;
                }
            }
        }
        Ok(())
    }

    /// The `message` body the same call returns without streaming.
    pub(super) fn finish(mut self) -> Result<Value, CallError> {
        if let Some(error) = self.error {
            return Ok(error);
        }
        let open: Vec<u64> = self.partial_json.keys().copied().collect();
        for index in open {
            self.close_block(index);
        }
        let Some(mut message) = self.message.filter(|_| self.done) else {
            return Err(stream_cut("no `message_stop` event"));
        };
        if message.get("stop_reason").and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(stream_cut("`message_stop` without a `stop_reason` (no `message_delta` carried one)"));
        }
        self.models.write(&mut message, "model");
        message.insert("content".into(), Value::Array(self.blocks.into_values().collect()));
        Ok(Value::Object(message))
    }
}
