//! `evalgrid datasets fetch URL --sha256 HEX` (issue 32): a user's own dataset downloaded from
//! a local HTTP server, installed only when its content matches the pin, and the installed
//! file runs as a `qa` task.

use std::io::{Read, Write};
use std::net::TcpListener;

use sha2::{Digest, Sha256};

use crate::support::Workspace;

const ROWS: &str = "{\"input\": \"What is 2+2?\", \"target\": \"4\"}\n{\"input\": \"Capital of France?\", \"target\": \"Paris\"}\n";

/// Serves `body` on 127.0.0.1 to `requests` GETs, then stops; returns the base URL.
fn serve(body: &'static str, requests: usize) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().take(requests) {
            let Ok(mut stream) = stream else { continue };
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            let _ = write!(stream, "HTTP/1.1 200 OK\r\nContent-Type: application/jsonl\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    url
}

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_pinned_url_is_installed_and_a_mismatch_installs_nothing() {
    let ws = Workspace::new();
    let url = format!("{}/data/heldout.jsonl", serve(ROWS, 2));
    let into = ws.path("datasets");
    let into = into.to_str().unwrap();

    // A wrong pin: refused, and nothing is left in the folder.
    let wrong = "0".repeat(64);
    let out = ws.run(&["datasets", "fetch", &url, "--sha256", &wrong, "--into", into]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(&hex(ROWS.as_bytes())) && stderr.contains("nothing installed"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(ws.path("datasets")).map(|d| d.flatten().map(|e| e.file_name()).collect()).unwrap_or_default();
    assert!(left.is_empty(), "a refused download leaves nothing: {left:?}");

    // No pin, or a malformed one: a usage error before any download.
    assert_eq!(ws.run(&["datasets", "fetch", &url, "--into", into]).status.code(), Some(2));
    assert_eq!(ws.run(&["datasets", "fetch", &url, "--sha256", "abc", "--into", into]).status.code(), Some(2));

    // The right pin: installed byte for byte, and usable as a qa task.
    let out = ws.run(&["datasets", "fetch", &url, "--sha256", &hex(ROWS.as_bytes()).to_uppercase(), "--into", into]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::read_to_string(ws.path("datasets/heldout.jsonl")).unwrap(), ROWS);
    ws.write(
        "p.yaml",
        "name: fetched\nmodels:\n  - {id: oracle, provider: builtin, model: oracle}\ntasks:\n  - {benchmark: qa, params: {dataset: datasets/heldout.jsonl, scorers: [match]}}\nseeds: [0]\n",
    );
    let (code, v) = ws.run_json(&["run", "p.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["cells_failed"], 0, "{v}");
}

/// `tests/it/fetch_server.py`: a file server that drips, lies about sizes and asks for a
/// password; killed on drop.
struct FileServer {
    child: std::process::Child,
    base: String,
    counts: tempfile::NamedTempFile,
}

impl FileServer {
    fn start() -> Self {
        use std::io::BufRead as _;
        let counts = tempfile::NamedTempFile::new().unwrap();
        let mut child = std::process::Command::new("python3")
            .arg(crate::support::repo().join("tests/it/fetch_server.py"))
            .arg(counts.path())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut port = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut port).unwrap();
        Self { child, base: format!("127.0.0.1:{}", port.trim()), counts }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}/{path}", self.base)
    }

    /// Body bytes the server sent for `path`.
    fn sent(&self, path: &str) -> u64 {
        let text = std::fs::read_to_string(self.counts.path()).unwrap();
        text.lines().filter_map(|l| l.split_once(' ')).filter(|(p, _)| p.trim_start_matches('/') == path).map(|(_, n)| n.parse::<u64>().unwrap()).sum()
    }
}

impl Drop for FileServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The names in `dir` (hidden ones too).
fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> =
        std::fs::read_dir(dir).map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect()).unwrap_or_default();
    names.sort();
    names
}

fn fetch(ws: &Workspace, url: &str, extra: &[&str]) -> (Option<i32>, String) {
    let pin = hex(ROWS.as_bytes());
    let out = ws.cmd().args(["datasets", "fetch", url, "--sha256", &pin, "--into"]).arg(ws.path("datasets")).args(extra).output().unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.code(), text)
}

