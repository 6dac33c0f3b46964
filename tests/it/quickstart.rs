//! The quickstart grid end to end, as the engine issue's checks describe.

use serde_json::Value;

use crate::support::{Workspace, snapshot_dir};

fn scores(ws: &Workspace, model: &str) -> Vec<f64> {
    let csv = std::fs::read_to_string(ws.path("reports/quickstart/summary.csv")).expect("summary.csv");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "mean_score").unwrap();
    csv.lines().skip(1).map(|l| l.split(',').collect::<Vec<_>>()).filter(|f| f[1] == model && f[2] != "*").map(|f| f[col].parse().unwrap()).collect()
}

#[test]
fn quickstart_runs_then_is_fully_cached_and_byte_identical() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let p = p.to_str().unwrap();
    let (code, v) = ws.run_json(&["run", p, "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_total"], 234);
    assert_eq!(v["cells_run"], 234);
    assert_eq!(v["cells_failed"], 0);
    assert_eq!(v["report_dir"], "reports/quickstart");
    for f in ["summary.md", "summary.csv", "cells.parquet"] {
        assert!(ws.path("reports/quickstart").join(f).is_file(), "{f} missing");
    }
    // Per-rule means over 3 seeds: the oracle wins on turn 1 everywhere
    // (score 30), the random agent never guesses (score 0 ≤ 0).
    let oracle = scores(&ws, "oracle");
    let random = scores(&ws, "random");
    assert_eq!(oracle.len(), 26);
    assert!(oracle.iter().all(|s| (*s - 30.0).abs() < 1e-12), "{oracle:?}");
    assert!(random.iter().all(|s| *s <= 0.0), "{random:?}");
    let before = snapshot_dir(&ws.path("reports"));

    let (code, v) = ws.run_json(&["run", p, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(v["cells_run"], 0);
    assert_eq!(v["cells_cached"], 234);
    assert_eq!(snapshot_dir(&ws.path("reports")), before, "rerun changed the report");

    // Transcript pages are rendered from the cached episodes, not stored again as blobs.
    let pages: Vec<_> = std::fs::read_dir(ws.path("reports/quickstart/transcripts")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(pages.len(), 234);
    for page in &pages {
        let hash = blake3::hash(&std::fs::read(page).unwrap()).to_hex().to_string();
        assert!(!ws.path("cache/v1/blobs").join(&hash[..2]).join(&hash).exists(), "{} is stored as a blob", page.display());
    }
    // Deleting the report and rebuilding it from the cache gives the same bytes
    // (the transcript pages rendered again from the episodes).
    std::fs::remove_dir_all(ws.path("reports")).unwrap();
    let (code, v) = ws.run_json(&["report", p, "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["report_cached"], true);
    assert_eq!(snapshot_dir(&ws.path("reports")), before);

    // An episode gone from the cache: the report is still written, and its page says so.
    let explain = String::from_utf8(ws.run(&["status", p, "--explain", "random/eleusis/even_ranks_only/0"]).stdout).unwrap();
    let episode = explain.lines().find_map(|l| l.strip_prefix("episode")).and_then(|l| l.split_whitespace().next()).expect("episode key").to_owned();
    std::fs::remove_file(ws.path("cache/v1/steps").join(&episode[..2]).join(format!("{episode}.json"))).unwrap();
    let (code, v) = ws.run_json(&["report", p, "--json"]);
    assert_eq!(code, 0, "{v}");
    let page = std::fs::read_to_string(ws.path("reports/quickstart/transcripts").join(format!("{}.html", &episode[..12]))).unwrap();
    assert!(page.contains("no longer in the cache"), "{page}");
}

#[test]
fn editing_one_models_params_reruns_exactly_its_cells() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let p = p.to_str().unwrap();
    assert_eq!(ws.run_json(&["run", p, "--json"]).1["cells_run"], 234);
    let text = std::fs::read_to_string(p).unwrap();
    let edited = ws.write("edited.yaml", &text.replace("params: {salt: 0}", "params: {salt: 7}"));
    let edited = edited.to_str().unwrap();

    let (_, status) = ws.run_json(&["status", edited, "--json"]);
    assert_eq!(status["cells_stale"], 78, "{status}");
    assert_eq!(status["cells_cached"], 156);
    let cells = status["cells"].as_array().unwrap();
    for c in cells {
        let id = c["cell"].as_str().unwrap();
        if id.starts_with("random/") {
            assert_eq!(c["state"], "stale", "{c}");
            assert_eq!(c["reason"], "model.params.salt: 0 → 7", "{c}");
        } else {
            assert_eq!(c["state"], "cached", "{c}");
        }
    }
    let human = String::from_utf8(ws.run(&["status", edited]).stdout).unwrap();
    assert!(human.starts_with("234 cells: 156 cached, 78 stale, 0 missing, 0 failed"), "{human}");
    assert!(human.contains("stale    random/eleusis/even_ranks_only/0  model.params.salt: 0 → 7"), "{human}");

    let (code, v) = ws.run_json(&["run", edited, "--json"]);
    assert_eq!(code, 0);
    assert_eq!(v["cells_run"], 78);
    assert_eq!(v["cells_cached"], 156);
}

#[test]
fn editing_only_the_report_section_rerenders_only_the_report() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let p = p.to_str().unwrap();
    ws.run_json(&["run", p, "--json"]);
    let text = std::fs::read_to_string(p).unwrap();
    let edited = ws.write("quickstart.yaml", &text.replace("decimals: 2", "decimals: 4"));
    let (code, v) = ws.run_json(&["run", edited.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    assert_eq!(v["cells_run"], 0);
    let md = std::fs::read_to_string(ws.path("reports/quickstart/summary.md")).unwrap();
    assert!(md.contains("| oracle | 78 | 30.0000 |"), "{md}");
    let stats: Value = serde_json::from_slice(&ws.run(&["cache", "stats", "--json"]).stdout).unwrap();
    assert_eq!(stats["entries"]["episode"], 234);
    assert_eq!(stats["entries"]["metrics"], 1, "metrics must be reused: {stats}");
    assert_eq!(stats["entries"]["report"], 2);
}

#[test]
fn filter_runs_a_subset_and_status_explains_a_cell() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let p = p.to_str().unwrap();
    let (code, v) = ws.run_json(&["run", p, "--json", "--filter", "model=orac*,task=*parity*,seed=1"]);
    assert_eq!(code, 0);
    // `*parity*` matches opposite_parity and share_color_or_parity.
    assert_eq!(v["cells_total"], 2);
    assert_eq!(v["cells_run"], 2);
    assert_eq!(v["report_dir"], Value::Null);
    let out = String::from_utf8(ws.run(&["status", p, "--explain", "oracle/eleusis/opposite_parity/1"]).stdout).unwrap();
    assert!(out.contains("state    cached"), "{out}");
    let out = ws.run(&["status", p, "--explain", "nope/x/y/0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn show_prints_a_transcript() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let p = p.to_str().unwrap();
    ws.run_json(&["run", p, "--json", "--filter", "model=oracle,task=*only_aces,seed=2"]);
    let out = String::from_utf8(ws.run(&["show", p, "oracle/eleusis/only_aces/2"]).stdout).unwrap();
    assert!(out.contains("turn  1"), "{out}");
    assert!(out.contains("guess \"Only Aces (rank 1) .\": correct"), "{out}");
}

#[test]
fn dry_run_counts_without_running() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let (code, v) = ws.run_json(&["run", p.to_str().unwrap(), "--dry-run", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(v["cells_to_run"], 234);
    assert!(!ws.path("reports").exists());
}
