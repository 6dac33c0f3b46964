//! Batch mode for Anthropic Message Batches and Gemini batch mode (issue 33), against the
//! same independent Python mock (`batch_mock.py`, written from each API's documented
//! shapes): for each, a batched grid reports like a live one and pays each call once (the
//! server's count), kill -9 at random moments then a rerun pays each call once, a kill
//! between the create request and its ledger record pays once (Anthropic has no tag: found
//! by creation time and request count, adopted once its results hold the intent's keys;
//! Gemini: by its display name), an expiring batch returns its calls once then they fail
//! visibly, and `status` / `batch cancel` name and cancel the running batches.
//!
//! The kill loops run `EVALGRID_BATCH_KILLS` kills (default 4); the must-hold is 20:
//! `EVALGRID_BATCH_KILLS=20 cargo test --test it batch_providers::kill_9`.

use crate::batch::{
    Names, PyMock, check_ctrl_c, check_expiry, check_kill_9, check_kill_before_record, check_reports_like_live, check_status_and_cancel, counts, ledger,
    report, run,
};
use crate::support::Workspace;

pub(super) fn anthropic(mock: &PyMock, batch: &str) -> String {
    format!(
        "{{id: m, provider: anthropic, model: claude-3-5-haiku-20241022, {batch} base_url: \"{}\", price: {{input_per_mtok: 1.0, output_per_mtok: 4.0}}}}",
        mock.origin()
    )
}

pub(super) fn gemini(mock: &PyMock, batch: &str) -> String {
    format!(
        "{{id: m, provider: gemini, model: gemini-2.0-flash-001, {batch} base_url: \"{}\", price: {{input_per_mtok: 1.0, output_per_mtok: 4.0}}}}",
        mock.origin()
    )
}

#[test]
fn anthropic_batched_grid_pays_each_call_once_and_reports_like_a_live_run() {
    check_reports_like_live(anthropic);
}

#[test]
fn gemini_batched_grid_pays_each_call_once_and_reports_like_a_live_run() {
    check_reports_like_live(gemini);
}

#[test]
fn kill_9_anthropic_at_random_moments_then_rerun_pays_each_call_once() {
    check_kill_9(anthropic);
}

#[test]
fn kill_9_gemini_at_random_moments_then_rerun_pays_each_call_once() {
    check_kill_9(gemini);
}

#[test]
fn anthropic_kill_between_create_and_its_record_finds_the_batch_and_pays_once() {
    check_kill_before_record(anthropic);
}

#[test]
fn gemini_kill_between_create_and_its_record_finds_the_batch_by_name_and_pays_once() {
    check_kill_before_record(gemini);
}

#[test]
fn anthropic_expiring_batch_returns_its_calls_once_then_they_fail_visibly() {
    check_expiry(anthropic);
}

#[test]
fn gemini_expiring_batch_returns_its_calls_once_then_they_fail_visibly() {
    check_expiry(gemini);
}

#[test]
fn anthropic_ctrl_c_while_polling_leaves_the_batches_running_and_the_rerun_collects_them() {
    check_ctrl_c(anthropic);
}

#[test]
fn gemini_ctrl_c_while_polling_leaves_the_batches_running_and_the_rerun_collects_them() {
    check_ctrl_c(gemini);
}

#[test]
fn anthropic_status_and_batch_cancel() {
    check_status_and_cancel(anthropic, &Names { id: "msgbatch_", endpoint: "/v1/messages/batches", running: &["in_progress"] });
}

#[test]
fn gemini_status_and_batch_cancel() {
    check_status_and_cancel(gemini, &Names { id: "batches/", endpoint: "batchGenerateContent", running: &["BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"] });
}

const ROWS: &str = concat!(
    "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n",
    "{\"id\": \"jp\", \"input\": \"Capital of Japan?\", \"target\": \"Tokyo\"}\n",
    "{\"id\": \"it\", \"input\": \"Capital of Italy?\", \"target\": \"Rome\"}\n",
);

/// A `qa` grid whose contestant calls live (OpenAI) and whose judge (Anthropic) has `judge_batch`.
fn qa_grid(ws: &Workspace, mock: &PyMock, judge_batch: &str) {
    ws.write("d.jsonl", ROWS);
    let origin = mock.origin();
    ws.write(
        "p.yaml",
        &format!(
            "name: p\nmodels:\n  - {{id: s, provider: openai, model: player, api: chat, base_url: \"{origin}/v1\"}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [match, {{judge: {{model: {{provider: anthropic, model: claude-3-5-haiku-20241022, base_url: \"{origin}\" {judge_batch}}}}}}}]\nseeds: [0]\n"
        ),
    );
}

#[test]
fn a_qa_judge_with_batch_grades_through_message_batches_like_a_live_judge() {
    let mock = PyMock::start();
    let ws = Workspace::new();
    qa_grid(&ws, &mock, ", batch: {max_requests: 50, poll_ms: 20, window_ms: 100}");
    let (code, v) = run(&ws);
    assert_eq!(code, 0, "{v}");
    let stats = mock.stats();
    let judged = counts(&stats, "batched");
    assert_eq!((stats["creates"].as_u64(), judged.len()), (Some(1), 3), "the three gradings in one batch: {stats}");
    assert!(judged.values().all(|n| *n == 1), "{stats}");
    assert_eq!(counts(&stats, "live").len(), 3, "the contestant's three calls are live: {stats}");
    let batched_report = report(&ws);
    let live = Workspace::new();
    qa_grid(&live, &mock, "");
    let (code, v) = run(&live);
    assert_eq!(code, 0, "{v}");
    assert_eq!(batched_report, report(&live), "a batched judge grades like a live one");
    let stats = mock.stats();
    assert_eq!(counts(&stats, "live").len(), 6, "the live judge sent the bodies the batch held: {stats}");
    assert!(judged.keys().all(|body| counts(&stats, "live").contains_key(body)), "{stats}");
    assert!(ledger(&ws).is_empty());
}

/// Two Anthropic batches of the same size created, then a kill before either id is recorded:
/// each intent matches both batches (no tag tells them apart), each is polled until its
/// results show whose keys it holds, and nothing is created again.
#[test]
fn anthropic_two_interrupted_intents_of_one_size_each_adopt_their_own_batch_and_pay_once() {
    let mock = PyMock::start();
    mock.set(&serde_json::json!({"create_delay_s": 30}));
    let ws = Workspace::new();
    crate::batch::write_grid(&ws, &anthropic(&mock, "batch: {max_requests: 10, poll_ms: 20, window_ms: 100},"), "boardgame_qa");
    let mut child = crate::batch::spawn(&ws);
    crate::batch::wait_for(&mock, "both batches to exist", |s| s["creates"] == 2);
    child.kill().unwrap();
    child.wait().unwrap();
    let intents = ledger(&ws);
    assert_eq!(intents.iter().filter(|r| r.batch_id.is_none() && r.keys.len() == 10).count(), 2, "{intents:?}");
    mock.set(&serde_json::json!({"create_delay_s": 0}));
    let (code, v) = run(&ws);
    assert_eq!(code, 0, "{v}");
    let stats = mock.stats();
    assert_eq!(stats["creates"], 2, "both found again, none created: {stats}");
    let paid = counts(&stats, "batched_ids");
    assert!(paid.len() == 20 && paid.values().all(|n| *n == 1), "{stats}");
    assert!(ledger(&ws).is_empty(), "{:?}", ledger(&ws));
}
