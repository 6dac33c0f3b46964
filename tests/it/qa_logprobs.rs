//! `choice: {method: logprobs}` and `acc`/`acc_norm` against the mock server answering in
//! OpenAI's and Gemini's recorded `logprobs` shapes: the request asks for one token and its
//! top alternatives, the pick is the likeliest letter, the alternatives are cached with the
//! answer (a target edit rescoring from the cache makes no call), and an endpoint that gives
//! none (Anthropic) or a server that answers without them is an error, never zeros.

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};

use evalgrid::providers::ProviderKind;

use crate::providers::Mock;
use crate::support::Workspace;

const ROWS: &str = concat!(
    "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"choices\": [\"Berlin\", \"Paris\", \"Rome\"], \"target\": \"B\"}\n",
    "{\"id\": \"jp\", \"input\": \"Capital of Japan?\", \"choices\": [\"Tokyo\", \"Kyoto\", \"Osaka\"], \"target\": \"A\"}\n",
    "{\"id\": \"it\", \"input\": \"Capital of Italy?\", \"choices\": [\"Milan\", \"Turin\", \"Rome\"], \"target\": \"C\"}\n",
);

/// A recorded Chat Completions answer with `logprobs.content[0].top_logprobs` (OpenAI's shape):
/// France: `B` likeliest; Japan: `" B"` likeliest (wrong), Italy: no letter among them.
fn reply(req: &MockRequest) -> MockOutcome {
    if req.protocol == ProviderKind::Gemini {
        return gemini_reply(req);
    }
    let top = if req.last_user.contains("France") {
        r#"[{"token":"B","logprob":-0.2,"bytes":[66]},{"token":"A","logprob":-1.9,"bytes":[65]},{"token":" C","logprob":-3.5,"bytes":[32,67]}]"#
    } else if req.last_user.contains("Japan") {
        r#"[{"token":" B","logprob":-0.5,"bytes":[32,66]},{"token":"A","logprob":-0.9,"bytes":[65]},{"token":"B","logprob":-2.0,"bytes":[66]}]"#
    } else if req.last_user.contains("Which letter comes first") {
        r#"[{"token":"A","logprob":-0.01,"bytes":[65]},{"token":"B","logprob":-5.0,"bytes":[66]}]"#
    } else if req.last_user.contains("Italy") {
        r#"[{"token":"The","logprob":-0.1,"bytes":[84,104,101]},{"token":"\n","logprob":-2.5,"bytes":[10]}]"#
    } else {
        return MockOutcome::Recorded {
            status: 200,
            body: r#"{"id":"c","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"B"},"finish_reason":"length"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}"#.into(),
        };
    };
    let first = if req.last_user.contains("Italy") { "The" } else { "B" };
    MockOutcome::Recorded {
        status: 200,
        body: format!(
            r#"{{"id":"c","object":"chat.completion","model":"{}","choices":[{{"index":0,"message":{{"role":"assistant","content":"{first}"}},"logprobs":{{"content":[{{"token":"{first}","logprob":-0.2,"bytes":[],"top_logprobs":{top}}}],"refusal":null}},"finish_reason":"length"}}],"usage":{{"prompt_tokens":20,"completion_tokens":1,"total_tokens":21}}}}"#,
            req.model
        ),
    }
}

/// Gemini's recorded shape (`logprobsResult.topCandidates[0].candidates`): France `B`, Japan `C`.
fn gemini_reply(req: &MockRequest) -> MockOutcome {
    let (first, second) = if req.last_user.contains("France") { ("B", "A") } else { ("C", "B") };
    let body = format!(
        r#"{{"candidates":[{{"content":{{"parts":[{{"text":"{first}"}}],"role":"model"}},"finishReason":"MAX_TOKENS","avgLogprobs":-0.3,
        "logprobsResult":{{"topCandidates":[{{"candidates":[{{"token":"{first}","tokenId":1,"logProbability":-0.3}},{{"token":"{second}","tokenId":2,"logProbability":-1.6}}]}}],
        "chosenCandidates":[{{"token":"{first}","tokenId":1,"logProbability":-0.3}}]}}}}],
        "usageMetadata":{{"promptTokenCount":20,"candidatesTokenCount":1,"totalTokenCount":21}},"modelVersion":"gemini-2.0-flash"}}"#
    );
    MockOutcome::Recorded { status: 200, body }
}

fn pipeline(ws: &Workspace, models: &str, scorers: &str) {
    ws.write(
        "p.yaml",
        &format!("name: lp\nmodels:\n{models}tasks:\n  - benchmark: qa\n    params:\n      dataset: d.jsonl\n      scorers: {scorers}\nseeds: [0]\n"),
    );
}

