//! `method: loglikelihood` (issue 49): each choice's whole continuation scored from the
//! prompt's own token log-probabilities (`/v1/completions` with `echo`), as lm-evaluation-
//! harness scores multiple choice. Checked against lm-eval itself: its `gguf` model sends the
//! same task's requests to the same independent server (`completions_server.py`, a toy model
//! in the shape OpenAI documents and vLLM serves), and its `process_results` gives the same
//! `acc` and `acc_norm` per item as evalgrid's `items.csv`.

use std::io::BufRead as _;
use std::process::Command;

use crate::support::{Workspace, items_csv, repo};

/// Ten questions, some with a hint the toy model copies, whose choices are one to six tokens
/// long, so `acc` (the sum) and `acc_norm` (per character) disagree on the last two.
const ROWS: &str = r#"{"question": "What is the capital of France?", "hint": "the city of Paris", "choices": ["Paris", "Lyon", "Marseille", "Nice"], "label": 0}
{"question": "Which animal barks?", "hint": "", "choices": ["cat", "dog", "elephant", "goldfish"], "label": 1}
{"question": "What colour is the sky on a clear day?", "hint": "blue", "choices": ["green", "blue", "red", "yellow"], "label": 1}
{"question": "Which is a prime number?", "hint": "seven or eleven", "choices": ["four", "six", "seven", "nine"], "label": 2}
{"question": "Which planet is largest?", "hint": "Jupiter", "choices": ["Mercury", "Jupiter", "Mars", "Venus"], "label": 1}
{"question": "What do bees make?", "hint": "honeycomb", "choices": ["milk", "honey", "silk", "wax paper"], "label": 1}
{"question": "Which is a fruit?", "hint": "a banana is", "choices": ["carrot", "banana", "potato", "onion"], "label": 1}
{"question": "How many legs has a spider?", "hint": "", "choices": ["six", "eight", "ten", "four"], "label": 1}
{"question": "Who wrote Hamlet?", "hint": "Shakespeare", "choices": ["Marlowe", "William Shakespeare", "Ben", "Kyd"], "label": 1}
{"question": "Which gas do plants take in?", "hint": "", "choices": ["oxygen", "carbon dioxide", "neon", "helium"], "label": 1}
"#;

const TASK: &str = "task: toy_mc\ndataset_path: json\ndataset_kwargs: {data_files: {test: mc.jsonl}}\ntest_split: test\noutput_type: multiple_choice\ndoc_to_text: \"Question: {{question}}{% if hint %}\\nHint: {{hint}}{% endif %}\\nAnswer:\"\ndoc_to_choice: \"{{choices}}\"\ndoc_to_target: label\nmetric_list:\n  - {metric: acc, aggregation: mean, higher_is_better: true}\n  - {metric: acc_norm, aggregation: mean, higher_is_better: true}\n";

/// `tests/it/completions_server.py`, killed on drop.
struct Server {
    child: std::process::Child,
    port: String,
    counts: tempfile::NamedTempFile,
}

