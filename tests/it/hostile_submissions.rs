//! Hostile model-written code through the binary at the two other call sites (issue 11):
//! a WeirdML submission and a BBQ-Bench `execute_python` run. The same probe tries
//! everything at once: find evalgrid's API key variable in any `/proc/*/environ` (and print
//! it), list and write the cache and data directories, follow a symlink out of the work
//! dir, kill its parent and pid 1, connect to a port this test opened, fill the work dir
//! and /tmp, allocate 50 GB, leave a daemon behind, fork 10,000 processes and print
//! 200 MB. It prints one `PROBE-RESULT clean` or `PROBE-RESULT LEAKED …` line, which the
//! mock model reads back from its next prompt (the test asserts on what the model saw), and
//! last tries to kill its parent and pid 1.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockRequest, MockServer, Script};
use serde_json::json;

use crate::bbq_llm::{answers, call};
use crate::hostile::{bwrap_works, files_containing, listener, procs_with};
use crate::support::Workspace;

const SECRET: &str = "sk-hostile-submission-0123456789abcdef";
const KEY_VAR: &str = "HOSTILE_SUB_KEY";

/// Plain Python (no restricted builtins at these call sites). Never contains the key.
fn probe(port: u16, host_dirs: &[&str], nonce: &str) -> String {
    format!(
        r#"import os, socket, sys
found = []
for p in os.listdir('/proc'):
    try:
        with open('/proc/' + p + '/environ', 'rb') as f:
            env = f.read()
    except OSError:
        continue
    if b'{key_var}=' in env:
        found.append('key variable in /proc/%s/environ' % p)
        sys.stdout.write(env.decode('latin-1') + '\n')
for d in {dirs:?}:
    try:
        os.listdir(d)
        found.append('listed ' + d)
    except OSError:
        pass
    try:
        with open(os.path.join(d, 'pwned'), 'w') as f:
            f.write('x')
        found.append('wrote into ' + d)
    except OSError:
        pass
    try:
        os.symlink(d, 'escape')
        os.listdir('escape')
        found.append('followed a symlink to ' + d)
    except OSError:
        pass
    finally:
        try:
            os.unlink('escape')
        except OSError:
            pass
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=1).sendall(b'hello')
    found.append('connected to 127.0.0.1:{port}')
except OSError:
    pass
filled = []
for where in ['.', '/tmp']:
    mib = 0
    try:
        for i in range(400):
            with open(os.path.join(where, 'fill%d' % i), 'wb') as f:
                for j in range(8):
                    f.write(b'0' * (1 << 20))
                    mib += 1
    except OSError:
        pass
    for i in range(400):
        try:
            os.remove(os.path.join(where, 'fill%d' % i))
        except OSError:
            pass
    filled.append(mib)
    if mib >= 3200:
        found.append('filled %d MiB in %s' % (mib, where))
try:
    x = bytearray(50 * 1024 ** 3)
    found.append('allocated 50 GB')
    del x
except MemoryError:
    pass
try:
    if os.fork() == 0:
        os.setsid()
        os.execv('/bin/sleep', ['sleep', '{nonce}'])
except OSError:
    pass
kids = 0
try:
    for i in range(10000):
        if os.fork() == 0:
            os._exit(0)
        kids += 1
except OSError:
    pass
chunk = 'y' * (1 << 20) + '\n'
for i in range(200):
    sys.stdout.write(chunk)
sys.stdout.flush()
print('PROBE-RESULT', ('LEAKED ' + '; '.join(found)) if found else 'clean', 'filled', filled, 'forks', kids, flush=True)
# Last, since it may end the run: kill the parent (evalgrid's launcher) and pid 1.
for target in [os.getppid(), 1]:
    try:
        os.kill(target, 9)
    except OSError:
        pass
"#,
        key_var = KEY_VAR,
        dirs = host_dirs,
    )
}

