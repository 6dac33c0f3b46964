//! `evalgrid show` of a benchmark without its own transcript (BBQ-Bench here; WeirdML takes
//! the same path) reads as an outline, like the Eleusis transcript, not as raw JSON (issue 23.8).

use evalgrid::providers::mock::{MockConfig, MockServer, Script};

use crate::support::Workspace;

#[test]
fn show_of_a_bbq_cell_is_an_outline_not_json() {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start(MockConfig { script: Script::function(crate::bbq_llm::model), ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    let ws = Workspace::new();
    crate::bbq_llm::write_one_cell_pipeline(&ws, &url);
    let (shown, _, _, _) = crate::bbq_llm::run_the_cell(&ws);
    let out = ws.cmd().args(["show", "p.yaml", "mock/bbq/is_greater_than_58/0"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    // No JSON syntax: no braces opening a record, no quoted keys, no escaped line breaks.
    assert!(!text.contains('{') && !text.lines().any(|l| l.trim_start().starts_with('"')) && !text.contains("\\n"), "{text}");
    // The record's facts, as lines: the task, each round numbered, the model's scratchpad.
    assert!(text.contains("task: is_greater_than_58") && text.contains("\nsolved: true") && text.contains("\nscore:\n  budget_fraction_at_solve: "), "{text}");
    assert!(text.lines().any(|l| l.trim() == "[2]") && text.contains("scratchpad: 58 gives 0 and 59 gives 1: the rule is x > 58."), "{text}");
    assert_eq!(shown["score"]["solved"], true);
    runtime.block_on(server.shutdown());
}
