//! One running inference server: started through the guard ([`super::guard`]) in its own
//! process group on a free loopback port, its output in a log file, healthy once its health
//! endpoint answers 200, and stopped (group and all) when dropped.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::ServeError;
use super::engine::HEALTH_PATH;

/// Log lines shown when a server fails.
const TAIL_LINES: usize = 15;

/// How long evalgrid waits for the guard to stop the group before killing it itself.
const STOP_WAIT: Duration = Duration::from_secs(8);

/// A server evalgrid started; stopped when dropped.
#[derive(Debug)]
pub struct Server {
    guard: Child,
    /// The process group: the guard's pid.
    group: u32,
    /// `http://127.0.0.1:PORT/v1`.
    pub url: String,
    /// Where its output goes.
    pub log: PathBuf,
    stopped: bool,
}

/// What to start: the command line (see [`super::engine::command_line`]) for a port.
pub struct Start<'a> {
    /// The entry named in messages (the first that uses the server).
    pub model: &'a str,
    /// The engine, for messages (`llama.cpp (xllamacpp 2026.10.11549)`).
    pub engine: String,
    /// Builds the command line for a port.
    pub command: &'a dyn Fn(u16) -> Vec<String>,
    /// Its log file: appended to, each start under a banner line, so the requests an earlier
    /// run served stay readable after a later start.
    pub log: PathBuf,
    /// Variables removed from the server's environment (the pipeline's API keys).
    pub env_remove: Vec<String>,
    /// Variables set for it (`CUDA_VISIBLE_DEVICES`).
    pub env_set: Vec<(String, String)>,
    /// How long it may take to answer its health check.
    pub timeout: Duration,
}

impl Server {
    /// Starts the server and waits until it is healthy; a port taken between choosing and
    /// binding it is tried again with another.
    ///
    /// # Errors
    /// It exits before it is healthy (configuration: exit 2), is killed, or does not become
    /// healthy in time (runtime: exit 1); the error carries its last log lines.
    pub fn start(start: &Start<'_>) -> Result<Self, ServeError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(start) {
                Err(ServeError::Exited { tail, .. }) if attempt < 3 && port_taken(&tail) => {}
                other => return other,
            }
        }
    }

    fn start_once(start: &Start<'_>) -> Result<Self, ServeError> {
        let port = free_port().map_err(|source| ServeError::Spawn { model: start.model.to_owned(), source })?;
        if let Some(dir) = start.log.parent() {
            std::fs::create_dir_all(dir).map_err(|source| ServeError::Spawn { model: start.model.to_owned(), source })?;
        }
        let spawn = |source| ServeError::Spawn { model: start.model.to_owned(), source };
        let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&start.log).map_err(spawn)?;
        let when = chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now()).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        writeln!(log, "\n===== evalgrid {}: {when} starting {} for model {} on 127.0.0.1:{port} =====", env!("CARGO_PKG_VERSION"), start.engine, start.model)
            .map_err(spawn)?;
        // What this start wrote begins here: its error shows these lines, not an earlier start's.
        let from = log.metadata().map_err(spawn)?.len();
        let err_log = log.try_clone().map_err(|source| ServeError::Spawn { model: start.model.to_owned(), source })?;
        let exe = std::env::current_exe().map_err(|source| ServeError::Spawn { model: start.model.to_owned(), source })?;
        let mut cmd = Command::new(exe);
        cmd.arg(super::guard::GUARD_ARG).arg(std::process::id().to_string()).arg("--").args((start.command)(port));
        for var in &start.env_remove {
            cmd.env_remove(var);
        }
        for (var, value) in &start.env_set {
            cmd.env(var, value);
        }
        // Its own process group: Ctrl-C at the terminal reaches evalgrid only, which stops
        // the server itself; the guard stops the group when evalgrid is gone.
        cmd.process_group(0).stdin(Stdio::null()).stdout(log).stderr(err_log);
        // Started from the calling thread, which must live as long as the server (the main
        // thread): the parent-death signal follows the thread that forked, not the process.
        let guard = cmd.spawn().map_err(|source| ServeError::Spawn { model: start.model.to_owned(), source })?;
        let group = guard.id();
        let mut server = Self { guard, group, url: format!("http://127.0.0.1:{port}/v1"), log: start.log.clone(), stopped: false };
        let deadline = Instant::now() + start.timeout;
        loop {
            if let Ok(Some(status)) = server.guard.try_wait() {
                server.stop();
                let tail = tail_from(&start.log, from);
                let code = status.code().unwrap_or(0);
                return Err(if status.signal().is_some() || code > 128 {
                    ServeError::Killed { model: start.model.to_owned(), engine: start.engine.clone(), status: describe(status), log: start.log.clone(), tail }
                } else {
                    ServeError::Exited { model: start.model.to_owned(), engine: start.engine.clone(), status: describe(status), log: start.log.clone(), tail }
                });
            }
            if healthy(port) {
                return Ok(server);
            }
            if Instant::now() >= deadline {
                server.stop();
                return Err(ServeError::Timeout {
                    model: start.model.to_owned(),
                    engine: start.engine.clone(),
                    seconds: start.timeout.as_secs(),
                    log: start.log.clone(),
                    tail: tail_from(&start.log, from),
                });
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// The process group the server runs in (the guard's pid).
    #[must_use]
    pub fn group(&self) -> u32 {
        self.group
    }

    /// Stops the server and everything in its group; safe to call twice.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        crate::platform::signal_process(self.group, false);
        let deadline = Instant::now() + STOP_WAIT;
        while Instant::now() < deadline {
            if matches!(self.guard.try_wait(), Ok(Some(_))) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // The group id stays reserved while any member lives, so this reaches only ours.
        crate::platform::signal_group(self.group, true);
        let _ = self.guard.kill();
        let _ = self.guard.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

fn describe(status: std::process::ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) if code > 128 => format!("signal {}", code - 128),
        (Some(code), _) => format!("status {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        _ => "an unknown status".to_owned(),
    }
}

/// A port free on 127.0.0.1 now (the OS picks it).
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?.local_addr()?.port())
}

