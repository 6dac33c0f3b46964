//! Manifest parsing, defaults and validation.

use super::*;

fn fixture() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::create_dir_all(dir.path().join("data")).expect("mkdir");
    std::fs::create_dir_all(dir.path().join("hidden")).expect("mkdir");
    std::fs::write(dir.path().join("data/train.npy"), b"x").expect("write");
    std::fs::write(dir.path().join("data/test.npy"), b"x").expect("write");
    std::fs::write(dir.path().join("hidden/labels.npy"), b"x").expect("write");
    let json = r#"{"id": "t", "prompt": "p", "data_dir": "data", "train_files": ["train.npy"],
        "test_inputs": ["test.npy"], "labels_path": "hidden/labels.npy", "test_size": 10}"#;
    (dir, json.to_string())
}

#[test]
fn defaults_and_relative_paths() {
    let (dir, json) = fixture();
    let m = TaskManifest::from_json_str(&json, dir.path()).expect("valid");
    assert_eq!(m.predictions_file, "results/test_preds.txt");
    assert_eq!((m.time_limit_s, m.iterations, m.pred_width), (600.0, 5, 1));
    assert_eq!(m.data_dir, dir.path().join("data"));
    assert_eq!(m.time_limit(), std::time::Duration::from_secs(600));
}

#[test]
fn rejects_bad_manifests() {
    let (dir, json) = fixture();
    let bad = |patch: &str| {
        let text = json.replacen('{', &format!("{{{patch}, "), 1);
        TaskManifest::from_json_str(&text, dir.path())
    };
    assert!(matches!(bad(r#""unknown_key": 1"#), Err(TaskError::Parse(_))));
    assert!(matches!(bad(r#""time_limit_s": 0"#), Err(TaskError::Invalid { field: "time_limit_s", .. })));
    assert!(matches!(bad(r#""iterations": 0"#), Err(TaskError::Invalid { field: "iterations", .. })));
    for p in ["../x.txt", "/tmp/x", "preds.txt", "results"] {
        let r = bad(&format!(r#""predictions_file": "{p}""#));
        assert!(matches!(r, Err(TaskError::Invalid { field: "predictions_file", .. })), "{p}");
    }
    let inside = json.replace("hidden/labels.npy", "data/train.npy");
    let r = TaskManifest::from_json_str(&inside, dir.path());
    assert!(matches!(r, Err(TaskError::Invalid { field: "labels_path", .. })), "labels inside data_dir");
    let missing = json.replace("test.npy", "nope.npy");
    let r = TaskManifest::from_json_str(&missing, dir.path());
    assert!(matches!(r, Err(TaskError::Invalid { field: "test_inputs", .. })));
    let escape = json.replace("\"test.npy\"", "\"../hidden/labels.npy\"");
    let r = TaskManifest::from_json_str(&escape, dir.path());
    assert!(matches!(r, Err(TaskError::Invalid { field: "test_inputs", .. })));
}

#[test]
fn from_path_reports_missing_file() {
    let r = TaskManifest::from_path(std::path::Path::new("/nonexistent/task.json"));
    assert!(matches!(r, Err(TaskError::Read { .. })));
}
