//! The transport under every provider call: the client settings, the one HTTP client, the
//! request of one attempt (auth and extra headers, the exact bytes, streamed or not), reading
//! the answer no further than the response cap, and transport failures as [`CallError`]s.
//! The attempt loop in `client.rs` decides when to send (limiter, pacer, retries); this
//! module only sends.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tokio::time::{timeout, timeout_at};

use super::client::Lane;
use super::error::CallError;
use super::limiter::ConcurrencyMode;
use super::pacer::PacerConfig;
use super::retry::{RateLimitHeaders, RetryPolicy};
use super::shaping::Shaping;
use super::slots::ServerSlots;
use super::stream::StreamReader;
use super::types::{ChatResponse, Endpoint, HeaderValueOf, ProviderKind};

/// Installs ring as rustls' process-wide crypto provider; reqwest is built without one
/// (no aws-lc C build) and panics at client build time if none is installed. Idempotent.
pub fn install_crypto_provider() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
}

/// How a background response is polled; transport, never keyed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PollConfig {
    /// Wait before the first poll.
    pub first: Duration,
    /// Longest wait between polls; the wait doubles from `first` up to it.
    pub max: Duration,
}

impl Default for PollConfig {
    /// 1 s, doubling to 10 s: quick answers are seen quickly, long ones cost a poll per 10 s.
    fn default() -> Self {
        Self { first: Duration::from_secs(1), max: Duration::from_secs(10) }
    }
}

/// Transport and retry settings; none of these belong in a cache key (lessons §2).
#[derive(Debug, Clone, PartialEq)]
pub struct ClientConfig {
    /// TCP/TLS connect timeout.
    pub connect_timeout: Duration,
    /// Whole-request timeout per attempt (long: reasoning models may think for minutes).
    pub request_timeout: Duration,
    /// Optional idle timeout between reads; off by default because a non-streaming reply
    /// sends nothing until the model is done.
    pub read_timeout: Option<Duration>,
    /// Concurrency control per lane (provider, base URL, model).
    pub concurrency: ConcurrencyMode,
    /// Request-rate pacing per lane, learned from 429s and rate-limit headers.
    pub pacing: PacerConfig,
    /// Retry policy.
    pub retry: RetryPolicy,
    /// Honour `HTTP(S)_PROXY`; tests turn it off so 127.0.0.1 is reached directly.
    pub use_system_proxy: bool,
    /// Largest response body read, in bytes; a longer one is a `ResponseTooLarge` error,
    /// so a runaway or hostile reply cannot exhaust memory or fill the cache. For a streamed
    /// call it bounds the answer while it is folded (and one event, and the raw event stream
    /// at 16 times the cap), so a stream fails as soon as it passes the cap.
    pub max_response_bytes: u64,
    /// How background-mode Responses calls are polled ([`Endpoint::background`]).
    pub polling: PollConfig,
    /// Silence after which a streamed attempt is abandoned as stalled and retried; replaces
    /// `request_timeout` for streams, which may send for hours.
    pub stream_idle_timeout: Duration,
    /// Longest one streamed attempt may run while it keeps sending, so nothing hangs
    /// forever; the time a stream spends sending does not use up the retry budget.
    pub stream_total_timeout: Duration,
    /// Longest a streamed attempt waits for its first byte of data (the response head
    /// included): a request queued behind a server's busy slots sends nothing, and that is
    /// not a stall; `stream_idle_timeout` applies only after the first chunk.
    pub stream_first_byte_timeout: Duration,
    /// Where a lane reads its server's slot count ([`ServerSlots`]), which then caps it.
    pub server_slots: ServerSlots,
    /// Servers evalgrid started (`serve:`), by base URL, with their slot counts: all calls
    /// to one share one lane of exactly that many requests in flight, whatever model name
    /// they send.
    pub served_lanes: std::collections::BTreeMap<String, usize>,
}

/// Default silence that fails a streamed attempt: long enough for a server that sends
/// nothing while its model reasons (Chat Completions streams no reasoning), short enough
/// that a dead connection is noticed well before a non-streaming call would time out.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_mins(5);

/// Default wait for a stream's first byte: as long as a whole unstreamed attempt may take
/// (`request_timeout_s`' default), so a request queued behind busy slots is not cut.
pub const DEFAULT_STREAM_FIRST_BYTE_TIMEOUT: Duration = Duration::from_mins(10);

/// Default cap on one streamed attempt: four hours of output.
pub const DEFAULT_STREAM_TOTAL_TIMEOUT: Duration = Duration::from_hours(4);

