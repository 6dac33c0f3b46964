//! The one error type of a model call, and the HTTP/body classification shared by all
//! three protocols.
//!
//! Every failure is classified so the retry loop and the AIMD limiter know what to do, and
//! so the executor can record an error (never a scored answer, never a cache entry). Error
//! text comes from the provider's body at most; [`CallError::redact`] scrubs the API key
//! from the *whole* text and only then truncates it, before the error leaves the client,
//! so a key cut in two by the length bound cannot leave its prefix behind.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::headers::retry_after_from_headers;

/// Longest provider message kept in an error, so a huge HTML error page cannot flood logs.
const MAX_MESSAGE_CHARS: usize = 300;

/// What a secret is replaced with wherever provider text could carry it.
pub const REDACTED: &str = "[REDACTED]";

/// Why a model call produced no usable answer.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CallError {
    /// HTTP 429 (or a rate-limit error inside a 200); the limiter cuts concurrency.
    #[error("rate limited by the provider (retry after {retry_after:?})")]
    RateLimited {
        /// Server-requested wait, from `Retry-After`, `retry-after-ms` or the body.
        retry_after: Option<Duration>,
    },
    /// The provider says it is overloaded (Anthropic 529, Gemini 503, or inside a 200).
    #[error("provider overloaded (retry after {retry_after:?})")]
    Overloaded {
        /// Server-requested wait, if any.
        retry_after: Option<Duration>,
    },
    /// Any other 5xx.
    #[error("provider server error: HTTP {status}")]
    Server {
        /// HTTP status code.
        status: u16,
        /// Server-requested wait, if any.
        retry_after: Option<Duration>,
    },
    /// The request or the whole retry budget ran out of time.
    #[error("request timed out")]
    Timeout,
    /// A streamed response sent nothing for the inactivity timeout: a timeout of the
    /// attempt, retried like one, that a live stream (however long) never hits.
    #[error("the response stream stalled: no data for {idle:?} (transport.stream_idle_timeout_s)")]
    StreamStalled {
        /// The inactivity timeout that ran out.
        idle: Duration,
    },
    /// A streamed response sent no byte within the first-byte timeout: a timeout of the
    /// attempt, retried like one; the wait of a request queued behind busy slots, not a stall.
    #[error("the response stream sent nothing for {waited:?} after the request (transport.first_byte_timeout_s)")]
    FirstByteTimeout {
        /// The first-byte timeout that ran out.
        waited: Duration,
    },
    /// The connection could not be made or was reset before a response arrived.
    #[error("connection failed: {detail}")]
    Connect {
        /// Transport error chain (no URL, no headers).
        detail: String,
    },
    /// The response body outgrew `transport.max_response_bytes`; reading stopped at the cap,
    /// so a runaway reply costs neither memory nor cache space. Not retried, never cached.
    #[error("response body larger than the {limit}-byte cap (transport.max_response_bytes)")]
    ResponseTooLarge {
        /// The cap in bytes.
        limit: u64,
    },
    /// The response was truncated, not JSON, or not the expected shape.
    #[error("malformed provider response: {detail}")]
    Protocol {
        /// What was wrong.
        detail: String,
    },
    /// HTTP 429 that is not a rate limit but the account's quota or credit being used up
    /// (OpenAI `insufficient_quota`): waiting does not help, so it is not retried.
    #[error("quota exhausted: {message}")]
    Quota {
        /// Provider message; redacted, then truncated, by the time it leaves the client.
        message: String,
    },
    /// HTTP 401/403: the key is missing, wrong or lacks permission.
    #[error("authentication failed: HTTP {status}")]
    Auth {
        /// HTTP status code.
        status: u16,
    },
    /// Any other 4xx: the request itself is wrong (unknown model, bad parameter, too long).
    #[error("request rejected: HTTP {status}: {message}")]
    BadRequest {
        /// HTTP status code.
        status: u16,
        /// Provider message; redacted, then truncated, by the time it leaves the client.
        message: String,
    },
    /// A client error saying the prompt is longer than the model's context window (every
    /// server's wording, see `overflow.rs`). Not retried: the client turns it into the
    /// model's answer with finish class `context_exceeded`, cached and scored.
    #[error("the prompt exceeds the model's context window: {message}")]
    ContextExceeded {
        /// Provider message; redacted, then truncated, by the time it leaves the client.
        message: String,
    },
    /// The endpoint or client configuration is unusable (bad URL, key with invalid bytes).
    #[error("invalid endpoint configuration: {detail}")]
    Config {
        /// What is wrong.
        detail: String,
    },
    /// Not sent: the caller stopped all new requests (see [`ProviderClient::halt`](super::ProviderClient::halt)).
    #[error("not sent: {reason}")]
    Halted {
        /// Why requests were stopped.
        reason: String,
    },
}

