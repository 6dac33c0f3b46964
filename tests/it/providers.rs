//! Model providers end to end: BBEH pipelines against the mock server on
//! 127.0.0.1, with injected faults, kills, offline replay and secret keys.

use std::collections::HashSet;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use evalgrid::providers::mock::{Fault, FaultPlan, MockConfig, MockOutcome, MockReply, MockServer, RetryHeader, Script};
use serde_json::Value;

use crate::support::{Workspace, repo};

/// BBEH data installed once for the whole test binary.
pub(crate) fn data_dir() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let shared = repo().join("../shared/data/bbeh");
        let out = assert_cmd::Command::cargo_bin("evalgrid")
            .unwrap()
            .args(["--data-dir"])
            .arg(dir.path())
            .args(["datasets", "fetch", "bbeh", "--from"])
            .arg(&shared)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        dir
    })
    .path()
}

pub(crate) struct Mock {
    runtime: tokio::runtime::Runtime,
    server: Option<MockServer>,
}

impl Mock {
    pub(crate) fn start(config: MockConfig) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let server = runtime.block_on(MockServer::start(config)).unwrap();
        Self { runtime, server: Some(server) }
    }
    pub(crate) fn server(&self) -> &MockServer {
        self.server.as_ref().unwrap()
    }
    pub(crate) fn url(&self) -> String {
        format!("{}/v1", self.server().base_url().trim_end_matches('/'))
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        if let Some(s) = self.server.take() {
            self.runtime.block_on(s.shutdown());
        }
    }
}

/// Three BBEH Mini tasks (60 items) per model; fast retries for tests.
fn pipeline(models: &str) -> String {
    format!(
        "name: bbeh-mock\nmodels:\n{models}tasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 4, retry_base_ms: 5, retry_max_ms: 20, request_timeout_s: 2, max_concurrency: 16}}\n"
    )
}

fn model(id: &str, model: &str, url: &str) -> String {
    format!("  - {{id: {id}, provider: openai, model: {model}, base_url: \"{url}\", params: {{temperature: 0}}}}\n")
}

fn run(ws: &Workspace, args: &[&str]) -> (i32, Value) {
    let mut full = vec!["--data-dir", data_dir().to_str().unwrap()];
    full.extend_from_slice(args);
    ws.run_json(&full)
}

/// Request bodies of every cached call in a workspace's cache.
pub(crate) fn cached_call_bodies(cache: &Path) -> HashSet<String> {
    // Entries are renamed into place whole, so every file read is complete.
    let mut out = HashSet::new();
    let mut stack = vec![cache.join("v1/steps")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let Ok(bytes) = std::fs::read(&p) else { continue };
            let Some(newline) = bytes.iter().position(|b| *b == b'\n') else { continue };
            let Ok(v) = serde_json::from_slice::<Value>(&bytes[newline + 1..]) else { continue };
            if v["kind"] == "call" {
                out.insert(v["components"]["inputs"]["request"]["body"].to_string());
            }
        }
    }
    out
}

