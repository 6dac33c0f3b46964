//! OpenAI Responses API background mode, for calls longer than an HTTP request should stay
//! open (deep research, `*-pro` models thinking for many minutes).
//!
//! A background call POSTs the usual body plus `background: true` and `store: true` (the API
//! requires stored responses for it) and gets a response object that is `queued` or
//! `in_progress`. It then polls `GET {base_url}/responses/{id}` (same auth and headers) after
//! a wait that starts at [`PollConfig::first`] and doubles up to [`PollConfig::max`], until the
//! status is `completed`, `incomplete`, `failed` or `cancelled`, and parses that object as any
//! Responses answer. A poll that fails transiently (5xx, 429, a dropped connection) is polled
//! again, never POSTed again: a second POST would start, and bill, a second run. When the
//! call's time budget runs out the response is cancelled (`POST …/{id}/cancel`) and the call
//! fails with a timeout. Background mode is transport: the call key is the body without
//! `background` and `store`, so a call keys the same with it as without.
//!
//! Interrupted calls are resumed, not cancelled: the response id is handed to the call's
//! [`ResponseLedger`] (the cache, by call key) before the first poll, so when Ctrl-C or a
//! Slurm time limit drops the call, the server keeps working on a run already paid for and
//! the next run of the same call polls that response to its end instead of POSTing the
//! body again. Only a response that is gone (404, 410), `failed` or `cancelled` is sent
//! again. The record is forgotten once the answer is cached (by the caller) or the response
//! ended without one.

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};

use serde_json::Value;
use tokio::time::{Instant, sleep, timeout_at};

use super::error::{CallError, error_in_ok_body, parse_json, success_json};
use super::families::is_openai_api;
use super::pacer::Pacer;
use super::retry::{RateLimitHeaders, RetryPolicy};
use super::shaping::Shaping;
use super::transport::{PollConfig, parse, read_capped, transport_error};
use super::types::{ChatResponse, ProviderKind};
use super::wire::text;

/// Longest wait for the cancel request sent when a call's budget has run out.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether Responses API calls run in background mode (`background:` in a model entry):
/// `auto` (the default) for deep-research and `*-pro` models (o1-pro, o3-pro, gpt-5-pro, …)
/// on `api.openai.com`, or always, or never. Transport only: never part of a key.
pub type Background = super::Switch;

impl Background {
    /// Whether a Responses call to `model` at `base_url` runs in the background.
    #[must_use]
    pub fn applies(self, model: &str, base_url: &str) -> bool {
        match self {
            Self::On => true,
            Self::Off => false,
            Self::Auto => is_openai_api(base_url) && long_running(model),
        }
    }
}

/// The families OpenAI recommends background mode for: deep research and the `*-pro`
/// models, whose answers can take longer than a request should stay open.
fn long_running(model: &str) -> bool {
    let id = model.rsplit('/').next().unwrap_or(model).to_ascii_lowercase();
    id.contains("deep-research") || id.ends_with("-pro") || id.contains("-pro-")
}

/// The body sent in background mode: the keyed body plus `background: true` and the
/// `store: true` the API requires for it.
#[must_use]
pub(super) fn wire_body(body: &Value) -> Value {
    let mut body = body.clone();
    if let Value::Object(map) = &mut body {
        map.insert("background".into(), Value::Bool(true));
        map.insert("store".into(), Value::Bool(true));
    }
    body
}

/// One background call: what it sends and how long it may take.
pub(super) struct Job<'a> {
    /// `POST` URL (`…/responses`), also the base of the poll and cancel URLs.
    pub(super) url: &'a str,
    /// Auth and extra headers, sent with the POST, every poll and the cancel.
    pub(super) headers: &'a HeaderMap,
    /// The wire body ([`wire_body`]).
    pub(super) body: &'a [u8],
    /// The protocol the final response is parsed with.
    pub(super) kind: ProviderKind,
    /// How the final response is parsed.
    pub(super) shaping: &'a Shaping,
    /// Poll waits.
    pub(super) polling: PollConfig,
    /// Bounds consecutive failed polls (`max_attempts`) and their backoff.
    pub(super) retry: RetryPolicy,
    /// The call's time budget: the response is cancelled when it is reached.
    pub(super) deadline: Instant,
    /// Largest body read.
    pub(super) max_response_bytes: u64,
}

