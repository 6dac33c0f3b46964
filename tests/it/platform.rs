//! Where bubblewrap cannot run (macOS; Linux without unprivileged user namespaces, as on many
//! HPC clusters): benchmarks that need no sandbox run as usual, and model code stops with
//! exit 2 before any paid call, naming what is missing and the opt-out (issue 26).

use std::path::{Path, PathBuf};

use evalgrid::providers::mock::MockConfig;
use serde_json::Value;

use crate::providers::{Mock, data_dir};
use crate::support::Workspace;

/// A folder to use as the whole `PATH`: `python3` and a few tools, no `bwrap`; with `failing`,
/// a `bwrap` that exits 1 like one that cannot create namespaces.
fn path_without_bubblewrap(ws: &Workspace, failing: bool) -> PathBuf {
    let bin = ws.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["kill", "sleep", "sh"] {
        if let Some(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.join(tool)).unwrap();
        }
    }
    let exe = std::process::Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    std::os::unix::fs::symlink(String::from_utf8_lossy(&exe.stdout).trim(), bin.join("python3")).unwrap();
    if failing {
        let fake = bin.join("bwrap");
        std::fs::write(&fake, "#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n").unwrap();
        let mut perms = std::fs::metadata(&fake).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&fake, perms).unwrap();
    }
    bin
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(tool)).find(|p| p.is_file())
}

fn run(ws: &Workspace, path: &Path, args: &[&str]) -> (i32, Value, String) {
    let out =
        ws.cmd().env("PATH", path).env_remove("EVALGRID_UNSAFE_NO_SANDBOX").args(["--data-dir", data_dir().to_str().unwrap()]).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    (out.status.code().unwrap_or(-1), v, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// BBEH through an API model and the built-in quickstart need no sandbox: with bubblewrap
/// missing, or present but unable to create namespaces, they run and pay every call once.
#[test]
fn api_and_built_in_benchmarks_run_without_bubblewrap() {
    for failing in [false, true] {
        let ws = Workspace::new();
        let bin = path_without_bubblewrap(&ws, failing);
        let mock = Mock::start(MockConfig::default());
        ws.write(
            "p.yaml",
            &format!(
                "name: bbeh-nobwrap\nmodels:\n  - {{id: m, provider: openai, model: mock-1, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbeh\n    select: [boardgame_qa]\n    params: {{subset: mini}}\nseeds: [0]\n",
                mock.url()
            ),
        );
        let (code, v, stderr) = run(&ws, &bin, &["run", "p.yaml", "--json"]);
        assert_eq!(code, 0, "bwrap failing: {failing}: {v} {stderr}");
        assert_eq!(v["cells_run"], 1, "{v}");
        assert_eq!(mock.server().calls(), 20, "BBEH Mini boardgame_qa: 20 items, one call each");
        ws.quickstart();
        let (code, v, stderr) = run(&ws, &bin, &["run", "quickstart.yaml", "--json"]);
        assert_eq!(code, 0, "bwrap failing: {failing}: {v} {stderr}");
        assert!(v["cells_run"].as_u64().is_some_and(|n| n > 0), "{v}");
    }
}

/// A benchmark that runs model-written code (BBQ-Bench's `execute_python`) with an API model
/// stops with exit 2 before its first call when bubblewrap is missing or cannot create
/// namespaces, naming bubblewrap and the opt-out.
#[test]
fn model_code_with_an_api_model_stops_before_any_call_without_bubblewrap() {
    for failing in [false, true] {
        let ws = Workspace::new();
        let bin = path_without_bubblewrap(&ws, failing);
        let mock = Mock::start(MockConfig::default());
        ws.write(
            "p.yaml",
            &format!(
                "name: bbq-nobwrap\nmodels:\n  - {{id: m, provider: openai, model: mock-1, base_url: \"{}\"}}\ntasks:\n  - benchmark: bbq\n    select: [is_greater_than_58]\nseeds: [0]\n",
                mock.url()
            ),
        );
        let (code, v, stderr) = run(&ws, &bin, &["run", "p.yaml"]);
        assert_eq!(code, 2, "bwrap failing: {failing}: {v} {stderr}");
        assert!(stderr.contains("bubblewrap") && stderr.contains("--unsafe-no-sandbox"), "{stderr}");
        assert_eq!(mock.server().calls(), 0, "no paid call before the stop: {stderr}");
    }
}
