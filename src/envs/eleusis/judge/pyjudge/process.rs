//! The sandboxed `python3` worker process behind [`super::PyJudge`]: spawning (empty
//! environment, fresh temp cwd, `-s -S -B`), the hello handshake, and line-delimited JSON
//! request/response with a hard wall-clock deadline. The worker is a zygote: started once,
//! it forks a fresh child (own uid where possible) for every check, relays that check's
//! requests and replies, and kills the child when the check ends, so no state of one
//! check's guess code reaches the next while interpreter start is paid once. Reads and writes go through helper
//! threads so that a hung worker can never block the caller: on a missed deadline the
//! process is killed and the error says why.
//!
//! Not `python3 -I`: `-I` implies `-E`, which ignores `PYTHONHASHSEED`, so string and Enum
//! hashes (and with them the iteration order of sets in guess code) would change with every
//! worker start. The environment is cleared instead (only `PYTHONHASHSEED=0` is set), which
//! leaves nothing for `-E` to ignore; `-s -S` and the empty temp cwd cover the rest of `-I`.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ChildStdin;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::envs::eleusis::game::card::Card;
use crate::envs::eleusis::game::deck::universe;
use crate::sandbox::worker::{SandboxedWorker, WorkerLimits, WorkerSpec};

/// The worker script, embedded so that the judge needs nothing on disk but `python3`.
pub const WORKER_SOURCE: &str = include_str!("worker.py");

/// The protocol version the worker announces; 2 = the worker is never sent the secret
/// verdicts; 3 = it is a zygote that forks a fresh child per check (`z`/`c` framed lines).
const WORKER_PROTOCOL: u64 = 3;

/// Longest accepted reply line; a worker flooding stdout is treated as a protocol error.
const MAX_LINE_BYTES: u64 = 64 << 20;
/// Bytes of worker stderr kept for crash reports.
const STDERR_TAIL_BYTES: usize = 4096;

/// Why a worker request did not produce a reply (the worker is dead or killed afterwards).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkerFailure {
    /// `python3` could not be started or did not complete the handshake.
    #[error("cannot start the python judge worker: {0}")]
    Spawn(String),
    /// No reply before the deadline; the worker was killed.
    #[error("no reply from the python judge worker within {limit_ms} ms (killed)")]
    Timeout {
        /// The wall-clock budget that was exceeded, in milliseconds.
        limit_ms: u64,
    },
    /// The worker exited (crash, rlimit kill such as SIGXCPU, …).
    #[error("python judge worker died: {0}")]
    Crashed(String),
    /// The worker replied something that is not a valid protocol message.
    #[error("python judge worker protocol error: {0}")]
    Protocol(String),
}

/// What the worker reported in its hello line (provenance of the judge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerInfo {
    /// Python version string, e.g. `3.11.7`.
    pub python_version: String,
    /// Absolute path of the interpreter that was started.
    pub python_path: PathBuf,
    /// True when `PYTHONHASHSEED=0` took effect (deterministic set iteration order).
    pub hash_seed_fixed: bool,
}

/// A live worker process with its helper threads.
#[derive(Debug)]
pub(super) struct Worker {
    zygote: SandboxedWorker,
    to_worker: Option<Sender<Vec<u8>>>,
    from_worker: Receiver<Result<String, String>>,
    stderr_tail: Arc<Mutex<Vec<u8>>>,
    next_id: u64,
    /// Number of the live child (the one check being served), if any.
    child: Option<u64>,
    children: u64,
    info: WorkerInfo,
}

/// Finds `name` on the caller's `PATH` (the worker itself gets an empty environment).
pub(super) fn resolve_program(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join(name)).find(|candidate| candidate.is_file())
}

fn reader_thread(stdout: impl Read + Send + 'static, tx: Sender<Result<String, String>>) {
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut buf = Vec::new();
            let read = (&mut reader).take(MAX_LINE_BYTES).read_until(b'\n', &mut buf);
            match read {
                Ok(0) => return,
                Ok(_) if buf.last() != Some(&b'\n') => {
                    let _ = tx.send(Err("reply line too long or truncated".to_owned()));
                    return;
                }
                Ok(_) => {
                    let line = String::from_utf8(buf).map_err(|_| "reply line is not UTF-8".to_owned());
                    if tx.send(line).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(format!("read error: {e}")));
                    return;
                }
            }
        }
    });
}

fn writer_thread(mut stdin: ChildStdin) -> Sender<Vec<u8>> {
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        for buf in rx {
            if stdin.write_all(&buf).and_then(|()| stdin.flush()).is_err() {
                return;
            }
        }
    });
    tx
}

