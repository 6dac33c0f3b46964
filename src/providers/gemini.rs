//! Google Gemini wire format (`POST {base}/v1beta/models/{model}:generateContent`).
//!
//! The model is in the URL, not the body, so cache keys must include the endpoint identity
//! (see [`super::request_fingerprint`]). Generic params go into `generationConfig`:
//! `temperature`, `top_p` → `topP`, `top_k` → `topK`, `max_tokens` → `maxOutputTokens`,
//! `stop` → `stopSequences`, `seed`; `thinking_budget` → `thinkingConfig.thinkingBudget` and
//! `reasoning_effort` → `thinkingConfig.thinkingLevel`, with `includeThoughts: true` so the
//! reasoning text comes back (not for budget 0, which turns thinking off). Other keys pass
//! through into `generationConfig` verbatim. JSON mode sets `responseMimeType`.
//! Usage: `output` = candidates + thoughts tokens, so it includes reasoning as billed.
//!
//! Tool rounds: an answer whose parts carry a `thoughtSignature` (Gemini 3 signs the first
//! `functionCall` part, or the last part of an answer without calls) or a `functionCall`
//! keeps its parts as sent ([`ChatResponse::items`]); a model turn replaying them
//! ([`super::Message::assistant_turn`]) sends them back verbatim, so each signature stays on
//! the part it came on (Gemini 3 answers 400 "Function call is missing a thought_signature"
//! otherwise). `function_call_output` items of a user turn become `functionResponse` parts
//! (`{name, response: {output}}`, plus the call's `id` when it had one), the name taken from
//! the model turn's matching `functionCall`. Turns without items are one text part, as before.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::error::{CallError, success_json};
use super::families::gemini_generation;
use super::protocol::Protocol;
use super::shaping::Shaping;
use super::stream::Fold;
use super::types::{ChatRequest, ChatResponse, Endpoint, FinishReason, Message, Role, Secret, ToolCall, Usage};
use super::wire::{count, endpoint_url, join_url, refused, secret_header, settle, text, tool_objects};

/// The exact JSON body sent, a pure function of its inputs; hash it with
/// [`super::canonical_json`], which sorts keys even if serde_json's `preserve_order` is on.
fn build_body(request: &ChatRequest, endpoint: &Endpoint) -> Value {
    // Gemini 2.x takes only a token budget, 3.x a level (both at once is a 400).
    let budget_only = gemini_generation(&endpoint.model).is_some_and(|generation| generation < 3);
    let mut config = Map::new();
    let mut thinking = Map::new();
    for (key, value) in &request.params {
        let mapped = match key.as_str() {
            "top_p" => "topP",
            "top_k" => "topK",
            "max_tokens" => "maxOutputTokens",
            "stop" => "stopSequences",
            "max_tokens_field" | "reasoning_tag" => continue,
            "thinking_budget" => {
                thinking.insert("thinkingBudget".into(), value.clone());
                continue;
            }
            "reasoning_effort" if budget_only => {
                if let Some(budget) = value.as_str().and_then(effort_budget) {
                    thinking.entry("thinkingBudget").or_insert_with(|| json!(budget));
                }
                continue;
            }
            "reasoning_effort" => {
                thinking.insert("thinkingLevel".into(), value.clone());
                continue;
            }
            other => other,
        };
        config.insert(mapped.to_owned(), value.clone());
    }
    if !thinking.is_empty() {
        let disabled = thinking.get("thinkingBudget").and_then(Value::as_u64) == Some(0);
        if !disabled {
            thinking.insert("includeThoughts".into(), Value::Bool(true));
        }
        config.insert("thinkingConfig".into(), Value::Object(thinking));
    }
    if request.json_mode {
        config.insert("responseMimeType".into(), json!("application/json"));
    }
    let mut calls: Vec<(String, String)> = Vec::new();
    let contents = request
        .messages
        .iter()
        .map(|message| {
            let role = match message.role {
                Role::User => "user",
                Role::Assistant => "model",
            };
            json!({"role": role, "parts": parts(message, &mut calls)})
        })
        .collect();
    let mut body = Map::new();
    body.insert("contents".into(), Value::Array(contents));
    if !config.is_empty() {
        body.insert("generationConfig".into(), Value::Object(config));
    }
    if let Some(system) = &request.system {
        body.insert("systemInstruction".into(), json!({"parts": [{"text": system}]}));
    }
    if let Some(tools) = &request.tools {
        body.insert("tools".into(), json!([{"functionDeclarations": tool_objects(tools, "parameters")}]));
    }
    Value::Object(body)
}

