//! The call path against the mock server: single flight, the gate, shared errors, the
//! answered-model rule, cached reasoning, background resumption and scripted replies.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use serde_json::json;

use crate::cache::PendingResponses;
use crate::providers::{Answered, ConcurrencyMode};

use super::*;
use crate::providers::answered_as;
use crate::providers::mock::{Fault, FaultPlan, MockConfig, MockServer};
use crate::providers::{ClientConfig, Message};
use crate::spec::Provider;
use std::time::Duration;

fn model(server: &MockServer, answered: &str) -> ModelConfig {
    ModelConfig { base_url: Some(format!("{}/v1", server.base_url().trim_end_matches('/'))), ..config("m", Provider::OpenAi, answered) }
}

/// A model entry with every setting at its default.
fn config(id: &str, provider: Provider, model: &str) -> ModelConfig {
    ModelConfig {
        id: id.into(),
        provider,
        model: model.into(),
        base_url: None,
        api_key_env: None,
        params: crate::spec::Params::new(),
        price: None,
        accept_other_model: false,
        headers: std::collections::BTreeMap::new(),
        api: crate::providers::OpenAiApi::Auto,
        background: crate::providers::Background::Auto,
        stream: crate::providers::StreamMode::Auto,
        batch: None,
        serve: None,
        agent: None,
    }
}

fn context(dir: &std::path::Path) -> CallContext {
    let polling = crate::providers::PollConfig { first: Duration::from_millis(5), max: Duration::from_millis(20) };
    let config = ClientConfig { use_system_proxy: false, retry: crate::providers::RetryPolicy::no_retries(), polling, ..ClientConfig::default() };
    CallContext::new(Store::open(dir).unwrap(), Arc::new(ProviderClient::new(config).unwrap()), false)
}

fn ask(text: &str) -> ChatRequest {
    ChatRequest { messages: vec![Message::user(text)], ..ChatRequest::default() }
}

/// Two identical calls from two episodes in flight together: one HTTP request, both
/// answered, the cache entry recorded under both episodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identical_calls_in_flight_make_one_request() {
    let server = MockServer::start(MockConfig { latency: Duration::from_millis(300), ..MockConfig::default() }).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let model = model(&server, "mock-1");
    let (e1, e2) = (StepKey::compute(&json!("e1")), StepKey::compute(&json!("e2")));
    let site = CallSite::default();
    let request = ask("same question");
    let (a, b) = tokio::join!(ctx.chat(e1, &model, &request, &site), ctx.chat(e2, &model, &request, &site));
    assert_eq!(a.unwrap().text, b.unwrap().text);
    assert_eq!(server.calls(), 1, "one HTTP request for two identical calls in flight");
    assert_eq!(ctx.usage.live_calls.load(Ordering::Relaxed), 1);
    let key = call_key(&model, &request, &site).unwrap();
    assert_eq!(ctx.store().substeps(e2).unwrap(), vec![key], "the waiter's episode records the entry too");
    // A different call is not held back by, nor merged with, the first.
    let other = ctx.chat(e1, &model, &ask("other question"), &site).await.unwrap();
    assert!(other.text.contains("other question"));
    assert_eq!(server.calls(), 2);
    assert!(ctx.flights.is_empty(), "finished calls leave no entry");
}

