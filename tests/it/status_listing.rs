//! `status` on a grid large enough that it reads cache buckets whole instead of asking
//! for each entry: it still answers what the cache holds now, whatever was removed or
//! added behind its back since the last run.

use serde_json::Value;

use crate::support::Workspace;

const GRID: &str = "name: grid\nmodels:\n  - {id: oracle, provider: builtin, model: oracle}\ntasks:\n  - benchmark: eleusis\n    params: {max_turns: 30}\nseeds: {from: 0, to: 99}\n";
const CELLS: u64 = 26 * 100;
const CELL: &str = "oracle/eleusis/only_aces/7";

fn status(ws: &Workspace, p: &str) -> Value {
    let (code, v) = ws.run_json(&["status", p, "--json"]);
    assert_eq!(code, 0, "{v}");
    v
}

/// The cells `status --json` calls anything but cached.
fn not_cached(v: &Value) -> Vec<(String, String)> {
    let cells = v["cells"].as_array().expect("cells");
    cells.iter().filter(|c| c["state"] != "cached").map(|c| (c["cell"].as_str().unwrap().to_owned(), c["reason"].as_str().unwrap_or("").to_owned())).collect()
}

/// `status --explain`'s text and the episode and score keys it names.
fn explain(ws: &Workspace, p: &str, cell: &str) -> (String, String, String) {
    let text = String::from_utf8(ws.run(&["status", p, "--explain", cell]).stdout).unwrap();
    let key = |label: &str| text.lines().find_map(|l| l.strip_prefix(label)).and_then(|l| l.split_whitespace().next()).expect(label).to_owned();
    let (episode, score) = (key("episode  "), key("score    "));
    (text, episode, score)
}

fn entry(ws: &Workspace, key: &str) -> std::path::PathBuf {
    ws.path(&format!("cache/v1/steps/{}/{key}.json", &key[..2]))
}

#[test]
fn status_sees_an_entry_removed_then_put_back_by_another_process() {
    let ws = Workspace::new();
    let p = ws.write("grid.yaml", GRID);
    let p = p.to_str().unwrap();
    let (code, v) = ws.run_json(&["run", p, "--json"]);
    assert_eq!((code, v["cells_run"].as_u64()), (0, Some(CELLS)), "{v}");
    assert_eq!(status(&ws, p)["cells_cached"], CELLS);
    let (cached, episode, score) = explain(&ws, p, CELL);
    assert_eq!(cached, format!("cell     {CELL}\nstate    cached\nepisode  {episode} (cached)\nscore    {score} (cached)\nprevious episode key {episode}\n"));

    let path = entry(&ws, &episode);
    let aside = ws.path("episode.json");
    std::fs::rename(&path, &aside).unwrap();
    let v = status(&ws, p);
    assert_eq!(v["cells_cached"], CELLS - 1);
    assert_eq!(not_cached(&v), [(CELL.to_owned(), "episode result missing from cache (removed or corrupted)".to_owned())]);
    let (text, _, _) = explain(&ws, p, CELL);
    assert_eq!(
        text,
        format!(
            "cell     {CELL}\nstate    stale\nepisode  {episode} (not cached)\nscore    {score} (cached)\nprevious episode key {episode}\nreason   episode result missing from cache (removed or corrupted)\n"
        )
    );

    // Another process writes it back: cached again, nothing remembered from the last look.
    std::fs::copy(&aside, &path).unwrap();
    assert_eq!(status(&ws, p)["cells_cached"], CELLS);
    assert_eq!(explain(&ws, p, CELL).0, cached);
}

