//! A real HTTP/1.1 server on 127.0.0.1 that speaks the OpenAI (Chat Completions and Responses), Anthropic and Gemini
//! success and error shapes, for tests and benchmarks that must never touch the internet.
//!
//! One fallback handler routes by path (`/v1/chat/completions`, `/v1/responses` and, in background
//! mode, `/v1/responses/{id}[/cancel]`, `/v1/messages`,
//! `/v1beta/models/{model}:generateContent` or `:streamGenerateContent`), logs the request, checks the key if asked to,
//! waits the configured latency, then renders a fault from the [`FaultPlan`] or the
//! [`Script`]'s reply (rendered by [`super::render`], as server-sent events by
//! [`super::stream`] when the request asks for a stream).

use std::collections::BTreeMap;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use super::super::types::ProviderKind;
use super::alarm::Alarm;
use super::background::{Jobs, stored_route};
use super::dialects::wire;
use super::render::{answer_response, error_response, fault_response, json_response, overflow_response, recorded_response, strings, success_body};
use super::script::{Fault, FaultPlan, MockOutcome, MockReply, MockRequest, RetryHeader, Script, echo};
use super::stream::{Ending, Pace, recorded_frames, sse_response};

/// How the mock behaves; everything but the address can be changed while it runs.
#[derive(Debug, Clone)]
pub struct MockConfig {
    /// Where replies come from.
    pub script: Script,
    /// Which calls fail.
    pub faults: FaultPlan,
    /// Delay before every response (faults included).
    pub latency: Duration,
    /// Model name reported in responses; `None` reports the requested model.
    pub answered_model: Option<String>,
    /// If set, requests must carry this key or get a 401 that echoes the key they sent.
    pub require_api_key: Option<String>,
    /// Keep a log of requests (turn off for long benchmarks).
    pub record_log: bool,
    /// Path every route sits under instead of the public APIs' `/v1` (`/v1beta` for
    /// Gemini), e.g. `/api/paas/v4`, to check that base URLs are used as given.
    pub path_prefix: Option<String>,
    /// Answer 400, as the real APIs do, to a tool round that replays a function call
    /// without the reasoning signatures the mock issued (Anthropic with thinking on:
    /// signed thinking blocks first in the assistant turn; Gemini: the `thoughtSignature`
    /// on the first `functionCall` part, issued for Gemini 3 models and thinking requests).
    pub require_signatures: bool,
    /// Polls a Responses API call in background mode takes: its POST answers `queued`,
    /// the polls before this one `in_progress`, this one the answer.
    pub background_polls: u32,
    /// Pause between the events of a streamed reply (zero: all at once), to pace tokens
    /// like a model generating them.
    pub stream_interval: Duration,
    /// The model's context window in tokens (a token being 4 bytes of the request body): a
    /// longer request is refused with HTTP 400 in the protocol's documented overflow shape.
    pub context_window: Option<u64>,
    /// Requests served at once, as a llama.cpp server's `--parallel` slots: later ones wait
    /// in a queue, sending nothing, until a slot is free (`None`: no limit).
    pub slots: Option<usize>,
}

impl Default for MockConfig {
    /// Echo script, no faults, no latency, logging on.
    fn default() -> Self {
        Self {
            script: Script::Echo,
            faults: FaultPlan::default(),
            latency: Duration::ZERO,
            answered_model: None,
            require_api_key: None,
            record_log: true,
            path_prefix: None,
            require_signatures: false,
            background_polls: 3,
            stream_interval: Duration::ZERO,
            context_window: None,
            slots: None,
        }
    }
}

/// One request as received, for assertions.
#[derive(Debug, Clone, PartialEq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Request path.
    pub path: String,
    /// Query string (empty when none), e.g. Gemini's `alt=sse`.
    pub query: String,
    /// Headers, names lowercased.
    pub headers: BTreeMap<String, String>,
    /// Parsed JSON body (`Null` if it was not JSON).
    pub body: Value,
    /// Arrival time since the server started.
    pub at: Duration,
}

