//! Snapshot tests of the exact request bodies per server and model family (issue 13):
//! a reviewer reads each `.snap` against the provider's API reference.

use serde_json::{Map, Value, json};

use super::anthropic::Messages;
use super::client::request_body;
use super::gemini::GenerateContent;
use super::protocol::Protocol;
use super::signature::fixture;
use super::types::{ChatRequest, Endpoint, Message, ProviderKind, ToolSpec};
use crate::providers::shaping::Shaping;

fn request(params: Value) -> ChatRequest {
    let params: Map<String, Value> = params.as_object().cloned().unwrap_or_default();
    ChatRequest { messages: vec![Message::user("What is 2+2?")], system: Some("Answer briefly.".into()), params, json_mode: false, tools: None }
}

fn body(kind: ProviderKind, model: &str, base_url: Option<&str>, params: Value) -> Value {
    let mut endpoint = Endpoint::new(kind, model);
    if let Some(base_url) = base_url {
        endpoint = endpoint.with_base_url(base_url);
    }
    request_body(&endpoint, &request(params))
}

#[test]
fn openai_platform_and_azure_get_max_completion_tokens() {
    let cap = json!({"max_tokens": 16384, "reasoning_effort": "high"});
    let openai = body(ProviderKind::OpenAi, "gpt-5.2", None, cap.clone());
    insta::assert_json_snapshot!("openai_platform_cap", openai);
    let azure = body(ProviderKind::OpenAi, "gpt-5.2", Some("https://res.openai.azure.com/openai/v1"), cap);
    assert_eq!(azure["max_completion_tokens"], 16384);
    assert!(azure.get("max_tokens").is_none());
}

#[test]
fn every_other_openai_compatible_server_gets_max_tokens() {
    for base in [
        "http://127.0.0.1:11434/v1",
        "https://api.x.ai/v1",
        "https://api.deepseek.com",
        "https://api.z.ai/api/paas/v4",
        "https://openrouter.ai/api/v1",
        "http://127.0.0.1:8000/v1",
    ] {
        let sent = body(ProviderKind::OpenAi, "m", Some(base), json!({"max_tokens": 16384}));
        assert_eq!(sent["max_tokens"], 16384, "{base}");
        assert!(sent.get("max_completion_tokens").is_none(), "{base}");
    }
    let ollama = body(ProviderKind::OpenAi, "qwen3:8b", Some("http://127.0.0.1:11434/v1"), json!({"max_tokens": 16384, "temperature": 0.7}));
    insta::assert_json_snapshot!("openai_compatible_cap", ollama);
}

