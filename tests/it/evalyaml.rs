//! `params: {eval_yaml: …}`: a Hub/Inspect `eval.yaml` as a `qa` task. Inspect AI itself
//! reads the same file and dataset (`tests/it/evalyaml_peer.py`) and answers with the same
//! recorded replies: its prompts equal the ones evalgrid sent and its per-sample scores equal
//! evalgrid's. Editing one row asks that row again only; every unsupported part of the file
//! is an error at its `file:line:col`.

use std::collections::BTreeSet;
use std::process::Command;

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};
use serde_json::{Value, json};

use crate::providers::Mock;
use crate::support::{Workspace, repo};

#[test]
fn the_example_pipeline_runs_offline_and_the_oracle_scores_every_item() {
    let ws = Workspace::new();
    let pipeline = repo().join("pipelines/evalyaml-example.yaml");
    let (code, v) = ws.run_json(&["run", pipeline.to_str().unwrap(), "--json"]);
    assert_eq!((code, v["cells_run"].as_u64()), (0, Some(8)), "{v}");
    let items = std::fs::read_to_string(ws.path("reports/evalyaml-example/items.csv")).unwrap();
    assert!(items.starts_with("suite,model,task,seed,item,choice,match,includes\n"), "{items}");
    let oracle: Vec<&str> = items.lines().filter(|l| l.starts_with("qa,oracle,")).collect();
    assert_eq!(oracle.len(), 2 * (4 + 3), "{items}");
    assert!(oracle.iter().all(|l| l.split(',').skip(5).all(|v| v.is_empty() || v == "1.0")), "{items}");
}

const EVAL_YAML: &str = r#"name: Tiny benchmark
description: Two small tasks in the Hub's layout.
evaluation_framework: inspect-ai
tasks:
  - id: capitals
    config: default
    split: test
    field_spec:
      input: question
      target: answer
      id: qid
      metadata: [country]
    solvers:
      - name: system_message
        args:
          template: "You answer questions about {country}. Format: {your answer}"
      - name: prompt_template
        args:
          template: "Question: {prompt}\nReply with the city only, as {{\"city\": \"X\"}} or plain text."
      - name: generate
    scorers:
      - name: match
      - name: includes
        args: {ignore_case: false}
      - name: exact
      - name: f1
      - name: answer
        args: {pattern: word}
      - name: model_graded_fact
        args: {model: replay/grader}
      - name: match
        args: {location: any}
  - id: science
    split: validation
    field_spec:
      input: question
      target: label
      choices: [a, b, c, d]
    solvers:
      - name: chain_of_thought
      - name: multiple_choice
    scorers:
      - name: choice
  - id: pictures
    config: vision
    field_spec:
      input: prompt
      target: colour
      input_image: image
    solvers:
      - name: generate
    scorers:
      - name: includes
  - id: gpqa
    split: train
    epochs: 4
    epoch_reducer: pass_at_1
    field_spec:
      input: Question
      target: "literal:D"
      choices: ["Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3", "Correct Answer"]
      metadata: [topic]
    solvers:
      - name: prompt_template
        args:
          template: "Topic: {topic}\n{prompt}"
      - name: multiple_choice
        args:
          template: |
            You are an expert. Reply 'ANSWER: X'.
            {question}
            {choices}
    scorers:
      - name: choice
"#;

const CAPITALS: &str = concat!(
    "{\"qid\": \"fr\", \"question\": \"Capital of France?\", \"answer\": \"Paris\", \"country\": \"France\"}\n",
    "{\"qid\": \"jp\", \"question\": \"Capital of Japan?\", \"answer\": \"Tokyo\", \"country\": \"Japan\"}\n",
    "{\"qid\": \"it\", \"question\": \"Capital of Italy?\", \"answer\": \"Rome\", \"country\": \"Italy\"}\n",
    "{\"qid\": \"pe\", \"question\": \"Capital of Peru?\", \"answer\": \"Lima\", \"country\": \"Peru\"}\n",
);

const SCIENCE: &str = concat!(
    "{\"question\": \"Water boils at sea level at?\", \"a\": \"50 C\", \"b\": \"100 C\", \"c\": \"150 C\", \"d\": \"200 C\", \"label\": 1}\n",
    "{\"question\": \"Which planet is largest?\", \"a\": \"Mars\", \"b\": \"Venus\", \"c\": \"Jupiter\", \"d\": \"Earth\", \"label\": 2}\n",
    "{\"question\": \"Which gas do plants take in?\", \"a\": \"CO2\", \"b\": \"O2\", \"c\": \"N2\", \"d\": \"He\", \"label\": 0}\n",
);

