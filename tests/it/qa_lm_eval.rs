//! lm-evaluation-harness task files as `qa` tasks (`params: {lm_eval_yaml: FILE}`), checked
//! against lm-eval itself: the same task files read by lm-eval's own `ConfigurableTask`
//! give the same prompts, and its `process_results` (acc, acc_norm; exact_match after its
//! filter ensembles) on the recorded log-probabilities and answers gives evalgrid's values,
//! item by item. Without lm-eval (`pip install --no-deps lm-eval` plus `datasets` and
//! `sacrebleu`) the comparison prints SKIPPED; the rest still runs. Python hooks and
//! unsupported fields are located errors.

use std::collections::BTreeMap;
use std::process::Command;

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockRequest, Script};
use serde_json::{Value, json};

use crate::providers::Mock;
use crate::support::{Workspace, repo};

const MC_YAML: &str = r#"task: capitals_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: mc.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "Question: {{question}}\nAnswer:"
doc_to_choice: "{{choices}}"
doc_to_target: label
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"#;

const MC_ROWS: &str = concat!(
    "{\"question\": \"Capital of France?\", \"choices\": [\"Paris\", \"Rome\", \"Berlin\"], \"label\": 0}\n",
    "{\"question\": \"Largest planet?\", \"choices\": [\"Mars\", \"Jupiter\"], \"label\": 1}\n",
    "{\"question\": \"Color of the sky?\", \"choices\": [\"Blue\", \"Red\", \"Green\"], \"label\": 0}\n",
    "{\"question\": \"Which is a fruit?\", \"choices\": [\"Banana\", \"Rock\"], \"label\": \"Banana\"}\n",
    "{\"question\": \"2+2?\", \"choices\": [\"4\", \"5\"], \"label\": 1}\n",
);

const GEN_YAML: &str = r#"task: arithmetic_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: gen.jsonl
test_split: test
output_type: generate_until
doc_to_text: "Q: {{question}}\nA:"
doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["\n\n", "Q:"]
  do_sample: false
  max_gen_toks: 32
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
    regexes_to_ignore: [","]
filter_list:
  - name: strict
    filter:
      - function: regex
        regex_pattern: "The answer is (\\-?[0-9\\.\\,]+)"
      - function: take_first
  - name: flexible
    filter:
      - function: regex
        group_select: -1
        regex_pattern: "(-?[$0-9.,]{2,})|(-?[0-9]+)"
      - function: take_first
"#;

const GEN_ROWS: &str = concat!(
    "{\"question\": \"What is 6*7?\", \"answer\": \"42\"}\n",
    "{\"question\": \"What is 1000+234?\", \"answer\": \"1,234\"}\n",
    "{\"question\": \"Capital of Peru?\", \"answer\": \"Lima\"}\n",
    "{\"question\": \"What is 2+3?\", \"answer\": \"5\"}\n",
);

/// The recorded next-token alternatives of each multiple-choice prompt (OpenAI's shape), and
/// the recorded answer of each generated one.
fn recorded() -> (BTreeMap<String, Value>, BTreeMap<String, String>) {
    let tops = [
        ("Capital of France?", json!([{"token": " Rome", "logprob": -0.9}, {"token": " Paris", "logprob": -1.0}, {"token": " Berlin", "logprob": -1.5}])),
        ("Largest planet?", json!([{"token": " Mars", "logprob": -0.3}, {"token": " Jupiter", "logprob": -0.35}, {"token": "Mars", "logprob": -4.0}])),
        ("Color of the sky?", json!([{"token": " Blue", "logprob": -0.1}, {"token": " Green", "logprob": -3.0}])),
        ("Which is a fruit?", json!([{"token": " A", "logprob": -0.2}, {"token": " The", "logprob": -1.0}])),
        ("2+2?", json!([{"token": " 4", "logprob": -0.7}, {"token": " 5", "logprob": -0.7}])),
    ];
    let answers = [
        ("What is 6*7?", "Let me think. The answer is 42."),
        ("What is 1000+234?", "It is 1234"),
        ("Capital of Peru?", "The answer is LIMA"),
        ("What is 2+3?", "2+3 = 5, so the answer is 5"),
    ];
    (
        tops.into_iter().map(|(q, t)| (format!("Question: {q}\nAnswer:"), t)).collect(),
        answers.into_iter().map(|(q, a)| (format!("Q: {q}\nA:"), a.to_owned())).collect(),
    )
}

