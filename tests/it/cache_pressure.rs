//! The cache under pressure (issue 21): two processes on one cache pay each call once, and a
//! full disk stops new calls at the first failed write, so the paid answers lost are at most
//! those already in flight.

use std::time::Duration;

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, Script};
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// Three BBEH Mini tasks (60 single-shot items).
fn pipeline(url: &str, concurrency: u32) -> String {
    format!(
        "name: pressure\nmodels:\n  - {{id: a, provider: openai, model: mock-1, base_url: \"{url}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa, dyck_languages, web_of_lies]\n    params: {{subset: mini}}\nseeds: [0]\ntransport: {{max_attempts: 2, retry_base_ms: 5, retry_max_ms: 20, max_concurrency: {concurrency}}}\n"
    )
}

#[test]
fn two_processes_on_one_cache_pay_each_call_once() {
    let mock = Mock::start(MockConfig { latency: Duration::from_millis(200), ..MockConfig::default() });
    let ws = Workspace::new();
    // Different cells (the mini subset of a task, and the whole task), so the episode locks do
    // not serialise them; the 20 calls of the mini subset are also calls of the whole task.
    let task = |name: &str, subset: &str, concurrency: u32| {
        format!(
            "name: {name}\nmodels:\n  - {{id: m, provider: openai, model: mock-1, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa]\n    params: {{subset: {subset}}}\nseeds: [0]\ntransport: {{max_concurrency: {concurrency}}}\n",
            mock.url()
        )
    };
    ws.write("mini.yaml", &task("mini", "mini", 20));
    ws.write("full.yaml", &task("full", "full", 64));
    let spawn = |pipeline: &str| {
        std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
            .current_dir(ws.dir.path())
            .env_remove("EVALGRID_CACHE")
            .env("EVALGRID_NO_PROGRESS", "1")
            .args(["--data-dir", data_dir().to_str().unwrap(), "run", pipeline, "--json"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn("mini.yaml"), spawn("full.yaml"));
    let mut live = 0;
    for child in [a, b] {
        let out = child.wait_with_output().unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
        assert_eq!(out.status.code(), Some(0), "{v}");
        live += v["calls"]["live"].as_u64().unwrap();
    }
    assert_eq!(mock.server().calls(), 200, "each of the 200 distinct calls is sent once across both processes");
    assert_eq!(live, 200);
    let claims = ws.path("cache/v1/locks/claims");
    let left: usize = std::fs::read_dir(&claims).map_or(0, |d| d.flatten().map(|shard| std::fs::read_dir(shard.path()).unwrap().count()).sum());
    assert_eq!(left, 0, "claims leave no lock file behind");
}

/// Whether this machine lets us mount a small tmpfs in a private mount namespace.
fn can_mount_tmpfs() -> bool {
    std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", "d=$(mktemp -d) && mount -t tmpfs -o size=64k none \"$d\" && umount \"$d\" && rmdir \"$d\""])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn a_full_disk_stops_new_calls_at_the_first_failed_write() {
    if !can_mount_tmpfs() {
        eprintln!("SKIPPED: cannot mount a tmpfs in a user namespace here (unshare -rm)");
        return;
    }
    // Every answer is 30 kB: a 600 kB cache fills after about twenty. Each takes 50 ms, far
    // longer than storing one: with an instant server a debug build on a loaded machine
    // receives answers faster than it stores them, and the answers waiting to be stored when
    // the disk fills (all kept in the journal) are not the calls this test counts.
    let big = "x".repeat(30_000);
    let mock = Mock::start(MockConfig {
        script: Script::function(move |_| MockOutcome::Reply(MockReply::text(big.clone()))),
        latency: Duration::from_millis(50),
        ..MockConfig::default()
    });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url(), 1));
    std::fs::create_dir_all(ws.path("cache")).unwrap();
    let script = format!(
        "mount -t tmpfs -o size=600k none cache && \"$0\" --data-dir '{data}' run p.yaml --json > run.json 2> run.err; echo $? > run.code; \"$0\" cache stats --json > stats.json",
        data = data_dir().display()
    );
    in_tmpfs_namespace(&ws, &script);
    let stderr = std::fs::read_to_string(ws.path("run.err")).unwrap();
    let code = std::fs::read_to_string(ws.path("run.code")).unwrap();
    assert_ne!(code.trim(), "0", "the run cannot succeed on a full disk: {stderr}");
    let stats: Value = serde_json::from_str(&std::fs::read_to_string(ws.path("stats.json")).unwrap()).unwrap();
    let cached = stats["entries"]["call"].as_u64().unwrap_or(0);
    let sent = mock.server().calls();
    assert!(cached > 0 && sent < 60, "the disk filled part-way: {sent} sent, {cached} cached\n{stderr}");
    // Not cached: the answer whose write failed, and the calls (max_concurrency: 1) sent
    // while it was being written; nothing sent after. Each of them is kept in the journal.
    let run = std::fs::read_to_string(ws.path("run.json")).unwrap();
    assert!(
        sent - cached <= 3,
        "{} paid answers not cached ({sent} sent, {cached} cached); at most those in flight may be\n{stderr}\n{run}\n{stats}",
        sent - cached
    );
    assert!(stderr.contains(&format!("note: {} paid answer(s) the full cache could not hold are kept in its journal", sent - cached)), "none lost: {stderr}");
    assert!(stderr.contains("disk is full"), "the message says why calls stopped: {stderr}");
}

