//! What the mock does differently per wire protocol, behind one trait, [`MockWire`]. The
//! one table that picks a protocol's side by [`super::super::types::ProviderKind`] is in
//! [`super::dialects`], with each protocol's impl; the renderers take the side the server
//! resolved once, so none of them picks by kind.

use axum::http::HeaderMap;
use serde_json::{Value, json};

use super::super::types::Usage;
use super::script::{MockReply, MockRequest};

/// One protocol as the mock serves it: how a request is read and how answers, errors and
/// broken streams are written, in that protocol's exact shapes.
pub(super) trait MockWire: Sync {
    /// The body field holding the turns, and the turn field holding their text.
    fn turns(&self) -> (&'static str, &'static str) {
        ("messages", "content")
    }
    /// The API key a request presents, in the protocol's own header.
    fn presented_key(&self, headers: &HeaderMap) -> String;
    /// Whether the body asks for reasoning (or thinking) output.
    fn wants_reasoning(&self, body: &Value) -> bool;
    /// Whether the body asks for a streamed reply (Gemini asks by URL instead).
    fn asks_stream(&self, body: &Value) -> bool {
        body.get("stream") == Some(&json!(true))
    }
    /// Whether the body asks for background mode (queued, answered after polls).
    fn background(&self, _body: &Value) -> bool {
        false
    }
    /// Why the server refuses the body outright (400), as a real server of this protocol does.
    fn refusal(&self, _body: &Value) -> Option<&'static str> {
        None
    }
    /// Why the API would reject `body` for a missing or altered reasoning signature.
    fn missing_signature(&self, _body: &Value) -> Option<String> {
        None
    }
    /// The JSON error body for `status`, with the protocol's error type names.
    fn error_body(&self, status: u16, message: &str) -> Value;
    /// The refusal of a prompt of `tokens` tokens by a model with a `window`-token context,
    /// as the API documents it (OpenAI's `context_length_exceeded` code, Anthropic's "prompt
    /// is too long", Gemini's "input token count"); sent with HTTP 400.
    fn overflow_body(&self, tokens: u64, window: u64) -> Value;
    /// Status and message of an overload answered as an HTTP error.
    fn overloaded(&self) -> (u16, &'static str) {
        (503, "The model is overloaded. Please try again later.")
    }
    /// The error body sent with status 200, as gateways do when overloaded.
    fn overloaded_in_200(&self) -> Value;
    /// The success JSON for `reply`, reported as answered by `model` with `usage`.
    fn success_body(&self, request: &MockRequest, reply: &MockReply, model: &str, usage: Usage) -> Value;
    /// The events of a success body as the protocol streams them.
    fn frames(&self, request: &MockRequest, body: &Value) -> Vec<String>;
    /// The protocol's mid-stream overload error event.
    fn overload_frame(&self) -> String;
    /// The answer's events with the finish reason taken out, ended as the protocol ends.
    fn unfinished(&self, frames: Vec<String>) -> Vec<String>;
    /// Where an event names the answering model, if it does.
    fn model_field<'a>(&self, _event: &'a mut Value) -> Option<&'a mut Value> {
        None
    }
}
