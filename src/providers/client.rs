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

use serde_json::{Value, json};
use tokio::time::{Instant, sleep, timeout_at};

use super::attempt::AttemptClass;
use super::background::{self, ResponseLedger, Submitted};
use super::error::CallError;
use super::limiter::{ConcurrencyMode, Feedback, Limiter, LimiterSnapshot, Permit};
use super::pacer::{PaceTicket, Pacer, PacerSnapshot};
use super::shaping::{REASONING_TAG, Shaping};
use super::slots::{LaneSlots, ServerSlots};
use super::stop::StopSwitch;
use super::stream::{streamed_body, streamed_url};
use super::transport::{self, ClientConfig, Wire, request_headers};
use super::types::{Answered, ChatRequest, ChatResponse, Endpoint, HeaderValueOf, ProviderKind, answered_as, answered_at};

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
    /// How the model the server says answered relates to the one asked for (`Same` until
    /// an answer came).
    pub answered: Answered,
}

/// What a caller hands one call beyond its endpoint and request.
#[derive(Default)]
pub struct CallOptions<'a> {
    /// The body, when the caller built it already (for the call's key): built once per call.
    pub body: Option<Value>,
    /// `body`'s canonical encoding, when the caller has it (cut from the call's key
    /// encoding): sent as it is, so the prompt is not encoded again.
    pub encoded: Option<Vec<u8>>,
    /// Where a background-mode call keeps its response id, so an interrupted call is polled,
    /// not sent again, by the next run.
    pub ledger: Option<&'a dyn ResponseLedger>,
    /// The model's stop switch, checked at the last moment before each attempt is sent.
    pub stop: Option<&'a StopSwitch>,
}

/// Everything that paces one (provider, base URL, model): calls to the same model share
/// its rate limit, so they share one concurrency limiter and one pacer.
#[derive(Debug)]
pub struct Lane {
    /// Requests in flight (AIMD, down to 1).
    pub limiter: Limiter,
    /// Request starts per second (learned from 429s and headers).
    pub pacer: Pacer,
    /// The server's slot count, read once where it is llama.cpp-like; it caps `limiter`.
    pub slots: LaneSlots,
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

/// The model part of the lane key of a server evalgrid started (all its entries share it).
const SERVED_LANE: &str = "served";

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
    request_fingerprint_of(endpoint, request, &request_body(endpoint, request))
}