#[test]
fn answers_in_flight_when_the_disk_fills_land_in_the_journal_and_the_next_run_stores_them() {
    if !can_mount_tmpfs() {
        eprintln!("SKIPPED: cannot mount a tmpfs in a user namespace here (unshare -rm)");
        return;
    }
    // 30 kB answers, 4 in flight, each taking 100 ms: when the 600 kB cache fills, up to four
    // paid answers are on their way.
    let big = "x".repeat(30_000);
    let mock = Mock::start(MockConfig {
        script: Script::function(move |_| MockOutcome::Reply(MockReply::text(big.clone()))),
        latency: Duration::from_millis(100),
        ..MockConfig::default()
    });
    let ws = Workspace::new();
    ws.write("p.yaml", &pipeline(&mock.url(), 4));
    std::fs::create_dir_all(ws.path("cache")).unwrap();
    // The first run on a full disk, then space freed (the tmpfs grown) and the same command.
    let script = format!(
        "mount -t tmpfs -o size=600k none cache && \"$0\" --data-dir '{data}' run p.yaml --json > run1.json 2> run1.err; echo $? > run1.code; \"$0\" cache stats --json > stats1.json; mount -o remount,size=16m cache && \"$0\" --data-dir '{data}' run p.yaml --json > run2.json 2> run2.err; echo $? > run2.code",
        data = data_dir().display()
    );
    in_tmpfs_namespace(&ws, &script);
    let read = |name: &str| std::fs::read_to_string(ws.path(name)).unwrap();
    let (err1, err2) = (read("run1.err"), read("run2.err"));
    assert_ne!(read("run1.code").trim(), "0", "the first run cannot succeed on a full disk: {err1}");
    let stats: Value = serde_json::from_str(&read("stats1.json")).unwrap();
    let cached = stats["entries"]["call"].as_u64().unwrap_or(0);
    let run2: Value = serde_json::from_str(&read("run2.json")).unwrap_or_else(|e| panic!("{e}: {err2}"));
    // What the first run paid for: every request the mock got before the second run.
    let sent = mock.server().calls() - run2["calls"]["live"].as_u64().unwrap();
    eprintln!("run 1: {sent} answers paid, {cached} cached\n{err1}\nrun 2: {err2}");
    assert!(cached > 0 && sent < 60, "the disk filled part-way: {sent} sent, {cached} cached\n{err1}");
    assert!(sent > cached, "answers were in flight when the disk filled: {sent} sent, {cached} cached\n{err1}");
    assert!(
        err1.contains(&format!("{} paid answer(s) the full cache could not hold are kept in its journal", sent - cached)),
        "every answer not cached is in the journal\n{err1}"
    );
    // The second run moves them into the cache, and pays only for the calls never sent.
    assert_eq!(read("run2.code").trim(), "0", "{err2}\n{run2}");
    assert!(err2.contains(&format!("moved {} paid answer(s)", sent - cached)), "{err2}");
    assert_eq!(mock.server().calls(), 60, "0 paid answers lost: each of the 60 calls paid once over both runs");
}

/// Runs `script` (`$0` is evalgrid) as root of its own user and mount namespace in the
/// workspace, where it may mount the tmpfs cache; the script itself must exit 0.
fn in_tmpfs_namespace(ws: &Workspace, script: &str) {
    let out = std::process::Command::new("unshare")
        .args(["-rm", "sh", "-c", script])
        .arg(assert_cmd::cargo::cargo_bin("evalgrid"))
        .current_dir(ws.dir.path())
        .env("EVALGRID_NO_PROGRESS", "1")
        .env_remove("EVALGRID_CACHE")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}
