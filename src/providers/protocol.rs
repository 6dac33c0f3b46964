//! One `Protocol` trait for the four wire protocols (OpenAI Chat Completions and Responses,
//! Anthropic Messages, Gemini `generateContent`). Each protocol implements it in its own file
//! (`openai.rs`, `responses.rs`, `anthropic.rs`, `gemini.rs`), and [`super::registry`] is the
//! one place that picks a protocol by kind; the transport (client, retries, streaming,
//! background polling) and the caller's cache path ask the trait and never match on the kind.
//! `docs/adding-a-protocol.md` shows how a new protocol is one file plus one line there.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use super::error::CallError;
use super::shaping::Shaping;
use super::stream::Fold;
use super::types::{ChatRequest, ChatResponse, Endpoint, Secret};

/// What evalgrid must know of one wire protocol to send a call and read its answer, streamed
/// or not. Everything is deterministic: the body and URL are part of the call's cache key.
pub trait Protocol: Sync {
    /// The public API origin, so configs may omit `base_url` for the real service.
    fn default_base_url(&self) -> &'static str;
    /// The URL a call posts to: the base URL as given plus the protocol's path.
    fn url(&self, base_url: &str, model: &str) -> String;
    /// The URL evalgrid built before base URLs were used as given (kept out of old keys).
    fn legacy_url(&self, base_url: &str, model: &str) -> String;
    /// The protocol's auth and version headers for `api_key`.
    ///
    /// # Errors
    /// `Config` when the key has bytes a header cannot carry (never quoting the key).
    fn headers(&self, api_key: Option<&Secret>) -> Result<HeaderMap, CallError>;
    /// The exact JSON body for `request`.
    fn build_body(&self, request: &ChatRequest, endpoint: &Endpoint) -> Value;
    /// Reads a response (any status) into an answer or a classified error; `shaping` says how
    /// the server counts tokens (xAI). The transport then [`settle`](Self::settle)s it.
    ///
    /// # Errors
    /// The [`CallError`] the status and body amount to.
    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, CallError>;
    /// Normalises a parsed answer for the server before any benchmark sees it (an inlined
    /// reasoning block moved to `reasoning`); nothing by default.
    fn settle(&self, response: ChatResponse, _shaping: &Shaping) -> ChatResponse {
        response
    }
    /// [`settle`](Self::settle) for an answer read from the cache: one stored before the
    /// split existed (same key) is split now, so no benchmark scores a draft written while
    /// thinking; one split when it arrived already has its reasoning and is left as stored.
    fn settle_cached(&self, response: ChatResponse, shaping: &Shaping) -> ChatResponse {
        if response.reasoning.as_deref().is_some_and(|r| !r.is_empty()) {
            return response;
        }
        self.settle(response, shaping)
    }
    /// Where a body asks for its output cap, first match wins (JSON pointers).
    fn output_cap_fields(&self) -> &'static [&'static str];
    /// Whether the body asks for extended thinking, which streams whatever the cap.
    fn thinks(&self, _body: &Value) -> bool {
        false
    }
    /// Adds the protocol's stream switch to a body about to be sent (not to the keyed body).
    fn switch_on_stream(&self, body: &mut Map<String, Value>);
    /// The URL of a streamed call (most protocols stream from the same URL).
    fn streamed_url(&self, url: &str) -> String {
        url.to_owned()
    }
    /// An empty folder for this protocol's stream events.
    fn stream_fold(&self) -> Box<dyn Fold>;
    /// Whether a call may run in background mode, polled until done (the Responses API),
    /// when its model entry asks for it.
    fn polls_in_background(&self) -> bool {
        false
    }
    /// The generation parameters that make an answer carry the next token's top alternatives
    /// ([`super::logprobs`]), what `choice: {method: logprobs}` needs; `None`: this protocol
    /// gives none (or evalgrid reads none from it).
    fn next_token_params(&self) -> Option<Map<String, Value>> {
        None
    }
    /// Whether its answers carry the prompt's own token log-probabilities (echoed), what
    /// `method: loglikelihood` reads: only the completions protocol.
    fn scores_prompts(&self) -> bool {
        false
    }
    /// The batch API this protocol's calls can go through; `None`: none evalgrid speaks.
    fn batch_kind(&self) -> Option<super::batch::BatchKind> {
        None
    }
}