/// Calls past a model's gate are at most twice its concurrency: the rest wait, unkeyed
/// and unbuilt, in the order they came, and every call is answered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_wait_at_the_gate_beyond_twice_the_concurrency() {
    // Watched at 200 ms, well inside the first answers' 500 ms: slow machines included.
    let server = MockServer::start(MockConfig { latency: Duration::from_millis(500), ..MockConfig::default() }).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = ClientConfig {
        use_system_proxy: false,
        concurrency: ConcurrencyMode::Static { max_concurrency: 10 },
        retry: crate::providers::RetryPolicy::no_retries(),
        ..ClientConfig::default()
    };
    let ctx = CallContext::new(Store::open(dir.path()).unwrap(), Arc::new(ProviderClient::new(config).unwrap()), false);
    let model = model(&server, "mock-1");
    let (episode, site) = (StepKey::compute(&json!("e")), CallSite::default());
    let requests: Vec<ChatRequest> = (0..50).map(|i| ask(&format!("question {i}"))).collect();
    let all = futures::future::join_all(requests.iter().map(|r| ctx.chat(episode, &model, r, &site)));
    let watch = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        (ctx.lanes.gate("m", ctx.client.config()).available_permits(), server.calls())
    };
    let (answers, (free, sent)) = tokio::join!(all, watch);
    assert_eq!((free, sent), (0, 10), "20 past the gate (10 sent, 10 waiting for a slot), 30 waiting at it");
    assert_eq!(ctx.lanes.gate("m", ctx.client.config()).available_permits(), 20, "every ticket is returned");
    for (i, answer) in answers.into_iter().enumerate() {
        assert!(answer.unwrap().text.contains(&format!("question {i}")));
    }
    assert_eq!(server.calls(), 50);
}

/// The error of the one request is shared, not retried by each waiter, and not cached:
/// the same call later makes a request again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_share_the_error_which_is_not_cached() {
    let faults = FaultPlan::sequence([Fault::Status { status: 400, message: "no".into() }]);
    let server = MockServer::start(MockConfig { latency: Duration::from_millis(300), faults, ..MockConfig::default() }).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let model = model(&server, "mock-1");
    let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
    let calls = futures::future::join_all((0..3).map(|_| ctx.chat(episode, &model, &request, &site))).await;
    assert_eq!(server.calls(), 1);
    for result in calls {
        let error = result.unwrap_err().to_string();
        assert!(error.contains("bad_request"), "{error}");
    }
    assert_eq!(ctx.usage.shared_calls.load(Ordering::Relaxed), 2);
    let again = ctx.chat(episode, &model, &request, &site).await.unwrap();
    assert!(again.text.contains('q'));
    assert_eq!(server.calls(), 2, "the error was not cached");
}

/// A failed cache write is shared with the waiters whole (issue 22 item 5c): each of
/// them reads the same text as before and still reaches the I/O error as a source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_keep_the_cause_of_a_shared_cache_error() {
    let server = MockServer::start(MockConfig { latency: Duration::from_millis(300), ..MockConfig::default() }).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let model = model(&server, "mock-1");
    let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
    // A file where the entry's shard directory belongs: the answer cannot be written.
    let shard = ctx.store().entry_path(call_key(&model, &request, &site).unwrap()).parent().unwrap().to_owned();
    std::fs::create_dir_all(shard.parent().unwrap()).unwrap();
    std::fs::write(&shard, "not a directory").unwrap();
    let calls = futures::future::join_all((0..3).map(|_| ctx.chat(episode, &model, &request, &site))).await;
    assert_eq!(server.calls(), 1);
    let texts: Vec<String> = calls.iter().map(|result| result.as_ref().unwrap_err().to_string()).collect();
    assert!(texts[0].starts_with("cache: "), "{texts:?}");
    for (text, result) in texts.iter().zip(&calls) {
        let error = result.as_ref().unwrap_err();
        let io = std::iter::successors(std::error::Error::source(error), |cause| cause.source()).find_map(|cause| cause.downcast_ref::<std::io::Error>());
        assert!(io.is_some(), "{text}: the I/O error is not in the source chain");
    }
    assert_eq!(&texts[1], &format!("episode failed: {}", texts[0]), "waiters read as before");
    assert_eq!(texts[1], texts[2]);
}

