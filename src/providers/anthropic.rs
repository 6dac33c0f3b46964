//! Anthropic Messages wire format (`POST {base_url}/messages`, `anthropic-version: 2023-06-01`).
//!
//! Param mapping: `max_tokens` is required by the API, so it defaults to the model's maximum
//! output from [`super::families`] (4096 for a model not in the table; raised above the
//! thinking budget when thinking is on); `stop` → `stop_sequences`; `seed` is **dropped**
//! because the API has no seed and rejects unknown fields (callers must key repeats on the
//! seed themselves); `thinking_budget: N` → `thinking: {type: enabled, budget_tokens: N}`,
//! which the API only accepts with temperature 1, so `temperature` is forced to 1 and `top_k`
//! removed. JSON mode has no native switch: an instruction is appended to the system prompt.
//! Usage: `input` adds cache reads and writes to `input_tokens`; `reasoning` is
//! `output_tokens_details.thinking_tokens` (inside `output_tokens`), 0 where not reported.
//!
//! Tool rounds: an answer with thinking or a tool call keeps its content blocks in order
//! ([`ChatResponse::items`]: `thinking` with its `signature`, `redacted_thinking` with its
//! `data`, text, `tool_use`). A turn replaying them ([`super::Message::assistant_turn`]) sends
//! them back verbatim as its content, so the thinking blocks come first, before the
//! `tool_use` they led to, as the API requires when thinking is on; `function_call_output`
//! items of a user turn become `tool_result` blocks, first in its content. Turns without
//! items are sent as plain strings, as before.

use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value, json};

use super::error::{CallError, success_json};
use super::families::{ClaudeThinking, claude_max_output, claude_thinking};
use super::protocol::Protocol;
use super::shaping::Shaping;
use super::stream::Fold;
use super::types::{ChatRequest, ChatResponse, Endpoint, FinishReason, Message, Role, Secret, ToolCall, Usage};
use super::wire::{count, endpoint_url, join_url, refused, secret_header, settle, text, tool_objects};

/// API version pinned in every request, so response shapes cannot drift under us.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Output budget when the request sets none and the model is not in the Claude table.
pub const DEFAULT_MAX_TOKENS: u64 = 4096;

/// The cap sent when the request sets none: the model's maximum output, so Claude's
/// reasoning is not cut where other providers' is not; always above a thinking budget.
#[must_use]
pub fn default_max_tokens(model: &str, thinking_budget: u64) -> u64 {
    match claude_max_output(model) {
        Some(max) if max > thinking_budget => max,
        _ => DEFAULT_MAX_TOKENS + thinking_budget,
    }
}

/// Sentence appended to the system prompt in JSON mode.
pub const JSON_MODE_INSTRUCTION: &str = "Respond with a single JSON object and nothing else.";

