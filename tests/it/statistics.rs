//! Statistics a reviewer accepts (issue 24, spec `statistics.md`): `items.csv`, clustered
//! SEs on pooled rows, `comparisons.csv` and the BBEH harmonic-mean bootstrap, each figure
//! recomputed by an independent peer (`statistics_peer.py`: statsmodels' cluster-robust
//! OLS, Inspect AI's `stderr(cluster=...)`, scipy's `binomtest`, statsmodels' McNemar and
//! Holm, a numpy bootstrap). Without scipy/statsmodels (`.ci/run` installs them) the peer
//! check prints SKIPPED and passes; the checks in Rust always run.

use std::process::Command;

use crate::support::{Workspace, repo};

/// Runs the peer on a report folder; `false` (with a SKIPPED note) when scipy/statsmodels are missing.
fn peer_agrees(dir: &std::path::Path) -> bool {
    let out = Command::new("python3").arg(repo().join("tests/it/statistics_peer.py")).arg(dir).output().expect("python3 runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.code() == Some(3) {
        eprintln!("SKIPPED: the statistics peer needs scipy and statsmodels (python3 -m pip install scipy statsmodels): {text}");
        return false;
    }
    assert!(out.status.success(), "the independent peer disagrees with evalgrid:\n{text}");
    eprintln!("{text}");
    true
}

/// The header line of a report file.
fn header(ws: &Workspace, file: &str) -> String {
    std::fs::read_to_string(ws.path(file)).unwrap_or_else(|e| panic!("{file}: {e}")).lines().next().unwrap_or_default().to_owned()
}

/// The rows of a CSV as maps from column name to field (no quoted commas in these files).
fn rows(ws: &Workspace, file: &str) -> Vec<std::collections::BTreeMap<String, String>> {
    let text = std::fs::read_to_string(ws.path(file)).unwrap();
    let mut lines = text.lines();
    let names: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines.map(|l| names.iter().map(|n| (*n).to_owned()).zip(l.split(',').map(str::to_owned)).collect()).collect()
}

const BBEH_GRID: &str = "name: pairs
models:
  - {id: r0, provider: builtin, model: random}
  - {id: r1, provider: builtin, model: random, params: {salt: 1}}
  - {id: twin, provider: builtin, model: random}
tasks:
  - benchmark: bbeh
    select: all
    params: {subset: mini}
seeds: [0, 1]
";