#[test]
fn max_tokens_field_overrides_the_server_rule_and_is_not_sent() {
    let gateway =
        body(ProviderKind::OpenAi, "gpt-5", Some("https://gateway.example/v1"), json!({"max_tokens": 100, "max_tokens_field": "max_completion_tokens"}));
    assert_eq!(
        gateway,
        json!({"model": "gpt-5", "max_completion_tokens": 100,
        "messages": [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2+2?"}]})
    );
    let legacy = body(ProviderKind::OpenAi, "gpt-4o", None, json!({"max_tokens": 100, "max_tokens_field": "max_tokens"}));
    assert_eq!((legacy["max_tokens"].clone(), legacy.get("max_completion_tokens")), (json!(100), None));
    assert!(legacy.get("max_tokens_field").is_none());
}

#[test]
fn anthropic_default_cap_is_the_models_maximum_output() {
    let cap = |model: &str, params: Value| body(ProviderKind::Anthropic, model, None, params)["max_tokens"].clone();
    assert_eq!(cap("claude-opus-4-5-20251101", json!({})), json!(64_000));
    assert_eq!(cap("claude-opus-4-1", json!({})), json!(32_000));
    assert_eq!(cap("claude-3-5-haiku-latest", json!({})), json!(8_192));
    assert_eq!(cap("claude-sonnet-4-5", json!({"max_tokens": 2000})), json!(2000), "an explicit cap wins");
    assert_eq!(cap("unknown-model", json!({})), json!(4096), "unknown models keep the old default");
    assert_eq!(cap("unknown-model", json!({"thinking_budget": 2048})), json!(4096 + 2048));
    insta::assert_json_snapshot!("anthropic_default_cap", body(ProviderKind::Anthropic, "claude-sonnet-4-5", None, json!({"temperature": 0.2})));
}

#[test]
fn anthropic_adaptive_thinking_with_effort_and_no_sampling_params() {
    let params = json!({"reasoning_effort": "high", "temperature": 0.7, "top_k": 5, "max_tokens": 32000});
    let opus47 = body(ProviderKind::Anthropic, "claude-opus-4-7", None, params.clone());
    insta::assert_json_snapshot!("anthropic_adaptive_opus_4_7", opus47);
    // A budget on an adaptive-only model turns adaptive thinking on; it is never sent.
    let budget = body(ProviderKind::Anthropic, "claude-sonnet-5", None, json!({"thinking_budget": 16000, "temperature": 1}));
    assert_eq!(budget["thinking"], json!({"type": "adaptive", "display": "summarized"}));
    assert!(budget.get("temperature").is_none() && budget.get("thinking_budget").is_none());
    assert_eq!(budget["max_tokens"], 128_000);
    // Opus 4.6 takes both: effort → adaptive (sampling kept), a budget alone → manual.
    let both = body(ProviderKind::Anthropic, "claude-opus-4-6", None, json!({"reasoning_effort": "medium", "temperature": 1}));
    assert_eq!(
        (both["thinking"]["type"].clone(), both["output_config"].clone(), both["temperature"].clone()),
        (json!("adaptive"), json!({"effort": "medium"}), json!(1))
    );
    let manual_46 = body(ProviderKind::Anthropic, "claude-opus-4-6", None, json!({"thinking_budget": 4000}));
    assert_eq!(manual_46["thinking"], json!({"type": "enabled", "budget_tokens": 4000}));
}

#[test]
fn anthropic_manual_thinking_for_models_that_still_take_it() {
    let opus45 = body(ProviderKind::Anthropic, "claude-opus-4-5", None, json!({"thinking_budget": 16000, "max_tokens": 16384, "temperature": 0.7}));
    insta::assert_json_snapshot!("anthropic_manual_opus_4_5", opus45);
}

#[test]
fn gemini_2_gets_a_thinking_budget_and_gemini_3_a_level() {
    let effort = json!({"reasoning_effort": "low", "max_tokens": 8192});
    insta::assert_json_snapshot!("gemini_2_5_effort_as_budget", body(ProviderKind::Gemini, "gemini-2.5-flash", None, effort.clone()));
    insta::assert_json_snapshot!("gemini_3_effort_as_level", body(ProviderKind::Gemini, "gemini-3-pro-preview", None, effort));
    let explicit = body(ProviderKind::Gemini, "gemini-2.5-pro", None, json!({"reasoning_effort": "high", "thinking_budget": 2048}));
    assert_eq!(explicit["generationConfig"]["thinkingConfig"], json!({"thinkingBudget": 2048, "includeThoughts": true}));
    let off = body(ProviderKind::Gemini, "gemini-2.5-flash", None, json!({"reasoning_effort": "none"}));
    assert_eq!(off["generationConfig"]["thinkingConfig"], json!({"thinkingBudget": 0}));
}

#[test]
fn responses_body_with_tools_and_reasoning() {
    let params = json!({"max_tokens": 16384, "reasoning_effort": "medium", "temperature": 1.0, "top_p": 0.9});
    let mut request = request(params);
    request.tools = Some(vec![ToolSpec {
        name: "execute_python".into(),
        description: "Run Python code and return its output.".into(),
        parameters: json!({"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]}),
    }]);
    let body = request_body(&Endpoint::new(ProviderKind::OpenAiResponses, "gpt-5.2"), &request);
    insta::assert_json_snapshot!("responses_tools_and_reasoning", body);
    assert!(body.get("max_tokens").is_none() && body.get("reasoning_effort").is_none() && body.get("messages").is_none());
}

fn weather_tool(name: &str) -> Vec<ToolSpec> {
    vec![ToolSpec {
        name: name.into(),
        description: "Current weather in a city.".into(),
        parameters: json!({"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}),
    }]
}

/// The second round of a tool loop with thinking on: the recorded answer's thinking block
/// (signature included) first, then its text and `tool_use`, then the `tool_result`.
#[test]
fn anthropic_second_round_carries_the_thinking_signature() {
    let ok = reqwest::StatusCode::OK;
    let called = Messages.parse(ok, &reqwest::header::HeaderMap::new(), &fixture("anthropic_thinking_tool_use"), &Shaping::default()).unwrap();
    let params: Map<String, Value> = json!({"thinking_budget": 10000, "max_tokens": 16000}).as_object().cloned().unwrap_or_default();
    let request = ChatRequest {
        messages: vec![
            Message::user("What's the weather in Paris?"),
            Message::assistant_turn(&called),
            Message::tool_outputs([("toolu_01CswdEQBMshySk6Y9DFKrfq", "Current temperature: 88°F")], ""),
        ],
        system: None,
        params,
        json_mode: false,
        tools: Some(weather_tool("get_weather")),
    };
    let body = request_body(&Endpoint::new(ProviderKind::Anthropic, "claude-sonnet-4-5"), &request);
    insta::assert_json_snapshot!("anthropic_second_round_signatures", body);
}

/// Gemini 3 parallel calls, their responses, the signed answer, then a new question: each
/// `thoughtSignature` stays on the part it came on (the first call, the answer's text).
#[test]
fn gemini_second_round_carries_the_thought_signatures() {
    let ok = reqwest::StatusCode::OK;
    let parse = |name: &str| GenerateContent.parse(ok, &reqwest::header::HeaderMap::new(), &fixture(name), &Shaping::default()).unwrap();
    let request = ChatRequest {
        messages: vec![
            Message::user("Which is warmer now, Paris or London?"),
            Message::assistant_turn(&parse("gemini_signed_parallel_calls")),
            Message::tool_outputs([("", "18°C"), ("", "14°C")], ""),
            Message::assistant_turn(&parse("gemini_signed_text")),
            Message::user("And Rome?"),
        ],
        system: Some("Use the tools.".into()),
        params: json!({"reasoning_effort": "high"}).as_object().cloned().unwrap_or_default(),
        json_mode: false,
        tools: Some(weather_tool("get_current_temperature")),
    };
    let body = request_body(&Endpoint::new(ProviderKind::Gemini, "gemini-3-pro-preview"), &request);
    insta::assert_json_snapshot!("gemini_second_round_signatures", body);
}

/// The second round of a Chat Completions tool loop, from the answer in OpenAI's function
/// calling guide: the assistant turn carries its `tool_calls` (arguments as compact JSON
/// text, the same for the same call), each result is a `tool` message with its
/// `tool_call_id`, then the next user turn.
#[test]
fn chat_completions_second_round_carries_the_calls_and_tool_messages() {
    let answer = br#"{"id":"chatcmpl-abc123","object":"chat.completion","created":1699896916,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_abc123","type":"function","function":{"name":"get_current_weather","arguments":"{\n\"location\": \"Boston, MA\"\n}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":82,"completion_tokens":17,"total_tokens":99}}"#;
    let ok = reqwest::StatusCode::OK;
    let called = super::openai::ChatCompletions.parse(ok, &reqwest::header::HeaderMap::new(), answer, &Shaping::default()).unwrap();
    let request = ChatRequest {
        messages: vec![
            Message::user("What's the weather like in Boston today?"),
            Message::assistant_turn(&called),
            Message::tool_outputs([("call_abc123", "{\"temperature\": 22, \"unit\": \"celsius\"}")], ""),
            Message::user("And tomorrow?"),
        ],
        system: None,
        params: Map::new(),
        json_mode: false,
        tools: Some(weather_tool("get_current_weather")),
    };
    let body = request_body(&Endpoint::new(ProviderKind::OpenAi, "gpt-4o-mini"), &request);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages.iter().map(|m| m["role"].as_str().unwrap()).collect::<Vec<_>>(), ["user", "assistant", "tool", "user"]);
    assert_eq!(messages[1]["tool_calls"][0]["function"]["arguments"], "{\"location\":\"Boston, MA\"}");
    insta::assert_json_snapshot!("chat_completions_second_round_tool_messages", body);
}

/// A user turn with an image: a text part, then the image in each protocol's own shape
/// (Chat Completions `image_url` data URL, Responses `input_image`, Anthropic base64 `image`
/// source, Gemini `inline_data`); a text-only turn keeps its plain form (its key unchanged).
#[test]
fn an_image_is_a_part_after_the_text_on_every_protocol() {
    let mut question = Message::user("What colour is this square?");
    question.images.push(super::types::Image { media_type: "image/png".into(), data: "iVBORw0KGgo=".into() });
    let request = ChatRequest { messages: vec![question], system: None, params: Map::new(), json_mode: false, tools: None };
    for (kind, name) in [
        (ProviderKind::OpenAi, "image_chat_completions"),
        (ProviderKind::OpenAiResponses, "image_responses"),
        (ProviderKind::Anthropic, "image_anthropic"),
        (ProviderKind::Gemini, "image_gemini"),
    ] {
        let sent = request_body(&Endpoint::new(kind, "m"), &request);
        insta::assert_json_snapshot!(name, sent);
        let plain = ChatRequest { messages: vec![Message::user("What colour is this square?")], ..request.clone() };
        assert!(!request_body(&Endpoint::new(kind, "m"), &plain).to_string().contains("image"), "{kind}: a text turn has no image part");
    }
}
