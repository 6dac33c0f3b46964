//! Streaming (server-sent events) for all four protocols, as transport only.
//!
//! A streamed call sends the same keyed body plus the protocol's switch (`stream: true`,
//! and `stream_options.include_usage` on Chat Completions; Gemini's `:streamGenerateContent?alt=sse`
//! URL instead), reads the events under an inactivity timeout rather than a total one, and
//! folds them with one assembler per protocol into the exact JSON shape of the protocol's
//! non-streaming body. That body then goes through the protocol's own parser, so text,
//! reasoning, tool calls, outcome, usage and signatures come out as they would without
//! streaming, and no cache key can tell the two apart ([`super::request_fingerprint`] never
//! sees the switch).
//!
//! When to stream is the model entry's `stream:` ([`StreamMode`]): `auto` streams calls whose
//! output cap is large ([`AUTO_STREAM_MIN_TOKENS`]) and Anthropic calls with thinking on, as
//! Inspect does, which also covers Anthropic's refusal of non-streaming calls above
//! [`ANTHROPIC_NON_STREAMING_MAX_TOKENS`].

mod anthropic;
mod chat;
mod gemini;
mod responses;
mod sse;

use serde_json::{Value, json};

use super::error::CallError;
use super::types::ProviderKind;

pub(super) use sse::SseDecoder;
pub use sse::{SseEvent, events};

/// Output caps from which `stream: auto` streams (Inspect's Anthropic threshold): such calls
/// can run past a non-streaming request's timeout.
pub const AUTO_STREAM_MIN_TOKENS: u64 = 8192;

/// The largest `max_tokens` Anthropic's SDKs send without streaming (`3600 s · max_tokens /
/// 128000 > 600 s` is refused); `auto` streams far below it already.
pub const ANTHROPIC_NON_STREAMING_MAX_TOKENS: u64 = 21_333;

// `auto` streams every Anthropic call Anthropic would refuse unstreamed.
const _: () = assert!(AUTO_STREAM_MIN_TOKENS <= ANTHROPIC_NON_STREAMING_MAX_TOKENS);

/// Whether a model's calls stream (`stream:` on the model entry): `auto` (the default)
/// streams calls with a large output cap and Anthropic calls with thinking on; `true` for
/// stream-only servers (DashScope's Qwen3 thinking models); `false` for servers that reject
/// `stream_options` or proxies that buffer streams. Transport only: it changes how an
/// answer arrives, not what it says, so it enters no cache key.
pub type StreamMode = super::Switch;

impl StreamMode {
    /// Whether a call with this exact (keyed) body to a `kind` server streams.
    #[must_use]
    pub fn streams(self, kind: ProviderKind, body: &Value) -> bool {
        match self {
            Self::On => true,
            Self::Off => false,
            Self::Auto => {
                let cap = output_cap(kind, body).unwrap_or(0);
                let thinking = kind == ProviderKind::Anthropic
                    && body.get("thinking").is_some_and(|thinking| thinking.is_object() && thinking.get("type").and_then(Value::as_str) != Some("disabled"));
                cap >= AUTO_STREAM_MIN_TOKENS || thinking
            }
        }
    }
}

/// The output cap a body asks for, under the protocol's own name.
fn output_cap(kind: ProviderKind, body: &Value) -> Option<u64> {
    let pointers: &[&str] = match kind {
        ProviderKind::OpenAi => &["/max_completion_tokens", "/max_tokens"],
        ProviderKind::OpenAiResponses => &["/max_output_tokens"],
        ProviderKind::Anthropic => &["/max_tokens"],
        ProviderKind::Gemini => &["/generationConfig/maxOutputTokens"],
    };
    pointers.iter().find_map(|pointer| body.pointer(pointer).and_then(Value::as_u64))
}