#[test]
fn a_stalled_or_endless_download_is_given_up_and_leaves_nothing() {
    let ws = Workspace::new();
    let server = FileServer::start();
    // One byte every 5 s: before, it hung for ever.
    let (code, err) = fetch(&ws, &server.url("drip/rows.jsonl"), &["--read-timeout-s", "1"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("/drip/rows.jsonl` failed: no data for 1 s (`--read-timeout-s`)"), "{err}");
    // Fast enough for the idle timeout, never done: the overall one.
    let (code, err) = fetch(&ws, &server.url("trickle/rows.jsonl"), &["--read-timeout-s", "30", "--timeout-s", "2"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("took longer than 2 s in all (`--timeout-s`)"), "{err}");
    // A Content-Length over the cap: refused before any of the body is read (this body never
    // comes, so only the header can end it with the idle timeout this long).
    let (code, err) = fetch(&ws, &server.url("huge/rows.jsonl"), &["--read-timeout-s", "600"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("the file is 2147483648 bytes (its Content-Length), more than the 1073741824 allowed (`--max-bytes`)"), "{err}");
    // No size announced: reading stops at the cap.
    let (code, err) = fetch(&ws, &server.url("endless/rows.jsonl"), &["--max-bytes", "1000000"]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("sent more than the 1000000 bytes allowed (`--max-bytes`): stopped there"), "{err}");
    assert!(names(&ws.path("datasets")).is_empty(), "nothing is left: {:?}", names(&ws.path("datasets")));
    // The cap itself, when the file fits.
    let (code, err) = fetch(&ws, &server.url("rows.jsonl"), &["--max-bytes", &ROWS.len().to_string()]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(server.sent("rows.jsonl"), ROWS.len() as u64);
}

#[test]
fn a_urls_password_is_never_printed() {
    let ws = Workspace::new();
    let server = FileServer::start();
    let url = server.url("auth/rows.jsonl").replace("http://", "http://alice:s3cret@");
    // A wrong pin, a refused connection, a wrong password: every message without it.
    let wrong = "0".repeat(64);
    let out = ws.cmd().args(["datasets", "fetch", &url, "--sha256", &wrong, "--into"]).arg(ws.path("datasets")).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("`http://***@127.0.0.1:") && err.contains("nothing installed"), "{err}");
    for bad in [url.replace(&server.base, "127.0.0.1:9"), url.replace("s3cret", "s3cret-not"), url.replace("/rows.jsonl", "/")] {
        let (code, err) = fetch(&ws, &bad, &[]);
        assert!(matches!(code, Some(1 | 2)), "{err}");
        assert!(err.contains("***@") && !err.contains("s3cret") && !err.contains("alice"), "{err}");
    }
    // The right password (sent as HTTP Basic) and pin: installed, and still not printed.
    let (code, out) = fetch(&ws, &url, &["-vv"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("s3cret"), "{out}");
    assert_eq!(std::fs::read_to_string(ws.path("datasets/rows.jsonl")).unwrap(), ROWS);
}

#[cfg(unix)]
#[test]
fn a_killed_fetch_leaves_a_partial_file_the_next_one_removes_and_files_follow_the_umask() {
    let ws = Workspace::new();
    let server = FileServer::start();
    let into = ws.path("datasets");
    let partials = || names(&into).into_iter().filter(|n| n.starts_with(".evalgrid-") && n.ends_with(".partial")).collect::<Vec<_>>();
    let start = |path: &str| {
        let mut cmd = std::process::Command::new(assert_cmd::cargo::cargo_bin("evalgrid"));
        cmd.current_dir(ws.dir.path()).args(["datasets", "fetch", &server.url(path), "--sha256", &"0".repeat(64), "--into"]).arg(&into);
        let child = cmd.stderr(std::process::Stdio::null()).spawn().unwrap();
        // Until its first byte is in: its partial file is open.
        while server.sent(path) == 0 {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        child
    };
    // A fetch at work, then a second one, killed (SIGKILL) mid-download.
    let mut live = start("trickle/rows.jsonl");
    assert_eq!(partials().len(), 1, "{:?}", names(&into));
    let mut killed = start("drip/rows.jsonl");
    assert_eq!(partials().len(), 2, "a fetch leaves another's file alone: {:?}", names(&into));
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert_eq!(partials().len(), 2, "a kill -9 leaves its file: {:?}", names(&into));
    // The next fetch removes the dead one's file only; the fetched file gets the umask's mode.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 027 && exec \"$0\" \"$@\"")
        .arg(assert_cmd::cargo::cargo_bin("evalgrid"))
        .args(["datasets", "fetch", &server.url("rows.jsonl"), "--sha256", &hex(ROWS.as_bytes()), "--into"])
        .arg(&into)
        .current_dir(ws.dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(partials().len(), 1, "the live fetch's file stays: {:?}", names(&into));
    live.kill().unwrap();
    live.wait().unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    assert_eq!(std::fs::metadata(into.join("rows.jsonl")).unwrap().permissions().mode() & 0o777, 0o640);
    let (code, err) = fetch(&ws, &server.url("rows.jsonl"), &[]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(names(&into), ["rows.jsonl"], "no hidden file is left");
}