/// Another model's answer fails the call (one request, shared by the waiters) and is
/// not cached; with `accept_other_model` it is an answer like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_models_answer_fails_unless_accepted() {
    let config = MockConfig { latency: Duration::from_millis(300), answered_model: Some("other".into()), ..MockConfig::default() };
    let server = MockServer::start(config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut model = model(&server, "mock-1");
    let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
    let (a, b) = tokio::join!(ctx.chat(episode, &model, &request, &site), ctx.chat(episode, &model, &request, &site));
    for result in [a, b] {
        let error = result.unwrap_err().to_string();
        assert!(error.contains("`other`") && error.contains("accept_other_model"), "{error}");
    }
    assert_eq!(server.calls(), 1);
    assert!(!ctx.store().contains(call_key(&model, &request, &site).unwrap()));
    // The model's calls stopped in this run (every one would be answered by `other`).
    assert!(ctx.chat(episode, &model, &ask("another question"), &site).await.is_err());
    assert_eq!(server.calls(), 1, "not sent");
    // The next run, accepting other models.
    let ctx = context(dir.path());
    model.accept_other_model = true;
    assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().answered_model, "other");
    assert!(ctx.store().contains(call_key(&model, &request, &site).unwrap()), "accepted: cached");
}

/// An answer cached before the provider layer split `<think>` off (same key: the
/// default split sends nothing) is split when served; one split on arrival is served
/// exactly as stored, even if its answer starts with another tagged block.
#[tokio::test]
async fn a_cached_answer_from_before_the_think_split_is_split_when_served() {
    let server = MockServer::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let model = model(&server, "mock-1");
    let (episode, site) = (StepKey::compute(&json!("e")), CallSite::default());
    let stored = |request: &ChatRequest, text: &str, reasoning: Option<&str>| {
        let step = SubStep::new(episode, StepKind::Call, call_components(&endpoint(&model, request).unwrap(), request, &site));
        let response = ChatResponse { reasoning: reasoning.map(str::to_owned), ..ChatResponse::text_from("mock-1", text) };
        step.store_blocking(ctx.store(), response, 0).unwrap();
    };
    let old = ask("old");
    stored(&old, "<think>draft <TOOL>{}</TOOL></think>\nfinal", None);
    let served = ctx.chat(episode, &model, &old, &site).await.unwrap();
    assert_eq!((served.text.as_str(), served.reasoning.as_deref()), ("final", Some("draft <TOOL>{}</TOOL>")));
    let new = ask("new");
    stored(&new, "<think>quoted</think> answer", Some("thought"));
    let served = ctx.chat(episode, &model, &new, &site).await.unwrap();
    assert_eq!((served.text.as_str(), served.reasoning.as_deref()), ("<think>quoted</think> answer", Some("thought")));
    assert_eq!(server.calls(), 0, "both were served from the cache");
}

/// A dated snapshot of the alias is the model asked for: cached, so a resume is free.
#[tokio::test]
async fn a_dated_snapshot_of_the_alias_is_cached() {
    let config = MockConfig { answered_model: Some("gpt-4.1-2025-04-14".into()), ..MockConfig::default() };
    let server = MockServer::start(config).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let model = model(&server, "gpt-4.1");
    let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
    assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().answered_model, "gpt-4.1-2025-04-14");
    ctx.chat(episode, &model, &request, &site).await.unwrap();
    assert_eq!(server.calls(), 1, "the second call was served from the cache");
}

/// Background mode is transport: a call answered in the background is the same cache
/// entry as one answered in the foreground, on the real API's `auto` routing too.
#[tokio::test]
async fn background_mode_keys_and_caches_like_a_foreground_call() {
    use crate::providers::{Background, OpenAiApi};
    let server = MockServer::start(MockConfig::default()).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(dir.path());
    let mut model = ModelConfig { api: OpenAiApi::Responses, background: Background::On, ..model(&server, "o3-pro") };
    let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
    assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().text, "echo: q");
    let log = server.request_log();
    assert_eq!((log[0].body["background"].clone(), log.iter().filter(|r| r.method == "GET").count()), (json!(true), 3));
    let key = call_key(&model, &request, &site).unwrap();
    for background in [Background::Off, Background::Auto] {
        model.background = background;
        assert_eq!(call_key(&model, &request, &site).unwrap(), key, "{background}");
        assert_eq!(model.key_value(), ModelConfig { background: Background::On, ..model.clone() }.key_value());
    }
    model.background = Background::Off;
    ctx.chat(episode, &model, &request, &site).await.unwrap();
    assert_eq!(server.calls(), 4, "served from the entry the background call wrote");
    let openai = ModelConfig { base_url: None, api: OpenAiApi::Auto, ..model.clone() };
    let auto = ModelConfig { background: Background::Auto, ..openai.clone() };
    assert_eq!(call_key(&openai, &request, &site), call_key(&auto, &request, &site), "o3-pro on api.openai.com: auto is on");
}

