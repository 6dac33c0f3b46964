//! `--cache s3://bucket/prefix` against a real S3-compatible server (moto in server mode on
//! 127.0.0.1, which enforces conditional creates): shards on separate machines (separate
//! local directories) write every entry once, and the report equals a one-process run's.
//! Without moto (`pip install 'moto[server]'`) the moto test prints SKIPPED and passes.
//! A server that does not enforce conditional creates is refused (a stub, always run).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command as StdCommand, Stdio};
use std::time::{Duration, Instant};

use crate::support::Workspace;

const BUCKET: &str = "evalgrid-test";

/// A moto S3 server on a free port, killed (by its own pid) when dropped.
struct Moto {
    child: Child,
    endpoint: String,
}

impl Moto {
    /// Starts moto and creates a versioned bucket; `None` (with a SKIPPED note) without moto.
    fn start() -> Option<Self> {
        let has_moto = StdCommand::new("python3")
            .args(["-c", "import moto.server, boto3"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !has_moto {
            eprintln!("SKIPPED: moto is not installed (python3 -m pip install 'moto[server]'); the S3 shared-cache test needs it");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0").expect("free port").local_addr().expect("addr").port();
        let child = StdCommand::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("moto starts");
        let moto = Self { child, endpoint: format!("http://127.0.0.1:{port}") };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "moto did not answer on port {port} within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
        // Versioning keeps every PUT that landed, so the test can count writes per key.
        moto.boto3(&format!(
            "s3.create_bucket(Bucket='{BUCKET}'); s3.put_bucket_versioning(Bucket='{BUCKET}', VersioningConfiguration={{'Status': 'Enabled'}})"
        ));
        Some(moto)
    }

    /// Runs a boto3 snippet with `s3` bound to a client of this server; returns its stdout.
    fn boto3(&self, code: &str) -> String {
        let script = format!(
            "import boto3\ns3 = boto3.client('s3', endpoint_url='{}', aws_access_key_id='test', aws_secret_access_key='test', region_name='us-east-1')\n{code}\n",
            self.endpoint
        );
        let out = StdCommand::new("python3").args(["-c", &script]).output().expect("python3 runs");
        assert!(out.status.success(), "boto3 failed: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// How many versions each object under `prefix` has, and how many delete markers.
    fn versions(&self, prefix: &str) -> (std::collections::BTreeMap<String, usize>, usize) {
        let out = self.boto3(&format!(
            "import json, collections\nc = collections.Counter(); d = 0\n\
             for page in s3.get_paginator('list_object_versions').paginate(Bucket='{BUCKET}', Prefix='{prefix}'):\n\
             \x20   for v in page.get('Versions', []): c[v['Key']] += 1\n\
             \x20   d += len(page.get('DeleteMarkers', []))\n\
             print(json.dumps({{'versions': c, 'deleted': d}}))"
        ));
        let v: serde_json::Value = serde_json::from_str(out.trim()).expect("JSON from the version listing");
        let versions = v["versions"].as_object().expect("object").iter().map(|(k, n)| (k.clone(), n.as_u64().unwrap_or(0) as usize)).collect();
        (versions, v["deleted"].as_u64().unwrap_or(0) as usize)
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `evalgrid --cache <url> --cache-dir <local> <args>` in `ws`, talking to `endpoint`.
fn shared(ws: &Workspace, endpoint: &str, url: &str, local: &str, args: &[&str]) -> StdCommand {
    let mut c = StdCommand::new(assert_cmd::cargo::cargo_bin("evalgrid"));
    c.current_dir(ws.dir.path()).env_remove("EVALGRID_CACHE").env("EVALGRID_NO_PROGRESS", "1");
    for var in ["AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_DEFAULT_REGION", "AWS_PROFILE", "AWS_CONDITIONAL_PUT", "EVALGRID_CACHE_DIR"] {
        c.env_remove(var);
    }
    c.env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ALLOW_HTTP", "true")
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_REGION", "us-east-1")
        .args(["--cache", url, "--cache-dir", local])
        .args(args);
    c
}

fn json_of(out: &std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not one JSON object ({e}):\n{stdout}\nstderr:\n{}", String::from_utf8_lossy(&out.stderr)))
}

fn entry_files(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).map_or(0, |shards| shards.flatten().map(|s| std::fs::read_dir(s.path()).map_or(0, Iterator::count)).sum())
}

#[test]
fn shards_on_separate_machines_share_one_s3_cache_and_write_every_entry_once() {
    let Some(moto) = Moto::start() else { return };
    let url = format!("s3://{BUCKET}/team/grid");

    // The reference: one process on a local cache.
    let single = Workspace::new();
    single.quickstart();
    let (code, v) = single.run_json(&["run", "quickstart.yaml", "--json"]);
    assert_eq!(code, 0, "{v}");
    let total = v["cells_total"].as_u64().unwrap();

    let ws = Workspace::new();
    ws.quickstart();
    // Two machines at once, each with its own local directory.
    let spawn = |shard: &str, local: &str| {
        shared(&ws, &moto.endpoint, &url, local, &["run", "quickstart.yaml", "--json", "--shard", shard])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("evalgrid starts")
    };
    let (a, b) = (spawn("0/2", "machine-a"), spawn("1/2", "machine-b"));
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let (va, vb) = (json_of(&a), json_of(&b));
    assert_eq!((a.status.code(), b.status.code()), (Some(0), Some(0)), "{va}\n{vb}");
    assert_eq!(va["cells_run"].as_u64().unwrap() + vb["cells_run"].as_u64().unwrap(), total, "{va}\n{vb}");

    // A third machine runs shard 0/2 again from a fresh local directory: all found remotely.
    let out = shared(&ws, &moto.endpoint, &url, "machine-c", &["run", "quickstart.yaml", "--json", "--shard", "0/2"]).output().unwrap();
    let vc = json_of(&out);
    assert_eq!(out.status.code(), Some(0), "{vc}");
    assert_eq!((vc["cells_run"].as_u64(), vc["cells_cached"].as_u64()), (Some(0), va["cells_total"].as_u64()), "{vc}");

    // `status` on a fourth machine sees the whole grid and both shards' progress.
    let out = shared(&ws, &moto.endpoint, &url, "machine-d", &["status", "quickstart.yaml", "--json"]).output().unwrap();
    let st = json_of(&out);
    let shards = st["shards"].as_array().unwrap_or_else(|| panic!("{st}"));
    assert_eq!(shards.len(), 2, "both shards' progress records are remote: {st}");

    // The report from the shared cache equals the one-process run's, byte for byte.
    let out = shared(&ws, &moto.endpoint, &url, "machine-d", &["report", "quickstart.yaml", "--json"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    for file in ["summary.csv", "summary.md", "index.html"] {
        let expected = std::fs::read(single.path(&format!("reports/quickstart/{file}"))).unwrap();
        let got = std::fs::read(ws.path(&format!("reports/quickstart/{file}"))).unwrap_or_default();
        assert!(expected == got, "{file} differs from the one-process run");
    }

    // Every step entry was written exactly once (one version each, nothing deleted), and
    // the remote holds as many entries as the one-process cache.
    let (steps, deleted) = moto.versions("team/grid/v1/steps/");
    let rewritten: Vec<_> = steps.iter().filter(|(_, n)| **n != 1).collect();
    assert!(rewritten.is_empty(), "entries written more than once: {rewritten:?}");
    assert_eq!(deleted, 0, "no entry was deleted");
    assert_eq!(steps.len(), entry_files(&single.path("cache/v1/steps")), "one remote entry per step of the one-process run");
    let (blobs, _) = moto.versions("team/grid/v1/blobs/");
    assert!(!blobs.is_empty() && blobs.values().all(|n| *n == 1), "blobs written once: {blobs:?}");
}

/// An HTTP server that answers every request 200 and keeps nothing, like an S3 stand-in
/// that ignores `If-None-Match: *` (s3rver does this). Returns its endpoint.
fn accept_everything_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("free port");
    let endpoint = format!("http://{}", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || serve_ok(conn));
        }
    });
    endpoint
}

fn serve_ok(conn: TcpStream) {
    let Ok(mut writer) = conn.try_clone() else { return };
    let mut reader = BufReader::new(conn);
    loop {
        let mut length = 0usize;
        let mut line = String::new();
        // Request line and headers, up to the blank line.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if line == "\r\n" {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        if writer.write_all(b"HTTP/1.1 200 OK\r\nETag: \"0\"\r\nContent-Length: 0\r\n\r\n").is_err() {
            return;
        }
    }
}

#[test]
fn a_server_that_ignores_conditional_creates_is_refused_at_start_up() {
    let endpoint = accept_everything_server();
    let ws = Workspace::new();
    ws.quickstart();
    let out = shared(&ws, &endpoint, "s3://any-bucket/p", "local", &["run", "quickstart.yaml"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("does not enforce conditional creates"), "{stderr}");
    assert!(stderr.contains(&endpoint), "the message names the server: {stderr}");
    assert!(!ws.path("local/v1/steps").exists() || entry_files(&ws.path("local/v1/steps")) == 0, "nothing ran");
    // Only S3 URLs are shared caches.
    let out = ws.run(&["--cache", "gs://bucket/p", "status", "quickstart.yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}
