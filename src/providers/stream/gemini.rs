//! Gemini streams (`:streamGenerateContent?alt=sse`: every event is a
//! `GenerateContentResponse` chunk) folded into one `GenerateContentResponse`.
//!
//! Parts of the first candidate are concatenated in order: a text part joins the one
//! before it when both are answer text or both are thought text, and neither already
//! carries a `thoughtSignature` the other would overwrite; a signature that arrives on its
//! own (an empty text part, as Gemini 3 sends at the end) joins the text part before it.
//! Function calls stay whole, signatures included. `finishReason` and the other candidate
//! fields, `usageMetadata` (cumulative), `modelVersion` and `promptFeedback` are the last
//! ones sent. There is no end-of-stream event: a stream without a `finishReason` (or a
//! blocked prompt) was cut. Every chunk names its model (`modelVersion`): they must agree.

use serde_json::{Map, Value, json};

use super::{Budget, ModelIds, SseEvent, event_json, json_len, stream_cut};
use crate::providers::CallError;

/// The chunks of one Gemini stream so far.
#[derive(Debug, Default)]
pub(super) struct GeminiStream {
    top: Map<String, Value>,
    models: ModelIds,
    candidate: Map<String, Value>,
    role: Option<Value>,
    parts: Vec<Value>,
    seen_candidate: bool,
    complete: bool,
    error: Option<Value>,
}

const SIGNATURE: &str = "thoughtSignature";

fn is_thought(part: &Value) -> bool {
    part.get("thought").and_then(Value::as_bool).unwrap_or(false)
}

/// A part made of text (and maybe `thought`/`thoughtSignature`) and nothing else.
fn is_text(part: &Value) -> bool {
    part.as_object()
        .is_some_and(|map| map.get("text").is_some_and(Value::is_string) && map.keys().all(|key| ["text", "thought", SIGNATURE].contains(&key.as_str())))
}

impl GeminiStream {
    /// Folds one chunk in; `true` only for an error (the stream itself says nothing more).
    pub(super) fn push(&mut self, event: &SseEvent, budget: &mut Budget) -> Result<bool, CallError> {
        let chunk = event_json(event)?;
        if chunk.get("error").is_some_and(|error| !error.is_null()) {
            self.error = Some(chunk);
            return Ok(true);
        }
        let Some(map) = chunk.as_object() else {
            return Err(CallError::Protocol { detail: "a stream chunk is not a JSON object".into() });
        };
        if let Some(model) = map.get("modelVersion").and_then(Value::as_str) {
            self.models.see(model);
        }
        for (key, value) in map.iter().filter(|(key, _)| key.as_str() != "candidates") {
            budget.put(&mut self.top, key, value.clone())?;
        }
        if chunk.pointer("/promptFeedback/blockReason").and_then(Value::as_str).is_some_and(|reason| !reason.is_empty()) {
            self.complete = true;
        }
        let Some(candidate) = chunk.pointer("/candidates/0").and_then(Value::as_object) else {
            return Ok(false);
        };
        self.seen_candidate = true;
        for (key, value) in candidate.iter().filter(|(key, _)| key.as_str() != "content") {
            budget.put(&mut self.candidate, key, value.clone())?;
        }
        if candidate.get("finishReason").and_then(Value::as_str).is_some_and(|reason| !reason.is_empty()) {
            self.complete = true;
        }
        if let Some(role) = candidate.get("content").and_then(|content| content.get("role")) {
            self.role = Some(role.clone());
        }
        let parts = candidate.get("content").and_then(|content| content.get("parts")).and_then(Value::as_array);
        for part in parts.into_iter().flatten() {
            self.add_part(part, budget)?;
        }
        Ok(false)
    }

    fn add_part(&mut self, part: &Value, budget: &mut Budget) -> Result<(), CallError> {
        if let Some(last) = self.parts.last_mut().filter(|last| is_text(last) && is_text(part) && is_thought(last) == is_thought(part)) {
            let both_signed = last.get(SIGNATURE).is_some() && part.get(SIGNATURE).is_some();
            if !both_signed {
                let piece = part.get("text").and_then(Value::as_str).unwrap_or_default();
                if let Some(Value::String(text)) = last.get_mut("text") {
                    budget.append(text, piece)?;
                }
                if let (Some(signature), Some(map)) = (part.get(SIGNATURE), last.as_object_mut()) {
                    budget.put(map, SIGNATURE, signature.clone())?;
                }
                return Ok(());
            }
        }
        budget.take(json_len(part))?;
        self.parts.push(part.clone());
        Ok(())
    }

    /// The `GenerateContentResponse` the same call returns without streaming.
    pub(super) fn finish(self) -> Result<Value, CallError> {
        if let Some(error) = self.error {
            return Ok(error);
        }
        if !self.complete {
            return Err(stream_cut("no chunk with a `finishReason`"));
        }
        let mut body = self.top;
        self.models.write(&mut body, "modelVersion");
        if self.seen_candidate {
            let mut candidate = self.candidate;
            candidate.insert("content".into(), json!({"role": self.role.unwrap_or_else(|| json!("model")), "parts": self.parts}));
            body.insert("candidates".into(), json!([candidate]));
        }
        Ok(Value::Object(body))
    }
}
