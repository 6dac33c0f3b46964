//! Issue 23: a prompt longer than the model's context is the model's outcome, not an error.
//! The mock refuses long requests with HTTP 400 in each API's documented overflow shape
//! (OpenAI `context_length_exceeded`, Anthropic "prompt is too long", Gemini "input token
//! count"); every benchmark scores those answers by its rules, nothing fails, a rerun sends
//! nothing, and `--retry-outcome context_exceeded` asks exactly those calls again once the
//! server's context is larger.

use evalgrid::providers::mock::MockConfig;
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// The context window of the mock, in its tokens of 4 request bytes.
const WINDOW: u64 = 900;

/// Four models, one per protocol, on one mock; BBEH items of many lengths, a guessing game and
/// an Eleusis round whose prompt grows past the window as the game goes on, and BBQ.
fn pipeline(base: &str) -> String {
    let v1 = format!("{base}/v1");
    let gemini = format!("{base}/v1beta");
    format!(
        "name: overflow\nmodels:\n  - {{id: chat, provider: openai, model: m, base_url: \"{v1}\"}}\n  - {{id: resp, provider: openai, api: responses, model: m, base_url: \"{v1}\"}}\n  - {{id: claude, provider: anthropic, model: m, base_url: \"{v1}\"}}\n  - {{id: gem, provider: gemini, model: m, base_url: \"{gemini}\"}}\ntasks:\n  - {{benchmark: bbeh, select: [boardgame_qa, dyck_languages], params: {{subset: mini}}}}\n  - {{benchmark: guess, select: [range_10]}}\n  - benchmark: eleusis\n    select: [only_red_cards]\n    params: {{max_turns: 12, compiler: {{provider: openai, model: c, base_url: \"{v1}\"}}}}\n  - {{benchmark: bbq, select: [is_greater_than_58]}}\nseeds: [0]\ntransport: {{max_attempts: 3, retry_base_ms: 5, retry_max_ms: 20, max_concurrency: 8}}\n"
    )
}

fn run(ws: &Workspace, extra: &[&str]) -> (i32, Value, String) {
    let mut args = vec!["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"];
    args.extend_from_slice(extra);
    let out = ws.cmd().args(&args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// The `context_exceeded` counts per model from the episodes' tallies, as `show` prints them.
fn outcomes_csv(ws: &Workspace) -> String {
    std::fs::read_to_string(ws.path("reports/overflow/summary.md")).unwrap_or_default()
}

#[test]
fn an_overlong_prompt_is_scored_as_context_exceeded_and_can_be_asked_again() {
    let mock = Mock::start(MockConfig { context_window: Some(WINDOW), ..MockConfig::default() });
    let base = mock.server().base_url().trim_end_matches('/').to_owned();
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&base));
    let (code, v, stderr) = run(&ws, &[]);
    assert_eq!((code, v["cells_failed"].as_u64()), (0, Some(0)), "every cell is scored: {v}\n{stderr}");
    let exceeded = v["calls"]["context_exceeded"].as_u64().unwrap();
    let live = v["calls"]["live"].as_u64().unwrap();
    assert!(exceeded > 0 && exceeded < live, "some prompts overflow, others fit: {v}");
    assert!(stderr.contains("--retry-outcome context_exceeded"), "the run says how to ask again: {stderr}");
    // Nothing was retried: one HTTP attempt per call (the mock saw each overflow once).
    assert_eq!(v["calls"]["http_attempts"].as_u64(), Some(live), "{v}");
    // Each benchmark scored it by its rules: the Eleusis round ended there, a BBQ phase was forfeited.
    let show = |cell: &str| {
        let out = ws.cmd().args(["--data-dir", data_dir().to_str().unwrap(), "show", "p.yaml", cell, "--json"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let eleusis = show("chat/eleusis/only_red_cards/0");
    assert!(eleusis.contains("\"game_over_reason\":\"context_exceeded\""), "{eleusis}");
    let bbq = show("claude/bbq/is_greater_than_58/0");
    assert!(bbq.contains("the prompt exceeds the model's context window"), "{bbq}");
    let summary = outcomes_csv(&ws);
    assert!(summary.contains("context_exceeded"), "the outcomes table has the column: {summary}");

    // The answers are cached: a rerun sends nothing.
    let before = mock.server().calls();
    let (code, v, _) = run(&ws, &[]);
    assert_eq!((code, mock.server().calls() - before), (0, 0), "{v}");

    // A dry run says how many cells the retry would run: some, not all.
    let (_, dry, _) = run(&ws, &["--dry-run", "--retry-outcome", "context_exceeded"]);
    let to_run = dry["cells_to_run"].as_u64().unwrap();
    assert!(to_run > 0 && to_run < dry["cells_total"].as_u64().unwrap(), "{dry}");

    // Asking again with the same small context: exactly the overflowing calls are sent, and
    // they overflow again (the same answers).
    let before = mock.server().calls();
    let (code, again, stderr) = run(&ws, &["--retry-outcome", "context_exceeded"]);
    assert_eq!(code, 0, "{again}\n{stderr}");
    assert_eq!(mock.server().calls() - before, exceeded, "only the context_exceeded calls are asked again: {again}");
    assert_eq!(again["calls"]["reasked"].as_u64(), Some(exceeded), "{again}");

    // The server now has a larger context: the same command gets real answers for them.
    mock.server().set_context_window(None);
    let before = mock.server().calls();
    let (code, fixed, stderr) = run(&ws, &["--retry-outcome", "context_exceeded"]);
    assert_eq!((code, fixed["cells_failed"].as_u64()), (0, Some(0)), "{fixed}\n{stderr}");
    let sent = mock.server().calls() - before;
    assert!(sent >= exceeded, "the overflowing calls are answered now, and the games that ended there go on: {fixed}");
    assert_eq!(fixed["calls"]["context_exceeded"].as_u64(), Some(0), "{fixed}");
    // Nothing is left to ask again, and the plain rerun is all cached.
    let before = mock.server().calls();
    let (code, _, _) = run(&ws, &["--retry-outcome", "context_exceeded"]);
    assert_eq!((code, mock.server().calls() - before), (0, 0));
    let (code, v, _) = run(&ws, &[]);
    assert_eq!((code, v["calls"]["live"].as_u64(), v["cells_run"].as_u64()), (0, Some(0), Some(0)), "{v}");
    let (_, dry, _) = run(&ws, &["--dry-run", "--retry-outcome", "context_exceeded"]);
    assert_eq!(dry["cells_to_run"].as_u64(), Some(0), "{dry}");
}
