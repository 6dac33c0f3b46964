//! What the model did is scored, not failed (issue 12): BBEH against the mock rendering
//! each protocol's own body shapes for answers cut at the token limit, empty answers,
//! content-filtered answers and refusals. Every cell finishes, those items count as wrong,
//! the report shows the rates, and a model with a cell failed by transport gets
//! `incomplete (k of n)` instead of a harmonic mean.

use evalgrid::providers::FinishReason;
use evalgrid::providers::mock::{Fault, MockConfig, MockOutcome, MockReply, MockRequest, Script};

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// A stable number per prompt, so the same item always gets the same outcome.
fn bucket(text: &str) -> u64 {
    text.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) % 10
}

fn outcome(req: &MockRequest) -> MockOutcome {
    // Model `snap` is served by a dated snapshot of its alias.
    if req.model == "snap" {
        return MockOutcome::Reply(MockReply::text("The answer is: (A)").with_model("snap-2025-04-14"));
    }
    // Model `gateway` is answered by another model altogether.
    if req.model == "gateway" {
        return MockOutcome::Reply(MockReply::text("The answer is: (A)").with_model("someone-else"));
    }
    // Model `flaky` fails every web_of_lies item as a transport error (HTTP 400).
    if req.model == "flaky" && req.last_user.contains("ies") && req.last_user.to_lowercase().contains("truth") {
        return MockOutcome::Fault(Fault::Status { status: 400, message: "mock: rejected".into() });
    }
    MockOutcome::Reply(match bucket(&req.last_user) {
        0 => MockReply::text("The answer is: (A").with_finish_reason(FinishReason::Length),
        1 => MockReply::text(""),
        2 => MockReply::refusal(),
        3 => MockReply::declined(),
        _ => MockReply::text("The answer is: (A)"),
    })
}

fn pipeline(url: &str, models: &[&str]) -> String {
    let models: String = models.iter().map(|m| format!("  - {{id: {m}, provider: openai, model: {m}, base_url: \"{url}\"}}\n")).collect();
    format!(
        "name: outcomes\nmodels:\n{models}tasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 2, retry_base_ms: 5, retry_max_ms: 20, request_timeout_s: 5}}\n"
    )
}