/// What a background attempt gave, and whether POSTing again may help: only when no
/// response was created, or the created one ended as `failed` (a new run, as after a 500).
pub(super) struct Submitted {
    /// The parsed final response, or why there is none.
    pub(super) result: Result<ChatResponse, CallError>,
    /// Whether the retry loop may send the POST again.
    pub(super) resubmit: bool,
}

impl Submitted {
    fn retry(result: Result<ChatResponse, CallError>) -> Self {
        Self { result, resubmit: true }
    }

    fn settled(result: Result<ChatResponse, CallError>) -> Self {
        Self { result, resubmit: false }
    }
}

/// The URL of a stored response (`…/responses/{id}`, `/cancel` appended for `cancel`),
/// before any query string the base URL has (Azure's `?api-version=`).
fn response_url(url: &str, id: &str, cancel: bool) -> String {
    let Ok(mut parsed) = reqwest::Url::parse(url) else {
        return if cancel { format!("{url}/{id}/cancel") } else { format!("{url}/{id}") };
    };
    if let Ok(mut segments) = parsed.path_segments_mut() {
        segments.pop_if_empty().push(id);
        if cancel {
            segments.push("cancel");
        }
    }
    parsed.to_string()
}

async fn exchange(http: &reqwest::Client, method: Method, url: &str, job: &Job<'_>, body: &[u8]) -> Result<(StatusCode, HeaderMap, Vec<u8>), CallError> {
    let mut request = http.request(method.clone(), url).headers(job.headers.clone());
    if method == Method::POST {
        request = request.header(CONTENT_TYPE, HeaderValue::from_static("application/json")).body(body.to_vec());
    }
    let response = request.send().await.map_err(transport_error)?;
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = read_capped(response, job.max_response_bytes, None).await?;
    Ok((status, headers, bytes))
}

/// A response object's JSON. Its `status` is read before its `error`: a `failed` run
/// carries an `error` object, and must reach [`finish`] (which sends it again) rather than
/// be polled again as if the poll itself had failed.
fn response_state(status: StatusCode, headers: &HeaderMap, bytes: &[u8]) -> Result<Value, CallError> {
    if status.is_success() {
        let json = parse_json(bytes)?;
        if text(&json, "/status") == "failed" {
            return Ok(json);
        }
    }
    success_json(status, headers, bytes)
}

/// Where a background call's response id is kept between runs (the cache, by call key), so
/// a call interrupted while its response runs is polled again by the next run, never sent
/// (and paid for) again.
pub trait ResponseLedger: Send + Sync {
    /// The response an earlier run of this call started and left running, if recorded.
    fn recorded(&self) -> Option<String>;
    /// Records, durably, the response this call started; called before its first poll.
    fn record(&self, response_id: &str);
    /// Forgets the recorded response: it ended without an answer (failed, cancelled, gone,
    /// given up and cancelled). The caller forgets it too once the answer is cached.
    fn forget(&self);
}

/// How polling a response ended, which says what becomes of its record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Done with an answer: the record goes once the answer is cached.
    Answered,
    /// Done without a usable answer (`completed` but unreadable): a new run may do better.
    Unusable,
    /// The run ended as `failed`: a new run may succeed.
    Failed,
    /// The run was cancelled (by someone else).
    Cancelled,
    /// The server no longer has it (404, 410: expired or never stored).
    Gone,
    /// This call gave up on it (budget spent, polls kept failing) and cancelled it.
    Abandoned,
    /// It cannot be read now (401, 403, 400), which says nothing of the run: kept, so a
    /// later run with working credentials still fetches it.
    Unreadable,
}

impl End {
    fn keeps_record(self) -> bool {
        matches!(self, Self::Answered | Self::Unreadable)
    }

    /// Whether a response recorded by an earlier run has nothing left to give, so the call
    /// is sent again.
    fn resend(self) -> bool {
        matches!(self, Self::Failed | Self::Cancelled | Self::Gone | Self::Unusable)
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Answered => "answered",
            Self::Unusable => "unusable",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Gone => "gone",
            Self::Abandoned => "abandoned",
            Self::Unreadable => "unreadable",
        }
    }
}

