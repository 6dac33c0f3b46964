//! The hard budget (issue 33 item 4) against the mock over real HTTP: the spend counted by
//! the server itself never passes the budget, the cells left stay missing (not failed), the
//! run exits 3 with the budget line, and a rerun with a larger budget finishes the grid
//! without paying any answer twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use evalgrid::providers::Usage;
use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script, prompt_hash};

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// $1,000 per million tokens in and out: a token costs a tenth of a cent.
const USD_PER_TOKEN: f64 = 0.001;
const MAX_TOKENS: u64 = 400;

/// BBEH Mini, three tasks × three seeds: 9 cells of 20 calls.
fn pipeline(url: &str, budget: &str) -> String {
    format!(
        "name: budget\nmodels:\n  - {{id: m, provider: openai, model: gpt-4o, base_url: \"{url}\", params: {{max_tokens: {MAX_TOKENS}}}, price: {{input_per_mtok: 1000, output_per_mtok: 1000}}}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0, 1, 2]\ntransport: {{max_concurrency: 4}}\n{budget}"
    )
}

/// A mock that bills every answer (the prompt's words in, 50 to 400 tokens out, varied by
/// prompt) and keeps its own count of what it billed, in micro-dollars.
fn billing_mock() -> (Mock, Arc<AtomicU64>) {
    let billed = Arc::new(AtomicU64::new(0));
    let counter = Arc::clone(&billed);
    let script = Script::function(move |req: &MockRequest| {
        let input = req.last_user.split_whitespace().count() as u64;
        let output = 50 + prompt_hash(&format!("{}{}", req.last_user, req.body["seed"])) % (MAX_TOKENS - 49);
        #[expect(clippy::cast_possible_truncation, clippy::cast_sign_loss, reason = "small positive cost")]
        counter.fetch_add(((input + output) as f64 * USD_PER_TOKEN * 1e6).round() as u64, Ordering::SeqCst);
        MockOutcome::Reply(MockReply::text("The answer is: (A)").with_usage(Usage { input, output, ..Usage::default() }))
    });
    (Mock::start(MockConfig { script, ..MockConfig::default() }), billed)
}

#[test]
fn a_budget_run_stops_before_the_spend_passes_it_and_a_larger_budget_goes_on() {
    let (mock, billed) = billing_mock();
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url(), "budget: {usd: 130}\n"));
    let data = data_dir().to_str().unwrap().to_owned();
    let out = ws.run(&["--data-dir", &data, "run", "p.yaml", "--json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
    assert_eq!(out.status.code(), Some(3), "the budget's own exit code\n{v}\n{stderr}");
    #[expect(clippy::cast_precision_loss, reason = "micro-dollars")]
    let spent = billed.load(Ordering::SeqCst) as f64 / 1e6;
    let calls = mock.server().calls();
    // Never over the budget: each call's worst case was held while it was in flight.
    assert!(spent <= 130.0, "the server billed ${spent:.4}, over the $130 budget ({calls} calls)");
    eprintln!("budget $130: the server billed ${spent:.4} over {calls} calls");
    // The 180 calls would cost about $270: the budget ran out about halfway.
    assert!(spent > 100.0 && (50..130).contains(&calls), "the budget ran out about halfway: ${spent:.2} over {calls} calls");
    let reported = v["calls"]["cost_usd"].as_f64().unwrap();
    assert!((reported - spent).abs() < 1e-3, "the run reports what the server billed: {reported} vs {spent}");
    assert_eq!(v["budget"]["reached"], true, "{v}");
    assert_eq!(v["cells_failed"], 0, "cells the budget stopped are not failed: {v}");
    let not_started = v["budget"]["cells_not_started"].as_u64().unwrap();
    assert!(not_started > 0, "{v}");
    assert!(stderr.contains(&format!("budget reached: ${spent:.2} spent, {not_started} cells not started; raise the budget to go on")), "{stderr}");
    // They read as missing, not failed, for `status`.
    let (_, status) = ws.run_json(&["--data-dir", &data, "status", "p.yaml", "--json"]);
    let states: Vec<&str> = status["cells"].as_array().unwrap().iter().map(|c| c["state"].as_str().unwrap()).collect();
    assert!(!states.contains(&"failed") && states.contains(&"missing"), "{states:?}");
    // The rerun with a larger budget finishes, paying only the calls never answered.
    let (code, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json", "--budget-usd", "1000"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls(), 180, "every call paid exactly once over both runs");
    assert_eq!(v["cells_total"], 9);
    assert_eq!(v["budget"]["reached"], false);
}

#[test]
fn a_model_without_a_price_is_refused_when_a_budget_is_set() {
    let (mock, _) = billing_mock();
    let ws = Workspace::new();
    let text = pipeline(&mock.url(), "").replace(", price: {input_per_mtok: 1000, output_per_mtok: 1000}", "");
    ws.write("p.yaml", &text);
    let data = data_dir().to_str().unwrap().to_owned();
    let out = ws.run(&["--data-dir", &data, "run", "p.yaml", "--budget-usd", "5"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("model `m` has no price") && stderr.contains("price: {input_per_mtok"), "{stderr}");
    assert_eq!(mock.server().calls(), 0, "nothing sent");
}
