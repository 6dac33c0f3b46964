//! Tests of the API-model driver with a fake chat function: invalid queries come back as the
//! state machine's errors and the episode continues, forfeits, the text fallback, the
//! scratchpad cap, `execute_python` accounting, and hostile code in the real sandbox.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;
use crate::providers::{FinishReason, ToolCall, Usage};

fn response(text: &str, calls: Vec<ToolCall>) -> ChatResponse {
    ChatResponse { tool_calls: calls, usage: Usage { input: 10, output: 5, ..Usage::default() }, ..ChatResponse::text_from("fake", text) }
}

fn tool(name: &str, arguments: Value) -> ChatResponse {
    response("", vec![ToolCall { id: "c1".into(), name: name.into(), arguments }])
}

fn text(t: &str) -> ChatResponse {
    response(t, Vec::new())
}

/// The phase instruction a request carries (its state message).
fn phase_of(req: &ChatRequest) -> Phase {
    let state = &req.messages[1].content;
    if state.contains("QUERY PHASE") {
        Phase::Query
    } else if state.contains("SCRATCHPAD PHASE") {
        Phase::Scratchpad
    } else {
        Phase::Evaluation
    }
}

fn test_count(req: &ChatRequest) -> usize {
    let state = &req.messages[1].content;
    let after = state.split("exactly ").nth(1).unwrap_or("0");
    after.split_whitespace().next().unwrap_or("0").parse().unwrap_or(0)
}

/// Plays scripted replies in order (`None` = the default move of the phase), then defaults:
/// query `default_query`, a short scratchpad, predictions that are all `0`.
struct Fake {
    queue: VecDeque<Option<ChatResponse>>,
    default_query: Value,
    seen: Vec<(String, ChatRequest)>,
}

impl Fake {
    fn new(queue: Vec<Option<ChatResponse>>, default_query: Value) -> Self {
        Fake { queue: queue.into(), default_query, seen: Vec::new() }
    }

    /// The last user message of the request made at `position`.
    fn shown_at(&self, position: &str) -> &str {
        let (_, req) = self.seen.iter().find(|(p, _)| p == position).unwrap_or_else(|| panic!("no call at {position}"));
        &req.messages.last().unwrap().content
    }
}

impl Chat for Fake {
    fn chat<'a>(&'a mut self, request: &'a ChatRequest, position: &'a str) -> BoxFuture<'a, Result<ChatResponse, StepError>> {
        self.seen.push((position.to_owned(), request.clone()));
        let reply = self.queue.pop_front().flatten().unwrap_or_else(|| match phase_of(request) {
            Phase::Query => tool(QUERY, json!({"inputs": [self.default_query.clone()]})),
            Phase::Scratchpad => text("notes"),
            _ => tool(SUBMIT, json!({"predictions": vec![0; test_count(request)]})),
        });
        Box::pin(async move { Ok(reply) })
    }
}

/// A Python runner that must not be called.
struct NoPython;

impl PythonRunner for NoPython {
    fn run<'a>(&'a self, _code: &'a str) -> BoxFuture<'a, Result<PythonRun, StepError>> {
        Box::pin(async { Err(StepError::episode_msg("python not expected")) })
    }
}

/// A Python runner answering `print` runs with success and anything else with a failure.
struct FakePython;

impl PythonRunner for FakePython {
    fn run<'a>(&'a self, code: &'a str) -> BoxFuture<'a, Result<PythonRun, StepError>> {
        let ok = code.starts_with("print");
        let run = PythonRun {
            stdout: if ok { "42\n".into() } else { String::new() },
            stderr: if ok { String::new() } else { "Traceback ...\nZeroDivisionError: division by zero\n".into() },
            exit_code: Some(if ok { 0 } else { 1 }),
            signal: None,
            timed_out: false,
            limit: None,
            truncated: false,
            wall_s: 0.0,
        };
        Box::pin(async move { Ok(run) })
    }
}

/// `s` as it appears inside a JSON string.
fn escaped(s: &str) -> String {
    let quoted = serde_json::to_string(s).unwrap();
    quoted[1..quoted.len() - 1].to_owned()
}

fn new_episode(task: TaskId) -> Episode {
    Episode::new(task, 0, TaskParams::default()).unwrap()
}

async fn play_with(episode: Episode, fake: &mut Fake, python: &dyn PythonRunner) -> EpisodeRecord {
    play(episode, fake, python, Map::new()).await.unwrap().0
}