/// A polled response's outcome for the call, and how it ended.
struct Polled {
    submitted: Submitted,
    end: End,
}

/// A terminal response object parsed as an answer; `cancelled` is no answer at all, and
/// `failed` is an error (never an answer), which a new run may fix.
fn finish(kind: ProviderKind, status: StatusCode, headers: &HeaderMap, bytes: &[u8], json: &Value, shaping: &Shaping) -> Polled {
    match text(json, "/status").as_str() {
        "cancelled" => {
            Polled { submitted: Submitted::settled(Err(CallError::Protocol { detail: "the background response was cancelled".into() })), end: End::Cancelled }
        }
        "failed" => Polled {
            submitted: Submitted::retry(Err(error_in_ok_body(json, headers).unwrap_or(CallError::Server { status: 200, retry_after: None }))),
            end: End::Failed,
        },
        _ => {
            let result = parse(kind, status, headers, bytes, shaping);
            let end = if result.is_ok() { End::Answered } else { End::Unusable };
            Polled { submitted: Submitted::settled(result), end }
        }
    }
}

fn pending(json: &Value) -> bool {
    matches!(text(json, "/status").as_str(), "queued" | "in_progress")
}

/// Polls the response an earlier run recorded, if any, to its end; else (or when that
/// response has nothing to give) sends the POST, records the new response before its first
/// poll, and polls it until it is done or the budget is spent.
pub(super) async fn run(http: &reqwest::Client, job: &Job<'_>, pacer: &Pacer, ledger: Option<&dyn ResponseLedger>) -> Submitted {
    if let Some((ledger, id)) = ledger.and_then(|ledger| ledger.recorded().map(|id| (ledger, id))) {
        tracing::info!(response = %id, "resuming a background response an earlier run left running, instead of sending the call again");
        // At once: it has been running since the earlier run.
        let polled = poll(http, job, &id, Duration::ZERO).await;
        if !polled.end.keeps_record() {
            ledger.forget();
        }
        if !polled.end.resend() {
            return polled.submitted;
        }
        tracing::info!(response = %id, end = polled.end.as_str(), "the earlier background response has no answer to give; sending the call again");
    }
    let posted = match timeout_at(job.deadline, exchange(http, Method::POST, job.url, job, job.body)).await {
        Ok(Ok(posted)) => posted,
        Ok(Err(error)) => return Submitted::retry(Err(error)),
        Err(_) => return Submitted::retry(Err(CallError::Timeout)),
    };
    let (status, headers, bytes) = posted;
    if let Some(budget) = RateLimitHeaders::from_headers(&headers) {
        pacer.observe_headers(&budget);
    }
    let json = match response_state(status, &headers, &bytes) {
        Ok(json) => json,
        Err(error) => return Submitted::retry(Err(error)),
    };
    if !pending(&json) {
        return finish(job.kind, status, &headers, &bytes, &json, job.shaping).submitted;
    }
    let id = text(&json, "/id");
    if id.is_empty() {
        // Nothing to poll, and POSTing again would start a second run.
        return Submitted::settled(Err(CallError::Protocol { detail: "background response without an `id`".into() }));
    }
    tracing::debug!(response = %id, "background response created; polling it");
    if let Some(ledger) = ledger {
        ledger.record(&id);
    }
    let polled = poll(http, job, &id, job.polling.first).await;
    if let Some(ledger) = ledger
        && !polled.end.keeps_record()
    {
        ledger.forget();
    }
    polled.submitted
}

/// Says, when a poll loop is dropped before its response is done (Ctrl-C, a Slurm time
/// limit), that the response is left running and where its result will be fetched.
struct LeftRunning<'a> {
    id: &'a str,
    armed: bool,
}

impl Drop for LeftRunning<'_> {
    fn drop(&mut self) {
        if self.armed {
            tracing::info!(
                response = self.id,
                "background response left running on the server (call interrupted); the next run polls it instead of sending the call again"
            );
        }
    }
}

async fn poll(http: &reqwest::Client, job: &Job<'_>, id: &str, first: Duration) -> Polled {
    let mut watch = LeftRunning { id, armed: true };
    let polled = poll_until_done(http, job, id, first).await;
    watch.armed = false;
    polled
}

