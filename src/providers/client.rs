//! The provider client: one shared `reqwest::Client`, one lane per (provider, base URL,
//! model) holding a concurrency limiter and a request-rate pacer, and the retry loop that
//! counts every attempt.
//!
//! A call builds the exact body once (returned to the caller for the cache key), then
//! repeats acquire-permit → wait-for-pacer → send → parse → report-to-lane until it has an
//! answer, a non-retryable error, or the retry policy says stop. A 429 is pacing, never
//! failure: it does not use up `max_attempts`, its `Retry-After` pauses the whole lane, and
//! only the call's time budget bounds how long a call waits for the provider. Empty,
//! refused, filtered and truncated outputs are answers (with their `finish_reason`), not
//! errors. Bodies are read in chunks up to `max_response_bytes` and no further. Errors and answers are scrubbed of the API key before they are returned.
//!
//! A streamed call ([`super::stream`]) is bounded differently: each attempt may run up to
//! `stream_total_timeout` as long as bytes keep coming, and fails as `StreamStalled`
//! (retried like a timeout) after `stream_idle_timeout` of silence, so a long reasoning
//! call is never cut, and billed twice, for its length alone.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use tokio::time::{Instant, sleep, timeout, timeout_at};

use super::attempt::AttemptClass;
use super::background::{self, PollConfig, ResponseLedger, Submitted};
use super::error::CallError;
use super::limiter::{ConcurrencyMode, Feedback, Limiter, LimiterSnapshot};
use super::openai;
use super::pacer::{Pacer, PacerConfig, PacerSnapshot};
use super::retry::{RateLimitHeaders, RetryPolicy};
use super::stream::{StreamReader, streamed_body, streamed_url};
use super::types::{Answered, ChatRequest, ChatResponse, Endpoint, HeaderValueOf, ProviderKind, answered_as, answered_at};

/// Installs ring as rustls' process-wide crypto provider; reqwest is built without one
/// (no aws-lc C build) and panics at client build time if none is installed. Idempotent.
pub fn install_crypto_provider() {
    let _already_installed = rustls::crypto::ring::default_provider().install_default();
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
}

/// Default silence that fails a streamed attempt: long enough for a server that sends
/// nothing while its model reasons (Chat Completions streams no reasoning), short enough
/// that a dead connection is noticed well before a non-streaming call would time out.
pub const DEFAULT_STREAM_IDLE_TIMEOUT: Duration = Duration::from_mins(5);

/// Default cap on one streamed attempt: four hours of output.
pub const DEFAULT_STREAM_TOTAL_TIMEOUT: Duration = Duration::from_hours(4);

/// Default cap on a response body: far above any real chat answer (8 MiB).
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 * 1024 * 1024;

impl Default for ClientConfig {
    /// 10 s connect, 10 min per attempt, adaptive concurrency, default retries, 8 MiB bodies;
    /// background responses polled after 1 s, doubling to 10 s; streams stall after 5 min of
    /// silence and end after 4 h.
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
        }
    }
}

/// A successful call: the answer, how many HTTP attempts it took, and the exact body sent.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The (non-empty) answer.
    pub response: ChatResponse,
    /// HTTP attempts made, the successful one included (retries cost money: record them).
    pub attempts: u32,
    /// The JSON body sent, identical on every attempt, less the transport switches added on
    /// the wire only (streaming's `stream`, `stream_options`; background mode's
    /// `background`, `store: true`): the body the call is keyed by.
    pub request_body: Value,
    /// Whether the call was streamed (server-sent events).
    pub streamed: bool,
}

impl CallOutcome {
    /// Whether the provider reported a model other than `requested`, which must not be
    /// cached under the requested name (lessons §1.1). An unreported model counts as other.
    #[must_use]
    pub fn answered_other_model(&self, requested: &str) -> bool {
        let answered = &self.response.answered_model;
        answered.is_empty() || answered_as(requested, answered) != Answered::Same
    }
}

/// Everything about a call, failed or not, for result rows and `retry-errors`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    /// The answer or the last error.
    pub result: Result<ChatResponse, CallError>,
    /// HTTP attempts made.
    pub attempts: u32,
    /// Class of each failed attempt, in order.
    pub failed_attempts: Vec<AttemptClass>,
    /// The JSON body sent, less a streamed call's switch (the keyed body).
    pub request_body: Value,
    /// Wall time of the whole call, retries and waits included.
    pub elapsed: Duration,
    /// Whether the call was streamed (server-sent events).
    pub streamed: bool,
}