#[test]
fn ten_percent_faults_then_retry_errors_finishes_and_no_error_is_cached() {
    let mix = vec![
        Fault::RateLimited(RetryHeader::Millis(5)),
        Fault::ServerError,
        Fault::Unavailable(RetryHeader::None),
        Fault::OverloadedIn200,
        Fault::TruncatedJson,
        Fault::Disconnect,
        Fault::Status { status: 400, message: "mock bad request".into() },
    ];
    let mock = Mock::start(MockConfig { faults: FaultPlan::rate(0.10, mix, 7), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&model("m", "mock-1", &mock.url())));
    let (_, dry) = run(&ws, &["run", "p.yaml", "--json", "--dry-run"]);
    assert_eq!(dry["model_calls_to_make"], 60, "{dry}");
    let (code, v) = run(&ws, &["run", "p.yaml", "--json", "--jobs", "3"]);
    let failed = v["cells_failed"].as_u64().unwrap();
    let run_ok = v["cells_run"].as_u64().unwrap();
    assert_eq!(run_ok + failed, 3, "{v}");
    // Non-retryable 400s make some items fail for good in this run.
    assert!(failed >= 1, "expected a failed cell from injected 400s: {v}");
    assert_eq!(code, 1);
    for f in v["failures"].as_array().unwrap() {
        let e = f["error"].as_str().unwrap();
        assert!(e.contains("bad_request") || e.contains("error after"), "cause is recorded: {e}");
    }
    // Errors are never cached as answers.
    let cache = ws.path("cache");
    let stdout = String::from_utf8(ws.cmd().args(["cache", "stats", "--json"]).output().unwrap().stdout).unwrap();
    assert!(stdout.contains("\"call\""), "{stdout}");
    for body in cached_call_bodies(&cache) {
        assert!(!body.contains("mock bad request"));
    }
    let grep = std::process::Command::new("grep").args(["-rl", "mock bad request"]).arg(cache.join("v1/steps")).output().unwrap();
    assert!(grep.stdout.is_empty(), "error text found in cached entries: {}", String::from_utf8_lossy(&grep.stdout));

    // Faults stop; only failed cells are retried, finished calls are replayed.
    mock.server().set_faults(FaultPlan::default());
    let before = mock.server().calls();
    let (code, v) = run(&ws, &["run", "p.yaml", "--json", "--retry-errors"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_failed"], 0);
    assert_eq!(v["cells_run"].as_u64().unwrap(), failed);
    assert!(v["calls"]["cached"].as_u64().unwrap() > 0, "answered items are replayed: {v}");
    assert!(mock.server().calls() - before < 60, "only the missing items are asked again");
    let (_, v) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(v["cells_cached"], 3);
    let (_, dry) = run(&ws, &["run", "p.yaml", "--json", "--dry-run"]);
    assert_eq!(dry["model_calls_to_make"], 0, "{dry}");
}

#[test]
fn kill_9_then_rerun_never_requests_a_finished_call_again() {
    let mock = Mock::start(MockConfig { latency: Duration::from_millis(150), ..MockConfig::default() });
    let ws = Workspace::new();
    let yaml = pipeline(&model("m", "mock-1", &mock.url())).replace("max_concurrency: 16", "max_concurrency: 2");
    ws.write("p.yaml", &yaml);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
        .current_dir(ws.dir.path())
        .args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"])
        .env("EVALGRID_NO_PROGRESS", "1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // 60 calls, 2 at a time, 150 ms each: ~4.5 s. Kill once a few calls
    // have landed, whatever the machine's load.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while cached_call_bodies(&ws.path("cache")).len() < 6 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let finished = cached_call_bodies(&ws.path("cache"));
    assert!(!finished.is_empty() && finished.len() < 60, "kill should land mid-run: {} cached", finished.len());
    let seen_before = mock.server().request_log().len();
    let (code, v) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let log = mock.server().request_log();
    for req in &log[seen_before..] {
        assert!(!finished.contains(&req.body.to_string()), "a finished call was requested again");
    }
    assert_eq!(log.len() - seen_before + finished.len(), 60, "every other call made exactly once");
}

#[test]
fn different_model_or_base_url_never_share_cache_entries() {
    let mock = Mock::start(MockConfig::default());
    let ws = Workspace::new();
    let url = mock.url();
    let other_url = url.replace("127.0.0.1", "localhost");
    let models = format!("{}{}{}", model("a", "mock-1", &url), model("b", "mock-2", &url), model("c", "mock-1", &other_url));
    ws.write("p.yaml", &pipeline(&models));
    let (code, v) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls(), 180, "each model asked every item itself");
    assert_eq!(v["calls"]["cached"], 0);
    // Offline replay: everything from the cache, nothing over HTTP.
    std::fs::remove_dir_all(ws.path("cache/v1/steps")).ok();
    let (code, _) = run(&ws, &["run", "p.yaml", "--json", "--offline"]);
    assert_eq!(code, 1, "an empty cache cannot serve --offline");
    let (code, v) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let calls = mock.server().calls();
    let (code, v) = run(&ws, &["run", "p.yaml", "--json", "--offline"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls(), calls);
}

#[test]
fn api_key_never_reaches_cache_reports_or_output() {
    const KEY: &str = "sk-evalgrid-TEST-7c1f9e0d4b";
    let mock = Mock::start(MockConfig { require_api_key: Some(KEY.into()), ..MockConfig::default() });
    let ws = Workspace::new();
    let m = format!("  - {{id: m, provider: openai, model: mock-1, base_url: \"{}\", api_key_env: EVALGRID_TEST_KEY}}\n", mock.url());
    ws.write("p.yaml", &pipeline(&m));
    let mut outputs = Vec::new();
    for key in [KEY, "sk-wrong-key-0000"] {
        let out = ws.cmd().env("EVALGRID_TEST_KEY", key).args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"]).output().unwrap();
        outputs.push(out);
    }
    assert!(outputs[0].status.success(), "{}", String::from_utf8_lossy(&outputs[0].stdout));
    for out in &outputs {
        for stream in [&out.stdout, &out.stderr] {
            let text = String::from_utf8_lossy(stream);
            assert!(!text.contains(KEY) && !text.contains("sk-wrong-key-0000"), "key printed: {text}");
        }
    }
    let grep = std::process::Command::new("grep").args(["-rlF", KEY]).arg(ws.dir.path()).output().unwrap();
    assert!(grep.stdout.is_empty(), "key found in {}", String::from_utf8_lossy(&grep.stdout));
    let grep = std::process::Command::new("grep").args(["-rlF", "EVALGRID_TEST_KEY"]).arg(ws.path("cache")).output().unwrap();
    assert!(grep.stdout.is_empty(), "even the variable name stays out of the cache");
}

/// Files under a cache area (e.g. `v1/substeps`), recursively.
fn files_under(dir: &Path) -> usize {
    let mut n = 0;
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            if e.path().is_dir() {
                stack.push(e.path());
            } else {
                n += 1;
            }
        }
    }
    n
}

#[test]
fn gc_keep_keeps_every_answered_call_even_of_a_cell_that_failed_half_way() {
    // The very first call gets a non-retryable 400: its cell fails after its
    // other 19 items were answered and cached.
    let bad = Fault::Status { status: 400, message: "mock bad request".into() };
    let mock = Mock::start(MockConfig { faults: FaultPlan::sequence([bad]), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&model("m", "mock-1", &mock.url())));
    ws.write("q.yaml", &pipeline(&model("n", "mock-2", &mock.url())).replace("name: bbeh-mock", "name: other"));
    let (code, v) = run(&ws, &["run", "p.yaml", "--json", "--jobs", "1"]);
    assert_eq!((code, v["cells_failed"].as_u64(), v["cells_run"].as_u64()), (1, Some(1), Some(2)), "{v}");
    let answered = cached_call_bodies(&ws.path("cache"));
    assert_eq!(answered.len(), 59, "every call but the failed one is cached");
    // Another pipeline, not kept.
    let (code, v) = run(&ws, &["run", "q.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(cached_call_bodies(&ws.path("cache")).len(), 119);
    assert_eq!(files_under(&ws.path("cache/v1/substeps")), 6, "one sub-step index per cell");

    let out = ws.run(&["--data-dir", data_dir().to_str().unwrap(), "cache", "gc", "--keep", "p.yaml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let kept = cached_call_bodies(&ws.path("cache"));
    assert!(
        kept == answered,
        "p's calls kept ({} of {}), q's calls removed ({} left)",
        kept.intersection(&answered).count(),
        answered.len(),
        kept.difference(&answered).count()
    );
    assert_eq!(files_under(&ws.path("cache/v1/substeps")), 3, "q's sub-step indexes removed");
    let (_, v) = run(&ws, &["status", "q.yaml", "--json"]);
    assert_eq!((v["cells_total"].as_u64(), v["cells_cached"].as_u64()), (Some(3), Some(0)), "q's cells are gone: {v}");

    // Faults gone: the rerun finishes the failed cell and asks only what was never answered.
    mock.server().set_faults(FaultPlan::default());
    let seen_before = mock.server().request_log().len();
    let (code, v) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!((v["cells_run"].as_u64(), v["cells_cached"].as_u64()), (Some(1), Some(2)), "{v}");
    let log = mock.server().request_log();
    for req in &log[seen_before..] {
        assert!(!answered.contains(&req.body.to_string()), "a call answered before gc was requested again");
    }
    assert_eq!(log.len() - seen_before, 1, "only the failed item is asked again");
}

/// Files under `dir` whose bytes contain `needle`.
fn files_containing(dir: &Path, needle: &str) -> Vec<String> {
    crate::support::snapshot_dir(dir)
        .into_iter()
        .filter(|(_, bytes)| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        .map(|(path, _)| path)
        .collect()
}

/// The model echoes the key in every answer and its reasoning, and the provider quotes it in
/// a 400 message with the key straddling the 300-character cut. The key, or even its first
/// six characters, must appear in no cache entry, failure record, report, transcript or
/// output line; the answers are kept with the key replaced by `[REDACTED]`.
#[test]
fn echoed_key_reaches_no_artifact_or_output() {
    const KEY: &str = "sk-evalgrid-ECHO-5d2b7a91c3e4";
    let quoted = format!("{}{KEY} is not allowed to use this model", "x".repeat(294));
    let mock = Mock::start(MockConfig {
        require_api_key: Some(KEY.into()),
        script: Script::function(|request| {
            MockOutcome::Reply(MockReply {
                reasoning: Some(format!("I was called with {}", request.api_key)),
                ..MockReply::text(format!("My key is {}. The answer is: True", request.api_key))
            })
        }),
        faults: FaultPlan::sequence([Fault::Status { status: 400, message: quoted }]),
        ..MockConfig::default()
    });
    let ws = Workspace::new();
    let m = format!(
        "  - {{id: m, provider: openai, model: mock-1, base_url: \"{}\", api_key_env: EVALGRID_TEST_KEY, params: {{reasoning_effort: low}}}}\n",
        mock.url()
    );
    ws.write("p.yaml", &pipeline(&m));
    let data = data_dir().to_str().unwrap().to_owned();
    let cmd = |args: &[&str]| ws.cmd().env("EVALGRID_TEST_KEY", KEY).args(["--data-dir", &data]).args(args).output().unwrap();
    let run = cmd(&["run", "p.yaml", "--json"]);
    let v: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(v["cells_failed"], 1, "the 400 fails one cell: {v}");
    let error = v["failures"][0]["error"].as_str().unwrap();
    assert!(error.contains("bad_request") && error.contains("x[RED"), "redacted, then cut: {error}");
    let records = files_containing(&ws.path("cache/v1/failures"), "x[RED");
    assert_eq!(records.len(), 1, "the failure record holds the redacted, cut message");
    let leaks = files_containing(ws.dir.path(), &KEY[..6]);
    assert!(leaks.is_empty(), "key (prefix) found after the failed run in {leaks:?}");
    let mut outputs = vec![run];
    outputs.push(cmd(&["run", "p.yaml", "--json", "--retry-errors"]));
    assert!(outputs[1].status.success(), "{}", String::from_utf8_lossy(&outputs[1].stderr));
    outputs.push(cmd(&["report", "p.yaml"]));
    outputs.push(cmd(&["status", "p.yaml"]));
    let status: Value = serde_json::from_slice(&cmd(&["status", "p.yaml", "--json"]).stdout).unwrap();
    let cells: Vec<String> = status["cells"].as_array().unwrap().iter().map(|c| c["cell"].as_str().unwrap().to_owned()).collect();
    assert_eq!(cells.len(), 3, "{status}");
    for cell in &cells {
        outputs.push(cmd(&["show", "p.yaml", cell]));
        outputs.push(cmd(&["show", "p.yaml", cell, "--json"]));
        assert!(outputs.last().unwrap().status.success(), "show {cell}");
    }
    for out in &outputs {
        for stream in [&out.stdout, &out.stderr] {
            let text = String::from_utf8_lossy(stream);
            assert!(!text.contains(&KEY[..6]), "key (prefix) printed: {text}");
        }
    }
    let shown = String::from_utf8_lossy(&outputs[outputs.len() - 1].stdout).into_owned();
    assert!(shown.contains("My key is [REDACTED]"), "the answer is kept, redacted: {shown}");
    for dir in ["cache", "reports"] {
        assert!(ws.path(dir).is_dir(), "{dir} written");
        let leaks = files_containing(&ws.path(dir), &KEY[..6]);
        assert!(leaks.is_empty(), "key (prefix) found in {dir}: {leaks:?}");
    }
    assert!(!files_containing(&ws.path("cache/v1/steps"), "My key is [REDACTED]").is_empty());
    let leaks = files_containing(ws.dir.path(), &KEY[..6]);
    assert!(leaks.is_empty(), "key (prefix) found in {leaks:?}");
}

/// A 1 TiB answer against a 64 KiB cap: its item fails at once with an error naming the
/// cap (a client that buffered the body would time out instead), nothing of it is cached,
/// and a later run asks that item again.
#[test]
fn answer_over_the_response_cap_fails_its_item_and_is_not_cached() {
    let mock = Mock::start(MockConfig { faults: FaultPlan::sequence([Fault::HugeAnswer { bytes: 1 << 40 }]), ..MockConfig::default() });
    let ws = Workspace::new();
    let yaml = pipeline(&model("m", "mock-1", &mock.url())).replace("max_concurrency: 16", "max_concurrency: 16, max_response_bytes: 65536");
    ws.write("p.yaml", &yaml);
    let (code, v) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["cells_failed"], 1, "{v}");
    let error = v["failures"][0]["error"].as_str().unwrap();
    assert!(error.contains("response_too_large") && error.contains("65536-byte cap"), "{error}");
    assert!(error.contains("after 1 attempt"), "not retried: {error}");
    assert_eq!(cached_call_bodies(&ws.path("cache")).len(), 59, "every other item is cached");
    let padded = files_containing(&ws.path("cache"), &"a".repeat(1024));
    assert!(padded.is_empty(), "part of the huge answer was stored: {padded:?}");
    let before = mock.server().calls();
    let (code, v) = run(&ws, &["run", "p.yaml", "--json", "--retry-errors"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(mock.server().calls() - before, 1, "only the uncached item is asked again");
}
