//! `evalgrid weirdml import` on the author's real published data (`../shared/data/weirdml/`):
//! every published average and the published time horizons reproduce (spec
//! `weirdml-published.md`), reruns give the same bytes, an independent scipy fit agrees, and bad
//! input is refused with exit 2 and a clear message.

use std::path::PathBuf;

use serde_json::Value;

use crate::support::{Workspace, repo, snapshot_dir};

fn data(name: &str) -> PathBuf {
    repo().join("../shared/data/weirdml").join(name)
}

fn results() -> String {
    data("weirdml_results.json").display().to_string()
}

fn estimates() -> String {
    data("all_estimates.json").display().to_string()
}

fn published() -> Value {
    serde_json::from_str(&std::fs::read_to_string(data("weirdml_results.json")).unwrap()).unwrap()
}

use evalgrid::exhibit::csv_fields as fields;

/// Rows of a CSV file, by header.
fn rows(path: &std::path::Path) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap();
    let mut lines = text.lines();
    let header = fields(lines.next().unwrap());
    lines.map(|l| header.iter().cloned().zip(fields(l)).collect()).collect()
}

fn num(row: &std::collections::BTreeMap<String, String>, col: &str) -> f64 {
    row[col].parse().unwrap_or_else(|_| panic!("{col} = {:?} in {row:?}", row[col]))
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Spec table: model key, n_data, n_success, x50 2.5 %, median, 97.5 % (log10 hours).
const PUBLISHED_HORIZONS: [(&str, usize, usize, f64, f64, f64); 5] = [
    ("gpt-4", 678, 36, -1.143, -0.407, -0.069),
    ("claude-3.5-sonnet-20240620", 1695, 260, -0.005, 0.289, 0.546),
    ("o4-mini-high-2025-04-16", 1755, 636, 0.767, 0.923, 1.134),
    ("gpt-5-2025-08-07", 2035, 936, 0.935, 1.160, 1.382),
    ("claude-opus-4.6:or_adaptive", 678, 416, 1.334, 1.576, 1.795),
];

#[test]
fn every_published_average_reproduces_from_the_run_scores() {
    let ws = Workspace::new();
    let out = ws.run(&["weirdml", "import", &results(), "--out", "imp"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let v = published();
    let models = rows(&ws.path("imp/models.csv"));
    assert_eq!(models.len(), 87);
    let header = std::fs::read_to_string(ws.path("imp/models.csv")).unwrap().lines().next().unwrap().to_owned();
    assert_eq!(header, "model,display_name,release_date,tasks,runs,avg_acc,standard_error,published_standard_error,cost_per_run_usd");
    for row in &models {
        let m = &v["models"][&row["model"]];
        assert!(m.is_object(), "`model` is the results-file key: {}", row["model"]);
        assert_eq!(row["display_name"], m["display_name"].as_str().unwrap());
        let published_avg = m["aggregate_scores"]["avg_acc"].as_f64().unwrap();
        assert!((num(row, "avg_acc") - published_avg).abs() <= 1e-5, "{}: {} vs {published_avg}", row["model"], row["avg_acc"]);
        let published_se = m["aggregate_scores"]["avg_acc_standard_error"].as_f64().unwrap();
        assert!((num(row, "published_standard_error") - published_se).abs() <= 1e-8);
        // Ours needs two runs per task (sample variance); single-run models leave it empty.
        let single_run = m["tasks"].as_object().unwrap().values().any(|t| t["runs"].as_array().unwrap().len() < 2);
        if single_run {
            assert_eq!(row["standard_error"], "", "{}", row["model"]);
        } else {
            assert!(num(row, "standard_error") > 0.0 && num(row, "standard_error") < 0.2, "{row:?}");
        }
        assert_eq!(num(row, "tasks"), 17.0);
    }
    // max@1 is the mean of the runs, max@runs their best, and the mean matches the rounded one.
    let tasks = rows(&ws.path("imp/tasks.csv"));
    assert_eq!(tasks.len(), 87 * 17);
    for row in &tasks {
        let t = &v["models"][&row["model"]]["tasks"][&row["task"]];
        let runs: Vec<f64> = t["runs"].as_array().unwrap().iter().map(|r| r["score"].as_f64().unwrap()).collect();
        assert!((num(row, "mean_accuracy") - t["mean_accuracy"].as_f64().unwrap()).abs() <= 1e-3, "{row:?}");
        assert!((num(row, "max_at_1") - num(row, "mean_accuracy")).abs() <= 1e-7);
        let best = runs.iter().copied().fold(f64::MIN, f64::max);
        assert!((num(row, &format!("max_at_{}", runs.len())) - best).abs() <= 1e-7, "{row:?}");
        if runs.len() < 10 {
            assert_eq!(row[&format!("max_at_{}", runs.len() + 1)], "");
        }
    }
}

#[test]
fn published_time_horizons_reproduce_and_reruns_give_the_same_bytes() {
    let ws = Workspace::new();
    let keys: Vec<&str> = PUBLISHED_HORIZONS.iter().map(|p| p.0).collect();
    let models = keys.join(",");
    let args = ["weirdml", "import", &results(), "--estimates", &estimates(), "--models", &models, "--out"];
    let out = ws.cmd().args(args).arg("a").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // The one non-positive estimate of the real file is skipped and counted.
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("1 estimate(s) with non-positive hours skipped: digits_generalize / gemini-3-pro-preview / 95%"), "{stdout}");
    let horizons = rows(&ws.path("a/horizons.csv"));
    assert_eq!(horizons.len(), 5);
    for (key, n_data, n_success, lo, mid, hi) in PUBLISHED_HORIZONS {
        let row = horizons.iter().find(|r| r["model"] == key).unwrap();
        assert_eq!(num(row, "n_data") as usize, n_data, "{key}");
        assert_eq!(num(row, "n_success") as usize, n_success, "{key}");
        assert!((num(row, "x50_q50") - mid).abs() <= 0.03, "{key}: median {} vs {mid}", row["x50_q50"]);
        assert!((num(row, "x50_q025") - lo).abs() <= 0.2, "{key}: 2.5 % {} vs {lo}", row["x50_q025"]);
        assert!((num(row, "x50_q975") - hi).abs() <= 0.2, "{key}: 97.5 % {} vs {hi}", row["x50_q975"]);
        assert!((num(row, "hours_q50") - 10f64.powf(num(row, "x50_q50"))).abs() <= 1e-3 * num(row, "hours_q50"));
        assert!(num(row, "beta_q50") < 0.0);
    }
    let md = std::fs::read_to_string(ws.path("a/summary.md")).unwrap();
    assert!(md.contains("| gpt-4 | gpt-4 |") || md.contains("| gpt-4 |"), "{md}");
    let html = std::fs::read_to_string(ws.path("a/index.html")).unwrap();
    assert_eq!(html.matches("<circle").count(), 5, "one timeline point per model");
    // Same input, same bytes (the bootstrap is seeded by the model key; threads do not matter).
    let out = ws.cmd().args(args).arg("b").env("RAYON_NUM_THREADS", "1").output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(snapshot_dir(&ws.path("a")), snapshot_dir(&ws.path("b")));
}

/// The peer: scipy's L-BFGS-B on the same points, written from the spec, not from our code.
const SCIPY_PEER: &str = r#"
import json, math, sys
import numpy as np
from scipy.optimize import minimize
r = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))
TH = [("25%", .25), ("50%", .5), ("70%", .7), ("90%", .9), ("95%", .95)]
EST = ["gpt-5.2:medium", "gemini-3-pro-preview", "claude-opus-4.5", "grok-4-07-09"]
for m in sys.argv[3].split(","):
    xs, ys = [], []
    for t in r["tasks"]:
        for lab, th in TH:
            for es in EST:
                h = e[t]["estimates"][es][lab]["hours"]
                if h <= 0:
                    continue
                for run in r["models"][m]["tasks"][t]["runs"]:
                    xs.append(math.log10(h)); ys.append(1.0 if run["score"] >= th else 0.0)
    x, y = np.array(xs), np.array(ys)
    def nll(p):
        z = -math.exp(p[1]) * (x - p[0])
        return float(np.sum(y * np.logaddexp(0, -z) + (1 - y) * np.logaddexp(0, z)))
    fits = [minimize(nll, [s, 0.0], method="L-BFGS-B", bounds=[(-3, 7), (math.log(1e-6), math.log(50))]) for s in (-1.0, 0.5, 2.0)]
    best = min(fits, key=lambda f: f.fun)
    print(m, len(x), int(y.sum()), repr(float(best.x[0])), repr(-math.exp(best.x[1])))
