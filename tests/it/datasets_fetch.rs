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