async fn poll_until_done(http: &reqwest::Client, job: &Job<'_>, id: &str, first: Duration) -> Polled {
    let url = response_url(job.url, id, false);
    let mut wait = first;
    let mut failures = 0_u32;
    let started = Instant::now();
    let give_up = |result: Result<ChatResponse, CallError>| Polled { submitted: Submitted::settled(result), end: End::Abandoned };
    loop {
        if Instant::now() + wait >= job.deadline {
            cancel(http, job, id, "the call's time budget ran out").await;
            return give_up(Err(CallError::Timeout));
        }
        sleep(wait).await;
        wait = (wait * 2).min(job.polling.max).max(job.polling.first);
        let polled = match timeout_at(job.deadline, exchange(http, Method::GET, &url, job, &[])).await {
            Ok(Ok((status, _, bytes))) if matches!(status, StatusCode::NOT_FOUND | StatusCode::GONE) => {
                tracing::info!(response = id, status = status.as_u16(), "the background response is gone from the server");
                let error = classify_gone(status, &bytes);
                return Polled { submitted: Submitted::settled(Err(error)), end: End::Gone };
            }
            Ok(Ok((status, headers, bytes))) => response_state(status, &headers, &bytes).map(|json| (status, headers, bytes, json)),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                cancel(http, job, id, "the call's time budget ran out").await;
                return give_up(Err(CallError::Timeout));
            }
        };
        match polled {
            Ok((status, headers, bytes, json)) => {
                if !pending(&json) {
                    return finish(job.kind, status, &headers, &bytes, &json, job.shaping);
                }
                failures = 0;
                tracing::debug!(response = id, status = %text(&json, "/status"), "background response not done yet");
            }
            // A rate limit is pacing: wait as asked, without using up the failed-poll budget.
            Err(CallError::RateLimited { retry_after }) => {
                tracing::info!(response = id, "polling a background response was rate limited; polling again later");
                wait = wait.max(retry_after.unwrap_or(job.polling.max));
            }
            Err(error) if error.is_retryable() => {
                failures += 1;
                tracing::info!(response = id, class = error.class(), failures, "polling a background response failed; polling again (not re-sending)");
                let Some(delay) = job.retry.next_delay(failures, &error, started.elapsed()) else {
                    cancel(http, job, id, "polling it kept failing").await;
                    return give_up(Err(error));
                };
                // `next_delay` honours a `Retry-After`, up to its cap.
                wait = wait.max(delay);
            }
            // 401, 403, 400: the response cannot be read now; sending it again would bill twice.
            Err(error) => {
                tracing::info!(response = id, class = error.class(), "a background response cannot be read; left on the server, not sent again");
                return Polled { submitted: Submitted::settled(Err(error)), end: End::Unreadable };
            }
        }
    }
}

/// The error of a poll answered 404 or 410, as any such answer is classified.
fn classify_gone(status: StatusCode, bytes: &[u8]) -> CallError {
    success_json(status, &HeaderMap::new(), bytes).err().unwrap_or(CallError::Protocol { detail: format!("HTTP {status} for a background response") })
}

/// Best-effort cancel of a response whose call has given up (`why`), so it stops running
/// (and billing); its outcome is only logged.
async fn cancel(http: &reqwest::Client, job: &Job<'_>, id: &str, why: &str) {
    let url = response_url(job.url, id, true);
    let outcome = tokio::time::timeout(CANCEL_TIMEOUT, exchange(http, Method::POST, &url, job, &[])).await;
    let status = match outcome {
        Ok(Ok((status, _, _))) => status.as_u16().to_string(),
        Ok(Err(error)) => error.class().to_owned(),
        Err(_) => "timeout".to_owned(),
    };
    tracing::info!(response = id, outcome = %status, reason = why, "cancelled a background response: the call gave up on it");
}

#[cfg(test)]
mod tests {
    use super::super::client::{request_fingerprint, request_url};
    use super::super::limiter::ConcurrencyMode;
    use super::super::mock::{Fault, FaultPlan, LoggedRequest, MockConfig, MockOutcome, MockReply, MockServer, RetryHeader, Script};
    use super::super::testing::{ask, client_with, mock_endpoint, quick_client, quick_config};
    use super::super::types::{Endpoint, HeaderValueOf, ProviderKind, canonical_json};
    use super::*;
    use serde_json::json;

