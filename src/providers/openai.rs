//! OpenAI Chat Completions wire format (`POST {base_url}/chat/completions`; a bare origin gets `/v1`).
//!
//! Also serves OpenAI-compatible gateways (vLLM, OpenRouter, …): reasoning text is read from
//! `reasoning_content` or `reasoning` when present. Generic params map as follows:
//! `max_tokens` is the output cap, sent as `max_completion_tokens` to OpenAI's own API and
//! Azure OpenAI (their reasoning models reject `max_tokens`) and as `max_tokens` to every other
//! server (Ollama ignores the newer name, and Z.ai, DeepSeek and xAI document only `max_tokens`);
//! `max_tokens_field` names the field explicitly and is not sent. `temperature`, `top_p`,
//! `seed`, `stop`, `reasoning_effort` keep their names; anything else passes through.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::error::{CallError, success_json};
use super::families::is_openai_platform;
use super::protocol::Protocol;
use super::shaping::{MAX_TOKENS_FIELD, REASONING_TAG, Shaping, split_by_tag};
use super::stream::{Fold, fold_chat};
use super::types::{ChatRequest, ChatResponse, Endpoint, FinishReason, Message, Role, Secret, TOOL_CALL_ITEM, ToolCall, Usage};
use super::wire::{bearer_headers, count, endpoint_url, join_url, parse_arguments, refused, settle, text, tool_objects};

/// The name the output cap goes under for this server: `params.max_tokens_field` when set,
/// else `max_completion_tokens` for OpenAI's own API and Azure, `max_tokens` elsewhere.
fn max_tokens_field<'a>(request: &'a ChatRequest, base_url: &str) -> &'a str {
    match request.params.get(MAX_TOKENS_FIELD).and_then(Value::as_str) {
        Some(field) if !field.is_empty() => field,
        _ if is_openai_platform(base_url) => "max_completion_tokens",
        _ => "max_tokens",
    }
}