/// Whether a replayed item is a Gemini part (another protocol's items have a `type`).
fn is_part(item: &Value) -> bool {
    item.is_object() && item.get("type").is_none()
}

/// A turn's parts: one text part when it has no items (the form every existing key has);
/// else the `functionResponse` parts answering `function_call_output` items, then the
/// replayed parts verbatim, then the text unless a replayed answer part holds it.
/// `calls` holds the (id, name) of the function calls of the last model turn with any,
/// oldest first, to name the responses.
fn parts(message: &Message, calls: &mut Vec<(String, String)>) -> Vec<Value> {
    let mut parts = Vec::new();
    let mut answered = 0;
    for item in &message.items {
        if item.get("type").and_then(Value::as_str) == Some("function_call_output") {
            let id = text(item, "/call_id");
            // By id where the call had one, else in order (Gemini 2.x calls carry no id).
            let name = calls.iter().find(|(call, _)| !id.is_empty() && *call == id).or_else(|| calls.get(answered)).map(|(_, name)| name.clone());
            answered += 1;
            let mut response = Map::new();
            if !id.is_empty() {
                response.insert("id".into(), Value::String(id));
            }
            response.insert("name".into(), Value::String(name.unwrap_or_default()));
            response.insert("response".into(), json!({"output": item.get("output").cloned().unwrap_or(Value::Null)}));
            parts.push(json!({"functionResponse": response}));
        } else if is_part(item) {
            parts.push(item.clone());
        }
    }
    let made_calls: Vec<(String, String)> =
        parts.iter().filter_map(|part| part.get("functionCall")).map(|call| (text(call, "/id"), text(call, "/name"))).collect();
    if !made_calls.is_empty() {
        *calls = made_calls;
    }
    if parts.is_empty() && message.images.is_empty() {
        return vec![json!({"text": message.content})];
    }
    let has_text = parts.iter().any(|part| part.get("text").is_some() && part.get("thought").and_then(Value::as_bool) != Some(true));
    if !has_text && !message.content.is_empty() {
        parts.push(json!({"text": message.content}));
    }
    // Images after the text, each an `inline_data` part (as Google's REST examples spell it).
    for image in &message.images {
        parts.push(json!({"inline_data": {"mime_type": image.media_type, "data": image.data}}));
    }
    parts
}

/// The `thinkingBudget` a Gemini 2.x model gets for a generic `reasoning_effort`
/// (`none` turns thinking off; an explicit `thinking_budget` always wins).
#[must_use]
pub fn effort_budget(effort: &str) -> Option<u64> {
    match effort {
        "none" => Some(0),
        "minimal" => Some(512),
        "low" => Some(1024),
        "medium" => Some(8192),
        "high" => Some(24_576),
        _ => None,
    }
}