    fn posts(log: &[LoggedRequest]) -> usize {
        log.iter().filter(|request| request.method == "POST" && request.path == "/v1/responses").count()
    }

    fn polls(log: &[LoggedRequest]) -> Vec<&str> {
        log.iter().filter(|request| request.method == "GET").map(|request| request.path.as_str()).collect()
    }

    fn background_endpoint(server: &MockServer) -> Endpoint {
        mock_endpoint(server, ProviderKind::OpenAiResponses, "o3-pro").with_background(true).with_header("x-tenant", HeaderValueOf::Literal("team-a".into()))
    }

    #[tokio::test]
    async fn a_background_call_is_posted_once_and_polled_until_completed() {
        let server = MockServer::start(MockConfig { background_polls: 3, ..MockConfig::default() }).await.unwrap();
        let outcome = quick_client().call(&background_endpoint(&server), &ask("think long")).await.unwrap();
        assert_eq!(outcome.response.text, "echo: think long");
        assert_eq!((outcome.response.finish_reason.class(), outcome.attempts), ("stop", 1));
        let log = server.request_log();
        assert_eq!(posts(&log), 1);
        assert_eq!((log[0].body["background"].clone(), log[0].body["store"].clone()), (json!(true), json!(true)), "the API requires store: true");
        assert_eq!(polls(&log), ["/v1/responses/resp_bg_0"; 3], "queued, then in_progress twice, then the answer");
        for request in &log {
            assert_eq!(request.headers.get("authorization").map(String::as_str), Some("Bearer sk-test-SECRET-1"), "{}", request.path);
            assert_eq!(request.headers.get("x-tenant").map(String::as_str), Some("team-a"), "{}", request.path);
        }
        assert_eq!(outcome.request_body["store"], false, "the keyed body is the one without background");
        assert!(outcome.request_body.get("background").is_none());
        // Waits grow between polls: 5 ms, 10 ms, 20 ms in the quick configuration.
        assert!(log[3].at - log[1].at >= Duration::from_millis(25), "{:?}", log.iter().map(|r| r.at).collect::<Vec<_>>());
    }

    /// A run that ends `failed` (with the `error` object the API sends) is an error, never
    /// a cached answer, and a new run may succeed: it is POSTed again, not polled to death.
    #[tokio::test]
    async fn a_failed_run_is_posted_again_and_never_answers() {
        let failed = json!({"id": "x", "object": "response", "status": "failed", "background": true, "model": "o3-pro", "output": [],
            "error": {"code": "server_error", "message": "The model failed to generate a response."}, "usage": null});
        let script = Script::Sequence(vec![MockOutcome::Recorded { status: 200, body: failed.to_string() }, MockOutcome::Reply(MockReply::text("second run"))]);
        let server = MockServer::start(MockConfig { script, background_polls: 1, ..MockConfig::default() }).await.unwrap();
        let record = quick_client().call_recorded(&background_endpoint(&server), &ask("x")).await;
        assert_eq!(record.result.map(|response| response.text), Ok("second run".to_owned()));
        let log = server.request_log();
        assert_eq!((posts(&log), polls(&log).len(), record.attempts), (2, 2, 2), "one poll per run, the failed run sent again");
        assert_eq!(record.failed_attempts, [crate::providers::AttemptClass::Server]);
    }

    #[tokio::test]
    async fn a_poll_that_fails_transiently_is_polled_again_never_posted_again() {
        // Call 0 is the POST; calls 1 to 3 (the first three polls) fail, the last with a 429.
        let faults = FaultPlan {
            sequence: vec![None, Some(Fault::ServerError), Some(Fault::Disconnect), Some(Fault::RateLimited(RetryHeader::Millis(30)))],
            ..FaultPlan::default()
        };
        let server = MockServer::start(MockConfig { faults, background_polls: 2, ..MockConfig::default() }).await.unwrap();
        let record = quick_client().call_recorded(&background_endpoint(&server), &ask("x")).await;
        assert_eq!(record.result.map(|response| response.text), Ok("echo: x".to_owned()));
        let log = server.request_log();
        assert_eq!(posts(&log), 1, "re-POSTing would start and bill a second run");
        assert_eq!(polls(&log).len(), 5, "three failed polls, then in_progress, then the answer");
        assert_eq!(record.attempts, 1);
    }