fn reply(req: &MockRequest) -> MockOutcome {
    let (tops, answers) = recorded();
    let (text, logprobs) = match (tops.get(&req.last_user), answers.get(&req.last_user)) {
        (Some(top), _) => ("x".to_owned(), json!({"content": [{"token": "x", "logprob": -0.1, "bytes": [], "top_logprobs": top}]})),
        (None, Some(a)) => (a.clone(), Value::Null),
        (None, None) if req.last_user.starts_with("Q:") => ("no idea".to_owned(), Value::Null),
        (None, None) => {
            return MockOutcome::Recorded { status: 400, body: format!("{{\"error\": {{\"message\": \"unexpected prompt {:?}\"}}}}", req.last_user) };
        }
    };
    let body = json!({"id": "c", "object": "chat.completion", "model": req.model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": logprobs, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 1, "total_tokens": 11}});
    MockOutcome::Recorded { status: 200, body: body.to_string() }
}

/// lm-eval's rows for `task` (`None`: lm-eval is missing, SKIPPED printed).
fn lm_eval(ws: &Workspace, task: &str, recorded: &Value) -> Option<Vec<Value>> {
    let file = ws.write(&format!("{task}.recorded.json"), &recorded.to_string());
    let out = Command::new("python3")
        .arg(repo().join("tests/it/qa_lm_eval.py"))
        .arg(ws.path(task))
        .arg(&file)
        .current_dir(ws.path("."))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.starts_with("SKIPPED") {
        eprintln!(
            "SKIPPED: the lm-eval differential test needs lm-eval (python3 -m pip install --no-deps lm-eval && python3 -m pip install datasets sacrebleu): {stdout}"
        );
        return None;
    }
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect())
}

#[test]
fn lm_eval_task_files_score_as_lm_eval_scores_them() {
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("mc.yaml", MC_YAML);
    ws.write("mc.jsonl", MC_ROWS);
    ws.write("gen.yaml", GEN_YAML);
    ws.write("gen.jsonl", GEN_ROWS);
    ws.write(
        "p.yaml",
        &format!(
            "name: lm\nmodels:\n  - {{id: base, provider: openai, model: base-model, base_url: \"{}\", params: {{max_tokens: 512}}}}\ntasks:\n  - benchmark: qa\n    params: {{lm_eval_yaml: mc.yaml}}\n  - benchmark: qa\n    params: {{lm_eval_yaml: gen.yaml}}\nseeds: [0]\n",
            mock.url()
        ),
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls(), 9);
    let log = mock.server().request_log();
    let gen_body = &log.iter().find(|r| r.body.to_string().contains("6*7")).unwrap().body;
    assert_eq!(gen_body["stop"], json!(["\n\n", "Q:"]), "{gen_body}");
    assert_eq!((gen_body["max_tokens"].as_u64(), gen_body["temperature"].as_f64()), (Some(32), Some(0.0)), "{gen_body}");
    assert!(gen_body.get("logprobs").is_none(), "{gen_body}");
    let rows = crate::support::items_csv(&ws, "lm");
    let mc: Vec<&BTreeMap<String, String>> = rows.iter().filter(|r| r["task"] == "capitals_mc").collect();
    let generated: Vec<&BTreeMap<String, String>> = rows.iter().filter(|r| r["task"] == "arithmetic_gen").collect();
    let col = |rows: &[&BTreeMap<String, String>], c: &str| rows.iter().map(|r| r[c].parse::<f64>().unwrap()).collect::<Vec<_>>();
    // France: acc picks Rome, acc_norm Paris; planets: acc Mars, acc_norm Jupiter; sky: Blue;
    // fruit: no choice among the alternatives, argmax takes the first (Banana, right);
    // 2+2: a tie goes to the first (4, wrong).
    assert_eq!(col(&mc, "acc"), [0.0, 0.0, 1.0, 1.0, 0.0]);
    assert_eq!(col(&mc, "acc_norm"), [1.0, 1.0, 1.0, 1.0, 0.0]);
    assert_eq!(col(&generated, "exact_match_strict"), [1.0, 0.0, 0.0, 0.0]);
    assert_eq!(col(&generated, "exact_match_flexible"), [1.0, 1.0, 0.0, 1.0]);

    let (tops, answers) = recorded();
    let sent: Vec<String> = log.iter().map(|r| r.body["messages"][0]["content"].as_str().unwrap().to_owned()).collect();
    if let Some(theirs) = lm_eval(&ws, "mc.yaml", &json!(tops)) {
        assert_eq!(theirs.len(), mc.len());
        for (row, t) in mc.iter().zip(&theirs) {
            assert!(sent.contains(&t["prompt"].as_str().unwrap().to_owned()), "lm-eval's prompt {t} was sent as is");
            assert_eq!(row["acc"].parse::<f64>().unwrap(), t["acc"].as_f64().unwrap(), "acc of {t}");
            assert_eq!(row["acc_norm"].parse::<f64>().unwrap(), t["acc_norm"].as_f64().unwrap(), "acc_norm of {t}");
        }
        let theirs = lm_eval(&ws, "gen.yaml", &json!(answers)).unwrap();
        assert_eq!(theirs.len(), generated.len());
        for (row, t) in generated.iter().zip(&theirs) {
            assert!(sent.contains(&t["prompt"].as_str().unwrap().to_owned()), "lm-eval's prompt {t} was sent as is");
            for name in ["strict", "flexible"] {
                assert_eq!(row[&format!("exact_match_{name}")].parse::<f64>().unwrap(), t[name]["exact_match"].as_f64().unwrap(), "{name} of {t}");
            }
        }
        eprintln!("lm-eval agrees on {} multiple-choice and {} generated items", mc.len(), generated.len());
    }

    // Item-precise: one edited question is one new call; a rerun makes none.
    ws.write("gen.jsonl", &GEN_ROWS.replace("Capital of Peru?", "What is 6*7?\\n"));
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(mock.server().calls(), 10, "{v}");
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((mock.server().calls(), v["cells_run"].as_u64()), (10, Some(0)), "{v}");
}

#[test]
fn hooks_and_unsupported_fields_are_located_errors() {
    let ws = Workspace::new();
    ws.write("mc.jsonl", MC_ROWS);
    ws.write(
        "p.yaml",
        "name: lm\nmodels:\n  - {id: o, provider: builtin, model: oracle}\ntasks:\n  - benchmark: qa\n    params: {lm_eval_yaml: t.yaml}\nseeds: [0]\n",
    );
    let error = |yaml: &str| {
        ws.write("t.yaml", yaml);
        let out = ws.run(&["validate", "p.yaml"]);
        assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stdout));
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let hook = error(&MC_YAML.replace("doc_to_text: \"Question: {{question}}\\nAnswer:\"", "doc_to_text: !function utils.doc_to_text"));
    assert!(hook.contains("t.yaml:8:14:") && hook.contains("`doc_to_text: !function …` is a Python hook"), "{hook}");
    let field = error(&format!("{MC_YAML}should_decontaminate: true\n"));
    assert!(field.contains("t.yaml:20:1:") && field.contains("lm-eval field `should_decontaminate` is not supported"), "{field}");
    let output = error(&MC_YAML.replace("output_type: multiple_choice", "output_type: loglikelihood"));
    assert!(output.contains("t.yaml:7:14:") && output.contains("`output_type: loglikelihood` is not supported"), "{output}");
    let metric = error(&MC_YAML.replace("metric: acc_norm", "metric: brier_score"));
    assert!(metric.contains("t.yaml:15:") && metric.contains("metric `brier_score` is not supported"), "{metric}");
    let hub = error(&MC_YAML.replace("dataset_path: json", "dataset_path: cais/mmlu"));
    assert!(hub.contains("t.yaml:2:15:") && hub.contains("no Hub access"), "{hub}");
    // Every error is also at the pipeline's `lm_eval_yaml` line.
    assert!(hub.contains("p.yaml:6:28:"), "{hub}");
    // The oracle passes a valid file.
    ws.write("t.yaml", MC_YAML);
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let rows = std::fs::read_to_string(ws.path("reports/lm/items.csv")).unwrap();
    assert!(rows.lines().skip(1).all(|l| l.ends_with(",1.0,1.0")), "{rows}");
}
