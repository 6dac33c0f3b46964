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

use crate::batch::{Names, PyMock, check_ctrl_c, check_expiry, check_kill_9, check_kill_before_record, check_reports_like_live, check_status_and_cancel};

fn anthropic(mock: &PyMock, batch: &str) -> String {
    format!(
        "{{id: m, provider: anthropic, model: claude-3-5-haiku-20241022, {batch} base_url: \"{}\", price: {{input_per_mtok: 1.0, output_per_mtok: 4.0}}}}",
        mock.origin()
    )
}

fn gemini(mock: &PyMock, batch: &str) -> String {
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
