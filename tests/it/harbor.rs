//! `harbor`: Harbor task folders run in real containers (podman) with the built-in `oracle`
//! and `nop` agents. The fixtures in tests/fixtures/harbor are written to Harbor's format as
//! documented. Tests that need a container print SKIPPED and pass where podman cannot run
//! one or the offline base images (scripts/harbor-base-image.sh) are missing; the
//! validation tests run everywhere.

use std::path::Path;
use std::process::Command;

use crate::support::{Workspace, repo};

/// Base images the fixtures' Dockerfiles name.
const BASES: [&str; 2] = ["debian:bookworm-slim", "python:3.11-slim-bookworm"];

/// Why containers cannot be tested here, or `None` when they can.
pub(crate) fn no_containers() -> Option<String> {
    for base in BASES {
        let out = Command::new("podman").args(["run", "--rm", "--network", "none", "--pull=never", base, "true"]).output();
        match out {
            Err(e) => return Some(format!("podman cannot be started: {e}")),
            Ok(o) if !o.status.success() => {
                return Some(format!("podman cannot run {base} (make it with scripts/harbor-base-image.sh): {}", String::from_utf8_lossy(&o.stderr).trim()));
            }
            Ok(_) => {}
        }
    }
    None
}

macro_rules! need_containers {
    () => {
        if let Some(why) = no_containers() {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
}

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let target = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &target);
        } else {
            std::fs::copy(e.path(), &target).unwrap();
        }
    }
}

/// A workspace with the fixtures copied to `tasks/` and a pipeline `p.yaml` over `tasks`.
fn workspace(tasks: &[&str], seeds: &str) -> Workspace {
    let ws = Workspace::new();
    for t in tasks {
        copy_dir(&repo().join("tests/fixtures/harbor").join(t), &ws.path(&format!("tasks/{t}")));
    }
    ws.write(
        "p.yaml",
        &format!(
            "name: h\nmodels:\n  - {{id: oracle, provider: builtin, model: oracle}}\n  - {{id: nop, provider: builtin, model: nop}}\ntasks:\n  - benchmark: harbor\n    params:\n      path: tasks\n      environment: {{runtime: podman, pull: never}}\n      rewards: [debug_off, port_set]\nseeds: {seeds}\n"
        ),
    );
    ws
}

/// `items.csv` rows as (model, task, seed) → the row's fields after `item`.
fn items(ws: &Workspace) -> Vec<(String, String, String, Vec<String>)> {
    let text = std::fs::read_to_string(ws.path("reports/h/items.csv")).unwrap();
    text.lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_owned).collect::<Vec<_>>())
        .map(|f| (f[1].clone(), f[2].clone(), f[3].clone(), f[5..].to_vec()))
        .collect()
}

/// The `reward` column of a model's rows of a task (`None`: empty, no reward).
fn reward(rows: &[(String, String, String, Vec<String>)], model: &str, task: &str) -> Vec<Option<f64>> {
    rows.iter().filter(|r| r.0 == model && r.1 == task).map(|r| r.3[0].parse().ok()).collect()
}

/// Containers carrying `label` (`key=value`), running or not.
pub(crate) fn containers_with(label: &str) -> usize {
    let out = Command::new("podman").args(["ps", "-a", "-q", "--filter", &format!("label={label}")]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).split_whitespace().count()
}

/// Build logs of this workspace's cache with their modification times: a build writes its
/// log, a reused image writes none.
fn image_builds(ws: &Workspace) -> Vec<(String, std::time::SystemTime)> {
    let Some(dir) = walk_find(&ws.path("cache"), "harbor-builds") else { return Vec::new() };
    let mut logs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.metadata().unwrap().modified().unwrap()))
        .collect();
    logs.sort();
    logs
}