/// Batch mode is transport: a batched call keys (and so caches) exactly like a live one.
#[test]
fn batch_mode_is_in_no_key() {
    let model = config("m", Provider::OpenAi, "gpt-4o-mini-2024-07-18");
    let batched = ModelConfig { batch: Some(crate::spec::BatchMode::default()), ..model.clone() };
    let (request, site) = (ask("q"), CallSite::default());
    assert!(call_key(&model, &request, &site).is_some());
    assert_eq!(call_key(&model, &request, &site), call_key(&batched, &request, &site));
    assert_eq!(model.key_value(), batched.key_value());
}

/// A run interrupted while a background response runs leaves its id recorded under the
/// call's key; the next run polls that response instead of POSTing, caches the answer
/// and removes the record.
#[tokio::test]
async fn an_interrupted_background_call_is_recorded_resumed_then_forgotten() {
    use crate::providers::{Background, OpenAiApi};
    let server = MockServer::start(MockConfig { background_polls: u32::MAX, ..MockConfig::default() }).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let model = ModelConfig { api: OpenAiApi::Responses, background: Background::On, ..model(&server, "o3-pro") };
    let (episode, site, request) = (StepKey::compute(&json!("e")), CallSite::default(), ask("q"));
    let key = call_key(&model, &request, &site).unwrap();
    let pending = PendingResponses::of(&Store::open(dir.path()).unwrap());
    {
        let ctx = context(dir.path());
        let polled = async {
            while server.request_log().iter().all(|r| r.method != "GET") {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        };
        tokio::select! {
            _ = ctx.chat(episode, &model, &request, &site) => panic!("the response was still in progress"),
            () = polled => {}
        }
    }
    assert_eq!(pending.get(key).map(|r| r.response_id), Some("resp_bg_0".to_owned()), "recorded under the call key before the first poll");
    server.set_background_polls(1);
    let ctx = context(dir.path());
    assert_eq!(ctx.chat(episode, &model, &request, &site).await.unwrap().text, "echo: q");
    let posts = server.request_log().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 1, "resumed by polling, not sent again");
    assert!(ctx.store().contains(key), "the answer is cached");
    assert_eq!(pending.get(key), None, "and the record is gone");
    assert!(pending.list().is_empty());
}

#[test]
fn answered_ids_are_classified() {
    for (requested, answered, expected) in [
        ("gpt-4.1", "gpt-4.1", Answered::Same),
        ("gpt-4.1", "", Answered::Same),
        ("gemini-2.5-pro", "models/gemini-2.5-pro", Answered::Same),
        ("gpt-4.1", "gpt-4.1-2025-04-14", Answered::Snapshot),
        ("claude-sonnet-4-5", "claude-sonnet-4-5-20250929", Answered::Snapshot),
        ("gemini-2.0-flash", "gemini-2.0-flash-001", Answered::Snapshot),
        ("gpt-4.1", "gpt-4.1-mini", Answered::Other),
        ("gpt-4.1", "gpt-4.1-mini-2025-04-14", Answered::Other),
        ("gpt-4.1", "gpt-4o", Answered::Other),
        ("gpt-4.1", "gpt-4.1-", Answered::Other),
    ] {
        assert_eq!(answered_as(requested, answered), expected, "{requested} → {answered}");
    }
}

