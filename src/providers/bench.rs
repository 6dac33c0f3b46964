//! A throughput benchmark of the client against the local mock server.
//!
//! It answers "how close to `concurrency / latency` calls per second does the client get,
//! and at what CPU cost", which bounds how fast a grid can run against a real provider.
//! CPU time is read from `/proc/self/stat` and covers the whole process, mock included.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::task::JoinSet;

use super::client::ProviderClient;
use super::limiter::ConcurrencyMode;
use super::mock::{MockConfig, MockServer};
use super::transport::ClientConfig;
use super::types::{ChatRequest, Endpoint, Message, ProviderKind, Secret};

/// Linux `USER_HZ`, the unit of `/proc/self/stat` CPU times on every mainstream arch.
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// Result of [`bench_throughput`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchReport {
    /// Successful calls per wall-clock second.
    pub calls_per_sec: f64,
    /// `concurrency / latency`, the rate a zero-overhead client would reach.
    pub ideal_calls_per_sec: f64,
    /// `calls_per_sec / ideal_calls_per_sec`.
    pub fraction: f64,
    /// Process CPU seconds (user + system, client and mock) per 1000 calls; `None` when
    /// `/proc/self/stat` is unavailable (non-Linux).
    pub cpu_seconds_per_1000: Option<f64>,
    /// Calls that failed (should be 0).
    pub errors: usize,
    /// Wall time of the run.
    pub elapsed: Duration,
}

/// Process user + system CPU seconds so far, from `/proc/self/stat` fields 14 and 15.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let user: f64 = fields.get(11)?.parse().ok()?;
    let system: f64 = fields.get(12)?.parse().ok()?;
    Some((user + system) / CLOCK_TICKS_PER_SECOND)
}

/// Runs `calls` OpenAI-protocol calls, `concurrency` at a time, against a mock that
/// answers after `latency`, and reports throughput and CPU cost.
pub async fn bench_throughput(calls: usize, concurrency: usize, latency: Duration) -> BenchReport {
    let config = MockConfig { latency, record_log: false, ..MockConfig::default() };
    let server = match MockServer::start(config).await {
        Ok(server) => server,
        Err(error) => {
            tracing::error!(%error, "cannot start the mock server");
            return failed_report(calls);
        }
    };
    let client_config =
        ClientConfig { concurrency: ConcurrencyMode::Static { max_concurrency: concurrency.max(1) }, use_system_proxy: false, ..ClientConfig::default() };
    let client = match ProviderClient::new(client_config) {
        Ok(client) => Arc::new(client),
        Err(error) => {
            tracing::error!(%error, "cannot build the client");
            return failed_report(calls);
        }
    };
    let endpoint = Arc::new(Endpoint::new(ProviderKind::OpenAi, "bench-model").with_base_url(server.base_url()).with_api_key(Secret::new("bench-key")));
    let cpu_before = process_cpu_seconds();
    let started = Instant::now();
    let mut tasks = JoinSet::new();
    for index in 0..calls {
        let client = Arc::clone(&client);
        let endpoint = Arc::clone(&endpoint);
        tasks.spawn(async move {
            let request = ChatRequest { messages: vec![Message::user(format!("question number {index}"))], ..ChatRequest::default() };
            client.call(&endpoint, &request).await.is_ok()
        });
    }
    let mut errors = 0;
    while let Some(joined) = tasks.join_next().await {
        if !matches!(joined, Ok(true)) {
            errors += 1;
        }
    }
    let elapsed = started.elapsed();
    let cpu = cpu_before.zip(process_cpu_seconds()).map(|(before, after)| after - before);
    server.shutdown().await;
    #[expect(clippy::cast_precision_loss, reason = "call counts are far below 2^52")]
    let (succeeded, total, width) = ((calls - errors) as f64, calls.max(1) as f64, concurrency.max(1) as f64);
    let calls_per_sec = succeeded / elapsed.as_secs_f64().max(f64::EPSILON);
    let ideal_calls_per_sec = width.min(total) / latency.as_secs_f64().max(f64::EPSILON);
    BenchReport {
        calls_per_sec,
        ideal_calls_per_sec,
        fraction: calls_per_sec / ideal_calls_per_sec,
        cpu_seconds_per_1000: cpu.map(|seconds| seconds * 1000.0 / total),
        errors,
        elapsed,
    }
}

fn failed_report(calls: usize) -> BenchReport {
    BenchReport { calls_per_sec: 0.0, ideal_calls_per_sec: 0.0, fraction: 0.0, cpu_seconds_per_1000: None, errors: calls, elapsed: Duration::ZERO }
}

