//! Streaming through the binary (issue 13 item 6): a stalled stream is retried and the run
//! log says so; streamed and unstreamed calls share their cache entries. Issue 21: a hostile
//! stream is held to the answer cap while it arrives, fails its cell and is never cached.

use std::time::Duration;

use evalgrid::providers::mock::{Fault, FaultPlan, MockConfig};
use serde_json::Value;

use crate::hostile::files_containing;
use crate::providers::{Mock, cached_call_bodies, data_dir};
use crate::support::Workspace;

/// One BBEH Mini task (20 calls) for one model entry, with fast retries and a 1 s
/// inactivity timeout.
fn pipeline(model: &str) -> String {
    format!(
        "name: streaming\nmodels:\n  - {model}\ntasks:\n  - benchmark: bbeh\n    select: [dyck_languages]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 3, retry_base_ms: 5, retry_max_ms: 20, request_timeout_s: 2, stream_idle_timeout_s: 1, max_concurrency: 4}}\n"
    )
}

fn run(ws: &Workspace) -> (i32, Value, String) {
    let data = data_dir().to_str().unwrap().to_owned();
    let out = ws.cmd().args(["--data-dir", &data, "run", "p.yaml", "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = stdout.lines().rev().find_map(|line| serde_json::from_str(line).ok()).unwrap_or_else(|| panic!("no JSON in {stdout}\n{stderr}"));
    (out.status.code().unwrap_or(-1), json, stderr)
}

/// Issue 13 must-hold, scaled down: a stream silent for longer than the inactivity timeout
/// is retried once, and the run log says so.
#[test]
fn a_stalled_stream_is_retried_once_and_the_run_log_says_so() {
    let stall = Fault::StallMidStream { after: 1, silence: Duration::from_secs(4) };
    let mock = Mock::start(MockConfig { faults: FaultPlan::sequence([stall]), ..MockConfig::default() });
    let ws = Workspace::new();
    let model =
        |stream: &str| format!("{{id: m, provider: openai, model: mock-1, base_url: \"{}\", stream: {stream}, params: {{temperature: 0}}}}", mock.url());
    ws.write("p.yaml", &pipeline(&model("true")));
    let (code, v, stderr) = run(&ws);
    assert_eq!(code, 0, "{v}\n{stderr}");
    assert_eq!((v["cells_failed"].as_u64(), v["calls"]["live"].as_u64()), (Some(0), Some(20)), "{v}");
    assert_eq!((v["calls"]["stream_stalls"].as_u64(), v["calls"]["http_attempts"].as_u64()), (Some(1), Some(21)), "{v}\n{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|line| line.contains("stalled")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].starts_with(
            "warning: model `m`: the response stream stalled 1 time(s) (no data for 1s, transport.stream_idle_timeout_s); retried, answered on attempt 2"
        ),
        "{stderr}"
    );
    let log = mock.server().request_log();
    assert!(log.iter().all(|request| request.body["stream"] == true && request.body["stream_options"]["include_usage"] == true));

    // The switch is transport: cached bodies lack it, and the same grid unstreamed is the
    // same cell, already done.
    let bodies = cached_call_bodies(&ws.path("cache"));
    assert_eq!(bodies.len(), 20);
    assert!(bodies.iter().all(|body| !body.contains("stream")), "{bodies:?}");
    ws.write("p.yaml", &pipeline(&model("false")));
    let before = mock.server().calls();
    let (code, v, _) = run(&ws);
    assert_eq!((code, v["cells_cached"].as_u64(), mock.server().calls()), (0, Some(1), before), "{v}");
}

/// Anthropic with a 32k output cap streams under the default `stream: auto`.
#[test]
fn a_large_anthropic_cap_streams_by_default() {
    let mock = Mock::start(MockConfig::default());
    let ws = Workspace::new();
    let model = format!("{{id: c, provider: anthropic, model: claude-test, base_url: \"{}\", params: {{max_tokens: 32000}}}}", mock.url());
    ws.write("p.yaml", &pipeline(&model));
    let (code, v, stderr) = run(&ws);
    assert_eq!((code, v["calls"]["live"].as_u64()), (0, Some(20)), "{v}\n{stderr}");
    let log = mock.server().request_log();
    assert!(log.iter().all(|request| request.path == "/v1/messages" && request.body["stream"] == true && request.body["max_tokens"] == 32_000));
}

/// A hostile stream's size: the red team's 120 MB answer.
const HOSTILE_BYTES: u64 = 120_000_000;

/// Issue 21: a 120 MB streamed answer against the default 8 MiB cap fails its cell with the
/// cap named, is not retried, nothing of it is cached, and `--retry-errors` asks it again.
#[test]
fn a_hostile_stream_fails_its_cell_at_the_cap_and_is_not_cached() {
    let mock = Mock::start(MockConfig { faults: FaultPlan::sequence([Fault::HugeAnswer { bytes: HOSTILE_BYTES }]), ..MockConfig::default() });
    let ws = Workspace::new();
    let model = format!("{{id: m, provider: openai, model: mock-1, base_url: \"{}\", stream: true, params: {{temperature: 0}}}}", mock.url());
    ws.write("p.yaml", &pipeline(&model));
    let (code, v, stderr) = run(&ws);
    assert_eq!((code, v["cells_failed"].as_u64()), (1, Some(1)), "{v}\n{stderr}");
    let error = v["failures"][0]["error"].as_str().unwrap_or_default();
    assert!(error.contains("response_too_large") && error.contains("8388608-byte cap"), "{error}");
    assert!(error.contains("after 1 attempt"), "not retried: {error}");
    assert_eq!(cached_call_bodies(&ws.path("cache")).len(), 19, "every other item is cached");
    let padded = files_containing(&ws.path("cache"), "a".repeat(1024).as_bytes());
    assert!(padded.is_empty(), "part of the hostile answer was stored: {padded:?}");
    let before = mock.server().calls();
    let out = ws.cmd().args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json", "--retry-errors"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(mock.server().calls() - before, 1, "only the failed item is asked again");
}

/// Twenty concurrent calls whose every answer is `bytes` long, streamed or not, through the
/// binary: its peak RSS in KiB (`EVALGRID_REPORT_RSS`), and the run's JSON summary.
fn peak_rss_kib(stream: bool, bytes: u64) -> (u64, Value) {
    let faults = FaultPlan::rate(1.0, vec![Fault::HugeAnswer { bytes }], 0);
    let mock = Mock::start(MockConfig { faults, record_log: false, ..MockConfig::default() });
    let ws = Workspace::new();
    let model = format!("{{id: m, provider: openai, model: mock-1, base_url: \"{}\", stream: {stream}, params: {{temperature: 0}}}}", mock.url());
    ws.write("p.yaml", &pipeline(&model).replace("max_concurrency: 4", "max_concurrency: 20"));
    let data = data_dir().to_str().unwrap().to_owned();
    let out = ws.cmd().env("EVALGRID_REPORT_RSS", "1").args(["--data-dir", &data, "run", "p.yaml", "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json = stdout.lines().rev().find_map(|line| serde_json::from_str(line).ok()).unwrap_or_else(|| panic!("no JSON in {stdout}\n{stderr}"));
    let kib = stderr.lines().find_map(|line| line.strip_prefix("peak-rss-kib ")).and_then(|kib| kib.trim().parse().ok());
    (kib.unwrap_or_else(|| panic!("no peak RSS in {stderr}")), json)
}

/// Issue 21 must-hold, with a generous bound: twenty concurrent hostile 120 MB streams keep
/// the binary's peak RSS far below the 2.2 GB they took when the cap was checked at the end
/// (measured ~10x lower; see the ignored `hostile_stream_peak_rss_report` for the numbers).
#[test]
fn twenty_hostile_streams_stay_far_below_their_size_in_memory() {
    let (kib, v) = peak_rss_kib(true, HOSTILE_BYTES);
    assert_eq!(v["cells_failed"].as_u64(), Some(1), "{v}");
    assert!(kib < 1024 * 1024, "peak RSS {kib} KiB for 20 hostile streams of 120 MB");
}

/// The numbers behind the bound: `cargo test --test it streaming::hostile_stream_peak_rss_report -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check: prints peak RSS streamed and not"]
fn hostile_stream_peak_rss_report() {
    for (stream, bytes) in [(false, 10_000_000), (false, HOSTILE_BYTES), (true, 10_000_000), (true, HOSTILE_BYTES)] {
        let (kib, v) = peak_rss_kib(stream, bytes);
        println!("20 concurrent answers of {bytes} bytes, streamed: {stream}: peak RSS {} MiB, cells failed {}", kib / 1024, v["cells_failed"]);
    }
}
