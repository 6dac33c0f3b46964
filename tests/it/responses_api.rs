//! The OpenAI Responses API (`provider: openai`, `api: responses`): a BBQ-Bench episode
//! against a mock speaking the Responses API, with reasoning items in every answer, reaches
//! the same record as the Chat Completions run of the same scripted trajectory, also in
//! background mode (polled, keyed as in the foreground); `api:` and `background:` are checked.

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockRequest, MockServer, Script};
use serde_json::{Value, json};

use crate::bbq_llm::{expected_record, model, run_the_cell};
use crate::support::Workspace;

/// The Responses request seen as the Chat Completions request the BBQ script reads:
/// `instructions` as the system message, message input items as messages, flat tools wrapped.
fn as_chat(request: &MockRequest) -> MockRequest {
    let mut messages = Vec::new();
    if let Some(system) = request.body["instructions"].as_str() {
        messages.push(json!({"role": "system", "content": system}));
    }
    for item in request.body["input"].as_array().into_iter().flatten() {
        if let Some(role) = item["role"].as_str() {
            messages.push(json!({"role": role, "content": item["content"]}));
        }
    }
    let tools: Vec<Value> = request.body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|tool| {
            assert_eq!(tool["type"], "function", "flat function tools");
            assert!(tool.get("function").is_none(), "Responses tools are not nested: {tool}");
            json!({"type": "function", "function": {"name": tool["name"], "description": tool["description"], "parameters": tool["parameters"]}})
        })
        .collect();
    MockRequest { body: json!({"model": request.body["model"], "messages": messages, "tools": tools}), ..request.clone() }
}

/// The BBQ script, answering in the Responses shape with a reasoning item (summary and
/// encrypted content) before every answer.
fn responses_model(request: &MockRequest) -> MockOutcome {
    // Stateless, except in background mode, which the API only allows on stored responses.
    assert_eq!(request.body["store"], request.body.get("background").is_some_and(|background| background == true));
    match model(&as_chat(request)) {
        MockOutcome::Reply(mut reply) => {
            reply.reasoning = Some(format!("thinking before answer {}", request.route_index));
            MockOutcome::Reply(reply)
        }
        other => other,
    }
}

fn pipeline(url: &str, api: &str) -> String {
    format!(
        "name: bbq-responses\nmodels:\n  - {{id: mock, provider: openai, model: mock-model, base_url: \"{url}\"{api}}}\ntasks:\n  - benchmark: bbq\n    select: [is_greater_than_58]\nseeds: [0]\n"
    )
}

