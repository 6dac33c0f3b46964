//! BBQ-Bench with an API model: a scripted model plays a known trajectory of
//! `is_greater_than_58` through the mock provider (OpenAI protocol, native tool calls and
//! the text fallback), and the cell's record equals the state machine's record of the same
//! moves, solved at round 2 after 2 queries.

use evalgrid::envs::bbq::{Episode, TaskId, TaskParams};
use evalgrid::providers::ToolCall;
use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, MockServer, Script};
use serde_json::{Value, json};

use crate::support::Workspace;

pub(crate) fn call(name: &str, arguments: Value) -> MockOutcome {
    let mut reply = MockReply::text("");
    reply.tool_calls = vec![ToolCall { id: "call_1".into(), name: name.into(), arguments }];
    MockOutcome::Reply(reply.with_finish_reason(evalgrid::providers::FinishReason::ToolCalls))
}

fn text(t: &str) -> MockOutcome {
    MockOutcome::Reply(MockReply::text(t))
}

const PAD_1: &str = "59 gives 1. Maybe a threshold between 0 and 59.";
const PAD_2: &str = "58 gives 0 and 59 gives 1: the rule is x > 58.";

/// The right answers for the numbered test inputs of an evaluation message.
pub(crate) fn answers(state: &str) -> Vec<i64> {
    state
        .lines()
        .filter_map(|l| l.split_once(". "))
        .filter_map(|(n, x)| n.parse::<usize>().ok().and(x.trim().parse::<i64>().ok()))
        .map(|x| i64::from(x > 58))
        .collect()
}

/// The model: reads round, phase and attempt from the conversation and plays the script.
pub(crate) fn model(req: &MockRequest) -> MockOutcome {
    let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
    let tools: Vec<&str> = req.body["tools"].as_array().into_iter().flatten().filter_map(|t| t["function"]["name"].as_str()).collect();
    if !tools.contains(&"execute_python") {
        return text("no tools were offered");
    }
    let state = messages.get(2).and_then(|m| m["content"].as_str()).unwrap_or("");
    let attempt = 1 + messages.iter().filter(|m| m["role"] == "assistant").count();
    let round: u32 = state.strip_prefix("Round ").and_then(|r| r.split([' ', '.']).next()).and_then(|r| r.parse().ok()).unwrap_or(99);
    let phase = ["QUERY PHASE", "SCRATCHPAD PHASE", "EVALUATION PHASE"].into_iter().find(|p| state.contains(p)).unwrap_or("");
    match (round, phase, attempt) {
        (0, "EVALUATION PHASE", 1) => call("submit_predictions", json!({"predictions": vec![0; 11]})),
        (0, "EVALUATION PHASE", 2) => call("submit_predictions", json!({"predictions": vec![0; 12]})),
        (1, "QUERY PHASE", 1) => call("query", json!({"inputs": ["abc"]})),
        (1, "QUERY PHASE", 2) => text("Trying the other side.\n<TOOL>{\"name\": \"query\", \"arguments\": {\"inputs\": [59]}}</TOOL>"),
        (1, "SCRATCHPAD PHASE", 1) => text(PAD_1),
        (1, "EVALUATION PHASE", 1) => text(&format!("```json\n{}\n```", json!({"name": "submit_predictions", "arguments": {"predictions": vec![1; 12]}}))),
        (2, "QUERY PHASE", 1) => call("query", json!({"inputs": [58]})),
        (2, "SCRATCHPAD PHASE", 1) => text(PAD_2),
        (2, "EVALUATION PHASE", 1) => call("submit_predictions", json!({"predictions": answers(state)})),
        other => text(&format!("off script: {other:?}")),
    }
}

/// Runs the one-cell pipeline `p.yaml` and returns what `show` says: the whole JSON, the
/// episode record, and the LLM log and call outcomes taken out of it.
pub(crate) fn run_the_cell(ws: &Workspace) -> (Value, Value, Value, Value) {
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 1, "{v}");
    let (code, shown) = ws.run_json(&["show", "p.yaml", "mock/bbq/is_greater_than_58/0", "--json"]);
    assert_eq!(code, 0, "{shown}");
    let mut episode = shown["episode"].clone();
    let llm = episode.as_object_mut().unwrap().remove("llm").expect("the llm log");
    let outcomes = episode.as_object_mut().unwrap().remove("call_outcomes").expect("the call outcomes");
    (shown, episode, llm, outcomes)
}

/// The same moves applied to the state machine directly.
pub(crate) fn expected_record() -> Value {
    let mut e = Episode::new(TaskId::IsGreaterThan58, 0, TaskParams::default()).unwrap();
    assert!(e.submit_json_predictions(vec![json!(0); 11]).is_err());
    e.submit_json_predictions(vec![json!(0); 12]).unwrap();
    assert!(e.query_json(&[json!("abc")]).is_err());
    e.query_json(&[json!(59)]).unwrap();
    e.set_scratchpad(PAD_1).unwrap();
    e.submit_json_predictions(vec![json!(1); 12]).unwrap();
    e.query_json(&[json!(58)]).unwrap();
    e.set_scratchpad(PAD_2).unwrap();
    let right: Vec<Value> = e.test_inputs().iter().map(|x| json!(i64::from(x.to_string().parse::<i64>().unwrap() > 58))).collect();
    assert!(e.submit_json_predictions(right).unwrap().all_correct);
    serde_json::to_value(e.record()).unwrap()
}

/// `p.yaml`: one BBQ-Bench cell (`is_greater_than_58`, seed 0) for an API model at `url`.
pub(crate) fn write_one_cell_pipeline(ws: &Workspace, url: &str) {
    ws.write(
        "p.yaml",
        &format!(
            "name: bbq-mock\nmodels:\n  - {{id: mock, provider: openai, model: mock-model, base_url: \"{url}\"}}\ntasks:\n  - benchmark: bbq\n    select: [is_greater_than_58]\nseeds: [0]\n"
        ),
    );
}

#[test]
fn scripted_model_through_the_mock_yields_the_exact_record() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start(MockConfig { script: Script::function(model), ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    let ws = Workspace::new();
    write_one_cell_pipeline(&ws, &url);
    let (shown, episode, llm, outcomes) = run_the_cell(&ws);
    assert_eq!(outcomes["mock"]["answers"], 9, "{outcomes}");
    assert_eq!(outcomes["mock"]["answered_by"], json!(["mock-model"]), "{outcomes}");
    assert!(outcomes["mock"].get("no_usage").is_none() && outcomes["mock"].get("length").is_none(), "nine plain answers, all with usage: {outcomes}");
    assert_eq!(episode, expected_record());
    assert_eq!((episode["solved_round"].clone(), episode["solved_at_queries"].clone(), episode["queries_used"].clone()), (json!(2), json!(2), json!(2)));
    assert_eq!(episode["failures"].as_array().unwrap().len(), 2);
    assert_eq!(shown["score"]["solved"], true);
    // 9 calls: 2 in round 0, 2 + 1 + 1 in round 1, 3 in round 2; two read from text.
    let calls = llm["calls"].as_array().unwrap();
    assert_eq!(calls.len(), 9);
    assert_eq!(calls.iter().filter(|c| c["text_calls"] == 1).count(), 2);
    assert_eq!(server.calls(), 9);
    // Everything replays from the cache.
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json", "--offline"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_cached"], 1, "{v}");
    runtime.block_on(server.shutdown());
}