/// [`request_fingerprint`] of a body already built with [`request_body`], so a caller that
/// keys the call and then sends it builds the body once.
#[must_use]
pub fn request_fingerprint_of(endpoint: &Endpoint, request: &ChatRequest, body: &Value) -> Value {
    let mut fingerprint = json!({
        "kind": endpoint.kind,
        "model": endpoint.model,
        "base_url": endpoint.base_url.trim_end_matches('/'),
        "body": body,
    });
    if let Some(served) = &endpoint.served {
        // A server evalgrid started: its weights and settings, never its port.
        fingerprint["base_url"] = Value::Null;
        fingerprint["served"] = served.clone();
    } else {
        let url = request_url(endpoint);
        if url != legacy_request_url(endpoint) {
            fingerprint["url"] = Value::String(url);
        }
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
    if let Some(tag) = request.params.get(REASONING_TAG) {
        fingerprint["reasoning_tag"] = tag.clone();
    }
    fingerprint
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
        let http = transport::http_client(&config)?;
        Ok(Self { http, config, lanes: Mutex::new(HashMap::new()), halted: Mutex::new(None) })
    }

    /// Stops every request not yet on the wire, also those already waiting for a slot: they
    /// fail with [`CallError::Halted`]. For a run that can no longer keep answers (its
    /// cache disk is full), where every answer received now would be paid for nothing.
    pub fn halt(&self, reason: &str) {
        self.halted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).get_or_insert_with(|| reason.to_owned());
    }

    /// The shared HTTP client, for requests beside calls (the batch API).
    #[must_use]
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// Why no request may be sent any more, once the run was halted.
    #[must_use]
    pub fn halted_reason(&self) -> Option<String> {
        self.halted.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
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
        let base = endpoint.base_url.trim_end_matches('/').to_owned();
        let served = self.config.served_lanes.get(&base).copied();
        // One lane per server evalgrid started: its slots, shared by every entry it serves.
        let key = match served {
            Some(_) => (ProviderKind::OpenAi, base, SERVED_LANE.to_owned()),
            None => (endpoint.kind, base, endpoint.model.clone()),
        };
        let concurrency = served.map_or(self.config.concurrency, |slots| ConcurrencyMode::Static { max_concurrency: slots.max(1) });
        // A server evalgrid started has exactly its configured slots: nothing to read.
        let slots = if served.is_some() { ServerSlots::Off } else { self.config.server_slots };
        let mut lanes = self.lanes.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            lanes
                .entry(key)
                .or_insert_with(|| Arc::new(Lane { limiter: Limiter::new(concurrency), pacer: Pacer::new(self.config.pacing), slots: LaneSlots::new(slots) })),
        )
    }

    /// The slot count `endpoint`'s server reported, the first time it is asked for after
    /// it capped the lane (so the run log says it once); `None` otherwise.
    pub fn slot_news(&self, endpoint: &Endpoint) -> Option<usize> {
        self.lane(endpoint).slots.news()
    }

    /// Reads the lane's server slots when they are wanted now ([`LaneSlots`]) and caps the
    /// lane at them, before the next request is sent.
    async fn read_slots(&self, endpoint: &Endpoint, wire: &Wire, lane: &Lane) {
        if lane.slots.wanted() {
            lane.slots.read(&self.http, &endpoint.base_url, &wire.headers, &lane.limiter).await;
        }
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
        self.call_with(endpoint, request, CallOptions { ledger, ..CallOptions::default() }).await
    }

    /// Like [`Self::call_resumable`], with the caller's body and stop switch ([`CallOptions`]).
    pub async fn call_with(&self, endpoint: &Endpoint, request: &ChatRequest, options: CallOptions<'_>) -> CallRecord {
        let CallOptions { body, encoded, ledger, stop } = options;
        // Bytes of a body the caller did not hand over are not that body's.
        let encoded = encoded.filter(|_| body.is_some());
        let request_body = body.unwrap_or_else(|| request_body(endpoint, request));
        // A background call is polled, never streamed.
        let background = endpoint.background && endpoint.kind.protocol().polls_in_background();
        let streamed = !background && endpoint.stream.streams(endpoint.kind, &request_body);
        let started = Instant::now();
        let mut record = CallRecord {
            result: Err(CallError::Timeout),
            attempts: 0,
            failed_attempts: Vec::new(),
            request_body,
            elapsed: Duration::ZERO,
            streamed,
            answered: Answered::Same,
        };
        match wire(endpoint, request, (&record.request_body, encoded), streamed, background) {
            Ok(wire) => self.attempt_loop(endpoint, &wire, started, &mut record, (ledger, stop)).await,
            Err(error) => record.result = Err(error),
        }
        record.result = redacted(endpoint, std::mem::replace(&mut record.result, Err(CallError::Timeout)));
        record.elapsed = started.elapsed();
        record
    }

    async fn attempt_loop(
        &self,
        endpoint: &Endpoint,
        wire: &Wire,
        started: Instant,
        record: &mut CallRecord,
        (ledger, stop): (Option<&dyn ResponseLedger>, Option<&StopSwitch>),
    ) {
        let lane = self.lane(endpoint);
        let mut budget = Budget { started, total: self.config.retry.total_timeout, streaming: Duration::ZERO, failures: 0, rate_limits: 0 };
        self.read_slots(endpoint, wire, &lane).await;
        loop {
            let deadline = budget.deadline();
            let Some((permit, ticket)) = self.slot(&lane, deadline, record, stop).await else { return };
            record.attempts += 1;
            let sent = Instant::now();
            let Submitted { result, resubmit } = self.submit(endpoint, wire, &lane, deadline, ledger).await;
            let attempt_time = sent.elapsed();
            if wire.streamed {
                budget.streaming += attempt_time;
            }
            settle_lane(&lane, permit, ticket, &result);
            self.read_slots(endpoint, wire, &lane).await;
            let error = match result {
                Ok(response) => {
                    let (response, answered) = answered(endpoint, response, sent);
                    (record.result, record.answered) = (Ok(response), answered);
                    return;
                }
                Err(error) => error,
            };
            record.failed_attempts.push(AttemptClass::of(&error));
            let delay = if resubmit { self.retry_delay(wire, &error, deadline, attempt_time, &mut budget) } else { None };
            log_failed_attempt(endpoint, record.attempts, &error, delay);
            record.result = Err(error);
            match delay {
                Some(delay) => sleep(delay).await,
                None => return,
            }
        }
    }

    /// Waits for a concurrency slot and the pacer within the call's budget; `None` (with the
    /// reason in `record`) when the budget ran out or the run or lane was halted meanwhile.
    async fn slot<'l>(&self, lane: &'l Lane, deadline: Instant, record: &mut CallRecord, stop: Option<&StopSwitch>) -> Option<(Permit<'l>, PaceTicket)> {
        let Ok(permit) = timeout_at(deadline, lane.limiter.acquire()).await else {
            record.result = Err(CallError::Timeout);
            return None;
        };
        let Ok(ticket) = timeout_at(deadline, lane.pacer.acquire()).await else {
            // Still paced when the budget ran out: the last 429 says why, if there was one.
            if !matches!(record.result, Err(CallError::RateLimited { .. })) {
                record.result = Err(CallError::Timeout);
            }
            return None;
        };
        // Checked at the last moment before sending: calls that waited for a slot while
        // the run was halted are not sent either.
        if let Some(halted) = self.halted().or_else(|| stop.and_then(StopSwitch::halted).map(|reason| CallError::Halted { reason })) {
            record.result = Err(halted);
            return None;
        }
        Some((permit, ticket))
    }

    /// One attempt: polled in background mode, streamed, or sent whole within the budget.
    async fn submit(&self, endpoint: &Endpoint, wire: &Wire, lane: &Lane, deadline: Instant, ledger: Option<&dyn ResponseLedger>) -> Submitted {
        if wire.background {
            // Bounded by the budget inside: it cancels the response when the budget is spent.
            let job = background::Job {
                url: &wire.url,
                kind: endpoint.kind,
                headers: &wire.headers,
                body: &wire.body,
                shaping: &wire.shaping,
                polling: self.config.polling,
                retry: self.config.retry,
                deadline,
                max_response_bytes: self.config.max_response_bytes,
            };
            return background::run(&self.http, &job, &lane.pacer, ledger).await;
        }
        let send = transport::send_once(&self.http, &self.config, endpoint.kind, wire, lane);
        // A stream is bounded by its own idle and total timeouts, not the call's budget.
        let result = if wire.streamed { send.await } else { timeout_at(deadline, send).await.unwrap_or(Err(CallError::Timeout)) };
        Submitted { result, resubmit: true }
    }

    /// How long to wait before sending `error`'s call again, or `None` to stop: the retry
    /// policy, except for attempts that could only fail (or bill) the same way again.
    fn retry_delay(&self, wire: &Wire, error: &CallError, deadline: Instant, attempt_time: Duration, budget: &mut Budget) -> Option<Duration> {
        let policy = self.config.retry;
        let used = budget.used();
        match error {
            // A timed-out attempt is only tried again when a whole attempt still fits the
            // call's budget: a long reasoning call cut by the budget would otherwise be sent,
            // and billed, twice for nothing.
            CallError::Timeout if !wire.streamed && deadline.saturating_duration_since(Instant::now()) < self.config.request_timeout => None,
            // A stream that ran to its total cap is runaway: another would be too.
            CallError::Timeout if wire.streamed && attempt_time >= self.config.stream_total_timeout => None,
            CallError::RateLimited { retry_after } => {
                budget.rate_limits += 1;
                policy.rate_limit_delay(budget.rate_limits, *retry_after, used)
            }
            _ => {
                budget.failures += 1;
                policy.next_delay(budget.failures, error, used)
            }
        }
    }
}