/// An nginx `limit_req` server in front of an upstream: an independent implementation of
/// "R requests per second, 429 with `Retry-After: 1` above that", for the rate-limit tests
/// and `evalgrid bench rate-limit`. nginx runs as a child process with its own prefix in a
/// temp dir and is killed on drop.
#[derive(Debug)]
pub struct RateLimitedProxy {
    child: std::process::Child,
    dir: tempfile::TempDir,
    port: u16,
}

/// Why the rate-limited proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// `nginx` is not on `PATH` (install it with `apt-get install nginx`).
    #[error("nginx is not installed (apt-get install -y nginx)")]
    NotInstalled,
    /// Files, ports or the process could not be set up.
    #[error("cannot start nginx: {0}")]
    Io(#[from] std::io::Error),
    /// nginx exited or never listened; its error log is attached.
    #[error("nginx did not start: {0}")]
    Failed(String),
}

impl RateLimitedProxy {
    /// Whether an `nginx` binary can be run.
    #[must_use]
    pub fn nginx_available() -> bool {
        std::process::Command::new("nginx")
            .arg("-v")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }

    /// Starts nginx on a free port of 127.0.0.1, allowing `rate` requests per second with
    /// no burst (`limit_req ... nodelay`), proxying the rest to `upstream` (`host:port`).
    ///
    /// # Errors
    /// [`ProxyError::NotInstalled`] without nginx; otherwise why it did not come up.
    pub fn start(upstream: &str, rate: u32) -> Result<Self, ProxyError> {
        if !Self::nginx_available() {
            return Err(ProxyError::NotInstalled);
        }
        let dir = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let root = dir.path().display().to_string();
        let config = format!(
            r#"daemon off;
master_process off;
worker_processes 1;
pid {root}/nginx.pid;
error_log {root}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    log_format st '$status $msec';
    access_log {root}/access.log st;
    client_body_temp_path {root}/body;
    proxy_temp_path {root}/proxy;
    fastcgi_temp_path {root}/fastcgi;
    uwsgi_temp_path {root}/uwsgi;
    scgi_temp_path {root}/scgi;
    limit_req_zone $binary_remote_addr zone=lane:1m rate={rate}r/s;
    map $status $retry_after {{ 429 1; default ""; }}
    upstream model {{ server {upstream}; keepalive 64; }}
    server {{
        listen 127.0.0.1:{port};
        location / {{
            limit_req zone=lane nodelay;
            limit_req_status 429;
            add_header Retry-After $retry_after always;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_pass http://model;
        }}
    }}
}}
"#
        );
        let config_path = dir.path().join("nginx.conf");
        std::fs::write(&config_path, config)?;
        let child = std::process::Command::new("nginx")
            .arg("-p")
            .arg(dir.path())
            .arg("-e")
            .arg(dir.path().join("error.log"))
            .arg("-c")
            .arg(&config_path)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let mut proxy = Self { child, dir, port };
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(10) {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Ok(proxy);
            }
            if proxy.child.try_wait()?.is_some() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let log = std::fs::read_to_string(proxy.dir.path().join("error.log")).unwrap_or_default();
        Err(ProxyError::Failed(log))
    }

    /// `http://127.0.0.1:PORT`, the base URL to put in front of `/v1`.
    #[must_use]
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Responses so far by HTTP status, from nginx's own access log.
    #[must_use]
    pub fn status_counts(&self) -> std::collections::BTreeMap<u16, u64> {
        let mut counts = std::collections::BTreeMap::new();
        for (status, _) in self.access_log() {
            *counts.entry(status).or_insert(0) += 1;
        }
        counts
    }

    /// Every response so far as (HTTP status, seconds since the first request).
    #[must_use]
    pub fn access_log(&self) -> Vec<(u16, f64)> {
        let log = std::fs::read_to_string(self.dir.path().join("access.log")).unwrap_or_default();
        let entries: Vec<(u16, f64)> = log
            .lines()
            .filter_map(|line| {
                let mut fields = line.split_whitespace();
                Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
            })
            .collect();
        let first = entries.iter().map(|(_, at)| *at).fold(f64::INFINITY, f64::min);
        entries.into_iter().map(|(status, at)| (status, at - first)).collect()
    }
}

impl Drop for RateLimitedProxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn small_bench_completes() {
        let report = bench_throughput(400, 64, Duration::from_millis(10)).await;
        assert_eq!(report.errors, 0);
        assert!(report.calls_per_sec > 0.0 && report.fraction > 0.0, "{report:?}");
    }

    /// The 20,000-call measurement; run with `--release -- --ignored --nocapture`.
    #[tokio::test(flavor = "multi_thread")]
    #[ignore = "slow benchmark, run explicitly"]
    async fn bench_20k_256_50ms() {
        let report = bench_throughput(20_000, 256, Duration::from_millis(50)).await;
        println!("{report:#?}");
        assert_eq!(report.errors, 0);
    }
}
