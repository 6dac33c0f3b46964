//! Small helpers shared by the three protocol modules: URL joining, auth headers, JSON
//! field access and the final "is this a usable answer" check.
//!
//! Kept separate so each protocol file reads as just its wire format.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Map, Value};

use super::error::CallError;
use super::types::{ChatResponse, FinishReason, Secret, ToolSpec};

/// Joins `base` and `rest` under `version` (`/v1`, `/v1beta`), tolerating a base URL that
/// already ends with the version segment or a slash.
pub(super) fn join_url(base: &str, version: &str, rest: &str) -> String {
    let base = base.trim_end_matches('/');
    if base.ends_with(version) {
        format!("{base}{rest}")
    } else {
        format!("{base}{version}{rest}")
    }
}

/// Builds one sensitive header (hidden from hyper/reqwest debug output). The error never
/// includes the value, only the header name.
pub(super) fn secret_header(
    headers: &mut HeaderMap,
    name: &'static str,
    prefix: &str,
    key: &Secret,
) -> Result<(), CallError> {
    let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.expose())).map_err(|_| {
        CallError::Config {
            detail: format!("API key contains bytes not allowed in the `{name}` header"),
        }
    })?;
    value.set_sensitive(true);
    headers.insert(HeaderName::from_static(name), value);
    Ok(())
}

/// A token count at a JSON pointer, 0 when absent (providers omit fields freely).
pub(super) fn count(json: &Value, pointer: &str) -> u64 {
    json.pointer(pointer).and_then(Value::as_u64).unwrap_or(0)
}

/// A string at a JSON pointer, empty when absent or not a string.
pub(super) fn text(json: &Value, pointer: &str) -> String {
    json.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned()
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
            object.insert(
                "description".into(),
                Value::String(tool.description.clone()),
            );
            object.insert(schema_key.into(), tool.parameters.clone());
            Value::Object(object)
        })
        .collect()
}

/// Rejects answers that must never be scored: filtered or empty output (lessons §7).
pub(super) fn check_output(response: ChatResponse) -> Result<ChatResponse, CallError> {
    let empty = response.text.trim().is_empty() && response.tool_calls.is_empty();
    if empty && response.finish_reason == FinishReason::ContentFilter {
        return Err(CallError::Refusal {
            message: "output withheld by the provider's content filter".into(),
            usage: response.usage,
        });
    }
    if empty {
        return Err(CallError::EmptyOutput {
            finish_reason: response.finish_reason,
            usage: response.usage,
        });
    }
    Ok(response)
}

/// A refusal with provider text, kept whole: the client redacts, then truncates it.
pub(super) fn refusal(message: &str, response: &ChatResponse) -> CallError {
    CallError::Refusal {
        message: message.to_owned(),
        usage: response.usage,
    }
}

#[cfg(test)]
mod tests {
    use super::super::client::tests::{KINDS, ask, mock_endpoint, quick_client};
    use super::super::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};
    use super::*;

    #[test]
    fn join_url_variants() {
        for base in ["http://h", "http://h/", "http://h/v1", "http://h/v1/"] {
            assert_eq!(join_url(base, "/v1", "/messages"), "http://h/v1/messages");
        }
    }

    #[test]
    fn header_error_hides_key() {
        let mut headers = HeaderMap::new();
        let error =
            secret_header(&mut headers, "x-api-key", "", &Secret::new("bad\nkey-123")).unwrap_err();
        assert!(!error.to_string().contains("key-123"));
        secret_header(
            &mut headers,
            "authorization",
            "Bearer ",
            &Secret::new("sk-1"),
        )
        .unwrap();
        assert!(
            !format!("{headers:?}").contains("sk-1"),
            "sensitive headers are masked in Debug"
        );
    }

    #[tokio::test]
    async fn empty_output_and_refusal_are_errors() {
        let script = Script::Sequence(vec![
            MockOutcome::Reply(MockReply::text("")),
            MockOutcome::Reply(
                MockReply::text("   ")
                    .with_finish_reason(super::super::types::FinishReason::Length),
            ),
            MockOutcome::Reply(MockReply::refusal()),
        ]);
        for kind in KINDS {
            let server = MockServer::start(MockConfig {
                script: script.clone(),
                ..MockConfig::default()
            })
            .await
            .unwrap();
            let endpoint = mock_endpoint(&server, kind, "m");
            let client = quick_client();
            let first = client.call_recorded(&endpoint, &ask("x")).await;
            assert_eq!(first.result.unwrap_err().class(), "empty_output", "{kind}");
            assert_eq!(
                first.attempts, 1,
                "empty output is not retried in the transport"
            );
            let second = client.call(&endpoint, &ask("x")).await.unwrap_err();
            assert!(second.to_string().contains("length"), "{kind}: {second}");
            assert_eq!(
                client.call(&endpoint, &ask("x")).await.unwrap_err().class(),
                "refusal",
                "{kind}"
            );
        }
    }
}
