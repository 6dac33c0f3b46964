//! The toy benchmark of `docs/adding-a-benchmark.md`, end to end through the binary: it was
//! added as one folder plus one registry line, and it runs through the grid, the cache, the
//! metrics and the HTML report (its own table and figure), with built-in agents and with an
//! API model that plays by bisection through the mock.

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};

use crate::providers::Mock;
use crate::support::{Workspace, repo};

/// Bisects using the conversation so far: the last guess and the answer to it.
fn bisecting_model(req: &MockRequest) -> MockOutcome {
    let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
    let range: u64 = messages[0]["content"]
        .as_str()
        .unwrap_or("")
        .split("between 1 and ")
        .nth(1)
        .and_then(|s| s.split('.').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or(10);
    let (mut lo, mut hi) = (1, range);
    for pair in messages[1..].chunks(2) {
        let guess: u64 = pair[0]["content"].as_str().unwrap_or("0").trim().parse().unwrap_or(0);
        match pair.get(1).and_then(|m| m["content"].as_str()) {
            Some("higher") => lo = guess + 1,
            Some("lower") => hi = guess - 1,
            _ => {}
        }
    }
    MockOutcome::Reply(MockReply::text(format!("{}", lo + (hi - lo) / 2)))
}

#[test]
fn the_toy_benchmark_runs_through_grid_cache_metrics_and_report() {
    let mock = Mock::start(MockConfig { script: Script::function(bisecting_model), ..MockConfig::default() });
    let ws = Workspace::new();
    let text = std::fs::read_to_string(repo().join("pipelines/guess.yaml")).unwrap();
    let text = text.replace("tasks:", &format!("  - {{id: api, provider: openai, model: mock-bisect, base_url: \"{}\"}}\ntasks:", mock.url()));
    ws.write("g.yaml", &text);
    let (code, v) = ws.run_json(&["run", "g.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 90, "3 models × 3 tasks × 10 seeds: {v}");
    let csv = std::fs::read_to_string(ws.path("reports/guess/summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap_or_else(|| panic!("{name}: {csv}"));
    let value = |model: &str| -> f64 {
        let row: Vec<&str> = csv.lines().find(|l| l.starts_with(&format!("guess,{model},*,"))).unwrap().split(',').collect();
        row[col("solve_rate")].parse().unwrap()
    };
    assert_eq!(value("bisect"), 1.0, "{csv}");
    assert_eq!(value("api"), 1.0, "the API model bisects too: {csv}");
    assert!(value("linear") < 1.0, "{csv}");
    let html = std::fs::read_to_string(ws.path("reports/guess/index.html")).unwrap();
    assert!(html.contains("<h3>guess</h3>") && html.contains("Guess the number: mean guesses per task"), "own table and figure");
    // Cached: nothing runs again, and the model is not called again.
    let calls = mock.server().calls();
    let (_, v) = ws.run_json(&["run", "g.yaml", "--json"]);
    assert_eq!((v["cells_cached"].as_u64(), mock.server().calls()), (Some(90), calls), "{v}");
    // A bad task name is a located error, not a panic.
    ws.write("bad.yaml", &text.replace("select: all", "select: [range_7]"));
    let out = ws.run(&["run", "bad.yaml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("bad.yaml:") && err.contains("range_7"), "{err}");
}