/// The exact JSON body sent, a pure function of its inputs; hash it with
/// [`super::canonical_json`], which sorts keys even if serde_json's `preserve_order` is on.
fn build_body(request: &ChatRequest, endpoint: &Endpoint) -> Value {
    let model = endpoint.model.as_str();
    let mut body = Map::new();
    let mut thinking_budget = None;
    let mut effort = None;
    for (key, value) in &request.params {
        match key.as_str() {
            "seed" | "max_tokens_field" | "reasoning_tag" => {}
            "stop" => {
                body.insert("stop_sequences".into(), value.clone());
            }
            "thinking_budget" => thinking_budget = Some(value.clone()),
            "reasoning_effort" => effort = Some(value.clone()).filter(|effort| !effort.is_null()),
            _ => {
                body.insert(key.clone(), value.clone());
            }
        }
    }
    let mut thinking_budget = thinking_budget.filter(|budget| !budget.is_null() && budget.as_u64() != Some(0));
    let style = claude_thinking(model);
    let adaptive = match style {
        ClaudeThinking::AdaptiveOnly => effort.is_some() || thinking_budget.is_some(),
        ClaudeThinking::Both => effort.is_some(),
        ClaudeThinking::Manual | ClaudeThinking::None => false,
    };
    if adaptive {
        // The model decides how much to think; effort steers it. `display: summarized`
        // because newer models omit the thinking text by default.
        body.insert("thinking".into(), json!({"type": "adaptive", "display": "summarized"}));
        thinking_budget = None;
    } else if let Some(budget) = &thinking_budget {
        body.insert("thinking".into(), json!({"type": "enabled", "budget_tokens": budget}));
        body.insert("temperature".into(), json!(1));
        body.remove("top_k");
    }
    if let Some(effort) = effort {
        body.insert("output_config".into(), json!({"effort": effort}));
    }
    if style == ClaudeThinking::AdaptiveOnly {
        // These models reject sampling parameters outright (400).
        for sampling in ["temperature", "top_p", "top_k"] {
            body.remove(sampling);
        }
    }
    if !body.contains_key("max_tokens") {
        let extra = thinking_budget.as_ref().and_then(Value::as_u64).unwrap_or(0);
        body.insert("max_tokens".into(), json!(default_max_tokens(model, extra)));
    }
    let system = match (&request.system, request.json_mode) {
        (Some(system), true) => Some(format!("{system}\n\n{JSON_MODE_INSTRUCTION}")),
        (None, true) => Some(JSON_MODE_INSTRUCTION.to_owned()),
        (system, false) => system.clone(),
    };
    if let Some(system) = system {
        body.insert("system".into(), Value::String(system));
    }
    let messages = request
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "assistant",
            };
            json!({"role": role, "content": content(message)})
        })
        .collect();
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("messages".into(), Value::Array(messages));
    if let Some(tools) = &request.tools {
        body.insert("tools".into(), Value::Array(tool_objects(tools, "input_schema")));
    }
    Value::Object(body)
}

/// Content block types a turn's items may replay; anything else (another protocol's
/// items) is not sent.
const BLOCK_TYPES: &[&str] = &["thinking", "redacted_thinking", "text", "tool_use", "tool_result"];

/// A turn's content: its text as a plain string when it has no items (the form every
/// existing key has), else blocks: tool results first (the API wants them before any
/// text), then the replayed blocks verbatim in their order, then the text unless a
/// replayed text block already holds it.
fn content(message: &Message) -> Value {
    let mut blocks: Vec<Value> = Vec::new();
    for item in &message.items {
        match item.get("type").and_then(Value::as_str) {
            Some("function_call_output") => blocks.push(json!({
                "type": "tool_result",
                "tool_use_id": item.get("call_id").cloned().unwrap_or(Value::Null),
                "content": item.get("output").cloned().unwrap_or(Value::Null),
            })),
            Some(kind) if BLOCK_TYPES.contains(&kind) => blocks.push(item.clone()),
            _ => {}
        }
    }
    if blocks.is_empty() && message.images.is_empty() {
        return Value::String(message.content.clone());
    }
    let has_text = blocks.iter().any(|block| block.get("type").and_then(Value::as_str) == Some("text"));
    if !has_text && !message.content.is_empty() {
        blocks.push(json!({"type": "text", "text": message.content}));
    }
    // Images after the text, each a base64 `image` block.
    for image in &message.images {
        blocks.push(json!({"type": "image", "source": {"type": "base64", "media_type": image.media_type, "data": image.data}}));
    }
    Value::Array(blocks)
}

/// A response content block as it is sent back: only the fields a request accepts
/// (`thinking` + `signature`, `data`, `text`, `id` + `name` + `input`); other block types
/// verbatim.
fn replayable(block: &Value) -> Value {
    let keep: &[&str] = match block.get("type").and_then(Value::as_str) {
        Some("thinking") => &["type", "thinking", "signature"],
        Some("redacted_thinking") => &["type", "data"],
        Some("text") => &["type", "text"],
        Some("tool_use") => &["type", "id", "name", "input"],
        _ => return block.clone(),
    };
    Value::Object(keep.iter().filter_map(|key| block.get(*key).map(|value| ((*key).to_owned(), value.clone()))).collect())
}