/// Issue 22: the replies file is read once per run, at its first call; later calls answer
/// from it even when the file is gone.
#[tokio::test]
async fn a_replies_file_is_read_once_per_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("replies.json");
    std::fs::write(&file, r#"{"replies": [{"contains": "two", "reply": "2"}], "default": "?"}"#).unwrap();
    let model = ModelConfig { params: [("file".to_owned(), json!(file))].into_iter().collect(), ..config("s", Provider::Scripted, "canned") };
    let ctx = context(dir.path());
    let (episode, site) = (StepKey::compute(&json!("e")), CallSite::default());
    assert_eq!(ctx.chat(episode, &model, &ask("one plus one is two?"), &site).await.unwrap().text, "2");
    std::fs::remove_file(&file).unwrap();
    assert_eq!(ctx.chat(episode, &model, &ask("three"), &site).await.unwrap().text, "?");
    assert_eq!(ctx.scripts.loaded(), 1);
    // A new run reads it again (and finds it gone).
    assert!(context(dir.path()).chat(episode, &model, &ask("three"), &site).await.is_err());
}

/// A replies file that cannot be read or parsed fails the episode with the same text
/// as before, and keeps the I/O or JSON error as the source.
#[test]
fn a_bad_replies_file_keeps_its_cause() {
    use std::error::Error as _;
    let dir = tempfile::tempdir().unwrap();
    let scripted =
        |path: &std::path::Path| ModelConfig { params: [("file".to_owned(), json!(path))].into_iter().collect(), ..config("s", Provider::Scripted, "canned") };
    let missing = dir.path().join("missing.json");
    let ctx = context(dir.path());
    let err = scripted::scripted_reply(&ctx.scripts, &scripted(&missing), &ask("q")).unwrap_err();
    assert_eq!(err.to_string(), format!("episode failed: cannot read replies file `{}`: {}", missing.display(), std::fs::read("/no/such/file").unwrap_err()));
    assert_eq!(err.source().and_then(|s| s.downcast_ref::<std::io::Error>()).map(std::io::Error::kind), Some(std::io::ErrorKind::NotFound));
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "not json").unwrap();
    let err = scripted::scripted_reply(&ctx.scripts, &scripted(&bad), &ask("q")).unwrap_err();
    assert!(err.to_string().starts_with(&format!("episode failed: replies file `{}`: expected", bad.display())), "{err}");
    assert!(err.source().is_some_and(|s| s.is::<serde_json::Error>()), "{err:?}");
}

/// Issue 36: a served model's calls are keyed by its weights and settings, never by the
/// port its server got this run; other weights are other keys.
#[test]
fn a_served_models_call_key_holds_its_weights_not_its_port() {
    let identity = |weights: &str| crate::spec::ServedIdentity { engine_version: "v".into(), weights: Some(weights.into()), arg_files: Vec::new() };
    let serve = crate::spec::ServeConfig {
        engine: crate::spec::Engine::LlamaCpp,
        weights: crate::spec::Weights::Local("/w/m.gguf".into()),
        written: "m.gguf".into(),
        position: crate::spec::Position::default(),
        slots: 2,
        context: Some(1024),
        gpus: 0,
        args: Vec::new(),
        pinned: None,
        start_timeout_s: 1,
        identity: Some(identity("w1")),
    };
    let served = |url: Option<&str>, weights: &str| ModelConfig {
        base_url: url.map(str::to_owned),
        serve: Some(crate::spec::ServeConfig { identity: Some(identity(weights)), ..serve.clone() }),
        ..config("m", Provider::OpenAi, "ft")
    };
    let (request, site) = (ask("q"), CallSite::default());
    let before_start = call_key(&served(None, "w1"), &request, &site).unwrap();
    assert_eq!(call_key(&served(Some("http://127.0.0.1:4001/v1"), "w1"), &request, &site).unwrap(), before_start);
    assert_eq!(call_key(&served(Some("http://127.0.0.1:4002/v1"), "w1"), &request, &site).unwrap(), before_start);
    assert_ne!(call_key(&served(None, "w2"), &request, &site).unwrap(), before_start, "other weights");
    let plain = ModelConfig { base_url: Some("http://127.0.0.1:4001/v1".into()), ..config("m", Provider::OpenAi, "ft") };
    assert_ne!(call_key(&plain, &request, &site).unwrap(), before_start, "an endpoint someone else runs is keyed by its URL");
}