#[tokio::test]
async fn invalid_queries_come_back_as_the_spec_errors_and_the_episode_continues() {
    let task = TaskId::FuncGcdPlusLcm;
    // The exact errors, from the state machine itself.
    let mut reference = new_episode(task);
    reference.submit_json_predictions(vec![json!(0); reference.test_inputs().len()]).unwrap();
    let err = |r: &mut Episode, inputs: Value| r.query_json(inputs.as_array().unwrap()).unwrap_err().to_string();
    let arity = err(&mut reference, json!(["(1, 2, 3)"]));
    let domain = err(&mut reference, json!([[0, 5]]));
    assert!(arity.contains("(1, 2, 3)") && domain.contains("0"), "{arity} / {domain}");
    let mut fake = Fake::new(
        vec![
            None,
            Some(tool(QUERY, json!({"inputs": ["(1, 2, 3)"]}))),
            Some(tool(QUERY, json!({"inputs": [[0, 5]]}))),
            Some(tool(QUERY, json!({"inputs": ["(4, 6)"]}))),
            None,
            None,
            Some(tool(QUERY, json!({"inputs": ["(1, 2)", "(3, 4)"]}))),
            Some(tool(QUERY, json!({"inputs": [[3, 4]]}))),
        ],
        json!("(1, 1)"),
    );
    let record = play_with(new_episode(task), &mut fake, &NoPython).await;
    // Errors are JSON string values in the tool result.
    let (arity_json, domain_json) = (escaped(&arity), escaped(&domain));
    let shown = fake.shown_at("round 1 phase query attempt 2");
    assert!(shown.contains(&arity_json), "{shown}\n{arity_json}");
    assert!(fake.shown_at("round 1 phase query attempt 2").contains("(failed attempt 1 of 3)"));
    assert!(fake.shown_at("round 1 phase query attempt 3").contains(&domain_json));
    let too_many = fake.shown_at("round 2 phase query attempt 2");
    assert!(too_many.contains("batch of 2 inputs exceeds the limit of 1 per query; tuples must be written in parentheses, e.g. '(1, 2)'"), "{too_many}");
    // Nothing was forfeited and no budget was spent on rejected batches.
    assert!(record.forfeits.is_empty());
    assert_eq!(record.failures.len(), 3);
    assert_eq!(record.failures[0].cause, arity);
    assert_eq!(record.rounds[1].queries.len(), 1);
    assert_eq!(record.rounds[1].queries[0].input.to_string(), "(4, 6)");
    assert_eq!(record.rounds[2].queries[0].input.to_string(), "(3, 4)");
    // Every round was played and the whole budget used.
    assert_eq!((record.rounds.len(), record.queries_used, record.solved), (31, 30, false));
    assert!(fake.seen.iter().all(|(p, _)| p != "round 1 phase query attempt 4"));
}

#[tokio::test]
async fn over_budget_batches_are_rejected_without_spending_budget() {
    // Rounds × batch size = budget, so a partly spent budget is simulated (as in the state
    // machine's own tests).
    let mut episode = new_episode(TaskId::NumLessThanDiag);
    episode.submit_json_predictions(vec![json!(0); episode.test_inputs().len()]).unwrap();
    episode.spend_budget_for_tests(195);
    let ten: Vec<&str> = vec!["a"; 10];
    let mut fake = Fake::new(vec![Some(tool(QUERY, json!({"inputs": ten}))), Some(tool(QUERY, json!({"inputs": ["a", "b", "c", "d", "e"]})))], json!("a"));
    let record = play_with(episode, &mut fake, &NoPython).await;
    let shown = fake.shown_at("round 1 phase query attempt 2");
    assert!(shown.contains("batch of 10 inputs exceeds the remaining query budget of 5"), "{shown}");
    assert_eq!(record.queries_used, 200);
    assert_eq!(record.rounds.len(), 2, "a spent budget ends the run after the evaluation");
    assert_eq!(record.failures.len(), 1);
}

