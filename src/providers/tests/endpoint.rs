//! Endpoints (issue 13 item 5): base URLs used as given, extra headers, and the cache
//! keys of existing configurations left exactly as they were.

use serde_json::json;

use super::client::{request_fingerprint, request_url};
use super::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};
use super::testing::{KEY, KINDS, ask, mock_endpoint, quick_client};
use super::types::{ChatRequest, Endpoint, HeaderValueOf, Message, ProviderKind, Secret, canonical_json};

/// Fingerprints (the call's part of every cache key) and URLs computed by the code before
/// issue 13 for configurations that already worked: none may change.
const PINNED: &[(&str, &str, &str)] = &[
    (
        "openai-default",
        r#"{"base_url":"https://api.openai.com","body":{"max_completion_tokens":64,"messages":[{"content":"s","role":"system"},{"content":"hi","role":"user"}],"model":"gpt-4.1","temperature":0.0},"kind":"openai","model":"gpt-4.1"}"#,
        "https://api.openai.com/v1/chat/completions",
    ),
    (
        "openai-v1",
        r#"{"base_url":"https://api.openai.com/v1","body":{"messages":[{"content":"s","role":"system"},{"content":"hi","role":"user"}],"model":"gpt-4.1","temperature":0.0},"kind":"openai","model":"gpt-4.1"}"#,
        "https://api.openai.com/v1/chat/completions",
    ),
    (
        "vllm-bare",
        r#"{"base_url":"http://127.0.0.1:8000","body":{"messages":[{"content":"s","role":"system"},{"content":"hi","role":"user"}],"model":"m","temperature":0.0},"kind":"openai","model":"m"}"#,
        "http://127.0.0.1:8000/v1/chat/completions",
    ),
    (
        "vllm-v1",
        r#"{"base_url":"http://127.0.0.1:8000/v1","body":{"messages":[{"content":"s","role":"system"},{"content":"hi","role":"user"}],"model":"m","temperature":0.0},"kind":"openai","model":"m"}"#,
        "http://127.0.0.1:8000/v1/chat/completions",
    ),
    (
        "anthropic-capped",
        r#"{"base_url":"https://api.anthropic.com","body":{"max_tokens":64,"messages":[{"content":"hi","role":"user"}],"model":"claude-opus-4-5","system":"s","temperature":0.0},"kind":"anthropic","model":"claude-opus-4-5"}"#,
        "https://api.anthropic.com/v1/messages",
    ),
    (
        "anthropic-think-capped",
        r#"{"base_url":"https://api.anthropic.com","body":{"max_tokens":16384,"messages":[{"content":"hi","role":"user"}],"model":"claude-opus-4-5","system":"s","temperature":1,"thinking":{"budget_tokens":1024,"type":"enabled"}},"kind":"anthropic","model":"claude-opus-4-5"}"#,
        "https://api.anthropic.com/v1/messages",
    ),
    (
        "gemini-think",
        r#"{"base_url":"https://generativelanguage.googleapis.com","body":{"contents":[{"parts":[{"text":"hi"}],"role":"user"}],"generationConfig":{"temperature":0.0,"thinkingConfig":{"includeThoughts":true,"thinkingBudget":1024}},"systemInstruction":{"parts":[{"text":"s"}]}},"kind":"gemini","model":"gemini-2.5-flash"}"#,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent",
    ),
    (
        "gemini-capped-v1beta",
        r#"{"base_url":"https://generativelanguage.googleapis.com/v1beta","body":{"contents":[{"parts":[{"text":"hi"}],"role":"user"}],"generationConfig":{"maxOutputTokens":64,"temperature":0.0},"systemInstruction":{"parts":[{"text":"s"}]}},"kind":"gemini","model":"gemini-3-pro"}"#,
        "https://generativelanguage.googleapis.com/v1beta/models/gemini-3-pro:generateContent",
    ),
];

#[test]
fn existing_call_fingerprints_and_urls_are_unchanged() {
    let mut req = ChatRequest { messages: vec![Message::user("hi")], system: Some("s".into()), ..ChatRequest::default() };
    req.params.insert("temperature".into(), json!(0.0));
    let mut capped = req.clone();
    capped.params.insert("max_tokens".into(), json!(64));
    let mut think = req.clone();
    think.params.insert("thinking_budget".into(), json!(1024));
    let mut think_capped = think.clone();
    think_capped.params.insert("max_tokens".into(), json!(16384));
    let cases = [
        ("openai-default", Endpoint::new(ProviderKind::OpenAi, "gpt-4.1"), capped.clone()),
        ("openai-v1", Endpoint::new(ProviderKind::OpenAi, "gpt-4.1").with_base_url("https://api.openai.com/v1"), req.clone()),
        ("vllm-bare", Endpoint::new(ProviderKind::OpenAi, "m").with_base_url("http://127.0.0.1:8000"), req.clone()),
        ("vllm-v1", Endpoint::new(ProviderKind::OpenAi, "m").with_base_url("http://127.0.0.1:8000/v1"), req.clone()),
        ("anthropic-capped", Endpoint::new(ProviderKind::Anthropic, "claude-opus-4-5"), capped.clone()),
        ("anthropic-think-capped", Endpoint::new(ProviderKind::Anthropic, "claude-opus-4-5"), think_capped),
        ("gemini-think", Endpoint::new(ProviderKind::Gemini, "gemini-2.5-flash"), think.clone()),
        (
            "gemini-capped-v1beta",
            Endpoint::new(ProviderKind::Gemini, "gemini-3-pro").with_base_url("https://generativelanguage.googleapis.com/v1beta"),
            capped.clone(),
        ),
    ];
    for ((name, endpoint, request), (pinned, fingerprint, url)) in cases.into_iter().zip(PINNED) {
        assert_eq!(name, *pinned);
        assert_eq!(canonical_json(&request_fingerprint(&endpoint, &request)), *fingerprint, "{name}");
        assert_eq!(request_url(&endpoint), *url, "{name}");
    }
}

