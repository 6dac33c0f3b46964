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

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use reqwest::{Method, StatusCode};

use serde_json::Value;
use tokio::time::{Instant, sleep, timeout_at};

use super::client::{read_capped, transport_error};
use super::error::{CallError, error_in_ok_body, parse_json, success_json};
use super::openai::Shaping;
use super::pacer::Pacer;
use super::responses::{self, is_openai_api};
use super::retry::{RateLimitHeaders, RetryPolicy};
use super::types::ChatResponse;
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

/// A terminal response object parsed as an answer; `cancelled` is no answer at all, and
/// `failed` is an error (never an answer), which a new run may fix.
fn finish(status: StatusCode, headers: &HeaderMap, bytes: &[u8], json: &Value, shaping: &Shaping) -> Submitted {
    match text(json, "/status").as_str() {
        "cancelled" => Submitted::settled(Err(CallError::Protocol { detail: "the background response was cancelled".into() })),
        "failed" => Submitted::retry(Err(error_in_ok_body(json, headers).unwrap_or(CallError::Server { status: 200, retry_after: None }))),
        _ => Submitted::settled(responses::parse_shaped(status, headers, bytes, shaping)),
    }
}

fn pending(json: &Value) -> bool {
    matches!(text(json, "/status").as_str(), "queued" | "in_progress")
}

/// Sends the POST, then polls until the response is done or the budget is spent.
pub(super) async fn run(http: &reqwest::Client, job: &Job<'_>, pacer: &Pacer) -> Submitted {
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
        return finish(status, &headers, &bytes, &json, job.shaping);
    }
    let id = text(&json, "/id");
    if id.is_empty() {
        // Nothing to poll, and POSTing again would start a second run.
        return Submitted::settled(Err(CallError::Protocol { detail: "background response without an `id`".into() }));
    }
    poll(http, job, &id).await
}

async fn poll(http: &reqwest::Client, job: &Job<'_>, id: &str) -> Submitted {
    let url = response_url(job.url, id, false);
    let mut wait = job.polling.first;
    let mut failures = 0_u32;
    let started = Instant::now();
    loop {
        if Instant::now() + wait >= job.deadline {
            cancel(http, job, id).await;
            return Submitted::settled(Err(CallError::Timeout));
        }
        sleep(wait).await;
        wait = (wait * 2).min(job.polling.max).max(job.polling.first);
        let polled = match timeout_at(job.deadline, exchange(http, Method::GET, &url, job, &[])).await {
            Ok(Ok((status, headers, bytes))) => response_state(status, &headers, &bytes).map(|json| (status, headers, bytes, json)),
            Ok(Err(error)) => Err(error),
            Err(_) => {
                cancel(http, job, id).await;
                return Submitted::settled(Err(CallError::Timeout));
            }
        };
        match polled {
            Ok((status, headers, bytes, json)) => {
                if !pending(&json) {
                    return finish(status, &headers, &bytes, &json, job.shaping);
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
                    cancel(http, job, id).await;
                    return Submitted::settled(Err(error));
                };
                // `next_delay` honours a `Retry-After`, up to its cap.
                wait = wait.max(delay);
            }
            // 401, 404: the response cannot be read; sending it again would bill twice.
            Err(error) => return Submitted::settled(Err(error)),
        }
    }
}

/// Best-effort cancel of a response whose call has given up, so it stops running (and
/// billing); its outcome is only logged.
async fn cancel(http: &reqwest::Client, job: &Job<'_>, id: &str) {
    let url = response_url(job.url, id, true);
    let outcome = tokio::time::timeout(CANCEL_TIMEOUT, exchange(http, Method::POST, &url, job, &[])).await;
    let status = match outcome {
        Ok(Ok((status, _, _))) => status.as_u16().to_string(),
        Ok(Err(error)) => error.class().to_owned(),
        Err(_) => "timeout".to_owned(),
    };
    tracing::info!(response = id, outcome = %status, "cancelled a background response: the call's time budget ran out");
}

#[cfg(test)]
mod tests {
    use super::super::client::tests::{ask, client_with, mock_endpoint, quick_client, quick_config};
    use super::super::client::{request_fingerprint, request_url};
    use super::super::limiter::ConcurrencyMode;
    use super::super::mock::{Fault, FaultPlan, LoggedRequest, MockConfig, MockOutcome, MockReply, MockServer, RetryHeader, Script};
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
        assert_eq!(record.failed_attempts, ["server"]);
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
        assert_eq!((record.attempts, record.failed_attempts.as_slice()), (2, ["server"].as_slice()));
        assert_eq!(record.result.map(|response| response.text), Ok("echo: y".to_owned()));
        let log = server.request_log();
        assert_eq!((posts(&log), polls(&log).len()), (3, 3));
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
