//! Recognising a server's refusal of a prompt that does not fit the model's context window.
//!
//! Such a refusal is not a transport error: the model could not read the question, which is a
//! property of the model (as a truncated answer is), the same on every retry. It becomes the
//! finish class `context_exceeded`, cached as the model's answer and scored by each benchmark.
//! Every server says it with an HTTP 4xx in its own words; the shapes recognised here are the
//! ones each documents or was seen sending (`../shared/specs/realserver.md`):
//!
//! | server | shape |
//! |---|---|
//! | OpenAI, Azure OpenAI (Chat Completions, Responses) | `error.code = "context_length_exceeded"`; "This model's maximum context length is …" |
//! | Anthropic | `invalid_request_error`, "prompt is too long: N tokens > M maximum"; "input length and `max_tokens` exceed context limit" |
//! | Gemini | `INVALID_ARGUMENT`, "The input token count (N) exceeds the maximum number of tokens allowed (M)" |
//! | vLLM, OpenRouter | "This model's / This endpoint's maximum context length is N tokens" |
//! | SGLang | "The input (N tokens) is longer than the model's context length (M tokens)"; "… exceeds the model's maximum context length …" |
//! | llama.cpp server | `error.type = "exceed_context_size_error"`, "request (N tokens) exceeds the available context size (M tokens)" |
//! | Ollama | "input length exceeds the context length"; "prompt too long" |
//! | Hugging Face TGI | "Input validation error: `inputs` tokens + `max_new_tokens` must be <= N" |
//! | LiteLLM proxy (in front of any of them) | `litellm.ContextWindowExceededError` |

use serde_json::Value;

/// Machine-readable markers (an error's `code` or `type`, lowercased) of a context overflow.
const CODES: [&str; 4] = ["context_length_exceeded", "exceed_context_size_error", "contextwindowexceedederror", "context_window_exceeded"];

/// Phrases (lowercased) of the messages that say the prompt is longer than the context.
const PHRASES: [&str; 14] = [
    "context_length_exceeded",
    "maximum context length",
    "exceeds the available context size",
    "exceeds the context size",
    "contextwindowexceedederror",
    "prompt is too long",
    "exceed context limit",
    "exceeds the maximum number of tokens allowed",
    "longer than the model's context length",
    "exceeds the context window",
    "exceeds the context length",
    "exceeds maximum context length",
    "prompt too long",
    "must be <= ",
];

/// Whether an HTTP `status` with error `body` (any of the shapes above) refuses the prompt as
/// longer than the model's context. Only client errors qualify: a 5xx is the server's trouble.
#[must_use]
pub fn is_context_overflow(status: u16, body: &[u8]) -> bool {
    if !matches!(status, 400 | 413 | 422) {
        return false;
    }
    let json = serde_json::from_slice::<Value>(body).ok();
    if json.as_ref().is_some_and(has_code) {
        return true;
    }
    let text = json.as_ref().and_then(message).unwrap_or_else(|| String::from_utf8_lossy(body).into_owned()).to_lowercase();
    says_overflow(&text)
}

/// Whether an error message (lowercased) says the prompt does not fit the context. TGI's
/// "must be <= N" counts only beside its `inputs` token wording, so that a bad parameter
/// ("temperature must be <= 2") is never taken for a long prompt.
fn says_overflow(text: &str) -> bool {
    PHRASES.iter().any(|phrase| text.contains(phrase) && (*phrase != "must be <= " || (text.contains("`inputs`") && text.contains("tokens"))))
}

/// An error object's `code`/`type` (or a top-level one) naming a context overflow.
fn has_code(json: &Value) -> bool {
    let error = json.get("error").filter(|e| e.is_object()).unwrap_or(json);
    ["code", "type"].iter().filter_map(|key| error.get(*key)?.as_str()).any(|value| CODES.contains(&value.to_lowercase().as_str()))
}

