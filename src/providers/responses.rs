//! OpenAI Responses API wire format (`POST {base_url}/responses`; a bare origin gets `/v1`).
//!
//! Chosen per model entry with `api: responses` on `provider: openai`, or by `api: auto`
//! (the default) for the families Chat Completions cannot serve ([`route`]). The system
//! prompt goes to `instructions`; turns become `input` items (a turn's [`Message::items`],
//! e.g. reasoning items with `encrypted_content` and `function_call`s, are replayed
//! verbatim before its text); tools are flat `{type: "function", name, description,
//! parameters}`; `max_tokens` → `max_output_tokens`; `reasoning_effort` →
//! `reasoning: {effort, summary: "auto"}`. Requests always carry `store: false` (evalgrid
//! keeps the conversation itself), and reasoning models are asked for
//! `include: ["reasoning.encrypted_content"]` so reasoning can be carried between tool
//! rounds statelessly. Very long calls can run in background mode (`background:` in the
//! model entry; `background: true` and `store: true` on the wire, polled until done): see
//! [`super::Background`]. Streaming (`stream: true`, folded from the `response.*` events back
//! into this response object by [`super::stream`]) is transport and parsed here like any
//! response.
//!
//! [`Message::items`]: super::Message::items

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::error::{CallError, success_json};
use super::families::{family_version, is_openai_api};
use super::protocol::Protocol;
use super::shaping::{MAX_TOKENS_FIELD, REASONING_TAG, Shaping, split_by_tag};
use super::stream::{Fold, fold_responses};
use super::types::{ChatRequest, ChatResponse, Endpoint, FinishReason, OpenAiApi, ProviderKind, Role, Secret, ToolCall, Usage};
use super::wire::{bearer_headers, count, endpoint_url, join_url, parse_arguments, refused, settle, text, tool_objects};

/// Model families only the Responses API serves on OpenAI's own API (Chat Completions
/// answers 404): matched against the model id after any `vendor/` prefix.
const RESPONSES_ONLY: &[&str] = &["codex", "deep-research"];

/// The protocol a `provider: openai` call uses. `chat` and `responses` are taken as
/// written; `auto` picks Responses only on OpenAI's own API (`api.openai.com`) and only
/// where Chat Completions fails: codex and deep-research models, `*-pro` models (o1-pro,
/// o3-pro, gpt-5-pro, …), and GPT-5.2 or later when function tools are combined with a
/// `reasoning_effort` other than `none` (a 400 on Chat Completions). Everything else,
/// and every other server, stays on Chat Completions, so no call that could be answered
/// before changes its key.
#[must_use]
pub fn route(api: OpenAiApi, model: &str, base_url: &str, request: &ChatRequest) -> ProviderKind {
    match api {
        OpenAiApi::Chat => ProviderKind::OpenAi,
        OpenAiApi::Responses => ProviderKind::OpenAiResponses,
        OpenAiApi::Auto if is_openai_api(base_url) && needs_responses(model, request) => ProviderKind::OpenAiResponses,
        OpenAiApi::Auto => ProviderKind::OpenAi,
    }
}

fn needs_responses(model: &str, request: &ChatRequest) -> bool {
    let id = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    if RESPONSES_ONLY.iter().any(|family| id.contains(family)) || id.ends_with("-pro") || id.contains("-pro-") {
        return true;
    }
    let tools = request.tools.as_ref().is_some_and(|tools| !tools.is_empty());
    let effort = request.params.get("reasoning_effort").is_some_and(|effort| effort.as_str() != Some("none") && !effort.is_null());
    tools && effort && family_version(&id, "gpt-").is_some_and(|version| version >= (5, 2))
}

/// Reasoning models, which take `reasoning` and return encrypted reasoning items; other
/// models reject both, so they are sent only here or when an effort is asked for.
fn is_reasoning_model(model: &str) -> bool {
    let id = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    let family = ["o1", "o3", "o4", "gpt-5", "gpt-6", "codex"].iter().any(|prefix| id.starts_with(prefix)) && !id.contains("-chat");
    family || RESPONSES_ONLY.iter().any(|family| id.contains(family))
}