/// `evalgrid run PIPELINE` in the workspace, in the background, its output dropped (to be
/// killed mid-trial).
pub(crate) fn spawn_run(ws: &Workspace, pipeline: &str) -> std::process::Child {
    Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
        .current_dir(ws.dir.path())
        .env_remove("EVALGRID_CACHE")
        .env("EVALGRID_NO_PROGRESS", "1")
        .args(["run", pipeline])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// The label every container of this workspace's cache carries.
pub(crate) fn cache_label(ws: &Workspace) -> String {
    // The store's bucket: the folder that holds `steps` (and `harbor-builds` once a build ran).
    let bucket = walk_find(&ws.path("cache"), "steps").and_then(|d| d.parent().map(Path::to_path_buf)).expect("a trial ran");
    format!("evalgrid.cache={}", evalgrid::sandbox::container::cache_label_for(&bucket))
}

fn walk_find(dir: &Path, name: &str) -> Option<std::path::PathBuf> {
    for e in std::fs::read_dir(dir).ok()?.filter_map(Result::ok) {
        if e.file_type().ok()?.is_dir() {
            if e.file_name() == name {
                return Some(e.path());
            }
            if let Some(p) = walk_find(&e.path(), name) {
                return Some(p);
            }
        }
    }
    None
}

#[test]
fn validate_locates_task_toml_errors_and_starts_no_container() {
    let ws = workspace(&["hello-world", "file-editing"], "[0]");
    let out = ws.run(&["validate", "p.yaml"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::write(ws.path("tasks/file-editing/task.toml"), "version = \"1.0\"\n\n[agent]\ntimeout_sec = \"ten\"\n").unwrap();
    let out = ws.run(&["validate", "p.yaml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("file-editing/task.toml:4:15"), "located at the value: {err}");
    assert!(err.contains("timeout_sec"), "{err}");
    // A task without its verifier, and an unknown parameter, are located too.
    std::fs::write(ws.path("tasks/file-editing/task.toml"), "version = \"1.0\"\n").unwrap();
    std::fs::remove_file(ws.path("tasks/hello-world/tests/test.sh")).unwrap();
    let out = ws.run(&["validate", "p.yaml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("tests/test.sh: missing"), "{err}");
    ws.write("q.yaml", "name: q\nmodels:\n  - {id: oracle, provider: builtin, model: oracle}\ntasks:\n  - benchmark: harbor\n    params: {path: tasks, image: x}\nseeds: [0]\n");
    let out = ws.run(&["validate", "q.yaml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("q.yaml:6:") && err.contains("unknown parameter `image`"), "{err}");
    ws.write(
        "r.yaml",
        "name: r\nmodels:\n  - {id: o, provider: builtin, model: solver}\ntasks:\n  - benchmark: harbor\n    params: {path: tasks/file-editing}\nseeds: [0]\n",
    );
    let out = ws.run(&["validate", "r.yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("oracle"), "the built-in agents are named");
}

#[test]
fn unknown_task_toml_fields_are_kept_and_noted() {
    let ws = workspace(&["hello-world"], "[0]");
    let toml = std::fs::read_to_string(ws.path("tasks/hello-world/task.toml")).unwrap();
    std::fs::write(ws.path("tasks/hello-world/task.toml"), format!("{toml}gpus = 0\n[future]\nknob = 1\n")).unwrap();
    let out = ws.run(&["validate", "p.yaml"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "unknown fields are not errors: {err}");
    assert!(err.contains("task.toml:20: `environment.gpus` is not used by evalgrid") && err.contains("`future`"), "they are noted: {err}");
}

#[test]
fn oracle_passes_what_can_pass_and_nop_fails_everything() {
    need_containers!();
    let all = ["hello-world", "file-editing", "python-fix", "build-fails", "tests-hang", "solve-fails"];
    let ws = workspace(&all, "[0, 1]");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    // build-fails errs (4 cells); everything else is scored.
    assert_ne!(code, 0, "errored trials fail the run: {v}");
    assert_eq!(v["cells_failed"], 4, "{v}");
    let rows = items(&ws);
    for task in ["hello-world", "file-editing", "python-fix"] {
        assert_eq!(reward(&rows, "oracle", task), [Some(1.0); 2], "oracle passes {task}");
        assert_eq!(reward(&rows, "nop", task), [Some(0.0); 2], "nop fails {task}");
    }
    assert_eq!(reward(&rows, "oracle", "solve-fails"), [Some(0.0); 2]);
    assert_eq!(reward(&rows, "nop", "solve-fails"), [Some(0.0); 2]);
    // No reward is not a 0: the hanging verifier leaves the cell empty, counted as its outcome.
    assert_eq!(reward(&rows, "oracle", "tests-hang"), [None; 2]);
    assert_eq!(reward(&rows, "nop", "tests-hang"), [None; 2]);
    // The image that cannot build is an errored trial, never a row with a 0.
    assert!(reward(&rows, "oracle", "build-fails").iter().all(Option::is_none), "{rows:?}");
    let named: Vec<f64> = rows.iter().find(|r| r.0 == "oracle" && r.1 == "file-editing").unwrap().3.iter().map(|x| x.parse().unwrap()).collect();
    assert_eq!(named, [1.0, 1.0, 1.0], "reward, reward.debug_off, reward.port_set");
    let html = std::fs::read_to_string(ws.path("reports/h/index.html")).unwrap();
    assert!(html.contains("Harbor trial outcomes") && html.contains("verifier_timeout") && html.contains("pass@k"), "outcomes and repeats tables");
    let items_page = std::fs::read_to_string(ws.path("reports/h/items-harbor.html")).unwrap();
    assert!(items_page.contains("transcripts/"), "the item page links each trial's transcript");
    let (_, failed) = ws.run_json(&["status", "p.yaml", "--explain", "oracle/harbor/build-fails/0", "--json"]);
    assert!(failed["reason"].as_str().unwrap_or_default().contains("environment_error"), "{failed}");
    // The transcript keeps the verifier's output.
    let out = ws.run(&["show", "p.yaml", "oracle/harbor/python-fix/0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("## verifier") && text.contains("OK"), "{text}");
    // The Inspect export carries each trial: the instruction as input, the transcript as output.
    let out = ws.run(&["export", "p.yaml", "--format", "inspect", "--out", "ins"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let logs: Vec<String> = std::fs::read_dir(ws.path("ins")).unwrap().map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap()).collect();
    let python = logs
        .iter()
        .find(|l| l.contains("\"task\":\"harbor/python-fix\"") && l.contains("\"model\":\"builtin/oracle\""))
        .expect("an Inspect log of python-fix by the oracle");
    assert!(python.contains("mean(values)") && python.contains("## verifier") && python.contains("reward 1"), "{python}");
    // Nothing is left running, and a rerun is all cached with no image rebuilt.
    assert_eq!(containers_with(&cache_label(&ws)), 0, "every trial's container was removed");
    let builds = image_builds(&ws);
    // Images already in the runtime's storage (an earlier test) are not built at all.
    assert!(builds.len() <= 4, "at most one build per distinct environment/: {builds:?}");
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(
        (v["cells_run"].as_u64(), v["cells_cached"].as_u64(), v["cells_failed"].as_u64()),
        (Some(0), Some(20), Some(4)),
        "errors are not cached as answers: {v}"
    );
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json", "--retry-errors"]);
    assert_eq!(v["cells_failed"].as_u64(), Some(4), "the errored trials ran again and failed again: {v}");
    let after = image_builds(&ws);
    let rebuilt: Vec<&String> = after.iter().filter(|a| !builds.contains(a)).map(|a| &a.0).collect();
    assert_eq!(rebuilt.len(), 1, "only the image that failed was built again: {rebuilt:?}");
}

#[test]
fn editing_tests_makes_exactly_that_task_stale() {
    need_containers!();
    let ws = workspace(&["hello-world", "file-editing"], "[0]");
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let builds = image_builds(&ws);
    let test_sh = ws.path("tasks/hello-world/tests/test.sh");
    std::fs::write(&test_sh, format!("{}\n# edited\n", std::fs::read_to_string(&test_sh).unwrap())).unwrap();
    let out = ws.run(&["status", "p.yaml", "--explain", "oracle/harbor/hello-world/0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("tests/ changed: tests/test.sh changed"), "{text}");
    let out = ws.run(&["status", "p.yaml", "--explain", "oracle/harbor/file-editing/0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("state    cached"), "{text}");
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((v["cells_run"].as_u64(), v["cells_cached"].as_u64()), (Some(2), Some(2)), "{v}");
    // Another task's instruction edited: only that task is stale, and it says so.
    let md = ws.path("tasks/file-editing/instruction.md");
    std::fs::write(&md, "Edit /app/service.ini: debug off, port 8080.\n").unwrap();
    let out = ws.run(&["status", "p.yaml", "--explain", "nop/harbor/file-editing/0"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("instruction.md changed"), "{}", String::from_utf8_lossy(&out.stdout));
    let out = ws.run(&["status", "p.yaml", "--explain", "nop/harbor/hello-world/0"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("state    cached"));
    let (_, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((v["cells_run"].as_u64(), v["cells_cached"].as_u64()), (Some(2), Some(2)), "{v}");
    assert_eq!(image_builds(&ws), builds, "no edit touched environment/: no build");
}

#[test]
fn kill_9_leaves_no_container_once_the_next_run_starts_and_caches_nothing() {
    need_containers!();
    let ws = workspace(&["hello-world"], "[0]");
    // A solution that takes its time, so the kill lands inside the trial.
    std::fs::write(ws.path("tasks/hello-world/solution/solve.sh"), "#!/bin/bash\nsleep 15\necho 'Hello, world!' > hello.txt\n").unwrap();
    ws.write(
        "k.yaml",
        "name: h\nmodels:\n  - {id: oracle, provider: builtin, model: oracle}\ntasks:\n  - benchmark: harbor\n    params: {path: tasks}\nseeds: [0]\n",
    );
    let mut child = spawn_run(&ws, "k.yaml");
    let label = format!("evalgrid.run=pid{}", child.id());
    // Wait (bounded by the test harness, not asserted on time) for the trial's container.
    let mut seen = false;
    for _ in 0..600 {
        if containers_with(&label) > 0 {
            seen = true;
            break;
        }
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    assert!(seen, "the trial's container was started");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(containers_with(&label), 1, "kill -9 leaves the container behind");
    // Nothing was cached for the killed trial; the next run reaps the container before its
    // own trial, and runs the killed trial again.
    let (_, cell) = ws.run_json(&["status", "k.yaml", "--explain", "oracle/harbor/hello-world/0", "--json"]);
    assert_eq!(cell["episode_cached"], false, "{cell}");
    let (code, v) = ws.run_json(&["run", "k.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_run"], 1, "{v}");
    assert_eq!(containers_with(&label), 0, "the next run removed what the killed one left");
}

#[test]
fn an_agent_past_its_timeout_is_stopped_and_still_verified() {
    need_containers!();
    let ws = workspace(&["hello-world"], "[0]");
    // The solution writes the file, then hangs: the agent limit stops it, the tests still run.
    std::fs::write(ws.path("tasks/hello-world/solution/solve.sh"), "#!/bin/bash\necho 'Hello, world!' > hello.txt\nsleep 3600\n").unwrap();
    let toml = std::fs::read_to_string(ws.path("tasks/hello-world/task.toml")).unwrap();
    std::fs::write(ws.path("tasks/hello-world/task.toml"), toml.replace("[agent]\ntimeout_sec = 60.0", "[agent]\ntimeout_sec = 2.0")).unwrap();
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let out = ws.run(&["show", "p.yaml", "oracle/harbor/hello-world/0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("TIMED OUT") && text.contains("outcome: agent_timeout") && text.contains("reward 1"), "{text}");
    let summary = std::fs::read_to_string(ws.path("reports/h/summary.csv")).unwrap();
    let header: Vec<&str> = summary.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "agent_timeout").expect("an agent_timeout column");
    let oracle: Vec<&str> = summary
        .lines()
        .find(|l| l.starts_with("harbor,oracle,*,") || l.starts_with("harbor,oracle,,"))
        .unwrap_or_else(|| panic!("{summary}"))
        .split(',')
        .collect();
    assert_eq!(oracle[col].parse::<f64>().unwrap(), 1.0, "{summary}");
}

#[test]
fn the_agent_phase_is_offline_and_the_verifier_online_unless_the_task_says() {
    need_containers!();
    let ws = workspace(&["hello-world"], "[0]");
    // The oracle notes the interfaces it sees; the verifier compares them with its own.
    std::fs::write(ws.path("tasks/hello-world/solution/solve.sh"), "#!/bin/bash\nls /sys/class/net > /app/agent-net.txt\n").unwrap();
    std::fs::write(
        ws.path("tasks/hello-world/tests/test.sh"),
        "#!/bin/bash\nmkdir -p /logs/verifier\na=$(grep -vc '^lo$' /app/agent-net.txt)\nv=$(ls /sys/class/net | grep -vc '^lo$')\nprintf '{\"agent_interfaces\": %s, \"verifier_interfaces\": %s}' \"$a\" \"$v\" > /logs/verifier/reward.json\n",
    )
    .unwrap();
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let show = |ws: &Workspace| String::from_utf8_lossy(&ws.run(&["show", "p.yaml", "oracle/harbor/hello-world/0"]).stdout).into_owned();
    let text = show(&ws);
    assert!(text.contains("agent_interfaces = 0") && text.contains("verifier_interfaces = 1"), "{text}");
    // `network: off` on the entry: no network in either phase, and the trial runs again.
    let p = std::fs::read_to_string(ws.path("p.yaml")).unwrap();
    ws.write("p.yaml", &p.replace("pull: never}", "pull: never, network: off}"));
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_run"].as_u64()), (0, Some(2)), "{v}");
    let text = show(&ws);
    assert!(text.contains("agent_interfaces = 0") && text.contains("verifier_interfaces = 0"), "{text}");
}

#[test]
fn a_shard_on_a_node_without_a_runtime_fails_fast_before_any_trial() {
    // Runs everywhere: the node without a runtime is this machine with an empty PATH.
    let ws = workspace(&["hello-world"], "[0, 1]");
    let empty = ws.path("no-tools");
    std::fs::create_dir_all(&empty).unwrap();
    let out = ws.cmd().env("PATH", &empty).args(["run", "p.yaml", "--shard", "0/2", "--json"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("no container runtime here can run a container") && stderr.contains("no trial was started"), "{stderr}");
    assert!(stderr.contains("harbor/hello-world"), "names the tasks that need it: {stderr}");
    // Nothing was marked failed: the shard's cells are still to run.
    let (_, status) = ws.run_json(&["status", "p.yaml", "--json"]);
    assert_eq!((status["cells_failed"].as_u64(), status["cells_cached"].as_u64()), (Some(0), Some(0)), "{status}");
    // The job generators say what every node needs.
    let out = ws.run(&["slurm", "p.yaml", "--shards", "2", "--dry-run"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains("run in containers") && stderr.contains("fails fast"), "{stderr}");
    let out = ws.run(&["k8s", "p.yaml", "--shards", "2", "--dry-run", "--image", "evalgrid:latest"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("every pod needs podman"), "{stderr}");
}
