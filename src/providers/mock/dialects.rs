//! Each protocol's side of the mock ([`MockWire`]), and [`wire`], the one table that picks
//! it by kind. The bodies themselves are rendered by [`super::render`] and [`super::stream`];
//! each impl here says which of them its protocol uses and holds its small differences (key
//! header, error wording, where the model and the finish reason sit in an event).

use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::super::types::{ProviderKind, Usage};
use super::render::{anthropic_body, chat_body, gemini_body, responses_body};
use super::script::{MockReply, MockRequest};
use super::signatures;
use super::stream::{anthropic_frames, chat_frames, edited, frame, gemini_frames, json_type, responses_frames};
use super::wire::MockWire;

/// The mock's side of `kind`: the one place in the mock that matches on a provider kind.
pub(super) fn wire(kind: ProviderKind) -> &'static dyn MockWire {
    match kind {
        // The mock speaks no completions dialect: tests of it use an independent server.
        ProviderKind::OpenAi | ProviderKind::OpenAiCompletions => &Chat,
        ProviderKind::OpenAiResponses => &Responses,
        ProviderKind::Anthropic => &Anthropic,
        ProviderKind::Gemini => &Gemini,
    }
}

/// OpenAI Chat Completions.
struct Chat;
/// OpenAI Responses.
struct Responses;
/// Anthropic Messages.
struct Anthropic;
/// Gemini `generateContent`.
struct Gemini;

fn header<'a>(headers: &'a HeaderMap, name: &str) -> &'a str {
    headers.get(name).and_then(|value| value.to_str().ok()).unwrap_or_default()
}

fn bearer(headers: &HeaderMap) -> String {
    header(headers, "authorization").strip_prefix("Bearer ").unwrap_or_default().to_owned()
}

/// OpenAI's error body, the same for Chat Completions and Responses.
fn openai_error(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        429 => ("requests", json!("rate_limit_exceeded")),
        401 => ("invalid_request_error", json!("invalid_api_key")),
        500..=599 => ("server_error", Value::Null),
        _ => ("invalid_request_error", Value::Null),
    };
    json!({"error": {"message": message, "type": kind, "code": code, "param": null}})
}

fn openai_overloaded_in_200() -> Value {
    json!({"error": {"message": "overloaded", "type": "overloaded_error"}})
}

impl MockWire for Chat {
    fn presented_key(&self, headers: &HeaderMap) -> String {
        bearer(headers)
    }
    fn wants_reasoning(&self, body: &Value) -> bool {
        body.get("reasoning_effort").is_some()
    }
    fn overflow_body(&self, tokens: u64, window: u64) -> Value {
        json!({"error": {
            "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
            "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})
    }

    fn error_body(&self, status: u16, message: &str) -> Value {
        openai_error(status, message)
    }
    fn overloaded_in_200(&self) -> Value {
        openai_overloaded_in_200()
    }
    fn success_body(&self, request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
        chat_body(request, reply, model, usage)
    }
    fn frames(&self, request: &MockRequest, body: &Value) -> Vec<String> {
        chat_frames(request, body)
    }
    fn overload_frame(&self) -> String {
        frame(None, &json!({"error": {"message": "overloaded", "type": "overloaded_error", "code": null, "param": null}}))
    }
    fn unfinished(&self, frames: Vec<String>) -> Vec<String> {
        edited(frames, |json| {
            for choice in json.get_mut("choices").and_then(Value::as_array_mut).into_iter().flatten() {
                choice["finish_reason"] = Value::Null;
            }
        })
    }
    fn model_field<'a>(&self, event: &'a mut Value) -> Option<&'a mut Value> {
        event.get_mut("model")
    }
}

impl MockWire for Responses {
    fn turns(&self) -> (&'static str, &'static str) {
        ("input", "content")
    }
    fn presented_key(&self, headers: &HeaderMap) -> String {
        bearer(headers)
    }
    fn wants_reasoning(&self, body: &Value) -> bool {
        body.get("reasoning").is_some()
    }
    fn background(&self, body: &Value) -> bool {
        body.get("background") == Some(&Value::Bool(true))
    }
    /// As llama.cpp's server does: an input item without `type` is read as a message only
    /// when it is the short form of user (or system) input.
    fn refusal(&self, body: &Value) -> Option<&'static str> {
        let untyped = body.get("input").and_then(Value::as_array).is_some_and(|items| {
            items.iter().any(|item| item.get("type").is_none() && !matches!(item.get("role").and_then(Value::as_str), Some("user" | "system" | "developer")))
        });
        untyped.then_some("Cannot determine type of 'item'")
    }
    fn overflow_body(&self, tokens: u64, window: u64) -> Value {
        let _ = tokens;
        json!({"error": {
            "message": format!("Your input exceeds the context window of this model ({window} tokens). Please adjust your input and try again."),
            "type": "invalid_request_error", "param": "input", "code": "context_length_exceeded"}})
    }