/// Everything that paces one (provider, base URL, model): calls to the same model share
/// its rate limit, so they share one concurrency limiter and one pacer.
#[derive(Debug)]
pub struct Lane {
    /// Requests in flight (AIMD, down to 1).
    pub limiter: Limiter,
    /// Request starts per second (learned from 429s and headers).
    pub pacer: Pacer,
    /// Why this lane's requests are no longer sent (see [`ProviderClient::halt_lane`]).
    halted: Mutex<Option<String>>,
}

/// A lane's name and state, for the progress line.
#[derive(Debug, Clone, PartialEq)]
pub struct LaneSnapshot {
    /// `provider model`.
    pub name: String,
    /// Concurrency limiter state.
    pub limiter: LimiterSnapshot,
    /// Pacer state.
    pub pacer: PacerSnapshot,
}

type LaneKey = (ProviderKind, String, String);

/// The shared HTTP client plus per-lane limiters and pacers.
#[derive(Debug)]
pub struct ProviderClient {
    http: reqwest::Client,
    config: ClientConfig,
    lanes: Mutex<HashMap<LaneKey, Arc<Lane>>>,
    /// Set by [`Self::halt`]: why no request may be sent any more.
    halted: Mutex<Option<String>>,
}

/// The exact body for `request` to `endpoint` (its protocol, model and server), without
/// calling anything.
#[must_use]
pub fn request_body(endpoint: &Endpoint, request: &ChatRequest) -> Value {
    endpoint.kind.protocol().build_body(request, endpoint)
}

/// The URL a call to `endpoint` posts to: its base URL as given plus the protocol's path.
#[must_use]
pub fn request_url(endpoint: &Endpoint) -> String {
    endpoint.kind.protocol().url(&endpoint.base_url, &endpoint.model)
}

fn legacy_request_url(endpoint: &Endpoint) -> String {
    endpoint.kind.protocol().legacy_url(&endpoint.base_url, &endpoint.model)
}

/// Model identity plus exact body, the call's part of a cache key: the body alone is not
/// enough because Gemini carries the model only in the URL. The URL itself is named only
/// where it differs from the one evalgrid built before base URLs were used as given, and
/// literal extra headers only when there are any, so existing keys stay as they were.
/// Never contains the key or a secret header value.
#[must_use]
pub fn request_fingerprint(endpoint: &Endpoint, request: &ChatRequest) -> Value {
    let mut fingerprint = json!({
        "kind": endpoint.kind,
        "model": endpoint.model,
        "base_url": endpoint.base_url.trim_end_matches('/'),
        "body": request_body(endpoint, request),
    });
    let url = request_url(endpoint);
    if url != legacy_request_url(endpoint) {
        fingerprint["url"] = Value::String(url);
    }
    let literal: serde_json::Map<String, Value> = endpoint
        .headers
        .iter()
        .filter_map(|header| match &header.value {
            HeaderValueOf::Literal(value) => Some((header.name.clone(), Value::String(value.clone()))),
            HeaderValueOf::Secret(_) => None,
        })
        .collect();
    if !literal.is_empty() {
        fingerprint["headers"] = Value::Object(literal);
    }
    // Read by evalgrid, never sent, yet it changes the stored answer.
    if let Some(tag) = request.params.get(openai::REASONING_TAG) {
        fingerprint["reasoning_tag"] = tag.clone();
    }
    fingerprint
}