struct Shared {
    started: Instant,
    config: Mutex<MockConfig>,
    log: Mutex<Vec<LoggedRequest>>,
    calls: AtomicU64,
    /// Requests on known routes being answered right now (benchmarks sample it).
    in_flight: AtomicU64,
    /// Requests answered and the microseconds they were held in all: the latency the mock
    /// really served, beside the one it was asked for.
    held: (AtomicU64, AtomicU64),
    cursors: Mutex<BTreeMap<ProviderKind, u64>>,
    jobs: Jobs,
    /// The slots of [`MockConfig::slots`].
    slots: Option<tokio::sync::Semaphore>,
    /// Wakes answers at their latency's deadline.
    alarm: Alarm,
}

/// A running mock provider; dropping it stops the server.
#[derive(Debug)]
pub struct MockServer {
    address: SocketAddr,
    base_url: String,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared").field("calls", &self.calls).finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl MockServer {
    /// Binds 127.0.0.1 on a free port and starts serving in the background.
    ///
    /// # Errors
    /// The bind error if no local port is available.
    pub async fn start(config: MockConfig) -> io::Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let address = listener.local_addr()?;
        let slots = config.slots.map(|n| tokio::sync::Semaphore::new(n.max(1)));
        let shared = Arc::new(Shared {
            slots,
            alarm: Alarm::start(),
            started: Instant::now(),
            config: Mutex::new(config),
            log: Mutex::new(Vec::new()),
            calls: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            held: (AtomicU64::new(0), AtomicU64::new(0)),
            cursors: Mutex::new(BTreeMap::new()),
            jobs: Jobs::default(),
        });
        let router = Router::new().fallback(handle).with_state(Arc::clone(&shared));
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            axum::serve(listener, router)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await
        });
        Ok(Self { address, base_url: format!("http://{address}"), shared, stop: Some(stop), task: Some(task) })
    }

    /// `http://127.0.0.1:<port>`, to use as an endpoint's base URL.
    #[must_use]
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The bound socket address.
    #[must_use]
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// All requests so far, in arrival order.
    #[must_use]
    pub fn request_log(&self) -> Vec<LoggedRequest> {
        lock(&self.shared.log).clone()
    }

    /// Number of requests handled on known routes.
    #[must_use]
    pub fn calls(&self) -> u64 {
        self.shared.calls.load(Ordering::SeqCst)
    }

    /// Requests on known routes in progress now: how full a client keeps its concurrency.
    #[must_use]
    pub fn in_flight(&self) -> u64 {
        self.shared.in_flight.load(Ordering::Relaxed)
    }

    /// How long the mock held a request on average, from its arrival in the handler to its
    /// answer (benchmarks: the configured latency plus what the mock itself spent); `None`
    /// before the first answer.
    #[must_use]
    pub fn mean_hold(&self) -> Option<Duration> {
        let (count, micros) = (self.shared.held.0.load(Ordering::Relaxed), self.shared.held.1.load(Ordering::Relaxed));
        (count > 0).then(|| Duration::from_micros(micros / count))
    }

    /// Replaces the fault plan; the global call index keeps counting.
    pub fn set_faults(&self, faults: FaultPlan) {
        lock(&self.shared.config).faults = faults;
    }

    /// Replaces the script and resets the per-route sequence cursors.
    pub fn set_script(&self, script: Script) {
        lock(&self.shared.config).script = script;
        lock(&self.shared.cursors).clear();
    }

    /// Changes the context window of later requests (`None`: any length fits), as a user
    /// restarting a server with a larger context does.
    pub fn set_context_window(&self, window: Option<u64>) {
        lock(&self.shared.config).context_window = window;
    }

    /// Changes the latency of later responses.
    pub fn set_latency(&self, latency: Duration) {
        lock(&self.shared.config).latency = latency;
    }

    /// Changes how many polls a background response takes, for responses already queued
    /// too: `u32::MAX` keeps them `in_progress` (a run interrupted mid-poll), a small number
    /// lets them finish at their next poll.
    pub fn set_background_polls(&self, polls: u32) {
        lock(&self.shared.config).background_polls = polls;
    }

    /// Stops accepting connections and waits (at most 2 s) for in-flight ones.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task).await.is_err() {
                abort.abort();
            }
        }
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

/// What to send, decided under the config lock, rendered after the latency sleep.
enum Plan {
    Fault(Fault, MockRequest),
    /// A whole answer, rendered before the latency wait.
    Rendered(Response),
    Reply(MockReply, MockRequest),
    Recorded(u16, String),
    RecordedStream(String),
    Exhausted(ProviderKind),
}