/// Stand-ins with a PNG's signature and final IEND chunk, as `data:` URLs (as the Hub's
/// `input_image` columns hold them).
fn picture(middle: &str) -> String {
    use base64::Engine as _;
    let bytes = [b"\x89PNG\r\n\x1a\n".as_slice(), middle.as_bytes(), b"\0\0\0\0IEND\xaeB`\x82"].concat();
    format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

fn pictures() -> String {
    [("What colour is this?", "red", "red"), ("Name the colour shown.", "blue", "blue"), ("And this one?", "green", "teal")]
        .iter()
        .map(|(q, pixels, target)| format!("{}\n", json!({"prompt": q, "image": picture(pixels), "colour": target})))
        .collect()
}

const GPQA: &str = concat!(
    "{\"Question\": \"Which particle mediates light?\", \"Incorrect Answer 1\": \"gluon\", \"Incorrect Answer 2\": \"W boson\", \"Incorrect Answer 3\": \"graviton\", \"Correct Answer\": \"photon\", \"topic\": \"physics\"}\n",
    "{\"Question\": \"Which base pairs with adenine in DNA?\", \"Incorrect Answer 1\": \"guanine\", \"Incorrect Answer 2\": \"cytosine\", \"Incorrect Answer 3\": \"uracil\", \"Correct Answer\": \"thymine\", \"topic\": \"biology\"}\n",
    "{\"Question\": \"Which gas is a noble gas?\", \"Incorrect Answer 1\": \"neon\", \"Incorrect Answer 2\": \"oxygen\", \"Incorrect Answer 3\": \"nitrogen\", \"Correct Answer\": \"argon\", \"topic\": \"chemistry\"}\n",
);

/// The recorded answers: the first rule whose `contains` is in the question answers.
fn replies() -> Value {
    json!({"replies": [
        // The grader (evalgrid's prompt and Inspect's both show `[Submission]: <answer>`).
        {"contains": "[Submission]: Paris", "reply": "The capital of France is Paris. GRADE: C"},
        {"contains": "[Submission]: The answer is tokyo.", "reply": "GRADE: C"},
        {"contains": "[Submission]: I think it is Milan.", "reply": "Milan is not the capital.\nGRADE: I"},
        {"contains": "[Submission]: Lima, Peru", "reply": "GRADE: C"},
        {"contains": "France", "reply": "Paris"},
        {"contains": "Japan", "reply": "The answer is tokyo."},
        {"contains": "Italy", "reply": "I think it is Milan.\nANSWER: Rome"},
        {"contains": "Peru", "reply": "Lima, Peru"},
        {"contains": "boils", "reply": "Water boils at 100 C.\nANSWER: B"},
        {"contains": "planet", "reply": "ANSWER: (d)"},
        {"contains": "plants", "reply": "Plants breathe in CO2, so A"},
        {"contains": "colour is this", "reply": "It is red."},
        {"contains": "colour shown", "reply": "Red"},
        {"contains": "this one", "reply": "green"},
        {"contains": "mediates light", "reply": "ANSWER: D"},
        {"contains": "adenine", "reply": "D"},
        {"contains": "noble gas", "reply": "ANSWER: A"},
    ], "default": ""})
}

fn reply_for(req: &MockRequest) -> MockOutcome {
    let rules = replies();
    let reply = rules["replies"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| req.last_user.contains(r["contains"].as_str().unwrap()))
        .map(|r| r["reply"].as_str().unwrap().to_owned());
    MockOutcome::Reply(MockReply::text(reply.unwrap_or_default()))
}

fn workspace(url: &str) -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path("bench/data")).unwrap();
    ws.write("bench/eval.yaml", EVAL_YAML);
    ws.write("bench/data/test.jsonl", CAPITALS);
    ws.write("bench/data/validation.jsonl", SCIENCE);
    std::fs::create_dir_all(ws.path("bench/vision")).unwrap();
    ws.write("bench/vision/test.jsonl", &pictures());
    ws.write("bench/data/train.jsonl", GPQA);
    ws.write(
        "p.yaml",
        &format!(
            "name: e\nmodels:\n  - {{id: m, provider: openai, model: player, base_url: \"{url}\"}}\ntasks:\n  - benchmark: qa\n    params: {{eval_yaml: bench/eval.yaml, task: capitals, judge: {{provider: openai, model: grader, base_url: \"{url}\"}}}}\n  - benchmark: qa\n    params: {{eval_yaml: bench/eval.yaml, task: science}}\n  - benchmark: qa\n    params: {{eval_yaml: bench/eval.yaml, task: pictures}}\n  - benchmark: qa\n    params: {{eval_yaml: bench/eval.yaml, task: gpqa}}\nseeds: [0]\n"
        ),
    );
    ws
}

