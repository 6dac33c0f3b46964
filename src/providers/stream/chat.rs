//! Chat Completions streams (`chat.completion.chunk` events, then `data: [DONE]`) folded
//! into one `chat.completion` body.
//!
//! Deltas of the first choice are concatenated: `content`, `refusal`, the reasoning text
//! under whichever name the server uses (`reasoning_content`, `reasoning`), and tool calls
//! by their `index` (id and name from the first delta, `arguments` appended). Usage comes
//! from the chunk that carries it (the last one, with `stream_options.include_usage`).
//! Every chunk names its model; a stream without a `finish_reason` was cut, `[DONE]` or not.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{Budget, ModelIds, SseEvent, event_json, stream_cut};
use crate::providers::CallError;

/// What a new tool call costs before its strings: its envelope in the assembled body.
const TOOL_CALL_BYTES: usize = 64;

/// Reasoning fields compatible servers stream, in the order they are written back.
const REASONING_FIELDS: [&str; 2] = ["reasoning_content", "reasoning"];

#[derive(Debug, Default)]
struct ToolCallParts {
    id: String,
    kind: String,
    name: String,
    arguments: String,
}

/// The chunks of one Chat Completions stream so far.
#[derive(Debug, Default)]
pub(super) struct ChatStream {
    head: Map<String, Value>,
    models: ModelIds,
    content: Option<String>,
    refusal: Option<String>,
    reasoning: BTreeMap<&'static str, String>,
    tool_calls: BTreeMap<u64, ToolCallParts>,
    finish_reason: Option<Value>,
    usage: Option<Value>,
    error: Option<Value>,
    done: bool,
}

impl ChatStream {
    /// Folds one event in; `true` once the stream is over (`[DONE]` or an error).
    pub(super) fn push(&mut self, event: &SseEvent, budget: &mut Budget) -> Result<bool, CallError> {
        if event.data.trim() == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        let chunk = event_json(event)?;
        if chunk.get("error").is_some_and(|error| !error.is_null()) {
            self.error = Some(chunk);
            return Ok(true);
        }
        for key in ["id", "created", "system_fingerprint", "service_tier"] {
            if let Some(value) = chunk.get(key).filter(|value| !value.is_null() && !self.head.contains_key(key)) {
                budget.put(&mut self.head, key, value.clone())?;
            }
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            self.models.see(model);
        }
        if let Some(usage) = chunk.get("usage").filter(|usage| usage.is_object()) {
            budget.take(super::json_len(usage))?;
            if let Some(old) = self.usage.replace(usage.clone()) {
                budget.give(super::json_len(&old));
            }
        }
        let choices = chunk.get("choices").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for choice in choices.iter().filter(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0) {
            if let Some(delta) = choice.get("delta") {
                self.delta(delta, budget)?;
            }
            if let Some(reason) = choice.get("finish_reason").filter(|reason| !reason.is_null()) {
                self.finish_reason = Some(reason.clone());
            }
        }
        Ok(false)
    }

    fn delta(&mut self, delta: &Value, budget: &mut Budget) -> Result<(), CallError> {
        let text = |key: &str| delta.get(key).and_then(Value::as_str);
        if let Some(content) = text("content") {
            budget.append(self.content.get_or_insert_with(String::new), content)?;
        }
        if let Some(refusal) = text("refusal") {
            budget.append(self.refusal.get_or_insert_with(String::new), refusal)?;
        }
        for field in REASONING_FIELDS {
            if let Some(reasoning) = text(field) {
                budget.append(self.reasoning.entry(field).or_default(), reasoning)?;
            }
        }
        let calls = delta.get("tool_calls").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        for (position, call) in calls.iter().enumerate() {
            let index = call.get("index").and_then(Value::as_u64).unwrap_or(position as u64);
            if !self.tool_calls.contains_key(&index) {
                budget.take(TOOL_CALL_BYTES)?;
            }
            let parts = self.tool_calls.entry(index).or_default();
            let field = |pointer: &str| call.pointer(pointer).and_then(Value::as_str).filter(|text| !text.is_empty());
            if let Some(id) = field("/id").filter(|_| parts.id.is_empty()) {
                budget.append(&mut parts.id, id)?;
            }
            if let Some(kind) = field("/type").filter(|_| parts.kind.is_empty()) {
                budget.append(&mut parts.kind, kind)?;
            }
            if let Some(name) = field("/function/name").filter(|_| parts.name.is_empty()) {
                budget.append(&mut parts.name, name)?;
            }
            if let Some(arguments) = field("/function/arguments") {
                budget.append(&mut parts.arguments, arguments)?;
            }
        }
        Ok(())
    }

    /// The `chat.completion` body the same answer has without streaming.
    pub(super) fn finish(self) -> Result<Value, CallError> {
        if let Some(error) = self.error {
            return Ok(error);
        }
        // Without a finish reason the answer may be partial, whatever ended the stream.
        if self.finish_reason.is_none() {
            return Err(stream_cut(if self.done { "`[DONE]` before any `finish_reason`" } else { "no `finish_reason`" }));
        }
        // `include_usage` sends the usage chunk after the one with `finish_reason`: a stream
        // cut between the two would otherwise be cached as an answer that cost nothing.
        if !self.done && self.usage.is_none() {
            return Err(stream_cut("no `[DONE]`, and no usage after the `finish_reason`"));
        }
        let mut message = json!({
            "role": "assistant",
            "content": self.content.map_or(Value::Null, Value::String),
            "refusal": self.refusal.map_or(Value::Null, Value::String),
        });
        for (field, reasoning) in self.reasoning {
            message[field] = Value::String(reasoning);
        }
        if !self.tool_calls.is_empty() {
            let calls = self
                .tool_calls
                .into_values()
                .map(|call| {
                    let kind = if call.kind.is_empty() { "function".to_owned() } else { call.kind };
                    json!({"id": call.id, "type": kind, "function": {"name": call.name, "arguments": call.arguments}})
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body = self.head;
        self.models.write(&mut body, "model");
        body.insert("object".into(), json!("chat.completion"));
        body.insert("choices".into(), json!([{"index": 0, "message": message, "finish_reason": self.finish_reason.unwrap_or(Value::Null)}]));
        if let Some(usage) = self.usage {
            body.insert("usage".into(), usage);
        }
        Ok(Value::Object(body))
    }
}
