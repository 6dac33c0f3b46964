//! A damaged cache entry is a miss, never a reason to stop every later run (issue 21): a
//! damaged report blob is rendered again, a directory where an entry belongs is replaced,
//! `cache gc` removes both, and a damaged failure record still counts as a failure that
//! `--retry-errors` retries.

use std::path::{Path, PathBuf};

use evalgrid::providers::mock::{Fault, FaultPlan, MockConfig};
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::{Workspace, snapshot_dir};

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() { stack.push(p) } else { out.push(p) }
        }
    }
    out.sort();
    out
}

/// The step entry files of `kind` (entries are a header line, then JSON with `kind`).
fn entries_of(cache: &Path, kind: &str) -> Vec<PathBuf> {
    files_under(&cache.join("v1/steps"))
        .into_iter()
        .filter(|p| {
            let bytes = std::fs::read(p).unwrap_or_default();
            let Some(nl) = bytes.iter().position(|b| *b == b'\n') else { return false };
            serde_json::from_slice::<Value>(&bytes[nl + 1..]).is_ok_and(|v| v["kind"] == kind)
        })
        .collect()
}

fn flip_every_blob(cache: &Path) -> usize {
    let blobs = files_under(&cache.join("v1/blobs"));
    for b in &blobs {
        let mut bytes = std::fs::read(b).unwrap();
        let n = bytes.len() / 2;
        bytes[n] ^= 0x20;
        std::fs::write(b, bytes).unwrap();
    }
    blobs.len()
}

#[test]
fn damaged_blobs_and_entries_are_misses_that_run_repairs_and_gc_removes() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let p = p.to_str().unwrap();
    let (code, v) = ws.run_json(&["run", p, "--json"]);
    assert_eq!(code, 0, "{v}");
    let reports = ws.path("reports");
    let good = snapshot_dir(&reports);
    let cache = ws.path("cache");

    // Every blob of the report damaged: `run` and `report` render it again.
    assert!(flip_every_blob(&cache) > 0);
    std::fs::remove_dir_all(&reports).unwrap();
    let (code, v) = ws.run_json(&["run", p, "--json"]);
    assert_eq!(code, 0, "a damaged report blob must not fail the run: {v}");
    assert_eq!(v["cells_run"], 0, "{v}");
    assert_eq!(snapshot_dir(&reports), good, "the report rendered again is the same report");
    let verify = ws.run(&["cache", "verify"]);
    assert!(verify.status.success(), "the run replaced the damaged blobs: {}", String::from_utf8_lossy(&verify.stdout));
    assert!(flip_every_blob(&cache) > 0);
    let out = ws.run(&["report", p]);
    assert!(out.status.success(), "`report` too: {}", String::from_utf8_lossy(&out.stderr));

    // `cache gc` (no --keep) removes damaged blobs; `verify` named them first.
    assert!(flip_every_blob(&cache) > 0);
    let verify = ws.run(&["cache", "verify"]);
    assert_eq!(verify.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("does not match its hash"));
    assert!(ws.run(&["cache", "gc"]).status.success());
    assert!(ws.run(&["cache", "verify"]).status.success(), "gc left a damaged blob");
    let (code, v) = ws.run_json(&["run", p, "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(snapshot_dir(&reports), good);

    // A directory where a score entry belongs: the cell is scored again, the entry replaced.
    let scores = entries_of(&cache, "score");
    assert!(!scores.is_empty());
    for s in &scores {
        std::fs::remove_file(s).unwrap();
        std::fs::create_dir_all(s.join("junk")).unwrap();
    }
    let (code, v) = ws.run_json(&["run", p, "--json"]);
    assert_eq!(code, 0, "an unreadable score entry must be a miss: {v}");
    assert_eq!(v["cells_run"].as_u64(), Some(scores.len() as u64), "{v}");
    assert!(scores.iter().all(|s| s.is_file()), "the directories were replaced by entries");
    assert!(ws.run(&["cache", "verify"]).status.success());
    assert_eq!(snapshot_dir(&reports), good);

    // `cache verify` names a directory in an entry's place, and `cache gc` removes it.
    std::fs::remove_file(&scores[0]).unwrap();
    std::fs::create_dir_all(scores[0].join("junk")).unwrap();
    let verify = ws.run(&["cache", "verify"]);
    assert_eq!(verify.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&verify.stdout).contains(&scores[0].file_name().unwrap().to_string_lossy().into_owned()));
    assert!(ws.run(&["cache", "gc"]).status.success());
    assert!(!scores[0].exists(), "gc left the directory in place");
    let (code, _) = ws.run_json(&["report", p, "--json"]);
    assert_eq!(code, 0);
}

#[test]
fn a_damaged_failure_record_is_still_a_failure_that_retry_errors_retries() {
    let mock = Mock::start(MockConfig {
        faults: FaultPlan::rate(1.0, vec![Fault::Status { status: 400, message: "mock bad request".into() }], 1),
        ..MockConfig::default()
    });
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: damaged-failure\nmodels:\n  - {{id: m, provider: openai, model: mock-1, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 1, max_concurrency: 8}}\n",
            mock.url()
        ),
    );
    let run = |args: &[&str]| ws.run_json(&[&["--data-dir", data_dir().to_str().unwrap()][..], args].concat());
    let (code, v) = run(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 1, "{v}");
    assert_eq!(v["cells_failed"], 2, "{v}");
    let records = files_under(&ws.path("cache/v1/failures"));
    assert!(!records.is_empty());
    // One record torn, the other replaced by a directory.
    std::fs::write(&records[0], b"{\"key\": \"tor").unwrap();
    for r in &records[1..] {
        std::fs::remove_file(r).unwrap();
        std::fs::create_dir_all(r.join("junk")).unwrap();
    }
    let (_, status) = run(&["status", "p.yaml", "--json"]);
    assert_eq!(status["cells_failed"], 2, "a damaged failure record is still a failure, not `missing`: {status}");
    let reason = status["cells"][0]["reason"].as_str().unwrap_or_default().to_owned();
    assert!(reason.contains("damaged"), "{reason}");

    mock.server().set_faults(FaultPlan::default());
    let (code, v) = run(&["run", "p.yaml", "--json", "--retry-errors"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 2, "--retry-errors retries cells whose failure record is damaged: {v}");
    assert_eq!(v["cells_skipped"], 0, "{v}");
    let (_, status) = run(&["status", "p.yaml", "--json"]);
    assert_eq!(status["cells_cached"], 2, "{status}");
}
