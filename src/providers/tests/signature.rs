//! Reasoning signatures carried across tool rounds (issue 13 items 3 and 4): against a mock
//! that, like the real APIs, refuses a replayed function call without them, a second round
//! built with [`Message::assistant_turn`] is accepted and one that drops them is not.

use serde_json::{Value, json};

use super::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};
use super::testing::{mock_endpoint, quick_client};
use super::types::{ChatRequest, FinishReason, Message, ProviderKind, ToolCall, ToolSpec};

/// The bytes of a recorded response under `tests/fixtures/providers/`.
pub(in crate::providers) fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers").join(format!("{name}.json"));
    std::fs::read(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn weather_request() -> ChatRequest {
    let mut request = ChatRequest { messages: vec![Message::user("What's the weather in Paris?")], ..ChatRequest::default() };
    request.params.insert("thinking_budget".into(), json!(2048));
    request.tools = Some(vec![ToolSpec {
        name: "get_weather".into(),
        description: "Current weather in a city.".into(),
        parameters: json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
    }]);
    request
}

/// The items of a turn with every signature (and Anthropic's thinking blocks) removed.
fn unsigned(items: &[Value]) -> Vec<Value> {
    items
        .iter()
        .filter(|item| !matches!(item.get("type").and_then(Value::as_str), Some("thinking" | "redacted_thinking")))
        .map(|item| {
            let mut item = item.clone();
            if let Some(part) = item.as_object_mut() {
                part.remove("thoughtSignature");
            }
            item
        })
        .collect()
}

#[tokio::test]
async fn a_tool_round_is_refused_without_its_signatures_and_accepted_with_them() {
    let cases = [
        (ProviderKind::Anthropic, "claude-opus-4-5", "Expected `thinking` or `redacted_thinking`, but found `tool_use`", "mock-signature-0"),
        (ProviderKind::Gemini, "gemini-3-pro-preview", "Function call is missing a thought_signature", "mock-thought-signature-0"),
    ];
    for (kind, model, refusal, signature) in cases {
        let script = Script::Sequence(vec![
            MockOutcome::Reply(MockReply {
                reasoning: Some("look the weather up".into()),
                tool_calls: vec![ToolCall { id: "toolu_1".into(), name: "get_weather".into(), arguments: json!({"location": "Paris"}) }],
                ..MockReply::text("").with_finish_reason(FinishReason::ToolCalls)
            }),
            MockOutcome::Reply(MockReply::text("18°C in Paris.")),
        ]);
        let server = MockServer::start(MockConfig { script, require_signatures: true, ..MockConfig::default() }).await.unwrap();
        let endpoint = mock_endpoint(&server, kind, model);
        let client = quick_client();
        let request = weather_request();
        let first = client.call(&endpoint, &request).await.unwrap().response;
        assert_eq!(first.finish_reason, FinishReason::ToolCalls, "{kind}");
        let call_id = first.tool_calls[0].id.clone();
        let answer = Message::tool_outputs([(call_id.as_str(), "18°C")], "");

        let mut dropped = Message::assistant_turn(&first);
        dropped.items = unsigned(&dropped.items);
        let mut without = request.clone();
        without.messages.extend([dropped, answer.clone()]);
        let error = client.call(&endpoint, &without).await.unwrap_err();
        assert_eq!(error.class(), "bad_request", "{kind}: {error}");
        assert!(error.to_string().contains(refusal), "{kind}: {error}");

        let mut carried = request.clone();
        carried.messages.extend([Message::assistant_turn(&first), answer]);
        let second = client.call(&endpoint, &carried).await.unwrap();
        assert_eq!(second.response.text, "18°C in Paris.", "{kind}");
        // The signature went back exactly as issued, on the block or part it came on.
        let log = server.request_log();
        let sent = &log.last().unwrap().body;
        let replayed = match kind {
            ProviderKind::Anthropic => &sent["messages"][1]["content"],
            _ => &sent["contents"][1]["parts"],
        };
        assert_eq!(replayed, &Value::Array(first.items.clone()), "{kind}");
        let signed = match kind {
            ProviderKind::Anthropic => (replayed[0]["type"].clone(), replayed[0]["signature"].clone()),
            _ => (json!(replayed[1].get("functionCall").is_some()), replayed[1]["thoughtSignature"].clone()),
        };
        let expected = if kind == ProviderKind::Anthropic { json!("thinking") } else { json!(true) };
        assert_eq!(signed, (expected, json!(signature)), "{kind}");
        assert_eq!(server.calls(), 3, "{kind}: the refused round was one request, never retried");
        server.shutdown().await;
    }
}

#[tokio::test]
async fn text_replayed_rounds_are_unaffected_by_the_check() {
    // How BBQ replays tool rounds: the call as text in the assistant turn, results as a user turn.
    let server = MockServer::start(MockConfig { require_signatures: true, ..MockConfig::default() }).await.unwrap();
    let client = quick_client();
    for (kind, model) in [(ProviderKind::Anthropic, "claude-opus-4-5"), (ProviderKind::Gemini, "gemini-3-pro-preview")] {
        let mut request = weather_request();
        request.messages.push(Message::assistant("<TOOL>{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}</TOOL>"));
        request.messages.push(Message::user("Tool results:\nget_weather: 18°C"));
        let outcome = client.call(&mock_endpoint(&server, kind, model), &request).await.unwrap();
        assert_eq!(outcome.response.text, "echo: Tool results:\nget_weather: 18°C", "{kind}");
        let contents = outcome.request_body.get("messages").or_else(|| outcome.request_body.get("contents")).unwrap();
        // Anthropic turns are plain strings; Gemini turns one plain text part each.
        let plain = |turn: &Value| match kind {
            ProviderKind::Gemini => turn["parts"]
                .as_array()
                .is_some_and(|parts| parts.len() == 1 && parts[0].as_object().is_some_and(|part| part.len() == 1 && part["text"].is_string())),
            _ => turn["content"].is_string(),
        };
        assert!(contents.as_array().unwrap().iter().all(plain), "{kind}: plain text turns: {contents}");
    }
}
