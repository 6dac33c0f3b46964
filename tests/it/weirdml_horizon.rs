//! `report.weirdml`: the pipeline's own WeirdML runs (scripted agents in the real sandbox) get
//! time horizons in the report, equal to the importer's on the same run scores, beside the
//! published models; the estimates file is keyed by its bytes, never its path; a second report
//! is byte-identical; tasks without estimates give a plain message; bad settings exit 2.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::support::{Workspace, repo, snapshot_dir};

fn numpy_available() -> bool {
    std::process::Command::new("python3").args(["-c", "import numpy"]).status().is_ok_and(|s| s.success())
}

fn shared(name: &str) -> String {
    repo().join("../shared/data/weirdml").join(name).display().to_string()
}

const ESTIMATORS: [&str; 4] = ["gpt-5.2:medium", "gemini-3-pro-preview", "claude-opus-4.5", "grok-4-07-09"];
const THRESHOLDS: [(&str, f64); 5] = [("25%", 0.25), ("50%", 0.50), ("70%", 0.70), ("90%", 0.90), ("95%", 0.95)];

/// Human hours per estimator (rows) and threshold (columns) for evalgrid's two tasks: the
/// estimators overlap, so successes and failures mix along x and the fit is interior.
const HOURS: [(&str, [[f64; 5]; 4]); 2] = [
    ("mini-shapes", [[0.2, 0.5, 0.3, 2.0, 6.0], [1.0, 4.0, 2.0, 8.0, 20.0], [0.1, 0.2, 1.0, 3.0, 5.0], [0.5, 2.0, 0.8, 1.5, 40.0]]),
    ("shapes-b", [[0.3, 1.0, 0.6, 4.0, 9.0], [2.0, 6.0, 1.0, 5.0, 12.0], [0.2, 0.4, 0.5, 2.0, 3.0], [0.05, 3.0, 1.5, 6.0, 80.0]]),
];

/// The author's estimates file plus estimates for evalgrid's tasks, as `all_estimates.json`
/// shapes them.
fn estimates_with_ours() -> Value {
    let mut root: Value = serde_json::from_str(&std::fs::read_to_string(shared("all_estimates.json")).unwrap()).unwrap();
    for (task, rows) in HOURS {
        let mut by_estimator = serde_json::Map::new();
        for (estimator, row) in ESTIMATORS.iter().zip(rows) {
            let by_threshold: serde_json::Map<String, Value> =
                THRESHOLDS.iter().zip(row).map(|((label, _), h)| ((*label).to_owned(), json!({"hours": h}))).collect();
            by_estimator.insert((*estimator).to_owned(), Value::Object(by_threshold));
        }
        root[task] = json!({"estimates": by_estimator});
    }
    root
}

/// The summary.md table under the heading starting with `title`: row label → cells.
fn md_table(md: &str, title: &str) -> (String, BTreeMap<String, Vec<String>>) {
    let start = md.find(&format!("## {title}")).unwrap_or_else(|| panic!("no `{title}` section in:\n{md}"));
    let block = &md[start..];
    let heading = block.lines().next().unwrap().to_owned();
    let mut rows = BTreeMap::new();
    for line in block.lines().skip(4).take_while(|l| l.starts_with('|')) {
        let cells: Vec<String> = line.trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect();
        rows.insert(cells[0].clone(), cells[1..].to_vec());
    }
    (heading, rows)
}

/// The report's files, with index.html's `pipeline blake3` line dropped: it is the pipeline
/// file's hash, and this test edits the file's estimates path.
fn report_files(dir: &std::path::Path) -> Vec<(String, Vec<u8>)> {
    let mut files = snapshot_dir(dir);
    for (name, bytes) in &mut files {
        if name == "index.html" {
            let text = String::from_utf8(std::mem::take(bytes)).unwrap();
            *bytes = text.lines().filter(|l| !l.starts_with("<dt>pipeline blake3</dt>")).collect::<Vec<_>>().join("\n").into_bytes();
        }
    }
    files
}

