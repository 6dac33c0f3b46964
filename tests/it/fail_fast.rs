//! Issue 23: a failure every call of a model would hit stops that model's calls within the
//! first few requests (its cells fail with the reason, other models go on), and a local
//! server that names the model file it serves (llama.cpp answers with the GGUF path) is
//! that model: its answers are cached and scored, and the path is in the provenance.

use evalgrid::providers::mock::{Fault, MockConfig, MockOutcome, MockReply, MockRequest, Script};
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// A web_of_lies prompt (its items ask who tells the truth and who lies).
fn web_of_lies(req: &MockRequest) -> bool {
    req.last_user.to_lowercase().contains("truth") && req.last_user.contains("ies")
}

/// Model `missing` does not exist on the server (404), `gateway` is answered by another model,
/// `local` by a server naming its GGUF file, `strict` is refused every request alike (a
/// parameter its server does not take), `picky` is refused every web_of_lies prompt at once and
/// answers the others slowly, and `m` answers.
fn server(req: &MockRequest) -> MockOutcome {
    match req.model.as_str() {
        "strict" => MockOutcome::Fault(Fault::Status { status: 400, message: "Unsupported parameter: 'max_tokens'".into() }),
        "picky" if web_of_lies(req) => MockOutcome::Fault(Fault::Status { status: 400, message: "prompt rejected".into() }),
        "picky" => MockOutcome::Fault(Fault::Slow(std::time::Duration::from_millis(300))),
        "missing" => MockOutcome::Fault(Fault::Status { status: 404, message: "The model `missing` does not exist".into() }),
        "gateway" => MockOutcome::Reply(MockReply::text("The answer is: (A)").with_model("someone-else")),
        "local" => MockOutcome::Reply(MockReply::text("The answer is: (A)").with_model("/home/me/models/SmolLM2-135M-Instruct.Q4_1.gguf")),
        _ => MockOutcome::Reply(MockReply::text("The answer is: (A)")),
    }
}

/// 60 BBEH items per model, 4 calls in flight per model.
fn pipeline(url: &str, models: &[&str]) -> String {
    let models: String = models.iter().map(|m| format!("  - {{id: {m}, provider: openai, model: {m}, base_url: \"{url}\"}}\n")).collect();
    format!(
        "name: lanes\nmodels:\n{models}tasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 2, retry_base_ms: 5, retry_max_ms: 20, max_concurrency: 4}}\n"
    )
}

fn run(ws: &Workspace) -> (i32, Value, String) {
    let out = ws.cmd().args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"]).output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
}

fn sent_for(mock: &Mock, model: &str) -> usize {
    mock.server().request_log().iter().filter(|r| r.body["model"] == model).count()
}

#[test]
fn a_failure_every_call_would_hit_stops_that_models_calls_and_others_go_on() {
    let mock = Mock::start(MockConfig { script: Script::function(server), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url(), &["m", "missing", "gateway"]));
    let (code, v, stderr) = run(&ws);
    assert_eq!((code, v["cells_failed"].as_u64()), (1, Some(6)), "the cells of `missing` and `gateway` fail, `m`'s are scored: {v}\n{stderr}");
    assert_eq!(sent_for(&mock, "m"), 60, "the other model goes on");
    // Both stopped within the first few requests (4 in flight, 2 attempts for a retried error),
    // instead of after all 60 items each.
    let (missing, gateway) = (sent_for(&mock, "missing"), sent_for(&mock, "gateway"));
    assert!(missing <= 12 && gateway <= 12, "missing sent {missing}, gateway sent {gateway}");
    assert!(stderr.contains("error: model `missing`") && stderr.contains("error: model `gateway`"), "said once per model: {stderr}");
    assert!(stderr.contains("evalgrid check"), "points to the endpoint check: {stderr}");
    let failures = v["failures"].to_string();
    assert!(failures.contains("does not exist") && failures.contains("accept_other_model"), "each cell says why: {failures}");
    // Nothing of `m` is asked again, and the failed models are tried again with --retry-errors.
    let before = sent_for(&mock, "m");
    let out = ws.cmd().args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json", "--retry-errors"]).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(sent_for(&mock, "m"), before);
}

