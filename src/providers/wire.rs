//! Small helpers shared by the three protocol modules: URL joining, auth headers, JSON
//! field access and the final "is this a usable answer" check.
//!
//! Kept separate so each protocol file reads as just its wire format.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::error::CallError;
use super::types::{ChatResponse, FinishReason, Secret, ToolSpec};

/// The request URL: a base URL with a path is used as given and only `rest` is appended
/// (`https://api.z.ai/api/paas/v4` + `/chat/completions`), before any query string (Azure's
/// `?api-version=`); a bare origin gets the protocol's `version` path first, as the public
/// APIs need (`https://api.openai.com` → `…/v1/chat/completions`).
pub(super) fn endpoint_url(base: &str, version: &str, rest: &str) -> String {
    let Some(mut url) = super::base_url::parsed(base) else {
        return join_url(base, version, rest);
    };
    let path = url.path().trim_end_matches('/').to_owned();
    if path.is_empty() {
        url.set_path(&format!("{version}{rest}"));
    } else {
        url.set_path(&format!("{path}{rest}"));
    }
    url.to_string()
}

/// The URL evalgrid built before issue 13 (`version` forced in unless the base ended with
/// it); cache keys name the URL only where the two differ, so no existing key changes.
pub(super) fn join_url(base: &str, version: &str, rest: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(version) { format!("{base}{rest}") } else { format!("{base}{version}{rest}") }
}

/// Builds one sensitive header (hidden from hyper/reqwest debug output). The error never
/// includes the value, only the header name.
pub(super) fn secret_header(headers: &mut HeaderMap, name: &'static str, prefix: &str, key: &Secret) -> Result<(), CallError> {
    let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.expose()))
        .map_err(|_| CallError::Config { detail: format!("API key contains bytes not allowed in the `{name}` header") })?;
    value.set_sensitive(true);
    headers.insert(HeaderName::from_static(name), value);
    Ok(())
}

/// `Authorization: Bearer <key>` (marked sensitive); none without a key. Shared by the
/// protocols that authenticate with a bearer token (both OpenAI APIs).
pub(super) fn bearer_headers(api_key: Option<&Secret>) -> Result<HeaderMap, CallError> {
    let mut headers = HeaderMap::new();
    if let Some(key) = api_key {
        secret_header(&mut headers, "authorization", "Bearer ", key)?;
    }
    Ok(headers)
}

