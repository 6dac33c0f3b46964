//! The report's item pages in a real browser (issue 34.1): a BBEH grid of three models
//! (two built-in random agents and one on the mock, answering with the red team's HTML payload, one failing a task),
//! opened in headless Chromium by `items_browser.py`, which clicks each filter, each
//! baseline, types a search and sorts a column. Every set of visible rows is checked
//! against `items.csv`, with the failed/errored/different/flipped rows recomputed here.
//! Skips (and passes) when `/usr/bin/chromium` or `chromium` on PATH is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Command;

use evalgrid::providers::mock::{Fault, MockConfig, MockOutcome, MockReply, MockRequest, Script};

use crate::providers::{Mock, data_dir};
use crate::support::{Workspace, repo};

/// The red team's HTML payload (as `html_report.rs` uses it), in a model's answers.
const HOSTILE: &str = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>' onmouseover='alert(3)";

fn chromium() -> Option<PathBuf> {
    let fixed = PathBuf::from("/usr/bin/chromium");
    if fixed.is_file() {
        return Some(fixed);
    }
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join("chromium")).find(|p| p.is_file())
}

/// `c` answers with the payload and fails every web_of_lies item (HTTP 400: its cell fails).
fn reply(req: &MockRequest) -> MockOutcome {
    if req.last_user.to_lowercase().contains("truth") && req.last_user.contains("ies") {
        return MockOutcome::Fault(Fault::Status { status: 400, message: "mock: rejected".into() });
    }
    MockOutcome::Reply(MockReply::text(format!("The answer is: {HOSTILE}")))
}

/// One unit's values: model → value (None: empty field).
type Row = BTreeMap<String, Option<f64>>;

/// `items.csv` as (task, seed, item) → model → value.
type Items = BTreeMap<(String, String, String), Row>;

fn items(path: &std::path::Path) -> Items {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let mut out = Items::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let key = (f[col("task")].to_owned(), f[col("seed")].to_owned(), f[col("item")].to_owned());
        out.entry(key).or_default().insert(f[col("model")].to_owned(), f[col("correct")].parse().ok());
    }
    out
}

fn keys(v: &serde_json::Value) -> BTreeSet<String> {
    v.as_array().unwrap_or_else(|| panic!("rows: {v}")).iter().map(|k| k.as_str().unwrap().to_owned()).collect()
}