/// The exact JSON body sent, a pure function of its inputs (hash it with
/// [`super::canonical_json`]).
fn build_body(request: &ChatRequest, endpoint: &Endpoint) -> Value {
    let mut body = Map::new();
    let mut effort = None;
    for (key, value) in &request.params {
        match key.as_str() {
            MAX_TOKENS_FIELD | REASONING_TAG => {}
            "max_tokens" => {
                body.insert("max_output_tokens".into(), value.clone());
            }
            "reasoning_effort" => effort = Some(value.clone()),
            other => {
                body.insert(other.to_owned(), value.clone());
            }
        }
    }
    body.insert("model".into(), Value::String(endpoint.model.clone()));
    if let Some(system) = &request.system {
        body.insert("instructions".into(), Value::String(system.clone()));
    }
    body.insert("input".into(), Value::Array(input_items(request)));
    body.insert("store".into(), Value::Bool(false));
    if effort.is_some() || is_reasoning_model(&endpoint.model) {
        let mut reasoning = Map::new();
        if let Some(effort) = effort {
            reasoning.insert("effort".into(), effort);
        }
        reasoning.insert("summary".into(), json!("auto"));
        body.insert("reasoning".into(), Value::Object(reasoning));
        body.insert("include".into(), json!(["reasoning.encrypted_content"]));
    }
    if request.json_mode {
        body.insert("text".into(), json!({"format": {"type": "json_object"}}));
    }
    if let Some(tools) = &request.tools {
        let tools = tool_objects(tools, "parameters")
            .into_iter()
            .map(|mut tool| {
                if let Value::Object(map) = &mut tool {
                    map.insert("type".into(), json!("function"));
                }
                tool
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    Value::Object(body)
}

/// Turns as input items: each turn's own items first (verbatim), then its text as a
/// message, unless the items already hold the assistant's `message` or the text is empty.
/// An assistant's text is replayed as the API documents an earlier output: a `message` item
/// with an `output_text` part. The short form without `type` is for user input only, and
/// servers that follow the schema strictly (llama.cpp: "Cannot determine type of 'item'")
/// refuse it for an assistant turn.
fn input_items(request: &ChatRequest) -> Vec<Value> {
    let mut input = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        input.extend(message.items.iter().cloned());
        let replayed_message = message.items.iter().any(|item| item.get("type").and_then(Value::as_str) == Some("message"));
        if message.items.is_empty() || (!replayed_message && (!message.content.is_empty() || !message.images.is_empty())) {
            input.push(match message.role {
                Role::User if !message.images.is_empty() => {
                    let text = (!message.content.is_empty()).then(|| json!({"type": "input_text", "text": message.content}));
                    let images = message.images.iter().map(|image| json!({"type": "input_image", "image_url": image.data_url()}));
                    json!({"role": "user", "content": text.into_iter().chain(images).collect::<Vec<_>>()})
                }
                Role::User => json!({"role": "user", "content": message.content}),
                Role::Assistant => json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": message.content}]}),
            });
        }
    }
    input
}

/// Parses a response into an answer or a classified error: text from `output_text`
/// parts, tool calls from `function_call` items (`call_id` as the id), reasoning from
/// the reasoning items' summaries, the outcome from `status` and `incomplete_details`.
///
/// # Errors
/// Any [`CallError`] class; a `queued`/`in_progress` response (background mode, which
/// is polled until done before it is parsed) is a protocol error.
fn parse_answer(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<ChatResponse, CallError> {
    let json = success_json(status, headers, body)?;
    let output = json.get("output").and_then(Value::as_array).ok_or_else(|| CallError::Protocol { detail: "response has no `output` array".into() })?;
    let state = text(&json, "/status");
    if matches!(state.as_str(), "queued" | "in_progress") {
        return Err(CallError::Protocol { detail: format!("response is `{state}` (a background response is parsed once done)") });
    }
    let (mut answer, mut summaries, mut refusal, mut calls) = (String::new(), Vec::new(), None::<String>, Vec::new());
    for item in output {
        match item.get("type").and_then(Value::as_str).unwrap_or_default() {
            "message" => {
                for part in item.get("content").and_then(Value::as_array).into_iter().flatten() {
                    match part.get("type").and_then(Value::as_str).unwrap_or_default() {
                        "output_text" => answer.push_str(part.get("text").and_then(Value::as_str).unwrap_or_default()),
                        "refusal" => refusal.get_or_insert_with(String::new).push_str(part.get("refusal").and_then(Value::as_str).unwrap_or_default()),
                        _ => {}
                    }
                }
            }
            "function_call" => calls.push(ToolCall {
                id: text(item, "/call_id"),
                name: text(item, "/name"),
                arguments: item.get("arguments").map_or(Value::Null, parse_arguments),
            }),
            "reasoning" => {
                let summary: Vec<&str> =
                    item.get("summary").and_then(Value::as_array).into_iter().flatten().filter_map(|s| s.get("text").and_then(Value::as_str)).collect();
                // Open-weight servers return the reasoning itself as `content` parts instead.
                let parts = if summary.is_empty() {
                    item.get("content").and_then(Value::as_array).into_iter().flatten().filter_map(|s| s.get("text").and_then(Value::as_str)).collect()
                } else {
                    summary
                };
                summaries.extend(parts.into_iter().filter(|text| !text.is_empty()).map(str::to_owned));
            }
            _ => {}
        }
    }
    let finish_reason = match (state.as_str(), text(&json, "/incomplete_details/reason").as_str()) {
        ("incomplete", "max_output_tokens") => FinishReason::Length,
        ("incomplete", "content_filter") => FinishReason::ContentFilter,
        ("incomplete", other) => FinishReason::Other(if other.is_empty() { "incomplete".into() } else { other.to_owned() }),
        _ if !calls.is_empty() => FinishReason::ToolCalls,
        ("completed" | "", _) => FinishReason::Stop,
        (other, _) => FinishReason::Other(other.to_owned()),
    };
    let response = ChatResponse {
        text: answer,
        reasoning: (!summaries.is_empty()).then(|| summaries.join("\n\n")),
        tool_calls: calls,
        usage: Usage {
            input: count(&json, "/usage/input_tokens"),
            output: count(&json, "/usage/output_tokens"),
            reasoning: count(&json, "/usage/output_tokens_details/reasoning_tokens"),
            cached: count(&json, "/usage/input_tokens_details/cached_tokens"),
            cost: json.pointer("/usage/cost").and_then(Value::as_f64),
        },
        answered_model: text(&json, "/model"),
        finish_reason,
        latency_ms: 0,
        refusal: None,
        usage_reported: true,
        items: output.clone(),
        paid: None,
        logprobs: Vec::new(),
    };
    let response = settle(response, json.get("usage").is_some_and(Value::is_object));
    match refusal {
        Some(message) => Ok(refused(response, &message)),
        None => Ok(response),
    }
}

/// OpenAI Responses (`/v1/responses`).
#[derive(Debug, Clone, Copy)]
pub struct Responses;

impl Protocol for Responses {
    fn default_base_url(&self) -> &'static str {
        "https://api.openai.com"
    }

    /// `base_url` as given plus `/responses` (a bare origin gets `/v1`).
    fn url(&self, base_url: &str, _model: &str) -> String {
        endpoint_url(base_url, "/v1", "/responses")
    }

    /// The URL the pre-issue-13 joining rule would give, so fingerprints name the URL only
    /// where the two rules differ (as for Chat Completions).
    fn legacy_url(&self, base_url: &str, _model: &str) -> String {
        join_url(base_url, "/v1", "/responses")
    }

    fn headers(&self, api_key: Option<&Secret>) -> Result<HeaderMap, CallError> {
        bearer_headers(api_key)
    }

    fn build_body(&self, request: &ChatRequest, endpoint: &Endpoint) -> Value {
        build_body(request, endpoint)
    }

    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], _shaping: &Shaping) -> Result<ChatResponse, CallError> {
        parse_answer(status, headers, body)
    }

    /// A leading reasoning block in the text is moved to `reasoning` ([`Shaping::reasoning_tag`]).
    fn settle(&self, response: ChatResponse, shaping: &Shaping) -> ChatResponse {
        split_by_tag(response, shaping)
    }

    fn output_cap_fields(&self) -> &'static [&'static str] {
        &["/max_output_tokens"]
    }

    fn switch_on_stream(&self, body: &mut Map<String, Value>) {
        body.insert("stream".into(), serde_json::json!(true));
    }

    fn polls_in_background(&self) -> bool {
        true
    }

    fn batch_kind(&self) -> Option<super::batch::BatchKind> {
        Some(super::batch::BatchKind::OpenAi("/responses"))
    }

    fn stream_fold(&self) -> Box<dyn Fold> {
        fold_responses()
    }
}

