//! `cache verify` finds corrupted entries; a run treats them as missing.

use crate::support::Workspace;

#[test]
fn verify_reports_a_flipped_byte_and_run_repairs_it() {
    let ws = Workspace::new();
    let p = ws.quickstart();
    let p = p.to_str().unwrap();
    let (code, _) = ws.run_json(&["run", p, "--json", "--filter", "model=oracle,seed=0"]);
    assert_eq!(code, 0);
    assert!(ws.run(&["cache", "verify"]).status.success());
    // Corrupt one step entry.
    let steps = ws.path("cache/v1/steps");
    let shard = std::fs::read_dir(&steps).unwrap().next().unwrap().unwrap().path();
    let file = std::fs::read_dir(&shard).unwrap().next().unwrap().unwrap().path();
    let mut bytes = std::fs::read(&file).unwrap();
    let n = bytes.len();
    bytes[n - 3] ^= 0x01;
    std::fs::write(&file, bytes).unwrap();
    let out = ws.run(&["cache", "verify"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("checksum mismatch"));
    // The run recomputes the bad entry instead of trusting it.
    let (code, v) = ws.run_json(&["run", p, "--json", "--filter", "model=oracle,seed=0"]);
    assert_eq!(code, 0);
    assert_eq!(v["cells_run"], 1, "{v}");
    assert!(ws.run(&["cache", "verify"]).status.success());
    // gc with the pipeline to keep removes nothing it needs.
    assert!(ws.run(&["cache", "gc", "--keep", p]).status.success());
    let (_, v) = ws.run_json(&["run", p, "--json", "--filter", "model=oracle,seed=0"]);
    assert_eq!(v["cells_run"], 0);
}