#[test]
fn the_url_enters_the_fingerprint_only_where_it_changed() {
    let zai = Endpoint::new(ProviderKind::OpenAi, "glm-4.7").with_base_url("https://api.z.ai/api/paas/v4");
    assert_eq!(request_url(&zai), "https://api.z.ai/api/paas/v4/chat/completions");
    let fingerprint = request_fingerprint(&zai, &ask("x"));
    assert_eq!(fingerprint["url"], "https://api.z.ai/api/paas/v4/chat/completions", "was /api/paas/v4/v1/…: a new key");
    let openai = Endpoint::new(ProviderKind::OpenAi, "gpt-4.1");
    assert!(request_fingerprint(&openai, &ask("x")).get("url").is_none());
}

#[test]
fn literal_headers_are_keyed_and_secret_ones_never() {
    let base = Endpoint::new(ProviderKind::Anthropic, "claude-opus-4-5");
    let beta = base.clone().with_header("anthropic-beta", HeaderValueOf::Literal("interleaved-thinking-2025-05-14".into()));
    let secret = base.clone().with_header("x-tenant-key", HeaderValueOf::Secret(Secret::new("hdr-SECRET-42")));
    let key = |e: &Endpoint| canonical_json(&request_fingerprint(e, &ask("x")));
    assert_ne!(key(&base), key(&beta), "a beta flag can change the answer");
    assert_eq!(key(&base), key(&secret), "a secret header is transport, not content");
    assert!(!key(&secret).contains("hdr-SECRET-42"));
    assert!(!format!("{secret:?}").contains("hdr-SECRET-42"));
    assert!(!serde_json::to_string(&secret).unwrap().contains("hdr-SECRET-42"));
}

#[tokio::test]
async fn requests_arrive_at_base_url_plus_path_with_custom_headers() {
    let server = MockServer::start(MockConfig { path_prefix: Some("/api/paas/v4".into()), ..MockConfig::default() }).await.unwrap();
    let client = quick_client();
    for kind in KINDS {
        let endpoint = mock_endpoint(&server, kind, "m")
            .with_base_url(format!("{}/api/paas/v4/", server.base_url().trim_end_matches('/')))
            .with_header("X-Tenant", HeaderValueOf::Literal("team-a".into()))
            .with_header("api-key", HeaderValueOf::Secret(Secret::new("hdr-SECRET-42")));
        let outcome = client.call(&endpoint, &ask("hello")).await.unwrap();
        assert_eq!(outcome.response.text, "echo: hello", "{kind}");
    }
    let log = server.request_log();
    let paths: Vec<&str> = log.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["/api/paas/v4/chat/completions", "/api/paas/v4/messages", "/api/paas/v4/models/m:generateContent", "/api/paas/v4/responses"]);
    for request in &log {
        assert_eq!(request.headers.get("x-tenant").map(String::as_str), Some("team-a"));
        assert_eq!(request.headers.get("api-key").map(String::as_str), Some("hdr-SECRET-42"));
    }
    // The protocol's own auth still arrives next to the extra headers.
    assert_eq!(log[0].headers.get("authorization").map(String::as_str), Some(format!("Bearer {KEY}").as_str()));
    server.shutdown().await;
}

#[tokio::test]
async fn a_secret_header_value_echoed_by_the_model_is_redacted() {
    let script =
        Script::function(|request| MockOutcome::Reply(MockReply::text(format!("you sent {}", request.body["messages"][0]["content"].as_str().unwrap_or("")))));
    let server = MockServer::start(MockConfig { script, ..MockConfig::default() }).await.unwrap();
    let endpoint = mock_endpoint(&server, ProviderKind::OpenAi, "m").with_header("api-key", HeaderValueOf::Secret(Secret::new("hdr-SECRET-42")));
    let request = ChatRequest { messages: vec![Message::user("hdr-SECRET-42")], ..ChatRequest::default() };
    let outcome = quick_client().call(&endpoint, &request).await.unwrap();
    assert_eq!(outcome.response.text, "you sent [REDACTED]");
    let bad = mock_endpoint(&server, ProviderKind::OpenAi, "m").with_header("x-bad", HeaderValueOf::Secret(Secret::new("line\nbreak-SECRET")));
    let error = quick_client().call(&bad, &ask("x")).await.unwrap_err();
    assert_eq!(error.class(), "config");
    assert!(!error.to_string().contains("SECRET"), "{error}");
}
