//! Ctrl-C against a provider that stalls (issue 12): the first Ctrl-C cancels the requests
//! in flight and exits 130 at once instead of waiting out the call budget; a rerun makes
//! exactly the calls that were never answered.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use evalgrid::providers::mock::{Fault, MockConfig, MockOutcome, MockReply, MockRequest, Script};

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

fn stalls(prompt: &str) -> bool {
    prompt.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b))) % 8 == 0
}

#[test]
fn ctrl_c_on_a_stalled_provider_exits_130_at_once_and_the_rerun_pays_only_the_unanswered() {
    let stall = Arc::new(AtomicBool::new(true));
    let seen: Arc<Mutex<Vec<(bool, String)>>> = Arc::default();
    let (stall2, seen2) = (Arc::clone(&stall), Arc::clone(&seen));
    let script = Script::function(move |req: &MockRequest| {
        let stalling = stall2.load(Ordering::SeqCst);
        seen2.lock().unwrap().push((stalling, req.last_user.clone()));
        if stalling && stalls(&req.last_user) {
            return MockOutcome::Fault(Fault::Slow(Duration::from_secs(3600)));
        }
        MockOutcome::Reply(MockReply::text("The answer is: (A)"))
    });
    let mock = Mock::start(MockConfig { script, ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: stall\nmodels:\n  - {{id: m, provider: openai, model: m, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\n",
            mock.url()
        ),
    );
    let mut child = spawn_run(&ws);
    // Wait until the cells in flight have asked everything they can (the stalled items
    // never answer, so those cells never finish and later cells never start).
    let start = Instant::now();
    let (mut last, mut stable_since) = (0, Instant::now());
    while start.elapsed() < Duration::from_secs(60) {
        let n = seen.lock().unwrap().len();
        if n != last {
            (last, stable_since) = (n, Instant::now());
        } else if n >= 20 && stable_since.elapsed() > Duration::from_millis(1500) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(last >= 20, "the run asked {last} items");
    let status = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let signalled = Instant::now();
    let exited = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break Some(st);
        }
        if signalled.elapsed() > Duration::from_secs(30) {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let Some(st) = exited else {
        let _ = child.kill();
        panic!("Ctrl-C did not stop a run waiting on a stalled provider");
    };
    let out = child.wait_with_output().unwrap();
    eprintln!("exited {:.2} s after Ctrl-C", signalled.elapsed().as_secs_f64());
    assert_eq!(st.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    assert_eq!(v["interrupted"], true, "{v}");
    let first: Vec<(bool, String)> = seen.lock().unwrap().drain(..).collect();
    let answered: HashSet<String> = first.iter().filter(|(_, p)| !stalls(p)).map(|(_, p)| p.clone()).collect();
    let unanswered: HashSet<String> = first.iter().filter(|(_, p)| stalls(p)).map(|(_, p)| p.clone()).collect();
    assert!(!unanswered.is_empty() && !answered.is_empty());
    // The provider recovers; the rerun asks only what was never answered.
    stall.store(false, Ordering::SeqCst);
    let (code, v) = ws.run_json(&["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let second: HashSet<String> = seen.lock().unwrap().iter().map(|(_, p)| p.clone()).collect();
    assert!(second.is_disjoint(&answered), "an answered call was paid again");
    assert!(second.is_superset(&unanswered), "the unanswered calls were made again");
    let requests = seen.lock().unwrap().len();
    assert_eq!(requests, second.len(), "each remaining prompt asked once");
    // The 60 mini items of these three tasks are 60 distinct prompts.
    assert_eq!(answered.len() + second.len(), 60, "together, every item exactly once");
}

#[test]
fn ctrl_c_with_20_calls_in_flight_keeps_every_answer_that_arrives_within_the_grace() {
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen2 = Arc::clone(&seen);
    let script = Script::function(move |req: &MockRequest| {
        seen2.lock().unwrap().push(req.last_user.clone());
        MockOutcome::Reply(MockReply::text("The answer is: (A)"))
    });
    // Every answer takes 3 s, well within the 10 s default grace.
    let mock = Mock::start(MockConfig { script, latency: Duration::from_secs(3), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: grace\nmodels:\n  - {{id: m, provider: openai, model: m, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_concurrency: 20}}\n",
            mock.url()
        ),
    );
    let child = spawn_run(&ws);
    let start = Instant::now();
    while mock.server().calls() < 20 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(mock.server().calls(), 20, "20 calls in flight, none answered yet");
    assert!(std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert_eq!(mock.server().calls(), 20, "no call is sent after the Ctrl-C: {stderr}");
    let first: HashSet<String> = seen.lock().unwrap().drain(..).collect();
    // The rerun pays only for the 40 calls never sent: the 20 answered within the grace are cached.
    let (code, v) = ws.run_json(&["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let second: HashSet<String> = seen.lock().unwrap().iter().cloned().collect();
    assert_eq!(v["calls"]["cached"], 20, "every answer that arrived within the grace was stored: {v}");
    assert!(second.is_disjoint(&first), "an answer that arrived within the grace was paid again");
    assert_eq!(second.len() + first.len(), 60);
}

/// `evalgrid run p.yaml --json` in the workspace, started in the background with its output piped.
fn spawn_run(ws: &Workspace) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
        .current_dir(ws.dir.path())
        .env("EVALGRID_NO_PROGRESS", "1")
        .env_remove("EVALGRID_CACHE")
        .args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--json"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap()
}