/// A call's time and retry budget across its attempts.
struct Budget {
    started: Instant,
    total: Duration,
    /// Time spent inside streamed attempts: a stream is bounded by its own timeouts (idle
    /// and total), so the time it spends sending does not use up the call's budget, which
    /// bounds only the waiting and the retrying (429s still end when it is spent).
    streaming: Duration,
    /// Failed attempts that use the retry budget (a 429 never does).
    failures: u32,
    /// 429s so far.
    rate_limits: u32,
}

impl Budget {
    fn deadline(&self) -> Instant {
        self.started + self.total + self.streaming
    }

    fn used(&self) -> Duration {
        self.started.elapsed().saturating_sub(self.streaming)
    }
}

/// What every attempt of a call sends: URL, headers, the exact bytes (the keyed body plus
/// the transport's switches, which the recorded body never has) and how the answer is shaped.
/// `encoded` is `body`'s canonical encoding when the caller has it: the same bytes
/// serde_json writes (its maps keep keys sorted), sent as they are.
fn wire(endpoint: &Endpoint, request: &ChatRequest, (body, encoded): (&Value, Option<Vec<u8>>), streamed: bool, background: bool) -> Result<Wire, CallError> {
    let switched = if background {
        Some(background::wire_body(body))
    } else if streamed {
        Some(streamed_body(endpoint.kind, body))
    } else {
        None
    };
    let bytes = match (switched, encoded) {
        (None, Some(encoded)) => {
            debug_assert_eq!(serde_json::to_vec(body).ok().as_deref(), Some(encoded.as_slice()), "a body's canonical encoding is what serde_json writes");
            encoded
        }
        (switched, _) => serde_json::to_vec(switched.as_ref().unwrap_or(body))
            .map_err(|error| CallError::Config { detail: format!("cannot serialize request body: {error}") })?,
    };
    let headers = request_headers(endpoint)?;
    let shaping = Shaping::for_call(request, &endpoint.base_url);
    let url = if streamed { streamed_url(endpoint.kind, &request_url(endpoint)) } else { request_url(endpoint) };
    Ok(Wire { url, headers, body: bytes, shaping, streamed, background })
}

