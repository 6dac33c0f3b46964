//! WeirdML offline: the scripted spec episode through the real sandbox.

use crate::support::{Workspace, repo};

fn numpy_available() -> bool {
    std::process::Command::new("python3").args(["-c", "import numpy"]).status().is_ok_and(|s| s.success())
}

#[test]
fn scripted_episodes_reproduce_the_spec_and_rerun_cached() {
    if !numpy_available() {
        eprintln!("SKIPPED: python3 cannot import numpy (the README's setup installs it)");
        return;
    }
    let ws = Workspace::new();
    let text = std::fs::read_to_string(repo().join("pipelines/weirdml-mini.yaml")).unwrap();
    ws.write("w.yaml", &text);
    let (code, v) = ws.run_json(&["run", "w.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 2);
    let csv = std::fs::read_to_string(ws.path("reports/weirdml-mini/summary.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let row =
        |model: &str| -> Vec<String> { csv.lines().find(|l| l.starts_with(&format!("weirdml,{model},*,"))).unwrap().split(',').map(str::to_owned).collect() };
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let spec = row("scripted-spec");
    // Spec §6.6: run accuracy 0.535, failure rate 4/5.
    assert_eq!(spec[col("task_score")], "0.535");
    assert_eq!(spec[col("failure_rate")], "0.8");
    assert_eq!(row("scripted-reference")[col("task_score")], "0.995");
    let (_, v) = ws.run_json(&["run", "w.yaml", "--json"]);
    assert_eq!(v["cells_cached"], 2);
    // Each code run is its own cached step (two of the ten answers had no code).
    let stats: serde_json::Value = serde_json::from_slice(&ws.run(&["cache", "stats", "--json"]).stdout).unwrap();
    assert_eq!(stats["entries"]["submission"], 8, "{stats}");
}