#[test]
fn bbq_episode_over_the_responses_api_reaches_the_chat_completions_record() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start(MockConfig { script: Script::function(responses_model), ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&url, ", api: responses"));
    let (shown, episode, llm, outcomes) = run_the_cell(&ws);
    assert_eq!(outcomes["mock"]["answers"], 9, "{outcomes}");
    assert_eq!(episode, expected_record(), "the same record as the Chat Completions run");
    assert_eq!(shown["score"]["solved"], true);
    let calls = llm["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 9);
    assert_eq!(calls.iter().filter(|c| c["text_calls"] == 1).count(), 2, "two calls read from text, as over Chat Completions");
    let log = server.request_log();
    assert_eq!(log.len(), 9);
    assert!(log.iter().all(|request| request.path == "/v1/responses"), "every call went to base_url + /responses");
    assert!(log.iter().all(|request| request.body.get("messages").is_none() && request.body["input"].is_array()));
    // Everything replays from the cache.
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json", "--offline"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_cached"], 1, "{v}");
    // `api` is keyed: the same entry on Chat Completions is a different cell.
    ws.write("p.yaml", &pipeline(&url, ", api: chat"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json", "--offline"]);
    assert_ne!(code, 0, "api: chat is not answered from the Responses cache: {v}");
    runtime.block_on(server.shutdown());
}

/// Background mode (`background: true`): every call is POSTed once with `background` and
/// `store: true`, polled until done, and keyed as without it, so the same pipeline without
/// `background` replays the whole cell from the cache.
#[test]
fn bbq_episode_in_background_mode_polls_and_keys_as_in_the_foreground() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server =
        runtime.block_on(MockServer::start(MockConfig { script: Script::function(responses_model), background_polls: 2, ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    let ws = Workspace::new();
    let fast_polls = "transport: {background_poll_ms: 5, background_poll_max_ms: 20}\n";
    ws.write("p.yaml", &format!("{}{fast_polls}", pipeline(&url, ", api: responses, background: true")));
    let (_, episode, _, outcomes) = run_the_cell(&ws);
    assert_eq!(outcomes["mock"]["answers"], 9, "{outcomes}");
    assert_eq!(episode, expected_record(), "the same record as the Chat Completions run");
    let log = server.request_log();
    let posts: Vec<_> = log.iter().filter(|request| request.method == "POST").collect();
    assert_eq!(posts.len(), 9, "one POST per call");
    assert!(posts.iter().all(|request| request.path == "/v1/responses" && request.body["background"] == true && request.body["store"] == true));
    assert_eq!(log.iter().filter(|request| request.method == "GET" && request.path.starts_with("/v1/responses/resp_bg_")).count(), 18);
    ws.write("p.yaml", &pipeline(&url, ", api: responses"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json", "--offline"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_cached"], 1, "background mode is not in any key: {v}");
    runtime.block_on(server.shutdown());
}

#[test]
fn api_is_checked_per_provider() {
    let ws = Workspace::new();
    for (entry, message) in [
        ("{id: a, provider: anthropic, model: claude-opus-4-5, api: responses}", "`api` applies to `provider: openai` only"),
        ("{id: o, provider: openai, model: gpt-5.2, api: stream}", "unknown `api: stream`"),
        ("{id: a, provider: anthropic, model: claude-opus-4-5, background: true}", "`background` applies to `provider: openai` only"),
        ("{id: o, provider: openai, model: o3-pro, background: sometimes}", "unknown `background: \"sometimes\"`"),
        ("{id: o, provider: openai, model: o3-pro, api: chat, background: true}", "`background: true` needs the Responses API"),
    ] {
        ws.write("bad.yaml", &format!("name: x\nmodels:\n  - {entry}\ntasks:\n  - benchmark: bbq\n    select: [is_greater_than_58]\nseeds: [0]\n"));
        let out = ws.run(&["validate", "bad.yaml"]);
        assert_eq!(out.status.code(), Some(2));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(message) && stderr.contains("bad.yaml:3:"), "{stderr}");
    }
    ws.write("ok.yaml", "name: x\nmodels:\n  - {id: o, provider: openai, model: gpt-5.2, api: auto, background: auto}\ntasks:\n  - benchmark: bbq\n    select: [is_greater_than_58]\nseeds: [0]\n");
    assert_eq!(ws.run(&["validate", "ok.yaml"]).status.code(), Some(0));
}

/// Issue 23: a multi-turn conversation on `api: responses` replays the model's earlier answers
/// as the API documents earlier output (`type: message`, `output_text` parts). The mock, like
/// llama.cpp's server, refuses an assistant item without `type` ("Cannot determine type of
/// 'item'"), which failed every second turn before.
#[test]
fn a_multi_turn_conversation_replays_the_models_answers_as_typed_message_items() {
    let replayed = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = replayed.clone();
    let server_model = move |request: &MockRequest| {
        let items = request.body["input"].as_array().cloned().unwrap_or_default();
        for item in &items {
            if item["role"] == "assistant" {
                assert_eq!(item["type"], "message", "{item}");
                assert_eq!(item["content"][0]["type"], "output_text", "{item}");
                seen.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
        // Guesses 1, 2, 3 … one per turn.
        let turn = items.iter().filter(|item| item["role"] == "assistant").count() + 1;
        MockOutcome::Reply(evalgrid::providers::mock::MockReply::text(turn.to_string()))
    };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start(MockConfig { script: Script::function(server_model), ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    let ws = Workspace::new();
    ws.write(
        "g.yaml",
        &format!("name: guess-responses\nmodels:\n  - {{id: api, provider: openai, model: mock-guess, base_url: \"{url}\", api: responses}}\ntasks:\n  - benchmark: guess\n    select: all\nseeds: [0]\n"),
    );
    let (code, v) = ws.run_json(&["run", "g.yaml", "--json"]);
    assert_eq!((code, v["cells_failed"].as_u64()), (0, Some(0)), "{v}");
    assert!(replayed.load(std::sync::atomic::Ordering::Relaxed) > 0, "no second turn was asked: {v}");
    runtime.block_on(server.shutdown());
}
