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

/// Issue 45 item 3 / issue 48 item 3: a `qa` grid whose judge is a paid model. Player `a`
/// answers every call differently (so every answer is graded), `o` is the built-in oracle.
mod judged {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};

    use evalgrid::providers::Usage;
    use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};
    use serde_json::Value;

    use crate::providers::Mock;
    use crate::support::Workspace;

    const ROWS: &str = concat!(
        "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n",
        "{\"id\": \"jp\", \"input\": \"Capital of Japan?\", \"target\": \"Tokyo\"}\n",
        "{\"id\": \"it\", \"input\": \"Capital of Italy?\", \"target\": \"Rome\"}\n",
        "{\"id\": \"pe\", \"input\": \"Capital of Peru?\", \"target\": \"Lima\"}\n",
    );

    /// $1,000 per million tokens for the player, $2,000 for the judge.
    fn pipeline(url: &str, judge_price: &str, extra: &str) -> String {
        format!(
            "name: j\nmodels:\n  - {{id: a, provider: openai, model: player, base_url: \"{url}\", params: {{max_tokens: 16}}, price: {{input_per_mtok: 1000, output_per_mtok: 1000}}}}\n  - {{id: o, provider: builtin, model: oracle}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers:\n        - match\n        - judge: {{model: {{provider: openai, model: grader, base_url: \"{url}\", params: {{max_tokens: 16}}{judge_price}}}}}\nseeds: [0, 1]\n{extra}"
        )
    }

    /// Bills every call at its model's price (10 tokens in, 5 out), counting at the mock.
    fn billing_mock() -> (Mock, Arc<AtomicU64>, Arc<AtomicU64>) {
        let (billed, judged) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
        let (b, j) = (Arc::clone(&billed), Arc::clone(&judged));
        let script = Script::function(move |req: &MockRequest| {
            let per_token = if req.model == "grader" { 2000 } else { 1000 };
            b.fetch_add(15 * per_token, Ordering::SeqCst);
            let text = if req.model == "grader" {
                j.fetch_add(1, Ordering::SeqCst);
                "GRADE: C".to_owned()
            } else {
                format!("answer number {}", req.route_index)
            };
            MockOutcome::Reply(MockReply::text(text).with_usage(Usage { input: 10, output: 5, ..Usage::default() }))
        });
        (Mock::start(MockConfig { script, ..MockConfig::default() }), billed, judged)
    }

    fn dry_calls(ws: &Workspace) -> u64 {
        let (code, v) = ws.run_json(&["run", "p.yaml", "--dry-run", "--json"]);
        assert_eq!(code, 0, "{v}");
        v["model_calls_to_make"].as_u64().unwrap()
    }

    /// Issue 48 item 6: the progress line's call total is the dry run's, judge gradings included.
    #[test]
    fn the_progress_call_total_counts_the_judge_gradings() {
        let (mock, _, judged) = billing_mock();
        let ws = Workspace::new();
        ws.write("d.jsonl", ROWS);
        ws.write("p.yaml", &pipeline(&mock.url(), ", price: {input_per_mtok: 2000, output_per_mtok: 2000}", ""));
        let expected = dry_calls(&ws);
        let log = ws.path("stderr.log");
        let status = std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
            .current_dir(ws.dir.path())
            .env_remove("EVALGRID_CACHE")
            .env_remove("EVALGRID_NO_PROGRESS")
            .env("EVALGRID_PROGRESS_INTERVAL_S", "0.3")
            .args(["run", "p.yaml", "--progress", "plain"])
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .status()
            .unwrap();
        let text = std::fs::read_to_string(&log).unwrap();
        assert!(status.success(), "{text}");
        assert!(judged.load(Ordering::SeqCst) > 0, "the grid has judge calls");
        assert_eq!(mock.server().calls(), expected, "the dry run's count is the run's");
        let last = text.lines().rfind(|l| l.starts_with("progress: ")).unwrap_or_else(|| panic!("no progress line: {text}"));
        assert!(last.contains(&format!("calls {expected}/{expected} ")), "the call total is the dry run's {expected}, judge gradings included: {last}");
    }

    #[test]
    fn an_unpriced_judge_under_a_budget_is_refused_by_validate_dry_run_and_run() {
        let (mock, _, _) = billing_mock();
        let ws = Workspace::new();
        ws.write("d.jsonl", ROWS);
        ws.write("p.yaml", &pipeline(&mock.url(), "", "budget: {usd: 0.000001}\n"));
        for args in [&["validate", "p.yaml"][..], &["run", "p.yaml", "--dry-run"], &["run", "p.yaml"]] {
            let out = ws.run(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            // Located at the scorer entry that holds the judge (line 10 of p.yaml).
            assert!(stderr.contains("p.yaml:10:") && stderr.contains("the `judge` model `grader` has no price"), "{args:?}: {stderr}");
        }
        // The same for a contestant without a price, at its entry.
        ws.write(
            "p.yaml",
            &pipeline(&mock.url(), ", price: {input_per_mtok: 1, output_per_mtok: 1}", "budget: {usd: 5}\n")
                .replace(", price: {input_per_mtok: 1000, output_per_mtok: 1000}", ""),
        );
        for args in [&["validate", "p.yaml"][..], &["run", "p.yaml", "--dry-run"]] {
            let out = ws.run(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
            assert!(stderr.contains("p.yaml:3:") && stderr.contains("model `a` has no price"), "{args:?}: {stderr}");
        }
        // `--budget-usd` with an unpriced judge: refused before any call, by the dry run too.
        ws.write("p.yaml", &pipeline(&mock.url(), "", ""));
        for args in [&["run", "p.yaml", "--dry-run", "--budget-usd", "1"][..], &["run", "p.yaml", "--budget-usd", "1"]] {
            let out = ws.run(args);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        assert_eq!(mock.server().calls(), 0, "nothing sent");
    }

    #[test]
    fn judge_calls_are_in_the_dry_run_the_budget_and_the_cost_table() {
        let (mock, billed, judged) = billing_mock();
        let ws = Workspace::new();
        ws.write("d.jsonl", ROWS);
        ws.write("p.yaml", &pipeline(&mock.url(), ", price: {input_per_mtok: 2000, output_per_mtok: 2000}", ""));
        // Cold: 8 answers of `a` + their 8 gradings + the oracle's 4 (the same answer for both seeds, graded once).
        let (code, v) = ws.run_json(&["run", "p.yaml", "--dry-run", "--json"]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["model_calls_to_make"], 20, "{v}");
        let judge = v["estimate"].as_array().unwrap().iter().find(|e| e["model"] == "judge").unwrap_or_else(|| panic!("{v}"));
        assert_eq!(judge["calls"], 12, "{judge}");
        assert!(judge["cost_max_usd"].as_f64().is_some_and(|c| c > 0.0), "the judge is priced in the estimate: {judge}");
        let (code, run) = ws.run_json(&["run", "p.yaml", "--json"]);
        assert_eq!(code, 0, "{run}");
        assert_eq!((mock.server().calls(), judged.load(Ordering::SeqCst)), (20, 12), "the dry run's count is the run's: {run}");
        #[expect(clippy::cast_precision_loss, reason = "micro-dollars")]
        let billed_usd = billed.load(Ordering::SeqCst) as f64 / 1e6;
        let reported = run["calls"]["cost_usd"].as_f64().unwrap();
        assert!((reported - billed_usd).abs() < 1e-6, "the run's cost has the judge's calls: {reported} vs {billed_usd} billed");
        let html = std::fs::read_to_string(ws.path("reports/j/index.html")).unwrap();
        // Priced at the judge's own rate: 15 tokens × $2,000 per million per grading the cells
        // used (the oracle's two seeds use one grading each, so 16).
        assert!(
            html.contains("<tr><td>judge</td><td class=\"num\">160</td><td class=\"num\">80</td><td class=\"num\">0.4800</td></tr>"),
            "the cost table prices the judge: {}",
            &html[html.find("Tokens and cost").unwrap_or(0)..][..600]
        );
        // A target edit: no answer asked again, the row re-graded for each of `a`'s two answers and the oracle's new one.
        ws.write("d.jsonl", &ROWS.replace("\"Tokyo\"", "\"Kyoto\""));
        assert_eq!(dry_calls(&ws), 3);
        let (code, run) = ws.run_json(&["run", "p.yaml", "--json"]);
        assert_eq!(code, 0, "{run}");
        assert_eq!(mock.server().calls(), 23, "{run}");
        assert_eq!(dry_calls(&ws), 0);
    }

    #[test]
    fn a_judges_price_is_in_no_key() {
        let (mock, _, _) = billing_mock();
        let ws = Workspace::new();
        ws.write("d.jsonl", ROWS);
        ws.write("p.yaml", &pipeline(&mock.url(), "", ""));
        let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
        assert_eq!(code, 0, "{v}");
        let calls = mock.server().calls();
        ws.write("p.yaml", &pipeline(&mock.url(), ", price: {input_per_mtok: 2000, output_per_mtok: 2000}", "budget: {usd: 100}\n"));
        assert_eq!(dry_calls(&ws), 0);
        let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
        assert_eq!((code, v["cells_cached"].as_u64(), mock.server().calls()), (0, Some(4), calls), "{v}");
    }

    /// The Eleusis rule compiler is paid like a judge: priced in its entry, refused unpriced
    /// under a budget, its price checked where it is written.
    #[test]
    fn the_rule_compiler_takes_a_price() {
        let ws = Workspace::new();
        let yaml = |compiler: &str| {
            format!(
                "name: e\nmodels:\n  - {{id: p, provider: openai, model: x, base_url: \"http://127.0.0.1:9/v1\", price: {{input_per_mtok: 1, output_per_mtok: 1}}}}\ntasks:\n  - benchmark: eleusis\n    select: [even_ranks_only]\n    params:\n      compiler: {{model: c{compiler}}}\nseeds: [0]\nbudget: {{usd: 1}}\n"
            )
        };
        ws.write("p.yaml", &yaml(""));
        let out = ws.run(&["validate", "p.yaml"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains("p.yaml:8:") && stderr.contains("the `rule-compiler` model `c` has no price"), "{stderr}");
        ws.write("p.yaml", &yaml(", price: {input_per_mtok: -2, output_per_mtok: 1}"));
        let out = ws.run(&["validate", "p.yaml"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.code() == Some(2) && stderr.contains("p.yaml:8:") && stderr.contains("`compiler.price.input_per_mtok`"), "{stderr}");
        ws.write("p.yaml", &yaml(", price: {input_per_mtok: 2, output_per_mtok: 1}"));
        let out = ws.run(&["validate", "p.yaml"]);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }

    #[test]
    fn a_budget_holds_the_judges_calls() {
        let (mock, billed, _) = billing_mock();
        let ws = Workspace::new();
        ws.write("d.jsonl", ROWS);
        // Only the oracle plays: every call is the judge's, $0.03 each, its worst case about
        // $4.4 (2,000 output tokens at $2,000 per million): $10 holds two at once, never three.
        let text = pipeline(&mock.url(), ", price: {input_per_mtok: 2000, output_per_mtok: 2000}", "budget: {usd: 10}\n")
            .replace("seeds: [0, 1]", "seeds: [0]")
            .replace("{max_tokens: 16}, price: {input_per_mtok: 2000", "{max_tokens: 2000}, price: {input_per_mtok: 2000");
        let player = &text[text.find("  - {id: a").unwrap()..text.find("  - {id: o").unwrap()];
        ws.write("p.yaml", &text.replace(player, ""));
        let out = ws.run(&["run", "p.yaml", "--json"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "the budget stopped the judge: {stderr}");
        #[expect(clippy::cast_precision_loss, reason = "micro-dollars")]
        let spent = billed.load(Ordering::SeqCst) as f64 / 1e6;
        // Unpriced, the judge's four calls all went out (exit 0).
        assert!(spent <= 10.0 && (1..4).contains(&mock.server().calls()), "${spent} over {} calls", mock.server().calls());
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v["budget"]["reached"], true, "{v}");
    }
}

/// A provider that bills far past `max_tokens` (1,000,000 output tokens for a cap of 16):
/// once the first answers passed the budget, the calls already held are not sent.
#[test]
fn answers_billed_past_their_cap_stop_the_calls_held_for_sending() {
    for (output, what) in [(1_000_000_u64, "a million tokens"), (1 << 63, "2^63 tokens")] {
        let script = Script::function(move |_req: &MockRequest| {
            MockOutcome::Reply(MockReply::text("Paris").with_usage(Usage { input: 10, output, ..Usage::default() }))
        });
        let mock = Mock::start(MockConfig { script, ..MockConfig::default() });
        let ws = Workspace::new();
        let rows: String = (0..40).map(|i| format!("{{\"input\": \"Question {i}?\", \"target\": \"Paris\"}}\n")).collect();
        ws.write("d.jsonl", &rows);
        ws.write(
            "p.yaml",
            &format!(
                "name: over\nmodels:\n  - {{id: m, provider: openai, model: gpt-4o, base_url: \"{}\", params: {{max_tokens: 16}}, price: {{input_per_mtok: 10, output_per_mtok: 10}}}}\ntasks:\n  - {{benchmark: qa, params: {{dataset: d.jsonl}}}}\nseeds: [0]\nbudget: {{usd: 1}}\ntransport: {{max_concurrency: 2}}\n",
                mock.url()
            ),
        );
        let out = ws.run(&["run", "p.yaml", "--json"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{what}: {stderr}");
        assert_eq!(out.status.code(), Some(3), "{what}: the budget's exit code\n{stderr}");
        // The first wave (2 in flight) passed the budget; at most the calls that took a slot
        // before its answers were counted follow: never the 16 held behind them.
        let calls = mock.server().calls();
        assert!(calls <= 4, "{what}: {calls} calls sent on a $1 budget\n{stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {stderr}"));
        let cost = v["calls"]["cost_usd"].as_f64().unwrap();
        let tokens = v["calls"]["output_tokens"].as_u64().unwrap();
        // Saturated, never wrapped: at least what one answer billed, and a finite cost past the budget.
        assert!(tokens >= output && cost.is_finite() && cost > 1.0, "{what}: {tokens} tokens, ${cost}");
        assert!(stderr.contains("budget reached") && stderr.contains("is passed"), "{what}: {stderr}");
        assert!(stderr.contains(&format!("the provider billed {output} output tokens for a call capped at 16")), "{what}: {stderr}");
    }
}

/// Prices that would switch the budget off silently are refused where they are written.
#[test]
fn negative_nan_or_infinite_prices_and_a_bad_batch_factor_are_refused_at_validate() {
    let ws = Workspace::new();
    ws.write("d.jsonl", "{\"input\": \"q\", \"target\": \"a\"}\n");
    let cases = [
        ("price: {input_per_mtok: .nan, output_per_mtok: 1}", "6:", "`price.input_per_mtok` must be a finite, non-negative number"),
        ("price: {input_per_mtok: 1, output_per_mtok: .inf}", "6:", "`price.output_per_mtok` must be a finite"),
        ("price: {input_per_mtok: -1, output_per_mtok: 1}", "6:", "not -1"),
        ("price: {input_per_mtok: 1, output_per_mtok: 1, batch_factor: 0}", "6:", "`price.batch_factor` must be more than 0 and at most 1"),
        ("price: {input_per_mtok: 1, output_per_mtok: 1, batch_factor: 1.5}", "6:", "not 1.5"),
    ];
    for (price, at, message) in cases {
        // On a model, and on a judge.
        let model = format!(
            "name: p\nmodels:\n  - id: m\n    provider: openai\n    model: x\n    {price}\ntasks:\n  - {{benchmark: qa, params: {{dataset: d.jsonl}}}}\nseeds: [0]\nbudget: {{usd: 1}}\n"
        );
        ws.write("p.yaml", &model);
        let out = ws.run(&["validate", "p.yaml"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{price}: {stderr}");
        assert!(stderr.contains(&format!("p.yaml:{at}")) && stderr.contains(message), "{price}: {stderr}");
        let judge = format!(
            "name: p\nmodels:\n  - {{id: o, provider: builtin, model: oracle}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [{{judge: {{model: {{model: g, {price}}}}}}}]\nseeds: [0]\n"
        );
        ws.write("p.yaml", &judge);
        let out = ws.run(&["validate", "p.yaml"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "judge {price}: {stderr}");
        assert!(stderr.contains("p.yaml:8:") && stderr.contains("price"), "judge {price}: {stderr}");
    }
}