/// Default cap on a response body: far above any real chat answer (8 MiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

impl Default for ClientConfig {
    /// 10 s connect, 10 min per attempt, adaptive concurrency, default retries, 8 MiB bodies;
    /// background responses polled after 1 s, doubling to 10 s; streams stall after 5 min of
    /// silence (once their first byte came, which may take 10 min) and end after 4 h; a
    /// llama.cpp server's slot count caps its lane.
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_mins(10),
            read_timeout: None,
            concurrency: ConcurrencyMode::default(),
            pacing: PacerConfig::default(),
            retry: RetryPolicy::default(),
            use_system_proxy: true,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            polling: PollConfig::default(),
            stream_idle_timeout: DEFAULT_STREAM_IDLE_TIMEOUT,
            stream_total_timeout: DEFAULT_STREAM_TOTAL_TIMEOUT,
            stream_first_byte_timeout: DEFAULT_STREAM_FIRST_BYTE_TIMEOUT,
            server_slots: ServerSlots::Auto,
            served_lanes: std::collections::BTreeMap::new(),
        }
    }
}

/// The protocol's auth headers, then the model entry's extra headers (which may replace
/// them, e.g. Azure's `api-key` instead of a bearer token). Secret values are marked
/// sensitive; an invalid name or value is a `Config` error that never quotes the value.
pub(super) fn request_headers(endpoint: &Endpoint) -> Result<HeaderMap, CallError> {
    let key = endpoint.api_key.as_ref();
    let mut headers = endpoint.kind.protocol().headers(key)?;
    for header in &endpoint.headers {
        let name = HeaderName::from_bytes(header.name.as_bytes())
            .map_err(|_| CallError::Config { detail: format!("`{}` is not a valid header name", header.name) })?;
        let (text, sensitive) = match &header.value {
            HeaderValueOf::Literal(value) => (value.as_str(), false),
            HeaderValueOf::Secret(secret) => (secret.expose(), true),
        };
        let mut value = HeaderValue::from_str(text)
            .map_err(|_| CallError::Config { detail: format!("the value of header `{}` has bytes not allowed in a header", header.name) })?;
        value.set_sensitive(sensitive);
        headers.insert(name, value);
    }
    Ok(headers)
}