/// A call's outcome with every secret the request carried (the key and secret header values)
/// redacted, on the whole text first (error messages are truncated only after that). A prompt
/// longer than the context is the model's outcome, not an error: answered, cached and scored
/// as `context_exceeded` (the message is redacted first).
fn redacted(endpoint: &Endpoint, result: Result<ChatResponse, CallError>) -> Result<ChatResponse, CallError> {
    let secrets = endpoint.secrets();
    match result {
        Ok(response) => Ok(secrets.iter().fold(response, |response, secret| response.redact(secret))),
        Err(error @ CallError::ContextExceeded { .. }) => match error.redact_all(&secrets) {
            CallError::ContextExceeded { message } => Ok(ChatResponse::context_exceeded(message)),
            other => Err(other),
        },
        Err(error) => Err(error.redact_all(&secrets)),
    }
}

/// One failed attempt in the trace log (a stall, `class = stream_stalled`, is also said in
/// the run log by the caller).
fn log_failed_attempt(endpoint: &Endpoint, attempt: u32, error: &CallError, delay: Option<Duration>) {
    tracing::info!(
        provider = %endpoint.kind,
        model = %endpoint.model,
        attempt,
        class = error.class(),
        retry_in_ms = delay.map(|delay| delay.as_millis()),
        "model call attempt failed"
    );
}

/// Tells the lane how the attempt went: a 429 pauses its pacer (before the permit is freed,
/// so no waiting request slips past the pause), and the limiter learns from the outcome.
fn settle_lane(lane: &Lane, permit: Permit<'_>, ticket: PaceTicket, result: &Result<ChatResponse, CallError>) {
    if let Err(CallError::RateLimited { retry_after }) = result {
        lane.pacer.rate_limited(ticket, *retry_after);
    }
    permit.finish(match feedback(result) {
        // The pacer cut the rate already; cutting concurrency too would, after a few events,
        // starve a lane whose limit is a rate, not a concurrency.
        Feedback::RateLimited if ticket.paced() => Feedback::ServerTrouble,
        other => other,
    });
}

/// An answer, with the attempt's latency, and how the model that answered relates to the
/// one asked for (another model answering is logged).
fn answered(endpoint: &Endpoint, mut response: ChatResponse, sent: Instant) -> (ChatResponse, Answered) {
    response.latency_ms = u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX);
    let answered = answered_at(&endpoint.base_url, &endpoint.model, &response.answered_model);
    if answered == Answered::Other {
        tracing::warn!(provider = %endpoint.kind, requested = %endpoint.model, answered = %response.answered_model, "provider answered with a different model than requested");
    }
    (response, answered)
}

#[cfg(test)]
mod tests {
    use super::super::mock::{Fault, FaultPlan, MockConfig, MockOutcome, MockReply, MockServer, RetryHeader, Script};
    use super::super::testing::{KEY, KINDS, ask, client_with, mock_endpoint, quick_client, quick_config};
    use super::super::types::ToolCall;
    use super::*;
    use crate::providers::{ConcurrencyMode, RetryPolicy};

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

    /// Issue 36: a server evalgrid started is one lane of exactly its slots, whatever model
    /// names and protocols its entries send; other servers keep per-model adaptive lanes.
    #[test]
    fn a_served_server_is_one_lane_of_its_slots() {
        let url = "http://127.0.0.1:4100/v1";
        let config = ClientConfig { served_lanes: [(url.to_owned(), 3)].into(), ..quick_config() };
        let client = ProviderClient::new(config).unwrap();
        let at = |kind, model: &str| Endpoint::new(kind, model).with_base_url(url);
        let (a, b) = (client.lane(&at(ProviderKind::OpenAi, "a")), client.lane(&at(ProviderKind::Anthropic, "b")));
        assert!(Arc::ptr_eq(&a, &b), "one lane per served server");
        assert_eq!(a.limiter.snapshot().limit, 3);
        let other = client.lane(&Endpoint::new(ProviderKind::OpenAi, "a").with_base_url("http://127.0.0.1:4200/v1"));
        assert!(!Arc::ptr_eq(&a, &other));
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