    #[tokio::test]
    async fn polls_that_keep_failing_give_up_without_posting_again() {
        let faults = FaultPlan { sequence: std::iter::once(None).chain((0..10).map(|_| Some(Fault::ServerError))).collect(), ..FaultPlan::default() };
        let server = MockServer::start(MockConfig { faults, ..MockConfig::default() }).await.unwrap();
        let retry = RetryPolicy { max_attempts: 3, ..quick_config().retry };
        let record = client_with(retry, ConcurrencyMode::default()).call_recorded(&background_endpoint(&server), &ask("x")).await;
        assert_eq!(record.result.unwrap_err().class(), "server");
        let log = server.request_log();
        assert_eq!((posts(&log), polls(&log).len()), (1, 3), "max_attempts bounds consecutive failed polls");
        assert_eq!(log.last().unwrap().path, "/v1/responses/resp_bg_0/cancel", "the abandoned run is cancelled");
    }

    #[tokio::test]
    async fn the_response_is_cancelled_when_the_time_budget_runs_out() {
        let server = MockServer::start(MockConfig { background_polls: u32::MAX, ..MockConfig::default() }).await.unwrap();
        let retry = RetryPolicy { total_timeout: Duration::from_millis(300), ..quick_config().retry };
        let record = client_with(retry, ConcurrencyMode::default()).call_recorded(&background_endpoint(&server), &ask("x")).await;
        assert_eq!(record.result, Err(CallError::Timeout));
        assert!(record.elapsed < Duration::from_secs(2), "{:?}", record.elapsed);
        let log = server.request_log();
        assert_eq!(posts(&log), 1);
        assert!(polls(&log).len() >= 5, "polled all along: {}", polls(&log).len());
        let last = log.last().unwrap();
        assert_eq!((last.method.as_str(), last.path.as_str()), ("POST", "/v1/responses/resp_bg_0/cancel"));
        assert_eq!(last.headers.get("authorization").map(String::as_str), Some("Bearer sk-test-SECRET-1"));
    }

    #[tokio::test]
    async fn a_call_answered_at_once_or_failed_before_creation_needs_no_polling() {
        // A server that ignores `background` answers right away: that answer is used.
        let server = MockServer::start(MockConfig::default()).await.unwrap();
        let plain = mock_endpoint(&server, ProviderKind::OpenAiResponses, "m");
        let outcome = quick_client().call(&plain, &ask("x")).await.unwrap();
        assert!(server.request_log()[0].body.get("background").is_none(), "off unless asked for");
        assert_eq!(outcome.response.text, "echo: x");
        // A failed POST created nothing: it is retried like any call (call 1 fails).
        server.set_faults(FaultPlan { sequence: vec![None, Some(Fault::ServerError)], ..FaultPlan::default() });
        let record = quick_client().call_recorded(&background_endpoint(&server), &ask("y")).await;
        assert_eq!((record.attempts, record.failed_attempts.as_slice()), (2, [crate::providers::AttemptClass::Server].as_slice()));
        assert_eq!(record.result.map(|response| response.text), Ok("echo: y".to_owned()));
        let log = server.request_log();
        assert_eq!((posts(&log), polls(&log).len()), (3, 3));
    }

    /// A ledger in memory: the recorded id, and what was done to it in order.
    #[derive(Default)]
    struct Ledger(std::sync::Mutex<(Option<String>, Vec<String>)>);

    impl Ledger {
        fn holding(id: &str) -> Self {
            Self(std::sync::Mutex::new((Some(id.to_owned()), Vec::new())))
        }

        fn state(&self) -> (Option<String>, Vec<String>) {
            self.0.lock().unwrap().clone()
        }
    }

    impl ResponseLedger for Ledger {
        fn recorded(&self) -> Option<String> {
            self.0.lock().unwrap().0.clone()
        }

