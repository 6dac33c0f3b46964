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
//! rounds statelessly. Background mode and streaming are not implemented.
//!
//! [`Message::items`]: super::Message::items

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::error::{CallError, success_json};
use super::families::family_version;
use super::openai::{MAX_TOKENS_FIELD, REASONING_TAG, Shaping, split_reasoning};
use super::types::{ChatRequest, ChatResponse, Endpoint, FinishReason, OpenAiApi, ProviderKind, Role, ToolCall, Usage};
use super::wire::{count, endpoint_url, join_url, parse_arguments, refused, settle, text, tool_objects};

/// The request URL: `base_url` as given plus `/responses` (a bare origin gets `/v1`).
#[must_use]
pub fn url(base_url: &str, _model: &str) -> String {
    endpoint_url(base_url, "/v1", "/responses")
}

/// The URL the pre-issue-13 joining rule would give, so fingerprints name the URL only
/// where the two rules differ (as for Chat Completions).
#[must_use]
pub fn legacy_url(base_url: &str, _model: &str) -> String {
    join_url(base_url, "/v1", "/responses")
}

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

fn is_openai_api(base_url: &str) -> bool {
    reqwest::Url::parse(base_url).ok().and_then(|url| url.host_str().map(str::to_ascii_lowercase)).as_deref() == Some("api.openai.com")
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
#[must_use]
pub fn build_body(request: &ChatRequest, endpoint: &Endpoint) -> Value {
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
fn input_items(request: &ChatRequest) -> Vec<Value> {
    let mut input = Vec::with_capacity(request.messages.len());
    for message in &request.messages {
        input.extend(message.items.iter().cloned());
        let role = match message.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        let replayed_message = message.items.iter().any(|item| item.get("type").and_then(Value::as_str) == Some("message"));
        if message.items.is_empty() || (!replayed_message && !message.content.is_empty()) {
            input.push(json!({"role": role, "content": message.content}));
        }
    }
    input
}

/// Parses a response (any status) with the default [`Shaping`].
///
/// # Errors
/// Any [`CallError`] class: HTTP failures, errors inside a 200, malformed bodies.
pub fn parse_response(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<ChatResponse, CallError> {
    parse_shaped(status, headers, body, &Shaping::default())
}

/// Parses a response into an answer or a classified error: text from `output_text`
/// parts, tool calls from `function_call` items (`call_id` as the id), reasoning from
/// the reasoning items' summaries, the outcome from `status` and `incomplete_details`.
///
/// # Errors
/// Any [`CallError`] class; a `queued`/`in_progress` response (background mode, which
/// evalgrid does not request) is a protocol error.
pub fn parse_shaped(status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, CallError> {
    let json = success_json(status, headers, body)?;
    let output = json.get("output").and_then(Value::as_array).ok_or_else(|| CallError::Protocol { detail: "response has no `output` array".into() })?;
    let state = text(&json, "/status");
    if matches!(state.as_str(), "queued" | "in_progress") {
        return Err(CallError::Protocol { detail: format!("response is `{state}` (background mode is not supported)") });
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
    };
    let mut response = settle(response, json.get("usage").is_some_and(Value::is_object));
    if let Some(tag) = &shaping.reasoning_tag {
        response = split_reasoning(response, tag);
    }
    match refusal {
        Some(message) => Ok(refused(response, &message)),
        None => Ok(response),
    }
}