fn stderr_thread(mut stderr: impl Read + Send + 'static, tail: Arc<Mutex<Vec<u8>>>) {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 1024];
        loop {
            match stderr.read(&mut chunk) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if let Ok(mut t) = tail.lock() {
                        t.extend_from_slice(&chunk[..n]);
                        if t.len() > STDERR_TAIL_BYTES {
                            let cut = t.len() - STDERR_TAIL_BYTES;
                            t.drain(..cut);
                        }
                    }
                }
            }
        }
    });
}

impl Worker {
    /// Starts a worker and completes the hello handshake within `startup_limit`.
    pub(super) fn spawn(python: &Path, memory_limit_bytes: u64, startup_limit: Duration) -> Result<Self, WorkerFailure> {
        let program = resolve_program(python).ok_or_else(|| WorkerFailure::Spawn(format!("{} not found on PATH", python.display())))?;
        let sandbox = crate::sandbox::shared(&program).map_err(|e| WorkerFailure::Spawn(format!("no sandbox for the python judge: {e}")))?;
        let spec = WorkerSpec {
            args: ["-s", "-S", "-B", "-c", WORKER_SOURCE].iter().map(|s| (*s).to_owned()).chain([memory_limit_bytes.to_string()]).collect(),
            env: [("PYTHONHASHSEED".to_owned(), "0".to_owned())].into(),
            limits: WorkerLimits {
                // The worker sets its own RLIMIT_AS for guess calls; this bounds the rest.
                address_space_bytes: memory_limit_bytes.saturating_add(256 << 20),
                ..WorkerLimits::default()
            },
            zygote: true,
        };
        let mut zygote = sandbox.spawn_worker(&spec).map_err(|e| WorkerFailure::Spawn(format!("{}: {e}", program.display())))?;
        let (Some(stdin), Some(stdout), Some(stderr)) = (zygote.child.stdin.take(), zygote.child.stdout.take(), zygote.child.stderr.take()) else {
            return Err(WorkerFailure::Spawn("worker pipes unavailable".to_owned()));
        };
        let (tx, from_worker) = mpsc::channel();
        reader_thread(stdout, tx);
        let stderr_tail = Arc::new(Mutex::new(Vec::new()));
        stderr_thread(stderr, Arc::clone(&stderr_tail));
        let mut worker = Worker {
            zygote,
            to_worker: Some(writer_thread(stdin)),
            from_worker,
            stderr_tail,
            next_id: 1,
            child: None,
            children: 0,
            info: WorkerInfo { python_version: String::new(), python_path: program, hash_seed_fixed: false },
        };
        let hello = worker.receive(None, Instant::now() + startup_limit, startup_limit).map_err(|e| WorkerFailure::Spawn(e.to_string()))?;
        worker.check_hello(&hello)?;
        // Its mounts are made: the scratch folder is not needed while it lives on.
        worker.zygote.release_folder();
        Ok(worker)
    }

    fn check_hello(&mut self, hello: &Value) -> Result<(), WorkerFailure> {
        if hello.get("hello").and_then(Value::as_u64) != Some(WORKER_PROTOCOL) {
            return Err(WorkerFailure::Spawn(format!("unexpected hello: {hello}")));
        }
        let expected: Vec<String> = universe().iter().map(Card::to_string).collect();
        let got: Option<Vec<String>> = hello.get("universe").and_then(|u| serde_json::from_value(u.clone()).ok());
        if got.as_ref() != Some(&expected) {
            return Err(WorkerFailure::Spawn("worker card universe differs from the Rust universe".to_owned()));
        }
        self.info.python_version = hello.get("python").and_then(Value::as_str).unwrap_or("").to_owned();
        self.info.hash_seed_fixed = hello.get("hash_seed_fixed").and_then(Value::as_bool).unwrap_or(false);
        Ok(())
    }

    /// Between checks, with its zygote running (fit to be reused by another judge).
    pub(super) fn is_idle_and_alive(&mut self) -> bool {
        self.child.is_none() && self.to_worker.is_some() && matches!(self.zygote.try_exit(), Ok(None))
    }

    /// Provenance of this worker.
    pub(super) fn info(&self) -> &WorkerInfo {
        &self.info
    }

    /// Sends `request` (an object; an `id` is added) and waits for its reply until
    /// `deadline`. On any failure the worker is killed; the caller must drop it.
    pub(super) fn request(&mut self, mut request: Value, deadline: Instant, budget: Duration) -> Result<Value, WorkerFailure> {
        if self.child.is_none() {
            self.fork_child()?;
        }
        let id = self.next_id;
        self.next_id += 1;
        if let Value::Object(map) = &mut request {
            map.insert("id".to_owned(), Value::from(id));
        }
        self.send(b'c', &request)?;
        self.receive(Some(id), deadline, budget)
    }

