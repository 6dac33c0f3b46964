//! `qa`: tasks declared in files. The example pipeline offline, item-precise reruns counted
//! in model calls (a scripted model), a judge re-grading without re-asking, `status
//! --explain` naming the edited rows, and every bad dataset an exit 2 with its place.

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};

use crate::providers::Mock;
use crate::support::{Workspace, repo};

#[test]
fn example_pipeline_runs_offline_and_reruns_from_the_cache() {
    let ws = Workspace::new();
    let pipeline = repo().join("pipelines/qa-example.yaml");
    let pipeline = pipeline.to_str().unwrap();
    let out = ws.run(&["validate", pipeline]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (code, v) = ws.run_json(&["run", pipeline, "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 27);
    let summary = std::fs::read_to_string(ws.path("reports/qa-example/summary.csv")).unwrap();
    let header: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let oracle: Vec<&str> = summary.lines().find(|l| l.starts_with("qa,oracle,*,")).unwrap().split(',').collect();
    for scorer in ["match", "includes", "exact", "f1", "match_numeric", "pattern", "choice"] {
        let i = header.iter().position(|h| *h == scorer).unwrap_or_else(|| panic!("no column {scorer}: {summary}"));
        assert_eq!(oracle[i].parse::<f64>().unwrap(), 1.0, "oracle on {scorer}: {summary}");
    }
    let items = std::fs::read_to_string(ws.path("reports/qa-example/items.csv")).unwrap();
    assert!(items.starts_with("suite,model,task,seed,item,match,includes,exact,f1,match_numeric,pattern,choice\n"), "{items}");
    // 3 models × 3 seeds × (6 + 5 + 6) items.
    assert_eq!(items.lines().count(), 1 + 9 * 17);
    // `item` is the row's own id, text or number.
    assert!(items.lines().any(|l| l.starts_with("qa,oracle,capitals,0,fr,")), "{items}");
    let html = std::fs::read_to_string(ws.path("reports/qa-example/index.html")).unwrap();
    assert!(html.contains("pass@k") && html.contains("maj@k"), "the repeats table is in the report");
    // The item page shows each model's answer line beside its score, and the row's id.
    let page = std::fs::read_to_string(ws.path("reports/qa-example/items-qa.html")).unwrap();
    assert!(page.contains("\"Paris\"") && page.contains("\"fr\""), "the oracle's answer and the row id are on the item page");
    let (_, v) = ws.run_json(&["run", pipeline, "--json"]);
    assert_eq!((v["cells_run"].as_u64(), v["cells_cached"].as_u64()), (Some(0), Some(27)));
}

const ROWS: &str = concat!(
    "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n",
    "{\"id\": \"jp\", \"input\": \"Capital of Japan?\", \"target\": \"Tokyo\"}\n",
    "{\"id\": \"it\", \"input\": \"Capital of Italy?\", \"target\": \"Rome\"}\n",
);

fn pipeline(ws: &Workspace, url: &str, judge: &str) {
    ws.write(
        "p.yaml",
        &format!(
            "name: q\nmodels:\n  - {{id: s, provider: openai, model: player, base_url: \"{url}\"}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [match, {{judge: {{model: {{provider: openai, model: {judge}, base_url: \"{url}\"}}}}}}]\nseeds: [0, 1]\n"
        ),
    );
}

/// The player answers Paris to France and Rome to anything else; `grader` passes every
/// answer, `strict` fails every one.
fn mock_reply(req: &MockRequest) -> MockOutcome {
    MockOutcome::Reply(MockReply::text(match req.model.as_str() {
        "grader" => "Looks right. GRADE: C",
        "strict" => "Wrong. GRADE: I",
        _ if req.last_user.contains("France") => "Paris",
        _ => "I think Rome",
    }))
}

#[test]
fn edits_rerun_only_the_rows_they_touch() {
    let mock = Mock::start(MockConfig { script: Script::function(mock_reply), ..MockConfig::default() });
    let calls = || mock.server().calls();
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    pipeline(&ws, &mock.url(), "grader");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    // 3 items × 2 seeds asked; 3 judge calls (the same answer graded once for both seeds).
    assert_eq!(calls(), 6 + 3, "{v}");
    let items = std::fs::read_to_string(ws.path("reports/q/items.csv")).unwrap();
    assert!(items.starts_with("suite,model,task,seed,item,match,judge\n"), "{items}");
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((v["cells_cached"].as_u64(), calls()), (Some(2), 9), "{v}");

    // A target edit: no model call, and status names the row.
    ws.write("d.jsonl", &ROWS.replace("\"Tokyo\"", "\"Kyoto\""));
    let out = ws.run(&["status", "p.yaml", "--explain", "s/qa/d/0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("row `jp` (d.jsonl:2): target changed"), "{text}");
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    // The judge sees the target (its criterion), so the one edited row is graded again.
    assert_eq!(calls(), 9 + 1, "{v}");

    // An input edit: one new call per seed (and one grading).
    let edited = ROWS.replace("\"Tokyo\"", "\"Kyoto\"").replace("Capital of Italy?", "Capital city of Italy?");
    ws.write("d.jsonl", &edited);
    let (_, s) = ws.run_json(&["status", "p.yaml", "--explain", "s/qa/d/1", "--json"]);
    assert_eq!(s["changed_rows"], serde_json::json!(["row `it` (d.jsonl:3): question changed"]), "{s}");
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(calls(), 10 + 2 + 1, "{v}");

    // A new row: only it is asked.
    ws.write("d.jsonl", &format!("{edited}{{\"id\": \"pe\", \"input\": \"Capital of Peru?\", \"target\": \"Lima\"}}\n"));
    let out = ws.run(&["status", "p.yaml", "--explain", "s/qa/d/0"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("row `pe` (d.jsonl:4): added"), "{}", String::from_utf8_lossy(&out.stdout));
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(calls(), 13 + 2 + 1, "{v}");

    // Another judge: every answer graded again (4 distinct), no model asked again.
    pipeline(&ws, &mock.url(), "strict");
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(calls(), 16 + 4, "{v}");
    let summary = std::fs::read_to_string(ws.path("reports/q/summary.csv")).unwrap();
    let header: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = summary.lines().find(|l| l.starts_with("qa,s,*,")).unwrap().split(',').collect();
    let judge = header.iter().position(|h| *h == "judge").unwrap();
    assert_eq!(row[judge].parse::<f64>().unwrap(), 0.0, "{summary}");
    let outcomes = std::fs::read_to_string(ws.path("reports/q/index.html")).unwrap();
    assert!(outcomes.contains(">judge<"), "the judge's calls are counted under its id");
}

/// Each bad dataset is exit 2 naming its place, before any call, never a panic.
#[test]
fn bad_datasets_are_located_errors_before_any_call() {
    let ws = Workspace::new();
    // A model whose replies file does not exist: any call would fail the cell (exit 1).
    let run = |dataset: &str, bytes: &[u8], extra: &str, want: &str| {
        std::fs::write(ws.path(dataset), bytes).unwrap();
        ws.write(
            "p.yaml",
            &format!("name: bad\nmodels:\n  - {{id: s, provider: openai, model: m, base_url: \"http://127.0.0.1:9\"}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: {dataset}\n{extra}seeds: [0]\n"),
        );
        for cmd in ["validate", "run"] {
            let out = ws.run(&[cmd, "p.yaml"]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{cmd} {dataset}: {err}");
            assert!(err.contains(want), "{cmd} {dataset}: want `{want}` in:\n{err}");
            assert!(!err.contains("panicked"), "{err}");
        }
    };
    let ok = "{\"input\": \"q\", \"target\": \"a\"}\n";
    let mut long = ok.as_bytes().to_vec();
    long.extend(b"{\"input\": \"");
    long.extend(std::iter::repeat_n(b'x', 10 << 20));
    long.extend(b"\", \"target\": \"a\"}\n");
    run("long.jsonl", &long, "", "long.jsonl:2: line is longer than 4 MiB");
    run("utf8.jsonl", b"{\"input\": \"q\", \"target\": \"a\"}\n{\"input\": \"\xff\", \"target\": \"a\"}\n", "", "utf8.jsonl:2: not valid UTF-8");
    run("ragged.csv", b"input,target\nq,a\nq2\n", "", "ragged.csv:3: 1 fields, but the header has 2");
    run("empty.jsonl", b"", "", "empty.jsonl: the dataset has no rows");
    run(
        "dup.jsonl",
        b"{\"id\": 1, \"input\": \"q\", \"target\": \"a\"}\n{\"id\": 1, \"input\": \"r\", \"target\": \"b\"}\n",
        "",
        "dup.jsonl:2: duplicate id `1` (first at line 1)",
    );
    run("notarget.csv", b"input,target\nq,a\nr,\ns,c\n", "", "notarget.csv:3: no `target` (the answer)");
    run("regex.jsonl", ok.as_bytes(), "      scorers: [{pattern: {pattern: \"(unclosed\"}}]\n", "pattern `(unclosed` does not compile");
    run("tmpl.jsonl", format!("{ok}{ok}").as_bytes(), "      template: \"{{ input }} {{ hint }}\"\n", "tmpl.jsonl:1: template: undefined value");
    run(
        "choices.jsonl",
        b"{\"input\": \"q\", \"target\": \"D\", \"choices\": [\"x\", \"y\"]}\n",
        "      scorers: [choice]\n",
        "choices.jsonl:1: target names choice D but the row has 2 choices",
    );
    run("missing.jsonl", ok.as_bytes(), "      fewshot: {from: nope.jsonl}\n", "nope.jsonl: cannot read");
    // The error names the pipeline's line too.
    let out = ws.run(&["validate", "p.yaml"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("p.yaml:"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn csv_with_renamed_fields_and_a_sample() {
    let ws = Workspace::new();
    let mut csv = String::from("question,answer,qid\n");
    for i in 0..50 {
        csv.push_str(&format!("\"What is {i} + 1, exactly?\",{},{i}\n", i + 1));
    }
    ws.write("n.csv", &csv);
    ws.write(
        "p.yaml",
        "name: n\nmodels:\n  - {id: o, provider: builtin, model: oracle}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: n.csv\n      fields: {input: question, target: answer, id: qid}\n      sample: {n: 10, seed: 3}\n      scorers: [{match: {numeric: true}}]\nseeds: [0]\n",
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let items = std::fs::read_to_string(ws.path("reports/n/items.csv")).unwrap();
    assert_eq!(items.lines().count(), 11, "{items}");
    assert!(items.lines().skip(1).all(|l| l.ends_with(",1.0")), "{items}");
}

/// Issue 48 item 4: a judge that gives no grade is counted, per judge and model, in the
/// outcomes table (`no grade`) and in the summary's notes (summary.md and index.html).
#[test]
fn judge_replies_without_a_grade_are_counted_per_judge_and_model() {
    let ws = Workspace::new();
    ws.write(
        "d.jsonl",
        "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n{\"id\": \"sum\", \"input\": \"What is 2+2?\", \"target\": \"4\"}\n",
    );
    ws.write("m1.json", r#"{"default": "Paris"}"#);
    ws.write("m2.json", r#"{"default": "Lyon"}"#);
    // `strict` grades only `Paris`; `mute` never writes a grade.
    ws.write("strict.json", r#"{"replies": [{"contains": "[Submission]: Paris", "reply": "GRADE: C"}], "default": "Hmm."}"#);
    ws.write("mute.json", r#"{"default": "The answer looks plausible."}"#);
    ws.write(
        "g.yaml",
        "name: g\nmodels:\n  - {id: m1, provider: scripted, model: a, params: {file: m1.json}}\n  - {id: m2, provider: scripted, model: b, params: {file: m2.json}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [match, {judge: {model: {provider: scripted, model: s, params: {file: strict.json}}}, name: strict}, {judge: {model: {provider: scripted, model: u, params: {file: mute.json}}}, name: mute}]\nseeds: [0]\n",
    );
    let (code, v) = ws.run_json(&["run", "g.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let md = std::fs::read_to_string(ws.path("reports/g/summary.md")).unwrap();
    // strict: m1's two `Paris` graded, m2's two `Lyon` not; mute: none of the four.
    assert!(md.contains("judge `strict` gave no grade in 2 of 4 replies (m1 0 of 2, m2 2 of 2)"), "{md}");
    assert!(md.contains("judge `mute` gave no grade in 4 of 4 replies (m1 2 of 2, m2 2 of 2)"), "{md}");
    let outcomes = md.lines().skip_while(|l| !l.starts_with("## model outcomes")).take(8).collect::<Vec<_>>().join("\n");
    let header: Vec<&str> = outcomes.lines().find(|l| l.starts_with("| |")).unwrap().split('|').map(str::trim).collect();
    let col = header.iter().position(|h| *h == "no grade").unwrap_or_else(|| panic!("no `no grade` column: {outcomes}"));
    let cell = |model: &str| -> String {
        let row = outcomes.lines().find(|l| l.starts_with(&format!("| {model} |"))).unwrap_or_else(|| panic!("no row {model}: {outcomes}"));
        row.split('|').map(str::trim).nth(col).unwrap().to_owned()
    };
    assert_eq!((cell("m1").as_str(), cell("m2").as_str(), cell("judge").as_str()), ("2", "4", "6"), "{outcomes}");
    let html = std::fs::read_to_string(ws.path("reports/g/index.html")).unwrap();
    assert!(html.contains("judge `mute` gave no grade in 4 of 4 replies"), "the page says it too");
}

const MIXED: &str = concat!(
    "{\"id\": \"a1\", \"type\": \"num\", \"input\": \"What is 2+2?\", \"target\": \"4\"}\n",
    "{\"id\": \"c1\", \"type\": \"choice\", \"input\": \"Water is?\", \"choices\": [\"H2O\", \"CO2\"], \"target\": \"A\"}\n",
    "{\"id\": \"f1\", \"type\": \"fact\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n",
    "{\"id\": \"c2\", \"type\": \"mc\", \"input\": \"The sun is a?\", \"choices\": [\"planet\", \"star\"], \"target\": \"B\"}\n",
);

fn mixed_pipeline(ws: &Workspace, url: &str, arith_where: &str, sci_where: &str) {
    ws.write(
        "p.yaml",
        &format!(
            "name: w\nmodels:\n  - {{id: s, provider: openai, model: player, base_url: \"{url}\"}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: mixed.jsonl\n      name: arith\n      where: {arith_where}\n      scorers: [{{match: {{numeric: true}}}}]\n  - benchmark: qa\n    params:\n      dataset: mixed.jsonl\n      name: sci\n      where: {sci_where}\n      scorers: [choice]\nseeds: [0]\n"
        ),
    );
}

/// Issue 48 item 7: `where:` lets one file feed several tasks (a value, or a list); rows a
/// task leaves out are not in its hash, so editing them asks nothing again; an unknown
/// column or a filter that keeps nothing is a located error.
#[test]
fn where_feeds_several_tasks_from_one_file_and_rows_left_out_are_not_in_the_hash() {
    let mock = Mock::start(MockConfig { script: Script::function(mock_reply), ..MockConfig::default() });
    let calls = || mock.server().calls();
    let ws = Workspace::new();
    ws.write("mixed.jsonl", MIXED);
    mixed_pipeline(&ws, &mock.url(), "{type: num}", "{type: [choice, mc]}");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(calls(), 3, "a1 for arith, c1 and c2 for sci: {v}");
    let items = std::fs::read_to_string(ws.path("reports/w/items.csv")).unwrap();
    let rows: Vec<(String, String)> = items
        .lines()
        .skip(1)
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (f[2].to_owned(), f[4].to_owned())
        })
        .collect();
    assert_eq!(rows, [("arith", "a1"), ("sci", "c1"), ("sci", "c2")].map(|(t, i)| (t.to_owned(), i.to_owned())), "{items}");

    // Editing a row neither task keeps: nothing is run again.
    ws.write("mixed.jsonl", &MIXED.replace("Capital of France?", "Capital of Spain?"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_cached"].as_u64(), calls()), (0, Some(2), 3), "{v}");
    // Editing a sci row: arith stays cached; sci asks that row only.
    ws.write("mixed.jsonl", &MIXED.replace("The sun is a?", "Our sun is a?"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_cached"].as_u64(), calls()), (0, Some(1), 4), "{v}");

    // Located errors: a column no row has, a filter that keeps nothing, a value that is not one.
    let located = |arith: &str, sci: &str, want: &[&str]| {
        mixed_pipeline(&ws, &mock.url(), arith, sci);
        let out = ws.run(&["validate", "p.yaml"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        for w in want {
            assert!(err.contains(w), "`{w}` not in:\n{err}");
        }
    };
    located("{type: num}", "{typ: choice}", &["p.yaml:15:", "`where` names column `typ`, which no row of", "did you mean `type`?"]);
    located("{type: nothing}", "{type: choice}", &["p.yaml:9:", "no row of", "matches `where`"]);
    located("{type: {a: 1}}", "{type: choice}", &["p.yaml:9:", "`where.type` must be a value or a non-empty list"]);
}