impl CallError {
    /// [`Self::class`] of a stalled stream, for callers that count them.
    pub const STREAM_STALLED: &'static str = "stream_stalled";

    /// Whether sending the same request again may succeed. Empty, refused, filtered and
    /// truncated answers are not errors at all: they are the model's outcome, cached and scored.
    #[must_use]
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Self::RateLimited { .. }
                | Self::Overloaded { .. }
                | Self::Server { .. }
                | Self::Timeout
                | Self::StreamStalled { .. }
                | Self::FirstByteTimeout { .. }
                | Self::Connect { .. }
                | Self::Protocol { .. }
        )
    }

    /// Short stable name of the error class, for result rows and metrics.
    #[must_use]
    pub fn class(&self) -> &'static str {
        match self {
            Self::RateLimited { .. } => "rate_limited",
            Self::Quota { .. } => "quota",
            Self::Overloaded { .. } => "overloaded",
            Self::Server { .. } => "server",
            Self::Timeout => "timeout",
            Self::StreamStalled { .. } => Self::STREAM_STALLED,
            Self::FirstByteTimeout { .. } => "first_byte_timeout",
            Self::Connect { .. } => "connect",
            Self::Protocol { .. } => "protocol",
            Self::ResponseTooLarge { .. } => "response_too_large",
            Self::Auth { .. } => "auth",
            Self::BadRequest { .. } => "bad_request",
            Self::ContextExceeded { .. } => "context_exceeded",
            Self::Config { .. } => "config",
            Self::Halted { .. } => "halted",
        }
    }

    /// The wait the server asked for, which the retry loop honours over its own backoff.
    #[must_use]
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::RateLimited { retry_after } | Self::Overloaded { retry_after } | Self::Server { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// Replaces every occurrence of `secret` (some providers echo the key they received)
    /// with [`REDACTED`] in the full error text, then bounds provider messages to
    /// `MAX_MESSAGE_CHARS`: scrubbing after the cut would miss a key split by it.
    #[must_use]
    pub fn redact(self, secret: Option<&str>) -> Self {
        self.redact_all(secret.as_slice())
    }

    /// Like [`Self::redact`] for several secrets (the key and secret header values), all
    /// replaced before a message is truncated, so none is cut in half and left readable.
    #[must_use]
    pub fn redact_all(self, secrets: &[&str]) -> Self {
        let scrub = |text: String| secrets.iter().filter(|secret| !secret.is_empty()).fold(text, |text, secret| text.replace(secret, REDACTED));
        match self {
            Self::Connect { detail } => Self::Connect { detail: scrub(detail) },
            Self::Protocol { detail } => Self::Protocol { detail: scrub(detail) },
            Self::Config { detail } => Self::Config { detail: scrub(detail) },
            Self::BadRequest { status, message } => Self::BadRequest { status, message: truncate_message(&scrub(message)) },
            Self::Quota { message } => Self::Quota { message: truncate_message(&scrub(message)) },
            Self::ContextExceeded { message } => Self::ContextExceeded { message: truncate_message(&scrub(message)) },
            other => other,
        }
    }
}