impl Server {
    fn start(mode: &str) -> Self {
        let counts = tempfile::NamedTempFile::new().unwrap();
        let mut child = Command::new("python3")
            .arg(repo().join("tests/it/completions_server.py"))
            .arg(counts.path())
            .arg(mode)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut port = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut port).unwrap();
        Self { child, port: port.trim().to_owned(), counts }
    }

    fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Requests the server has answered, by path.
    fn requests(&self) -> Vec<String> {
        self.prompts().into_iter().map(|(path, _)| path).collect()
    }

    /// Each request's path and prompt.
    fn prompts(&self) -> Vec<(String, String)> {
        std::fs::read_to_string(self.counts.path())
            .unwrap()
            .lines()
            .map(|l| {
                let (path, prompt) = l.split_once('\t').unwrap();
                (path.to_owned(), serde_json::from_str::<String>(prompt).unwrap_or_default())
            })
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn pipeline(origin: &str, provider: &str, method: &str) -> String {
    format!(
        "name: ll\nmodels:\n  - {{id: base, provider: {provider}, model: toy-base, base_url: \"{origin}/v1\"}}\ntasks:\n  - benchmark: qa\n    params: {{lm_eval_yaml: task.yaml, method: {method}}}\nseeds: [0]\n"
    )
}

#[test]
fn loglikelihood_scores_every_choice_as_lm_eval_does_and_reruns_from_the_cache() {
    let server = Server::start("echo");
    let ws = Workspace::new();
    ws.write("mc.jsonl", ROWS);
    ws.write("task.yaml", TASK);
    ws.write("p.yaml", &pipeline(&server.origin(), "openai", "loglikelihood"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let sent = server.requests();
    assert_eq!(sent.len(), 40, "one prompt-scoring call per choice: {sent:?}");
    assert!(sent.iter().all(|p| p == "/v1/completions"), "{sent:?}");
    let rows = items_csv(&ws, "ll");
    assert_eq!(rows.len(), 10);
    let col = |c: &str| rows.iter().map(|r| r[c].parse::<f64>().unwrap()).collect::<Vec<_>>();
    let (acc, acc_norm) = (col("acc"), col("acc_norm"));
    // What the toy model's formula gives (tests/it/completions_server.py), worked out apart
    // in Python; lm-eval below computes them again through its own client.
    assert_eq!(acc, [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0], "acc");
    assert_eq!(acc_norm, [1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0], "acc_norm");

    let out = Command::new("python3")
        .arg(repo().join("tests/it/qa_loglikelihood.py"))
        .arg(ws.path("task.yaml"))
        .arg(server.origin())
        .current_dir(ws.path("."))
        .output()
        .expect("python3 runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.starts_with("SKIPPED") {
        eprintln!(
            "SKIPPED: the lm-eval comparison needs lm-eval (python3 -m pip install --no-deps lm-eval && python3 -m pip install datasets sacrebleu): {stdout}"
        );
    } else {
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let theirs: Vec<serde_json::Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(theirs.len(), rows.len());
        for (i, t) in theirs.iter().enumerate() {
            assert_eq!(acc[i], t["acc"].as_f64().unwrap(), "acc of item {i}: lm-eval {t}");
            assert_eq!(acc_norm[i], t["acc_norm"].as_f64().unwrap(), "acc_norm of item {i}: lm-eval {t}");
        }
        assert_eq!(server.requests().len(), 80, "lm-eval sent the same 40 requests");
        eprintln!("lm-eval agrees on acc {acc:?} and acc_norm {acc_norm:?}");
    }

    // `check` asks the completions endpoint for an echoed prompt (the only endpoint these
    // tasks use: the server has no chat route).
    let (code, c) = ws.run_json(&["check", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{c}");
    assert!(c["endpoints"][0]["logprobs"].as_str().unwrap().starts_with("loglikelihood ("), "{c}");
    assert!(c["endpoints"][0]["url"].as_str().unwrap().ends_with("/v1/completions"), "{c}");

    // The same pipeline again is answered from the cache: no call.
    let before = server.requests().len();
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_run"].as_u64()), (0, Some(0)), "{v}");
    assert_eq!(server.requests().len(), before);
    // Each choice's call is keyed by its own prompt: editing one choice asks that one again,
    // and editing a target asks nothing.
    ws.write("mc.jsonl", &ROWS.replace("\"Marlowe\"", "\"Christopher Marlowe\"").replace("\"label\": 2}", "\"label\": 1}"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let after = server.prompts();
    assert_eq!(after.len(), before + 1, "one new call: {:?}", &after[before..]);
    assert!(after[before].1.ends_with(" Christopher Marlowe"), "{:?}", after[before]);
}

#[test]
fn an_endpoint_that_cannot_score_prompts_is_refused_before_any_call_and_one_without_echo_fails_the_cell() {
    let server = Server::start("no-echo");
    let ws = Workspace::new();
    ws.write("mc.jsonl", ROWS);
    ws.write("task.yaml", TASK);
    // Anthropic gives no log-probabilities: exit 2 at validate and at run, nothing sent.
    ws.write("a.yaml", &pipeline(&server.origin(), "anthropic", "loglikelihood"));
    for cmd in [&["validate", "a.yaml"][..], &["run", "a.yaml"]] {
        let out = ws.run(cmd);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {stderr}");
        assert!(stderr.contains("method: loglikelihood"), "{stderr}");
    }
    // An unknown method is a located error.
    ws.write("bad.yaml", &pipeline(&server.origin(), "openai", "perplexity"));
    let out = ws.run(&["validate", "bad.yaml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`method` must be logprobs"), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(server.requests().is_empty(), "nothing sent before a refusal");
    // A server that ignores `echo` answers without the prompt's log-probabilities: `check`
    // says so, and the cell fails with that reason, never a column of zeros.
    ws.write("p.yaml", &pipeline(&server.origin(), "openai", "loglikelihood"));
    let (code, c) = ws.run_json(&["check", "p.yaml", "--json"]);
    assert_eq!(code, 1, "{c}");
    assert_eq!(c["endpoints"][0]["logprobs"], "NO: answered without them", "{c}");
    let before = server.requests().len();
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_ne!(code, 0, "{v}");
    assert_eq!(v["cells_failed"].as_u64(), Some(1), "{v}");
    assert!(v.to_string().contains("without the prompt's token log-probabilities"), "{v}");
    assert!(!ws.path("reports/ll/items.csv").exists() || items_csv(&ws, "ll").is_empty(), "no scores from a failed cell");
    assert!(server.requests().len() > before);
}

/// A `qa` dataset scored both ways, by two entries over the same file: `choice: {method:
/// loglikelihood}` scores the letters after the lettered prompt, `acc`/`acc_norm` the choices'
/// texts; each entry keeps its own scorers (two entries over one dataset once shared one).
#[test]
fn a_qa_dataset_scores_letters_or_texts_by_their_continuations() {
    let server = Server::start("echo");
    let ws = Workspace::new();
    ws.write(
        "data.jsonl",
        "{\"id\": \"q1\", \"input\": \"Capital of France? Hint: Paris\", \"choices\": [\"Paris\", \"Lyon\", \"Marseille\"], \"target\": \"A\"}\n{\"id\": \"q2\", \"input\": \"Who wrote Hamlet? Hint: Shakespeare\", \"choices\": [\"Marlowe\", \"William Shakespeare\", \"Kyd\"], \"target\": \"B\"}\n",
    );
    ws.write(
        "p.yaml",
        &format!(
            "name: q\nmodels:\n  - {{id: base, provider: openai, model: toy, base_url: \"{}/v1\"}}\n  - {{id: oracle, provider: builtin, model: oracle}}\ntasks:\n  - benchmark: qa\n    params: {{name: letters, dataset: data.jsonl, scorers: [{{choice: {{method: loglikelihood}}}}]}}\n  - benchmark: qa\n    params: {{name: texts, dataset: data.jsonl, scorers: [{{acc: {{method: loglikelihood}}}}, {{acc_norm: {{method: loglikelihood}}}}]}}\nseeds: [0]\n",
            server.origin()
        ),
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let prompts = server.prompts();
    assert_eq!(prompts.len(), 12, "three continuations per item and task: {prompts:?}");
    for (ending, n) in [(" A", 2), (" B", 2), (" C", 2), (" Paris", 1), (" William Shakespeare", 1), (" Kyd", 1)] {
        assert_eq!(prompts.iter().filter(|(_, p)| p.ends_with(ending)).count(), n, "continuation {ending:?}: {prompts:?}");
    }
    // Letters follow the lettered prompt; texts follow the question as the template gives it.
    let lettered = prompts.iter().filter(|(_, p)| p.contains("\nA) ") && p.contains("\nAnswer:")).count();
    assert_eq!(lettered, 6, "{prompts:?}");
    let rows = items_csv(&ws, "q");
    let value = |model: &str, task: &str, item: &str, col: &str| {
        rows.iter().find(|r| r["model"] == model && r["task"] == task && r["item"] == item).map(|r| r[col].clone()).unwrap()
    };
    for item in ["q1", "q2"] {
        assert_eq!(value("oracle", "letters", item, "choice"), "1.0");
        assert_eq!(value("oracle", "texts", item, "acc_norm"), "1.0");
        assert_eq!(value("base", "letters", item, "acc"), "", "the letters task has no acc column value");
    }
    // A built-in agent's answer is its pick as scored, as a model's is: the choice's text.
    let shown = String::from_utf8_lossy(&ws.run(&["show", "p.yaml", "oracle/qa/texts/0"]).stdout).into_owned();
    assert!(shown.contains("| Paris\n") && shown.contains("| William Shakespeare\n"), "{shown}");
    // The hint is copied: Paris is likeliest by both measures; Shakespeare's two words lose
    // on the sum and win per character.
    assert_eq!(value("base", "texts", "q1", "acc"), "1.0");
    assert_eq!((value("base", "texts", "q2", "acc").as_str(), value("base", "texts", "q2", "acc_norm").as_str()), ("0.0", "1.0"));
}
