//! Tests for `dataset.rs` against the shipped BBEH data and `datasets/bbeh.yaml`.

use super::super::testdata::data_dir;
use super::*;

fn sums() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(data_dir().join("SHA256SUMS")).unwrap();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (hash, path) = l.split_once("  ").unwrap();
            (path.to_string(), hash.to_string())
        })
        .collect()
}

fn manifest_from_sums() -> Manifest {
    let dir = data_dir();
    let files: Vec<serde_json::Value> = sums()
        .into_iter()
        .map(|(path, hash)| {
            let bytes = std::fs::metadata(dir.join(&path)).unwrap().len();
            serde_json::json!({"path": format!("bbeh/{path}"), "sha256": hash, "bytes": bytes})
        })
        .collect();
    let json = serde_json::json!({
        "name": "bbeh",
        "upstream": {"repo": "google-deepmind/bbeh",
                     "commit": "80d12ca916b7158f22293fcf3144f4d3d854d4be", "root": "bbeh"},
        "raw_url_template": "https://raw.githubusercontent.com/{repo}/{commit}/{path}",
        "files": files,
    });
    serde_json::from_value(json).unwrap()
}

#[test]
fn loads_all_tasks_with_expected_sizes() {
    let all = load_all(&data_dir()).unwrap();
    assert_eq!(all.len(), 4520);
    for task in TASKS {
        let n = all.iter().filter(|i| i.task == task).count();
        let expected = if task == "bbeh_disambiguation_qa" { 120 } else { 200 };
        assert_eq!(n, expected, "{task}");
    }
    let with_subtask: Vec<&Item> = all.iter().filter(|i| i.subtask.is_some()).collect();
    assert_eq!(with_subtask.len(), 29);
    assert!(with_subtask.iter().all(|i| i.task == "bbeh_spatial_reasoning" && i.subtask.as_deref() == Some("tree/cousin") && i.target.contains(", ")));
    assert!(all.iter().all(|i| i.target.trim() == i.target));
}

#[test]
fn mini_rule_selects_exactly_the_mini_file() {
    let dir = data_dir();
    let all = load_all(&dir).unwrap();
    let mut selected: Vec<(String, String)> = Vec::new();
    for task in TASKS {
        let items: Vec<&Item> = all.iter().filter(|i| i.task == task).collect();
        let idx = mini_indices(task, items.len());
        assert_eq!(idx.len(), MINI_PER_TASK);
        selected.extend(idx.iter().map(|&i| (items[i].input.clone(), items[i].target.clone())));
    }
    let raw = read_examples(&mini_path(&dir)).unwrap();
    let mut mini: Vec<(String, String)> = raw.into_iter().map(|e| (e.input, e.target)).collect();
    assert_eq!(mini.len(), 460);
    mini.sort();
    selected.sort();
    assert_eq!(mini, selected, "460/460 mini pairs equal the rule's selection");
}

#[test]
fn mini_indices_examples() {
    let a = mini_indices("bbeh_zebra_puzzles", 200);
    assert_eq!(a.first(), Some(&9));
    assert_eq!(a.last(), Some(&199));
    assert!(a.iter().all(|i| i % 10 == 9));
    let b = mini_indices("bbeh_disambiguation_qa", 120);
    assert_eq!(b.first(), Some(&5));
    assert_eq!(b.last(), Some(&119));
    assert!(b.iter().all(|i| i % 6 == 5));
    assert_eq!(mini_indices("x", 3), vec![0, 1, 2]);
}

#[test]
fn load_mini_maps_to_full_set_keys() {
    let dir = data_dir();
    let all = load_all(&dir).unwrap();
    let mini = load_mini(&dir, &all).unwrap();
    assert_eq!(mini.len(), 460);
    for task in TASKS {
        let n = all.iter().filter(|i| i.task == task).count();
        let rule = mini_indices(task, n);
        let mut got: Vec<usize> = mini.iter().filter(|m| m.item.task == task).map(|m| m.item.index).collect();
        got.sort_unstable();
        assert_eq!(got, rule, "{task}");
    }
    let p90 = &mini[90].item;
    assert_eq!((p90.task.as_str(), p90.index), ("bbeh_spatial_reasoning", 99));
    assert_eq!(p90.subtask.as_deref(), Some("tree/cousin"));
    assert!(mini.iter().enumerate().all(|(i, m)| m.position == i));
}

