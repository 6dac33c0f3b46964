//! Issue 35 item 0 against an independent server (`slots_server.py`, Python stdlib, no evalgrid
//! code), which counts at its end what evalgrid must never do: more requests in flight than
//! its `/props` says it has slots, and requests sent again. Each run is BBEH Mini's
//! dyck_languages (20 calls, asked at once).

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

use serde_json::Value;

use crate::providers::data_dir;
use crate::support::{Workspace, repo};

/// The Python server, killed when dropped.
struct SlotsServer {
    child: Child,
    port: u16,
}

impl SlotsServer {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new("python3").arg(repo().join("tests/it/slots_server.py")).args(args).stdout(Stdio::piped()).spawn().expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().strip_prefix("PORT ").and_then(|p| p.parse().ok()).unwrap_or_else(|| panic!("no port: {line:?}"));
        Self { child, port }
    }

    fn stats(&self) -> Value {
        let mut stream = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(stream, "GET /_stats HTTP/1.0\r\nhost: x\r\n\r\n").unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).unwrap();
        serde_json::from_str(text.split_once("\r\n\r\n").unwrap().1).unwrap()
    }
}

impl Drop for SlotsServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs one model on `server` with `transport` (a YAML flow map's inside) and `stream`.
fn run(server: &SlotsServer, stream: bool, transport: &str) -> (Value, String) {
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: slots\nmodels:\n  - {{id: m, provider: openai, model: local-1, base_url: \"http://127.0.0.1:{}/v1\", stream: {stream}}}\ntasks:\n  - benchmark: bbeh\n    select: [dyck_languages]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 3, retry_base_ms: 5, retry_max_ms: 20, {transport}}}\n",
            server.port
        ),
    );
    let out = ws.cmd().args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let json: Value = stdout.lines().rev().find_map(|line| serde_json::from_str(line).ok()).unwrap_or_else(|| panic!("no JSON in {stdout}\n{stderr}"));
    assert_eq!((out.status.code(), json["cells_failed"].as_u64(), json["calls"]["live"].as_u64()), (Some(0), Some(0), Some(20)), "{json}\n{stderr}");
    (json, stderr)
}

fn slot_notes(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|line| line.contains("GET /props")).collect()
}

/// A server whose `/props` says 2 slots, asked at concurrency 8 with `server_slots: props`:
/// never more than 2 of evalgrid's requests at the server at once, and the run log says why,
/// once. The same server without `/props` (the control) does get more than 2 at once.
#[test]
fn a_lane_never_has_more_requests_in_flight_than_the_server_has_slots() {
    let server = SlotsServer::start(&["--slots", "2", "--latency", "0.2"]);
    let (_, stderr) = run(&server, false, "max_concurrency: 8, server_slots: props");
    let stats = server.stats();
    assert_eq!((stats["posts"].as_u64(), stats["props_gets"].as_u64()), (Some(20), Some(1)), "{stats}");
    assert!(stats["max_in_flight"].as_u64().unwrap() <= 2, "{stats}");
    let notes = slot_notes(&stderr);
    assert_eq!(notes.len(), 1, "{stderr}");
    assert!(notes[0].contains("model `m`: its server has 2 slot(s)"), "{stderr}");

    // The control: no `/props` (404), so only the configured 8 bound the lane.
    let control = SlotsServer::start(&["--gather", "3"]);
    let (_, stderr) = run(&control, false, "max_concurrency: 8, server_slots: props");
    let stats = control.stats();
    assert_eq!((stats["posts"].as_u64(), stats["props_gets"].as_u64()), (Some(20), Some(1)), "{stats}");
    assert!(stats["max_in_flight"].as_u64().unwrap() > 2, "{stats}");
    assert!(slot_notes(&stderr).is_empty(), "{stderr}");
}

/// By default (`auto`) only a server that says `Server: llama.cpp` is asked for `/props`, once
/// per lane; any other local server (nginx, a proxy, a mock) gets no request it did not ask for.
#[test]
fn by_default_only_a_llama_cpp_server_is_asked_for_its_slots() {
    let llama = SlotsServer::start(&["--slots", "2", "--llama"]);
    let (_, stderr) = run(&llama, false, "max_concurrency: 4");
    assert_eq!((llama.stats()["posts"].as_u64(), llama.stats()["props_gets"].as_u64()), (Some(20), Some(1)));
    assert_eq!(slot_notes(&stderr).len(), 1, "{stderr}");

    let other = SlotsServer::start(&["--slots", "2"]);
    let (_, stderr) = run(&other, false, "max_concurrency: 4");
    assert_eq!((other.stats()["posts"].as_u64(), other.stats()["props_gets"].as_u64()), (Some(20), Some(0)));
    assert!(slot_notes(&stderr).is_empty(), "{stderr}");
}

/// A stream whose first byte comes later than the idle timeout (its head at once then
/// silence, or no head at all) but within `first_byte_timeout_s` is a request waiting for a
/// slot: not a stall, not sent again. A stream silent between two events still stalls and is
/// retried once.
#[test]
fn waiting_for_the_first_byte_is_not_a_stall_but_silence_between_events_is() {
    let queued = SlotsServer::start(&["--hold-body", "3", "--hold-head", "3"]);
    let (v, stderr) = run(&queued, true, "max_concurrency: 4, stream_idle_timeout_s: 1, first_byte_timeout_s: 60");
    assert_eq!((v["calls"]["stream_stalls"].as_u64(), v["calls"]["http_attempts"].as_u64()), (Some(0), Some(20)), "{v}\n{stderr}");
    assert_eq!(queued.stats()["posts"].as_u64(), Some(20), "nothing sent again");
    assert!(!stderr.contains("stalled"), "{stderr}");

    let stalled = SlotsServer::start(&["--stall", "3"]);
    let (v, stderr) = run(&stalled, true, "max_concurrency: 4, stream_idle_timeout_s: 1, first_byte_timeout_s: 60");
    assert_eq!((v["calls"]["stream_stalls"].as_u64(), v["calls"]["http_attempts"].as_u64()), (Some(1), Some(21)), "{v}\n{stderr}");
    assert_eq!(stalled.stats()["posts"].as_u64(), Some(21), "the stalled stream was sent again, once");
    assert!(stderr.contains("the response stream stalled 1 time(s) (no data for 1s, transport.stream_idle_timeout_s)"), "{stderr}");
}