/// One request counted in [`Shared::in_flight`] until its answer is rendered, and its time
/// held added to [`Shared::held`] then.
struct InFlight<'a> {
    gauge: &'a AtomicU64,
    held: &'a (AtomicU64, AtomicU64),
    arrived: tokio::time::Instant,
}

impl<'a> InFlight<'a> {
    fn enter(gauge: &'a AtomicU64, held: &'a (AtomicU64, AtomicU64), arrived: tokio::time::Instant) -> Self {
        gauge.fetch_add(1, Ordering::Relaxed);
        Self { gauge, held, arrived }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.gauge.fetch_sub(1, Ordering::Relaxed);
        self.held.0.fetch_add(1, Ordering::Relaxed);
        self.held.1.fetch_add(u64::try_from(self.arrived.elapsed().as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

async fn handle(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    // The latency counts from here: parsing and rendering happen inside it, as on a server
    // whose answers take that long.
    let arrived = tokio::time::Instant::now();
    let path = uri.path().to_owned();
    let tokens = (body.len() as u64).div_ceil(4);
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let prefix = lock(&shared.config).path_prefix.clone();
    // The model list, as vLLM serves it: with the context window when one is set.
    if method == Method::GET && path == format!("{}/models", prefix.as_deref().unwrap_or("/v1")) {
        let window = lock(&shared.config).context_window;
        let model = lock(&shared.config).answered_model.clone().unwrap_or_else(|| "mock".into());
        return json_response(
            StatusCode::OK,
            &json!({"object": "list", "data": [{"id": model, "object": "model", "owned_by": "mock", "max_model_len": window}]}),
        );
    }
    let stored = stored_route(&path, prefix.as_deref().unwrap_or("/v1"));
    let Some((protocol, url_model, gemini_stream)) =
        stored.as_ref().map(|_| (ProviderKind::OpenAiResponses, None, false)).or_else(|| route(&path, prefix.as_deref()))
    else {
        return json_response(StatusCode::NOT_FOUND, &json!({"error": {"message": format!("no route {path}")}}));
    };
    let index = shared.calls.fetch_add(1, Ordering::SeqCst);
    let _in_flight = InFlight::enter(&shared.in_flight, &shared.held, arrived);
    let (latency, required_key, answered_model, record, require_signatures, interval) = {
        let config = lock(&shared.config);
        (config.latency, config.require_api_key.clone(), config.answered_model.clone(), config.record_log, config.require_signatures, config.stream_interval)
    };
    let pace = Pace { interval, stall: None };
    if record {
        lock(&shared.log).push(LoggedRequest {
            method: method.to_string(),
            path: path.clone(),
            query: uri.query().unwrap_or_default().to_owned(),
            headers: headers.iter().map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned())).collect(),
            body: body.clone(),
            at: shared.started.elapsed(),
        });
    }
    let wire = wire(protocol);
    let given = wire.presented_key(&headers);
    if let Some(required) = required_key
        && given != required
    {
        let message = format!("Incorrect API key provided: {given}");
        return error_response(wire, 401, &message, RetryHeader::None);
    }
    if let Some(window) = lock(&shared.config).context_window
        && tokens > window
        && stored.is_none()
    {
        return overflow_response(wire, tokens, window);
    }
    if let Some(message) = require_signatures.then(|| wire.missing_signature(&body)).flatten() {
        return error_response(wire, 400, &message, RetryHeader::None);
    }
    if let Some((id, cancel)) = stored {
        return stored_response(&shared, index, &id, cancel, answered_model.as_deref()).await;
    }
    if let Some(message) = wire.refusal(&body) {
        return error_response(wire, 400, message, RetryHeader::None);
    }
    let background = wire.background(&body);
    let described = describe(protocol, url_model, body);
    let stream = gemini_stream || wire.asks_stream(&described.body);
    let request = MockRequest { api_key: given, stream, ..described };
    let plan = plan(&shared, index, request);
    // Held until the answer is rendered; never closed, so acquiring cannot fail. A request
    // waiting for a slot is queued: its latency starts once it has one.
    let (_slot, begun) = match &shared.slots {
        Some(slots) => (slots.acquire().await.ok(), tokio::time::Instant::now()),
        None => (None, arrived),
    };
    // A whole (unstreamed) answer is rendered before the wait, so it leaves at the deadline.
    let plan = match plan {
        Plan::Reply(reply, request) if !background && !request.stream => {
            Plan::Rendered(answer_response(wire, &request, &reply, answered_model.as_deref(), pace))
        }
        other => other,
    };
    if !latency.is_zero() {
        shared.alarm.sleep_until(begun + latency).await;
    }
    match plan {
        Plan::Rendered(response) => response,
        Plan::Exhausted(protocol) => error_response(super::dialects::wire(protocol), 410, "mock script exhausted", RetryHeader::None),
        Plan::Reply(reply, request) if background => {
            json_response(StatusCode::OK, &shared.jobs.queue(index, success_body(wire, &request, &reply, answered_model.as_deref())))
        }
        Plan::Recorded(200, body) if background => match serde_json::from_str::<Value>(&body) {
            Ok(answer) => json_response(StatusCode::OK, &shared.jobs.queue(index, answer)),
            Err(_) => recorded_response(200, body),
        },
        Plan::Reply(reply, request) => answer_response(wire, &request, &reply, answered_model.as_deref(), pace),
        Plan::Recorded(status, body) => recorded_response(status, body),
        Plan::RecordedStream(body) => sse_response(recorded_frames(&body), Ending::Whole, pace),
        Plan::Fault(fault, request) => fault_response(wire, fault, &request, answered_model.as_deref(), pace).await,
    }
}

/// A poll or cancel of a background response: a fault from the plan if one is due,
/// else its state (404 for an unknown id).
async fn stored_response(shared: &Shared, index: u64, id: &str, cancel: bool, answered_model: Option<&str>) -> Response {
    let protocol = ProviderKind::OpenAiResponses;
    let wire = wire(protocol);
    let (fault, latency, polls) = {
        let config = lock(&shared.config);
        (config.faults.decide(index), config.latency, config.background_polls)
    };
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    if let Some(fault) = fault {
        return fault_response(wire, fault, &describe(protocol, None, Value::Null), answered_model, Pace::default()).await;
    }
    let state = if cancel { shared.jobs.cancel(id) } else { shared.jobs.poll(id, polls) };
    match state {
        Some(state) => json_response(StatusCode::OK, &state),
        None => error_response(wire, 404, &format!("No response found with id '{id}'."), RetryHeader::None),
    }
}

fn plan(shared: &Shared, index: u64, request: MockRequest) -> Plan {
    let config = lock(&shared.config);
    if let Some(fault) = config.faults.decide(index) {
        return Plan::Fault(fault, request);
    }
    let route_index = {
        let mut cursors = lock(&shared.cursors);
        let cursor = cursors.entry(request.protocol).or_insert(0);
        *cursor += 1;
        *cursor - 1
    };
    let request = MockRequest { route_index, ..request };
    let outcome = match &config.script {
        Script::Echo => MockOutcome::Reply(echo(&request)),
        Script::Sequence(items) => match usize::try_from(route_index).ok().and_then(|at| items.get(at)) {
            Some(outcome) => outcome.clone(),
            None => return Plan::Exhausted(request.protocol),
        },
        Script::Function(reply) => reply(&request),
    };
    match outcome {
        MockOutcome::Reply(reply) => Plan::Reply(reply, request),
        MockOutcome::Fault(fault) => Plan::Fault(fault, request),
        MockOutcome::Recorded { status, body } => Plan::Recorded(status, body),
        MockOutcome::RecordedStream { body } => Plan::RecordedStream(body),
    }
}

/// Protocol, (for Gemini) model and whether Gemini's streaming method was called, from the
/// path, under `prefix` when one is set.
fn route(path: &str, prefix: Option<&str>) -> Option<(ProviderKind, Option<String>, bool)> {
    let (rest, gemini_rest) = match prefix {
        Some(prefix) => {
            let rest = path.strip_prefix(prefix.trim_end_matches('/'))?;
            (rest, rest)
        }
        None => (path.strip_prefix("/v1").unwrap_or("-"), path.strip_prefix("/v1beta").unwrap_or("-")),
    };
    match rest {
        "/chat/completions" => Some((ProviderKind::OpenAi, None, false)),
        "/responses" => Some((ProviderKind::OpenAiResponses, None, false)),
        "/messages" => Some((ProviderKind::Anthropic, None, false)),
        _ => {
            let method = gemini_rest.strip_prefix("/models/")?;
            if let Some(model) = method.strip_suffix(":streamGenerateContent") {
                return Some((ProviderKind::Gemini, Some(model.to_owned()), true));
            }
            let model = method.strip_suffix(":generateContent")?;
            Some((ProviderKind::Gemini, Some(model.to_owned()), false))
        }
    }
}

/// Extracts model, turns and the reasoning request from a body in any protocol.
fn describe(protocol: ProviderKind, url_model: Option<String>, body: Value) -> MockRequest {
    let empty = Vec::new();
    let (turns_key, content_key) = wire(protocol).turns();
    let turns = body.get(turns_key).and_then(Value::as_array).unwrap_or(&empty);
    let last_user = turns
        .iter()
        .rev()
        .find(|turn| turn.get("role").and_then(Value::as_str) == Some("user"))
        .map(|turn| strings(turn.get(content_key), "/text").concat())
        .unwrap_or_default();
    let wants_reasoning = wire(protocol).wants_reasoning(&body);
    let model = url_model.unwrap_or_else(|| body.get("model").and_then(Value::as_str).unwrap_or_default().to_owned());
    MockRequest { protocol, model, last_user, wants_reasoning, body, route_index: 0, api_key: String::new(), stream: false }
}

#[cfg(test)]
mod tests {
    use super::super::super::client::request_fingerprint;
    use super::super::super::error::CallError;
    use super::super::super::testing::{KEY, ask, mock_endpoint, quick_client};
    use super::super::super::types::{Endpoint, canonical_json};
    use super::*;

    #[tokio::test]
    async fn scripted_lookup_and_stable_bodies() {
        let mut replies = std::collections::BTreeMap::new();
        replies.insert(super::super::prompt_hash("what is 2+2?"), MockReply::text("4"));
        let server = MockServer::start(MockConfig { script: Script::lookup(replies), ..MockConfig::default() }).await.unwrap();
        let endpoint = mock_endpoint(&server, ProviderKind::Gemini, "m");
        let client = quick_client();
        let first = client.call(&endpoint, &ask("what is 2+2?")).await.unwrap();
        let second = client.call(&endpoint, &ask("what is 2+2?")).await.unwrap();
        assert_eq!(first.response.text, "4");
        assert_eq!(client.call(&endpoint, &ask("other")).await.unwrap().response.text, "echo: other");
        assert_eq!(canonical_json(&first.request_body), canonical_json(&second.request_body));
        let fingerprint = request_fingerprint(&endpoint, &ask("what is 2+2?"));
        assert_eq!(fingerprint["model"], "m");
        assert_eq!(fingerprint["body"], first.request_body);
        assert!(!canonical_json(&fingerprint).contains(KEY));
    }

    #[tokio::test]
    async fn sequence_scripts_are_per_route_and_exhaust_loudly() {
        let script = Script::Sequence(vec![MockOutcome::Reply(MockReply::text("one")), MockOutcome::Reply(MockReply::text("two"))]);
        let server = MockServer::start(MockConfig { script, ..MockConfig::default() }).await.unwrap();
        let client = quick_client();
        let openai = mock_endpoint(&server, ProviderKind::OpenAi, "m");
        let gemini = mock_endpoint(&server, ProviderKind::Gemini, "m");
        assert_eq!(client.call(&openai, &ask("x")).await.unwrap().response.text, "one");
        assert_eq!(client.call(&gemini, &ask("x")).await.unwrap().response.text, "one");
        assert_eq!(client.call(&openai, &ask("x")).await.unwrap().response.text, "two");
        let exhausted = client.call(&openai, &ask("x")).await.unwrap_err();
        assert_eq!(exhausted, CallError::BadRequest { status: 410, message: "mock script exhausted".into() });
        let unknown = Endpoint { base_url: format!("{}/nowhere", server.base_url()), ..openai.clone() };
        assert_eq!(client.call(&unknown, &ask("x")).await.unwrap_err().class(), "bad_request");
        server.shutdown().await;
        assert_eq!(client.call(&openai, &ask("x")).await.unwrap_err().class(), "connect");
    }
}