#[cfg(test)]
mod tests {
    use super::super::client::{request_body, request_fingerprint, request_url};
    use super::super::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};
    use super::super::testing::{mock_endpoint, quick_client};
    use super::super::types::{Message, ToolSpec, canonical_json};
    use super::*;

    /// Parsed and settled, as the transport reads an answer.
    fn parse_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<ChatResponse, CallError> {
        let shaping = Shaping::default();
        Responses.parse(status, headers, body, &shaping).map(|response| Responses.settle(response, &shaping))
    }

    fn parse(body: &Value) -> ChatResponse {
        parse_response(StatusCode::OK, &HeaderMap::new(), body.to_string().as_bytes()).unwrap()
    }

    fn usage(input: u64, cached: u64, output: u64, reasoning: u64) -> Value {
        json!({"input_tokens": input, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": output,
            "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": input + output})
    }

    fn response(status: &str, incomplete: Value, output: Value) -> Value {
        json!({"id": "resp_1", "object": "response", "created_at": 1_741_476_542, "status": status, "error": null,
            "incomplete_details": incomplete, "model": "gpt-5.2-2025-12-11", "output": output, "usage": usage(36, 12, 87, 64)})
    }

    #[test]
    fn recorded_shapes_parse_to_text_reasoning_calls_outcome_and_usage() {
        let message = |parts: Value| json!({"type": "message", "id": "msg_1", "status": "completed", "role": "assistant", "content": parts});
        let text = message(json!([{"type": "output_text", "text": "Paris.", "annotations": []}]));
        let reasoning = json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAAAB-opaque",
            "summary": [{"type": "summary_text", "text": "**Capital**"}, {"type": "summary_text", "text": "France's capital is Paris."}]});

        let normal = parse(&response("completed", Value::Null, json!([text])));
        assert_eq!((normal.text.as_str(), normal.finish_reason.class(), normal.reasoning.as_deref()), ("Paris.", "stop", None));
        assert_eq!(normal.usage, Usage { input: 36, output: 87, reasoning: 64, cached: 12, cost: None });
        assert_eq!(normal.answered_model, "gpt-5.2-2025-12-11");

        let thought = parse(&response("completed", Value::Null, json!([reasoning, text])));
        assert_eq!(thought.reasoning.as_deref(), Some("**Capital**\n\nFrance's capital is Paris."));
        assert_eq!(thought.items.len(), 2, "every output item is kept for the next turn");
        assert_eq!(thought.items[0]["encrypted_content"], "gAAAAB-opaque");

        let call = json!({"type": "function_call", "id": "fc_1", "call_id": "call_abc", "name": "get_weather",
            "arguments": "{\"location\":\"Paris\"}", "status": "completed"});
        let called = parse(&response("completed", Value::Null, json!([reasoning, call])));
        assert_eq!(called.finish_reason, FinishReason::ToolCalls);
        assert_eq!(called.tool_calls, vec![ToolCall { id: "call_abc".into(), name: "get_weather".into(), arguments: json!({"location": "Paris"}) }]);
        assert_eq!(called.text, "");

        let cut = parse(&response("incomplete", json!({"reason": "max_output_tokens"}), json!([reasoning])));
        assert_eq!((cut.text.as_str(), cut.finish_reason.class()), ("", "length"));
        let partial =
            parse(&response("incomplete", json!({"reason": "max_output_tokens"}), json!([message(json!([{"type": "output_text", "text": "The an"}]))])));
        assert_eq!((partial.text.as_str(), partial.finish_reason.class()), ("The an", "length"));

        let filtered = parse(&response("incomplete", json!({"reason": "content_filter"}), json!([])));
        assert_eq!(filtered.finish_reason, FinishReason::ContentFilter);

        let declined = parse(&response("completed", Value::Null, json!([message(json!([{"type": "refusal", "refusal": "I can't help with that."}]))])));
        assert_eq!((declined.finish_reason.class(), declined.refusal.as_deref()), ("refusal", Some("I can't help with that.")));

        let no_usage = json!({"status": "completed", "model": "m", "output": [text]});
        assert!(!parse(&no_usage).usage_reported);
    }

    #[test]
    fn failed_background_and_malformed_bodies_are_errors() {
        let ok = StatusCode::OK;
        let failed = json!({"status": "failed", "error": {"code": "server_error", "message": "boom"}, "output": []}).to_string();
        assert_eq!(parse_response(ok, &HeaderMap::new(), failed.as_bytes()).unwrap_err().class(), "server");
        let queued = json!({"status": "queued", "error": null, "output": []}).to_string();
        assert_eq!(parse_response(ok, &HeaderMap::new(), queued.as_bytes()).unwrap_err().class(), "protocol");
        assert_eq!(parse_response(ok, &HeaderMap::new(), b"{}").unwrap_err().class(), "protocol");
        let broken = json!({"status": "completed", "model": "m", "usage": usage(1, 0, 1, 0),
            "output": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": "{\"a\":"}]});
        assert_eq!(parse(&broken).finish_reason, FinishReason::Malformed);
    }

    fn tool_request() -> ChatRequest {
        let mut params = Map::new();
        params.insert("max_tokens".into(), json!(4096));
        params.insert("reasoning_effort".into(), json!("medium"));
        params.insert("temperature".into(), json!(1.0));
        ChatRequest {
            messages: vec![Message::user("Is 59 > 58?")],
            system: Some("Use the tools.".into()),
            params,
            json_mode: false,
            tools: Some(vec![ToolSpec {
                name: "query".into(),
                description: "Query the black box.".into(),
                parameters: json!({"type": "object", "properties": {"inputs": {"type": "array"}}, "required": ["inputs"]}),
            }]),
        }
    }

    #[test]
    fn auto_routes_only_the_families_chat_completions_cannot_serve() {
        let plain = ChatRequest { messages: vec![Message::user("hi")], ..ChatRequest::default() };
        let tools = tool_request();
        let mut tools_no_effort = tools.clone();
        tools_no_effort.params.insert("reasoning_effort".into(), json!("none"));
        let openai = "https://api.openai.com";
        let auto = |model: &str, base: &str, request: &ChatRequest| route(OpenAiApi::Auto, model, base, request);
        for model in ["o3-pro", "o1-pro-2025-03-19", "gpt-5-pro", "gpt-5.2-pro-2025-12-11", "gpt-5.1-codex-max", "o3-deep-research", "codex-mini-latest"] {
            assert_eq!(auto(model, openai, &plain), ProviderKind::OpenAiResponses, "{model}");
        }
        for model in ["gpt-5.2", "gpt-5.4-mini", "gpt-5.6-2026-05-01", "gpt-6"] {
            assert_eq!(auto(model, openai, &tools), ProviderKind::OpenAiResponses, "{model}");
            assert_eq!(auto(model, openai, &plain), ProviderKind::OpenAi, "{model}: no tools");
            assert_eq!(auto(model, openai, &tools_no_effort), ProviderKind::OpenAi, "{model}: effort none");
        }
        for model in ["gpt-5", "gpt-5.1", "gpt-5-mini-2025-08-07", "gpt-4.1", "o3", "o4-mini"] {
            assert_eq!(auto(model, openai, &tools), ProviderKind::OpenAi, "{model}");
        }
        // Gateways and local servers keep Chat Completions under `auto`: they serve these ids there.
        assert_eq!(auto("openai/gpt-5-pro", "https://openrouter.ai/api/v1", &plain), ProviderKind::OpenAi);
        assert_eq!(auto("qwen-coder-pro", "http://127.0.0.1:8000/v1", &plain), ProviderKind::OpenAi);
        assert_eq!(route(OpenAiApi::Chat, "o3-pro", openai, &plain), ProviderKind::OpenAi);
        assert_eq!(route(OpenAiApi::Responses, "gpt-4.1", "http://127.0.0.1:8000/v1", &plain), ProviderKind::OpenAiResponses);
    }

    #[test]
    fn the_api_is_in_the_call_key_and_chat_keys_do_not_move() {
        let request = tool_request();
        let chat = Endpoint::new(ProviderKind::OpenAi, "gpt-5.2");
        let responses = Endpoint::new(ProviderKind::OpenAiResponses, "gpt-5.2");
        let (chat_key, responses_key) = (request_fingerprint(&chat, &request), request_fingerprint(&responses, &request));
        assert_ne!(canonical_json(&chat_key), canonical_json(&responses_key));
        assert_eq!(responses_key["kind"], "openai_responses");
        assert!(responses_key.get("url").is_none(), "the URL rule is the same as for chat");
        assert_eq!(request_url(&responses), "https://api.openai.com/v1/responses");
        assert_eq!(request_url(&responses.clone().with_base_url("http://h/api/v4")), "http://h/api/v4/responses");
        assert_eq!(canonical_json(&chat_key["body"]), canonical_json(&request_body(&chat, &request)), "chat bodies are unchanged");
    }

    #[test]
    fn turn_items_replay_before_text_and_plain_models_get_no_reasoning() {
        let answered = ChatResponse {
            items: vec![json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "e"}), json!({"type": "function_call", "call_id": "c1"})],
            ..parse(&response("completed", Value::Null, json!([])))
        };
        let mut request = tool_request();
        request.messages.push(Message::assistant_turn(&answered));
        request.messages.push(Message::tool_outputs([("c1", "[1]")], ""));
        request.messages.push(Message::assistant("plain"));
        let body = build_body(&request, &Endpoint::new(ProviderKind::OpenAiResponses, "gpt-5.2"));
        let types: Vec<&str> = body["input"].as_array().unwrap().iter().map(|i| i["type"].as_str().or(i["role"].as_str()).unwrap()).collect();
        assert_eq!(types, ["user", "reasoning", "function_call", "function_call_output", "message"]);
        // The assistant's text as the API documents an earlier output (issue 23).
        assert_eq!(body["input"][4], json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "plain"}]}));
        let plain = ChatRequest { messages: vec![Message::user("hi")], ..ChatRequest::default() };
        let body = build_body(&plain, &Endpoint::new(ProviderKind::OpenAiResponses, "gpt-4.1"));
        assert_eq!(body, json!({"model": "gpt-4.1", "input": [{"role": "user", "content": "hi"}], "store": false}));
    }

    #[tokio::test]
    async fn reasoning_items_are_carried_into_the_next_tool_round() {
        let script = Script::Sequence(vec![
            MockOutcome::Reply(MockReply {
                reasoning: Some("query 59 first".into()),
                tool_calls: vec![ToolCall { id: "call_7".into(), name: "query".into(), arguments: json!({"inputs": [59]}) }],
                ..MockReply::text("").with_finish_reason(FinishReason::ToolCalls)
            }),
            MockOutcome::Reply(MockReply::text("x > 58")),
        ]);
        let server = MockServer::start(MockConfig { script, ..MockConfig::default() }).await.unwrap();
        let endpoint = mock_endpoint(&server, ProviderKind::OpenAiResponses, "gpt-5.2");
        let client = quick_client();
        let mut request = tool_request();
        let first = client.call(&endpoint, &request).await.unwrap().response;
        assert_eq!((first.finish_reason.class(), first.reasoning.as_deref()), ("tool_calls", Some("query 59 first")));
        assert_eq!(first.tool_calls[0].id, "call_7");
        request.messages.push(Message::assistant_turn(&first));
        request.messages.push(Message::tool_outputs([(first.tool_calls[0].id.as_str(), "[1]")], ""));
        let second = client.call(&endpoint, &request).await.unwrap();
        assert_eq!(second.response.text, "x > 58");
        let log = server.request_log();
        assert_eq!(log[0].path, "/v1/responses");
        assert_eq!(log[0].body["include"], json!(["reasoning.encrypted_content"]));
        let input = log[1].body["input"].as_array().unwrap();
        assert_eq!(input.len(), 4, "{input:?}");
        assert_eq!((input[1]["type"].as_str(), input[1]["encrypted_content"].as_str()), (Some("reasoning"), Some("mock-encrypted-0")));
        assert_eq!((input[2]["type"].as_str(), input[2]["call_id"].as_str()), (Some("function_call"), Some("call_7")));
        assert_eq!((input[3]["type"].as_str(), input[3]["output"].as_str()), (Some("function_call_output"), Some("[1]")));
        // The same conversation builds the same body: the call replays from the cache.
        assert_eq!(canonical_json(&second.request_body), canonical_json(&build_body(&request, &endpoint)));
        server.shutdown().await;
    }
}
