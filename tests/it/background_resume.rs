//! Ctrl-C during Responses API background calls (issue 21): the interrupted run leaves its
//! responses running on the server and exits 130; the rerun polls them to the end instead of
//! POSTing (and paying for) the same bodies again.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use evalgrid::providers::mock::{LoggedRequest, MockConfig};

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// POSTs that created a background response, counted per distinct body.
fn posts_per_body(log: &[LoggedRequest]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for request in log.iter().filter(|request| request.method == "POST" && request.path == "/v1/responses") {
        *counts.entry(request.body.to_string()).or_default() += 1;
    }
    counts
}

/// The responses polled at least once.
fn polled(log: &[LoggedRequest]) -> BTreeSet<String> {
    log.iter().filter(|request| request.method == "GET").map(|request| request.path.clone()).collect()
}

#[test]
fn ctrl_c_during_background_polls_then_the_rerun_posts_each_body_once() {
    // Responses stay `in_progress` until the test lets them finish.
    let mock = Mock::start(MockConfig { background_polls: u32::MAX, ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: bg\nmodels:\n  - {{id: m, provider: openai, model: o3-pro, api: responses, background: true, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{background_poll_ms: 20, background_poll_max_ms: 50, max_concurrency: 32}}\n",
            mock.url()
        ),
    );
    let data = data_dir().to_str().unwrap().to_owned();
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
        .current_dir(ws.dir.path())
        .env("EVALGRID_NO_PROGRESS", "1")
        .env_remove("EVALGRID_CACHE")
        .args(["--data-dir", &data, "run", "p.yaml", "--json", "--jobs", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until all 20 items are POSTed and every response has been polled (so each call
    // is past the point where its response id is recorded).
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(60) {
        let log = mock.server().request_log();
        if posts_per_body(&log).len() >= 20 && polled(&log).len() >= 20 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = mock.server().request_log();
    assert_eq!((posts_per_body(&before).len(), polled(&before).len()), (20, 20), "20 calls in flight, each polled");
    let status = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let signalled = Instant::now();
    let out = child.wait_with_output().unwrap();
    eprintln!("exited {:.2} s after SIGINT", signalled.elapsed().as_secs_f64());
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let pending = evalgrid::cache::PendingResponses::of(&evalgrid::cache::Store::open(&ws.path("cache")).unwrap());
    assert_eq!(pending.list().len(), 20, "each running response is recorded for the rerun");
    let first = mock.server().request_log();
    assert!(first.iter().all(|request| !request.path.ends_with("/cancel")), "the interrupted responses are left running, not cancelled");

    // The server finishes the responses it kept working on; the rerun fetches them.
    mock.server().set_background_polls(1);
    let (code, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json", "--jobs", "1"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 1, "{v}");
    let log = mock.server().request_log();
    let posts = posts_per_body(&log);
    let rerun = &log[first.len()..];
    eprintln!(
        "POSTs: {} for {} distinct bodies; the rerun sent {} POSTs and {} polls",
        posts.values().sum::<usize>(),
        posts.len(),
        rerun.iter().filter(|request| request.method == "POST").count(),
        rerun.iter().filter(|request| request.method == "GET").count()
    );
    assert_eq!(posts.len(), 20, "20 distinct bodies");
    let repeated: Vec<_> = posts.iter().filter(|(_, count)| **count != 1).collect();
    assert!(repeated.is_empty(), "{} of 20 bodies were POSTed (and billed) again: {:?}", repeated.len(), repeated.iter().map(|(_, n)| n).collect::<Vec<_>>());
    assert!(log.iter().all(|request| !request.path.ends_with("/cancel")));
    assert!(pending.list().is_empty(), "the records are removed once the answers are cached");

    // Everything is cached now: a third run sends nothing at all.
    let sent = log.len();
    let (code, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json", "--jobs", "1"]);
    assert_eq!((code, v["cells_cached"].as_u64()), (0, Some(1)), "{v}");
    assert_eq!(mock.server().request_log().len(), sent);
}