#[test]
fn checksums_verify_against_sums_file() {
    let m = manifest_from_sums();
    assert_eq!(m.files.len(), 24);
    verify_checksums(&data_dir(), &m).unwrap();
    assert_eq!(
        m.raw_url(&m.files[0]).unwrap(),
        "https://raw.githubusercontent.com/google-deepmind/bbeh/\
         80d12ca916b7158f22293fcf3144f4d3d854d4be/bbeh/benchmark_tasks/bbeh_boardgame_qa/task.json"
    );
    let total: u64 = m.files.iter().filter(|f| f.path.contains("benchmark_tasks")).map(|f| f.bytes).sum();
    assert_eq!(total, 17_723_234);
}

#[test]
fn checksum_mismatch_names_file_and_both_hashes() {
    let mut m = manifest_from_sums();
    let real = m.files[3].sha256.clone();
    m.files[3].sha256 = "0".repeat(64);
    let err = verify_checksums(&data_dir(), &m).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, DatasetError::ChecksumMismatch { .. }));
    assert!(msg.contains("bbeh_causal_understanding/task.json"), "{msg}");
    assert!(msg.contains(&"0".repeat(64)) && msg.contains(&real), "{msg}");

    let mut m = manifest_from_sums();
    m.files[0].bytes += 1;
    assert!(matches!(verify_checksums(&data_dir(), &m), Err(DatasetError::SizeMismatch { .. })));
}

#[test]
fn unsafe_manifest_paths_and_unknown_tasks_are_rejected() {
    let mut m = manifest_from_sums();
    for bad in ["bbeh/../etc/passwd", "/etc/passwd", "other/x.json", "bbeh/"] {
        m.files[0].path = bad.to_string();
        assert!(matches!(verify_checksums(&data_dir(), &m), Err(DatasetError::UnsafePath { .. })), "{bad}");
    }
    assert!(matches!(load_task(&data_dir(), "../mini"), Err(DatasetError::UnknownTask(_))));
}

#[test]
fn malformed_json_is_an_error_not_a_panic() {
    let root = std::env::temp_dir().join(format!("bbeh-test-{}", std::process::id()));
    let task = "bbeh_nycc";
    let file = task_path(&root, task);
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    for bad in [&b"{\"examples\": [{\"input\": 1}]}"[..], b"not json", b"\xff\xfe", b"{}"] {
        std::fs::write(&file, bad).unwrap();
        assert!(matches!(load_task(&root, task), Err(DatasetError::Json { .. })));
    }
    std::fs::remove_file(&file).unwrap();
    assert!(matches!(load_task(&root, task), Err(DatasetError::Io { .. })));
    let _ = std::fs::remove_dir_all(&root);
}

/// `datasets/bbeh.yaml` must pin exactly what `SHA256SUMS` and the files say. Parsed with
/// string operations because this module has no YAML dependency.
#[test]
fn yaml_manifest_matches_shipped_files() {
    let yaml = include_str!("../../../../datasets/bbeh.yaml");
    let dir = data_dir();
    let mut rows = Vec::new();
    for line in yaml.lines() {
        let Some(body) = line.trim().strip_prefix("- {").and_then(|l| l.strip_suffix('}')) else {
            continue;
        };
        let mut path = String::new();
        let mut sha = String::new();
        let mut bytes = 0u64;
        for field in body.split(", ") {
            let (k, v) = field.split_once(": ").unwrap();
            let v = v.trim_matches('"');
            match k {
                "path" => path = v.to_string(),
                "sha256" => sha = v.to_string(),
                "bytes" => bytes = v.parse().unwrap(),
                other => panic!("unexpected key {other}"),
            }
        }
        rows.push((path, sha, bytes));
    }
    let expected: Vec<(String, String, u64)> = sums()
        .into_iter()
        .map(|(p, h)| {
            let b = std::fs::metadata(dir.join(&p)).unwrap().len();
            (format!("bbeh/{p}"), h, b)
        })
        .collect();
    assert_eq!(rows, expected);
    assert!(yaml.contains("commit: \"80d12ca916b7158f22293fcf3144f4d3d854d4be\""));
    assert!(yaml.contains("repo: \"google-deepmind/bbeh\""));
    assert!(yaml.contains("raw_url_template: \"https://raw.githubusercontent.com/{repo}/{commit}/{path}\""));
}