#[test]
fn item_page_filters_show_exactly_the_rows_items_csv_implies_in_chromium() {
    let Some(bin) = chromium() else {
        eprintln!("SKIPPED: no chromium (Debian: apt-get install -y chromium); the item pages were not checked in a browser");
        return;
    };
    let mock = Mock::start(MockConfig { script: Script::function(reply), ..MockConfig::default() });
    let ws = Workspace::new();
    let url = mock.url();
    // Two built-in random agents, which get some items right and disagree; `c` is the mock.
    let models = format!(
        "  - {{id: a, provider: builtin, model: random}}\n  - {{id: b, provider: builtin, model: random, params: {{salt: 1}}}}\n  - {{id: c, provider: openai, model: c, base_url: \"{url}\"}}\n"
    );
    ws.write(
        "p.yaml",
        &format!("name: items\nmodels:\n{models}tasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 1, request_timeout_s: 5}}\n"),
    );
    let data = data_dir().to_str().unwrap().to_owned();
    let (code, v) = ws.run_json(&["--data-dir", &data, "run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_failed"].as_u64()), (1, Some(1)), "c's web_of_lies cell fails: {v}");
    let page = ws.path("reports/items/items-bbeh-mini.html");
    let html = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
    assert!(!html.contains("<img") && !html.contains("<script>alert"), "the payload never reaches the page as markup");
    let index = std::fs::read_to_string(ws.path("reports/items/index.html")).unwrap();
    assert!(index.contains("<a href=\"items-bbeh-mini.html\">items of bbeh-mini</a>"), "linked from the index");

    let table = items(&ws.path("reports/items/items.csv"));
    let key = |(t, s, i): &(String, String, String)| format!("{t}|{s}|{i}");
    let all_models = ["a", "b", "c"];
    let value = |row: &Row, m: &str| row.get(m).copied().flatten();
    let want = |f: &dyn Fn(&Row) -> bool| -> BTreeSet<String> { table.iter().filter(|(_, r)| f(r)).map(|(k, _)| key(k)).collect() };
    let numbers = |r: &Row| -> Vec<f64> { all_models.iter().filter_map(|m| value(r, m)).collect() };
    let expected = [
        ("all", want(&|_| true)),
        ("failed", want(&|r| numbers(r).contains(&0.0))),
        ("errored", want(&|r| all_models.iter().any(|m| value(r, m).is_none()))),
        ("different", want(&|r| numbers(r).windows(2).any(|w| w[0] != w[1]))),
    ];

    let profile = tempfile::tempdir().unwrap();
    let out = Command::new("python3")
        .arg(repo().join("tests/it/items_browser.py"))
        .arg(&bin)
        .arg(&page)
        .arg(profile.path())
        .arg("web_of")
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "the browser driver failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["console"], serde_json::json!([]), "no console error, exception or CSP violation");
    assert_eq!(seen["injected"], 0, "no element made of provider text");
    for (filter, rows) in &expected {
        assert_eq!(&keys(&seen["filters"][filter]), rows, "filter {filter}");
        // Against the baseline is "differs from baseline"; `diff` keeps "flipped" (run against run).
        let label = if *filter == "flipped" { "differs from baseline" } else { *filter };
        assert_eq!(seen["labels"][filter].as_str().unwrap(), format!("{label} ({})", rows.len()), "the {filter} button's count");
    }
    // Each filter selects something, and errored and different are true subsets (a random
    // agent is wrong on most BBEH items, so `failed` may well hold every row).
    assert!(expected.iter().all(|(_, rows)| !rows.is_empty()), "{expected:?}");
    assert!(expected[2].1.len() < expected[0].1.len() && expected[3].1.len() < expected[0].1.len(), "{expected:?}");
    for base in all_models {
        let flipped = want(&|r| value(r, base).is_some_and(|b| all_models.iter().any(|m| *m != base && value(r, m).is_some_and(|x| x != b))));
        assert_eq!(keys(&seen["flipped"][base]), flipped, "flipped against {base}");
        assert!(!flipped.is_empty(), "{base}");
    }
    let web: BTreeSet<String> = expected[0].1.iter().filter(|k| k.contains("web_of")).cloned().collect();
    assert!(!web.is_empty());
    assert_eq!(keys(&seen["search"]["rows"]), web, "the search for a task");
    // Sorted by a's value, ascending: every row shown, a's values never decrease.
    let sorted: Vec<String> = seen["sorted"].as_array().unwrap().iter().map(|k| k.as_str().unwrap().to_owned()).collect();
    assert_eq!(sorted.len(), expected[0].1.len());
    let by_key: BTreeMap<String, f64> = table.iter().map(|(k, r)| (key(k), value(r, "a").unwrap_or(f64::NEG_INFINITY))).collect();
    assert!(sorted.windows(2).all(|w| by_key[&w[0]] <= by_key[&w[1]]), "sorted by a: {sorted:?}");
}