/// Every `PROBE-RESULT …` line in `text`, also where the output is embedded as a JSON
/// string (its newlines escaped).
fn probe_lines(text: &str) -> Vec<String> {
    text.match_indices("PROBE-RESULT ").map(|(at, _)| text[at..].split(['\n', '\\', '"']).next().unwrap_or_default().to_owned()).collect()
}

/// What must hold after any hostile run: evalgrid alive, nothing reached, nothing left.
fn assert_contained(ws: &Workspace, out: &std::process::Output, listener: &TcpListener, dirs: &[&std::path::Path], nonce: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.code().is_some(), "evalgrid was killed: {:?}\n{stderr}", out.status);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(listener.accept().is_err(), "the sandboxed code reached a 127.0.0.1 port");
    for d in dirs {
        assert!(!d.join("pwned").exists(), "the sandboxed code wrote into {}", d.display());
    }
    assert!(procs_with(&format!("sleep {nonce}")).is_empty(), "a daemonised child survived: {:?}", procs_with(nonce));
    let verify = ws.cmd().args(["cache", "verify"]).output().unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stderr));
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "the key reached stdout/stderr");
    let hits = files_containing(ws.dir.path(), SECRET.as_bytes());
    assert!(hits.is_empty(), "the key was written to {hits:?}");
}

fn start_mock(script: Script) -> (tokio::runtime::Runtime, MockServer, String) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start(MockConfig { script, record_log: false, ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    (runtime, server, url)
}

fn numpy_available() -> bool {
    std::process::Command::new("python3").args(["-c", "import numpy"]).status().is_ok_and(|s| s.success())
}

#[test]
fn hostile_weirdml_submissions_are_contained_and_leave_nothing_for_the_next() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap is missing or cannot create namespaces here (apt-get install bubblewrap)");
        return;
    }
    let (listener, port) = listener();
    let ws = Workspace::new();
    let (cache, data) = (ws.path("cache"), ws.path("data"));
    std::fs::create_dir_all(&data).unwrap();
    let nonce = format!("97{}{}", std::process::id(), port);
    let code = probe(port, &[cache.to_str().unwrap(), data.to_str().unwrap(), ws.dir.path().to_str().unwrap()], &nonce);
    // Submission 2 looks for anything submission 1 left behind, then sleeps past the limit.
    let second = "import os, time\nprint('LEFTOVERS', sorted(os.listdir('results')), sorted(os.listdir('.')), flush=True)\ntime.sleep(10 ** 6)\n";
    let prompts: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&prompts);
    let script = Script::function(move |req: &MockRequest| {
        let answered = req.body["messages"].as_array().map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count());
        seen.lock().unwrap().push(req.last_user.clone());
        let text = match answered {
            0 => format!("Probing.\n```python\n{code}\n```"),
            1 => format!("Looking around.\n```python\n{second}\n```"),
            _ => "No more code.".to_owned(),
        };
        MockOutcome::Reply(MockReply::text(text))
    });
    let (runtime, server, url) = start_mock(script);
    let numpy = numpy_available();
    let reference = if numpy { "  - {id: scripted-reference, provider: builtin, model: scripted, params: {script: reference}}\n" } else { "" };
    ws.write(
        "p.yaml",
        &format!(
            "name: hostile-weirdml\nmodels:\n  - {{id: player, provider: openai, model: mock-player, base_url: \"{url}\", api_key_env: {KEY_VAR}}}\n{reference}tasks:\n  - {{benchmark: weirdml, select: [mini-shapes], params: {{iterations: 5, time_limit_s: 20}}}}\nseeds: [0]\n"
        ),
    );
    let out = ws
        .cmd()
        .env(KEY_VAR, SECRET)
        .env_remove("EVALGRID_UNSAFE_NO_SANDBOX")
        .args(["--data-dir", data.to_str().unwrap(), "run", "p.yaml", "--json"])
        .output()
        .unwrap();
    let prompts = prompts.lock().unwrap().clone();
    assert_eq!(prompts.len(), 5, "five responses asked for: {prompts:#?}");
    let lines = probe_lines(&prompts[1]);
    assert_eq!(lines.len(), 1, "the probe's verdict reached the model:\n{}", prompts[1].chars().take(3000).collect::<String>());
    assert!(lines[0].contains("PROBE-RESULT clean"), "{}", lines[0]);
    assert!(prompts[2].contains("LEFTOVERS [] ['data', 'results']"), "submission 2 saw a fresh work dir:\n{}", prompts[2]);
    assert!(prompts[2].contains("Timeout after 20"), "{}", prompts[2]);
    assert_contained(&ws, &out, &listener, &[&cache, &data, ws.dir.path()], &nonce);
    if numpy {
        // The next cell (same run, same sandbox) is scored as if nothing had happened.
        let csv = std::fs::read_to_string(ws.path("reports/hostile-weirdml/summary.csv")).unwrap();
        let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
        let col = header.iter().position(|h| *h == "task_score").unwrap();
        let row = csv.lines().find(|l| l.starts_with("weirdml,scripted-reference,")).unwrap();
        assert_eq!(row.split(',').nth(col), Some("0.995"), "{csv}");
    }
    runtime.block_on(server.shutdown());
}

