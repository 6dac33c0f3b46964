//! `evalgrid diff` (issue 34.2): a BBEH grid of two random agents is rerun after one
//! agent's salt is edited. The diff names exactly that agent's cells, with the reason
//! `status --explain` gave before the rerun; its flips and paired test are recomputed here
//! from `previous/items.csv` and `items.csv` (exact binomial mid-p, clustered SE by hand);
//! the report folder gets `diff.html`; another cache as `--against` gives the same answer.

use std::collections::BTreeMap;

use crate::support::{Workspace, repo};

const GRID: &str = "name: p
models:
  - {id: r0, provider: builtin, model: random}
  - {id: r1, provider: builtin, model: random, params: {salt: 1}}
tasks:
  - {benchmark: bbeh, select: [boardgame_qa, dyck_languages, web_of_lies], params: {subset: mini}}
seeds: [0]
";

/// `items.csv` as (model, task, item) → correct.
fn correct(ws: &Workspace, file: &str) -> BTreeMap<(String, String, String), f64> {
    let text = std::fs::read_to_string(ws.path(file)).unwrap();
    let mut lines = text.lines();
    let h: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| h.iter().position(|x| *x == n).unwrap();
    lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            ((f[col("model")].to_owned(), f[col("task")].to_owned(), f[col("item")].to_owned()), f[col("correct")].parse().unwrap())
        })
        .collect()
}

/// C(n, k) / 2^n.
fn point(n: u64, k: u64) -> f64 {
    (0..k).fold(1.0, |c, j| c * (n - j) as f64 / (j + 1) as f64) / 2f64.powi(i32::try_from(n).unwrap())
}