const PIPELINE: &str = "name: hz
models:
  - {id: scripted-spec, provider: builtin, model: scripted, params: {script: spec}}
  - {id: scripted-reference, provider: builtin, model: scripted, params: {script: reference}}
tasks:
  - benchmark: weirdml
    select: [mini-shapes, shapes-b]
    params: {time_limit_s: 2, iterations: 5}
seeds: [0, 1]
exclude:
  - {model: scripted-reference, task: weirdml/shapes-b}
report:
  decimals: 6
  weirdml:
    estimates: ESTIMATES
    published: PUBLISHED
    published_models: [gpt-4, o4-mini-high-2025-04-16]
    release_dates: {scripted-spec: 2025-06-10}
    resamples: 400
";

#[test]
fn own_runs_get_the_importers_horizons_beside_published_models() {
    if !numpy_available() {
        eprintln!("SKIPPED: python3 cannot import numpy (the README's setup installs it)");
        return;
    }
    let ws = Workspace::new();
    // Resolving a pipeline generates mini-shapes; `shapes-b` is a second task over the same
    // files (task.json holds absolute paths), so the fit has two tasks to bootstrap.
    ws.write(
        "gen.yaml",
        "name: gen\nmodels: [{id: s, provider: builtin, model: scripted}]\ntasks: [{benchmark: weirdml, select: [mini-shapes]}]\nseeds: [0]\n",
    );
    assert!(ws.run(&["validate", "gen.yaml"]).status.success());
    std::fs::create_dir_all(ws.path("data/weirdml/shapes-b")).unwrap();
    std::fs::copy(ws.path("data/weirdml/mini-shapes/task.json"), ws.path("data/weirdml/shapes-b/task.json")).unwrap();
    std::fs::create_dir_all(ws.path("in")).unwrap();
    let estimates = estimates_with_ours();
    ws.write("in/est.json", &serde_json::to_string(&estimates).unwrap());
    ws.write("hz.yaml", &PIPELINE.replace("ESTIMATES", "in/est.json").replace("PUBLISHED", &shared("weirdml_results.json")));
    let (code, v) = ws.run_json(&["run", "hz.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 6, "{v}");
    let md = std::fs::read_to_string(ws.path("reports/hz/summary.md")).unwrap();
    let (heading, own) = md_table(&md, "WeirdML time horizons of this pipeline's models");
    assert!(heading.contains("Fitted on `mini-shapes`, `shapes-b`."), "{heading}");
    assert!(heading.contains("Left out: `scripted-reference` has no scored run on `shapes-b`."), "{heading}");
    assert_eq!(own.keys().collect::<Vec<_>>(), ["scripted-spec"], "{md}");
    let spec = &own["scripted-spec"];

    // Independent counts: every run of the spec script scores 0.535 (spec §6.6); a point is a
    // success when θ ≤ 0.535, i.e. the 25 % and 50 % thresholds of every estimator.
    let (runs, score) = (2.0, 0.535);
    let points: f64 = HOURS.iter().map(|(_, rows)| rows.iter().flatten().count() as f64 * runs).sum();
    let successes: f64 = HOURS.iter().map(|_| ESTIMATORS.len() as f64 * THRESHOLDS.iter().filter(|(_, t)| *t <= score).count() as f64 * runs).sum();
    assert_eq!(spec[0].parse::<f64>().unwrap(), points);
    assert_eq!(spec[1].parse::<f64>().unwrap(), successes);

    // The importer's code path on the same run scores (a results file written here, keyed by
    // the pipeline's model id, which seeds both bootstraps) gives the same numbers.
    let tasks: Vec<&str> = HOURS.iter().map(|(t, _)| *t).collect();
    let task_runs: serde_json::Map<String, Value> =
        tasks.iter().map(|t| ((*t).to_owned(), json!({"num_runs": 2, "mean_accuracy": score, "runs": [{"score": score}, {"score": score}]}))).collect();
    let results = json!({"tasks": tasks, "models": {"scripted-spec": {
        "display_name": "spec", "release_date": "2025-06-10", "aggregate_scores": {"avg_acc": score, "avg_acc_standard_error": 0.0}, "tasks": task_runs}}});
    ws.write("results.json", &results.to_string());
    let out = ws.run(&["weirdml", "import", "results.json", "--estimates", "in/est.json", "--resamples", "400", "--out", "imp"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(ws.path("imp/horizons.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row: Vec<&str> = csv.lines().nth(1).unwrap().split(',').collect();
    for (i, column) in ["n_data", "n_success", "x50_q025", "x50_q50", "x50_q975", "hours_q025", "hours_q50", "hours_q975", "beta_q50"].iter().enumerate() {
        let theirs: f64 = row[header.iter().position(|h| h == column).unwrap()].parse().unwrap();
        let ours: f64 = spec[i].parse().unwrap();
        assert!((ours - theirs).abs() <= 1e-6 * theirs.abs().max(1.0), "{column}: report {ours}, importer {theirs}");
    }
    let [lo, mid, hi] = [2, 3, 4].map(|i| spec[i].parse::<f64>().unwrap());
    assert!(lo < mid && mid < hi && hi < 7.0 && lo > -3.0, "an interior fit with a real interval: {spec:?}");

    // The published context: both models fitted the same way, and drawn with ours.
    let (_, context) = md_table(&md, "WeirdML time horizons of published models (context)");
    assert_eq!(context.keys().collect::<Vec<_>>(), ["gpt-4", "o4-mini-high-2025-04-16"]);
    let counts: Vec<f64> = context["gpt-4"][..2].iter().map(|cell| cell.parse().unwrap()).collect();
    assert_eq!(counts, [678.0, 36.0], "the spec's n_data and n_success");
    let figure = std::fs::read_to_string(ws.path("reports/hz/figures/weirdml-timeline.csv")).unwrap();
    assert!(figure.contains("this pipeline,2025.") && figure.contains(",scripted-spec\n"), "{figure}");
    assert!(figure.contains("published models,") && figure.contains(",gpt-4-0613\n"), "{figure}");
    let html = std::fs::read_to_string(ws.path("reports/hz/index.html")).unwrap();
    assert!(html.contains("fig-weirdml-timeline") && html.contains("WeirdML time horizons of this pipeline"), "timeline and table in index.html");

    // The estimates file is keyed by its bytes: the same bytes elsewhere reuse the metrics and
    // report; the same content with other bytes refits, and every report file is the same.
    let before = report_files(&ws.path("reports/hz"));
    std::fs::create_dir_all(ws.path("moved")).unwrap();
    std::fs::copy(ws.path("in/est.json"), ws.path("moved/other-name.json")).unwrap();
    ws.write("hz.yaml", &PIPELINE.replace("ESTIMATES", "moved/other-name.json").replace("PUBLISHED", &shared("weirdml_results.json")));
    let (code, v) = ws.run_json(&["report", "hz.yaml", "--json"]);
    assert_eq!((code, &v["metrics_cached"], &v["report_cached"]), (0, &json!(true), &json!(true)), "{v}");
    ws.write("moved/other-name.json", &serde_json::to_string_pretty(&estimates).unwrap());
    let (code, v) = ws.run_json(&["report", "hz.yaml", "--json"]);
    assert_eq!((code, &v["metrics_cached"], &v["report_cached"]), (0, &json!(false), &json!(false)), "{v}");
    let after = report_files(&ws.path("reports/hz"));
    let differing: Vec<&String> = before.iter().zip(&after).filter(|(b, a)| b != a).map(|(b, _)| &b.0).collect();
    assert!(before.len() == after.len() && differing.is_empty(), "a refit from the same content gives the same bytes; differing: {differing:?}");
    // An edited estimate is a different file: the horizon moves.
    let mut edited = estimates.clone();
    edited["mini-shapes"]["estimates"]["grok-4-07-09"]["25%"]["hours"] = json!(30.0);
    ws.write("moved/other-name.json", &edited.to_string());
    let (code, v) = ws.run_json(&["report", "hz.yaml", "--json"]);
    assert_eq!((code, &v["metrics_cached"]), (0, &json!(false)), "{v}");
    let (_, moved) = md_table(&std::fs::read_to_string(ws.path("reports/hz/summary.md")).unwrap(), "WeirdML time horizons of this pipeline's models");
    assert_ne!(moved["scripted-spec"][3], spec[3], "x50 median follows the edited estimate");

    // The author's own estimates have none for evalgrid's tasks: a plain message, no fit.
    ws.write(
        "none.yaml",
        &PIPELINE
            .replace("name: hz", "name: hz-none")
            .replace("ESTIMATES", &shared("all_estimates.json"))
            .replace("PUBLISHED", &shared("weirdml_results.json")),
    );
    let (code, v) = ws.run_json(&["report", "none.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let md = std::fs::read_to_string(ws.path("reports/hz-none/summary.md")).unwrap();
    let (heading, rows) = md_table(&md, "WeirdML time horizons of this pipeline's models");
    assert!(rows.is_empty(), "{md}");
    assert!(
        heading.contains("no fit") && heading.contains("has no human-time estimates for this pipeline's WeirdML tasks (`mini-shapes`, `shapes-b`)"),
        "{heading}"
    );
    assert!(!ws.path("reports/hz-none/figures/weirdml-timeline.svg").exists(), "no timeline without a fit");
}

#[test]
fn bad_horizon_settings_are_located_errors() {
    let ws = Workspace::new();
    ws.write("est.json", "{}");
    ws.write("broken.json", "{\"mini-shapes\": ");
    let pipeline = |weirdml: &str| {
        format!(
            "name: p\nmodels:\n  - {{id: m, provider: builtin, model: scripted}}\ntasks:\n  - {{benchmark: weirdml, select: [mini-shapes]}}\nseeds: [0]\nreport:\n  weirdml:\n{weirdml}"
        )
    };
    for (setting, line, needle) in [
        ("    estimates: est.json\n    estimate_file: x\n", 10, "unknown field `estimate_file`"),
        ("    estimates: nowhere/est.json\n", 9, "`report.weirdml.estimates`: cannot read"),
        ("    estimates: broken.json\n", 9, "is not JSON"),
        ("    estimates: est.json\n    release_dates: {m: 2025-02-30}\n", 10, "`2025-02-30` is not a date"),
        ("    estimates: est.json\n    release_dates: {mm: 2025-02-03}\n", 10, "names `mm`, which is not a model of this pipeline"),
        ("    estimates: est.json\n    published_models: [gpt-4]\n", 10, "needs `report.weirdml.published`"),
        ("    estimates: est.json\n    resamples: 0\n", 10, "must be at least 1"),
    ] {
        ws.write("p.yaml", &pipeline(setting));
        let out = ws.run(&["validate", "p.yaml"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{setting}: {stderr}");
        assert!(stderr.contains(needle) && stderr.contains(&format!("p.yaml:{line}:")), "{setting}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let quickstart = std::fs::read_to_string(repo().join("pipelines/quickstart.yaml")).unwrap();
    let quickstart = quickstart.replacen("report:\n", "report:\n  weirdml: {estimates: est.json}\n", 1);
    assert!(quickstart.contains("weirdml: {estimates"), "the quickstart has a report section");
    ws.write("q.yaml", &quickstart);
    let out = ws.run(&["validate", "q.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`report.weirdml` needs WeirdML tasks in this pipeline"), "{stderr}");
}