#[test]
fn hostile_bbq_execute_python_is_contained() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap is missing or cannot create namespaces here (apt-get install bubblewrap)");
        return;
    }
    bbq_case(None);
}

/// The uid the unprivileged variant runs as.
const NOBODY: u32 = 65534;

/// `evalgrid <args>` as `uid` (through `setpriv`), or `None` with the reason it cannot run.
fn as_user(uid: u32, ws: &Workspace) -> Result<std::process::Command, String> {
    let bin = assert_cmd::cargo::cargo_bin("evalgrid");
    let mut c = std::process::Command::new("setpriv");
    let id = uid.to_string();
    c.args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"]).arg(&bin);
    c.current_dir(ws.dir.path()).env_clear().env("PATH", "/usr/bin:/bin").env("EVALGRID_NO_PROGRESS", "1");
    let mut probe = std::process::Command::new("setpriv");
    probe.args(["--reuid", &id, "--regid", &id, "--clear-groups", "--"]).arg(&bin).arg("--version").env("PATH", "/usr/bin:/bin");
    match probe.output() {
        Ok(o) if o.status.success() => {}
        Ok(o) => return Err(format!("{} cannot run as uid {uid}: {}", bin.display(), String::from_utf8_lossy(&o.stderr).trim())),
        Err(e) => return Err(format!("setpriv: {e}")),
    }
    let py = std::process::Command::new("setpriv")
        .args(["--reuid", &id, "--regid", &id, "--clear-groups", "--", "python3", "-c", "pass"])
        .env("PATH", "/usr/bin:/bin")
        .status();
    if !py.is_ok_and(|s| s.success()) {
        return Err(format!("no python3 on /usr/bin:/bin that uid {uid} can run"));
    }
    let userns = std::process::Command::new("setpriv")
        .args(["--reuid", &id, "--regid", &id, "--clear-groups", "--", "bwrap", "--unshare-all", "--unshare-user", "--ro-bind", "/", "/", "true"])
        .env("PATH", "/usr/bin:/bin")
        .status();
    if !userns.is_ok_and(|s| s.success()) {
        return Err(format!("bubblewrap cannot create a user namespace as uid {uid}"));
    }
    Ok(c)
}

#[test]
fn hostile_bbq_execute_python_is_contained_when_evalgrid_runs_unprivileged() {
    // As root (CI) the same probe runs again with evalgrid itself as `nobody`: bubblewrap
    // then needs a user namespace, and there is no per-run uid to fall back on.
    let is_root = std::process::Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !is_root {
        eprintln!("SKIPPED: the unprivileged variant needs root to switch users (the other tests already run unprivileged here)");
        return;
    }
    bbq_case(Some(NOBODY));
}

