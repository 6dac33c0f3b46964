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
    let out = ws.run(&["slurm", "quickstart.yaml", "--shards", "4", "--cpus-per-task", "1"]);
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
    for file in ["summary.csv", "summary.md"] {
        let a = std::fs::read(local.path(&format!("reports/quickstart/{file}"))).unwrap();
        let b = std::fs::read(ws.path(&format!("reports/quickstart/{file}"))).unwrap();
        assert!(a == b, "{file} from Slurm differs from the local run");
    }
    assert!(ws.path("reports/quickstart/index.html").is_file());
}