fn column(items: &str, name: &str) -> Vec<String> {
    let header: Vec<&str> = items.lines().next().unwrap().split(',').collect();
    let i = header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("no column {name}: {items}"));
    items.lines().skip(1).map(|l| l.split(',').nth(i).unwrap().to_owned()).collect()
}

#[test]
fn the_likeliest_letter_is_scored_and_cached_with_the_answer() {
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    let model = format!("  - {{id: base, provider: openai, model: base-model, base_url: \"{}\", params: {{max_tokens: 512, temperature: 0.7}}}}\n", mock.url());
    pipeline(&ws, &model, "[{choice: {method: logprobs}}, acc, acc_norm]");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls(), 3);
    // The body asks for one greedy token and its top 20 alternatives, whatever the model's params.
    let log = mock.server().request_log();
    let body = &log.iter().find(|r| r.body.to_string().contains("France")).unwrap().body;
    assert_eq!((body["logprobs"].as_bool(), body["top_logprobs"].as_u64(), body["max_tokens"].as_u64()), (Some(true), Some(20), Some(1)), "{body}");
    assert_eq!(body["temperature"].as_f64(), Some(0.0), "{body}");
    let prompt = body["messages"][0]["content"].as_str().unwrap();
    assert_eq!(prompt, "Capital of France?\n\nA) Berlin\nB) Paris\nC) Rome\nAnswer:");
    let items = std::fs::read_to_string(ws.path("reports/lp/items.csv")).unwrap();
    // fr: B right; jp: " B" (trimmed: B) beats A, wrong; it: no letter among the alternatives.
    assert_eq!(column(&items, "choice"), ["1.0", "0.0", "0.0"], "{items}");
    // `acc` reads the choice texts, none of which is a token here: every log-likelihood is
    // -inf and lm-eval's argmax takes the first choice (jp's `Tokyo`, right).
    assert_eq!(column(&items, "acc"), ["0.0", "1.0", "0.0"], "{items}");
    assert_eq!(column(&items, "acc_norm"), ["0.0", "1.0", "0.0"], "{items}");

    // The alternatives are part of the cached answer: a target edit is rescored with no call.
    ws.write("d.jsonl", &ROWS.replace("\"target\": \"A\"", "\"target\": \"B\""));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls(), 3, "rescored from the cache: {v}");
    let items = std::fs::read_to_string(ws.path("reports/lp/items.csv")).unwrap();
    assert_eq!(column(&items, "choice"), ["1.0", "1.0", "0.0"], "{items}");
}

#[test]
fn an_answer_without_logprobs_fails_its_cell_instead_of_scoring_zero() {
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("d.jsonl", "{\"input\": \"Capital of Spain?\", \"choices\": [\"Madrid\", \"Rome\"], \"target\": \"A\"}\n");
    pipeline(&ws, &format!("  - {{id: base, provider: openai, model: m, base_url: \"{}\"}}\n", mock.url()), "[{choice: {method: logprobs}}]");
    let out = ws.run(&["run", "p.yaml"]);
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_ne!(out.status.code(), Some(0), "{text}");
    assert!(text.contains("without log-probabilities"), "{text}");
}