#[test]
fn diff_names_the_edited_cells_their_reason_and_recomputable_flips_and_test() {
    let ws = Workspace::new();
    let out = ws.cmd().args(["datasets", "fetch", "bbeh", "--from"]).arg(repo().join("../shared/data/bbeh")).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    ws.write("p.yaml", GRID);
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    let (code, v) = ws.run_json(&["diff", "p.yaml", "--json"]);
    assert!(code != 0 && v["error"].as_str().unwrap_or_default().contains("no previous run"), "nothing to compare yet: {v}");
    let before_cache = ws.path("cache-before");
    let copy = std::process::Command::new("cp").arg("-r").arg(ws.path("cache")).arg(&before_cache).status().unwrap();
    assert!(copy.success());

    ws.write("p.yaml", &GRID.replace("salt: 1", "salt: 2"));
    let cell = "r1/bbeh/bbeh_boardgame_qa/mini/0";
    let (_, explained) = ws.run_json(&["status", "p.yaml", "--explain", cell, "--json"]);
    let reason = explained["changed"][0].as_str().unwrap().to_owned();
    assert_eq!(reason, "model.params.salt: 1 → 2");
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    assert!(ws.path("reports/p/previous/items.csv").is_file() && ws.path("reports/p/previous/keys.csv").is_file());

    let (code, d) = ws.run_json(&["diff", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{d}");
    let changed: Vec<&str> = d["cells_changed"].as_array().unwrap().iter().map(|c| c["cell"].as_str().unwrap()).collect();
    assert_eq!(changed, ["r1/bbeh/bbeh_boardgame_qa/mini/0", "r1/bbeh/bbeh_dyck_languages/mini/0", "r1/bbeh/bbeh_web_of_lies/mini/0"]);
    assert!(d["cells_changed"].as_array().unwrap().iter().all(|c| c["reasons"] == serde_json::json!([reason])), "{d}");
    let models = d["models"].as_array().unwrap();
    assert_eq!(models.len(), 1, "only r1 changed: {d}");
    let m = &models[0];

    // Recomputed from the two items.csv files.
    let (old, new) = (correct(&ws, "reports/p/previous/items.csv"), correct(&ws, "reports/p/items.csv"));
    let pairs: Vec<(&str, f64, f64)> = new.iter().filter(|(k, _)| k.0 == "r1").map(|(k, a)| (k.1.as_str(), old[k], *a)).collect();
    let r2w = pairs.iter().filter(|p| p.1 == 1.0 && p.2 == 0.0).count() as u64;
    let w2r = pairs.iter().filter(|p| p.1 == 0.0 && p.2 == 1.0).count() as u64;
    assert_eq!((m["n_pairs"].as_u64(), m["right_to_wrong"].as_u64(), m["wrong_to_right"].as_u64()), (Some(60), Some(r2w), Some(w2r)), "{m}");
    assert_eq!(m["flips"].as_array().unwrap().len() as u64, r2w + w2r);
    assert!(r2w + w2r > 0, "a new salt changes some answers");
    let (n, k) = (r2w + w2r, r2w.min(w2r));
    let exact: f64 = (0..=k).map(|j| point(n, j)).sum::<f64>() * 2.0;
    let mid = if 2 * k == n { 1.0 } else { exact - point(n, k) };
    assert!((m["mcnemar_mid_p"].as_f64().unwrap() - mid).abs() < 1e-12, "mid-p {} vs {mid}", m["mcnemar_mid_p"]);
    let d_u: Vec<(&str, f64)> = pairs.iter().map(|p| (p.0, p.2 - p.1)).collect();
    let mean = d_u.iter().map(|x| x.1).sum::<f64>() / d_u.len() as f64;
    let mut by_task: BTreeMap<&str, f64> = BTreeMap::new();
    for (t, x) in &d_u {
        *by_task.entry(t).or_default() += x - mean;
    }
    let c = by_task.len() as f64;
    let se = (c / (c - 1.0) * by_task.values().map(|s| s * s).sum::<f64>() / (d_u.len() as f64).powi(2)).sqrt();
    let test = &m["test"];
    assert!((test["diff"].as_f64().unwrap() - mean).abs() < 1e-12 && (test["se"].as_f64().unwrap() - se).abs() < 1e-12, "{test}");
    assert!((test["ci_low"].as_f64().unwrap() - (mean - 1.96 * se)).abs() < 1e-12, "{test}");
    assert_eq!(test["se_level"], "task");

    // Text, HTML page in the report, --html.
    let text = String::from_utf8(ws.run(&["diff", "p.yaml"]).stdout).unwrap();
    assert!(text.contains(&format!("changed {cell}: {reason}")) && text.contains(&format!("right→wrong {r2w}, wrong→right {w2r}")), "{text}");
    let page = std::fs::read_to_string(ws.path("reports/p/diff.html")).unwrap();
    assert!(page.contains("Changes since the previous run") && page.contains("Content-Security-Policy") && !page.contains("<script"), "diff.html");
    assert!(page.contains(&format!("<tr><td>{cell}</td><td>{reason}</td></tr>")), "{page}");
    let out = ws.run(&["diff", "p.yaml", "--html", "d.html"]);
    let written = std::fs::read_to_string(ws.path("d.html")).unwrap();
    assert!(out.status.success() && written.contains(cell) && written.contains("model.params.salt: 1 → 2"), "--html writes the page");

    // Another cache as the previous run: the same cells, reasons and flips.
    let (code, other) = ws.run_json(&["diff", "p.yaml", "--against", before_cache.to_str().unwrap(), "--json"]);
    assert_eq!(code, 0, "{other}");
    assert_eq!((&other["cells_changed"], &other["models"]), (&d["cells_changed"], &d["models"]));
}

/// Issue 45 items 6 and 9: `items.csv` ids with a line break, a comma, a quote or a leading
/// `=`, `+`, `-` or `@` are written quoted (the formula-like ones with a `'` in front, so a
/// spreadsheet shows them as text) and read back by `diff` as they were: every unit is
/// compared, and `diff.html` is written.
#[test]
fn diff_reads_back_ids_with_line_breaks_and_formula_guards() {
    const IDS: &[&str] = &["a\nb", "c,d", "say \"hi\"", "=1+1", "-5", "@SUM(A1)", "+x", "'-q"];
    let ws = Workspace::new();
    let rows: String = IDS
        .iter()
        .enumerate()
        .map(|(i, id)| format!("{}\n", serde_json::json!({"id": id, "input": format!("q{i}"), "target": format!("t{}", i % 3)})))
        .collect();
    ws.write("d.jsonl", &rows);
    let grid = "name: ids\nmodels:\n  - {id: r, provider: builtin, model: random, params: {salt: 1}}\ntasks:\n  - benchmark: qa\n    params: {dataset: d.jsonl, scorers: [match]}\nseeds: [0]\n";
    ws.write("p.yaml", grid);
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    let items = std::fs::read_to_string(ws.path("reports/ids/items.csv")).unwrap();
    for written in ["\"a\nb\"", "\"c,d\"", "\"say \"\"hi\"\"\"", "\"'=1+1\"", "\"'-5\"", "\"'@SUM(A1)\"", "\"'+x\"", "\"''-q\""] {
        assert!(items.contains(&format!(",{written},")), "{written} in {items}");
    }
    assert!(items.lines().skip(1).all(|l| !l.ends_with(',') && !l.ends_with('\'')), "the score stays a number: {items}");
    ws.write("p.yaml", &grid.replace("salt: 1", "salt: 2"));
    assert_eq!(ws.run_json(&["run", "p.yaml", "--json"]).0, 0);
    assert!(ws.path("reports/ids/diff.html").is_file(), "the report's diff page is written");
    let (code, d) = ws.run_json(&["diff", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{d}");
    assert_eq!(d["models"][0]["n_pairs"], IDS.len(), "every id matched across the two runs: {d}");
    for flip in d["models"][0]["flips"].as_array().unwrap() {
        assert!(IDS.contains(&flip["item"].as_str().unwrap()), "{flip}");
    }
}

/// Issue 45 item 6: a row whose id is another, id-less row's index would share its name in
/// `items.csv`; `validate` refuses it, naming both places.
#[test]
fn an_id_equal_to_an_unnamed_rows_index_is_refused() {
    let ws = Workspace::new();
    ws.write(
        "d.jsonl",
        "{\"input\": \"q0\", \"target\": \"a\"}\n{\"input\": \"q1\", \"target\": \"b\"}\n{\"id\": \"1\", \"input\": \"q2\", \"target\": \"c\"}\n",
    );
    ws.write("p.yaml", "name: ids\nmodels:\n  - {id: r, provider: builtin, model: random}\ntasks:\n  - benchmark: qa\n    params: {dataset: d.jsonl, scorers: [match]}\nseeds: [0]\n");
    let out = ws.run(&["validate", "p.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("d.jsonl:3") && stderr.contains("id `1` is also the name of the row without an id at line 2"), "{stderr}");
    // An id that names no id-less row's index is fine.
    ws.write("d.jsonl", "{\"input\": \"q0\", \"target\": \"a\"}\n{\"id\": \"0x\", \"input\": \"q1\", \"target\": \"b\"}\n");
    assert!(ws.run(&["validate", "p.yaml"]).status.success());
}