/// Parses a response (any status) into an answer or a classified error.
///
/// # Errors
/// Any [`CallError`] class: HTTP failures, errors inside a 200, malformed bodies, empty
/// outputs and refusals.
fn parse_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<ChatResponse, CallError> {
    let json = success_json(status, headers, body)?;
    let blocks = json.get("content").and_then(Value::as_array).ok_or_else(|| CallError::Protocol { detail: "response has no `content` array".into() })?;
    let mut answer = String::new();
    let mut reasoning = String::new();
    let mut tool_calls = Vec::new();
    // Whether the blocks hold anything plain text cannot carry into the next turn.
    let mut carried = false;
    for block in blocks {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => answer.push_str(&text(block, "/text")),
            Some("thinking") => {
                reasoning.push_str(&text(block, "/thinking"));
                carried = true;
            }
            Some("redacted_thinking") => carried = true,
            Some("tool_use") => {
                tool_calls.push(ToolCall { id: text(block, "/id"), name: text(block, "/name"), arguments: block.get("input").cloned().unwrap_or(Value::Null) });
                carried = true;
            }
            _ => {}
        }
    }
    let items = if carried { blocks.iter().map(replayable).collect() } else { Vec::new() };
    let cache_read = count(&json, "/usage/cache_read_input_tokens");
    let stop_reason = text(&json, "/stop_reason");
    let response = ChatResponse {
        text: answer,
        reasoning: (!reasoning.is_empty()).then_some(reasoning),
        tool_calls,
        usage: Usage {
            input: count(&json, "/usage/input_tokens") + cache_read + count(&json, "/usage/cache_creation_input_tokens"),
            output: count(&json, "/usage/output_tokens"),
            reasoning: count(&json, "/usage/output_tokens_details/thinking_tokens"),
            cached: cache_read,
            cost: None,
        },
        answered_model: text(&json, "/model"),
        finish_reason: finish_reason(&stop_reason),
        latency_ms: 0,
        refusal: None,
        usage_reported: true,
        items,
        paid: None,
        logprobs: Vec::new(),
    };
    let response = settle(response, json.get("usage").is_some_and(Value::is_object));
    if stop_reason == "refusal" {
        return Ok(refused(response, "the model stopped with `refusal`"));
    }
    Ok(response)
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "tool_use" => FinishReason::ToolCalls,
        "refusal" => FinishReason::Refusal,
        "" => FinishReason::Other("unknown".into()),
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Anthropic Messages (`/v1/messages`).
#[derive(Debug, Clone, Copy)]
pub struct Messages;

impl Protocol for Messages {
    fn default_base_url(&self) -> &'static str {
        "https://api.anthropic.com"
    }

    /// `base_url` as given plus `/messages` (a bare origin gets `/v1`).
    fn url(&self, base_url: &str, _model: &str) -> String {
        endpoint_url(base_url, "/v1", "/messages")
    }

    fn legacy_url(&self, base_url: &str, _model: &str) -> String {
        join_url(base_url, "/v1", "/messages")
    }

    /// `x-api-key` (sensitive, when a key is given) and `anthropic-version`.
    fn headers(&self, api_key: Option<&Secret>) -> Result<HeaderMap, CallError> {
        let mut headers = HeaderMap::new();
        headers.insert(HeaderName::from_static("anthropic-version"), HeaderValue::from_static(ANTHROPIC_VERSION));
        if let Some(key) = api_key {
            secret_header(&mut headers, "x-api-key", "", key)?;
        }
        Ok(headers)
    }

    fn build_body(&self, request: &ChatRequest, endpoint: &Endpoint) -> Value {
        build_body(request, endpoint)
    }

    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], _shaping: &Shaping) -> Result<ChatResponse, CallError> {
        parse_response(status, headers, body)
    }

    fn output_cap_fields(&self) -> &'static [&'static str] {
        &["/max_tokens"]
    }
    fn thinks(&self, body: &Value) -> bool {
        body.get("thinking").is_some_and(|thinking| thinking.is_object() && thinking.get("type").and_then(Value::as_str) != Some("disabled"))
    }

    fn switch_on_stream(&self, body: &mut Map<String, Value>) {
        body.insert("stream".into(), serde_json::json!(true));
    }

    fn batch_kind(&self) -> Option<super::batch::BatchKind> {
        Some(super::batch::BatchKind::Anthropic)
    }

    fn stream_fold(&self) -> Box<dyn Fold> {
        super::stream::fold_anthropic()
    }
}

