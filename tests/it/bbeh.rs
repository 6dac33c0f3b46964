//! BBEH from a fresh workspace: install with pins, random baseline, cached
//! reruns, suffix edits, metric-only edits, and rescoring foreign outputs.

use serde_json::Value;

use crate::support::{Workspace, repo};

fn shared() -> std::path::PathBuf {
    repo().join("../shared/data/bbeh")
}

#[test]
fn fetch_refuses_a_corrupted_file_and_installs_nothing() {
    let ws = Workspace::new();
    // A copy of the data with one byte changed in one task file.
    let copy = ws.path("copy");
    let out = std::process::Command::new("cp").arg("-r").arg(shared()).arg(&copy).output().unwrap();
    assert!(out.status.success());
    let victim = copy.join("benchmark_tasks/bbeh_nycc/task.json");
    let mut perms = std::fs::metadata(&victim).unwrap().permissions();
    #[expect(clippy::permissions_set_readonly_false, reason = "the shared copy is read-only")]
    perms.set_readonly(false);
    std::fs::set_permissions(&victim, perms).unwrap();
    let mut bytes = std::fs::read(&victim).unwrap();
    bytes[1000] ^= 0x01;
    std::fs::write(&victim, bytes).unwrap();
    let out = ws.run(&["datasets", "fetch", "bbeh", "--from", "copy"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("bbeh_nycc/task.json"), "{err}");
    assert!(err.contains("a2b7") || err.matches(|c: char| c.is_ascii_hexdigit()).count() >= 128, "both hashes shown: {err}");
    assert!(!ws.path("data/bbeh").exists(), "nothing may be installed");
}

/// Paper Table 2, column "Random" (spec `bbeh.md` §5.2), in percent.
const PAPER_RANDOM: [(&str, f64); 23] = [
    ("boardgame_qa", 33.3),
    ("boolean_expressions", 20.0),
    ("buggy_tables", 0.0),
    ("causal_understanding", 38.0),
    ("disambiguation_qa", 21.0),
    ("dyck_languages", 1.4),
    ("geometric_shapes", 6.2),
    ("hyperbaton", 0.0),
    ("linguini", 0.0),
    ("movie_recommendation", 10.0),
    ("multistep_arithmetic", 0.0),
    ("nycc", 10.0),
    ("object_counting", 0.0),
    ("object_properties", 1.6),
    ("sarc_triples", 12.5),
    ("shuffled_objects", 14.3),
    ("spatial_reasoning", 5.2),
    ("sportqa", 0.0),
    ("temporal_sequence", 0.0),
    ("time_arithmetic", 0.5),
    ("web_of_lies", 5.5),
    ("word_sorting", 4.3),
    ("zebra_puzzles", 15.4),
];

#[test]
fn random_baseline_report_rerun_suffix_and_metric_edits() {
    let ws = Workspace::new();
    let out = ws.cmd().args(["datasets", "fetch", "bbeh", "--from"]).arg(shared()).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(repo().join("pipelines/bbeh-random.yaml")).unwrap();
    ws.write("bbeh-random.yaml", &text);
    let (code, v) = ws.run_json(&["run", "bbeh-random.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 46);
    let csv = std::fs::read_to_string(ws.path("reports/bbeh-random/summary.csv")).unwrap();
    let full_rows = csv.lines().filter(|l| l.starts_with("bbeh,random,bbeh_")).count();
    assert_eq!(full_rows, 23, "{csv}");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let model_row: Vec<&str> = csv.lines().find(|l| l.starts_with("bbeh,random,*,")).unwrap().split(',').collect();
    let micro: f64 = model_row[header.iter().position(|h| *h == "accuracy").unwrap()].parse().unwrap();
    let hm: f64 = model_row[header.iter().position(|h| *h == "harmonic_mean").unwrap()].parse().unwrap();
    // The paper's Random row (spec `bbeh.md` §5.2, Table 2, column "Random"; HM 2.4, micro 8.4):
    // every task within three standard errors of a 200-item sample (at least 1.5 points), the
    // harmonic mean within 0.3 and the micro average within 1.5 points.
    let acc = header.iter().position(|h| *h == "accuracy").unwrap();
    for (task, paper) in PAPER_RANDOM {
        let row: Vec<&str> = csv.lines().find(|l| l.starts_with(&format!("bbeh,random,bbeh_{task},"))).unwrap().split(',').collect();
        let ours = 100.0 * row[acc].parse::<f64>().unwrap();
        let p = paper / 100.0;
        let tolerance = (300.0 * (p * (1.0 - p) / 200.0).sqrt()).max(1.5);
        assert!((ours - paper).abs() <= tolerance, "{task}: ours {ours:.1} vs paper {paper} (±{tolerance:.1})");
    }
    assert!((hm - 2.4).abs() <= 0.3, "random harmonic mean {hm} vs paper 2.4");
    assert!((100.0 * micro - 8.4).abs() <= 1.5, "random micro accuracy {micro} vs paper 8.4");
    assert!(csv.lines().any(|l| l.starts_with("bbeh-mini,random,*,")), "mini has its own summary row");

    let (_, v) = ws.run_json(&["run", "bbeh-random.yaml", "--json"]);
    assert_eq!(v["cells_run"], 0);
    assert_eq!(v["cells_cached"], 46);

    // Metric-only edit: no episode runs, the report changes.
    let edited = text.replace("seeds: [0]", "seeds: [0]\nmetrics: {select: [accuracy, harmonic_mean]}");
    ws.write("bbeh-random.yaml", &edited);
    let (_, v) = ws.run_json(&["run", "bbeh-random.yaml", "--json"]);
    assert_eq!(v["cells_run"], 0);
    let csv = std::fs::read_to_string(ws.path("reports/bbeh-random/summary.csv")).unwrap();
    assert!(csv.starts_with("suite,model,task,cells,accuracy,accuracy_se,harmonic_mean,harmonic_mean_ci_low,harmonic_mean_ci_high,status\n"), "{csv}");

    // Suffix edit: every cell is stale, and status names the field.
    let edited = edited.replace("    select: all\n  - benchmark", "    select: all\n    params: {suffix: \"Answer briefly.\"}\n  - benchmark");
    ws.write("bbeh-random.yaml", &edited);
    let (_, s) = ws.run_json(&["status", "bbeh-random.yaml", "--json"]);
    assert_eq!(s["cells_stale"], 23, "{}", s["cells_stale"]);
    let stale: Vec<&Value> = s["cells"].as_array().unwrap().iter().filter(|c| c["state"] == "stale").collect();
    assert!(stale.iter().all(|c| c["reason"].as_str().unwrap().contains("task.params.suffix")), "{:?}", stale[0]);
}

#[test]
fn rescoring_foreign_responses() {
    let ws = Workspace::new();
    // Before the dataset is installed: invalid input (exit 2), as for `evalgrid run`.
    ws.write("early.jsonl", "{\"task\": \"bbeh_boardgame_qa\", \"index\": 0, \"response\": \"x\"}\n");
    let out = ws.run(&["bbeh", "score", "early.jsonl", "--out", "early"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let out = ws.cmd().args(["datasets", "fetch", "bbeh", "--from"]).arg(shared()).output().unwrap();
    assert!(out.status.success());
    ws.write(
        "r.jsonl",
        concat!(
            "{\"task\": \"bbeh_boardgame_qa\", \"index\": 0, \"response\": \"The answer is: unknown\"}\n",
            "{\"task\": \"boardgame_qa\", \"index\": 1, \"response\": \"I think it is proved\"}\n",
            "{\"task\": \"bbeh_linguini\", \"index\": 2, \"response\": \"The answer is: He really cried.\"}\n",
        ),
    );
    let out = ws.run(&["bbeh", "score", "r.jsonl", "--out", "rescored"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let items = std::fs::read_to_string(ws.path("rescored/items.csv")).unwrap();
    assert!(items.starts_with("task,index,extracted,correct"), "{items}");
    assert_eq!(items.lines().count(), 4);
    // Linguini 2 ends with "." and the official scorer strips it from the
    // prediction only: a correct answer is scored wrong (spec quirk 2).
    assert!(items.lines().any(|l| l.starts_with("bbeh_linguini,2,") && l.contains(",false,")), "{items}");
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(ws.path("rescored/summary.json")).unwrap()).unwrap();
    assert_eq!(summary["n"], 3);
    assert!(summary["harmonic_mean"].is_number());
    let bad = ws.write("bad.jsonl", "{\"task\": \"nope\", \"index\": 0, \"response\": \"x\"}\n");
    let out = ws.run(&["bbeh", "score", bad.to_str().unwrap(), "--out", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.jsonl:1: unknown task `nope`"));
}

#[test]
fn scripted_provider_answers_from_a_file_and_edits_invalidate() {
    let ws = Workspace::new();
    let out = ws.cmd().args(["datasets", "fetch", "bbeh", "--from"]).arg(shared()).output().unwrap();
    assert!(out.status.success());
    ws.write("replies.json", r#"{"replies": [{"contains": "proved", "reply": "The answer is: disproved"}], "default": "I do not know"}"#);
    ws.write(
        "p.yaml",
        "name: scripted\nmodels:\n  - {id: s, provider: scripted, model: canned, params: {file: replies.json}}\ntasks:\n  - {benchmark: bbeh, select: [boardgame_qa], params: {subset: mini}}\nseeds: [0]\n",
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["calls"]["live"], 20);
    let csv = std::fs::read_to_string(ws.path("reports/scripted/summary.csv")).unwrap();
    assert!(csv.lines().any(|l| l.starts_with("bbeh-mini,s,*,1,")), "{csv}");
    ws.write("replies.json", r#"{"default": "The answer is: unknown"}"#);
    let (_, s) = ws.run_json(&["status", "p.yaml", "--json"]);
    assert_eq!(s["cells_stale"], 1);
    assert!(s["cells"][0]["reason"].as_str().unwrap().contains("model.params.file_blake3"), "{s}");
}
