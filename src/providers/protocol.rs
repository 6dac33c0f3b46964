//! One `Protocol` trait for the four wire protocols (OpenAI Chat Completions and Responses,
//! Anthropic Messages, Gemini `generateContent`), and [`ProviderKind::protocol`], the one
//! place that picks a protocol by kind. Each protocol implements the trait in its own file
//! (`openai.rs`, `responses.rs`, `anthropic.rs`, `gemini.rs`); the transport (client, retries,
//! streaming, background polling) asks the trait and never matches on the kind.
//! `docs/adding-a-protocol.md` shows how a new protocol is one file plus one line here.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::anthropic::Messages;
use super::error::CallError;
use super::gemini::GenerateContent;
use super::openai::{ChatCompletions, Shaping};
use super::responses::Responses;
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
    /// Reads a response (any status) into an answer or a classified error.
    ///
    /// # Errors
    /// The [`CallError`] the status and body amount to.
    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, CallError>;
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
    /// The tag whose leading block is moved from the answer to `reasoning` for this call
    /// (OpenAI-compatible servers that inline their thinking), if any.
    fn reasoning_tag(&self, _request: &ChatRequest, _base_url: &str) -> Option<String> {
        None
    }
}

/// Which wire protocol an endpoint speaks; serialized lowercase for configs and cache keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// OpenAI Chat Completions (`/v1/chat/completions`), also used by compatible gateways.
    OpenAi,
    /// Anthropic Messages (`/v1/messages`).
    Anthropic,
    /// Google Gemini `generateContent` (`/v1beta/models/{model}:generateContent`).
    Gemini,
    /// OpenAI Responses (`/v1/responses`): `provider: openai` with `api: responses` (or
    /// `auto` routing a model that Chat Completions cannot serve).
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
}

impl ProviderKind {
    /// Stable lowercase name, identical to the serde form, for logs and limiter keys.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Anthropic => "anthropic",
            Self::Gemini => "gemini",
            Self::OpenAiResponses => "openai_responses",
        }
    }

    /// The public API origin, so configs may omit `base_url` for the real services.
    #[must_use]
    pub fn default_base_url(self) -> &'static str {
        self.protocol().default_base_url()
    }

    /// The protocol this kind speaks: the one place a provider kind is matched on.
    #[must_use]
    pub fn protocol(self) -> &'static dyn Protocol {
        match self {
            Self::OpenAi => &ChatCompletions,
            Self::Anthropic => &Messages,
            Self::Gemini => &GenerateContent,
            Self::OpenAiResponses => &Responses,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// The protocol switchboard lives here only (issue 22): a `match` arm on a provider kind
    /// anywhere else in production code fails this test. The mock server has its own single
    /// table (`providers/mock/wire.rs`, exempt); `spec` maps `provider:` to a kind.
    #[test]
    fn no_match_on_the_provider_kind_outside_protocol_rs() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let mut offenders = Vec::new();
        let mut stack = vec![src.clone()];
        while let Some(dir) = stack.pop() {
            for entry in std::fs::read_dir(&dir).unwrap().flatten() {
                let path = entry.path();
                let rel = path.strip_prefix(&src).unwrap().to_string_lossy().into_owned();
                if path.is_dir() {
                    if rel != "spec" && path.file_name().is_some_and(|n| n != "tests") {
                        stack.push(path);
                    }
                    continue;
                }
                if !rel.ends_with(".rs") || rel.ends_with("tests.rs") || rel == "providers/protocol.rs" || rel == "providers/mock/wire.rs" {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let code = text.split("#[cfg(test)]").next().unwrap_or_default();
                for (n, line) in code.lines().enumerate() {
                    let line = line.trim();
                    if line.starts_with("//") {
                        continue;
                    }
                    let arm = line.split("ProviderKind::").skip(1).any(|rest| {
                        let after = rest.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_').trim_start();
                        after.starts_with("=>") || after.starts_with('|')
                    });
                    if arm || line.starts_with("matches!(") && line.contains("ProviderKind::") {
                        offenders.push(format!("src/{rel}:{}: {line}", n + 1));
                    }
                }
            }
        }
        assert!(offenders.is_empty(), "provider kinds matched outside providers/protocol.rs:\n{}", offenders.join("\n"));
    }

    /// The example of `docs/adding-a-protocol.md`, compiled: a dialect is one `impl`.
    mod dialect_example {
        include!("../../docs/examples/protocol_dialect.rs");

        #[test]
        fn the_documented_dialect_compiles_and_keys_by_api_key() {
            let key = Secret::new("sk-x");
            let headers = KeyedGateway.headers(Some(&key)).unwrap();
            assert_eq!(headers.get("api-key").and_then(|v| v.to_str().ok()), Some("sk-x"));
            assert!(headers.get("authorization").is_none());
            assert_eq!(KeyedGateway.url("https://g.example/openai/v1", "m"), ChatCompletions.url("https://g.example/openai/v1", "m"));
            let protocol: &dyn Protocol = &KeyedGateway;
            assert_eq!(protocol.output_cap_fields(), ["/max_completion_tokens", "/max_tokens"]);
        }
    }

    /// Every kind names a protocol whose URL and default origin are its own.
    #[test]
    fn each_kind_has_its_protocol() {
        use super::ProviderKind;
        let kinds = [ProviderKind::OpenAi, ProviderKind::Anthropic, ProviderKind::Gemini, ProviderKind::OpenAiResponses];
        let urls: std::collections::BTreeSet<String> = kinds.iter().map(|k| k.protocol().url("http://h", "m")).collect();
        assert_eq!(urls.len(), 4, "{urls:?}");
        assert_eq!(ProviderKind::Gemini.default_base_url(), "https://generativelanguage.googleapis.com");
    }
}