        fn record(&self, response_id: &str) {
            let mut state = self.0.lock().unwrap();
            state.0 = Some(response_id.to_owned());
            state.1.push(format!("record {response_id}"));
        }

        fn forget(&self) {
            let mut state = self.0.lock().unwrap();
            state.0 = None;
            state.1.push("forget".into());
        }
    }

    /// Starts a background call and drops it (as Ctrl-C drops a cell) once it has polled.
    async fn interrupted_call(server: &MockServer, ledger: &Ledger, prompt: &str) {
        let endpoint = background_endpoint(server);
        let (client, request) = (quick_client(), ask(prompt));
        let call = client.call_resumable(&endpoint, &request, Some(ledger));
        let before = polls(&server.request_log()).len();
        let polled = async {
            while polls(&server.request_log()).len() == before {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        tokio::select! {
            _ = call => panic!("the call ended while its response was in progress"),
            () = polled => {}
        }
    }

    /// Ctrl-C drops a call mid-poll: its response id was recorded before the first poll
    /// and stays recorded, nothing is cancelled, and the next run polls that response to
    /// its end without POSTing the body again; the record stays until the caller caches the
    /// answer.
    #[tokio::test]
    async fn an_interrupted_call_is_resumed_by_polling_never_posted_again() {
        let server = MockServer::start(MockConfig { background_polls: u32::MAX, ..MockConfig::default() }).await.unwrap();
        let ledger = Ledger::default();
        interrupted_call(&server, &ledger, "think long").await;
        assert_eq!(ledger.state(), (Some("resp_bg_0".to_owned()), vec!["record resp_bg_0".to_owned()]));
        let log = server.request_log();
        assert_eq!((posts(&log), log.iter().any(|request| request.path.ends_with("/cancel"))), (1, false), "left running, not cancelled");

        server.set_background_polls(3);
        let record = quick_client().call_resumable(&background_endpoint(&server), &ask("think long"), Some(&ledger)).await;
        assert_eq!(record.result.map(|response| response.text), Ok("echo: think long".to_owned()));
        let log = server.request_log();
        assert_eq!(posts(&log), 1, "the rerun polled the running response instead of POSTing again");
        assert!(polls(&log).iter().all(|path| *path == "/v1/responses/resp_bg_0"));
        assert_eq!(ledger.state().0.as_deref(), Some("resp_bg_0"), "kept until the answer is cached");
    }

    /// A recorded response with nothing to give (gone from the server, failed, cancelled)
    /// is forgotten and the call POSTed once, its new response recorded.
    #[tokio::test]
    async fn a_recorded_response_that_is_gone_failed_or_cancelled_is_sent_again_once() {
        let failed = json!({"id": "x", "object": "response", "status": "failed", "background": true, "model": "o3-pro", "output": [],
            "error": {"code": "server_error", "message": "The model failed to generate a response."}, "usage": null});
        let script = Script::Sequence(vec![
            MockOutcome::Recorded { status: 200, body: failed.to_string() },
            MockOutcome::Reply(MockReply::text("to be cancelled")),
            MockOutcome::Reply(MockReply::text("after failed")),
            MockOutcome::Reply(MockReply::text("after cancelled")),
            MockOutcome::Reply(MockReply::text("after gone")),
        ]);
        let server = MockServer::start(MockConfig { script, background_polls: 1, ..MockConfig::default() }).await.unwrap();
        let http = reqwest::Client::new();
        // resp_bg_0 ends `failed`; resp_bg_1 is cancelled by someone else.
        for prompt in ["a", "b"] {
            server.set_background_polls(u32::MAX);
            interrupted_call(&server, &Ledger::default(), prompt).await;
        }
        server.set_background_polls(1);
        http.post(format!("{}/v1/responses/resp_bg_1/cancel", server.base_url())).send().await.unwrap();
        for (id, expected) in [("resp_bg_0", "after failed"), ("resp_bg_1", "after cancelled"), ("resp_never", "after gone")] {
            let ledger = Ledger::holding(id);
            let before = posts(&server.request_log());
            let record = quick_client().call_resumable(&background_endpoint(&server), &ask("x"), Some(&ledger)).await;
            assert_eq!(record.result.map(|response| response.text), Ok(expected.to_owned()), "{id}");
            let log = server.request_log();
            assert_eq!(posts(&log) - before, 1, "{id}: sent again exactly once");
            let new_id = polls(&log).last().unwrap().trim_start_matches("/v1/responses/").to_owned();
            assert_ne!(new_id, id);
            assert_eq!(ledger.state(), (Some(new_id.clone()), vec!["forget".to_owned(), format!("record {new_id}")]), "{id}");
            assert_eq!(record.attempts, 1, "{id}: no failed attempt counted for the earlier run");
        }
    }

    /// A call that gives up on its response cancels it and forgets it: the next run sends
    /// the call again rather than poll a cancelled run.
    #[tokio::test]
    async fn a_response_given_up_is_cancelled_and_forgotten() {
        let server = MockServer::start(MockConfig { background_polls: u32::MAX, ..MockConfig::default() }).await.unwrap();
        let retry = RetryPolicy { total_timeout: Duration::from_millis(200), ..quick_config().retry };
        let ledger = Ledger::default();
        let record = client_with(retry, ConcurrencyMode::default()).call_resumable(&background_endpoint(&server), &ask("x"), Some(&ledger)).await;
        assert_eq!(record.result, Err(CallError::Timeout));
        assert_eq!(ledger.state(), (None, vec!["record resp_bg_0".to_owned(), "forget".to_owned()]));
        assert_eq!(server.request_log().last().unwrap().path, "/v1/responses/resp_bg_0/cancel");
    }

    #[test]
    fn background_mode_is_not_in_the_call_key() {
        let request = ask("think long");
        let plain = Endpoint::new(ProviderKind::OpenAiResponses, "o3-pro");
        let background = plain.clone().with_background(true);
        assert_eq!(canonical_json(&request_fingerprint(&plain, &request)), canonical_json(&request_fingerprint(&background, &request)));
        assert_eq!(request_url(&plain), request_url(&background));
        assert!(!serde_json::to_string(&background).unwrap().contains("background"));
    }

    #[test]
    fn auto_is_on_for_the_long_running_families_on_openai_only() {
        let openai = "https://api.openai.com";
        for model in ["o3-pro", "o1-pro-2025-03-19", "gpt-5-pro", "gpt-5.2-pro-2025-12-11", "o3-deep-research", "o4-mini-deep-research-2025-06-26"] {
            assert!(Background::Auto.applies(model, openai), "{model}");
            assert!(!Background::Auto.applies(model, "https://openrouter.ai/api/v1"), "{model}: other servers");
            assert!(!Background::Off.applies(model, openai), "{model}");
        }
        for model in ["gpt-5.2", "o3", "gpt-5.1-codex-max", "gpt-4.1"] {
            assert!(!Background::Auto.applies(model, openai), "{model}");
            assert!(Background::On.applies(model, "http://127.0.0.1:8000/v1"), "{model}");
        }
    }

    #[test]
    fn the_setting_parses_and_dumps_as_written() {
        assert_eq!(Background::parse(&json!(true)), Some(Background::On));
        assert_eq!(Background::parse(&json!(false)), Some(Background::Off));
        assert_eq!(Background::parse(&json!("auto")), Some(Background::Auto));
        assert_eq!(Background::parse(&json!("sometimes")), None);
        assert_eq!(serde_json::to_value([Background::Auto, Background::On, Background::Off]).unwrap(), json!(["auto", true, false]));
    }

    #[test]
    fn poll_and_cancel_urls_keep_the_query() {
        assert_eq!(response_url("https://api.openai.com/v1/responses", "resp_1", false), "https://api.openai.com/v1/responses/resp_1");
        assert_eq!(response_url("https://api.openai.com/v1/responses", "resp_1", true), "https://api.openai.com/v1/responses/resp_1/cancel");
        assert_eq!(
            response_url("https://r.openai.azure.com/openai/v1/responses?api-version=preview", "resp_1", false),
            "https://r.openai.azure.com/openai/v1/responses/resp_1?api-version=preview"
        );
    }

    #[test]
    fn the_wire_body_adds_background_and_store() {
        let body = json!({"model": "o3-pro", "input": [], "store": false});
        assert_eq!(wire_body(&body), json!({"model": "o3-pro", "input": [], "store": true, "background": true}));
    }
}