fn bbq_case(uid: Option<u32>) {
    let (listener, port) = listener();
    let ws = Workspace::new();
    let cache = ws.path("cache");
    let nonce = format!("96{}{}", std::process::id(), port);
    let code = probe(port, &[cache.to_str().unwrap(), ws.dir.path().to_str().unwrap()], &nonce);
    let tool_results: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&tool_results);
    let probed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let script = Script::function(move |req: &MockRequest| {
        let messages = req.body["messages"].as_array().cloned().unwrap_or_default();
        // The run's result comes back as a tool message or (text protocol) a user message.
        for m in messages.iter().filter(|m| m["role"] != "assistant") {
            let text = m["content"].as_str().unwrap_or_default().to_owned();
            let mut seen = seen.lock().unwrap();
            if text.contains("PROBE-RESULT") && !seen.contains(&text) {
                seen.push(text);
            }
        }
        let state = messages.get(2).and_then(|m| m["content"].as_str()).unwrap_or("").to_owned();
        eprintln!("DEBUG {}", serde_json::to_string(&messages[3..]).unwrap().chars().rev().take(2500).collect::<String>().chars().rev().collect::<String>());
        let round: u32 = state.strip_prefix("Round ").and_then(|r| r.split([' ', '.']).next()).and_then(|r| r.parse().ok()).unwrap_or(99);
        if state.contains("QUERY PHASE") {
            if !probed.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return call("execute_python", json!({"code": code}));
            }
            return call("query", json!({"inputs": [59]}));
        }
        if state.contains("SCRATCHPAD PHASE") {
            return MockOutcome::Reply(MockReply::text("The rule is x > 58."));
        }
        let right = answers(&state);
        let predictions = if round == 0 { vec![0; right.len()] } else { right };
        call("submit_predictions", json!({"predictions": predictions}))
    });
    let (runtime, server, url) = start_mock(script);
    ws.write(
        "p.yaml",
        &format!(
            "name: hostile-bbq\nmodels:\n  - {{id: player, provider: openai, model: mock-player, base_url: \"{url}\", api_key_env: {KEY_VAR}}}\ntasks:\n  - {{benchmark: bbq, select: [is_greater_than_58], params: {{python_timeout_s: 30}}}}\nseeds: [0]\n"
        ),
    );
    let mut cmd = match uid {
        None => {
            let mut c = std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"));
            c.current_dir(ws.dir.path()).env_remove("EVALGRID_CACHE").env("EVALGRID_NO_PROGRESS", "1");
            c
        }
        Some(uid) => {
            std::os::unix::fs::chown(ws.dir.path(), Some(uid), Some(uid)).unwrap();
            std::os::unix::fs::chown(ws.path("p.yaml"), Some(uid), Some(uid)).unwrap();
            match as_user(uid, &ws) {
                Ok(c) => c,
                Err(why) => {
                    eprintln!("SKIPPED: {why}");
                    return;
                }
            }
        }
    };
    let out = cmd.env(KEY_VAR, SECRET).env_remove("EVALGRID_UNSAFE_NO_SANDBOX").args(["run", "p.yaml", "--json"]).output().unwrap();
    let results = tool_results.lock().unwrap().clone();
    assert_eq!(results.len(), 1, "one execute_python result reached the model: {results:#?}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines = probe_lines(&results[0]);
    assert_eq!(lines.len(), 1, "{}", results[0].chars().take(3000).collect::<String>());
    assert!(lines[0].contains("PROBE-RESULT clean"), "{}", lines[0]);
    assert_contained(&ws, &out, &listener, &[&cache, ws.dir.path()], &nonce);
    // The episode went on normally after the hostile run: solved in round 1.
    let (code, shown) = ws.run_json(&["show", "p.yaml", "player/bbq/is_greater_than_58/0", "--json"]);
    assert_eq!(code, 0, "{shown}");
    assert_eq!(shown["score"]["solved"], true, "{}", shown["score"]);
    runtime.block_on(server.shutdown());
}