/// The protocol's auth headers, then the model entry's extra headers (which may replace
/// them, e.g. Azure's `api-key` instead of a bearer token). Secret values are marked
/// sensitive; an invalid name or value is a `Config` error that never quotes the value.
fn request_headers(endpoint: &Endpoint) -> Result<HeaderMap, CallError> {
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

pub(super) fn parse(kind: ProviderKind, status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &openai::Shaping) -> Result<ChatResponse, CallError> {
    kind.protocol().parse(status, headers, body, shaping)
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

fn body_error(error: reqwest::Error) -> CallError {
    if error.is_timeout() {
        return CallError::Timeout;
    }
    CallError::Connect { detail: format!("connection lost while reading the response: {}", describe_transport(error)) }
}

fn feedback(result: &Result<ChatResponse, CallError>) -> Feedback {
    match result {
        Ok(_) => Feedback::Success,
        Err(CallError::RateLimited { .. }) => Feedback::RateLimited,
        Err(error) if error.is_retryable() => Feedback::ServerTrouble,
        Err(_) => Feedback::Neutral,
    }
}

impl ProviderClient {
    /// Builds the shared HTTP client (installing the crypto provider first).
    ///
    /// # Errors
    /// `Config` if reqwest cannot build a client (e.g. no usable TLS configuration).
    pub fn new(config: ClientConfig) -> Result<Self, CallError> {
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
        let http = builder.build().map_err(|error| CallError::Config { detail: describe_transport(error) })?;
        Ok(Self { http, config, lanes: Mutex::new(HashMap::new()), halted: Mutex::new(None) })
    }

    /// Stops every request not yet on the wire, also those already waiting for a slot: they
    /// fail with [`CallError::Halted`]. For a run that can no longer keep answers (its
    /// cache disk is full), where every answer received now would be paid for nothing.
    pub fn halt(&self, reason: &str) {
        self.halted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert_with(|| reason.to_owned());
    }

    /// Like [`Self::halt`] for one lane (provider, base URL, model): its requests not yet on
    /// the wire fail with [`CallError::Halted`], other lanes go on. For a failure every
    /// request of the lane would hit (a refused key, an unknown model).
    pub fn halt_lane(&self, endpoint: &Endpoint, reason: &str) {
        self.lane(endpoint).halted.lock().unwrap_or_else(PoisonError::into_inner).get_or_insert_with(|| reason.to_owned());
    }

    fn halted(&self) -> Option<CallError> {
        self.halted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone().map(|reason| CallError::Halted { reason })
    }

    /// The transport settings this client was built with.
    #[must_use]
    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// The lane shared by every call to this (provider, base URL, model).
    pub fn lane(&self, endpoint: &Endpoint) -> Arc<Lane> {
        let key = (endpoint.kind, endpoint.base_url.trim_end_matches('/').to_owned(), endpoint.model.clone());
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(lanes.entry(key).or_insert_with(|| {
            Arc::new(Lane { limiter: Limiter::new(self.config.concurrency), pacer: Pacer::new(self.config.pacing), halted: Mutex::new(None) })
        }))
    }

    /// Current limit and in-flight count for an endpoint, for progress output.
    pub fn limiter_snapshot(&self, endpoint: &Endpoint) -> LimiterSnapshot {
        self.lane(endpoint).limiter.snapshot()
    }

    /// Every lane used so far with its limiter and pacer state, sorted by name.
    pub fn lane_snapshots(&self) -> Vec<LaneSnapshot> {
        let lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        let mut out: Vec<LaneSnapshot> = lanes
            .iter()
            .map(|((kind, _, model), lane)| LaneSnapshot { name: format!("{kind} {model}"), limiter: lane.limiter.snapshot(), pacer: lane.pacer.snapshot() })
            .collect();
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Calls the model with retries; `Ok` only for a non-empty, non-refused answer.
    ///
    /// # Errors
    /// The last attempt's [`CallError`] once retries are exhausted or not allowed.
    pub async fn call(&self, endpoint: &Endpoint, request: &ChatRequest) -> Result<CallOutcome, CallError> {
        let record = self.call_recorded(endpoint, request).await;
        record.result.map(|response| CallOutcome { response, attempts: record.attempts, request_body: record.request_body, streamed: record.streamed })
    }

    /// Like [`Self::call`] but also reports attempts and failures when the call fails.
    pub async fn call_recorded(&self, endpoint: &Endpoint, request: &ChatRequest) -> CallRecord {
        self.call_resumable(endpoint, request, None).await
    }

    /// Like [`Self::call_recorded`]; a background-mode call keeps its response id in
    /// `ledger`, so an interrupted call is polled, not sent again, by the next run.
    pub async fn call_resumable(&self, endpoint: &Endpoint, request: &ChatRequest, ledger: Option<&dyn ResponseLedger>) -> CallRecord {
        let request_body = request_body(endpoint, request);
        // A background call is polled, never streamed.
        let background = endpoint.background && endpoint.kind == ProviderKind::OpenAiResponses;
        let streamed = !background && endpoint.stream.streams(endpoint.kind, &request_body);
        let started = Instant::now();
        let mut record =
            CallRecord { result: Err(CallError::Timeout), attempts: 0, failed_attempts: Vec::new(), request_body, elapsed: Duration::ZERO, streamed };
        // The switches are added to the bytes sent only: the recorded (keyed) body never has them.
        let switched = if background {
            Some(background::wire_body(&record.request_body))
        } else if streamed {
            Some(streamed_body(endpoint.kind, &record.request_body))
        } else {
            None
        };
        let prepared = serde_json::to_vec(switched.as_ref().unwrap_or(&record.request_body))
            .map_err(|error| CallError::Config { detail: format!("cannot serialize request body: {error}") })
            .and_then(|bytes| Ok((bytes, request_headers(endpoint)?)));
        match prepared {
            Ok((body, headers)) => {
                let shaping = openai::Shaping::for_call(request, &endpoint.base_url);
                let url = if streamed { streamed_url(endpoint.kind, &request_url(endpoint)) } else { request_url(endpoint) };
                let wire = Wire { url, headers, body, shaping, streamed, background };
                self.attempt_loop(endpoint, &wire, started, &mut record, ledger).await;
            }
            Err(error) => record.result = Err(error),
        }
        // Redact on the whole text first; error messages are truncated only after that.
        // Every secret the request carried: the key and secret header values.
        let secrets = endpoint.secrets();
        record.result = match std::mem::replace(&mut record.result, Err(CallError::Timeout)) {
            Ok(response) => Ok(secrets.iter().fold(response, |response, secret| response.redact(secret))),
            // A prompt longer than the context is the model's outcome, not an error: answered,
            // cached and scored as `context_exceeded` (the message is redacted first).
            Err(error @ CallError::ContextExceeded { .. }) => match error.redact_all(&secrets) {
                CallError::ContextExceeded { message } => Ok(ChatResponse::context_exceeded(message)),
                other => Err(other),
            },
            Err(error) => Err(error.redact_all(&secrets)),
        };
        record.elapsed = started.elapsed();
        record
    }

    async fn attempt_loop(&self, endpoint: &Endpoint, wire: &Wire, started: Instant, record: &mut CallRecord, ledger: Option<&dyn ResponseLedger>) {
        let policy = self.config.retry;
        let lane = self.lane(endpoint);
        // Failed attempts that use the retry budget (a 429 never does), and 429s so far.
        let (mut failures, mut rate_limits) = (0_u32, 0_u32);
        // Time spent inside streamed attempts: a stream is bounded by its own timeouts (idle
        // and total), so the time it spends sending does not use up the call's budget, which
        // bounds only the waiting and the retrying (429s still end when it is spent).
        let mut streaming = Duration::ZERO;
        loop {
            let deadline = started + policy.total_timeout + streaming;
            let Ok(permit) = timeout_at(deadline, lane.limiter.acquire()).await else {
                record.result = Err(CallError::Timeout);
                return;
            };
            let Ok(ticket) = timeout_at(deadline, lane.pacer.acquire()).await else {
                // Still paced when the budget ran out: the last 429 says why, if there was one.
                if !matches!(record.result, Err(CallError::RateLimited { .. })) {
                    record.result = Err(CallError::Timeout);
                }
                return;
            };
            // Checked at the last moment before sending: calls that waited for a slot while
            // the run was halted are not sent either.
            if let Some(halted) =
                self.halted().or_else(|| lane.halted.lock().unwrap_or_else(PoisonError::into_inner).clone().map(|reason| CallError::Halted { reason }))
            {
                record.result = Err(halted);
                return;
            }
            record.attempts += 1;
            let sent = Instant::now();
            let Submitted { result, resubmit } = if wire.background {
                // Bounded by the budget inside: it cancels the response when the budget is spent.
                let job = background::Job {
                    url: &wire.url,
                    headers: &wire.headers,
                    body: &wire.body,
                    shaping: &wire.shaping,
                    polling: self.config.polling,
                    retry: policy,
                    deadline,
                    max_response_bytes: self.config.max_response_bytes,
                };
                background::run(&self.http, &job, &lane.pacer, ledger).await
            } else if wire.streamed {
                Submitted { result: self.send_once(endpoint.kind, wire, &lane.pacer).await, resubmit: true }
            } else {
                let result = timeout_at(deadline, self.send_once(endpoint.kind, wire, &lane.pacer)).await.unwrap_or(Err(CallError::Timeout));
                Submitted { result, resubmit: true }
            };
            let attempt_time = sent.elapsed();
            if wire.streamed {
                streaming += attempt_time;
            }
            let budget_used = started.elapsed().saturating_sub(streaming);
            if let Err(CallError::RateLimited { retry_after }) = &result {
                // Before the permit is freed, so no waiting request slips past the pause.
                lane.pacer.rate_limited(ticket, *retry_after);
            }
            permit.finish(match feedback(&result) {
                // The pacer cut the rate already; cutting concurrency too would, after a
                // few events, starve a lane whose limit is a rate, not a concurrency.
                Feedback::RateLimited if ticket.paced() => Feedback::ServerTrouble,
                other => other,
            });
            match result {
                Ok(mut response) => {
                    response.latency_ms = u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX);
                    if answered_at(&endpoint.base_url, &endpoint.model, &response.answered_model) == Answered::Other {
                        tracing::warn!(
                            provider = %endpoint.kind,
                            requested = %endpoint.model,
                            answered = %response.answered_model,
                            "provider answered with a different model than requested"
                        );
                    }
                    record.result = Ok(response);
                    return;
                }
                Err(error) => {
                    record.failed_attempts.push(AttemptClass::of(&error));
                    let delay = match &error {
                        // A background response exists: sending again would start (and bill) a second run.
                        _ if !resubmit => None,
                        // A timed-out attempt is only tried again when a whole attempt still
                        // fits the call's budget: a long reasoning call cut by the budget
                        // would otherwise be sent, and billed, twice for nothing.
                        CallError::Timeout if !wire.streamed && deadline.saturating_duration_since(Instant::now()) < self.config.request_timeout => None,
                        // A stream that ran to its total cap is runaway: another would be too.
                        CallError::Timeout if wire.streamed && attempt_time >= self.config.stream_total_timeout => None,
                        CallError::RateLimited { retry_after } => {
                            rate_limits += 1;
                            policy.rate_limit_delay(rate_limits, *retry_after, budget_used)
                        }
                        _ => {
                            failures += 1;
                            policy.next_delay(failures, &error, budget_used)
                        }
                    };
                    // A stall (`class = stream_stalled`) is also said in the run log by the caller.
                    tracing::info!(
                        provider = %endpoint.kind,
                        model = %endpoint.model,
                        attempt = record.attempts,
                        class = error.class(),
                        retry_in_ms = delay.map(|delay| delay.as_millis()),
                        "model call attempt failed"
                    );
                    record.result = Err(error);
                    match delay {
                        Some(delay) => sleep(delay).await,
                        None => return,
                    }
                }
            }
        }
    }

    async fn send_once(&self, kind: ProviderKind, wire: &Wire, pacer: &Pacer) -> Result<ChatResponse, CallError> {
        let request =
            self.http.post(&wire.url).headers(wire.headers.clone()).header(CONTENT_TYPE, HeaderValue::from_static("application/json")).body(wire.body.clone());
        if wire.streamed {
            return self.send_streamed(kind, wire, request, pacer).await;
        }
        let response = request.send().await.map_err(transport_error)?;
        let status = response.status();
        let response_headers = response.headers().clone();
        if let Some(budget) = RateLimitHeaders::from_headers(&response_headers) {
            pacer.observe_headers(&budget);
        }
        let bytes = read_capped(response, self.config.max_response_bytes, None).await?;
        parse(kind, status, &response_headers, &bytes, &wire.shaping)
    }

    /// One streamed attempt: the response head and every later chunk must come within the
    /// idle timeout; the events are folded into the protocol's non-streaming body, which
    /// the protocol's own parser reads. An error status, or a server that answered with
    /// one JSON body after all, is read and parsed as without streaming.
    async fn send_streamed(&self, kind: ProviderKind, wire: &Wire, request: reqwest::RequestBuilder, pacer: &Pacer) -> Result<ChatResponse, CallError> {
        let idle = self.config.stream_idle_timeout;
        let stalled = || CallError::StreamStalled { idle };
        let request = request.header(ACCEPT, HeaderValue::from_static("text/event-stream")).timeout(self.config.stream_total_timeout);
        let mut response = timeout(idle, request.send()).await.map_err(|_| stalled())?.map_err(transport_error)?;
        let status = response.status();
        let response_headers = response.headers().clone();
        if let Some(budget) = RateLimitHeaders::from_headers(&response_headers) {
            pacer.observe_headers(&budget);
        }
        let event_stream = response_headers
            .get(CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .is_some_and(|value| value.trim_start().to_ascii_lowercase().starts_with("text/event-stream"));
        if !status.is_success() || !event_stream {
            let bytes = read_capped(response, self.config.max_response_bytes, Some(idle)).await?;
            return parse(kind, status, &response_headers, &bytes, &wire.shaping);
        }
        // The cap bounds the answer (what is kept and cached) while it arrives; the event
        // stream around it may be larger (a Chat Completions chunk spends ~200 bytes on one
        // token), under a proportionally larger bound that still stops a runaway stream.
        let limit = self.config.max_response_bytes;
        let mut reader = StreamReader::new(kind, limit);
        while let Some(bytes) = timeout(idle, response.chunk()).await.map_err(|_| stalled())?.map_err(body_error)? {
            if reader.feed(&bytes)? {
                break;
            }
        }
        let body =
            serde_json::to_vec(&reader.finish()?).map_err(|error| CallError::Protocol { detail: format!("cannot re-encode a streamed answer: {error}") })?;
        if u64::try_from(body.len()).unwrap_or(u64::MAX) > limit {
            return Err(CallError::ResponseTooLarge { limit });
        }
        parse(kind, status, &response_headers, &body, &wire.shaping)
    }
}

/// What one call sends on every attempt.
struct Wire {
    url: String,
    headers: HeaderMap,
    /// The bytes sent (for a streamed call, the keyed body plus the protocol's switch).
    body: Vec<u8>,
    shaping: openai::Shaping,
    streamed: bool,
    /// Polled in background mode (Responses API only; never streamed).
    background: bool,
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

#[cfg(test)]
mod tests {
    use super::super::mock::{Fault, FaultPlan, MockConfig, MockOutcome, MockReply, MockServer, RetryHeader, Script};
    use super::super::testing::{KEY, KINDS, ask, client_with, mock_endpoint, quick_client, quick_config};
    use super::super::types::ToolCall;
    use super::*;

    #[tokio::test]
    async fn transient_faults_are_retried_until_success() {
        let faults = [
            Fault::ServerError,
            Fault::Unavailable(RetryHeader::None),
            Fault::Overloaded,
            Fault::OverloadedIn200,
            Fault::TruncatedJson,
            Fault::Disconnect,
            Fault::RateLimited(RetryHeader::Millis(1)),
        ];
        for kind in KINDS {
            let server = MockServer::start(MockConfig { faults: FaultPlan::sequence(faults.clone()), ..MockConfig::default() }).await.unwrap();
            let record = quick_client().call_recorded(&mock_endpoint(&server, kind, "m"), &ask("hi")).await;
            assert_eq!(record.result.as_ref().map(|response| response.text.as_str()), Ok("echo: hi"), "{kind}");
            assert_eq!(record.attempts, 8, "{kind}");
            use AttemptClass::{Connect, Overloaded, Protocol, RateLimited, Server};
            assert_eq!(record.failed_attempts, [Server, Server, Overloaded, Overloaded, Protocol, Connect, RateLimited], "{kind}");
            assert_eq!(server.calls(), 8);
        }
    }

    #[tokio::test]
    async fn non_retryable_errors_are_sent_once() {
        let faults = FaultPlan::sequence([Fault::Status { status: 400, message: "bad".into() }]);
        let server = MockServer::start(MockConfig { faults, ..MockConfig::default() }).await.unwrap();
        let record = quick_client().call_recorded(&mock_endpoint(&server, ProviderKind::OpenAi, "m"), &ask("x")).await;
        assert_eq!(record.result.unwrap_err().class(), "bad_request");
        assert_eq!((record.attempts, server.calls()), (1, 1));
    }

    #[tokio::test]
    async fn retries_are_bounded_by_attempts_and_total_time() {
        let always = FaultPlan::rate(1.0, vec![Fault::ServerError], 0);
        let server = MockServer::start(MockConfig { faults: always, ..MockConfig::default() }).await.unwrap();
        let policy = RetryPolicy { max_attempts: 3, ..quick_config().retry };
        let client = client_with(policy, ConcurrencyMode::default());
        let record = client.call_recorded(&mock_endpoint(&server, ProviderKind::Gemini, "m"), &ask("x")).await;
        assert_eq!((record.attempts, server.calls()), (3, 3));
        assert_eq!(record.result.unwrap_err().class(), "server");

        server.set_faults(FaultPlan::rate(1.0, vec![Fault::RateLimited(RetryHeader::Seconds(5))], 0));
        let policy = RetryPolicy { total_timeout: Duration::from_secs(1), ..quick_config().retry };
        let client = client_with(policy, ConcurrencyMode::default());
        let record = client.call_recorded(&mock_endpoint(&server, ProviderKind::Gemini, "m"), &ask("x")).await;
        assert_eq!(record.attempts, 1, "a 5 s Retry-After cannot fit a 1 s budget");
        assert!(record.elapsed < Duration::from_secs(1));
        assert_eq!(record.result.unwrap_err().retry_after(), Some(Duration::from_secs(5)));
    }

    /// Ten 429s in a row with `max_attempts: 2`: the call still succeeds, because a rate
    /// limit is pacing and only the time budget bounds it; a server error after them
    /// still has its one retry.
    #[tokio::test]
    async fn rate_limits_do_not_use_up_the_attempts() {
        let mut faults: Vec<Fault> = (0..10).map(|_| Fault::RateLimited(RetryHeader::Millis(1))).collect();
        faults.push(Fault::ServerError);
        let server = MockServer::start(MockConfig { faults: FaultPlan::sequence(faults), ..MockConfig::default() }).await.unwrap();
        let policy = RetryPolicy { max_attempts: 2, ..quick_config().retry };
        let record = client_with(policy, ConcurrencyMode::default()).call_recorded(&mock_endpoint(&server, ProviderKind::OpenAi, "m"), &ask("x")).await;
        assert!(record.result.is_ok(), "{:?}", record.result);
        assert_eq!((record.attempts, server.calls()), (12, 12));
        assert_eq!(record.failed_attempts.iter().filter(|class| **class == AttemptClass::RateLimited).count(), 10);
    }

    /// A provider that only ever says "slow down": the call gives up when its time budget
    /// is spent, with the rate-limit error, never because attempts ran out.
    #[tokio::test]
    async fn endless_rate_limits_end_at_the_time_budget() {
        let server =
            MockServer::start(MockConfig { faults: FaultPlan::rate(1.0, vec![Fault::RateLimited(RetryHeader::Millis(50))], 0), ..MockConfig::default() })
                .await
                .unwrap();
        let policy = RetryPolicy { max_attempts: 2, total_timeout: Duration::from_millis(800), ..quick_config().retry };
        let record = client_with(policy, ConcurrencyMode::default()).call_recorded(&mock_endpoint(&server, ProviderKind::Anthropic, "m"), &ask("x")).await;
        assert_eq!(record.result.unwrap_err().class(), "rate_limited");
        assert!(record.attempts > 2, "more attempts than max_attempts: {}", record.attempts);
        assert!(record.elapsed < Duration::from_secs(2), "{:?}", record.elapsed);
    }

    /// Two models on one server are two lanes (each with its own limiter and pacer).
    #[tokio::test]
    async fn lanes_are_per_model() {
        let server = MockServer::start(MockConfig::default()).await.unwrap();
        let client = quick_client();
        let (a, b) = (mock_endpoint(&server, ProviderKind::OpenAi, "a"), mock_endpoint(&server, ProviderKind::OpenAi, "b"));
        client.call(&a, &ask("x")).await.unwrap();
        client.call(&b, &ask("x")).await.unwrap();
        let names: Vec<String> = client.lane_snapshots().into_iter().map(|lane| lane.name).collect();
        assert_eq!(names, ["openai a", "openai b"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn two_hundred_concurrent_calls_with_faults_complete() {
        let mix = vec![Fault::ServerError, Fault::Overloaded, Fault::RateLimited(RetryHeader::Millis(5)), Fault::Disconnect];
        let config = MockConfig { faults: FaultPlan::rate(0.1, mix, 7), latency: Duration::from_millis(20), ..MockConfig::default() };
        let server = MockServer::start(config).await.unwrap();
        let client = Arc::new(quick_client());
        let endpoint = Arc::new(mock_endpoint(&server, ProviderKind::Anthropic, "m"));
        let mut tasks = tokio::task::JoinSet::new();
        for index in 0..200 {
            let (client, endpoint) = (Arc::clone(&client), Arc::clone(&endpoint));
            tasks.spawn(async move { client.call(&endpoint, &ask(&format!("q{index}"))).await });
        }
        let mut attempts = 0_u64;
        while let Some(joined) = tasks.join_next().await {
            let outcome = joined.unwrap().unwrap();
            assert!(outcome.response.text.starts_with("echo: q"));
            attempts += u64::from(outcome.attempts);
        }
        assert_eq!(attempts, server.calls(), "every HTTP attempt is counted");
        assert!(attempts > 200, "the 10 % fault rate forced some retries");
        assert_eq!(client.limiter_snapshot(&endpoint).in_flight, 0);
    }

    #[tokio::test]
    async fn model_substitution_is_reported() {
        let config = MockConfig { answered_model: Some("cheaper-model".into()), ..MockConfig::default() };
        let server = MockServer::start(config).await.unwrap();
        for kind in KINDS {
            let outcome = quick_client().call(&mock_endpoint(&server, kind, "m-2025"), &ask("x")).await.unwrap();
            assert_eq!(outcome.response.answered_model, "cheaper-model");
            assert!(outcome.answered_other_model("m-2025"));
        }
    }

    fn capped_client(max_response_bytes: u64) -> ProviderClient {
        ProviderClient::new(ClientConfig { max_response_bytes, ..quick_config() }).unwrap()
    }

    /// An endless answer: a client that buffered it would time out; one that stops at the
    /// cap fails at once, after one attempt (not retried).
    #[tokio::test]
    async fn body_over_the_cap_stops_reading_at_the_cap() {
        for kind in KINDS {
            let server =
                MockServer::start(MockConfig { faults: FaultPlan::sequence([Fault::HugeAnswer { bytes: 1 << 40 }]), ..MockConfig::default() }).await.unwrap();
            let record = capped_client(64 * 1024).call_recorded(&mock_endpoint(&server, kind, "m"), &ask("hi")).await;
            assert_eq!(record.result, Err(CallError::ResponseTooLarge { limit: 64 * 1024 }), "{kind}");
            assert_eq!(record.attempts, 1, "{kind}: a too-large body is not retried");
            assert!(record.result.unwrap_err().to_string().contains("65536-byte cap"), "the error names the cap");
        }
    }

    #[tokio::test]
    async fn body_under_the_cap_is_an_answer_and_declared_oversize_fails_early() {
        let server = MockServer::start(MockConfig {
            faults: FaultPlan::sequence([Fault::HugeAnswer { bytes: 200_000 }, Fault::Status { status: 400, message: "z".repeat(5000) }]),
            ..MockConfig::default()
        })
        .await
        .unwrap();
        let client = capped_client(256 * 1024);
        let endpoint = mock_endpoint(&server, ProviderKind::OpenAi, "m");
        let outcome = client.call(&endpoint, &ask("hi")).await.unwrap();
        assert_eq!(outcome.response.text.len(), 200_000);
        // A body with a Content-Length over the cap is refused before it is read.
        let small = capped_client(1024);
        assert_eq!(small.call(&endpoint, &ask("hi")).await.unwrap_err(), CallError::ResponseTooLarge { limit: 1024 });
    }

    /// The model may echo the key: the answer stays an answer, with the key redacted in
    /// text, reasoning and tool-call arguments.
    #[tokio::test]
    async fn answer_echoing_the_key_is_returned_redacted() {
        let server = MockServer::start(MockConfig {
            script: Script::function(|request| {
                MockOutcome::Reply(MockReply {
                    reasoning: Some(format!("the header said {}", request.api_key)),
                    ..MockReply::text(format!("your key is {}!", request.api_key))
                })
            }),
            ..MockConfig::default()
        })
        .await
        .unwrap();
        let tools = MockServer::start(MockConfig {
            script: Script::function(|request| {
                MockOutcome::Reply(MockReply {
                    tool_calls: vec![ToolCall {
                        id: "call_1".into(),
                        name: "store".into(),
                        arguments: json!({"key": request.api_key, "nested": [{"k": request.api_key}]}),
                    }],
                    ..MockReply::text("")
                })
            }),
            ..MockConfig::default()
        })
        .await
        .unwrap();
        let client = quick_client();
        for kind in KINDS {
            let response = client.call(&mock_endpoint(&server, kind, "m"), &ask("hi")).await.unwrap().response;
            assert_eq!(response.text, "your key is [REDACTED]!", "{kind}");
            let response = client.call(&mock_endpoint(&tools, kind, "m"), &ask("hi")).await.unwrap().response;
            assert_eq!(response.tool_calls[0].arguments["key"], "[REDACTED]", "{kind}");
            assert!(!format!("{response:?}").contains(KEY), "{kind}: {response:?}");
        }
    }

    /// A timed-out attempt is retried only while a whole attempt fits the remaining budget.
    #[tokio::test]
    async fn a_timeout_is_not_retried_when_the_budget_cannot_fit_another_attempt() {
        let server = MockServer::start(MockConfig { faults: FaultPlan::rate(1.0, vec![Fault::Slow(Duration::from_secs(30))], 1), ..MockConfig::default() })
            .await
            .unwrap();
        let endpoint = mock_endpoint(&server, ProviderKind::OpenAi, "m");
        let retry = |total_ms| RetryPolicy { total_timeout: Duration::from_millis(total_ms), ..quick_config().retry };
        // 400 ms attempts in a 700 ms budget: after the first, 300 ms are left.
        let record = client_with(retry(700), ConcurrencyMode::default()).call_recorded(&endpoint, &ask("x")).await;
        assert_eq!((record.attempts, record.result.unwrap_err().class()), (1, "timeout"));
        // In a 2 s budget the second and third attempts fit, the fourth does not.
        let record = client_with(retry(2000), ConcurrencyMode::default()).call_recorded(&endpoint, &ask("x")).await;
        assert!((2..=4).contains(&record.attempts), "{} attempts", record.attempts);
    }
}