/// Whether the server's log says its port was taken.
pub(crate) fn port_taken(tail: &[String]) -> bool {
    tail.iter().any(|l| {
        let l = l.to_ascii_lowercase();
        l.contains("address already in use") || l.contains("couldn't bind") || l.contains("could not bind")
    })
}

/// `GET /health` answered 200 (llama.cpp answers 503 while it loads, vLLM nothing).
fn healthy(port: u16) -> bool {
    let address = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let Ok(mut stream) = TcpStream::connect_timeout(&address, Duration::from_secs(1)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    let request = format!("GET {HEALTH_PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 32];
    let mut got = 0;
    while got < 12 {
        match stream.read(&mut head[got..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    let line = String::from_utf8_lossy(&head[..got]);
    line.starts_with("HTTP/1.") && line.get(9..12) == Some("200")
}

/// The last lines of a log file, escaped for the terminal.
#[must_use]
pub fn tail(path: &Path) -> Vec<String> {
    tail_from(path, 0)
}

/// [`tail`] of what was written from byte `from` on (one start's part of an appended log).
#[must_use]
pub fn tail_from(path: &Path, from: u64) -> Vec<String> {
    let Ok(bytes) = std::fs::read(path) else { return Vec::new() };
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    let start = bytes.len().saturating_sub(64 * 1024).max(from);
    let text = String::from_utf8_lossy(&bytes[start..]);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(TAIL_LINES)..].iter().map(|l| crate::text::one_line(l).chars().take(400).collect()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// llama.cpp answers 503 while it loads the model: only a 200 is ready.
    #[test]
    fn health_is_a_200_answer() {
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0))).unwrap();
        let port = listener.local_addr().unwrap().port();
        let answers = std::thread::spawn(move || {
            for status in ["503 Service Unavailable", "200 OK"] {
                let (mut stream, _) = listener.accept().unwrap();
                let mut buf = [0u8; 512];
                let _ = stream.read(&mut buf);
                stream.write_all(format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\n\r\n").as_bytes()).unwrap();
            }
        });
        assert!(!healthy(port), "loading");
        assert!(healthy(port), "ready");
        answers.join().unwrap();
        assert!(!healthy(port), "nobody listens");
    }

    #[test]
    fn a_taken_port_is_the_machines_state_not_the_pipelines() {
        let exited = |line: &str| ServeError::Exited {
            model: "m".into(),
            engine: "llama.cpp".into(),
            status: "status 1".into(),
            log: PathBuf::from("l"),
            tail: vec![line.to_owned()],
        };
        assert!(!exited("couldn't bind HTTP server socket, hostname: 127.0.0.1, port: 8080").is_configuration());
        assert!(exited("error: invalid argument: --foo").is_configuration());
    }
}
