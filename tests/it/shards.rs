//! `run --shard i/n` and `--class`: disjoint parts that together run the whole grid once,
//! and a report built from the shared cache afterwards equal to a one-process run's.

use crate::support::Workspace;

#[test]
fn three_shards_run_the_quickstart_once_and_the_report_equals_a_single_run() {
    let single = Workspace::new();
    single.quickstart();
    let (code, v) = single.run_json(&["run", "quickstart.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let total = v["cells_total"].as_u64().unwrap();

    let ws = Workspace::new();
    ws.quickstart();
    let mut ran = 0;
    for i in 0..3 {
        let shard = format!("{i}/3");
        let (code, v) = ws.run_json(&["run", "quickstart.yaml", "--json", "--shard", &shard]);
        assert_eq!(code, 0, "{v}");
        assert_eq!(v["cells_cached"], 0, "shards are disjoint: {v}");
        ran += v["cells_run"].as_u64().unwrap();
        assert!(!ws.path("reports/quickstart/summary.csv").exists(), "a shard builds no report");
    }
    assert_eq!(ran, total, "the shards cover the grid");
    // Each shard published its progress; `status` shows all of them, finished.
    let (_, st) = ws.run_json(&["status", "quickstart.yaml", "--json"]);
    let shards = st["shards"].as_array().unwrap_or_else(|| panic!("{st}"));
    assert_eq!(shards.len(), 3, "{st}");
    let done: u64 = shards.iter().map(|s| s["done"].as_u64().unwrap()).sum();
    assert_eq!(done, total, "{st}");
    assert!(shards.iter().all(|s| s["finished"] == true && s["stale"] == false), "{st}");
    let text = String::from_utf8_lossy(&ws.run(&["status", "quickstart.yaml"]).stdout).into_owned();
    assert!(text.contains("shard 0/3: finished") && text.contains("shard 2/3: finished"), "{text}");
    // A shard whose machine died mid-run stops updating its record: `status` says so.
    let dir = std::fs::read_dir(ws.path("cache/v1/progress")).unwrap().next().unwrap().unwrap().path();
    let record = dir.join("1-of-3.json");
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    v["finished"] = false.into();
    v["updated_at"] = 1_000.into();
    std::fs::write(&record, v.to_string()).unwrap();
    let text = String::from_utf8_lossy(&ws.run(&["status", "quickstart.yaml"]).stdout).into_owned();
    assert!(text.contains("shard 1/3: STALE"), "{text}");
    // Any shard again: everything cached.
    let (_, v) = ws.run_json(&["run", "quickstart.yaml", "--json", "--shard", "1/3"]);
    assert_eq!(v["cells_run"], 0, "{v}");
    let (code, v) = ws.run_json(&["report", "quickstart.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    for file in ["summary.csv", "summary.md", "index.html"] {
        let a = std::fs::read(single.path(&format!("reports/quickstart/{file}"))).unwrap();
        let b = std::fs::read(ws.path(&format!("reports/quickstart/{file}"))).unwrap();
        assert!(a == b, "{file} differs from the one-process run");
    }
    // The quickstart's built-in agents are all `cpu`: the `api` class is empty.
    let (code, v) = ws.run_json(&["run", "quickstart.yaml", "--json", "--class", "api"]);
    assert_eq!((code, v["cells_total"].as_u64()), (0, Some(0)), "{v}");
    let out = ws.run(&["run", "quickstart.yaml", "--shard", "3/3"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