/// Issue 48 item 1: a `qa` grid with several scorers over two tasks (the facts task has
/// `match`, `f1` and a `judge` that gives no grade to some answers; the science task has
/// `choice` only). In Chromium, every scorer can be chosen, each with its own filters and
/// counts recomputed here from `items.csv`; a unit with no value on the metric shown is
/// `no value` (shown `–`), never `errored`, since no cell failed. The report's cells table
/// shows each qa cell's scorer means.
#[test]
fn qa_item_page_shows_every_scorer_with_its_own_filters_and_no_value_is_not_errored() {
    let Some(bin) = chromium() else {
        eprintln!("SKIPPED: no chromium (Debian: apt-get install -y chromium); the item pages were not checked in a browser");
        return;
    };
    let ws = Workspace::new();
    ws.write(
        "facts.jsonl",
        "{\"id\": \"fr\", \"input\": \"Capital of France?\", \"target\": \"Paris\"}\n{\"id\": \"it\", \"input\": \"Capital of Italy?\", \"target\": \"Rome\"}\n{\"id\": \"sum\", \"input\": \"What is 2+2?\", \"target\": \"4\"}\n",
    );
    ws.write(
        "sci.jsonl",
        "{\"id\": \"h2o\", \"input\": \"Water is?\", \"choices\": [\"H2O\", \"CO2\"], \"target\": \"A\"}\n{\"id\": \"sun\", \"input\": \"The sun is a?\", \"choices\": [\"planet\", \"star\"], \"target\": \"B\"}\n",
    );
    // Grades the oracle's `Paris` and `Rome`; anything else gets a reply with no grade.
    ws.write(
        "judge.json",
        r#"{"replies": [{"contains": "[Submission]: Paris", "reply": "GRADE: C"}, {"contains": "[Submission]: Rome", "reply": "GRADE: I"}], "default": "Hard to say."}"#,
    );
    ws.write(
        "p.yaml",
        "name: q\nmodels:\n  - {id: oracle, provider: builtin, model: oracle}\n  - {id: echo, provider: builtin, model: echo}\ntasks:\n  - benchmark: qa\n    params:\n      dataset: facts.jsonl\n      scorers: [match, f1, {judge: {model: {provider: scripted, model: j, params: {file: judge.json}}}}]\n  - benchmark: qa\n    params:\n      dataset: sci.jsonl\n      scorers: [choice]\nseeds: [0]\n",
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let index = std::fs::read_to_string(ws.path("reports/q/index.html")).unwrap();
    assert!(index.contains("match 1 · f1 1 · judge 0.5"), "the cells table shows a qa cell's scorer means");
    assert!(index.contains("match 0 · f1 0 · judge –"), "the echo's cell: no grade, shown as –");
    assert!(index.contains("<td class=\"num\">choice 1</td>"), "{index}");

    // items.csv: (task, seed, item) → metric → model → value.
    let text = std::fs::read_to_string(ws.path("reports/q/items.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(header[5..], ["match", "f1", "judge", "choice"], "{text}");
    let mut table: BTreeMap<String, BTreeMap<String, Row>> = BTreeMap::new();
    for line in lines {
        let f: Vec<&str> = line.split(',').collect();
        let key = format!("{}|{}|{}", f[2], f[3], f[4]);
        for (i, metric) in header.iter().enumerate().skip(5) {
            table.entry((*metric).to_owned()).or_default().entry(key.clone()).or_default().insert(f[1].to_owned(), f[i].parse().ok());
        }
    }

    let profile = tempfile::tempdir().unwrap();
    let page = ws.path("reports/q/items-qa.html");
    let out = Command::new("python3").arg(repo().join("tests/it/items_browser.py")).arg(&bin).arg(&page).arg(profile.path()).output().expect("python3 runs");
    assert!(out.status.success(), "the browser driver failed:\n{}", String::from_utf8_lossy(&out.stderr));
    let seen: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(seen["console"], serde_json::json!([]), "no console error, exception or CSP violation");
    let models = ["oracle", "echo"];
    for metric in ["match", "f1", "judge", "choice"] {
        let rows = &table[metric];
        let value = |r: &Row, m: &str| r.get(m).copied().flatten();
        let want = |f: &dyn Fn(&Row) -> bool| -> BTreeSet<String> { rows.iter().filter(|(_, r)| f(r)).map(|(k, _)| k.clone()).collect() };
        let numbers = |r: &Row| -> Vec<f64> { models.iter().filter_map(|m| value(r, m)).collect() };
        let expected = [
            ("all", "all", want(&|_| true)),
            ("failed", "failed", want(&|r| numbers(r).contains(&0.0))),
            ("errored", "errored", BTreeSet::new()),
            ("none", "no value", want(&|r| models.iter().any(|m| value(r, m).is_none()))),
            ("different", "different", want(&|r| numbers(r).windows(2).any(|w| w[0] != w[1]))),
        ];
        let got = &seen["metrics"][metric];
        assert_eq!(got["shown"], metric, "the page names the metric shown");
        for (filter, label, want) in &expected {
            assert_eq!(&keys(&got["filters"][filter]), want, "{metric}: filter {filter}");
            assert_eq!(got["labels"][filter].as_str().unwrap(), format!("{label} ({})", want.len()), "{metric}: the {filter} button's count");
        }
        // Each unit's cells show the metric's value, or `–` where there is none.
        for (key, row) in rows {
            let shown: Vec<String> = models.iter().map(|m| value(row, m).map_or_else(|| "\u{2013}".to_owned(), |v| v.to_string())).collect();
            assert_eq!(got["cells"][key], serde_json::json!(shown), "{metric} {key}");
        }
    }
    // The science rows have no `match` value and the echo's answers no grade: `no value`.
    assert_eq!(keys(&seen["metrics"]["match"]["filters"]["none"]).len(), 2);
    assert_eq!(keys(&seen["metrics"]["judge"]["filters"]["none"]).len(), 5, "sci rows, and the echo's facts answers");
    assert_eq!(keys(&seen["metrics"]["choice"]["filters"]["all"]).len(), 5);
}
