//! Progress where there is no terminal (issue 34): with stderr in a file, a run prints a plain
//! progress line at each 10 % of cells and on a timer; `--progress none` and
//! `EVALGRID_NO_PROGRESS` keep the file free of them.

use std::process::{Command, Stdio};
use std::time::Duration;

use evalgrid::providers::mock::MockConfig;
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// Ten cells (one BBEH Mini task × ten seeds), one at a time against a slow mock.
fn pipeline(url: &str) -> String {
    format!(
        "name: logged\nmodels:\n  - {{id: m, provider: openai, model: mock-1, base_url: \"{url}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa]\n    params: {{subset: mini}}\nseeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\ntransport: {{max_concurrency: 4}}\n"
    )
}

/// Runs `p.yaml` with stderr written to a file, as a Slurm job's log is; returns the file's
/// progress lines.
fn run_logged(ws: &Workspace, extra: &[&str], no_progress_env: bool) -> Vec<String> {
    let log = ws.path("stderr.log");
    let file = std::fs::File::create(&log).unwrap();
    let mut c = Command::new(assert_cmd::cargo::cargo_bin("evalgrid"));
    c.current_dir(ws.dir.path()).env_remove("EVALGRID_CACHE").env_remove("EVALGRID_NO_PROGRESS").env("EVALGRID_PROGRESS_INTERVAL_S", "0.3");
    if no_progress_env {
        c.env("EVALGRID_NO_PROGRESS", "1");
    }
    let out = c
        .args(["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "-j", "1", "--json"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::from(file))
        .output()
        .unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("stdout is one JSON object ({e}); stderr:\n{text}"));
    assert_eq!(out.status.code(), Some(0), "{v}\n{text}");
    text.lines().filter(|l| l.starts_with("progress: ")).map(str::to_owned).collect()
}

#[test]
fn a_run_with_stderr_in_a_file_prints_plain_progress_lines() {
    let mock = Mock::start(MockConfig { latency: Duration::from_millis(30), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url()));
    // `auto` off a terminal means plain lines.
    let lines = run_logged(&ws, &[], false);
    eprintln!("{}", lines.join("\n"));
    for done in 1..=10 {
        let at = format!("progress: {done}/10 cells ({} %)", done * 10);
        assert!(lines.iter().any(|l| l.starts_with(&at)), "a line at each 10 % of cells ({at}):\n{}", lines.join("\n"));
    }
    let last = lines.iter().rfind(|l| l.starts_with("progress: 10/10")).unwrap();
    for part in ["run 10", "cached 0", "failed 0", "cells/s", "ETA 0s", "calls ", "tokens ", "$"] {
        assert!(last.contains(part), "the line carries `{part}`: {last}");
    }
    assert!(!lines.iter().any(|l| l.contains('\r') || l.contains('\u{1b}')), "plain lines hold no cursor control: {lines:?}");

    // Everything cached now: no cell moves, so no line; `none` and the environment switch
    // print nothing either.
    assert!(run_logged(&ws, &["--progress", "plain"], false).is_empty());
    std::fs::remove_dir_all(ws.path("cache")).unwrap();
    assert!(run_logged(&ws, &["--progress", "none"], false).is_empty());
    std::fs::remove_dir_all(ws.path("cache")).unwrap();
    assert!(run_logged(&ws, &[], true).is_empty(), "EVALGRID_NO_PROGRESS still silences `auto`");
    // An explicit `--progress plain` wins over the environment switch the job scripts set.
    std::fs::remove_dir_all(ws.path("cache")).unwrap();
    assert!(run_logged(&ws, &["--progress", "plain"], true).len() >= 10);
}

/// Issue 48 item 6: the ETA comes from calls made over the calls expected (the count `run
/// --dry-run` gives), shown with its total on every line; it reads `–` until enough calls
/// have answered, and never `0s` before the last call.
#[test]
fn the_eta_is_measured_on_calls_against_the_dry_run_count() {
    let mock = Mock::start(MockConfig { latency: Duration::from_millis(30), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url()));
    let (code, dry) = ws.run_json(&["--data-dir", data_dir().to_str().unwrap(), "run", "p.yaml", "--dry-run", "--json"]);
    assert_eq!(code, 0, "{dry}");
    let expected = dry["model_calls_to_make"].as_u64().unwrap();
    assert!(expected >= 10, "{dry}");
    let lines = run_logged(&ws, &["--progress", "plain"], false);
    assert!(!lines.is_empty());
    let floor = (expected / 20).max(5);
    for line in &lines {
        let at = line.find(" · calls ").unwrap_or_else(|| panic!("no call count: {line}")) + " · calls ".len();
        let (made, rest) = line[at..].split_once('/').unwrap_or_else(|| panic!("no call total: {line}"));
        let made: u64 = made.parse().unwrap();
        assert!(rest.starts_with(&format!("{expected} · ETA ")), "the total is the dry run's {expected}: {line}");
        let eta = rest.split(" · ETA ").nth(1).unwrap().split(' ').next().unwrap();
        if made < floor {
            assert_eq!(eta, "\u{2013}", "no ETA before {floor} calls: {line}");
        } else if made < expected {
            assert!(eta != "0s" && eta != "\u{2013}", "an ETA once measured, not 0s: {line}");
        }
    }
    let last = lines.last().unwrap();
    assert!(last.contains(&format!("calls {expected}/{expected} · ETA 0s")), "{last}");
}
