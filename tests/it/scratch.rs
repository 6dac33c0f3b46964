//! Scratch folders (issue 21): a clean run leaves none behind, and the run folder of a
//! WeirdML submission killed by kill -9 is removed by the next run.

use std::time::{Duration, Instant};

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, Script};

use crate::hostile::bwrap_works;
use crate::providers::Mock;
use crate::support::Workspace;

const PIPELINE: &str = "name: scratch\nmodels:\n  - {id: scripted, provider: builtin, model: scripted}\ntasks:\n  - {benchmark: weirdml, select: [mini-shapes], params: {iterations: 1, time_limit_s: 20}}\nseeds: [0]\n";

fn ours(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).unwrap().flatten().map(|e| e.file_name().to_string_lossy().into_owned()).filter(|n| n.starts_with("evalgrid-")).collect();
    names.sort();
    names
}

#[test]
fn killed_submissions_leave_no_run_folder_after_the_next_run_and_clean_runs_leave_none() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap is missing or cannot create namespaces here (apt-get install bubblewrap)");
        return;
    }
    let ws = Workspace::new();
    let tmp = ws.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    ws.write("p.yaml", PIPELINE);
    // kill -9 while the submission runs: its run folder is left behind.
    let mut child = spawn_run(&ws, &tmp, std::process::Stdio::null());
    let prefix = "evalgrid-run-";
    let started = Instant::now();
    while !ours(&tmp).iter().any(|n| n.starts_with(prefix)) {
        assert!(started.elapsed() < Duration::from_secs(60), "no run folder appeared: {:?}", ours(&tmp));
        assert!(child.try_wait().unwrap().is_none(), "the run ended before its submission was seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(ours(&tmp).iter().any(|n| n.starts_with(prefix)), "kill -9 leaves the run folder: {:?}", ours(&tmp));
    // The next run removes it, and leaves nothing of its own.
    let out = ws.cmd().env("TMPDIR", &tmp).env_remove("EVALGRID_UNSAFE_NO_SANDBOX").args(["run", "p.yaml"]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(ours(&tmp), Vec::<String>::new(), "scratch folders left after a clean run");
}

#[test]
fn ctrl_c_during_a_submission_leaves_no_run_folder_behind() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap is missing or cannot create namespaces here (apt-get install bubblewrap)");
        return;
    }
    // A model whose submission sleeps for a minute: Ctrl-C comes while it runs.
    let code = "```python\nimport time\ntime.sleep(60)\n```";
    let mock = Mock::start(MockConfig { script: Script::function(move |_| MockOutcome::Reply(MockReply::text(code))), ..MockConfig::default() });
    let ws = Workspace::new();
    let tmp = ws.path("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    ws.write(
        "p.yaml",
        &format!(
            "name: scratch\nmodels:\n  - {{id: m, provider: openai, model: m, base_url: \"{}\"}}\ntasks:\n  - {{benchmark: weirdml, select: [mini-shapes], params: {{iterations: 1, time_limit_s: 120}}}}\nseeds: [0]\n",
            mock.url()
        ),
    );
    let child = spawn_run(&ws, &tmp, std::process::Stdio::piped());
    let prefix = "evalgrid-run-";
    let started = Instant::now();
    // The submission's own folder, not the sandbox probe's (which runs before any cell).
    let submission = |name: &String| {
        name.starts_with(prefix) && std::fs::read_to_string(tmp.join(name).join("code/submission.py")).is_ok_and(|code| code.contains("time.sleep(60)"))
    };
    while !ours(&tmp).iter().any(submission) {
        assert!(started.elapsed() < Duration::from_secs(60), "no run folder appeared: {:?}", ours(&tmp));
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    let left: Vec<String> = ours(&tmp).into_iter().filter(|n| n.starts_with(prefix)).collect();
    assert!(left.is_empty(), "Ctrl-C left the submission's run folder: {left:?}");
}

/// `evalgrid run p.yaml` in the workspace with its own `TMPDIR`, started in the background.
fn spawn_run(ws: &Workspace, tmp: &std::path::Path, stderr: std::process::Stdio) -> std::process::Child {
    std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
        .current_dir(ws.dir.path())
        .env("TMPDIR", tmp)
        .env("EVALGRID_NO_PROGRESS", "1")
        .env_remove("EVALGRID_CACHE")
        .env_remove("EVALGRID_UNSAFE_NO_SANDBOX")
        .args(["run", "p.yaml"])
        .stdout(std::process::Stdio::null())
        .stderr(stderr)
        .spawn()
        .unwrap()
}