#[tokio::test]
async fn three_failed_attempts_forfeit_and_the_next_phase_starts_fresh() {
    let mut fake = Fake::new(
        vec![
            Some(text("I think it is prime-related.")),
            Some(text("<TOOL>{\"name\": \"submit_predictions\", \"arguments\": {\"predictions\": [1, 2]}}</TOOL>")),
            Some(text("```json\n{\"name\": \"submit_predictions\", \"arguments\": {\"predictions\": \"oops\"}}\n```")),
            Some(text("<TOOL>{not json}</TOOL>")),
            Some(tool(SUBMIT, json!({"predictions": [0]}))),
            Some(tool("query", json!({"inputs": [7]}))),
        ],
        json!(4),
    );
    let record = play_with(new_episode(TaskId::IsPrime), &mut fake, &NoPython).await;
    // Round 0: text only, wrong count (text fallback), malformed arguments -> forfeited.
    assert!(record.rounds[0].evaluation_forfeited);
    assert_eq!(record.forfeits[0], crate::envs::bbq::Forfeit { round: 0, phase: Phase::Evaluation, tool: Tool::SubmitPredictions });
    let causes: Vec<&str> = record.failures.iter().map(|f| f.cause.as_str()).collect();
    assert!(causes[0].starts_with("no tool call found"), "{causes:?}");
    assert_eq!(causes[1], "expected 13 predictions (one per test input), got 2");
    assert_eq!(causes[2], "malformed `submit_predictions` arguments: expected {\"predictions\": [...]}");
    // Round 1 starts a fresh conversation: system prompt, samples, state message.
    let (_, first) = fake.seen.iter().find(|(p, _)| p == "round 1 phase query attempt 1").unwrap();
    assert_eq!(first.messages.len(), 2);
    assert!(first.messages[0].content.starts_with("Sample pairs:\n195 → 0"));
    assert!(first.system.as_deref().unwrap().contains("Query budget: 30"));
    // Round 1: malformed JSON, a wrong-phase tool, then the default query.
    assert!(causes[3].starts_with("malformed tool call: the <TOOL> block is not valid JSON"), "{causes:?}");
    assert_eq!(causes[4], "`submit_predictions` is not available in the query phase");
    assert_eq!(record.rounds[1].queries.len(), 1);
    // Within a phase the model's turns and the tool results stay in context.
    let (_, third) = fake.seen.iter().find(|(p, _)| p == "round 1 phase query attempt 3").unwrap();
    assert_eq!(third.messages.len(), 6);
    assert_eq!(third.messages[2].role, crate::providers::Role::Assistant);
    assert_eq!(third.messages[2].content, "<TOOL>{not json}</TOOL>");
    assert!(third.messages[3].content.starts_with("Tool results:\ntool call: {\"error\":"));
    assert_eq!(third.messages[4].content, "<TOOL>{\"name\": \"submit_predictions\", \"arguments\": {\"predictions\":[0]}}</TOOL>");
}

#[tokio::test]
async fn scratchpad_is_truncated_kept_on_empty_and_solving_stops_the_run() {
    let long: Vec<String> = (0..310).map(|i| format!("w{i}")).collect();
    let episode = new_episode(TaskId::IsGreaterThan58);
    let answers: Vec<i64> = episode.test_inputs().iter().map(|x| i64::from(x.to_string().parse::<i64>().unwrap() > 58)).collect();
    let mut fake = Fake::new(
        vec![
            None,
            Some(text("I'll look at 58 first.\n<TOOL>{\"name\": \"query\", \"arguments\": {\"inputs\": [\"58\"]}}</TOOL>")),
            Some(text(&long.join("\n "))),
            None,
            Some(tool(QUERY, json!({"inputs": [59]}))),
            // Round 2's scratchpad phase: a refused `submit_predictions` and no text keeps the
            // previous scratchpad.
            Some(tool(SUBMIT, json!({"predictions": [1]}))),
            // Round 2's evaluation: one Python run, then the right answers.
            Some(tool(PYTHON, json!({"code": "print(6*7)"}))),
            Some(tool(SUBMIT, json!({"predictions": answers}))),
        ],
        json!(0),
    );
    let record = play_with(episode, &mut fake, &FakePython).await;
    let pad1 = record.rounds[1].scratchpad.clone().unwrap();
    assert_eq!(pad1.split(' ').count(), 300);
    assert!(pad1.starts_with("w0 w1 ") && pad1.ends_with(" w299"));
    assert_eq!(record.rounds[2].scratchpad.as_deref(), Some(pad1.as_str()));
    assert_eq!(record.failures.last().unwrap().tool, Tool::Scratchpad);
    assert_eq!((record.solved, record.solved_round, record.solved_at_queries), (true, Some(2), Some(2)));
    assert_eq!(record.rounds.len(), 3);
    let shown = fake.shown_at("round 2 phase evaluation attempt 1");
    assert!(shown.contains("1. 59\n2. 25"), "{shown}");
    assert!(shown.contains("Query history (2 queries, in query order):\n58 → 0\n59 → 1"), "{shown}");
}