/// Each (task, item) row of `items.csv` as its scorer values.
fn items(ws: &Workspace) -> Vec<(String, String, serde_json::Map<String, Value>)> {
    let text = std::fs::read_to_string(ws.path("reports/e/items.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            let cells: Vec<&str> = l.split(',').collect();
            let scores =
                header.iter().zip(&cells).skip(5).filter(|(_, v)| !v.is_empty()).map(|(k, v)| ((*k).to_owned(), json!(v.parse::<f64>().unwrap()))).collect();
            (cells[2].to_owned(), cells[4].to_owned(), scores)
        })
        .collect()
}

#[test]
fn inspect_reads_the_same_eval_yaml_and_scores_the_same_answers_the_same() {
    let mock = Mock::start(MockConfig { script: Script::function(reply_for), ..MockConfig::default() });
    let ws = workspace(&mock.url());
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls(), 13 + 4, "one call per row, one grading per capitals answer: {v}");
    let ours = items(&ws);
    // What evalgrid sent: (system, user) per call.
    let sent: BTreeSet<(Option<String>, String)> = mock
        .server()
        .request_log()
        .iter()
        .filter(|r| r.body["model"] != "grader")
        .map(|r| {
            let messages = r.body["messages"].as_array().unwrap();
            // A turn's text: its content, or its text parts (a turn with an image).
            let text = |role: &str| {
                let content = &messages.iter().find(|m| m["role"] == role)?["content"];
                content.as_str().map(str::to_owned).or_else(|| {
                    let parts = content.as_array()?;
                    assert!(parts.iter().any(|p| p["image_url"]["url"].as_str().is_some_and(|u| u.starts_with("data:image/png;base64,"))), "{content}");
                    Some(parts.iter().filter_map(|p| p["text"].as_str()).collect())
                })
            };
            (text("system"), text("user").unwrap())
        })
        .collect();
    assert!(
        sent.iter().any(
            |(s, u)| s.as_deref() == Some("You answer questions about Japan. Format: {your answer}") && u.starts_with("Question: Capital of Japan?\nReply")
        ),
        "{sent:?}"
    );
    let replies_file = ws.write("replies.json", &replies().to_string());
    let mut theirs_sent = BTreeSet::new();
    for (task, data, expected_rows) in [
        ("capitals", "bench/data/test.jsonl", 4),
        ("science", "bench/data/validation.jsonl", 3),
        ("pictures", "bench/vision/test.jsonl", 3),
        ("gpqa", "bench/data/train.jsonl", 3),
    ] {
        let out = Command::new("python3")
            .arg(repo().join("tests/it/evalyaml_peer.py"))
            .args([ws.path("bench/eval.yaml"), ws.path(data), replies_file.clone()])
            .arg(task)
            .output()
            .expect("python3 runs");
        if out.status.code() == Some(3) {
            eprintln!(
                "SKIPPED: the eval.yaml differential test needs Inspect AI (python3 -m pip install inspect_ai==0.3.285): {}",
                String::from_utf8_lossy(&out.stdout)
            );
            return;
        }
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let samples: Vec<Value> = serde_json::from_slice(&out.stdout).expect("one JSON list");
        let rows: Vec<_> = ours.iter().filter(|(t, _, _)| t == task).collect();
        assert_eq!((samples.len(), rows.len()), (expected_rows, expected_rows), "{samples:?} {rows:?}");
        for (sample, (_, item, scores)) in samples.iter().zip(rows) {
            assert_eq!(sample["scores"].as_object().unwrap(), scores, "task {task} item {item}: Inspect {sample}, evalgrid {scores:?}");
            theirs_sent.insert((sample["system"].as_str().map(str::to_owned), sample["user"].as_str().unwrap().to_owned()));
        }
    }
    assert_eq!(theirs_sent, sent, "Inspect's prompts are the ones evalgrid sent");
    // The answers differ in what they score: not all ones, not all zeros.
    let all: Vec<f64> = ours.iter().flat_map(|(_, _, s)| s.values().map(|v| v.as_f64().unwrap())).collect();
    assert!(all.contains(&0.0) && all.contains(&1.0), "{ours:?}");
}