/// Reads a response with `kind`'s protocol: parsed, then settled for the server.
pub(super) fn parse(kind: ProviderKind, status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, CallError> {
    let protocol = kind.protocol();
    protocol.parse(status, headers, body, shaping).map(|response| protocol.settle(response, shaping))
}

/// The one HTTP client of a [`super::ProviderClient`], with the settings' timeouts and proxy.
pub(super) fn http_client(config: &ClientConfig) -> Result<reqwest::Client, CallError> {
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(config.connect_timeout)
        .timeout(config.request_timeout)
        .user_agent(concat!("evalgrid/", env!("CARGO_PKG_VERSION")));
    if let Some(read_timeout) = config.read_timeout {
        builder = builder.read_timeout(read_timeout);
    }
    if !config.use_system_proxy {
        builder = builder.no_proxy();
    }
    builder.build().map_err(|error| CallError::Config { detail: describe_transport(error) })
}

/// Error text of a transport failure: the reqwest error and its causes, URL removed.
fn describe_transport(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

pub(super) fn transport_error(error: reqwest::Error) -> CallError {
    if error.is_timeout() {
        CallError::Timeout
    } else if error.is_builder() {
        CallError::Config { detail: describe_transport(error) }
    } else {
        CallError::Connect { detail: describe_transport(error) }
    }
}

pub(super) fn body_error(error: reqwest::Error) -> CallError {
    if error.is_timeout() {
        return CallError::Timeout;
    }
    CallError::Connect { detail: format!("connection lost while reading the response: {}", describe_transport(error)) }
}

/// One attempt over HTTP: posts the wire's bytes, reads the answer within the cap, parses it.
pub(super) async fn send_once(http: &reqwest::Client, config: &ClientConfig, kind: ProviderKind, wire: &Wire, lane: &Lane) -> Result<ChatResponse, CallError> {
    let request = http.post(&wire.url).headers(wire.headers.clone()).header(CONTENT_TYPE, HeaderValue::from_static("application/json")).body(wire.body.clone());
    if wire.streamed {
        return send_streamed(config, kind, wire, request, lane).await;
    }
    let response = request.send().await.map_err(transport_error)?;
    let status = response.status();
    let response_headers = response.headers().clone();
    observe(lane, &response_headers);
    let bytes = read_capped(response, config.max_response_bytes, None).await?;
    parse(kind, status, &response_headers, &bytes, &wire.shaping)
}

/// What a response head tells the lane: its rate-limit budget, and whether it is llama.cpp.
fn observe(lane: &Lane, headers: &HeaderMap) {
    if let Some(budget) = RateLimitHeaders::from_headers(headers) {
        lane.pacer.observe_headers(&budget);
    }
    lane.slots.observe(headers);
}

/// One streamed attempt: the response head and the first chunk must come within the
/// first-byte timeout (a request queued behind busy slots sends nothing, and is not
/// stalled), every later chunk within the idle timeout; the events are folded into the
/// protocol's non-streaming body, which the protocol's own parser reads. An error status,
/// or a server that answered with one JSON body after all, is read and parsed as without
/// streaming.
async fn send_streamed(
    config: &ClientConfig,
    kind: ProviderKind,
    wire: &Wire,
    request: reqwest::RequestBuilder,
    lane: &Lane,
) -> Result<ChatResponse, CallError> {
    let idle = config.stream_idle_timeout;
    let first_byte = config.stream_first_byte_timeout;
    let stalled = || CallError::StreamStalled { idle };
    let queued = || CallError::FirstByteTimeout { waited: first_byte };
    let first_by = tokio::time::Instant::now() + first_byte;
    let request = request.header(ACCEPT, HeaderValue::from_static("text/event-stream")).timeout(config.stream_total_timeout);
    let mut response = timeout_at(first_by, request.send()).await.map_err(|_| queued())?.map_err(transport_error)?;
    let status = response.status();
    let response_headers = response.headers().clone();
    observe(lane, &response_headers);
    let event_stream = response_headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
    if !status.is_success() || !event_stream {
        let bytes = read_capped(response, config.max_response_bytes, Some(idle)).await?;
        return parse(kind, status, &response_headers, &bytes, &wire.shaping);
    }
    // The cap bounds the answer (what is kept and cached) while it arrives; the event
    // stream around it may be larger (a Chat Completions chunk spends ~200 bytes on one
    // token), under a proportionally larger bound that still stops a runaway stream.
    let limit = config.max_response_bytes;
    let mut reader = StreamReader::new(kind, limit);
    let mut next = timeout_at(first_by, response.chunk()).await.map_err(|_| queued())?;
    while let Some(bytes) = next.map_err(body_error)? {
        if reader.feed(&bytes)? {
            break;
        }
        next = timeout(idle, response.chunk()).await.map_err(|_| stalled())?;
    }
    let body = serde_json::to_vec(&reader.finish()?).map_err(|error| CallError::Protocol { detail: format!("cannot re-encode a streamed answer: {error}") })?;
    if u64::try_from(body.len()).unwrap_or(u64::MAX) > limit {
        return Err(CallError::ResponseTooLarge { limit });
    }
    parse(kind, status, &response_headers, &body, &wire.shaping)
}

/// What one call sends on every attempt.
pub(super) struct Wire {
    pub(super) url: String,
    pub(super) headers: HeaderMap,
    /// The bytes sent (for a streamed call, the keyed body plus the protocol's switch).
    pub(super) body: Vec<u8>,
    pub(super) shaping: Shaping,
    pub(super) streamed: bool,
    /// Polled in background mode (Responses API only; never streamed).
    pub(super) background: bool,
}

/// Reads a body chunk by chunk and stops as soon as it would exceed `limit` bytes, so no
/// more than the cap is ever held (a declared `Content-Length` over the cap stops it at once).
/// With `idle`, a wait of longer than that for the next chunk is a stall.
pub(super) async fn read_capped(mut response: reqwest::Response, limit: u64, idle: Option<Duration>) -> Result<Vec<u8>, CallError> {
    let too_large = CallError::ResponseTooLarge { limit };
    if response.content_length().is_some_and(|length| length > limit) {
        return Err(too_large);
    }
    let capacity = response.content_length().unwrap_or(0).min(limit).min(1 << 20);
    let mut bytes = Vec::with_capacity(usize::try_from(capacity).unwrap_or(0));
    loop {
        let next = match idle {
            Some(idle) => timeout(idle, response.chunk()).await.map_err(|_| CallError::StreamStalled { idle })?,
            None => response.chunk().await,
        };
        let Some(chunk) = next.map_err(body_error)? else { break };
        if u64::try_from(bytes.len() + chunk.len()).unwrap_or(u64::MAX) > limit {
            return Err(too_large);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(bytes)
}