/// The body actually sent for a streamed call: the keyed body plus the protocol's switch
/// (Gemini's is in the URL, so its body is unchanged).
#[must_use]
pub fn streamed_body(kind: ProviderKind, body: &Value) -> Value {
    let mut body = body.clone();
    if let Some(map) = body.as_object_mut() {
        match kind {
            ProviderKind::OpenAi => {
                map.insert("stream".into(), json!(true));
                map.insert("stream_options".into(), json!({"include_usage": true}));
            }
            ProviderKind::OpenAiResponses | ProviderKind::Anthropic => {
                map.insert("stream".into(), json!(true));
            }
            ProviderKind::Gemini => {}
        }
    }
    body
}

/// The URL of a streamed call: Gemini's `:generateContent` becomes
/// `:streamGenerateContent?alt=sse` (any query the base URL carries is kept); the other
/// protocols stream from the same URL.
#[must_use]
pub fn streamed_url(kind: ProviderKind, url: &str) -> String {
    if kind != ProviderKind::Gemini {
        return url.to_owned();
    }
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return url.replacen(":generateContent", ":streamGenerateContent?alt=sse", 1);
    };
    if let Some(path) = parsed.path().strip_suffix(":generateContent").map(|stem| format!("{stem}:streamGenerateContent")) {
        parsed.set_path(&path);
    }
    parsed.query_pairs_mut().append_pair("alt", "sse");
    parsed.to_string()
}

/// A stream that ended before its protocol's last event: the answer may be partial, so the
/// attempt fails as a (retryable) protocol error, like a truncated JSON body.
fn stream_cut(what: &str) -> CallError {
    CallError::Protocol { detail: format!("the stream ended early: {what}") }
}

/// An event's data as JSON.
fn event_json(event: &SseEvent) -> Result<Value, CallError> {
    serde_json::from_str(&event.data)
        .map_err(|error| CallError::Protocol { detail: format!("invalid JSON in a stream event ({} bytes): {error}", event.data.len()) })
}

/// Folds one protocol's events into its non-streaming body.
#[derive(Debug)]
pub(super) struct Assembler(Protocol);

#[derive(Debug)]
enum Protocol {
    Chat(chat::ChatStream),
    Responses(responses::ResponsesStream),
    Anthropic(anthropic::AnthropicStream),
    Gemini(gemini::GeminiStream),
}

impl Assembler {
    /// An empty assembler for `kind`'s events.
    pub(super) fn new(kind: ProviderKind) -> Self {
        Self(match kind {
            ProviderKind::OpenAi => Protocol::Chat(chat::ChatStream::default()),
            ProviderKind::OpenAiResponses => Protocol::Responses(responses::ResponsesStream::default()),
            ProviderKind::Anthropic => Protocol::Anthropic(anthropic::AnthropicStream::default()),
            ProviderKind::Gemini => Protocol::Gemini(gemini::GeminiStream::default()),
        })
    }

    /// Folds one event in; `true` once the protocol's last event (or an error) has come,
    /// after which nothing more need be read.
    pub(super) fn push(&mut self, event: &SseEvent) -> Result<bool, CallError> {
        if event.data.is_empty() {
            return Ok(false);
        }
        match &mut self.0 {
            Protocol::Chat(stream) => stream.push(event),
            Protocol::Responses(stream) => stream.push(event),
            Protocol::Anthropic(stream) => stream.push(event),
            Protocol::Gemini(stream) => stream.push(event),
        }
    }

    /// The non-streaming body; an error event becomes the body as sent, for the parser to
    /// classify, and a stream cut short is a protocol error.
    pub(super) fn finish(self) -> Result<Value, CallError> {
        match self.0 {
            Protocol::Chat(stream) => stream.finish(),
            Protocol::Responses(stream) => stream.finish(),
            Protocol::Anthropic(stream) => stream.finish(),
            Protocol::Gemini(stream) => stream.finish(),
        }
    }
}

/// Folds a whole recorded stream of `kind` into the body the same call returns without
/// streaming, for tests and fixture tools.
///
/// # Errors
/// `Protocol` when an event is not JSON or the stream ended before its last event.
pub fn assemble(kind: ProviderKind, stream: &[u8]) -> Result<Value, CallError> {
    let mut assembler = Assembler::new(kind);
    for event in events(stream) {
        if assembler.push(&event)? {
            break;
        }
    }
    assembler.finish()
}

#[cfg(test)]
mod tests;