fn bbeh_workspace() -> Workspace {
    let ws = Workspace::new();
    let out = ws.cmd().args(["datasets", "fetch", "bbeh", "--from"]).arg(repo().join("../shared/data/bbeh")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ws.write("pairs.yaml", BBEH_GRID);
    let (code, v) = ws.run_json(&["run", "pairs.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    ws
}

#[test]
fn bbeh_items_clustered_errors_pairs_and_bootstrap_agree_with_an_independent_peer() {
    let ws = bbeh_workspace();
    insta::assert_snapshot!(header(&ws, "reports/pairs/items.csv"), @"suite,model,task,seed,item,correct");
    insta::assert_snapshot!(header(&ws, "reports/pairs/summary.csv"), @"suite,model,task,cells,accuracy,accuracy_se,ci_low,ci_high,harmonic_mean,harmonic_mean_ci_low,harmonic_mean_ci_high,extraction_failure_rate,status");
    insta::assert_snapshot!(header(&ws, "reports/pairs/comparisons.csv"), @"suite,metric,model_a,model_b,n_pairs,clusters,mean_a,mean_b,diff,se,ci_low,ci_high,p_value,p_holm,mcnemar_p,mde");
    assert!(ws.path("reports/pairs/items.parquet").is_file());
    // 460 mini items × 2 seeds per model, each its own row.
    let items = rows(&ws, "reports/pairs/items.csv");
    assert_eq!(items.len(), 3 * 920);
    assert!(items.iter().all(|r| r["correct"] == "0.0" || r["correct"] == "1.0"));

    let pairs = rows(&ws, "reports/pairs/comparisons.csv");
    let order: Vec<(&str, &str)> = pairs.iter().map(|r| (r["model_a"].as_str(), r["model_b"].as_str())).collect();
    assert_eq!(order, [("r0", "r1"), ("r0", "twin"), ("r1", "twin")], "every pair once, in pipeline order");
    assert!(pairs.iter().all(|r| r["n_pairs"] == "920" && r["clusters"] == "23"));
    // Two identical models: every difference is 0 and p = 1.
    let twin = &pairs[1];
    for (field, want) in [("diff", "0.0"), ("se", "0.0"), ("p_value", "1.0"), ("p_holm", "1.0"), ("mcnemar_p", "1.0"), ("mde", "0.0")] {
        assert_eq!(twin[field], want, "{field}");
    }
    // Two different random agents differ somewhere, so the clustered SE is positive.
    assert!(pairs[0]["se"].parse::<f64>().unwrap() > 0.0);

    let summary = rows(&ws, "reports/pairs/summary.csv");
    let pooled: Vec<_> = summary.iter().filter(|r| r["task"] == "*").collect();
    assert_eq!(pooled.len(), 3);
    for r in &pooled {
        let f = |c: &str| r[c].parse::<f64>().unwrap_or_else(|_| panic!("{c} of {}", r["model"]));
        assert!(f("accuracy_se") > 0.0);
        assert!(f("harmonic_mean_ci_low") <= f("harmonic_mean_ci_high"));
    }
    // Per-task rows keep their Wilson intervals and have no clustered SE.
    assert!(summary.iter().filter(|r| r["task"] != "*").all(|r| r["accuracy_se"].is_empty() && !r["ci_low"].is_empty()));
    // Identical results, identical intervals (one bootstrap stream per suite).
    assert_eq!(pooled[0]["harmonic_mean_ci_low"], pooled[2]["harmonic_mean_ci_low"]);

    // Seeded from the metrics key: a fresh workspace on the same grid gives the same bytes.
    let again = bbeh_workspace();
    for file in ["summary.csv", "comparisons.csv", "items.csv"] {
        let path = format!("reports/pairs/{file}");
        assert_eq!(std::fs::read(ws.path(&path)).unwrap(), std::fs::read(again.path(&path)).unwrap(), "{file} differs between two fresh runs");
    }
    // The summary names the best model, those tied with it and each pair's MDE.
    let md = std::fs::read_to_string(ws.path("reports/pairs/summary.md")).unwrap();
    let note = md.lines().find(|l| l.starts_with("Best on `correct`: r1.")).unwrap_or_else(|| panic!("{md}"));
    assert!(note.contains("Holm-adjusted p ≥ 0.05): r0, twin.") && note.contains("80 % power: r0 0.0"), "{note}");
    peer_agrees(&ws.path("reports/pairs"));
}

#[test]
fn quickstart_eleusis_rules_are_the_clusters() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let (code, v) = ws.run_json(&["run", p.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{v}");
    insta::assert_snapshot!(header(&ws, "reports/quickstart/items.csv"), @"suite,model,task,seed,item,score,success");
    let items = rows(&ws, "reports/quickstart/items.csv");
    assert_eq!(items.len(), 234, "the Eleusis unit is the cell");
    assert!(items.iter().all(|r| r["item"] == "0"));
    let pairs = rows(&ws, "reports/quickstart/comparisons.csv");
    assert_eq!(pairs.len(), 2 * 3, "two unit metrics × three pairs");
    assert!(pairs.iter().all(|r| r["clusters"] == "26"));
    assert!(pairs.iter().filter(|r| r["metric"] == "score").all(|r| r["mcnemar_p"].is_empty()), "McNemar only for binary metrics");
    peer_agrees(&ws.path("reports/quickstart"));
}
