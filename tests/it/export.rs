//! `evalgrid export` (issue 34 items 3, 4 and 8): the exports of the quickstart, a BBEH grid
//! and the qa example read back by the tools they are for (Inspect AI's `inspect log dump`
//! and `read_eval_log`; Every Eval Ever's JSON Schemas, vendored in
//! `tests/fixtures/every_eval_ever/`), every score equal to `items.csv`; provenance in every
//! file; and no secret, machine path or raw provider text in any of them. Without
//! inspect_ai / jsonschema the peer checks print SKIPPED and pass.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use evalgrid::providers::mock::MockConfig;
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::{Workspace, repo};

/// (model, task, seed, item, metric) → value: `items.csv`, one entry per non-empty field.
type Scores = BTreeMap<(String, String, u64, String, String), u64>;

fn items_csv(path: &Path) -> Scores {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let names: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut out = Scores::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        for (name, value) in names.iter().zip(&f).skip(5).filter(|(_, v)| !v.is_empty()) {
            let key = (f[1].to_owned(), f[2].to_owned(), f[3].parse().unwrap(), f[4].to_owned(), (*name).to_owned());
            assert!(out.insert(key, value.parse::<f64>().unwrap().to_bits()).is_none(), "duplicate unit in items.csv: {line}");
        }
    }
    out
}

/// Runs the peer on an export; `None` (with a SKIPPED note) when the peer is not installed.
fn peer(args: &[&Path]) -> Option<Value> {
    let out = Command::new("python3").arg(repo().join("tests/it/export_peer.py")).args(args).output().expect("python3 runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.code() == Some(3) {
        eprintln!("SKIPPED: reading exports back needs inspect_ai (python3 -m pip install inspect_ai, which brings jsonschema): {text}");
        return None;
    }
    assert!(out.status.success(), "the peer rejected the export:\n{text}");
    Some(serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {text}")))
}

/// The peer's rows as [`Scores`].
fn peer_scores(v: &Value) -> Scores {
    let mut out = Scores::new();
    for r in v["rows"].as_array().unwrap() {
        let key = (
            r[0].as_str().unwrap().to_owned(),
            r[1].as_str().unwrap().to_owned(),
            r[2].as_u64().unwrap(),
            r[3].as_str().unwrap().to_owned(),
            r[4].as_str().unwrap().to_owned(),
        );
        assert!(out.insert(key.clone(), r[5].as_f64().unwrap().to_bits()).is_none(), "unit exported twice: {key:?}");
    }
    out
}

/// Exports `pipeline` in both formats and checks each against `items.csv` through its peer.
fn exports_match_items(ws: &Workspace, pipeline: &str, name: &str, extra: &[&str]) {
    let items = items_csv(&ws.path(&format!("reports/{name}/items.csv")));
    for format in ["inspect", "eee"] {
        let dir = ws.path(&format!("{format}-{name}"));
        let out = ws.cmd().args(extra).args(["export", pipeline, "--format", format, "--out"]).arg(&dir).arg("--json").output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            v["samples"].as_u64(),
            Some(items.keys().map(|k| (&k.0, &k.1, k.2, &k.3)).collect::<std::collections::BTreeSet<_>>().len() as u64),
            "{name} {format}: {v}"
        );
        let schemas = repo().join("tests/fixtures/every_eval_ever");
        let args: Vec<&Path> = if format == "inspect" { vec![Path::new("inspect"), &dir] } else { vec![Path::new("eee"), &dir, &schemas] };
        let Some(read) = peer(&args) else { return };
        eprintln!("{name} {format}: {} files read by {}", read["files"], read["peer"]);
        assert_eq!(peer_scores(&read), items, "{name} {format}: scores differ from items.csv");
    }
}