    fn error_body(&self, status: u16, message: &str) -> Value {
        openai_error(status, message)
    }
    fn overloaded_in_200(&self) -> Value {
        openai_overloaded_in_200()
    }
    fn success_body(&self, request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
        responses_body(request, reply, model, usage)
    }
    fn frames(&self, _request: &MockRequest, body: &Value) -> Vec<String> {
        responses_frames(body)
    }
    fn overload_frame(&self) -> String {
        frame(Some("error"), &json!({"type": "error", "code": "server_is_overloaded", "message": "overloaded", "param": null, "sequence_number": 2}))
    }
    /// Every event but the terminal one (which alone carries the final status).
    fn unfinished(&self, mut frames: Vec<String>) -> Vec<String> {
        frames.pop();
        frames
    }
    fn model_field<'a>(&self, event: &'a mut Value) -> Option<&'a mut Value> {
        event.pointer_mut("/response/model")
    }
}

impl MockWire for Anthropic {
    fn presented_key(&self, headers: &HeaderMap) -> String {
        header(headers, "x-api-key").to_owned()
    }
    fn wants_reasoning(&self, body: &Value) -> bool {
        body.get("thinking").is_some()
    }
    fn missing_signature(&self, body: &Value) -> Option<String> {
        signatures::anthropic(body)
    }
    fn overflow_body(&self, tokens: u64, window: u64) -> Value {
        json!({"type": "error", "error": {"type": "invalid_request_error", "message": format!("prompt is too long: {tokens} tokens > {window} maximum")}})
    }

    fn error_body(&self, status: u16, message: &str) -> Value {
        let kind = match status {
            429 => "rate_limit_error",
            529 => "overloaded_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            500..=599 => "api_error",
            _ => "invalid_request_error",
        };
        json!({"type": "error", "error": {"type": kind, "message": message}})
    }
    fn overloaded(&self) -> (u16, &'static str) {
        (529, "Overloaded")
    }
    fn overloaded_in_200(&self) -> Value {
        self.error_body(529, "Overloaded")
    }
    fn success_body(&self, request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
        anthropic_body(request, reply, model, usage)
    }
    fn frames(&self, _request: &MockRequest, body: &Value) -> Vec<String> {
        anthropic_frames(body)
    }
    fn overload_frame(&self) -> String {
        frame(Some("error"), &json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    }
    fn unfinished(&self, frames: Vec<String>) -> Vec<String> {
        edited(frames, |json| {
            if json_type(json) == "message_delta"
                && let Some(delta) = json.get_mut("delta")
            {
                delta["stop_reason"] = Value::Null;
            }
        })
    }
    // Anthropic names the model once, in `message_start`'s message: no event to switch.
}

impl MockWire for Gemini {
    fn turns(&self) -> (&'static str, &'static str) {
        ("contents", "parts")
    }
    fn presented_key(&self, headers: &HeaderMap) -> String {
        header(headers, "x-goog-api-key").to_owned()
    }
    fn wants_reasoning(&self, body: &Value) -> bool {
        body.pointer("/generationConfig/thinkingConfig/includeThoughts") == Some(&json!(true))
    }
    fn asks_stream(&self, _body: &Value) -> bool {
        false
    }
    fn missing_signature(&self, body: &Value) -> Option<String> {
        signatures::gemini(body)
    }
    fn overflow_body(&self, tokens: u64, window: u64) -> Value {
        json!({"error": {"code": 400, "status": "INVALID_ARGUMENT",
            "message": format!("The input token count ({tokens}) exceeds the maximum number of tokens allowed ({window}).")}})
    }

    fn error_body(&self, status: u16, message: &str) -> Value {
        let kind = match status {
            429 => "RESOURCE_EXHAUSTED",
            401 => "UNAUTHENTICATED",
            403 => "PERMISSION_DENIED",
            404 => "NOT_FOUND",
            503 => "UNAVAILABLE",
            500..=599 => "INTERNAL",
            _ => "INVALID_ARGUMENT",
        };
        json!({"error": {"code": status, "message": message, "status": kind}})
    }
    fn overloaded_in_200(&self) -> Value {
        self.error_body(503, "The model is overloaded.")
    }
    fn success_body(&self, request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value {
        gemini_body(request, reply, model, usage)
    }
    fn frames(&self, _request: &MockRequest, body: &Value) -> Vec<String> {
        gemini_frames(body)
    }
    fn overload_frame(&self) -> String {
        frame(None, &json!({"error": {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}}))
    }
    fn unfinished(&self, frames: Vec<String>) -> Vec<String> {
        edited(frames, |json| {
            if let Some(candidate) = json.pointer_mut("/candidates/0").and_then(Value::as_object_mut) {
                candidate.remove("finishReason");
            }
        })
    }
    fn model_field<'a>(&self, event: &'a mut Value) -> Option<&'a mut Value> {
        event.get_mut("modelVersion")
    }
}
