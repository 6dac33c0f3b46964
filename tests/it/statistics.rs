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
    insta::assert_snapshot!(header(&ws, "reports/pairs/comparisons.csv"), @"suite,metric,model_a,model_b,n_pairs,clusters,mean_a,mean_b,diff,se,ci_low,ci_high,p_value,p_holm,mcnemar_p,mde,se_level");
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
    assert!(note.contains("or no p-value): r0, twin.") && note.contains("80 % power: r0 0.0"), "{note}");
    // The LaTeX table marks them too (best bold, ties with `$^{=}$`) and has the MDE column.
    let tex = std::fs::read_to_string(ws.path("reports/pairs/summary.tex")).unwrap();
    assert!(tex.contains("\\textbf{r1} & ") && tex.contains("\nr0$^{=}$ & ") && tex.contains("\ntwin$^{=}$ & "), "{tex}");
    assert!(tex.lines().any(|l| l.starts_with("model & n & ") && l.ends_with(" & MDE \\\\")), "{tex}");
    peer_agrees(&ws.path("reports/pairs"));
}

/// Issue 34.7: one BBEH task is one cluster. The comparisons fall back to the item-level
/// paired SE (`se_level = item`, `s/√n` of the paired differences, recomputed here), get a
/// Holm p, and the summary says so in a note.
#[test]
fn one_task_cluster_falls_back_to_the_item_level_paired_se_with_a_note() {
    let ws = Workspace::new();
    let out = ws.cmd().args(["datasets", "fetch", "bbeh", "--from"]).arg(repo().join("../shared/data/bbeh")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ws.write("pairs.yaml", &BBEH_GRID.replace("select: all", "select: [boardgame_qa]").replace("seeds: [0, 1]", "seeds: [0]"));
    let (code, v) = ws.run_json(&["run", "pairs.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let items = rows(&ws, "reports/pairs/items.csv");
    let pairs = rows(&ws, "reports/pairs/comparisons.csv");
    assert_eq!(pairs.len(), 3, "three pairs of models");
    for p in &pairs {
        assert_eq!((p["clusters"].as_str(), p["se_level"].as_str()), ("1", "item"), "{p:?}");
        let of = |m: &str| -> Vec<f64> { items.iter().filter(|r| r["model"] == m).map(|r| r["correct"].parse().unwrap()).collect() };
        let d: Vec<f64> = of(&p["model_a"]).iter().zip(of(&p["model_b"])).map(|(a, b)| a - b).collect();
        let n = d.len() as f64;
        let mean = d.iter().sum::<f64>() / n;
        let se = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt();
        let got: f64 = p["se"].parse().unwrap_or_else(|_| panic!("an item-level SE: {p:?}"));
        assert!((got - se).abs() <= 1e-12 + 1e-9 * se, "se {got} vs s/√n {se}: {p:?}");
        assert!(!p["p_holm"].is_empty(), "{p:?}");
    }
    let md = std::fs::read_to_string(ws.path("reports/pairs/summary.md")).unwrap();
    assert!(md.contains("fewer than two task clusters, so the paired SEs, CIs and p-values here use the item-level paired SE"), "{md}");
    let html = std::fs::read_to_string(ws.path("reports/pairs/index.html")).unwrap();
    assert!(html.contains("class=\"note se-note\""), "the HTML pairwise matrix carries the note");
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

/// `status --power D` (issue 24.6): the closest pair's required grid size, recomputed here
/// by hand from `items.csv` (paired differences on common units, the clustered SE with
/// C/(C−1), n · ((1.96 + 0.84)·SE / D)²).
#[test]
fn status_power_names_the_seeds_and_items_the_closest_pair_needs() {
    let ws = Workspace::new();
    let out = ws.cmd().args(["datasets", "fetch", "bbeh", "--from"]).arg(repo().join("../shared/data/bbeh")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ws.write(
        "three.yaml",
        "name: three\nmodels:\n  - {id: r0, provider: builtin, model: random}\n  - {id: r1, provider: builtin, model: random, params: {salt: 1}}\n  \
         - {id: r2, provider: builtin, model: random, params: {salt: 2}}\ntasks:\n  - benchmark: bbeh\n    select: all\n    params: {subset: mini}\nseeds: [0, 1]\n",
    );
    let (code, v) = ws.run_json(&["run", "three.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");

    // By hand from items.csv: each model's units, then every pair's paired difference.
    let mut units: std::collections::BTreeMap<&str, std::collections::BTreeMap<(String, String, String), f64>> = Default::default();
    let items = rows(&ws, "reports/three/items.csv");
    for r in &items {
        units.entry(r["model"].as_str()).or_default().insert((r["task"].clone(), r["seed"].clone(), r["item"].clone()), r["correct"].parse().unwrap());
    }
    let mut closest: Option<(f64, f64, usize, &str, &str)> = None;
    for (a, b) in [("r0", "r1"), ("r0", "r2"), ("r1", "r2")] {
        let d: Vec<(&str, f64)> = units[a].iter().filter_map(|(k, x)| Some((k.0.as_str(), x - units[b].get(k)?))).collect();
        let n = d.len() as f64;
        let mean = d.iter().map(|x| x.1).sum::<f64>() / n;
        let mut sums: std::collections::BTreeMap<&str, f64> = Default::default();
        for (task, x) in &d {
            *sums.entry(task).or_default() += x - mean;
        }
        let c = sums.len() as f64;
        let se = (c / (c - 1.0) * sums.values().map(|s| s * s).sum::<f64>() / (n * n)).sqrt();
        if closest.is_none_or(|(m, ..)| mean.abs() < m.abs()) {
            closest = Some((mean, se, d.len(), a, b));
        }
    }
    let (diff, se, n, a, b) = closest.unwrap();
    let target = 0.01;
    let factor = ((1.96 + 0.84) * se / target).powi(2);
    let (units_needed, seeds_needed) = ((n as f64 * factor).ceil() as u64, (2.0 * factor).ceil() as u64);
    assert!(factor > 1.0, "a 0.01 difference needs a bigger grid than 460 items × 2 seeds (factor {factor})");

    let out = ws.cmd().args(["status", "three.yaml", "--power", "0.01", "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let p = &v["power"][0];
    let suite = items[0]["suite"].as_str();
    assert_eq!(
        (p["suite"].as_str(), p["metric"].as_str(), p["model_a"].as_str(), p["model_b"].as_str()),
        (Some(suite), Some("correct"), Some(a), Some(b)),
        "{p}"
    );
    assert!((p["diff"].as_f64().unwrap() - diff).abs() <= 1e-12 && (p["se"].as_f64().unwrap() - se).abs() <= 1e-9 * se, "{p} vs diff {diff}, se {se}");
    assert_eq!((p["n_pairs"].as_u64(), p["seeds"].as_u64(), p["clusters"].as_u64()), (Some(n as u64), Some(2), Some(23)), "{p}");
    assert_eq!((p["units_needed"].as_u64(), p["seeds_needed"].as_u64()), (Some(units_needed), Some(seeds_needed)), "{p}");
    assert_eq!((p["more_units"].as_u64(), p["more_seeds"].as_u64()), (Some(units_needed - n as u64), Some(seeds_needed - 2)), "{p}");

    // In words, for a person.
    let out = ws.cmd().args(["status", "three.yaml", "--power", "0.01"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(&format!("closest pair {a} vs {b}")) && text.contains(&format!("{units_needed} paired units")), "{text}");
    assert!(text.contains(&format!("{} more seeds ({seeds_needed} in all)", seeds_needed - 2)), "{text}");
    // A difference that is no number is refused with exit 2.
    let out = ws.cmd().args(["status", "three.yaml", "--power", "-1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
