//! OpenAI completions wire format (`POST {base_url}/completions`; a bare origin gets `/v1`),
//! spoken only by calls that score a prompt (`method: loglikelihood`): the prompt is sent as
//! one text, echoed back with each of its tokens' log-probabilities (`echo: true`), which
//! vLLM, SGLang and llama-cpp-python serve and lm-eval's `gguf`/`local-completions` models
//! read. A call is routed here by its `echo: true` parameter ([`super::route::endpoint`]).
//!
//! The prompt is the request's system prompt and messages joined by blank lines, with no
//! chat template: what a base model is scored on. Everything else maps as on Chat
//! Completions (`max_tokens` and the rest pass through; errors, usage and finish reasons
//! read the same).

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use super::error::{CallError, success_json};
use super::protocol::Protocol;
use super::shaping::{MAX_TOKENS_FIELD, REASONING_TAG, Shaping};
use super::stream::{Fold, fold_chat};
use super::types::{ChatRequest, ChatResponse, Endpoint, Secret, Usage};
use super::wire::{bearer_headers, count, endpoint_url, join_url, settle, text};

/// The one text a completions call sends: the system prompt and each message's text,
/// joined by blank lines.
#[must_use]
pub fn prompt_text(request: &ChatRequest) -> String {
    request.system.iter().map(String::as_str).chain(request.messages.iter().map(|m| m.content.as_str())).collect::<Vec<_>>().join("\n\n")
}

fn build_body(request: &ChatRequest, endpoint: &Endpoint) -> Value {
    let mut body = Map::new();
    for (key, value) in &request.params {
        if key == MAX_TOKENS_FIELD || key == REASONING_TAG {
            continue;
        }
        body.insert(key.clone(), value.clone());
    }
    body.insert("model".into(), Value::String(endpoint.model.clone()));
    body.insert("prompt".into(), Value::String(prompt_text(request)));
    Value::Object(body)
}

fn parse(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<ChatResponse, CallError> {
    let json = success_json(status, headers, body)?;
    let choice = json.pointer("/choices/0").ok_or_else(|| CallError::Protocol { detail: "response has no `choices[0]`".into() })?;
    let finish = super::openai::finish_reason(choice.get("finish_reason").and_then(Value::as_str).unwrap_or_default());
    let response = ChatResponse {
        text: choice.get("text").and_then(Value::as_str).unwrap_or_default().to_owned(),
        reasoning: None,
        tool_calls: Vec::new(),
        usage: Usage {
            input: count(&json, "/usage/prompt_tokens"),
            output: count(&json, "/usage/completion_tokens"),
            reasoning: 0,
            cached: count(&json, "/usage/prompt_tokens_details/cached_tokens"),
            cost: json.pointer("/usage/cost").and_then(Value::as_f64),
        },
        answered_model: text(&json, "/model"),
        finish_reason: finish,
        latency_ms: 0,
        refusal: None,
        usage_reported: true,
        items: Vec::new(),
        paid: None,
        logprobs: super::logprobs::echo_tokens(&json),
    };
    Ok(settle(response, json.get("usage").is_some_and(Value::is_object)))
}

/// OpenAI completions with `echo` (`/v1/completions`).
#[derive(Debug, Clone, Copy)]
pub struct Completions;

impl Protocol for Completions {
    fn default_base_url(&self) -> &'static str {
        "https://api.openai.com"
    }

    /// `base_url` as given plus `/completions` (a bare origin gets `/v1`).
    fn url(&self, base_url: &str, _model: &str) -> String {
        endpoint_url(base_url, "/v1", "/completions")
    }

    fn legacy_url(&self, base_url: &str, _model: &str) -> String {
        join_url(base_url, "/v1", "/completions")
    }

    fn headers(&self, api_key: Option<&Secret>) -> Result<HeaderMap, CallError> {
        bearer_headers(api_key)
    }

    fn build_body(&self, request: &ChatRequest, endpoint: &Endpoint) -> Value {
        build_body(request, endpoint)
    }

    fn parse(&self, status: StatusCode, headers: &HeaderMap, body: &[u8], _shaping: &Shaping) -> Result<ChatResponse, CallError> {
        parse(status, headers, body)
    }

    fn output_cap_fields(&self) -> &'static [&'static str] {
        &["/max_tokens"]
    }

    fn scores_prompts(&self) -> bool {
        true
    }

    /// Never streamed in practice: a one-token call does not stream under `stream: auto`, and
    /// a task that reads log-probabilities refuses `stream: true` at `validate`.
    fn switch_on_stream(&self, body: &mut Map<String, Value>) {
        body.insert("stream".into(), Value::Bool(true));
    }

    fn stream_fold(&self) -> Box<dyn Fold> {
        fold_chat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::providers::types::{Message, ProviderKind};

    /// The body lm-eval's `gguf` model sends for `loglikelihood(context, continuation)`: the
    /// joined prompt, echo and one token.
    #[test]
    fn the_body_is_one_prompt_with_echo() {
        let request = ChatRequest {
            messages: vec![Message::user("Question: 2+2?\nAnswer: 4")],
            system: Some("Arithmetic.".into()),
            params: crate::providers::logprobs::loglikelihood_params(),
            ..ChatRequest::default()
        };
        let body = build_body(&request, &Endpoint::new(ProviderKind::OpenAiCompletions, "base-7b"));
        assert_eq!(
            body,
            serde_json::json!({"model": "base-7b", "prompt": "Arithmetic.\n\nQuestion: 2+2?\nAnswer: 4", "max_tokens": 1, "temperature": 0.0, "logprobs": 1, "echo": true})
        );
        assert_eq!(Completions.url("http://127.0.0.1:8000/v1", "m"), "http://127.0.0.1:8000/v1/completions");
    }

    #[test]
    fn an_error_body_is_classified_as_on_chat_completions() {
        let err =
            parse(StatusCode::BAD_REQUEST, &HeaderMap::new(), br#"{"error":{"message":"echo is not supported","type":"invalid_request_error"}}"#).unwrap_err();
        assert_eq!(err.class(), "bad_request");
    }
}
