//! Terminal output you can trust (issue 21 items 5 and 6): text from outside (a
//! provider's error, a YAML value) reaches stdout/stderr escaped, never as raw escape
//! sequences; `--json` always prints one object; `-v` / `EVALGRID_LOG` show log lines.

use std::process::Output;

use evalgrid::providers::mock::{Fault, FaultPlan, MockConfig};

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// An error message that clears the screen, retitles the window, writes the clipboard
/// (OSC 52), reverses the text after it and tries to forge a line of its own.
pub(crate) const HOSTILE: &str = "bad\x1b[2J request\x1b]0;pwned\x07 \x1b]52;c;cm0gLXJmIH4=\x07 \u{202e}gpj.exe\nFORGED 1 cells: 1 run, 0 cached, 0 failed";

/// One small BBEH task against the mock at `url`, with the model name `model` as given.
fn pipeline(url: &str, model: &str) -> String {
    format!(
        "name: term\nmodels:\n  - {{id: m, provider: openai, model: {model}, base_url: \"{url}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [dyck_languages]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 1, retry_base_ms: 5, retry_max_ms: 20, request_timeout_s: 5}}\n"
    )
}

/// A mock that answers every call with HTTP 400 carrying [`HOSTILE`].
fn hostile_mock() -> Mock {
    Mock::start(MockConfig { faults: FaultPlan::rate(1.0, vec![Fault::Status { status: 400, message: HOSTILE.into() }], 0), ..MockConfig::default() })
}

fn run(ws: &Workspace, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = ws.cmd();
    cmd.env_remove("EVALGRID_LOG").arg("--data-dir").arg(data_dir()).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("binary runs")
}

/// Panics if `bytes` holds anything a terminal acts on: ESC, BEL, CR, a C1 control (CSI as
/// U+009B) or a bidi override/isolate, or a line forged by the message.
fn assert_inert(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let raw =
        text.chars().find(|&c| (c.is_control() && c != '\n' && c != '\t') || ('\u{202a}'..='\u{202e}').contains(&c) || ('\u{2066}'..='\u{2069}').contains(&c));
    assert!(raw.is_none(), "{what} holds a raw {raw:?}:\n{text}");
    assert!(!text.lines().any(|l| l.starts_with("FORGED")), "{what}: the message forged a line:\n{text}");
}