    /// Ends the live check (if any) and has the zygote fork a fresh child for the next one,
    /// with its own uid where the sandbox can give one.
    pub(super) fn fork_child(&mut self) -> Result<(), WorkerFailure> {
        self.end_child()?;
        self.children += 1;
        self.child = Some(self.children);
        let uid = self.zygote.next_child_uid();
        self.send(b'z', &serde_json::json!({"op": "fork", "seq": self.children, "uid": uid}))
    }

    /// Ends the live check: the zygote kills its child (nothing of it survives).
    pub(super) fn end_child(&mut self) -> Result<(), WorkerFailure> {
        if self.child.take().is_none() {
            return Ok(());
        }
        self.send(b'z', &serde_json::json!({"op": "end"}))
    }

    fn send(&mut self, to: u8, message: &Value) -> Result<(), WorkerFailure> {
        let mut line = vec![to];
        serde_json::to_writer(&mut line, message).map_err(|e| WorkerFailure::Protocol(format!("cannot encode request: {e}")))?;
        line.push(b'\n');
        let sent = self.to_worker.as_ref().is_some_and(|tx| tx.send(line).is_ok());
        if sent { Ok(()) } else { Err(self.crashed()) }
    }

    fn receive(&mut self, id: Option<u64>, deadline: Instant, budget: Duration) -> Result<Value, WorkerFailure> {
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let line = match self.from_worker.recv_timeout(wait) {
                Ok(Ok(line)) => line,
                Ok(Err(why)) => {
                    self.kill();
                    return Err(WorkerFailure::Protocol(why));
                }
                Err(RecvTimeoutError::Timeout) => {
                    self.kill();
                    return Err(WorkerFailure::Timeout { limit_ms: u64::try_from(budget.as_millis()).unwrap_or(u64::MAX) });
                }
                Err(RecvTimeoutError::Disconnected) => return Err(self.crashed()),
            };
            let (from_zygote, body) = match line.as_bytes().first() {
                Some(b'z') => (true, &line[1..]),
                Some(b'c') => (false, &line[1..]),
                _ => {
                    self.kill();
                    return Err(WorkerFailure::Protocol("reply line without z/c frame".to_owned()));
                }
            };
            let value: Value = match serde_json::from_str(body) {
                Ok(v) => v,
                Err(e) => {
                    self.kill();
                    return Err(WorkerFailure::Protocol(format!("invalid JSON reply: {e}")));
                }
            };
            match (id, from_zygote) {
                (None, true) => return Ok(value),
                (Some(id), false) if value.get("id").and_then(Value::as_u64) == Some(id) => return Ok(value),
                (Some(_), true) if self.child.is_some() && value.get("reaped").and_then(Value::as_u64) == self.child => {
                    let status = value.get("status").and_then(Value::as_i64).unwrap_or(-1);
                    return Err(self.child_died(status));
                }
                // The reaping of an earlier check's child, or a reply to an older request: skip it.
                _ => {}
            }
        }
    }

    /// Kills the process (idempotent) and reaps it.
    pub(super) fn kill(&mut self) {
        self.to_worker = None;
        self.zygote.kill();
    }

    /// The live check's child exited before answering (`status` as `waitpid` gave it).
    fn child_died(&mut self, status: i64) -> WorkerFailure {
        self.child = None;
        let how = if status & 0x7f == 0 { format!("exit status: {}", (status >> 8) & 0xff) } else { format!("signal: {}", status & 0x7f) };
        self.kill();
        WorkerFailure::Crashed(self.with_stderr(format!("check process {how}")))
    }

    fn with_stderr(&self, status: String) -> String {
        // Give the stderr thread a moment to drain the last bytes.
        std::thread::sleep(Duration::from_millis(20));
        let tail = self.stderr_tail.lock().map(|t| String::from_utf8_lossy(&t).trim().to_owned()).unwrap_or_default();
        let last = tail.lines().last().unwrap_or("").to_owned();
        if last.is_empty() { status } else { format!("{status}; stderr: {last}") }
    }

    fn crashed(&mut self) -> WorkerFailure {
        self.to_worker = None;
        // The worker may have exited on its own: read its status before killing the rest.
        let status = match self.zygote.try_exit() {
            Ok(Some(s)) => s.to_string(),
            Ok(None) => "killed".to_owned(),
            Err(e) => format!("wait failed: {e}"),
        };
        self.zygote.kill();
        WorkerFailure::Crashed(self.with_stderr(status))
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}