/// Parses a response (any status) into an answer or a classified error.
///
/// # Errors
/// Any [`CallError`] class: HTTP failures, errors inside a 200, malformed bodies, empty
/// outputs and refusals.
fn parse_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<ChatResponse, CallError> {
    let json = success_json(status, headers, body)?;
    let thoughts = count(&json, "/usageMetadata/thoughtsTokenCount");
    let usage = Usage {
        input: count(&json, "/usageMetadata/promptTokenCount"),
        output: count(&json, "/usageMetadata/candidatesTokenCount") + thoughts,
        reasoning: thoughts,
        cached: count(&json, "/usageMetadata/cachedContentTokenCount"),
        cost: None,
    };
    let mut response = ChatResponse {
        text: String::new(),
        reasoning: None,
        tool_calls: Vec::new(),
        usage,
        answered_model: text(&json, "/modelVersion"),
        finish_reason: FinishReason::Other("no_candidates".into()),
        latency_ms: 0,
        refusal: None,
        usage_reported: true,
        items: Vec::new(),
        paid: None,
        logprobs: super::logprobs::gemini_top_logprobs(&json),
    };
    let usage_present = json.get("usageMetadata").is_some_and(Value::is_object);
    let Some(candidate) = json.pointer("/candidates/0") else {
        let block = text(&json, "/promptFeedback/blockReason");
        if !block.is_empty() {
            let mut response = refused(settle(response, usage_present), &format!("prompt blocked: {block}"));
            response.finish_reason = FinishReason::ContentFilter;
            return Ok(response);
        }
        return Ok(settle(response, usage_present));
    };
    let mut reasoning = String::new();
    let parts = candidate.pointer("/content/parts").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
    if parts.iter().any(|part| part.get("thoughtSignature").is_some() || part.get("functionCall").is_some()) {
        response.items = parts.to_vec();
    }
    for part in parts {
        if let Some(call) = part.get("functionCall") {
            response.tool_calls.push(ToolCall {
                id: text(call, "/id"),
                name: text(call, "/name"),
                arguments: call.get("args").cloned().unwrap_or(Value::Null),
            });
        } else if part.get("thought").and_then(Value::as_bool) == Some(true) {
            reasoning.push_str(&text(part, "/text"));
        } else {
            response.text.push_str(&text(part, "/text"));
        }
    }
    response.reasoning = (!reasoning.is_empty()).then_some(reasoning);
    response.finish_reason = finish_reason(&text(candidate, "/finishReason"));
    if response.finish_reason == FinishReason::Stop && !response.tool_calls.is_empty() {
        response.finish_reason = FinishReason::ToolCalls;
    }
    Ok(settle(response, usage_present))
}

fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "STOP" => FinishReason::Stop,
        "MAX_TOKENS" => FinishReason::Length,
        "MALFORMED_FUNCTION_CALL" | "UNEXPECTED_TOOL_CALL" => FinishReason::Malformed,
        "SAFETY" | "RECITATION" | "PROHIBITED_CONTENT" | "BLOCKLIST" | "SPII" | "IMAGE_SAFETY" => FinishReason::ContentFilter,
        "" => FinishReason::Other("unknown".into()),
        other => FinishReason::Other(other.to_lowercase()),
    }
}

/// Google Gemini `generateContent` (`/v1beta/models/{model}:generateContent`).
#[derive(Debug, Clone, Copy)]
pub struct GenerateContent;

impl Protocol for GenerateContent {
    fn default_base_url(&self) -> &'static str {
        "https://generativelanguage.googleapis.com"
    }

    /// `base_url` as given plus `/models/{model}:generateContent` (a bare origin gets
    /// `/v1beta`); a `models/` prefix on the model id is tolerated.
    fn url(&self, base_url: &str, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        endpoint_url(base_url, "/v1beta", &format!("/models/{model}:generateContent"))
    }

    fn legacy_url(&self, base_url: &str, model: &str) -> String {
        let model = model.strip_prefix("models/").unwrap_or(model);
        join_url(base_url, "/v1beta", &format!("/models/{model}:generateContent"))
    }

    /// `x-goog-api-key` (sensitive) rather than `?key=`, so the key never appears in URLs or
    /// in transport errors that quote them.
    fn headers(&self, api_key: Option<&Secret>) -> Result<HeaderMap, CallError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = api_key {
            secret_header(&mut headers, "x-goog-api-key", "", key)?;
        }
        Ok(headers)
    }

    fn next_token_params(&self) -> Option<Map<String, Value>> {
        Some(super::logprobs::gemini_params())
    }

    fn build_body(&self, request: &ChatRequest, endpoint: &Endpoint) -> Value {
        build_body(request, endpoint)
    }

    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], _shaping: &Shaping) -> Result<ChatResponse, CallError> {
        parse_response(status, headers, body)
    }

    fn output_cap_fields(&self) -> &'static [&'static str] {
        &["/generationConfig/maxOutputTokens"]
    }

    fn switch_on_stream(&self, body: &mut Map<String, Value>) {
        // Gemini's switch is in the URL (`streamed_url`): the body is unchanged.
        let _ = body;
    }
    fn streamed_url(&self, url: &str) -> String {
        super::stream::gemini_streamed_url(url)
    }

    fn batch_kind(&self) -> Option<super::batch::BatchKind> {
        Some(super::batch::BatchKind::Gemini)
    }

    fn stream_fold(&self) -> Box<dyn Fold> {
        super::stream::fold_gemini()
    }
}