#[test]
fn quickstart_exports_read_back_by_inspect_and_eee_with_items_csv_scores() {
    let ws = Workspace::new();
    ws.quickstart();
    let (code, v) = ws.run_json(&["run", "quickstart.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    exports_match_items(&ws, "quickstart.yaml", "quickstart", &[]);
    // One log per task × model: 26 rules × 3 agents.
    assert_eq!(std::fs::read_dir(ws.path("inspect-quickstart")).unwrap().count(), 78);
}

#[test]
fn qa_example_exports_read_back_by_inspect_and_eee_with_items_csv_scores() {
    let ws = Workspace::new();
    let pipeline = repo().join("pipelines/qa-example.yaml");
    let pipeline = pipeline.to_str().unwrap();
    let (code, v) = ws.run_json(&["run", pipeline, "--json"]);
    assert_eq!(code, 0, "{v}");
    exports_match_items(&ws, pipeline, "qa-example", &[]);
    // A sample as Inspect reads it: the templated prompt, the answer, one score per scorer.
    let log = std::fs::read_dir(ws.path("inspect-qa-example"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_str().unwrap().contains("_qa-capitals_oracle_"))
        .unwrap();
    let log: Value = serde_json::from_slice(&std::fs::read(log).unwrap()).unwrap();
    insta::assert_snapshot!(serde_json::to_string_pretty(&log["samples"][0]).unwrap(), @r#"
    {
      "attachments": {},
      "choices": null,
      "epoch": 1,
      "events": [],
      "id": "fr",
      "input": "What is the capital of France?",
      "messages": [
        {
          "content": "Answer with the city name only.\n\nWhat is the capital of France?",
          "role": "user"
        },
        {
          "content": "Paris",
          "model": "builtin/oracle",
          "role": "assistant"
        }
      ],
      "metadata": {
        "cell": "oracle/qa/capitals/0",
        "dataset_id": "fr",
        "seed": 0
      },
      "model_usage": {
        "builtin/oracle": {
          "input_tokens": 0,
          "output_tokens": 0,
          "total_tokens": 0
        }
      },
      "output": {
        "choices": [
          {
            "message": {
              "content": "Paris",
              "model": "builtin/oracle",
              "role": "assistant"
            },
            "stop_reason": "stop"
          }
        ],
        "completion": "Paris",
        "model": "builtin/oracle",
        "usage": {
          "input_tokens": 0,
          "output_tokens": 0,
          "total_tokens": 0
        }
      },
      "role_usage": {},
      "scores": {
        "exact": {
          "answer": "Paris",
          "history": [],
          "value": 1.0
        },
        "f1": {
          "answer": "Paris",
          "history": [],
          "value": 1.0
        },
        "includes": {
          "answer": "Paris",
          "explanation": "Paris",
          "history": [],
          "value": 1.0
        },
        "match": {
          "answer": "Paris",
          "explanation": "Paris",
          "history": [],
          "value": 1.0
        }
      },
      "store": {},
      "target": "Paris"
    }
    "#);
}

#[test]
fn bbeh_exports_read_back_by_inspect_and_eee_with_items_csv_scores() {
    let ws = Workspace::new();
    ws.write(
        "b.yaml",
        "name: b\nmodels:\n  - {id: r0, provider: builtin, model: random}\n  - {id: r1, provider: builtin, model: random, params: {salt: 1}}\ntasks:\n  - benchmark: bbeh\n    select: [dyck_languages, boolean_expressions]\n    params: {subset: mini}\nseeds: [0, 1]\n",
    );
    let data = ["--data-dir", data_dir().to_str().unwrap()];
    let out = ws.cmd().args(data).args(["run", "b.yaml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    exports_match_items(&ws, "b.yaml", "b", &data);
    // The prompt as sent and the dataset's target reach each sample.
    let log = std::fs::read_dir(ws.path("inspect-b")).unwrap().next().unwrap().unwrap().path();
    let log: Value = serde_json::from_slice(&std::fs::read(log).unwrap()).unwrap();
    let sample = &log["samples"][0];
    assert!(sample["messages"][0]["content"].as_str().unwrap().starts_with(sample["input"].as_str().unwrap()), "{sample}");
    assert!(!sample["target"].as_str().unwrap().is_empty(), "{sample}");
}

/// A question that carries the red team's payloads, HTML (`html_report.rs`) and terminal
/// (`terminal.rs`); the mock model echoes it back, so the answer is the provider's text.
fn hostile() -> String {
    format!("{} {}", crate::html_report::HOSTILE, crate::terminal::HOSTILE)
}
const SECRET: &str = "sk-export-test-secret-4242";

/// Panics unless `bytes` is printable ASCII lines: no markup a viewer runs, no control or
/// bidi character, no secret, no path of this machine.
fn assert_inert(ws: &Workspace, what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    assert!(bytes.iter().all(|b| (b' '..=b'~').contains(b) || *b == b'\n'), "{what} holds a byte outside printable ASCII:\n{text}");
    for bad in ["<script", "<img", SECRET, ws.dir.path().to_str().unwrap(), repo().to_str().unwrap()] {
        assert!(!text.contains(bad), "{what} holds `{bad}`");
    }
}

#[test]
fn exports_carry_provenance_and_no_secret_path_or_raw_provider_text() {
    let mock = Mock::start(MockConfig { require_api_key: Some(SECRET.into()), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("d.jsonl", &format!("{}\n", serde_json::json!({"id": "h", "input": hostile(), "target": "x"})));
    let yaml = format!(
        "name: h\nmodels:\n  - {{id: m, provider: openai, model: gpt, base_url: \"{}\", api_key_env: EXPORT_TEST_KEY}}\ntasks:\n  - benchmark: qa\n    params: {{dataset: d.jsonl, scorers: [includes]}}\nseeds: [0]\n",
        mock.url()
    );
    ws.write("h.yaml", &yaml);
    let out = ws.cmd().env("EXPORT_TEST_KEY", SECRET).args(["run", "h.yaml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let abs = ws.path("h.yaml");
    for format in ["inspect", "eee"] {
        let out = ws.cmd().args(["export"]).arg(&abs).args(["--format", format, "--out"]).arg(ws.path(format)).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let files = crate::support::snapshot_dir(ws.dir.path()).into_iter().filter(|(p, _)| p.starts_with("inspect/") || p.starts_with("eee/")).collect::<Vec<_>>();
    assert_eq!(files.len(), 3, "{:?}", files.iter().map(|f| &f.0).collect::<Vec<_>>());
    for (path, bytes) in &files {
        assert_inert(&ws, path, bytes);
    }
    // The escaped text parses back to exactly what the provider answered.
    let log: Value = serde_json::from_slice(&files.iter().find(|(p, _)| p.starts_with("inspect/")).unwrap().1).unwrap();
    let answer = log["samples"][0]["output"]["completion"].as_str().unwrap();
    assert!(answer.contains(&hostile()) && answer.contains("<script>alert(1)</script>") && answer.contains('\u{202e}'), "{answer}");
    // Provenance: evalgrid's version, the pipeline's blake3 and the cell's step keys, the
    // same as the report's (`cells.csv`, `index.html`).
    let cells = std::fs::read_to_string(ws.path("reports/h/cells.csv")).unwrap();
    let row: Vec<&str> = cells.lines().nth(1).unwrap().split(',').collect();
    let (episode, score) = (row[5], row[6]);
    let html = std::fs::read_to_string(ws.path("reports/h/index.html")).unwrap();
    let blake3 = html.split("pipeline blake3</dt><dd>").nth(1).and_then(|s| s.split('<').next()).expect("the report names the pipeline's blake3");
    assert!(html.contains(&format!("episode {} · score {}", &episode[..12], &score[..12])), "the report's cells carry their step keys");
    let meta = &log["eval"]["metadata"]["evalgrid"];
    assert_eq!(meta["pipeline_blake3"], blake3);
    assert_eq!(meta["cells"][0]["episode_key"], episode);
    assert_eq!(meta["cells"][0]["score_key"], score);
    assert!(meta["evalgrid_version"].as_str().unwrap().starts_with(env!("CARGO_PKG_VERSION")), "{meta}");
    let eee = String::from_utf8_lossy(&files.iter().find(|(p, _)| p.ends_with(".jsonl")).unwrap().1).into_owned();
    assert!(eee.contains(episode) && eee.contains(score), "{eee}");
    let aggregate = String::from_utf8_lossy(&files.iter().find(|(p, _)| p.starts_with("eee/") && p.ends_with(".json")).unwrap().1).into_owned();
    assert!(aggregate.contains(blake3) && aggregate.contains(episode), "{aggregate}");
}

#[test]
fn export_without_results_says_to_run_first() {
    let ws = Workspace::new();
    ws.quickstart();
    let out = ws.run(&["export", "quickstart.yaml", "--format", "inspect", "--out", "x"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("run `evalgrid run` first"), "{}", String::from_utf8_lossy(&out.stderr));
}

/// Issue 48 item 2: a two-model `qa` grid exported for Inspect. `inspect view`'s own
/// listing code (run by the peer) lists both logs (they used to share a `task_id`, so one
/// passed for a retry of the other); a judge reply without a grade is in the sample,
/// unscored, with Inspect's explanation; and scores carry the extracted answer and why.
#[test]
fn two_models_logs_are_all_listed_by_inspect_view_and_ungraded_judge_scores_are_kept() {
    let ws = Workspace::new();
    ws.write(
        "d.jsonl",
        "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n{\"id\": \"sum\", \"input\": \"What is 2+2?\", \"target\": \"4\"}\n",
    );
    ws.write("m1.json", r#"{"default": "Paris"}"#);
    ws.write("m2.json", r#"{"replies": [{"contains": "2+2", "reply": "4"}], "default": "Lyon"}"#);
    ws.write("judge.json", r#"{"replies": [{"contains": "[Submission]: Paris", "reply": "Right. GRADE: C"}], "default": "I cannot tell."}"#);
    ws.write(
        "g.yaml",
        "name: g\nmodels:\n  - {id: m1, provider: scripted, model: a, params: {file: m1.json}}\n  - {id: m2, provider: scripted, model: b, params: {file: m2.json}}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: [match, {judge: {model: {provider: scripted, model: j, params: {file: judge.json}}}}]\nseeds: [0]\n",
    );
    let out = ws.cmd().args(["run", "g.yaml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let dir = ws.path("inspect-g");
    let out = ws.cmd().args(["export", "g.yaml", "--format", "inspect", "--out"]).arg(&dir).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // An unscored value is Inspect's JSON constant `NaN`, which serde_json does not read.
    let logs: Vec<Value> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| serde_json::from_str(&std::fs::read_to_string(e.unwrap().path()).unwrap().replace("\"value\":NaN", "\"value\":\"NaN\"")).unwrap())
        .collect();
    let text = std::fs::read_to_string(std::fs::read_dir(&dir).unwrap().next().unwrap().unwrap().path()).unwrap();
    assert!(text.rfind("\"version\":2").unwrap() < text.find("\"samples\":[").unwrap(), "Inspect's header read stops at `samples`");
    assert_eq!(logs.len(), 2);
    assert_ne!(logs[0]["eval"]["task_id"], logs[1]["eval"]["task_id"], "one task_id per task × model");
    // Exporting again gives the same ids.
    let again = ws.path("inspect-g2");
    assert!(ws.cmd().args(["export", "g.yaml", "--format", "inspect", "--out"]).arg(&again).output().unwrap().status.success());
    let ids = |d: &Path| {
        let mut v: Vec<String> = std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
        v.sort();
        v
    };
    assert_eq!(ids(&dir), ids(&again));
    let Some(read) = peer(&[Path::new("inspect"), &dir]) else { return };
    assert_eq!((read["files"].as_u64(), read["listed"].as_u64()), (Some(2), Some(2)), "{read}");
    // m2 answered `Lyon` to fr: the judge gave no grade; it is there, unscored, with the reply.
    let unscored = read["unscored"].as_array().unwrap();
    assert!(unscored.iter().any(|u| u[0] == "m2" && u[3] == "fr" && u[4] == "judge" && u[5] == "Grade not found in model output: I cannot tell."), "{read}");
    assert_eq!(unscored.len(), 2, "m2's two answers got no grade: {read}");
    let details = read["details"].as_array().unwrap();
    assert!(details.iter().any(|d| d[0] == "m1" && d[1] == "fr" && d[3] == "judge" && d[4] == "Paris" && d[5] == "Right. GRADE: C"), "{read}");
    assert!(details.iter().any(|d| d[0] == "m2" && d[1] == "sum" && d[3] == "match" && d[4] == "4" && d[5] == "4"), "{read}");
    assert_eq!(peer_scores(&read), items_csv(&ws.path("reports/g/items.csv")), "scores equal items.csv");
}
