//! Crash safety: a run killed with SIGKILL at arbitrary moments resumes to
//! the same report as an uninterrupted run, and the cache stays valid.
//! Also: two processes sharing one cache never compute a step twice.

use std::process::Stdio;
use std::time::Duration;

use crate::support::{Workspace, assert_same_files};

/// Enough cells that a debug build takes a few seconds with one job.
const PIPELINE: &str = "name: crashy\nmodels:\n  - {id: r1, provider: builtin, model: random, params: {salt: 1}}\n  - {id: r2, provider: builtin, model: random, params: {salt: 2}}\n  - {id: o, provider: builtin, model: oracle}\ntasks:\n  - {benchmark: eleusis}\nseeds: {from: 0, to: 9}\n";

fn spawn_run(ws: &Workspace, jobs: &str) -> std::process::Child {
    let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"));
    c.current_dir(ws.dir.path())
        .args(["run", "crashy.yaml", "--json", "--jobs", jobs])
        .env("EVALGRID_NO_PROGRESS", "1")
        .env_remove("EVALGRID_CACHE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    c.spawn().expect("spawn evalgrid")
}

#[test]
fn kill_9_at_arbitrary_moments_then_resume_matches_uninterrupted_run() {
    let reference = Workspace::new();
    reference.write("crashy.yaml", PIPELINE);
    let (code, v) = reference.run_json(&["run", "crashy.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 780);

    let ws = Workspace::new();
    ws.write("crashy.yaml", PIPELINE);
    // Kill at several points: early, middle, late.
    for delay_ms in [40, 150, 400, 900] {
        let mut child = spawn_run(&ws, "2");
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        let out = ws.run(&["cache", "verify"]);
        assert!(out.status.success(), "cache corrupt after kill at {delay_ms} ms: {}", String::from_utf8_lossy(&out.stdout));
    }
    let (code, v) = ws.run_json(&["run", "crashy.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_total"], 780);
    assert_eq!(v["cells_failed"], 0);
    // No half-written file a killed run left (a page it was writing) is in the report.
    assert_same_files(&ws.path("reports"), &reference.path("reports"));
    let out = ws.run(&["cache", "verify"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn two_processes_on_one_cache_compute_each_cell_once() {
    let ws = Workspace::new();
    ws.write("crashy.yaml", PIPELINE);
    let a = spawn_run(&ws, "2");
    let b = spawn_run(&ws, "2");
    let outputs = [a.wait_with_output().expect("a"), b.wait_with_output().expect("b")];
    let mut run = 0;
    for out in &outputs {
        assert!(out.status.success());
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        assert_eq!(v["cells_failed"], 0);
        assert_eq!(v["cells_total"], 780);
        run += v["cells_run"].as_u64().unwrap();
    }
    assert_eq!(run, 780, "some cell was computed by both processes");
    assert!(ws.run(&["cache", "verify"]).status.success());
}

#[test]
fn ctrl_c_stops_at_once_and_the_rerun_resumes() {
    let ws = Workspace::new();
    ws.write("crashy.yaml", PIPELINE);
    let child = spawn_run(&ws, "1");
    // Interrupt once cells are landing (not before the handler exists on a loaded machine).
    let steps = ws.path("cache/v1/steps");
    let started = std::time::Instant::now();
    while std::fs::read_dir(&steps).map_or(0, Iterator::count) == 0 && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let status = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    // With one job the full grid takes seconds, so 300 ms lands mid-run.
    assert_eq!(v["interrupted"], true, "{v}");
    assert_eq!(out.status.code(), Some(130), "{v}");
    assert!(v["cells_run"].as_u64().unwrap() < 780);
    assert_eq!(v["report_dir"], serde_json::Value::Null);
    assert!(ws.run(&["cache", "verify"]).status.success());
    let (code, v) = ws.run_json(&["run", "crashy.yaml", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(v["cells_run"].as_u64().unwrap() + v["cells_cached"].as_u64().unwrap(), 780, "{v}");
}

/// What a writer killed mid-page leaves (a partial file no one holds) goes with the next
/// report into the folder; one a live writer holds (here Python's `flock`, the lock a
/// second evalgrid writing the same folder takes) stays, so that writer's rename succeeds.
#[test]
fn a_report_removes_the_partial_files_a_killed_writer_left_but_not_one_a_live_writer_holds() {
    let ws = Workspace::new();
    ws.write("crashy.yaml", &PIPELINE.replace("seeds: {from: 0, to: 9}", "seeds: [0]"));
    let (code, v) = ws.run_json(&["run", "crashy.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let reference = crate::support::snapshot_dir(&ws.path("reports"));
    let orphan = ws.write("reports/crashy/transcripts/.evalgrid-Kx81Qa.partial", "<html><body>half a pa");
    let held = ws.path("reports/crashy/.evalgrid-Zp02Lm.partial");
    let mut holder = std::process::Command::new("python3")
        .args(["-c", "import fcntl, sys\nf = open(sys.argv[1], 'w')\nfcntl.flock(f, fcntl.LOCK_EX)\nprint('held', flush=True)\nsys.stdin.read()\n"])
        .arg(&held)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(holder.stdout.take().unwrap()), &mut line).unwrap();
    assert_eq!(line.trim(), "held");
    let out = ws.run(&["report", "crashy.yaml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(!orphan.exists(), "the killed writer's partial page is gone");
    assert!(held.exists(), "the live writer's partial file is kept");
    drop(holder.stdin.take());
    holder.wait().unwrap();
    std::fs::remove_file(&held).unwrap();
    assert_eq!(crate::support::snapshot_dir(&ws.path("reports")), reference);
}