/// The message of an error body: `error.message`, `error` as a string, or a top-level `message`
/// (vLLM's and SGLang's `{"object": "error", "message": …}`).
fn message(json: &Value) -> Option<String> {
    match json.get("error") {
        Some(Value::String(text)) => Some(text.clone()),
        Some(error @ Value::Object(_)) => error.get("message").and_then(Value::as_str).map(str::to_owned),
        _ => json.get("message").and_then(Value::as_str).map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bodies as each server documents or was seen sending them.
    const OVERFLOWS: [(&str, u16, &str); 13] = [
        (
            "openai chat",
            400,
            r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#,
        ),
        (
            "openai responses",
            400,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#,
        ),
        ("anthropic", 400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208154 tokens > 200000 maximum"}}"#),
        (
            "anthropic input + max_tokens",
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again"}}"#,
        ),
        (
            "gemini",
            400,
            r#"{"error":{"code":400,"message":"The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).","status":"INVALID_ARGUMENT"}}"#,
        ),
        (
            "vllm",
            400,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4900 in the messages, 100 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        ),
        (
            "sglang",
            400,
            r#"{"object":"error","message":"The input (5000 tokens) is longer than the model's context length (4096 tokens).","type":"BadRequestError","param":null,"code":400}"#,
        ),
        (
            "llama.cpp",
            400,
            r#"{"error":{"code":400,"message":"request (3031 tokens) exceeds the available context size (1024 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":3031,"n_ctx":1024}}"#,
        ),
        ("ollama", 400, r#"{"error":{"message":"the input length exceeds the context length","type":"api_error","param":null,"code":null}}"#),
        (
            "openrouter",
            400,
            r#"{"error":{"message":"This endpoint's maximum context length is 8192 tokens. However, you requested about 10000 tokens (9000 of text input, 1000 in the output). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.","code":400}}"#,
        ),
        (
            "tgi",
            422,
            r#"{"error":"Input validation error: `inputs` tokens + `max_new_tokens` must be <= 4096. Given: 5000 `inputs` tokens and 100 `max_new_tokens`","error_type":"validation"}"#,
        ),
        (
            "litellm",
            400,
            r#"{"error":{"message":"litellm.ContextWindowExceededError: litellm.BadRequestError: ContextWindowExceededError: OpenAIException - request (3031 tokens) exceeds the available context size (1024 tokens), try increasing it\nmodel=smollm2.","type":"invalid_request_error","param":null,"code":"400"}}"#,
        ),
        ("plain text", 413, "prompt too long; exceeded max context length by 12 tokens"),
    ];

    #[test]
    fn every_documented_overflow_is_recognised() {
        for (server, status, body) in OVERFLOWS {
            assert!(is_context_overflow(status, body.as_bytes()), "{server}: {body}");
        }
    }

    #[test]
    fn other_client_errors_and_server_errors_are_not_overflows() {
        let others = [
            (400, r#"{"error":{"message":"temperature must be <= 2","type":"invalid_request_error","code":"invalid_value"}}"#),
            (400, r#"{"error":{"message":"max_tokens is too large: 50000. This model supports at most 16384 completion tokens.","code":"invalid_value"}}"#),
            (404, r#"{"error":{"message":"The model `gpt-9` does not exist","code":"model_not_found"}}"#),
            (400, r#"{"type":"error","error":{"type":"invalid_request_error","message":"messages: roles must alternate"}}"#),
            (401, r#"{"error":{"message":"Incorrect API key provided","code":"invalid_api_key"}}"#),
            // The same words from a server in trouble are its trouble, retried as such.
            (500, r#"{"error":{"message":"This model's maximum context length is 4096 tokens","code":"context_length_exceeded"}}"#),
        ];
        for (status, body) in others {
            assert!(!is_context_overflow(status, body.as_bytes()), "{status} {body}");
        }
    }
}

#[cfg(test)]
mod over_http {
    use super::super::limiter::ConcurrencyMode;
    use super::super::mock::{MockConfig, MockServer};
    use super::super::retry::RetryPolicy;
    use super::super::stream::StreamMode;
    use super::super::testing::{KINDS, ask, client_with, mock_endpoint};
    use super::super::types::FinishReason;

    /// Every protocol, streamed or not: the mock's refusal of a long prompt (each API's
    /// documented shape) is an answer with finish class `context_exceeded`, sent once, with no
    /// text and no tokens; a prompt that fits is answered as usual.
    #[tokio::test]
    async fn an_overflow_is_the_models_answer_on_every_protocol_and_is_not_retried() {
        let server = MockServer::start(MockConfig { context_window: Some(200), ..MockConfig::default() }).await.unwrap();
        let client = client_with(RetryPolicy::default(), ConcurrencyMode::default());
        let long = "word ".repeat(400);
        for kind in KINDS {
            for stream in [StreamMode::Off, StreamMode::On] {
                let endpoint = super::super::types::Endpoint { stream, ..mock_endpoint(&server, kind, "m") };
                let before = server.calls();
                let record = client.call_recorded(&endpoint, &ask(&long)).await;
                let response = record.result.unwrap_or_else(|e| panic!("{kind} {stream:?}: {e}"));
                assert_eq!(response.finish_reason, FinishReason::ContextExceeded, "{kind} {stream:?}");
                assert!(response.text.is_empty() && response.usage.input == 0 && response.usage.output == 0, "{kind}: {response:?}");
                assert!(response.refusal.as_deref().is_some_and(|m| m.contains("200")), "the server's words are kept: {response:?}");
                assert_eq!((record.attempts, server.calls() - before), (1, 1), "{kind} {stream:?}: not retried");
                let fits = client.call_recorded(&endpoint, &ask("hi")).await.result.unwrap();
                assert_ne!(fits.finish_reason, FinishReason::ContextExceeded, "{kind}");
            }
        }
    }
}