#[test]
fn rejections_alike_stop_a_refused_parameter_but_not_the_other_tasks_of_a_model_refused_one_task() {
    let mock = Mock::start(MockConfig { script: Script::function(server), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url(), &["strict", "m"]));
    let (code, v, stderr) = run(&ws);
    assert_eq!((code, v["cells_failed"].as_u64()), (1, Some(3)), "strict's cells fail, m's are scored: {v}\n{stderr}");
    assert!(v["failures"].to_string().contains("Unsupported parameter"), "{v}");
    let strict = sent_for(&mock, "strict");
    assert!(strict <= 12, "strict stopped within the first few requests, sent {strict}");
    assert!(stderr.contains("error: model `strict`"), "{stderr}");

    // With the default (adaptive) concurrency every item of picky's three cells is out at once:
    // its 20 web_of_lies rejections come back before its first answer, while the other cells
    // wait for theirs. They are that task's, not the lane's.
    let ws = Workspace::new();
    let default_transport = pipeline(&mock.url(), &["picky"]).replace(", max_concurrency: 4", "");
    ws.write("p.yaml", &default_transport);
    let (code, v, stderr) = run(&ws);
    assert_eq!((code, v["cells_failed"].as_u64()), (1, Some(1)), "only picky's web_of_lies cell fails: {v}\n{stderr}");
    assert!(v["failures"].to_string().contains("web_of_lies"), "{v}");
    assert_eq!(sent_for(&mock, "picky"), 60, "every item of picky was asked");
    assert!(!stderr.contains("error: model `picky`"), "{stderr}");
}

#[test]
fn a_local_server_naming_its_model_file_is_that_model() {
    let mock = Mock::start(MockConfig { script: Script::function(server), ..MockConfig::default() });
    let ws = Workspace::new();
    // The mock listens on 127.0.0.1: a loopback server, like a llama.cpp server on this machine.
    assert!(mock.url().starts_with("http://127.0.0.1:"), "{}", mock.url());
    ws.write("p.yaml", &pipeline(&mock.url(), &["local"]));
    let (code, v, stderr) = run(&ws);
    assert_eq!((code, v["cells_failed"].as_u64()), (0, Some(0)), "{v}\n{stderr}");
    assert_eq!(v["calls"]["answered_by_other_model"], 0, "a served file is not another model: {v}");
    let html = std::fs::read_to_string(ws.path("reports/lanes/index.html")).unwrap();
    assert!(html.contains("SmolLM2-135M-Instruct.Q4_1.gguf"), "the file is in the provenance");
    let before = mock.server().calls();
    let (code, _, _) = run(&ws);
    assert_eq!((code, mock.server().calls()), (0, before), "cached");
}

/// A server that answers every request with HTTP 200 and a Chat Completions stream whose
/// only event is an `error` saying the key is invalid (as OpenAI-compatible gateways do),
/// written by hand rather than with the mock; it counts the requests it reads.
fn invalid_key_stream_server() -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = std::sync::Arc::clone(&count);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = std::sync::Arc::clone(&seen);
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let (mut line, mut length) = (String::new(), 0usize);
                    while reader.read_line(&mut line).is_ok_and(|n| n > 0) {
                        if line == "\r\n" {
                            break;
                        }
                        if let Some(value) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = value.trim().parse().unwrap_or(0);
                        }
                        line.clear();
                    }
                    if line != "\r\n" {
                        return;
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let event = "data: {\"error\":{\"message\":\"Incorrect API key provided: sk-bad.\",\"type\":\"invalid_request_error\",\"code\":\"invalid_api_key\"}}\n\n";
                    let response = format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\n\r\n{event}", event.len());
                    if reader.get_mut().write_all(response.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, count)
}

#[test]
fn an_error_event_saying_the_key_is_invalid_stops_the_model_instead_of_being_retried() {
    let (url, requests) = invalid_key_stream_server();
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: badkey\nmodels:\n  - {{id: m, provider: openai, model: m, base_url: \"{url}\", stream: true}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 4, retry_base_ms: 5, retry_max_ms: 20, max_concurrency: 4}}\n"
        ),
    );
    let (code, v, stderr) = run(&ws);
    assert_eq!(code, 1, "{v}\n{stderr}");
    let sent = requests.load(std::sync::atomic::Ordering::SeqCst);
    // 20 items, 4 attempts each if it were retried (80); stopped at the first refusal, with at
    // most the 4 in flight then, each sent once.
    assert!(sent <= 4, "{sent} requests for 20 items\n{stderr}");
    assert!(v["failures"].to_string().contains("auth"), "the cell says the key was refused: {v}");
    assert!(stderr.contains("error: model `m`"), "{stderr}");
}