/// A token count at a JSON pointer, 0 when absent (providers omit fields freely).
pub(super) fn count(json: &Value, pointer: &str) -> u64 {
    json.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A string at a JSON pointer, empty when absent or not a string.
pub(super) fn text(json: &Value, pointer: &str) -> String {
    json.pointer(pointer).and_then(Value::as_str).unwrap_or_default().to_owned()
}

/// Tool arguments sent as a JSON string: parsed when valid, kept as a string otherwise so a
/// malformed call is visible to the scorer instead of an error.
pub(super) fn parse_arguments(raw: &Value) -> Value {
    match raw {
        Value::String(text) => serde_json::from_str(text).unwrap_or_else(|_| raw.clone()),
        other => other.clone(),
    }
}

/// Tool specs in the common `{name, description, <schema_key>: schema}` shape.
pub(super) fn tool_objects(tools: &[ToolSpec], schema_key: &str) -> Vec<Value> {
    tools
        .iter()
        .map(|tool| {
            let mut object = Map::new();
            object.insert("name".into(), Value::String(tool.name.clone()));
            object.insert("description".into(), Value::String(tool.description.clone()));
            object.insert(schema_key.into(), tool.parameters.clone());
            Value::Object(object)
        })
        .collect()
}

/// Settles what the model did (lessons §7, issue 12): an empty, filtered or refused
/// answer is an outcome with its `finish_reason`, never an error; a tool call whose
/// arguments did not parse marks the answer `malformed`; no usage object is recorded.
pub(super) fn settle(mut response: ChatResponse, usage_present: bool) -> ChatResponse {
    response.usage_reported = usage_present;
    let broken_call = response.tool_calls.iter().any(|call| matches!(call.arguments, Value::String(_)));
    if broken_call && matches!(response.finish_reason, FinishReason::Stop | FinishReason::ToolCalls) {
        response.finish_reason = FinishReason::Malformed;
    }
    response
}

/// Marks `response` as refused with the provider's message, kept whole: the client
/// redacts the key from it like from any answer text.
pub(super) fn refused(mut response: ChatResponse, message: &str) -> ChatResponse {
    response.finish_reason = FinishReason::Refusal;
    response.refusal = Some(message.to_owned());
    response
}

#[cfg(test)]
mod tests {
    use super::super::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};
    use super::super::testing::{KINDS, ask, mock_endpoint, quick_client};
    use super::super::types::ProviderKind;
    use super::*;

    #[test]
    fn endpoint_url_uses_a_base_path_as_given() {
        for (base, url) in [
            ("http://h", "http://h/v1/messages"),
            ("http://h/", "http://h/v1/messages"),
            ("http://h/v1", "http://h/v1/messages"),
            ("http://h/v1/", "http://h/v1/messages"),
            ("https://api.z.ai/api/paas/v4", "https://api.z.ai/api/paas/v4/messages"),
            ("https://g.example/v1beta/openai/", "https://g.example/v1beta/openai/messages"),
            (
                "https://r.openai.azure.com/openai/deployments/d?api-version=2024-10-21",
                "https://r.openai.azure.com/openai/deployments/d/messages?api-version=2024-10-21",
            ),
        ] {
            assert_eq!(endpoint_url(base, "/v1", "/messages"), url, "{base}");
        }
        assert_eq!(endpoint_url("not a url", "/v1", "/m"), "not a url/v1/m");
    }

    #[test]
    fn join_url_variants() {
        for base in ["http://h", "http://h/", "http://h/v1", "http://h/v1/"] {
            assert_eq!(join_url(base, "/v1", "/messages"), "http://h/v1/messages");
        }
    }

    #[test]
    fn header_error_hides_key() {
        let mut headers = HeaderMap::new();
        let error = secret_header(&mut headers, "x-api-key", "", &Secret::new("bad\nkey-123")).unwrap_err();
        assert!(!error.to_string().contains("key-123"));
        secret_header(&mut headers, "authorization", "Bearer ", &Secret::new("sk-1")).unwrap();
        assert!(!format!("{headers:?}").contains("sk-1"), "sensitive headers are masked in Debug");
    }

    #[tokio::test]
    async fn empty_refused_filtered_and_truncated_answers_are_outcomes_on_every_protocol() {
        let script = Script::Sequence(vec![
            MockOutcome::Reply(MockReply::text("")),
            MockOutcome::Reply(MockReply::text("The an").with_finish_reason(FinishReason::Length)),
            MockOutcome::Reply(MockReply::refusal()),
            MockOutcome::Reply(MockReply::declined()),
        ]);
        for kind in KINDS {
            let server = MockServer::start(MockConfig { script: script.clone(), ..MockConfig::default() }).await.unwrap();
            let endpoint = mock_endpoint(&server, kind, "m");
            let client = quick_client();
            let first = client.call_recorded(&endpoint, &ask("x")).await;
            assert_eq!(first.attempts, 1, "an empty answer is not retried");
            let first = first.result.unwrap();
            assert_eq!((first.text.as_str(), first.finish_reason.class()), ("", "stop"), "{kind}");
            let cut = client.call(&endpoint, &ask("x")).await.unwrap().response;
            assert_eq!((cut.text.as_str(), cut.finish_reason.class()), ("The an", "length"), "{kind}");
            let filtered = client.call(&endpoint, &ask("x")).await.unwrap().response;
            let declined = client.call(&endpoint, &ask("x")).await.unwrap().response;
            // Anthropic has one `refusal` stop reason for both; Gemini one `SAFETY`.
            let expected = match kind {
                ProviderKind::OpenAi | ProviderKind::OpenAiResponses | ProviderKind::OpenAiCompletions => ("content_filter", "refusal"),
                ProviderKind::Anthropic => ("refusal", "refusal"),
                ProviderKind::Gemini => ("content_filter", "content_filter"),
            };
            assert_eq!((filtered.finish_reason.class(), declined.finish_reason.class()), expected, "{kind}");
            assert_eq!(server.calls(), 4, "{kind}: each outcome is one request");
        }
    }
}