#[test]
fn editing_one_row_of_an_eval_yaml_dataset_asks_that_row_again_only() {
    let mock = Mock::start(MockConfig { script: Script::function(reply_for), ..MockConfig::default() });
    let ws = workspace(&mock.url());
    ws.write("p.yaml", &std::fs::read_to_string(ws.path("p.yaml")).unwrap().replace("seeds: [0]", "seeds: [0, 1]"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, mock.server().calls()), (0, 26 + 4), "{v}");
    // One question edited: one new call per seed; a target edited: none.
    ws.write("bench/data/test.jsonl", &CAPITALS.replace("Capital of Peru?", "Capital city of Peru?").replace("\"Rome\"", "\"Roma\""));
    let (_, s) = ws.run_json(&["status", "p.yaml", "--explain", "m/qa/capitals/1", "--json"]);
    assert_eq!(s["changed_rows"], json!(["row `it` (bench/data/test.jsonl:3): target changed", "row `pe` (bench/data/test.jsonl:4): question changed"]), "{s}");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, mock.server().calls()), (0, 30 + 2 + 2), "a new question per seed, and the two rows graded again: {v}");
    assert_eq!(v["cells_cached"].as_u64(), Some(6), "the other tasks' cells are untouched: {v}");
}

/// Each unsupported or wrong part is exit 2 at its place in the eval.yaml, before any call.
#[test]
fn unsupported_parts_are_errors_at_their_place_in_the_file() {
    let ws = workspace("http://127.0.0.1:9");
    let check = |yaml: &str, task: &str, want: &str| {
        ws.write("bench/eval.yaml", yaml);
        ws.write(
            "p.yaml",
            &format!("name: e\nmodels:\n  - {{id: m, provider: openai, model: x, base_url: \"http://127.0.0.1:9\"}}\ntasks:\n  - benchmark: qa\n    params: {{eval_yaml: bench/eval.yaml{task}, judge: {{provider: openai, model: g, base_url: \"http://127.0.0.1:9\"}}}}\nseeds: [0]\n"),
        );
        let out = ws.run(&["validate", "p.yaml"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{want}: {err}");
        assert!(err.contains(want), "want {want:?} in:\n{err}");
    };
    let one = |t: &str| EVAL_YAML.replace("  - id: capitals", t);
    check(EVAL_YAML, "", "the file declares 4 tasks: name one with `params.task`");
    check(EVAL_YAML, ", task: capitls", "did you mean `capitals`?");
    check(EVAL_YAML, ", task: science", "`judge` is set, but the task has no `model_graded_qa` or `model_graded_fact` scorer");
    check(
        &EVAL_YAML.replace("      - name: generate\n", "      - name: self_critique\n"),
        ", task: capitals",
        "bench/eval.yaml:20:15: solver `self_critique` is not supported",
    );
    check(&EVAL_YAML.replace("      - name: exact\n", "      - name: math\n"), ", task: capitals", "bench/eval.yaml:25:15: scorer `math` is not supported");
    check(&EVAL_YAML.replace("    split: test\n", "    split: test\n    metrics: [acc]\n"), ", task: capitals", "bench/eval.yaml:8:5: unknown field `metrics`");
    check(
        &EVAL_YAML.replace("      metadata: [country]\n", "      metadata: [country]\n      sandbox: docker\n"),
        ", task: capitals",
        "unknown field `sandbox`",
    );
    check(&EVAL_YAML.replace("    split: test\n", "    split: dev\n"), ", task: capitals", "bench/eval.yaml:7:12: no file of split `dev`");
    check(&one("  - id: capitals\n    epoch_reducer: median"), ", task: capitals", "bench/eval.yaml:6:20: `epoch_reducer: median` is not supported");
    check(
        &EVAL_YAML.replace("        args: {ignore_case: false}", "        args: {ignore_cas: false}"),
        ", task: capitals",
        "`includes` argument `ignore_cas` is not supported",
    );
    check(
        &EVAL_YAML.replace("evaluation_framework: inspect-ai", "evaluation_framework: lighteval"),
        ", task: capitals",
        "bench/eval.yaml:3:23: evaluation_framework `lighteval`",
    );
    check(&EVAL_YAML.replace("      - name: generate\n", ""), ", task: capitals", "the solvers never ask the model");
    check(
        &EVAL_YAML.replace("      - name: multiple_choice\n", "      - name: multiple_choice\n      - name: generate\n"),
        ", task: science",
        "solver `generate` comes after the model was asked",
    );
    check(
        &EVAL_YAML.replace("      input: question\n      target: answer", "      input: query\n      target: answer"),
        ", task: capitals",
        "bench/data/test.jsonl:1: no `query` (the question)",
    );
    check(&EVAL_YAML.replace("{prompt}", "{prompt:>10}"), ", task: capitals", "format spec");
    // Under a budget the entry's judge needs a price, as any judge does.
    ws.write("bench/eval.yaml", EVAL_YAML);
    ws.write(
        "p.yaml",
        "name: e\nmodels:\n  - {id: m, provider: openai, model: x, base_url: \"http://127.0.0.1:9\", price: {input_per_mtok: 1, output_per_mtok: 1}}\ntasks:\n  - benchmark: qa\n    params: {eval_yaml: bench/eval.yaml, task: capitals, judge: {provider: openai, model: g, base_url: \"http://127.0.0.1:9\"}}\nseeds: [0]\nbudget: {usd: 1}\n",
    );
    let out = ws.run(&["validate", "p.yaml"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("the `judge` model `g` has no price"), "{}", String::from_utf8_lossy(&out.stderr));
    // A problem the qa checks find in a translated scorer is shown at that scorer's line.
    check(
        &EVAL_YAML.replace("      - name: exact\n", "      - name: pattern\n        args: {pattern: \"(unclosed\"}\n"),
        ", task: capitals",
        "bench/eval.yaml:25:9: pattern `(unclosed` does not compile",
    );
}

/// A dataset card's `configs:` (README.md front matter) names the split's file where the
/// folder is not in the default layout; `datasets.load_dataset` (what Inspect's Hub loader
/// calls) reads the same folder, and both find the same rows in the same order. A config
/// whose split has several files is an error naming them.
#[test]
fn the_dataset_cards_configs_name_the_split_files_as_datasets_reads_them() {
    let ws = Workspace::new();
    let card = "---\nlicense: mit\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: holdout/qs-*.jsonl\n  - split: dev\n    path: [dev/a.jsonl, dev/b.jsonl]\n---\n# Tiny\n";
    for dir in ["bench/holdout", "bench/data", "bench/dev"] {
        std::fs::create_dir_all(ws.path(dir)).unwrap();
    }
    ws.write("bench/README.md", card);
    ws.write(
        "bench/holdout/qs-00000.jsonl",
        "{\"question\": \"Capital of Peru?\", \"answer\": \"Lima\"}\n{\"question\": \"Capital of Chile?\", \"answer\": \"Santiago\"}\n",
    );
    // A decoy in the default layout: the card takes precedence, as on the Hub.
    ws.write("bench/data/test.jsonl", "{\"question\": \"decoy\", \"answer\": \"x\"}\n");
    ws.write("bench/dev/a.jsonl", "{\"question\": \"a\", \"answer\": \"a\"}\n");
    ws.write("bench/dev/b.jsonl", "{\"question\": \"b\", \"answer\": \"b\"}\n");
    let eval_yaml = |split: &str| {
        format!(
            "name: Tiny\nevaluation_framework: inspect-ai\ntasks:\n  - id: capitals\n    config: default\n    split: {split}\n    field_spec: {{input: question, target: answer}}\n    solvers: [{{name: generate}}]\n    scorers: [{{name: match}}]\n"
        )
    };
    ws.write("bench/eval.yaml", &eval_yaml("test"));
    ws.write(
        "p.yaml",
        "name: card\nmodels:\n  - {id: oracle, provider: builtin, model: oracle}\ntasks:\n  - benchmark: qa\n    params: {eval_yaml: bench/eval.yaml}\nseeds: [0]\n",
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let out = ws.run(&["show", "p.yaml", "oracle/qa/capitals/0"]);
    let shown = String::from_utf8_lossy(&out.stdout);
    let ours: Vec<&str> = ["Capital of Peru?", "Capital of Chile?", "decoy"].into_iter().filter(|q| shown.contains(q)).collect();
    assert_eq!(ours, ["Capital of Peru?", "Capital of Chile?"], "{shown}");
    // `datasets` (Inspect's loader underneath) resolves the same card to the same rows.
    let peer = std::process::Command::new("python3")
        .args([
            "-c",
            "import datasets, json, sys\nds = datasets.load_dataset(sys.argv[1], 'default', split='test')\nprint(json.dumps([r['question'] for r in ds]))",
            ws.path("bench").to_str().unwrap(),
        ])
        .env("HF_DATASETS_OFFLINE", "1")
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .expect("python3 runs");
    if peer.status.success() {
        let theirs: Vec<String> = serde_json::from_slice(&peer.stdout).unwrap();
        assert_eq!(theirs, ours, "datasets reads the card the same way");
    } else {
        eprintln!("SKIPPED: `datasets` cannot read the folder here: {}", String::from_utf8_lossy(&peer.stderr));
    }
    // Two files for one split: an error naming both, at the eval.yaml's `split`.
    ws.write("bench/eval.yaml", &eval_yaml("dev"));
    let out = ws.run(&["validate", "p.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("dev/a.jsonl, dev/b.jsonl") && stderr.contains("eval.yaml:6:"), "{stderr}");
}