/// The exact JSON body sent, a pure function of its inputs; hash it with
/// [`super::canonical_json`], which sorts keys even if serde_json's `preserve_order` is on.
fn build_body(request: &ChatRequest, endpoint: &Endpoint) -> Value {
    let model = endpoint.model.as_str();
    let cap_field = max_tokens_field(request, &endpoint.base_url);
    let mut body = Map::new();
    for (key, value) in &request.params {
        let key = match key.as_str() {
            MAX_TOKENS_FIELD | REASONING_TAG => continue,
            "max_tokens" => cap_field,
            other => other,
        };
        body.insert(key.to_owned(), value.clone());
    }
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    for message in &request.messages {
        push_message(&mut messages, message);
    }
    body.insert("model".into(), Value::String(model.to_owned()));
    body.insert("messages".into(), Value::Array(messages));
    if request.json_mode {
        body.insert("response_format".into(), json!({"type": "json_object"}));
    }
    if let Some(tools) = &request.tools {
        let tools = tool_objects(tools, "parameters").into_iter().map(|function| json!({"type": "function", "function": function})).collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// One turn as Chat Completions messages: an assistant turn's calls (neutral `tool_call`
/// items) as its `tool_calls`; a user turn's tool answers as `tool` messages, then its text.
/// A call without an id gets `call_<i>` by position, in both places.
fn push_message(messages: &mut Vec<Value>, message: &Message) {
    let id = |i: usize, id: Option<&str>| id.filter(|s| !s.is_empty()).map_or_else(|| format!("call_{i}"), str::to_owned);
    match message.role {
        Role::Assistant => {
            let calls: Vec<Value> = message
                .items
                .iter()
                .filter(|item| item.get("type").and_then(Value::as_str) == Some(TOOL_CALL_ITEM))
                .enumerate()
                .map(|(i, item)| {
                    let arguments = match item.get("arguments") {
                        Some(Value::String(raw)) => raw.clone(),
                        Some(other) => other.to_string(),
                        None => "{}".to_owned(),
                    };
                    json!({"id": id(i, item.get("id").and_then(Value::as_str)), "type": "function", "function": {"name": item.get("name").cloned().unwrap_or(Value::Null), "arguments": arguments}})
                })
                .collect();
            if calls.is_empty() {
                messages.push(json!({"role": "assistant", "content": content(message)}));
            } else {
                let content = if message.content.is_empty() { Value::Null } else { Value::String(message.content.clone()) };
                messages.push(json!({"role": "assistant", "content": content, "tool_calls": calls}));
            }
        }
        Role::User => {
            let outputs: Vec<&Value> = message.items.iter().filter(|item| item.get("type").and_then(Value::as_str) == Some("function_call_output")).collect();
            for (i, item) in outputs.iter().enumerate() {
                let output = item.get("output").and_then(Value::as_str).unwrap_or_default();
                messages.push(json!({"role": "tool", "tool_call_id": id(i, item.get("call_id").and_then(Value::as_str)), "content": output}));
            }
            if outputs.is_empty() || !message.content.is_empty() || !message.images.is_empty() {
                messages.push(json!({"role": "user", "content": content(message)}));
            }
        }
    }
}

/// A turn's `content`: its text, or (with images) a text part and an `image_url` part per
/// image, each a `data:` URL.
fn content(message: &Message) -> Value {
    if message.images.is_empty() {
        return Value::String(message.content.clone());
    }
    let text = (!message.content.is_empty()).then(|| json!({"type": "text", "text": message.content}));
    let images = message.images.iter().map(|image| json!({"type": "image_url", "image_url": {"url": image.data_url()}}));
    Value::Array(text.into_iter().chain(images).collect())
}

/// Parses a response (any status) into an answer or a classified error, normalised for
/// the server: xAI's reasoning tokens added to output, a reported `usage.cost` kept.
fn parse_shaped(status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, CallError> {
    let json = success_json(status, headers, body)?;
    let message = json.pointer("/choices/0/message").ok_or_else(|| CallError::Protocol { detail: "response has no `choices[0].message`".into() })?;
    let response = ChatResponse {
        text: content_text(message.get("content")),
        reasoning: ["reasoning_content", "reasoning"]
            .iter()
            .find_map(|key| message.get(*key).and_then(Value::as_str))
            .filter(|reasoning| !reasoning.is_empty())
            .map(str::to_owned),
        tool_calls: tool_calls(message),
        usage: usage(&json, shaping.xai),
        answered_model: text(&json, "/model"),
        finish_reason: finish_reason(&text(&json, "/choices/0/finish_reason")),
        latency_ms: 0,
        refusal: None,
        usage_reported: true,
        items: Vec::new(),
        paid: None,
        logprobs: super::logprobs::chat_top_logprobs(&json),
    };
    let response = settle(response, json.get("usage").is_some_and(Value::is_object));
    if let Some(message) = message.get("refusal").and_then(Value::as_str).filter(|text| !text.is_empty()) {
        return Ok(refused(response, message));
    }
    Ok(response)
}

/// Usage with `output` always including reasoning: xAI (and any server whose
/// `total_tokens` is prompt + completion + reasoning) counts reasoning outside
/// `completion_tokens`, so it is added; when xAI sends no total, its documented rule holds.
fn usage(json: &Value, xai: bool) -> Usage {
    let input = count(json, "/usage/prompt_tokens");
    let completion = count(json, "/usage/completion_tokens");
    let reasoning = count(json, "/usage/completion_tokens_details/reasoning_tokens");
    let total = json.pointer("/usage/total_tokens").and_then(Value::as_u64);
    let separate = reasoning > 0
        && match total {
            Some(total) => total == input + completion + reasoning,
            None => xai,
        };
    Usage {
        input,
        output: if separate { completion + reasoning } else { completion },
        reasoning,
        cached: count(json, "/usage/prompt_tokens_details/cached_tokens"),
        cost: json.pointer("/usage/cost").and_then(Value::as_f64),
    }
}

/// `content` is a string, null, or (in some gateways) an array of `{type, text}` parts.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts.iter().filter_map(|part| part.get("text").and_then(Value::as_str)).collect(),
        _ => String::new(),
    }
}

fn tool_calls(message: &Value) -> Vec<ToolCall> {
    let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
        return Vec::new();
    };
    calls
        .iter()
        .map(|call| ToolCall {
            id: text(call, "/id"),
            name: text(call, "/function/name"),
            arguments: call.pointer("/function/arguments").map_or(Value::Null, parse_arguments),
        })
        .collect()
}

/// A Chat Completions (or completions) `finish_reason` as evalgrid classifies it.
pub(super) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "stop" => FinishReason::Stop,
        "length" => FinishReason::Length,
        "tool_calls" | "function_call" => FinishReason::ToolCalls,
        "content_filter" => FinishReason::ContentFilter,
        "" => FinishReason::Other("unknown".into()),
        other => FinishReason::Other(other.to_owned()),
    }
}

/// OpenAI Chat Completions (`/v1/chat/completions`), also spoken by compatible gateways.
#[derive(Debug, Clone, Copy)]
pub struct ChatCompletions;

impl Protocol for ChatCompletions {
    fn default_base_url(&self) -> &'static str {
        "https://api.openai.com"
    }

    /// `base_url` as given plus `/chat/completions` (a bare origin gets `/v1`).
    fn url(&self, base_url: &str, _model: &str) -> String {
        endpoint_url(base_url, "/v1", "/chat/completions")
    }

    fn legacy_url(&self, base_url: &str, _model: &str) -> String {
        join_url(base_url, "/v1", "/chat/completions")
    }

    fn batch_kind(&self) -> Option<super::batch::BatchKind> {
        Some(super::batch::BatchKind::OpenAi("/chat/completions"))
    }

    fn headers(&self, api_key: Option<&Secret>) -> Result<HeaderMap, CallError> {
        bearer_headers(api_key)
    }

    fn build_body(&self, request: &ChatRequest, endpoint: &Endpoint) -> Value {
        build_body(request, endpoint)
    }

    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, CallError> {
        parse_shaped(status, headers, body, shaping)
    }

    /// A leading reasoning block in the text is moved to `reasoning` ([`Shaping::reasoning_tag`]).
    fn settle(&self, response: ChatResponse, shaping: &Shaping) -> ChatResponse {
        split_by_tag(response, shaping)
    }

    fn output_cap_fields(&self) -> &'static [&'static str] {
        &["/max_completion_tokens", "/max_tokens"]
    }

    fn switch_on_stream(&self, body: &mut Map<String, Value>) {
        body.insert("stream".into(), serde_json::json!(true));
        body.insert("stream_options".into(), serde_json::json!({"include_usage": true}));
    }

    fn stream_fold(&self) -> Box<dyn Fold> {
        fold_chat()
    }

    fn next_token_params(&self) -> Option<Map<String, Value>> {
        Some(super::logprobs::chat_params())
    }
}

