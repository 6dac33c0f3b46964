//! Issue 45 item 5: stale weights or templates never answer. A served model (a stand-in for
//! `llama-server`, `tests/it/fake_llama_server.py`, whose answers name the bytes it was
//! started with) is asked again when its GGUF is replaced by other bytes of the same size with
//! the mtime put back, and when its chat template, given as `--chat-template-file=FILE`,
//! changes; `cache verify --weights` finds and corrects a remembered hash that no metadata
//! shows to be wrong.

use std::path::Path;

use serde_json::Value;

use crate::support::{Workspace, repo};

const PIPELINE: &str = "name: stale
models:
  - id: local
    provider: openai
    model: m
    params: {max_tokens: 8}
    serve: {engine: llama.cpp, model: weights/model.gguf, args: ['--chat-template-file=t.jinja']}
tasks:
  - benchmark: qa
    params: {dataset: d.jsonl, scorers: [match]}
seeds: [0]
";

fn setup() -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path("bin")).unwrap();
    std::os::unix::fs::symlink(repo().join("tests/it/fake_llama_server.py"), ws.path("bin/llama-server")).unwrap();
    std::fs::create_dir_all(ws.path("weights")).unwrap();
    std::fs::write(ws.path("weights/model.gguf"), b"GGUF weights version one").unwrap();
    ws.write("t.jinja", "{{ messages }} one");
    ws.write("d.jsonl", "{\"id\": \"q\", \"input\": \"Say hi\", \"target\": \"hi\"}\n");
    ws.write("p.yaml", PIPELINE);
    ws
}

fn run(ws: &Workspace, args: &[&str]) -> (i32, Value, String) {
    let path = format!("{}:{}", ws.path("bin").display(), std::env::var("PATH").unwrap_or_default());
    let out = ws.cmd().args(args).env("PATH", path).env("FAKE_LLAMA_CALLS", ws.path("calls")).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    (out.status.code().unwrap_or(-1), serde_json::from_str(stdout.trim()).unwrap_or(Value::Null), String::from_utf8_lossy(&out.stderr).into_owned())
}

fn calls(ws: &Workspace) -> usize {
    std::fs::read_to_string(ws.path("calls")).map_or(0, |t| t.lines().count())
}

/// Other bytes of the same length, with the file's mtime put back.
fn replace_keeping_size_and_mtime(path: &Path, bytes: &[u8]) {
    let meta = std::fs::metadata(path).unwrap();
    assert_eq!(meta.len(), bytes.len() as u64);
    std::fs::write(path, bytes).unwrap();
    std::fs::File::options().write(true).open(path).unwrap().set_modified(meta.modified().unwrap()).unwrap();
    assert_eq!(std::fs::metadata(path).unwrap().modified().unwrap(), meta.modified().unwrap());
}

#[test]
fn replaced_weights_and_templates_are_asked_again() {
    let ws = setup();
    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}\n{stderr}");
    assert_eq!(calls(&ws), 1);
    let (code, v, _) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_cached"].as_u64(), calls(&ws)), (0, Some(1), 1), "{v}");

    replace_keeping_size_and_mtime(&ws.path("weights/model.gguf"), b"GGUF weights version two");
    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, calls(&ws)), (0, 2), "other weights are asked again: {v}\n{stderr}");

    // The template named in the `=` spelling is keyed by its content.
    ws.write("t.jinja", "{{ messages }} two, longer");
    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, calls(&ws)), (0, 3), "another template is asked again: {v}\n{stderr}");
    let (code, v, _) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_cached"].as_u64(), calls(&ws)), (0, Some(1), 3), "{v}");

    // A remembered hash gone wrong behind unchanged metadata: only reading finds it.
    let (code, v, _) = run(&ws, &["cache", "verify", "--weights", "--json"]);
    assert_eq!((code, v["weights"]["stale"].as_array().map(Vec::len)), (0, Some(0)), "{v}");
    assert_eq!(v["weights"]["rehashed"], 2, "the weights and the template: {v}");
    let memo = ws.path("cache/v1/memo");
    let weights = ws.path("weights/model.gguf");
    let truth = blake3::hash(&std::fs::read(&weights).unwrap()).to_hex().to_string();
    let wrong = "0".repeat(64);
    for entry in std::fs::read_dir(&memo).unwrap() {
        let slot = entry.unwrap().path();
        let mut record: Value = serde_json::from_slice(&std::fs::read(&slot).unwrap()).unwrap();
        if record["blake3"] == truth.as_str() {
            record["blake3"] = Value::from(wrong.clone());
            std::fs::write(&slot, serde_json::to_vec(&record).unwrap()).unwrap();
        }
    }
    let (code, v, _) = run(&ws, &["cache", "verify", "--weights", "--json"]);
    assert_eq!(code, 1, "{v}");
    let stale = &v["weights"]["stale"][0];
    assert_eq!((stale["remembered"].as_str(), stale["now"].as_str()), (Some(wrong.as_str()), Some(truth.as_str())), "{v}");
    assert!(stale["path"].as_str().is_some_and(|p| p.ends_with("weights/model.gguf")), "{v}");
    let (code, v, _) = run(&ws, &["cache", "verify", "--weights", "--json"]);
    assert_eq!((code, v["weights"]["stale"].as_array().map(Vec::len)), (0, Some(0)), "corrected: {v}");
    let (code, v, _) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_cached"].as_u64(), calls(&ws)), (0, Some(1), 3), "{v}");
}
