//! The batch ledger under crashes and damage (issue 45), against the independent Python mock
//! of the three batch APIs (`batch_mock.py`, built from each provider's documented shapes),
//! billing counted at the mock:
//! - kill -9 while the create request is in flight, then a rerun at once, while the mock's
//!   list shows a new batch only after a delay: the rerun searches the list until the batch
//!   shows and pays nothing twice (10 times per provider; `EVALGRID_BATCH_CREATE_KILLS`);
//! - a damaged ledger record is named by `status` and `cache verify`, its model's new batches
//!   are held back until `evalgrid batch forget`;
//! - a recorded batch the provider answers 404 for holds its calls back (never resubmitted
//!   silently) until `evalgrid batch forget`;
//! - duplicate output lines for one `custom_id`: the first answers, the rest are counted.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::batch::{Entry, PyMock, SMALL, TASKS, counts, ledger, openai, report, run, spawn, wait_for, write_grid};
use crate::batch_providers::{anthropic, gemini};
use crate::providers::data_dir;
use crate::support::Workspace;

/// Waits (bounded) until `n` ledger records carry a batch id.
fn wait_for_ids(ws: &Workspace, n: usize) {
    let start = Instant::now();
    while ledger(ws).iter().filter(|r| r.batch_id.is_some()).count() < n {
        assert!(start.elapsed() < Duration::from_secs(60), "timed out waiting for {n} recorded batches: {:?}", ledger(ws));
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn evalgrid(ws: &Workspace, args: &[&str]) -> (i32, String) {
    let mut all = vec!["--data-dir", data_dir().to_str().unwrap()];
    all.extend_from_slice(args);
    let out = ws.run(&all);
    (out.status.code().unwrap_or(-1), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
}

fn check_kill_during_create(entry: Entry) {
    let kills: usize = std::env::var("EVALGRID_BATCH_CREATE_KILLS").ok().and_then(|n| n.parse().ok()).unwrap_or(10).min(TASKS.len());
    let mock = PyMock::start();
    // The list shows a batch 2 s after its creation: a rerun started at once does not see it
    // at its first look.
    mock.set(&json!({"list_delay_s": 2.0}));
    let ws = Workspace::new();
    let batch = "batch: {max_requests: 20, poll_ms: 20, window_ms: 50, lookup_ms: 6000},";
    for (kill, task) in TASKS.iter().take(kills).enumerate() {
        mock.set(&json!({"create_delay_s": 30}));
        write_grid(&ws, &entry(&mock, batch), task);
        let mut child = spawn(&ws);
        wait_for(&mock, "the batch to exist", |s| s["creates"] == kill + 1);
        child.kill().unwrap();
        child.wait().unwrap();
        let intents = ledger(&ws);
        assert_eq!((intents.len(), intents[0].batch_id.as_deref()), (1, None), "killed while the create was in flight: {intents:?}");
        mock.set(&json!({"create_delay_s": 0}));
        let (code, v) = run(&ws);
        assert_eq!(code, 0, "{v}");
        let stats = mock.stats();
        let paid = counts(&stats, "batched_ids");
        let brief = format!("creates {}, billed {}, distinct calls {}, lists {}", stats["creates"], stats["billed"], paid.len(), stats["lists"]);
        assert_eq!(stats["creates"].as_u64(), Some(kill as u64 + 1), "kill {kill}: no second batch for the interrupted one: {brief}");
        assert_eq!(stats["billed"].as_u64(), Some(paid.len() as u64), "kill {kill}: each call billed once: {brief}");
        assert!(ledger(&ws).is_empty(), "{:?}", ledger(&ws));
    }
    let stats = mock.stats();
    let paid = counts(&stats, "batched_ids");
    // BBEH mini tasks hold 20 items, a few 19.
    assert!(paid.len() >= 19 * kills && paid.values().all(|n| *n == 1), "each call billed once: {} calls", paid.len());
    assert!(stats["lists"].as_u64().unwrap() > kills as u64, "each rerun looked at the list more than once: {stats}");
}

#[test]
fn openai_kill_during_create_then_rerun_at_once_pays_each_call_once() {
    check_kill_during_create(openai);
}

#[test]
fn anthropic_kill_during_create_then_rerun_at_once_pays_each_call_once() {
    check_kill_during_create(anthropic);
}

#[test]
fn gemini_kill_during_create_then_rerun_at_once_pays_each_call_once() {
    check_kill_during_create(gemini);
}

/// Three batches (8, 8, 4 calls) left running by a killed run.
fn three_running_batches(mock: &PyMock) -> Workspace {
    mock.set(&json!({"hold": true}));
    let ws = Workspace::new();
    write_grid(&ws, &openai(mock, SMALL), "boardgame_qa");
    let mut child = spawn(&ws);
    wait_for_ids(&ws, 3);
    child.kill().unwrap();
    child.wait().unwrap();
    mock.set(&json!({"hold": false}));
    ws
}

#[test]
fn a_damaged_ledger_record_is_named_and_its_calls_wait_for_batch_forget() {
    let mock = PyMock::start();
    let ws = three_running_batches(&mock);
    let victim = ledger(&ws).into_iter().find(|r| r.keys.len() == 8).unwrap();
    let file = ws.path(&format!("cache/v1/batches/{}.json", victim.tag));
    let bytes = std::fs::read(&file).unwrap();
    std::fs::write(&file, &bytes[..bytes.len() / 2]).unwrap();

    let (code, text) = evalgrid(&ws, &["status", "p.yaml"]);
    assert_eq!(code, 0, "{text}");
    let line = text.lines().find(|l| l.starts_with("damaged batch record")).unwrap_or_else(|| panic!("status names it: {text}"));
    assert!(line.contains(&format!("{}.json", victim.tag)) && line.contains(&format!("evalgrid batch forget {}", victim.tag)), "{line}");
    let (_, v) = ws.run_json(&["--data-dir", data_dir().to_str().unwrap(), "status", "p.yaml", "--json"]);
    assert_eq!(v["batch_records_damaged"][0]["record"], victim.tag.as_str(), "{v}");
    let (code, text) = evalgrid(&ws, &["cache", "verify"]);
    assert_eq!(code, 1, "cache verify fails on a damaged record: {text}");
    assert!(text.contains(&format!("{}.json", victim.tag)), "{text}");

    // Twice: the held-back calls are never submitted again on their own.
    for _ in 0..2 {
        let (code, v) = run(&ws);
        assert_eq!(code, 1, "{v}");
        assert!(v.to_string().contains(&format!("evalgrid batch forget {}", victim.tag)), "{v}");
        let stats = mock.stats();
        assert_eq!((stats["creates"].as_u64(), stats["billed"].as_u64()), (Some(3), Some(20)), "nothing submitted again: {stats}");
    }
    assert_eq!(ledger(&ws).len(), 0, "the readable records were collected");

    let (code, text) = evalgrid(&ws, &["batch", "forget", "eg-no-such-record"]);
    assert_eq!(code, 2, "{text}");
    let (code, text) = evalgrid(&ws, &["batch", "forget", &victim.tag]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("forgot damaged batch record"), "{text}");
    let (code, text) = evalgrid(&ws, &["cache", "verify"]);
    assert_eq!(code, 0, "{text}");
    let (code, v) = run(&ws);
    assert_eq!(code, 0, "{v}");
    let stats = mock.stats();
    assert_eq!((stats["creates"].as_u64(), stats["billed"].as_u64()), (Some(4), Some(28)), "the user released the 8 calls: {stats}");
}

#[test]
fn a_batch_the_provider_answers_404_for_holds_its_calls_until_batch_forget() {
    let mock = PyMock::start();
    let ws = three_running_batches(&mock);
    let store = evalgrid::cache::Store::open(&ws.path("cache")).unwrap();
    let mut gone = ledger(&ws).into_iter().find(|r| r.keys.len() == 8).unwrap();
    gone.batch_id = Some("batch_gone404".into());
    evalgrid::cache::BatchLedger::of(&store).record(&gone).unwrap();

    for _ in 0..2 {
        let (code, v) = run(&ws);
        assert_eq!(code, 1, "{v}");
        let text = v.to_string();
        assert!(text.contains("batch_gone404 is unknown to the provider") && text.contains(&format!("evalgrid batch forget {}", gone.tag)), "{v}");
        assert_eq!(mock.stats()["creates"], 3, "its calls are not sent again: {}", mock.stats());
    }
    let (_, text) = evalgrid(&ws, &["status", "p.yaml"]);
    assert!(text.lines().any(|l| l.starts_with("batch batch_gone404") && l.contains("not_found")), "{text}");
    let (code, text) = evalgrid(&ws, &["batch", "forget", "batch_gone404", "--json"]);
    assert_eq!(code, 0, "{text}");
    let v: Value = serde_json::from_str(text.lines().find(|l| l.starts_with('{')).unwrap()).unwrap();
    assert_eq!((v["forgotten"][0]["tag"].as_str(), v["forgotten"][0]["calls"].as_u64()), (Some(gone.tag.as_str()), Some(8)), "{v}");
    let (code, v) = run(&ws);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.stats()["creates"], 4);
    assert!(ledger(&ws).is_empty(), "{:?}", ledger(&ws));
}

fn check_duplicate_lines(entry: Entry) {
    let mock = PyMock::start();
    mock.set(&json!({"duplicate_lines": true}));
    let ws = Workspace::new();
    write_grid(&ws, &entry(&mock, SMALL), "boardgame_qa");
    let (code, text) = evalgrid(&ws, &["run", "p.yaml"]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("batch output: 20 line(s) repeated a custom_id"), "the run summary counts them: {text}");
    let json = Workspace::new();
    write_grid(&json, &entry(&mock, SMALL), "boardgame_qa");
    let (code, v) = run(&json);
    assert_eq!((code, v["calls"]["batch_duplicate_lines"].as_u64()), (0, Some(20)), "{v}");
    let live = Workspace::new();
    write_grid(&live, &entry(&mock, ""), "boardgame_qa");
    let (code, v) = run(&live);
    assert_eq!(code, 0, "{v}");
    assert_eq!(report(&ws), report(&live), "the first line of each custom_id answered (the live answer), not the repeat");
}

#[test]
fn openai_duplicate_output_lines_keep_the_first_and_are_counted() {
    check_duplicate_lines(openai);
}

#[test]
fn anthropic_duplicate_results_keep_the_first_and_are_counted() {
    check_duplicate_lines(anthropic);
}

#[test]
fn gemini_duplicate_inline_responses_keep_the_first_and_are_counted() {
    check_duplicate_lines(gemini);
}