#[cfg(test)]
mod tests {
    use super::super::mock::{MockConfig, MockServer};
    use super::super::testing::{mock_endpoint, quick_client};
    use super::super::tests::signature::fixture;
    use super::super::types::ProviderKind;
    use super::*;

    fn request(thinking: bool) -> ChatRequest {
        let mut params = Map::new();
        params.insert("temperature".into(), json!(0.2));
        params.insert("top_k".into(), json!(5));
        params.insert("seed".into(), json!(3));
        params.insert("stop".into(), json!(["END"]));
        if thinking {
            params.insert("thinking_budget".into(), json!(2048));
        }
        ChatRequest {
            messages: vec![Message::user("hi"), Message::assistant("hello"), Message::user("count to three")],
            system: Some("sys".into()),
            params,
            json_mode: true,
            tools: None,
        }
    }

    #[test]
    fn body_plain() {
        let body = build_body(&request(false), &Endpoint::new(ProviderKind::Anthropic, "claude-test"));
        let expected = json!({
            "model": "claude-test", "max_tokens": 4096, "temperature": 0.2, "top_k": 5,
            "stop_sequences": ["END"],
            "system": format!("sys\n\n{JSON_MODE_INSTRUCTION}"),
            "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"},
                         {"role": "user", "content": "count to three"}],
        });
        assert_eq!(body, expected);
    }

    #[test]
    fn thinking_forces_temperature_one() {
        let body = build_body(&request(true), &Endpoint::new(ProviderKind::Anthropic, "claude-test"));
        assert_eq!(body["thinking"], json!({"type": "enabled", "budget_tokens": 2048}));
        assert_eq!(body["temperature"], json!(1));
        assert_eq!(body["max_tokens"], json!(4096 + 2048));
        assert!(body.get("top_k").is_none() && body.get("seed").is_none());
    }

    #[test]
    fn parses_thinking_tool_use_and_refusal() {
        let ok = StatusCode::OK;
        let body = br#"{"type":"message","model":"claude-x","stop_reason":"tool_use",
            "content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"calling"},
                       {"type":"tool_use","id":"tu1","name":"add","input":{"a":1}}],
            "usage":{"input_tokens":3,"cache_read_input_tokens":10,"output_tokens":7}}"#;
        let parsed = parse_response(ok, &HeaderMap::new(), body).unwrap();
        assert_eq!(parsed.reasoning.as_deref(), Some("hmm"));
        assert_eq!(parsed.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(parsed.usage, Usage { input: 13, output: 7, reasoning: 0, cached: 10, cost: None });
        let refused = br#"{"type":"message","model":"m","stop_reason":"refusal","content":[]}"#;
        let refused = parse_response(ok, &HeaderMap::new(), refused).unwrap();
        assert_eq!((refused.finish_reason, refused.text.as_str(), refused.usage_reported), (FinishReason::Refusal, "", false));
        let overloaded = br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(parse_response(ok, &HeaderMap::new(), overloaded).unwrap_err().class(), "overloaded");
    }

    #[test]
    fn recorded_thinking_and_redacted_blocks_are_kept_in_order_with_their_signatures() {
        let parse = |name: &str| parse_response(StatusCode::OK, &HeaderMap::new(), &fixture(name)).unwrap();
        let types = |response: &ChatResponse| response.items.iter().map(|block| block["type"].as_str().unwrap_or_default().to_owned()).collect::<Vec<_>>();
        let called = parse("anthropic_thinking_tool_use");
        assert_eq!(types(&called), ["thinking", "text", "tool_use"]);
        assert_eq!(called.items[0]["signature"], "BDaL4VrbR2Oj0hO4XpJxT28J5TILnCrrUXoKiiNBZW9P+nr8XSj1zuZzAl4egiCCpQNvfyUuFFJP5CncdYZEQPPmLxYsNrcs");
        assert_eq!(called.items[2], json!({"type": "tool_use", "id": "toolu_01CswdEQBMshySk6Y9DFKrfq", "name": "get_weather", "input": {"location": "Paris"}}));
        assert_eq!((called.finish_reason.class(), called.usage.output, called.usage.reasoning), ("tool_calls", 131, 58), "thinking tokens are counted");
        let redacted = parse("anthropic_redacted_thinking");
        assert_eq!(types(&redacted), ["thinking", "redacted_thinking", "text"]);
        assert!(redacted.items[1]["data"].as_str().unwrap().starts_with("EmwKAhgBEgy3va3pzix"));
        assert_eq!(redacted.items[1].as_object().unwrap().len(), 2, "only `type` and `data` are replayed");
        assert_eq!((redacted.text.as_str(), redacted.reasoning.as_deref()), ("Based on my analysis...", Some("Let me analyze this step by step...")));
        // An answer with neither thinking nor a tool call replays as plain text.
        assert!(parse("anthropic_context_exceeded").items.is_empty());
    }

    #[test]
    fn a_replayed_tool_round_sends_thinking_before_tool_use_and_tool_results_first() {
        let called = parse_response(StatusCode::OK, &HeaderMap::new(), &fixture("anthropic_thinking_tool_use")).unwrap();
        let mut request = request(true);
        request.messages = vec![
            Message::user("What's the weather in Paris?"),
            Message::assistant_turn(&called),
            Message::tool_outputs([("toolu_01CswdEQBMshySk6Y9DFKrfq", "Current temperature: 88°F")], "Go on."),
        ];
        let body = build_body(&request, &Endpoint::new(ProviderKind::Anthropic, "claude-test"));
        assert_eq!(body["messages"][0]["content"], "What's the weather in Paris?", "a turn without items is a plain string");
        assert_eq!(body["messages"][1]["content"], Value::Array(called.items.clone()), "replayed verbatim, thinking first");
        assert_eq!(
            body["messages"][2]["content"],
            json!([{"type": "tool_result", "tool_use_id": "toolu_01CswdEQBMshySk6Y9DFKrfq", "content": "Current temperature: 88°F"},
                   {"type": "text", "text": "Go on."}])
        );
        // Another protocol's items are not sent to Anthropic.
        request.messages[1].items = vec![json!({"type": "reasoning", "encrypted_content": "e"})];
        let body = build_body(&request, &Endpoint::new(ProviderKind::Anthropic, "claude-test"));
        assert_eq!(body["messages"][1]["content"], called.text);
    }

    #[tokio::test]
    async fn round_trip_against_mock() {
        let server = MockServer::start(MockConfig::default()).await.unwrap();
        let endpoint = mock_endpoint(&server, ProviderKind::Anthropic, "claude-test");
        let outcome = quick_client().call(&endpoint, &request(true)).await.unwrap();
        assert_eq!(outcome.response.text, "echo: count to three");
        assert_eq!(outcome.response.reasoning.as_deref(), Some("mock reasoning"));
        assert_eq!(outcome.response.usage.output, 6, "4 answer words + 2 reasoning words");
        assert_eq!(outcome.response.finish_reason, FinishReason::Stop);
        let log = server.request_log();
        assert_eq!(log[0].path, "/v1/messages");
        assert_eq!(log[0].headers.get("anthropic-version").map(String::as_str), Some(ANTHROPIC_VERSION));
        assert_eq!(log[0].headers.get("x-api-key").map(String::as_str), Some("sk-test-SECRET-1"));
        server.shutdown().await;
    }
}