/// Truncates provider text to a bounded length on a char boundary; only ever called on
/// text that has already been redacted.
fn truncate_message(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Parses a response body as JSON, mapping failure (truncation, HTML pages) to `Protocol`.
/// The part of every protocol's response parsing that is the same: HTTP
/// failures classified, the body parsed, and errors hidden in a 200 found.
pub(super) fn success_json(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> Result<Value, CallError> {
    if !status.is_success() {
        return Err(classify_failure(status, headers, body));
    }
    let json = parse_json(body)?;
    match error_in_ok_body(&json, headers) {
        Some(error) => Err(error),
        None => Ok(json),
    }
}

pub(super) fn parse_json(body: &[u8]) -> Result<Value, CallError> {
    serde_json::from_slice(body).map_err(|error| CallError::Protocol { detail: format!("invalid JSON body ({} bytes): {error}", body.len()) })
}

/// Maps a non-2xx response to its error class, using the body only for the message and
/// for overload detection.
pub(super) fn classify_failure(status: StatusCode, headers: &HeaderMap, body: &[u8]) -> CallError {
    let json = serde_json::from_slice::<Value>(body).ok();
    let retry_after = retry_after_from_headers(headers).or_else(|| json.as_ref().and_then(retry_delay_from_body));
    let message = json.as_ref().and_then(error_message).unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    let overloaded = json.as_ref().is_some_and(is_overload_body);
    match status.as_u16() {
        code @ (429 | 503 | 529) if overloaded || code == 529 => CallError::Overloaded { retry_after },
        429 if json.as_ref().is_some_and(is_quota_body) => CallError::Quota { message },
        429 => CallError::RateLimited { retry_after },
        401 | 403 => CallError::Auth { status: status.as_u16() },
        408 => CallError::Timeout,
        code if super::overflow::is_context_overflow(code, body) => CallError::ContextExceeded { message },
        code @ 500..=599 => CallError::Server { status: code, retry_after },
        // Kept whole: the client redacts the key, then truncates (CallError::redact).
        code => CallError::BadRequest { status: code, message },
    }
}

/// OpenAI's "you exceeded your current quota" (billing), as opposed to a rate limit.
fn is_quota_body(json: &Value) -> bool {
    let error = json.get("error").unwrap_or(json);
    ["code", "type"].iter().any(|k| error.get(*k).and_then(Value::as_str) == Some("insufficient_quota"))
}

/// Detects an error object inside an HTTP 200 body (`{"error": {...}}` or Anthropic's
/// `{"type": "error", ...}`), which gateways and streaming proxies do send.
pub(super) fn error_in_ok_body(json: &Value, headers: &HeaderMap) -> Option<CallError> {
    let is_error = json.get("type").and_then(Value::as_str) == Some("error") || json.get("error").is_some_and(|error| !error.is_null());
    if !is_error {
        return None;
    }
    let retry_after = retry_after_from_headers(headers).or_else(|| retry_delay_from_body(json));
    let text = error_fingerprint(json);
    if let Some(status) = auth_status(json) {
        // A key refused inside a 200 (a stream's `error` event, a gateway's body): every
        // call of the lane would hit it, so it is not a server error to retry.
        return Some(CallError::Auth { status });
    }
    Some(if super::overflow::is_context_overflow(400, json.to_string().as_bytes()) && !is_overload_body(json) {
        CallError::ContextExceeded { message: error_message(json).unwrap_or_default() }
    } else if is_overload_body(json) {
        CallError::Overloaded { retry_after }
    } else if text.contains("rate_limit") || text.contains("resource_exhausted") || text.contains("429") {
        CallError::RateLimited { retry_after }
    } else {
        CallError::Server { status: 200, retry_after }
    })
}

/// Lowercased `type`/`status`/`code` of an error object, for substring classification.
fn error_fingerprint(json: &Value) -> String {
    let error = json.get("error").unwrap_or(json);
    let mut parts = Vec::new();
    for key in ["type", "status", "code"] {
        match error.get(key) {
            Some(Value::String(text)) => parts.push(text.to_lowercase()),
            Some(Value::Number(number)) => parts.push(number.to_string()),
            _ => {}
        }
    }
    parts.join(" ")
}

/// The HTTP status an error object stands for when it says the key is refused: 403 for a
/// key without permission (`permission_error`, `PERMISSION_DENIED`), 401 for a key that is
/// invalid or missing (`invalid_api_key`, `authentication_error`, `UNAUTHENTICATED`, or a
/// message such as Gemini's "API key not valid").
fn auth_status(json: &Value) -> Option<u16> {
    let text = error_fingerprint(json);
    let error = json.get("error").filter(|error| error.is_object()).unwrap_or(json);
    let message = error.get("message").and_then(Value::as_str).unwrap_or_default().to_lowercase();
    if text.contains("permission") || text.split(' ').any(|part| part == "403") {
        return Some(403);
    }
    let refused = ["invalid_api_key", "authentication", "unauthenticated", "unauthorized"].iter().any(|part| text.contains(part))
        || text.split(' ').any(|part| part == "401")
        || (message.contains("api key") && ["invalid", "incorrect", "not valid", "expired"].iter().any(|word| message.contains(word)));
    refused.then_some(401)
}

/// Whether an error body describes overload rather than a hard failure.
fn is_overload_body(json: &Value) -> bool {
    let text = error_fingerprint(json);
    let message = error_message(json).unwrap_or_default().to_lowercase();
    text.contains("overloaded") || text.contains("529") || message.contains("overloaded")
}

/// The human-readable message of an error object in any of the three shapes.
fn error_message(json: &Value) -> Option<String> {
    let error = json.get("error")?;
    match error {
        Value::String(text) => Some(text.clone()),
        Value::Object(_) => error.get("message").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    }
}

/// Gemini's `RetryInfo` detail (`"retryDelay": "30s"`), used when no header is present.
fn retry_delay_from_body(json: &Value) -> Option<Duration> {
    let details = json.get("error")?.get("details")?.as_array()?;
    details.iter().find_map(|detail| {
        let text = detail.get("retryDelay")?.as_str()?;
        let seconds: f64 = text.strip_suffix('s')?.parse().ok()?;
        (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds.min(86_400.0)))
    })
}

#[cfg(test)]
mod tests {
    use super::super::limiter::ConcurrencyMode;
    use super::super::mock::{Fault, FaultPlan, MockConfig, MockServer, RetryHeader};
    use super::super::retry::RetryPolicy;
    use super::super::testing::{KEY, KINDS, ask, client_with, mock_endpoint};
    use super::*;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn status_classes() {
        let headers = HeaderMap::new();
        let classify = |code: u16, body: &str| classify_failure(StatusCode::from_u16(code).unwrap(), &headers, body.as_bytes());
        assert_eq!(classify(429, "{}").class(), "rate_limited");
        // OpenAI's billing quota (shape from its error-codes guide) is not a rate limit.
        let quota = r#"{"error": {"message": "You exceeded your current quota, please check your plan and billing details.", "type": "insufficient_quota", "param": null, "code": "insufficient_quota"}}"#;
        let error = classify(429, quota);
        assert_eq!(error.class(), "quota");
        assert!(!error.is_retryable() && error.to_string().contains("exceeded your current quota"), "{error}");
        assert_eq!(classify(529, "").class(), "overloaded");
        assert_eq!(classify(503, r#"{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}"#).class(), "overloaded");
        assert_eq!(classify(503, "<html>").class(), "server");
        assert_eq!(classify(500, "").class(), "server");
        assert_eq!(classify(401, "").class(), "auth");
        let bad = classify(400, r#"{"error":{"message":"bad temperature"}}"#);
        assert_eq!(bad, CallError::BadRequest { status: 400, message: "bad temperature".into() });
        assert!(!bad.is_retryable());
    }

    #[test]
    fn overload_inside_200() {
        let headers = HeaderMap::new();
        let anthropic = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        assert_eq!(error_in_ok_body(&anthropic, &headers), Some(CallError::Overloaded { retry_after: None }));
        let openai = json!({"error": {"type": "rate_limit_exceeded", "message": "slow down"}});
        assert_eq!(error_in_ok_body(&openai, &headers).map(|e| e.class()), Some("rate_limited"));
        assert_eq!(error_in_ok_body(&json!({"choices": [], "error": null}), &headers), None);
    }

    #[test]
    fn gemini_retry_delay_in_body() {
        let body = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1.5s"}]}});
        let error = classify_failure(StatusCode::TOO_MANY_REQUESTS, &HeaderMap::new(), body.to_string().as_bytes());
        assert_eq!(error.retry_after(), Some(Duration::from_millis(1500)));
    }

    #[test]
    fn redact_and_truncate() {
        let error = CallError::BadRequest { status: 400, message: "key sk-abc is bad".into() };
        assert_eq!(error.redact(Some("sk-abc")).to_string(), "request rejected: HTTP 400: key [REDACTED] is bad");
        let long = CallError::BadRequest { status: 400, message: "é".repeat(1000) };
        let CallError::BadRequest { message, .. } = long.redact(None) else { unreachable!() };
        assert_eq!(message.chars().count(), MAX_MESSAGE_CHARS + 1);
    }

    /// A key straddling the cut must not leave its prefix: redact the whole text, then cut.
    #[test]
    fn key_split_by_the_length_bound_is_redacted_whole() {
        let key = "sk-live-0123456789abcdefXYZ";
        let text = format!("{}{key} was rejected", "x".repeat(MAX_MESSAGE_CHARS - 10));
        let error = CallError::BadRequest { status: 400, message: text };
        let shown = error.redact(Some(key)).to_string();
        assert!(!shown.contains(&key[..8]), "key prefix survived: {shown}");
        assert!(shown.contains("x[REDACTED]"), "{shown}");
    }

    #[tokio::test]
    async fn provider_error_quoting_the_key_past_the_bound_is_redacted() {
        let message = format!("{}{KEY} is not a valid key", "y".repeat(MAX_MESSAGE_CHARS - 5));
        let client = client_with(RetryPolicy::no_retries(), ConcurrencyMode::default());
        for kind in KINDS {
            let server = MockServer::start(MockConfig {
                faults: FaultPlan::sequence([Fault::Status { status: 400, message: message.clone() }]),
                ..MockConfig::default()
            })
            .await
            .unwrap();
            let error = client.call(&mock_endpoint(&server, kind, "m"), &ask("hi")).await.unwrap_err();
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains(&KEY[..5]), "{kind}: key prefix survived: {shown}");
            assert!(shown.contains("y[RED"), "{kind}: {shown}");
        }
    }

    #[tokio::test]
    async fn each_fault_surfaces_with_its_class() {
        let cases = [
            (Fault::RateLimited(RetryHeader::Seconds(1)), "rate_limited"),
            (Fault::ServerError, "server"),
            (Fault::Unavailable(RetryHeader::None), "server"),
            (Fault::Overloaded, "overloaded"),
            (Fault::OverloadedIn200, "overloaded"),
            (Fault::Slow(Duration::from_secs(3)), "timeout"),
            (Fault::TruncatedJson, "protocol"),
            (Fault::Disconnect, "connect"),
            (Fault::Status { status: 400, message: "bad param".into() }, "bad_request"),
            (Fault::Status { status: 404, message: "no such model".into() }, "bad_request"),
            (Fault::Status { status: 403, message: "forbidden".into() }, "auth"),
        ];
        let client = client_with(RetryPolicy::no_retries(), ConcurrencyMode::default());
        for kind in KINDS {
            let faults = FaultPlan::sequence(cases.iter().map(|(fault, _)| fault.clone()));
            let server = MockServer::start(MockConfig { faults, ..MockConfig::default() }).await.unwrap();
            let endpoint = mock_endpoint(&server, kind, "m");
            for (fault, class) in &cases {
                let error = client.call(&endpoint, &ask("hi")).await.unwrap_err();
                assert_eq!(error.class(), *class, "{kind} {fault:?}: {error}");
            }
        }
    }
}