"#;

#[test]
fn full_data_fits_match_an_independent_scipy_fit() {
    let ok = std::process::Command::new("python3").args(["-c", "import numpy, scipy"]).status().is_ok_and(|s| s.success());
    if !ok {
        eprintln!("SKIPPED: python3 with numpy and scipy is needed for the peer fit");
        return;
    }
    let keys = "gpt-4,claude-3.5-sonnet-20240620,o4-mini-high-2025-04-16,gpt-5-2025-08-07,claude-opus-4.6:or_adaptive,o3-pro-2025-06-10,gemini-3-pro-preview,gemini-2.5-pro:16k,o3-2025-04-16,grok-4-07-09";
    let v = published();
    let keys: Vec<&str> = keys.split(',').filter(|k| v["models"][*k].is_object()).collect();
    assert!(keys.len() == 10, "{keys:?}");
    let keys = keys.join(",");
    let ws = Workspace::new();
    // `--resamples 0`: one fit on all points, no bootstrap.
    let out = ws.run(&["weirdml", "import", &results(), "--estimates", &estimates(), "--models", &keys, "--resamples", "0", "--out", "full"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ours = rows(&ws.path("full/horizons.csv"));
    let peer = std::process::Command::new("python3").args(["-c", SCIPY_PEER, &results(), &estimates(), &keys]).output().unwrap();
    assert!(peer.status.success(), "{}", stderr(&peer));
    let peer = String::from_utf8(peer.stdout).unwrap();
    assert_eq!(peer.lines().count(), ours.len());
    for line in peer.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let row = ours.iter().find(|r| r["model"] == f[0]).unwrap();
        assert_eq!(row["n_data"], f[1], "{line}");
        assert_eq!(row["n_success"], f[2], "{line}");
        let (x50, beta): (f64, f64) = (f[3].parse().unwrap(), f[4].parse().unwrap());
        assert!((num(row, "x50_q50") - x50).abs() <= 2e-3, "{line} vs {row:?}");
        assert!((num(row, "beta_q50") - beta).abs() <= 2e-3 * beta.abs().max(1.0), "{line} vs {row:?}");
    }
}

/// A broken estimates file: its name, the edit that breaks it, the message expected.
type EstimatesCase = (&'static str, fn(&mut Value), &'static str);

/// Writes `value` as pretty JSON into the workspace.
fn write_json(ws: &Workspace, name: &str, value: &Value) -> String {
    ws.write(name, &serde_json::to_string(value).unwrap()).display().to_string()
}

#[test]
fn bad_input_is_refused_with_exit_2_and_a_clear_message() {
    let ws = Workspace::new();
    let full = std::fs::read_to_string(data("weirdml_results.json")).unwrap();
    let truncated = ws.write("truncated.json", &full[..full.len() / 2]).display().to_string();
    let out = ws.run(&["weirdml", "import", &truncated, "--out", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("truncated.json: not a WeirdML results file"), "{}", stderr(&out));
    assert!(stderr(&out).contains("EOF"), "{}", stderr(&out));
    let not_json = ws.write("notjson.json", "model,avg_acc\ngpt-4,0.1\n").display().to_string();
    let out = ws.run(&["weirdml", "import", &not_json, "--out", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("notjson.json: not a WeirdML results file") && stderr(&out).contains("line 1"), "{}", stderr(&out));
    let out = ws.run(&["weirdml", "import", "absent.json", "--out", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read absent.json"), "{}", stderr(&out));
    assert!(!ws.path("x").exists(), "nothing written on bad input");

    // A model missing a task: reported, left out of the averages and horizons; the rest imports.
    let mut v = published();
    v["models"]["gpt-4"]["tasks"].as_object_mut().unwrap().remove("xor_hard");
    let missing = write_json(&ws, "missing.json", &v);
    let out = ws.run(&["weirdml", "import", &missing, "--estimates", &estimates(), "--models", "gpt-4o-2024-11-20", "--resamples", "20", "--out", "m"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("model `gpt-4` has no runs on xor_hard: left out of the averages and horizons"));
    let models = rows(&ws.path("m/models.csv"));
    let gpt4 = models.iter().find(|r| r["model"] == "gpt-4").unwrap();
    assert_eq!((gpt4["tasks"].as_str(), gpt4["avg_acc"].as_str(), gpt4["standard_error"].as_str()), ("16", "", ""));
    assert!(std::fs::read_to_string(ws.path("m/summary.md")).unwrap().contains("`gpt-4` has no runs on xor_hard"));
    // … and asking for its horizon is an error that names the task.
    let out = ws.run(&["weirdml", "import", &missing, "--estimates", &estimates(), "--models", "gpt-4", "--out", "m2"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`gpt-4`, which has no runs on xor_hard"), "{}", stderr(&out));
    let out = ws.run(&["weirdml", "import", &results(), "--estimates", &estimates(), "--models", "gpt-5", "--out", "m3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not a model of the results file (did you mean"), "{}", stderr(&out));

    // Estimates missing a task, an estimator, a threshold.
    let est: Value = serde_json::from_str(&std::fs::read_to_string(data("all_estimates.json")).unwrap()).unwrap();
    let cases: [EstimatesCase; 4] = [
        ("no_task", |e| drop(e.as_object_mut().unwrap().remove("xor_easy")), "task `xor_easy` missing"),
        (
            "no_estimator",
            |e| drop(e["chess_winners"]["estimates"].as_object_mut().unwrap().remove("grok-4-07-09")),
            "task `chess_winners`: estimator `grok-4-07-09` missing",
        ),
        (
            "no_threshold",
            |e| drop(e["shapes_easy"]["estimates"]["claude-opus-4.5"].as_object_mut().unwrap().remove("95%")),
            "task `shapes_easy`, estimator `claude-opus-4.5`: threshold `95%` missing",
        ),
        ("bad_hours", |e| e["shapes_easy"]["estimates"]["claude-opus-4.5"]["50%"]["hours"] = Value::from("ten"), "`hours` missing or not a number"),
    ];
    for (name, edit, message) in cases {
        let mut e = est.clone();
        edit(&mut e);
        let path = write_json(&ws, &format!("{name}.json"), &e);
        let out = ws.run(&["weirdml", "import", &results(), "--estimates", &path, "--out", name]);
        assert_eq!(out.status.code(), Some(2), "{name}: {}", stderr(&out));
        assert!(stderr(&out).contains(&format!("{name}.json: ")) && stderr(&out).contains(message), "{name}: {}", stderr(&out));
        assert!(!stderr(&out).contains("panicked"));
    }
    let truncated = ws.write("est_trunc.json", "{\"xor_easy\": {\"estimates\": ").display().to_string();
    let out = ws.run(&["weirdml", "import", &results(), "--estimates", &truncated, "--out", "t"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("est_trunc.json: not a WeirdML estimates file"), "{}", stderr(&out));

    // Non-positive hours: skipped and counted, the fit goes on.
    let mut e = est.clone();
    e["shapes_easy"]["estimates"]["claude-opus-4.5"]["50%"]["hours"] = Value::from(-2);
    let path = write_json(&ws, "negative.json", &e);
    let out = ws.run(&["weirdml", "import", &results(), "--estimates", &path, "--models", "gpt-4", "--resamples", "20", "--out", "n"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("2 estimate(s) with non-positive hours skipped") && stdout.contains("shapes_easy / claude-opus-4.5 / 50%"), "{stdout}");
    let row = &rows(&ws.path("n/horizons.csv"))[0];
    assert_eq!(num(row, "n_data") as usize, 678 - 2, "gpt-4 has 2 runs on shapes_easy");
}