#[tokio::test]
async fn python_runs_once_per_phase_and_failures_count() {
    let mut fake = Fake::new(
        vec![
            Some(tool(PYTHON, json!({"code": "1/0"}))),
            Some(tool(PYTHON, json!({"program": "print(1)"}))),
            Some(tool(PYTHON, json!({"code": "print(1)"}))),
            // Refused without running, and no `submit_predictions`: a failed attempt.
            Some(tool(PYTHON, json!({"code": "print(2)"}))),
        ],
        json!(4),
    );
    let record = play_with(new_episode(TaskId::IsPrime), &mut fake, &FakePython).await;
    let shown = fake.shown_at("round 0 phase evaluation attempt 2");
    assert!(shown.contains("ZeroDivisionError") && shown.contains("\"exit_code\":1"), "{shown}");
    assert!(shown.contains("execute_python exited with code 1: ZeroDivisionError: division by zero (failed attempt 1 of 3)"), "{shown}");
    assert!(fake.shown_at("round 0 phase evaluation attempt 3").contains("malformed `execute_python` arguments"));
    assert!(fake.shown_at("round 0 phase evaluation attempt 4").contains("\"stdout\":\"42\\n\""));
    let refused = fake.shown_at("round 0 phase evaluation attempt 5");
    assert!(refused.contains("execute_python may run only once per phase"), "{refused}");
    assert!(refused.contains("no `submit_predictions` call (failed attempt 1 of 3)"), "{refused}");
    let tools: Vec<Tool> = record.failures.iter().map(|f| f.tool).collect();
    assert_eq!(tools, [Tool::ExecutePython, Tool::ExecutePython, Tool::SubmitPredictions]);
    // The offered tools: the phase's own plus execute_python, none other.
    let (_, req) = &fake.seen[0];
    let names: Vec<&str> = req.tools.as_ref().unwrap().iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, [SUBMIT, PYTHON]);
}

#[test]
fn the_system_prompt_states_domain_budget_batch_and_tools() {
    let params = TaskParams::default();
    let s = prompt::system_prompt(&TaskId::FuncGcdPlusLcm.task(), &params);
    for needle in [
        "Input: a tuple of 2 integers, each between 1 and 1000000 inclusive",
        "Query budget: 30",
        "Batch limit: up to 1 input per query call",
        "uses no semantics or world knowledge",
        "7. Prefer simpler explanations",
        "at most once per phase",
        "up to 3 attempts per phase",
        "<TOOL>{\"name\": \"query\", \"arguments\": {\"inputs\": [\"(1, 2)\"]}}</TOOL>",
    ] {
        assert!(s.contains(needle), "missing {needle:?} in\n{s}");
    }
}

#[tokio::test]
async fn hostile_python_infinite_loop_is_killed_and_reported_to_the_model() {
    if crate::envs::bbq::python::tests::sandbox("hostile_python_infinite_loop").is_none() {
        return;
    }
    let runner = SandboxRunner { limits: PythonLimits { timeout: Duration::from_secs(1), ..crate::envs::bbq::python::tests::small_limits() } };
    let mut fake = Fake::new(vec![Some(tool(PYTHON, json!({"code": "while True:\n    pass"})))], json!(4));
    let start = Instant::now();
    let record = play_with(new_episode(TaskId::IsPrime), &mut fake, &runner).await;
    assert!(start.elapsed() < Duration::from_secs(15));
    let shown = fake.shown_at("round 0 phase evaluation attempt 2");
    assert!(shown.contains("\"timed_out\":true") && shown.contains("execute_python timed out (failed attempt 1 of 3)"), "{shown}");
    assert_eq!(record.failures[0].tool, Tool::ExecutePython);
    assert_eq!(record.failures[0].cause, "execute_python timed out");
}

#[tokio::test]
async fn empty_and_malformed_replies_are_failed_attempts_not_failed_cells() {
    // Gemini's MALFORMED_FUNCTION_CALL arrives with no text and no call; an OpenAI call
    // with unparseable arguments arrives as a string. Both are the model's failed attempt.
    let mut empty = text("");
    empty.finish_reason = FinishReason::Malformed;
    let mut broken = tool(QUERY, json!("{\"inputs\": [1"));
    broken.finish_reason = FinishReason::Malformed;
    let mut cut = text("I will query 4");
    cut.finish_reason = FinishReason::Length;
    let mut fake = Fake::new(vec![None, Some(empty), Some(broken), Some(cut)], json!(5));
    let record = play_with(new_episode(TaskId::IsGreaterThan58), &mut fake, &NoPython).await;
    let round1: Vec<&str> = record.failures.iter().filter(|f| f.round == 1).map(|f| f.cause.as_str()).collect();
    assert_eq!(round1.len(), 3, "three failed attempts, then the phase is forfeited: {:?}", record.failures);
    assert!(record.forfeits.iter().any(|f| f.round == 1), "{:?}", record.forfeits);
    assert!(record.rounds.len() > 1, "the episode went on");
}