#[cfg(test)]
mod tests {
    use super::super::mock::{MockConfig, MockServer};
    use super::super::testing::{mock_endpoint, quick_client};
    use super::super::tests::signature::fixture;
    use super::super::types::ProviderKind;
    use super::*;

    fn request() -> ChatRequest {
        let mut params = Map::new();
        params.insert("temperature".into(), json!(0.5));
        params.insert("max_tokens".into(), json!(100));
        params.insert("thinking_budget".into(), json!(512));
        params.insert("candidateCount".into(), json!(1));
        ChatRequest {
            messages: vec![Message::user("ping"), Message::assistant("pong"), Message::user("again please")],
            system: Some("sys".into()),
            params,
            json_mode: true,
            tools: None,
        }
    }

    #[test]
    fn body_shape() {
        let body = build_body(&request(), &Endpoint::new(ProviderKind::Gemini, "gemini-test"));
        let expected = json!({
            "contents": [{"role": "user", "parts": [{"text": "ping"}]}, {"role": "model", "parts": [{"text": "pong"}]},
                         {"role": "user", "parts": [{"text": "again please"}]}],
            "systemInstruction": {"parts": [{"text": "sys"}]},
            "generationConfig": {"temperature": 0.5, "maxOutputTokens": 100, "candidateCount": 1,
                "responseMimeType": "application/json",
                "thinkingConfig": {"thinkingBudget": 512, "includeThoughts": true}},
        });
        assert_eq!(body, expected);
        assert_eq!(GenerateContent.url("http://h/", "models/gemini-x"), "http://h/v1beta/models/gemini-x:generateContent");
    }

    #[test]
    fn parses_blocked_and_safety() {
        let ok = StatusCode::OK;
        let blocked = br#"{"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":5}}"#;
        let blocked = parse_response(ok, &HeaderMap::new(), blocked).unwrap();
        assert_eq!(blocked.finish_reason, FinishReason::ContentFilter);
        assert_eq!(blocked.refusal.as_deref(), Some("prompt blocked: SAFETY"));
        assert_eq!(blocked.usage.input, 5);
        let safety = br#"{"candidates":[{"finishReason":"SAFETY","content":{"parts":[]}}]}"#;
        let safety = parse_response(ok, &HeaderMap::new(), safety).unwrap();
        assert_eq!((safety.finish_reason, safety.usage_reported), (FinishReason::ContentFilter, false));
        let empty = br#"{"candidates":[{"finishReason":"MAX_TOKENS","content":{"parts":[{"text":"x","thought":true}]}}]}"#;
        let cut = parse_response(ok, &HeaderMap::new(), empty).unwrap();
        assert_eq!((cut.finish_reason, cut.text.as_str(), cut.reasoning.as_deref()), (FinishReason::Length, "", Some("x")));
    }