#[cfg(test)]
mod tests {
    use super::super::mock::{MockConfig, MockServer};
    use super::super::testing::{mock_endpoint, quick_client};
    use super::super::types::{Message, ProviderKind, ToolSpec};
    use super::*;

    fn request() -> ChatRequest {
        let mut params = Map::new();
        params.insert("temperature".into(), json!(0.0));
        params.insert("max_tokens".into(), json!(64));
        params.insert("reasoning_effort".into(), json!("low"));
        params.insert("seed".into(), json!(7));
        ChatRequest {
            messages: vec![Message::user("hello there")],
            system: Some("be brief".into()),
            params,
            json_mode: true,
            tools: Some(vec![ToolSpec { name: "add".into(), description: "adds".into(), parameters: json!({"type": "object"}) }]),
        }
    }

    #[test]
    fn body_shape_is_exact_and_stable() {
        let body = build_body(&request(), &Endpoint::new(ProviderKind::OpenAi, "gpt-test"));
        let expected = json!({
            "model": "gpt-test",
            "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}],
            "temperature": 0.0, "max_completion_tokens": 64, "reasoning_effort": "low", "seed": 7,
            "response_format": {"type": "json_object"},
            "tools": [{"type": "function", "function": {"name": "add", "description": "adds", "parameters": {"type": "object"}}}],
        });
        assert_eq!(body, expected);
        assert_eq!(body.to_string(), build_body(&request(), &Endpoint::new(ProviderKind::OpenAi, "gpt-test")).to_string());
        assert_eq!(ChatCompletions.url("http://x/v1/", "m"), "http://x/v1/chat/completions");
    }

    #[test]
    fn parses_refusal_tool_calls_and_bad_json() {
        let ok = StatusCode::OK;
        let parse_response = |status, headers: &HeaderMap, body: &[u8]| ChatCompletions.parse(status, headers, body, &Shaping::default());
        let refused = br#"{"model":"m","choices":[{"message":{"content":null,"refusal":"I can't help"},"finish_reason":"stop"}]}"#;
        let refused = parse_response(ok, &HeaderMap::new(), refused).unwrap();
        assert_eq!(refused.finish_reason, FinishReason::Refusal);
        assert_eq!(refused.refusal.as_deref(), Some("I can't help"));
        assert!(!refused.usage_reported, "no usage object in the body");
        let broken = br#"{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":3}}"#;
        let broken = parse_response(ok, &HeaderMap::new(), broken).unwrap();
        assert_eq!((broken.finish_reason.class(), broken.usage_reported), ("malformed", true));
        let tool = br#"{"model":"m","choices":[{"message":{"content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"add","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}]}"#;
        let parsed = parse_response(ok, &HeaderMap::new(), tool).unwrap();
        assert_eq!(parsed.tool_calls[0].arguments, json!({"a": 1}));
        assert_eq!(parsed.finish_reason, FinishReason::ToolCalls);
        assert_eq!(parse_response(ok, &HeaderMap::new(), b"{\"choi").unwrap_err().class(), "protocol");
        assert_eq!(parse_response(ok, &HeaderMap::new(), b"{}").unwrap_err().class(), "protocol");
    }

    #[tokio::test]
    async fn round_trip_against_mock() {
        let server = MockServer::start(MockConfig::default()).await.unwrap();
        let client = quick_client();
        let endpoint = mock_endpoint(&server, ProviderKind::OpenAi, "gpt-test");
        let outcome = client.call(&endpoint, &request()).await.unwrap();
        assert_eq!(outcome.response.text, "echo: hello there");
        assert_eq!(outcome.response.answered_model, "gpt-test");
        assert_eq!(outcome.response.usage.input, 4);
        assert_eq!(outcome.response.usage.output, 5, "3 answer words + 2 reasoning words");
        assert_eq!(outcome.response.usage.reasoning, 2);
        assert_eq!(outcome.response.reasoning.as_deref(), Some("mock reasoning"));
        assert_eq!(outcome.attempts, 1);
        let log = server.request_log();
        assert_eq!(log.len(), 1);
        assert_eq!(log[0].path, "/v1/chat/completions");
        assert_eq!(log[0].body, outcome.request_body);
        assert_eq!(log[0].headers.get("authorization").map(String::as_str), Some("Bearer sk-test-SECRET-1"));
        server.shutdown().await;
    }
}
