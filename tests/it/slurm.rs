//! `evalgrid slurm` on a real single-node Slurm cluster (Debian `slurm-wlm` + `munge`,
//! started by `.ci/slurm-up.sh` without systemd): the arrays run, the report job runs
//! after them and passes only when every cell has a result, and the report equals a local
//! one-process run. Skipped (with a message) where no Slurm node is up.

use std::time::{Duration, Instant};

use crate::support::Workspace;

fn slurm_idle() -> bool {
    std::process::Command::new("sinfo").args(["-h", "-o", "%T"]).output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).lines().any(|l| l.trim() == "idle"))
}

/// `JobState` of a job, from `scontrol show job`.
fn job_state(id: &str) -> String {
    let out = std::process::Command::new("scontrol").args(["show", "job", id]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.split_whitespace().find_map(|w| w.strip_prefix("JobState=")).unwrap_or("UNKNOWN").to_owned()
}

/// A CPU count no node has is refused before anything is written or submitted, naming the
/// most the nodes have; the default fits the nodes (issue 23).
#[test]
fn cpus_per_task_fits_the_nodes_or_is_refused() {
    if !slurm_idle() {
        eprintln!("SKIPPED: no idle Slurm node here (`.ci/slurm-up.sh` starts one)");
        return;
    }
    let out = std::process::Command::new("sinfo").args(["-h", "-o", "%c"]).output().unwrap();
    let max: u32 = String::from_utf8_lossy(&out.stdout).lines().filter_map(|l| l.trim().trim_end_matches('+').parse().ok()).max().unwrap();
    let ws = Workspace::new();
    ws.quickstart();
    let too_many = (max + 1).to_string();
    let out = ws.run(&["slurm", "quickstart.yaml", "--shards", "2", "--cpus-per-task", &too_many, "--dry-run"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(&format!("more than {max} CPUs")), "{stderr}");
    let out = ws.run(&["slurm", "quickstart.yaml", "--shards", "2", "--dry-run"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(&format!("#SBATCH --cpus-per-task={}\n", max.min(4))), "{stdout}");
}

#[test]
fn the_quickstart_on_a_real_slurm_cluster_equals_a_local_run() {
    if !slurm_idle() {
        eprintln!("SKIPPED: no idle Slurm node here (`.ci/slurm-up.sh` starts one)");
        return;
    }
    let local = Workspace::new();
    local.quickstart();
    let (code, v) = local.run_json(&["run", "quickstart.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");

    let ws = Workspace::new();
    ws.quickstart();
    // No `--cpus-per-task`: what a user writes first must run (issue 23: the old default of 4
    // pended for ever on a 2-CPU node).
    let out = ws.run(&["slurm", "quickstart.yaml", "--shards", "4"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report_job = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let start = Instant::now();
    let state = loop {
        let state = job_state(&report_job);
        if ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"].contains(&state.as_str()) || start.elapsed() > Duration::from_secs(300) {
            break state;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let logs: Vec<String> = std::fs::read_dir(ws.path("evalgrid-logs"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| format!("{}:\n{}", e.path().display(), std::fs::read_to_string(e.path()).unwrap_or_default()))
        .collect();
    assert_eq!(state, "COMPLETED", "report job {report_job}:\n{}", logs.join("\n"));
    // Four array tasks ran, one per shard, each publishing its progress.
    let (_, st) = ws.run_json(&["status", "quickstart.yaml", "--json"]);
    assert_eq!(st["cells_cached"], st["cells_total"], "{st}");
    let shards = st["shards"].as_array().unwrap();
    assert_eq!(shards.len(), 4, "{st}");
    assert!(shards.iter().all(|s| s["finished"] == true && s["slurm_job"].is_string()), "{st}");
    for file in ["summary.csv", "summary.md", "index.html"] {
        let a = std::fs::read(local.path(&format!("reports/quickstart/{file}"))).unwrap();
        let b = std::fs::read(ws.path(&format!("reports/quickstart/{file}"))).unwrap();
        assert!(a == b, "{file} from Slurm differs from the local run");
    }
}

#[test]
fn a_gpu_array_task_gets_one_gpu_and_the_pool_uses_only_that_one() {
    if !slurm_idle() {
        eprintln!("SKIPPED: no idle Slurm node here (`.ci/slurm-up.sh` starts one)");
        return;
    }
    let numpy = std::process::Command::new("python3").args(["-c", "import numpy"]).status().is_ok_and(|s| s.success());
    if !numpy || !crate::hostile::bwrap_works() {
        eprintln!("SKIPPED: WeirdML needs python3 with numpy and a working bubblewrap");
        return;
    }
    let ws = Workspace::new();
    // The node has one (fake) GPU; this nvidia-smi claims two, listing the other one first.
    // Slurm's --gres=gpu:1 sets CUDA_VISIBLE_DEVICES=0, so the pool must use gpu0 only.
    let bin = ws.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::fs::write(bin.join("nvidia-smi"), "#!/bin/sh\necho '1, Fake GPU B, 1.0'\necho '0, Fake GPU A, 1.0'\n").unwrap();
    std::fs::set_permissions(bin.join("nvidia-smi"), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    ws.write(
        "w.yaml",
        "name: gpu-slurm\nmodels:\n  - {id: ref, provider: builtin, model: scripted, params: {script: reference}}\ntasks:\n  - {benchmark: weirdml, select: [mini-shapes], params: {time_limit_s: 20, iterations: 2}}\nseeds: [0]\n",
    );
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = ws.cmd().env("PATH", &path).args(["slurm", "w.yaml", "--shards", "1", "--class", "gpu", "--cpus-per-task", "1"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let script = std::fs::read_to_string(ws.path("evalgrid-jobs/gpu-slurm/gpu.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --gres=gpu:1"), "{script}");
    let report_job = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let start = Instant::now();
    let state = loop {
        let state = job_state(&report_job);
        if ["COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"].contains(&state.as_str()) || start.elapsed() > Duration::from_secs(300) {
            break state;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let logs: Vec<String> =
        std::fs::read_dir(ws.path("evalgrid-logs")).into_iter().flatten().flatten().map(|e| std::fs::read_to_string(e.path()).unwrap_or_default()).collect();
    assert_eq!(state, "COMPLETED", "{}", logs.join("\n"));
    let (code, shown) = ws.run_json(&["show", "w.yaml", "ref/weirdml/mini-shapes/0", "--json"]);
    assert_eq!(code, 0, "{shown}");
    let slots: Vec<&str> = shown["episode"]["submissions"].as_array().unwrap().iter().filter_map(|s| s["slot"].as_str()).collect();
    assert!(!slots.is_empty() && slots.iter().all(|s| s.starts_with("gpu0")), "the pool used only the allocated GPU: {slots:?}");
}

/// The user prompt of a cached call's request body.
fn prompt_of(body: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["messages"].as_array().and_then(|m| m.last()).and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned()
}

#[test]
fn a_killed_array_task_resubmitted_pays_no_answered_call_again() {
    use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, Script};
    use std::collections::HashSet;
    use std::sync::{Arc, Mutex};
    if !slurm_idle() {
        eprintln!("SKIPPED: no idle Slurm node here (`.ci/slurm-up.sh` starts one)");
        return;
    }
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let log = Arc::clone(&asked);
    let script = Script::function(move |req: &MockRequest| {
        log.lock().unwrap().push(req.last_user.clone());
        MockOutcome::Reply(MockReply::text("The answer is: (A)"))
    });
    let mock = crate::providers::Mock::start(MockConfig { script, latency: Duration::from_millis(150), ..MockConfig::default() });
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        &format!(
            "name: requeue\nmodels:\n  - {{id: m, provider: openai, model: m, base_url: \"{}\"}}\ntasks:\n  - {{benchmark: bbeh, select: [boardgame_qa, dyck_languages, web_of_lies], params: {{subset: mini}}}}\nseeds: [0]\ntransport: {{max_concurrency: 2}}\n",
            mock.url()
        ),
    );
    let data = crate::providers::data_dir().to_str().unwrap().to_owned();
    let out = ws.run(&["--data-dir", &data, "slurm", "p.yaml", "--shards", "1", "--cpus-per-task", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report_job: u64 = String::from_utf8_lossy(&out.stdout).trim().parse().unwrap();
    let array = (report_job - 1).to_string();
    // Kill the array task mid-run (Slurm's SIGTERM, then SIGKILL), once some calls landed.
    let start = Instant::now();
    while asked.lock().unwrap().len() < 12 && start.elapsed() < Duration::from_secs(120) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(std::process::Command::new("scancel").arg(format!("{array}_0")).status().unwrap().success());
    let start = Instant::now();
    while !["CANCELLED", "COMPLETED", "FAILED"].contains(&job_state(&format!("{array}_0")).as_str()) && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_millis(500));
    let _ = std::process::Command::new("scancel").arg(report_job.to_string()).status();
    let cached: HashSet<String> = crate::providers::cached_call_bodies(&ws.path("cache")).iter().map(|b| prompt_of(b)).collect();
    assert!(!cached.is_empty() && cached.len() < 60, "killed mid-run: {} calls cached", cached.len());
    asked.lock().unwrap().clear();
    // Resubmit that index of the same array script.
    let script = ws.path("evalgrid-jobs/requeue/api.sbatch");
    let resubmit = std::process::Command::new("sbatch").args(["--parsable", "--array=0"]).arg(&script).current_dir(ws.dir.path()).output().unwrap();
    assert!(resubmit.status.success(), "{}", String::from_utf8_lossy(&resubmit.stderr));
    let job = String::from_utf8_lossy(&resubmit.stdout).trim().split(';').next().unwrap().to_owned();
    let start = Instant::now();
    let state = loop {
        let state = job_state(&format!("{job}_0"));
        if ["COMPLETED", "FAILED", "CANCELLED"].contains(&state.as_str()) || start.elapsed() > Duration::from_secs(300) {
            break state;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(state, "COMPLETED");
    let again: Vec<String> = asked.lock().unwrap().clone();
    let paid_twice: Vec<&String> = again.iter().filter(|p| cached.contains(*p)).collect();
    assert!(paid_twice.is_empty(), "{} answered calls were paid again", paid_twice.len());
    assert_eq!(cached.len() + again.iter().collect::<HashSet<_>>().len(), 60, "the rest was asked once");
    let (code, st) = ws.run_json(&["--data-dir", &data, "status", "p.yaml", "--json"]);
    assert_eq!((code, st["cells_cached"].as_u64()), (0, Some(3)), "{st}");
}

/// Cancels a job when dropped, also when the test panics.
struct Cancel(String);

impl Drop for Cancel {
    fn drop(&mut self) {
        let _ = std::process::Command::new("scancel").arg(&self.0).status();
    }
}

/// Issue 23: `status` shows each shard's Slurm job with its state and why it waits. A job
/// that takes the whole node holds the shards back (`Resources`, or `Priority` behind it),
/// and the report job waits too; once it is gone they run and show as completed.
#[test]
fn status_shows_each_shards_job_state_and_pending_reason() {
    if !slurm_idle() {
        eprintln!("SKIPPED: no idle Slurm node here (`.ci/slurm-up.sh` starts one)");
        return;
    }
    let ws = Workspace::new();
    ws.quickstart();
    let out = std::process::Command::new("sbatch")
        .args(["--parsable", "--exclusive", "--job-name=eg-test-node-taker", "--output=/dev/null", "--wrap", "sleep 300"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let taker = Cancel(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    let start = Instant::now();
    while job_state(&taker.0) != "RUNNING" {
        assert!(start.elapsed() < Duration::from_secs(120), "the node-taking job never ran");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = ws.run(&["slurm", "quickstart.yaml", "--shards", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let report_job = Cancel(String::from_utf8_lossy(&out.stdout).trim().to_owned());
    // A job's reason is `None` until the scheduler's next pass looks at it.
    let start = Instant::now();
    let st = loop {
        let (_, st) = ws.run_json(&["status", "quickstart.yaml", "--json"]);
        let jobs = st["slurm_jobs"].as_array().cloned().unwrap_or_default();
        if (jobs.len() == 3 && jobs.iter().all(|j| !j["reason"].is_null())) || start.elapsed() > Duration::from_secs(120) {
            break st;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let jobs = st["slurm_jobs"].as_array().unwrap_or_else(|| panic!("{st}"));
    assert_eq!(jobs.len(), 3, "two shards and the report job: {st}");
    for (job, shard) in jobs.iter().zip(["0/2", "1/2"]) {
        assert_eq!((job["shard"].as_str(), job["state"].as_str()), (Some(shard), Some("PENDING")), "{st}");
        assert!(["Resources", "Priority"].contains(&job["reason"].as_str().unwrap_or("")), "{job}");
    }
    // Slurm names the first thing it waits for: its dependency, or the node.
    assert_eq!((jobs[2]["class"].as_str(), jobs[2]["state"].as_str()), (Some("report"), Some("PENDING")), "{st}");
    assert!(jobs[2]["reason"].is_string(), "{st}");
    let text = String::from_utf8_lossy(&ws.run(&["status", "quickstart.yaml"]).stdout).into_owned();
    assert!(
        text.lines().any(|l| l.starts_with("slurm cpu shard 0/2 (job ") && (l.ends_with("PENDING (Resources)") || l.ends_with("PENDING (Priority)"))),
        "{text}"
    );
    assert!(text.lines().any(|l| l.starts_with(&format!("slurm report (job {}): PENDING (", report_job.0))), "{text}");
    // Without the node-taker everything runs; finished jobs show as such.
    drop(taker);
    let start = Instant::now();
    while job_state(&report_job.0) != "COMPLETED" {
        assert!(start.elapsed() < Duration::from_secs(300), "report job {}: {}", report_job.0, job_state(&report_job.0));
        std::thread::sleep(Duration::from_millis(500));
    }
    let (code, st) = ws.run_json(&["status", "quickstart.yaml", "--json"]);
    assert_eq!((code, st["cells_cached"].as_u64()), (0, Some(234)), "{st}");
    let states: Vec<&str> = st["slurm_jobs"].as_array().unwrap().iter().filter_map(|j| j["state"].as_str()).collect();
    assert_eq!(states, ["COMPLETED"; 3], "{st}");
}
