//! Answer normalisation per server (issue 13 items 7 and 8): inline reasoning tags and
//! usage that differs between server families.

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde_json::json;

use super::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};
use super::openai::ChatCompletions;
use super::protocol::Protocol;
use super::testing::{ask, mock_endpoint, quick_client};
use super::types::{ChatRequest, ChatResponse, ProviderKind};
use crate::providers::shaping::{Shaping, split_reasoning};

/// A Chat Completions body parsed and settled, as the transport reads it.
fn parse_shaped(status: StatusCode, headers: &HeaderMap, body: &[u8], shaping: &Shaping) -> Result<ChatResponse, super::CallError> {
    ChatCompletions.parse(status, headers, body, shaping).map(|response| ChatCompletions.settle(response, shaping))
}

fn answer(text: &str) -> ChatResponse {
    ChatResponse::text_from("m", text)
}

#[test]
fn a_leading_think_block_moves_to_reasoning() {
    let split = split_reasoning(answer("  <think>\ndraft: <TOOL>{\"x\":1}</TOOL>\n</think>\n\nThe answer is 4."), "think");
    assert_eq!(split.text, "The answer is 4.");
    assert_eq!(split.reasoning.as_deref(), Some("draft: <TOOL>{\"x\":1}</TOOL>"));
    let cut = split_reasoning(answer("<think>still thinking when the cap hit"), "think");
    assert_eq!((cut.text.as_str(), cut.reasoning.as_deref()), ("", Some("still thinking when the cap hit")));
    let mid = split_reasoning(answer("Answer first. <think>not a leading block</think>"), "think");
    assert_eq!((mid.text.as_str(), mid.reasoning), ("Answer first. <think>not a leading block</think>", None));
    let mut both = answer("<think>inline</think>ok");
    both.reasoning = Some("parsed".into());
    assert_eq!(split_reasoning(both, "think").reasoning.as_deref(), Some("parsed\ninline"));
    let other_tag = split_reasoning(answer("<reasoning>r</reasoning>a"), "reasoning");
    assert_eq!((other_tag.text.as_str(), other_tag.reasoning.as_deref()), ("a", Some("r")));
}

#[test]
fn the_switch_is_read_from_params_and_never_sent() {
    let mut off = ask("x");
    off.params.insert("reasoning_tag".into(), json!(false));
    assert_eq!(Shaping::for_call(&off, "http://h").reasoning_tag, None);
    assert_eq!(Shaping::for_call(&ask("x"), "http://h").reasoning_tag.as_deref(), Some("think"));
    assert!(Shaping::for_call(&ask("x"), "https://api.x.ai/v1").xai);
    let endpoint = super::types::Endpoint::new(ProviderKind::OpenAi, "m").with_base_url("http://h/v1");
    let body = super::client::request_body(&endpoint, &off);
    assert!(body.get("reasoning_tag").is_none(), "{body}");
    let keyed = super::client::request_fingerprint(&endpoint, &off);
    assert_eq!(keyed["reasoning_tag"], json!(false), "switching it changes what is stored");
    assert!(super::client::request_fingerprint(&endpoint, &ask("x")).get("reasoning_tag").is_none());
}

#[tokio::test]
async fn think_tags_are_split_before_the_answer_leaves_the_provider_layer() {
    let reply = "<think>I could call <TOOL>{\"name\":\"rm\"}</TOOL></think>Final: 4";
    let script = Script::function(move |_| MockOutcome::Reply(MockReply::text(reply)));
    let server = MockServer::start(MockConfig { script, ..MockConfig::default() }).await.unwrap();
    let client = quick_client();
    let endpoint = mock_endpoint(&server, ProviderKind::OpenAi, "m");
    let on = client.call(&endpoint, &ask("x")).await.unwrap().response;
    assert_eq!(on.text, "Final: 4");
    assert!(on.reasoning.unwrap().contains("<TOOL>"));
    let mut keep: ChatRequest = ask("x");
    keep.params.insert("reasoning_tag".into(), json!(false));
    let off = client.call(&endpoint, &keep).await.unwrap().response;
    assert_eq!(off.text, reply);
    assert!(server.request_log().iter().all(|r| r.body.get("reasoning_tag").is_none()));
    server.shutdown().await;
}

#[test]
fn xai_reasoning_tokens_are_added_to_output_and_openrouter_cost_is_kept() {
    let ok = StatusCode::OK;
    // xAI: completion excludes reasoning (total = prompt + completion + reasoning).
    let xai = br#"{"model":"grok-4-1-fast-reasoning","choices":[{"index":0,"message":{"role":"assistant","content":"4"},"finish_reason":"stop"}],
        "usage":{"prompt_tokens":100,"completion_tokens":1499,"total_tokens":4408,"completion_tokens_details":{"reasoning_tokens":2809}}}"#;
    let usage = parse_shaped(ok, &HeaderMap::new(), xai, &Shaping { xai: true, ..Shaping::default() }).unwrap().usage;
    assert_eq!((usage.output, usage.reasoning), (1499 + 2809, 2809));
    // xAI without a total: its documented rule; any other server without one: as sent.
    let no_total = br#"{"model":"g","choices":[{"message":{"content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":10,"completion_tokens_details":{"reasoning_tokens":5}}}"#;
    assert_eq!(parse_shaped(ok, &HeaderMap::new(), no_total, &Shaping { xai: true, ..Shaping::default() }).unwrap().usage.output, 15);
    assert_eq!(parse_shaped(ok, &HeaderMap::new(), no_total, &Shaping::default()).unwrap().usage.output, 10);
    // OpenAI: reasoning is inside completion (total = prompt + completion): unchanged.
    let openai = br#"{"model":"o3","choices":[{"message":{"content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":300,"total_tokens":310,"completion_tokens_details":{"reasoning_tokens":256}}}"#;
    assert_eq!(parse_shaped(ok, &HeaderMap::new(), openai, &Shaping::default()).unwrap().usage.output, 300);
    let openrouter = br#"{"model":"openai/gpt-5","choices":[{"message":{"content":"4"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":3,"total_tokens":13,"cost":0.000245}}"#;
    assert_eq!(parse_shaped(ok, &HeaderMap::new(), openrouter, &Shaping::default()).unwrap().usage.cost, Some(0.000_245));
}