#[test]
fn status_sees_a_whole_cache_bucket_removed_and_restored() {
    let ws = Workspace::new();
    let p = ws.write("grid.yaml", GRID);
    let p = p.to_str().unwrap();
    assert_eq!(ws.run_json(&["run", p, "--json"]).0, 0);
    let (_, _, score) = explain(&ws, p, CELL);
    let bucket = entry(&ws, &score).parent().unwrap().to_owned();
    let held = std::fs::read_dir(&bucket).unwrap().count();
    let aside = ws.path("bucket");
    std::fs::rename(&bucket, &aside).unwrap();

    let missing = not_cached(&status(&ws, p));
    assert!(missing.iter().any(|(cell, _)| cell == CELL), "{missing:?}");
    assert!(!missing.is_empty() && missing.len() <= held, "{} cells not cached, {held} entries removed", missing.len());
    for (cell, reason) in &missing {
        let (text, ..) = explain(&ws, p, cell);
        let gone = text.lines().any(|l| {
            ["episode  ", "score    "].iter().any(|label| l.strip_prefix(label).is_some_and(|k| k.starts_with(&score[..2]) && k.ends_with("(not cached)")))
        });
        assert!(gone && reason.contains("missing from cache"), "{cell}: {reason}\n{text}");
    }

    std::fs::rename(&aside, &bucket).unwrap();
    assert_eq!(status(&ws, p)["cells_cached"], CELLS);
}

/// Every bucket's modification time put an hour back, as a cache left alone looks.
fn settle_buckets(ws: &Workspace) {
    let hour_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(3600);
    for bucket in std::fs::read_dir(ws.path("cache/v1/steps")).unwrap() {
        std::fs::File::open(bucket.unwrap().path()).unwrap().set_modified(hour_ago).unwrap();
    }
}

#[test]
fn status_remembers_settled_buckets_and_still_sees_what_changed_behind_its_back() {
    let ws = Workspace::new();
    let p = ws.write("grid.yaml", GRID);
    let p = p.to_str().unwrap();
    assert_eq!(ws.run_json(&["run", p, "--json"]).0, 0);
    settle_buckets(&ws);
    assert_eq!(status(&ws, p)["cells_cached"], CELLS);
    let remembered = std::fs::read_dir(ws.path("cache/v1/listings")).map(Iterator::count).unwrap_or(0);
    assert_eq!(remembered, 256, "every settled bucket's listing is remembered");
    assert_eq!(status(&ws, p)["cells_cached"], CELLS, "answered from the listings");

    let (_, episode, _) = explain(&ws, p, CELL);
    let path = entry(&ws, &episode);
    let aside = ws.path("episode.json");
    std::fs::rename(&path, &aside).unwrap();
    let v = status(&ws, p);
    assert_eq!(not_cached(&v), [(CELL.to_owned(), "episode result missing from cache (removed or corrupted)".to_owned())]);
    settle_buckets(&ws);
    assert_eq!(status(&ws, p)["cells_cached"], CELLS - 1, "the bucket is read again and remembered without the entry");
    std::fs::copy(&aside, &path).unwrap();
    assert_eq!(status(&ws, p)["cells_cached"], CELLS, "an entry another process put back is there at once");

    // A listing that no longer says what the directory holds is never believed: a bucket
    // read while settled, then an entry removed and the bucket's time put back by hand,
    // still changes the directory's change time.
    settle_buckets(&ws);
    assert_eq!(status(&ws, p)["cells_cached"], CELLS);
    std::fs::remove_file(&path).unwrap();
    settle_buckets(&ws);
    assert_eq!(status(&ws, p)["cells_cached"], CELLS - 1);
}

#[test]
fn status_into_a_closed_pipe_neither_panics_nor_fails() {
    let ws = Workspace::new();
    let p = ws.write("grid.yaml", GRID);
    let p = p.to_str().unwrap();
    assert_eq!(ws.run_json(&["run", p, "--json"]).0, 0);
    for args in [vec!["status", p], vec!["status", p, "--json"]] {
        let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
            .args(&args)
            .current_dir(ws.path(""))
            .env_remove("EVALGRID_CACHE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        let out = child.wait_with_output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && !stderr.contains("panicked"), "{args:?}: {:?}\n{stderr}", out.status);
    }
}