#[test]
fn escape_sequences_in_a_provider_error_reach_run_and_status_escaped() {
    let mock = hostile_mock();
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url(), "gpt"));

    let out = run(&ws, &[], &["run", "p.yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    assert_inert("run stdout", &out.stdout);
    assert_inert("run stderr", &out.stderr);
    let both = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    for visible in ["\\x1b[2J", "\\x1b]0;pwned\\x07", "\\x1b]52;c;cm0gLXJmIH4=\\x07", "\\u{202e}gpj.exe", "\\x0aFORGED"] {
        assert!(both.contains(visible), "`{visible}` is not shown:\n{both}");
    }

    let out = run(&ws, &[], &["status", "p.yaml"]);
    assert_inert("status stdout", &out.stdout);
    assert_inert("status stderr", &out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("\\x1b]52;c;") && stdout.contains("\\u{202e}gpj.exe"), "{stdout}");

    let out = run(&ws, &[], &["status", "p.yaml", "--explain", "m/bbeh/bbeh_dyck_languages/mini/0"]);
    assert_inert("status --explain stdout", &out.stdout);

    // JSON was already safe (serde_json escapes control characters); the bidi override is
    // escaped too, and the value still parses to the provider's message.
    for args in [&["run", "p.yaml", "--json", "--retry-errors"][..], &["status", "p.yaml", "--json"]] {
        let out = run(&ws, &[], args);
        assert_inert("--json stdout", &out.stdout);
        assert_inert("--json stderr", &out.stderr);
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let message = serde_json::to_string(HOSTILE).unwrap();
        assert!(v.to_string().contains(message.trim_matches('"')), "{args:?}: the message survives intact: {v}");
    }
}

#[test]
fn json_prints_one_object_with_the_error_whatever_fails() {
    let ws = Workspace::new();
    ws.quickstart();
    // A file where the report's folder should be: the report cannot be written (root
    // ignores permissions, so a file is the one obstacle CI cannot step over).
    std::fs::create_dir_all(ws.path("reports")).unwrap();
    ws.write("reports/quickstart", "not a folder");
    let (code, v) = ws.run_json(&["run", "quickstart.yaml", "--json"]);
    assert_eq!(code, 1, "{v}");
    assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
    assert!(v["cells_run"].as_u64().unwrap() > 0, "the cells that ran are still counted: {v}");
    assert_eq!(v["report_dir"], serde_json::Value::Null, "{v}");

    let (code, v) = ws.run_json(&["report", "quickstart.yaml", "--json"]);
    assert_eq!(code, 1, "{v}");
    assert!(v["error"].is_string(), "{v}");

    // Invalid input keeps exit 2 and still answers in JSON.
    ws.write("bad.yaml", "name: bad\nmodels: [\n");
    for args in [&["run", "bad.yaml", "--json"][..], &["status", "bad.yaml", "--json"], &["report", "bad.yaml", "--json"], &["show", "bad.yaml", "x", "--json"]]
    {
        let (code, v) = ws.run_json(args);
        assert_eq!(code, 2, "{args:?}: {v}");
        assert!(v["error"].is_string(), "{args:?}: {v}");
    }
    let (code, v) = ws.run_json(&["--cache", "ftp://nowhere", "cache", "stats", "--json"]);
    assert_eq!((code, v["error"].is_string()), (2, true), "{v}");

    // A cell with no cached episode: exit 1, and an error object rather than nothing.
    std::fs::remove_dir_all(ws.path("cache")).unwrap();
    let (code, v) = ws.run_json(&["show", "quickstart.yaml", "random/eleusis/only_aces/0", "--json"]);
    assert_eq!(code, 1, "{v}");
    assert!(v["error"].as_str().unwrap().contains("no cached episode"), "{v}");
}

#[test]
fn log_lines_show_on_request_and_are_escaped() {
    let mock = hostile_mock();
    let ws = Workspace::new();
    // A YAML value is outside text too: the model's name carries an OSC title sequence.
    ws.write("p.yaml", &pipeline(&mock.url(), "\"gpt\\e]0;log\\a\""));
    let line = "model call attempt failed";

    let quiet = run(&ws, &[], &["run", "p.yaml", "--json"]);
    let stderr = String::from_utf8_lossy(&quiet.stderr);
    assert!(!stderr.contains(line), "info lines are off by default:\n{stderr}");

    let again = ["run", "p.yaml", "--json", "--retry-errors"];
    // (EVALGRID_LOG, -v): each shows the info line.
    for (log, verbose) in [(Some("info"), false), (Some("hyper=debug,evalgrid::providers=info"), false), (None, true), (Some("warn"), true)] {
        let env: Vec<(&str, &str)> = log.map(|l| ("EVALGRID_LOG", l)).into_iter().collect();
        let args: Vec<&str> = verbose.then_some("-v").into_iter().chain(again).collect();
        let out = run(&ws, &env, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(line), "{env:?} {args:?}:\n{stderr}");
        assert!(stderr.contains("gpt\\x1b]0;log\\x07"), "the model name is shown escaped:\n{stderr}");
        assert_inert("log lines", &out.stderr);
        serde_json::from_slice::<serde_json::Value>(&out.stdout).expect("stdout stays one JSON object");
    }

    let other = run(&ws, &[("EVALGRID_LOG", "evalgrid::exec=info")], &again);
    assert!(!String::from_utf8_lossy(&other.stderr).contains(line), "a target filter leaves out other targets");

    let out = run(&ws, &[("EVALGRID_LOG", "evalgrid=info=x")], &["status", "p.yaml"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stderr).contains("EVALGRID_LOG"), "a bad value is named, not ignored");
}