#[test]
fn truncated_empty_filtered_and_refused_answers_are_scored_and_shown_and_a_failed_cell_is_incomplete() {
    let latency = std::time::Duration::from_millis(20);
    let mock = Mock::start(MockConfig { script: Script::function(outcome), latency, ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url(), &["steady", "flaky"]));
    let data = data_dir().to_str().unwrap().to_owned();
    let (code, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json"]);
    assert_eq!(v["cells_failed"], 1, "only flaky's web_of_lies cell fails: {v}");
    assert_eq!(code, 1, "{v}");
    let csv = std::fs::read_to_string(ws.path("reports/outcomes/summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row = |model: &str, task: &str| -> Vec<String> {
        csv.lines()
            .find(|l| l.starts_with(&format!("bbeh-mini,{model},{task},")))
            .unwrap_or_else(|| panic!("{model}/{task}:\n{csv}"))
            .split(',')
            .map(str::to_owned)
            .collect()
    };
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("{name}: {csv}"));
    // Every steady cell finished: its model row has a harmonic mean and is complete.
    let steady = row("steady", "*");
    assert!(!steady[col("harmonic_mean")].is_empty(), "{csv}");
    assert_eq!(steady[col("status")], "", "{csv}");
    // flaky: no harmonic mean over the two tasks that finished.
    let flaky = row("flaky", "*");
    assert_eq!(flaky[col("harmonic_mean")], "", "{csv}");
    assert_eq!(flaky[col("status")], "incomplete (2 of 3)", "{csv}");
    assert_eq!(row("flaky", "bbeh_web_of_lies/mini")[col("status")], "incomplete (0 of 1)", "{csv}");
    // The report shows the outcome rates per model.
    let md = std::fs::read_to_string(ws.path("reports/outcomes/summary.md")).unwrap();
    assert!(md.contains("model outcomes"), "{md}");
    let section = &md[md.find("model outcomes").unwrap()..];
    let line = section.lines().find(|l| l.starts_with("| steady")).unwrap_or_else(|| panic!("{md}"));
    // Counts print as integers, shares as percentages (issue 23.8).
    assert!(line.starts_with("| steady | 60 | ") && section.contains("| answers | truncated % | filtered % | refused % | context_exceeded % |"), "{line}");
    let cells: Vec<f64> = line.split('|').map(|c| c.trim().trim_end_matches('%').trim()).filter_map(|c| c.parse().ok()).collect();
    assert_eq!(cells[0], 60.0, "60 answers: {line}");
    // Median latency (every answer waited the mock's 20 ms) and output tokens/s.
    let fields: Vec<&str> = line.split('|').map(str::trim).collect();
    let median: f64 = fields[9].parse().unwrap_or_else(|_| panic!("median latency: {line}"));
    assert!((0.02..5.0).contains(&median), "{line}");
    assert!(fields[10].parse::<f64>().is_ok_and(|r| r > 0.0), "output tokens/s: {line}");
    assert!(cells[1] > 0.0 && cells[2] > 0.0 && cells[3] > 0.0, "truncated, filtered and refused shares: {line}");
    assert!(md.contains("incomplete (2 of 3)"), "{md}");
    // No built-in agent in this grid: the accuracy figure's title names no baseline.
    let html = std::fs::read_to_string(ws.path("reports/outcomes/index.html")).unwrap();
    assert!(html.contains("bbeh-mini: accuracy per task") && !html.contains("baseline as reference"), "figure title");
    // The outcomes are answers: cached, so a rerun of steady makes no call.
    let before = mock.server().calls();
    let (_, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json", "--filter", "model=steady"]);
    assert_eq!(v["cells_cached"], 3, "{v}");
    assert_eq!(mock.server().calls(), before, "no call repeated");
    // Cut, empty, filtered and refused answers are recorded with their reason.
    let (_, shown) = ws.run_json(&["--data-dir", &data, "show", "p.yaml", "steady/bbeh/bbeh_dyck_languages/mini/0", "--json"]);
    assert_eq!(shown["episode"]["call_outcomes"]["steady"]["answers"], 20, "{}", shown["episode"]["call_outcomes"]);
    let (_, shown) = ws.run_json(&["--data-dir", &data, "show", "p.yaml", "steady/bbeh/bbeh_dyck_languages/mini/0", "--json"]);
    let answers = shown["episode"]["answers"].as_array().unwrap();
    let reasons: Vec<&str> = answers.iter().filter_map(|a| a["finish_reason"].as_str()).collect();
    assert!(reasons.contains(&"length") && reasons.iter().any(|r| *r == "content_filter" || *r == "refusal"), "{reasons:?}");
}

#[test]
fn a_snapshot_of_the_alias_is_cached_and_shown_and_another_model_fails_unless_accepted() {
    let mock = Mock::start(MockConfig { script: Script::function(outcome), ..MockConfig::default() });
    let ws = Workspace::new();
    let url = mock.url();
    let text = pipeline(&url, &["snap", "gateway"]);
    ws.write("p.yaml", &text);
    let data = data_dir().to_str().unwrap().to_owned();
    // The run's JSON, and what it said on stderr.
    let run = || {
        let out = ws.cmd().args(["--data-dir", &data, "run", "p.yaml", "--json"]).output().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, v, stderr) = run();
    assert_eq!((code, v["cells_failed"].as_u64()), (1, Some(3)), "every gateway cell fails: {v}");
    // Issue 23: the warning says what happened to those answers (they were not cached).
    assert!(stderr.contains("were neither cached nor scored") && !stderr.contains("were cached and scored"), "{stderr}");
    assert_eq!(v["calls"]["answered_by_other_model_cached"], 0, "{v}");
    let failure = v["failures"].to_string();
    assert!(failure.contains("someone-else") && failure.contains("accept_other_model"), "{failure}");
    let html = std::fs::read_to_string(ws.path("reports/outcomes/index.html")).unwrap();
    assert!(html.contains("answered as `snap-2025-04-14`"), "the snapshot is in the provenance");
    // The snapshot's answers were cached: nothing of `snap` is asked again.
    let before = mock.server().calls();
    let (_, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json", "--filter", "model=snap"]);
    assert_eq!((v["cells_cached"].as_u64(), mock.server().calls()), (Some(3), before), "{v}");
    // Accepted explicitly, the other model's answers are scored and cached.
    ws.write("p.yaml", &text.replace("model: gateway,", "model: gateway, accept_other_model: true,"));
    let (code, v, stderr) = run();
    assert_eq!((code, v["cells_failed"].as_u64()), (0, Some(0)), "{v}");
    assert!(stderr.contains("were cached and scored") && !stderr.contains("neither cached"), "{stderr}");
    assert!(v["calls"]["answered_by_other_model_cached"].as_u64() > Some(0), "{v}");
    let html = std::fs::read_to_string(ws.path("reports/outcomes/index.html")).unwrap();
    assert!(html.contains("answered as `someone-else`"), "the other model is in the provenance");
}

/// Issue 34.7: a server that says `completed` for an answer cut at the cap (llama.cpp's
/// `/v1/responses`). `capped` asks for 16 tokens and every answer reports exactly 16 output
/// tokens: counted as truncated, and the table's note says it was inferred; `roomy` gets the
/// same answers with a cap of 32: nothing truncated.
#[test]
fn completed_answers_at_the_token_cap_count_as_truncated_with_a_note() {
    use evalgrid::providers::Usage;
    let reply = |_: &MockRequest| MockOutcome::Reply(MockReply::text("The answer is: (A)").with_usage(Usage { input: 50, output: 16, ..Usage::default() }));
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = Workspace::new();
    let url = mock.url();
    let text = format!(
        "name: outcomes\nmodels:\n  - {{id: capped, provider: openai, model: c, base_url: \"{url}\", params: {{max_tokens: 16}}}}\n  - {{id: roomy, provider: openai, model: r, base_url: \"{url}\", params: {{max_tokens: 32}}}}\ntasks:\n  - benchmark: bbeh\n    select: [dyck_languages]\n    params: {{subset: mini}}\nseeds: [0]\n"
    );
    ws.write("p.yaml", &text);
    let data = data_dir().to_str().unwrap().to_owned();
    let (code, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let md = std::fs::read_to_string(ws.path("reports/outcomes/summary.md")).unwrap();
    let section = &md[md.find("model outcomes").unwrap_or_else(|| panic!("{md}"))..];
    let truncated = |model: &str| -> String {
        let line = section.lines().find(|l| l.starts_with(&format!("| {model} "))).unwrap_or_else(|| panic!("{model}: {md}"));
        line.split('|').map(str::trim).nth(3).unwrap().to_owned()
    };
    assert!(truncated("capped").starts_with("100"), "every capped answer inferred truncated: {section}");
    assert!(truncated("roomy").starts_with('0'), "{section}");
    assert!(section.contains("inferred as truncated: the server said completed but the output tokens equal the cap (max_tokens) (capped 20)"), "{section}");
}