    #[test]
    fn recorded_signed_parts_are_kept_as_sent() {
        let parse = |name: &str| parse_response(StatusCode::OK, &HeaderMap::new(), &fixture(name)).unwrap();
        let recorded = |name: &str| serde_json::from_slice::<Value>(&fixture(name)).unwrap()["candidates"][0]["content"]["parts"].clone();
        let parallel = parse("gemini_signed_parallel_calls");
        assert_eq!(Value::Array(parallel.items.clone()), recorded("gemini_signed_parallel_calls"));
        assert_eq!(parallel.items[0]["thoughtSignature"], "CiUBVKhc7oJ3Xz9qZr1rYQ2M0kF7aB8n", "the first call carries the signature");
        assert!(parallel.items[1].get("thoughtSignature").is_none(), "a parallel call after it carries none");
        assert_eq!((parallel.tool_calls.len(), parallel.finish_reason.class(), parallel.usage.reasoning), (2, "tool_calls", 112));
        let answered = parse("gemini_signed_text");
        assert_eq!(Value::Array(answered.items.clone()), recorded("gemini_signed_text"));
        assert_eq!(answered.text, "It is 18°C in Paris and 14°C in London, so Paris is warmer.");
        assert_eq!(answered.reasoning.as_deref(), Some("**Comparing temperatures** Paris is warmer."));
        // Gemini 2.5 calls carry no signature but are replayed natively; plain answers are text.
        assert_eq!(parse("gemini_function_call").items.len(), 1);
        assert!(parse("gemini_thinking").items.is_empty());
    }

    #[test]
    fn a_replayed_tool_round_keeps_each_signature_on_its_part_and_names_the_responses() {
        let called = parse_response(StatusCode::OK, &HeaderMap::new(), &fixture("gemini_signed_parallel_calls")).unwrap();
        let mut request = request();
        request.messages =
            vec![Message::user("Paris or London: which is warmer?"), Message::assistant_turn(&called), Message::tool_outputs([("", "18°C"), ("", "14°C")], "")];
        let body = build_body(&request, &Endpoint::new(ProviderKind::Gemini, "gemini-3-pro-preview"));
        assert_eq!(body["contents"][0]["parts"], json!([{"text": "Paris or London: which is warmer?"}]));
        assert_eq!(body["contents"][1]["parts"], Value::Array(called.items.clone()));
        let response = |output: &str| json!({"functionResponse": {"name": "get_current_temperature", "response": {"output": output}}});
        assert_eq!(body["contents"][2], json!({"role": "user", "parts": [response("18°C"), response("14°C")]}));
        // Calls with ids are answered by id, whatever the order of the outputs.
        let with_ids = ChatResponse {
            items: vec![json!({"functionCall": {"id": "c1", "name": "a", "args": {}}}), json!({"functionCall": {"id": "c2", "name": "b", "args": {}}})],
            ..called
        };
        request.messages = vec![Message::user("go"), Message::assistant_turn(&with_ids), Message::tool_outputs([("c2", "x"), ("c1", "y")], "and?")];
        let body = build_body(&request, &Endpoint::new(ProviderKind::Gemini, "gemini-3-pro-preview"));
        assert_eq!(
            body["contents"][2]["parts"],
            json!([{"functionResponse": {"id": "c2", "name": "b", "response": {"output": "x"}}},
                   {"functionResponse": {"id": "c1", "name": "a", "response": {"output": "y"}}}, {"text": "and?"}])
        );
    }

    #[tokio::test]
    async fn round_trip_against_mock() {
        let server = MockServer::start(MockConfig::default()).await.unwrap();
        let endpoint = mock_endpoint(&server, ProviderKind::Gemini, "gemini-test");
        let outcome = quick_client().call(&endpoint, &request()).await.unwrap();
        assert_eq!(outcome.response.text, "echo: again please");
        assert_eq!(outcome.response.reasoning.as_deref(), Some("mock reasoning"));
        assert_eq!(outcome.response.usage, Usage { input: 5, output: 5, reasoning: 2, cached: 0, cost: None });
        assert_eq!(outcome.response.answered_model, "gemini-test");
        let log = server.request_log();
        assert_eq!(log[0].path, "/v1beta/models/gemini-test:generateContent");
        assert_eq!(log[0].headers.get("x-goog-api-key").map(String::as_str), Some("sk-test-SECRET-1"));
        server.shutdown().await;
    }
}