#[test]
fn endpoints_without_logprobs_are_refused_before_any_call() {
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    let models = format!(
        "  - {{id: claude, provider: anthropic, model: claude-x, base_url: \"{0}\"}}\n  - {{id: resp, provider: openai, api: responses, model: gpt-x, base_url: \"{0}\"}}\n  - {{id: oracle, provider: builtin, model: oracle}}\n",
        mock.url()
    );
    pipeline(&ws, &models, "[{choice: {method: logprobs}}]");
    for command in ["validate", "run"] {
        let out = ws.run(&[command, "p.yaml"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{command}: {err}");
        assert!(err.contains("model `claude` cannot play task `qa/d`") && err.contains("`anthropic` protocol"), "{err}");
        assert!(err.contains("model `resp` cannot play task `qa/d`"), "{err}");
        assert!(err.contains("p.yaml:3:"), "located at the model's provider: {err}");
        assert!(!err.contains("`oracle` cannot"), "{err}");
    }
    assert_eq!(mock.server().calls(), 0);
    // `method: loglikelihood` (each option's continuation scored from the prompt's own token
    // log-probabilities) needs an OpenAI-compatible completions endpoint: Anthropic is
    // refused, an `openai` entry may play it (tests/it/qa_loglikelihood.rs runs it).
    let llama = format!(
        "  - {{id: claude, provider: anthropic, model: claude-x, base_url: \"{0}\"}}\n  - {{id: llama, provider: openai, model: smollm2, base_url: \"{0}\"}}\n",
        mock.url()
    );
    pipeline(&ws, &llama, "[{choice: {method: loglikelihood}}]");
    let out = ws.run(&["run", "p.yaml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("model `claude` cannot play task `qa/d`") && err.contains("method: loglikelihood"), "{err}");
    assert!(!err.contains("model `llama` cannot"), "{err}");
    assert_eq!(mock.server().calls(), 0);
    // Excluding the pair makes the rest runnable; the oracle scores every item.
    pipeline(&ws, &format!("{models}exclude:\n  - {{model: claude}}\n  - {{model: resp}}\n"), "[{choice: {method: logprobs}}, acc, acc_norm]");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let items = std::fs::read_to_string(ws.path("reports/lp/items.csv")).unwrap();
    assert_eq!(column(&items, "choice"), ["1.0", "1.0", "1.0"], "{items}");
    assert_eq!(column(&items, "acc_norm"), ["1.0", "1.0", "1.0"], "{items}");
    // A streamed answer would lose them: `stream: true` is refused too.
    pipeline(&ws, &format!("  - {{id: streamed, provider: openai, model: m, base_url: \"{}\", stream: true}}\n", mock.url()), "[{choice: {method: logprobs}}]");
    let out = ws.run(&["validate", "p.yaml"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not read from streamed answers"), "{}", String::from_utf8_lossy(&out.stderr));
    // A text scorer beside them is refused: the items are asked for one token only.
    pipeline(&ws, "  - {id: oracle, provider: builtin, model: oracle}\n", "[{choice: {method: logprobs}}, match]");
    let out = ws.run(&["validate", "p.yaml"]);
    assert!(String::from_utf8_lossy(&out.stderr).contains("scorer `match` reads a generated answer"), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn check_probes_the_next_token_logprobs_a_task_reads() {
    let ws = Workspace::new();
    ws.write("d.jsonl", ROWS);
    let giving = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let plain = Mock::start(MockConfig { script: Script::function(|_| MockOutcome::Reply(MockReply::text("OK"))), ..MockConfig::default() });
    let models = format!(
        "  - {{id: gives, provider: openai, model: m, base_url: \"{}\"}}\n  - {{id: plain, provider: openai, model: m, base_url: \"{}\"}}\n",
        giving.url(),
        plain.url()
    );
    pipeline(&ws, &models, "[{choice: {method: logprobs}}]");
    let (code, v) = ws.run_json(&["check", "p.yaml", "--json"]);
    assert_eq!(code, 1, "{v}");
    let endpoint = |id: &str| v["endpoints"].as_array().unwrap().iter().find(|e| e["model"] == id).cloned().unwrap();
    assert_eq!(endpoint("gives")["logprobs"], "next-token (top 2)", "{v}");
    assert!(endpoint("gives")["problems"].as_array().unwrap().is_empty(), "{v}");
    assert_eq!(endpoint("plain")["logprobs"], "NO: answered without them", "{v}");
    assert!(endpoint("plain")["problems"].to_string().contains("without log-probabilities"), "{v}");
    // The table says which servers give which, plainly.
    let out = ws.run(&["check", "p.yaml"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("| logprobs |") && text.contains("Anthropic gives none") && text.contains("ggml-org/llama.cpp#27174"), "{text}");
    // Without a task reading them, nothing is probed: the column says what the protocol can do.
    pipeline(&ws, &models, "[choice]");
    let (_, v) = ws.run_json(&["check", "p.yaml", "--json"]);
    assert_eq!(v["endpoints"][0]["logprobs"], "next-token (not probed)", "{v}");
}

#[test]
fn gemini_gives_its_top_candidates_under_its_own_fields() {
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("d.jsonl", &ROWS.lines().take(2).map(|l| format!("{l}\n")).collect::<String>());
    let base = mock.server().base_url().trim_end_matches('/').to_owned();
    pipeline(&ws, &format!("  - {{id: gem, provider: gemini, model: gemini-2.0-flash, base_url: \"{base}\"}}\n"), "[{choice: {method: logprobs}}]");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let body = &mock.server().request_log()[0].body;
    let config = &body["generationConfig"];
    assert_eq!(
        (config["responseLogprobs"].as_bool(), config["logprobs"].as_u64(), config["maxOutputTokens"].as_u64()),
        (Some(true), Some(20), Some(1)),
        "{body}"
    );
    let items = std::fs::read_to_string(ws.path("reports/lp/items.csv")).unwrap();
    // France: B (right); Japan: C (wrong, A is right).
    assert_eq!(column(&items, "choice"), ["1.0", "0.0"], "{items}");
}
