//! Containers for tasks that bring their own machine (Harbor task folders): driven through
//! the runtime's command line (`podman` or `docker`), with the same ideas as the bubblewrap
//! sandbox beside it — a wall-clock deadline that kills what a command started (found by an
//! environment marker, like [`process::ReapTarget`]), bounded output capture
//! ([`OutputCapture`]), nothing of evalgrid's own environment or cache inside, and cleanup on
//! every path: [`Container`]'s `Drop`, [`remove_all`] on Ctrl-C, and [`reap_orphans`] for what
//! a `kill -9` left (every container is labelled with its owner process).
//!
//! Outputs are merged stdout+stderr in order ([`ExecOutput::output`]), as a terminal shows
//! them and as Harbor's verifier writes `test-stdout.txt`.
//!
//! How a benchmark uses it: [`detect`] once, [`reap_orphans`] once per cache (with
//! [`cache_label_for`]), [`ensure_image`] per trial (tag `evalgrid-harbor:<hash16>` of the
//! environment's content, log in the cache), [`Container::start`] with [`labels`], then
//! `copy_in` / `exec` / `read_file`, and drop. Every error is infrastructure: an errored
//! trial, never a score.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::output::{CapturedOutput, OutputCapture};
use super::process::{Killer, ReapTarget, run_watched, which};

/// The repository every image evalgrid builds is tagged in; [`prune_images`] only ever
/// removes images of this repository.
pub const IMAGE_REPO: &str = "evalgrid-harbor";

/// Label keys evalgrid puts on its containers.
pub mod label {
    /// The run's id: which run a container belongs to.
    pub const RUN: &str = "evalgrid.run";
    /// The cache folder's id: [`super::reap_orphans`] looks only at containers of its cache.
    pub const CACHE: &str = "evalgrid.cache";
    /// `host:boot_id:pid:start_ticks` of the owning process: tells a dead run from a live one.
    pub const OWNER: &str = "evalgrid.owner";
}

/// Which runtime the user asked for (`environment: {runtime: …}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum RuntimeChoice {
    /// The first of podman, docker that can run a container here.
    #[default]
    Auto,
    /// podman or an error.
    Podman,
    /// docker or an error.
    Docker,
}

/// Whether an image may be fetched from a registry (`environment: {pull: …}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PullPolicy {
    /// Never contact a registry: offline machines, reproducible bases (`--pull=never`).
    #[default]
    Never,
    /// Pull a prebuilt image or a `FROM` base only when it is not present locally.
    Missing,
}

/// A container runtime's command-line flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Runtime {
    /// podman (rootful or rootless).
    Podman,
    /// docker (a daemon reached by the client).
    Docker,
}

impl Runtime {
    /// The binary's usual name.
    #[must_use]
    pub fn binary_name(self) -> &'static str {
        match self {
            Self::Podman => "podman",
            Self::Docker => "docker",
        }
    }
}

impl std::fmt::Display for RuntimeChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Auto => "auto",
            Self::Podman => "podman",
            Self::Docker => "docker",
        })
    }
}

impl std::fmt::Display for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.binary_name())
    }
}

/// A runtime found on this machine: which, where, and its version (for `evalgrid check`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RuntimeInfo {
    /// Flavour of the command line.
    pub runtime: Runtime,
    /// The binary run.
    pub binary: PathBuf,
    /// `podman --version` / `docker --version`, the number only.
    pub version: String,
}

/// Infrastructure failures: a trial that meets one is `errored`, never a 0 for the model.
#[derive(Debug, Error)]
pub enum ContainerError {
    /// No runtime here can run a container (none on the PATH, or none passed its probe).
    #[error("no usable container runtime: {0}")]
    NotFound(String),
    /// The runtime exists but cannot run a container here.
    #[error("{runtime} cannot run a container here: {detail}")]
    CannotRun {
        /// Runtime tried.
        runtime: Runtime,
        /// Its own words (last lines).
        detail: String,
    },
    /// An image build failed or passed its time limit.
    #[error("building image {tag} {}; build log {}:\n{tail}", if *.timed_out { "passed its time limit" } else { "failed" }, .log_path.display())]
    Build {
        /// Tag being built.
        tag: String,
        /// Whether the build timeout ended it.
        timed_out: bool,
        /// The whole (capped) build log.
        log_path: PathBuf,
        /// The log's last lines.
        tail: String,
    },
    /// A runtime command failed.
    #[error("{what}: {detail}")]
    Command {
        /// What was being done.
        what: String,
        /// The runtime's own words (last lines).
        detail: String,
    },
    /// The container is gone (killed, out of memory, removed) while it was used.
    #[error("container {id} is no longer running: {detail}")]
    Gone {
        /// Container id (short).
        id: String,
        /// State and reason as the runtime reports them.
        detail: String,
    },
    /// The run was interrupted (Ctrl-C): nothing new starts.
    #[error("the run was interrupted")]
    Interrupted,
    /// A local file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// Underlying error.
        source: std::io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ContainerError {
    let what = what.into();
    move |source| {
        if source.kind() == std::io::ErrorKind::Interrupted { ContainerError::Interrupted } else { ContainerError::Io { what, source } }
    }
}

/// The last `n` non-empty lines of `text`, for error messages.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// What one runtime command printed.
struct CliOut {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
    timed_out: bool,
}

impl CliOut {
    fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// `Ok(self)` on exit 0, else a [`ContainerError::Command`] with the runtime's words.
    fn ok(self, what: &str) -> Result<Self, ContainerError> {
        if self.status.success() && !self.timed_out {
            return Ok(self);
        }
        let why = if self.timed_out { "timed out".to_string() } else { last_lines(&self.stderr, 8) };
        let why = if why.is_empty() { last_lines(&self.stdout_text(), 8) } else { why };
        Err(ContainerError::Command { what: what.to_string(), detail: why })
    }
}

fn killer() -> &'static Killer {
    static K: OnceLock<Killer> = OnceLock::new();
    K.get_or_init(|| Killer::new(Path::new("kill"), None))
}

/// Runs the runtime's command line under a deadline (the same watched spawn as sandboxed
/// code: its process group is killed when the deadline passes), stdout capped at `cap`.
fn cli(rt: &RuntimeInfo, args: &[String], timeout: Duration, cap: usize) -> Result<CliOut, ContainerError> {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(&rt.binary);
    cmd.args(args).process_group(0);
    let cleanup = |pid: u32, alive: bool| {
        ReapTarget { group: Some(pid), tree_root: alive.then_some(pid), ..ReapTarget::default() }.reap(killer(), Duration::from_millis(500))
    };
    let what = format!("running {} {}", rt.runtime, args.first().map_or("", String::as_str));
    let w = run_watched(cmd, timeout, OutputCapture::new(cap, 0), Some(64 << 10), &cleanup).map_err(io_err(what))?;
    let stderr = String::from_utf8_lossy(w.collected.as_deref().unwrap_or_default()).into_owned();
    Ok(CliOut { status: w.status, stdout: w.output.head, stderr, timed_out: w.timed_out })
}

fn s(v: impl Into<String>) -> String {
    v.into()
}

/// `podman version 4.3.1` / `Docker version 28.2.2, build e6534b4` → the number.
fn parse_version(text: &str) -> String {
    let t = text.trim();
    let after = t.split_once("version ").map_or(t, |(_, v)| v);
    after.split([',', ' ', '\n']).next().unwrap_or(after).to_string()
}

/// Finds `runtime` on the PATH and reads its version (no container is started).
pub fn locate(runtime: Runtime) -> Result<RuntimeInfo, ContainerError> {
    let binary = which(Path::new(runtime.binary_name()), None).ok_or_else(|| ContainerError::NotFound(format!("`{runtime}` is not on the PATH")))?;
    let mut rt = RuntimeInfo { runtime, binary, version: String::new() };
    let out = cli(&rt, &[s("--version")], Duration::from_secs(30), 4096)?.ok(&format!("{runtime} --version"))?;
    rt.version = parse_version(&out.stdout_text());
    Ok(rt)
}

/// The runtime to use for `choice`: `auto` takes the first of podman, docker whose probe
/// runs a container. Probed once per process and choice (failures too: the answer does
/// not change within a run, and every trial would otherwise pay for the probe).
pub fn detect(choice: RuntimeChoice) -> Result<RuntimeInfo, ContainerError> {
    type Memo = Mutex<HashMap<RuntimeChoice, Result<RuntimeInfo, String>>>;
    static MEMO: OnceLock<Memo> = OnceLock::new();
    let memo = MEMO.get_or_init(Memo::default);
    if let Some(found) = memo.lock().ok().and_then(|m| m.get(&choice).cloned()) {
        return found.map_err(ContainerError::NotFound);
    }
    // The same error on every call: the first's words, as later ones get them.
    let found = detect_uncached(choice).map_err(|e| match e {
        ContainerError::NotFound(why) => why,
        other => other.to_string(),
    });
    if let Ok(mut m) = memo.lock() {
        m.insert(choice, found.clone());
    }
    found.map_err(ContainerError::NotFound)
}

fn detect_uncached(choice: RuntimeChoice) -> Result<RuntimeInfo, ContainerError> {
    let candidates: &[Runtime] = match choice {
        RuntimeChoice::Auto => &[Runtime::Podman, Runtime::Docker],
        RuntimeChoice::Podman => &[Runtime::Podman],
        RuntimeChoice::Docker => &[Runtime::Docker],
    };
    let mut why = Vec::new();
    for &runtime in candidates {
        let tried = locate(runtime).and_then(|rt| probe_can_run(&rt, None).map(|()| rt));
        match tried {
            Ok(rt) => return Ok(rt),
            Err(e) if candidates.len() == 1 => return Err(e),
            Err(ContainerError::NotFound(w)) => why.push(w),
            Err(e) => why.push(e.to_string()),
        }
    }
    Err(ContainerError::NotFound(format!("neither podman nor docker can run a container here ({})", why.join("; "))))
}

/// Whether `rt` can start a container: in `image` when given (`true` as its entrypoint),
/// else podman runs `true` on an overlay of the host's root (no image needed) and docker
/// must reach its daemon.
pub fn probe_can_run(rt: &RuntimeInfo, image: Option<&str>) -> Result<(), ContainerError> {
    let args: Vec<String> = match (image, rt.runtime) {
        (Some(img), _) => vec![s("run"), s("--rm"), s("--network"), s("none"), s("--entrypoint"), s("true"), s(img)],
        (None, Runtime::Podman) => vec![s("run"), s("--rm"), s("--network"), s("none"), s("--rootfs"), s("/:O"), s("true")],
        (None, Runtime::Docker) => vec![s("info"), s("--format"), s("{{.ServerVersion}}")],
    };
    let out = cli(rt, &args, Duration::from_secs(120), 64 << 10)?;
    if out.status.success() && !out.timed_out {
        return Ok(());
    }
    let detail = if out.timed_out { "the probe timed out after 120 s".to_string() } else { last_lines(&format!("{}\n{}", out.stdout_text(), out.stderr), 6) };
    Err(ContainerError::CannotRun { runtime: rt.runtime, detail })
}

/// How to get the image of one environment.
#[derive(Debug, Clone, PartialEq)]
pub struct ImageSpec {
    /// Build context (a Harbor task's `environment/`).
    pub context_dir: PathBuf,
    /// The Dockerfile (usually `context_dir/Dockerfile`).
    pub dockerfile: PathBuf,
    /// Tag the built image gets, e.g. `evalgrid-harbor:<hash16>` of the environment's content.
    pub tag: String,
    /// A prebuilt image (`[environment].docker_image`), used when present or pullable.
    pub prebuilt: Option<String>,
    /// Whether a registry may be contacted.
    pub pull: PullPolicy,
    /// Limit on a pull or a build.
    pub build_timeout: Duration,
}

/// The image a container starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// What to pass to [`ContainerSpec::image`].
    pub reference: String,
    /// True when this call built it (false: found, or pulled).
    pub built_now: bool,
}

static BUILDS: AtomicU64 = AtomicU64::new(0);

/// Image builds this process started (the benchmark shows a cached image is never rebuilt).
#[must_use]
pub fn builds_started() -> u64 {
    BUILDS.load(Ordering::SeqCst)
}

/// Whether an image named `reference` is present locally.
pub fn image_exists(rt: &RuntimeInfo, reference: &str) -> Result<bool, ContainerError> {
    let out = cli(rt, &[s("image"), s("inspect"), s("--format"), s("{{.Id}}"), s(reference)], Duration::from_secs(60), 4096)?;
    if out.timed_out {
        return Err(ContainerError::Command { what: format!("inspecting image {reference}"), detail: "timed out".into() });
    }
    Ok(out.status.success())
}

/// The image for `spec`: the tag if it exists; else the prebuilt image if present (or
/// pulled, only under [`PullPolicy::Missing`]); else a build of the Dockerfile, logged to
/// `log_path`. One build per tag at a time, in this process and across processes (a lock
/// file beside the log): concurrent trials of one environment build it once.
pub fn ensure_image(rt: &RuntimeInfo, spec: &ImageSpec, log_path: &Path) -> Result<Image, ContainerError> {
    // Asked of the runtime every time (one `image inspect`, ≈ 70 ms here): an image removed
    // while a run goes on (`cache gc` from another shell) is built again, not a failed trial.
    ensure_image_uncached(rt, spec, log_path)
}

fn ensure_image_uncached(rt: &RuntimeInfo, spec: &ImageSpec, log_path: &Path) -> Result<Image, ContainerError> {
    if let Some(found) = existing(rt, spec)? {
        return Ok(found);
    }
    let tag_lock = {
        static LOCKS: OnceLock<Mutex<HashMap<String, Arc<Mutex<()>>>>> = OnceLock::new();
        let mut m = LOCKS.get_or_init(Mutex::default).lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(m.entry(spec.tag.clone()).or_default())
    };
    let _held = tag_lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(dir) = log_path.parent() {
        std::fs::create_dir_all(dir).map_err(io_err(format!("creating {}", dir.display())))?;
    }
    let mut lock_name = log_path.as_os_str().to_owned();
    lock_name.push(".lock");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_name)
        .map_err(io_err(format!("opening {}", Path::new(&lock_name).display())))?;
    lock_file.lock().map_err(io_err("locking the image build"))?;
    // Someone else may have built it while this one waited.
    if let Some(found) = existing(rt, spec)? {
        return Ok(found);
    }
    if let (Some(pre), PullPolicy::Missing) = (&spec.prebuilt, spec.pull) {
        let pulled = cli(rt, &[s("pull"), pre.clone()], spec.build_timeout, 64 << 10)?;
        if pulled.status.success() && !pulled.timed_out {
            return Ok(Image { reference: pre.clone(), built_now: false });
        }
        tracing::info!("pulling {pre} failed, building {} instead: {}", spec.tag, last_lines(&pulled.stderr, 3));
    }
    build(rt, spec, log_path)
}

/// The tag or the prebuilt image when present locally.
fn existing(rt: &RuntimeInfo, spec: &ImageSpec) -> Result<Option<Image>, ContainerError> {
    if image_exists(rt, &spec.tag)? {
        return Ok(Some(Image { reference: spec.tag.clone(), built_now: false }));
    }
    if let Some(pre) = &spec.prebuilt
        && image_exists(rt, pre)?
    {
        return Ok(Some(Image { reference: pre.clone(), built_now: false }));
    }
    Ok(None)
}

fn build(rt: &RuntimeInfo, spec: &ImageSpec, log_path: &Path) -> Result<Image, ContainerError> {
    use std::os::unix::process::CommandExt;
    BUILDS.fetch_add(1, Ordering::SeqCst);
    let mut args = vec![s("build"), s("-t"), spec.tag.clone(), s("-f"), spec.dockerfile.to_string_lossy().into_owned()];
    if rt.runtime == Runtime::Podman {
        // docker's builder has no way to forbid a pull of a missing base (see docs/agents.md).
        args.push(format!("--pull={}", if spec.pull == PullPolicy::Never { "never" } else { "missing" }));
    }
    args.push(spec.context_dir.to_string_lossy().into_owned());
    let mut cmd = Command::new(&rt.binary);
    cmd.args(&args).process_group(0);
    let cleanup = |pid: u32, alive: bool| {
        ReapTarget { group: Some(pid), tree_root: alive.then_some(pid), ..ReapTarget::default() }.reap(killer(), Duration::from_secs(2))
    };
    let w = run_watched(cmd, spec.build_timeout, OutputCapture::new(256 << 10, 256 << 10), None, &cleanup)
        .map_err(io_err(format!("running {} build", rt.runtime)))?;
    let log = w.output.log_text();
    std::fs::write(log_path, log.as_bytes()).map_err(io_err(format!("writing {}", log_path.display())))?;
    if w.status.success() && !w.timed_out {
        return Ok(Image { reference: spec.tag.clone(), built_now: true });
    }
    Err(ContainerError::Build { tag: spec.tag.clone(), timed_out: w.timed_out, log_path: log_path.to_path_buf(), tail: last_lines(&log, 20) })
}

/// How to start one container.
#[derive(Debug, Clone, PartialEq)]
pub struct ContainerSpec {
    /// Image reference ([`Image::reference`]).
    pub image: String,
    /// Labels; [`labels`] gives the run and cache ones, the owner label is added by `start`.
    pub labels: Vec<(String, String)>,
    /// `--cpus` (task.toml `cpus`).
    pub cpus: Option<f64>,
    /// `--memory` in MiB (task.toml `memory_mb` / `memory`).
    pub memory_mb: Option<u64>,
    /// Network access; `false` = `--network none`.
    pub network: bool,
    /// Working directory of every exec; `None` = the image's WORKDIR.
    pub workdir: Option<String>,
    /// Environment of the container (nothing of evalgrid's own environment goes in).
    pub env: Vec<(String, String)>,
    /// `--pids-limit`: a fork bomb stays inside its container.
    pub pids_limit: Option<u64>,
}

impl Default for ContainerSpec {
    fn default() -> Self {
        Self { image: String::new(), labels: Vec::new(), cpus: None, memory_mb: None, network: false, workdir: None, env: Vec::new(), pids_limit: Some(4096) }
    }
}

/// The run and cache labels every container of a run carries (see [`reap_orphans`]).
#[must_use]
pub fn labels(run_id: &str, cache_label: &str) -> Vec<(String, String)> {
    vec![(label::RUN.to_string(), run_id.to_string()), (label::CACHE.to_string(), cache_label.to_string())]
}

/// A stable id of a cache folder for [`label::CACHE`] (its canonical path, hashed).
#[must_use]
pub fn cache_label_for(cache_dir: &Path) -> String {
    let path = cache_dir.canonicalize().unwrap_or_else(|_| cache_dir.to_path_buf());
    blake3::hash(path.as_os_str().as_encoded_bytes()).to_hex()[..16].to_string()
}

/// What one `exec` produced.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecOutput {
    /// stdout and stderr merged in order, head and tail kept (`max_output` bytes in all).
    pub output: CapturedOutput,
    /// Exit code; `None` when killed at the deadline.
    pub exit_code: Option<i32>,
    /// True when the deadline passed and the command's processes were killed.
    pub timed_out: bool,
    /// Seconds from start to end.
    pub wall_s: f64,
}

impl ExecOutput {
    /// The kept output as text (a marker where the middle was dropped).
    #[must_use]
    pub fn text(&self) -> String {
        self.output.log_text()
    }
}

/// Containers of this process that are running, for [`remove_all`] on Ctrl-C.
fn live() -> &'static Mutex<HashMap<String, PathBuf>> {
    static LIVE: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    LIVE.get_or_init(Mutex::default)
}

/// Force-removes every container this process started and has not removed yet (the run was
/// interrupted); returns how many. New ones are refused from then on (via the sandbox's
/// interrupt flag, which the Ctrl-C handler sets first).
pub fn remove_all() -> usize {
    let all: Vec<(String, PathBuf)> = live().lock().map(|mut m| m.drain().collect()).unwrap_or_default();
    let mut by_binary: HashMap<&Path, Vec<String>> = HashMap::new();
    for (id, binary) in &all {
        by_binary.entry(binary.as_path()).or_default().push(id.clone());
    }
    // One `rm -f` per runtime for all of them: quick enough for a second Ctrl-C.
    for (binary, ids) in by_binary {
        force_remove(binary, &ids);
    }
    all.len()
}

/// `rm -f` without a deadline helper (it must work while the run is being abandoned).
fn force_remove(binary: &Path, ids: &[String]) -> bool {
    if ids.is_empty() {
        return true;
    }
    Command::new(binary).args(["rm", "-f"]).args(ids).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|st| st.success())
}

/// `host:boot_id:pid:start_ticks` of this process: unique across reboots and pid reuse.
/// Without `/proc` (macOS) it is `host:-:pid:-`, judged by the pid alone.
fn owner_of(pid: u32) -> Option<String> {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let Some(start) = start_ticks(pid) else {
        return Some(format!("{}:-:{pid}:-", host.trim()));
    };
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    Some(format!("{}:{}:{pid}:{start}", host.trim(), boot.trim()))
}

/// Field 22 of `/proc/<pid>/stat`: the process's start time in clock ticks since boot.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process an owner label names is still this same process.
fn owner_alive(owner: &str) -> bool {
    let mut parts = owner.rsplitn(4, ':');
    let (Some(start), Some(pid), Some(boot), Some(host)) = (parts.next(), parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    if host != here.trim() {
        // Another machine's container on a shared daemon: not ours to judge.
        return true;
    }
    let Ok(pid) = pid.parse::<u32>() else { return false };
    if (boot, start) == ("-", "-") {
        return crate::platform::process_exists(pid);
    }
    let boot_now = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    if boot != boot_now.trim() {
        return false;
    }
    start_ticks(pid).is_some_and(|t| t.to_string() == start)
}

static EXEC_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A running container; dropping it force-removes it (best effort, never panics).
#[derive(Debug)]
pub struct Container {
    rt: RuntimeInfo,
    id: String,
    workdir: Option<String>,
    removed: bool,
}

impl Container {
    /// Starts `spec.image` detached, kept alive by `sleep infinity` as Harbor does, with the
    /// resource limits, the network off unless allowed, and the owner label.
    pub fn start(rt: &RuntimeInfo, spec: &ContainerSpec) -> Result<Container, ContainerError> {
        if super::process::runs_abandoned() {
            return Err(ContainerError::Interrupted);
        }
        let owner = owner_of(std::process::id()).unwrap_or_default();
        // SIGKILL on stop: `sleep` as pid 1 ignores SIGTERM, and removal would wait 10 s.
        let mut args = vec![s("run"), s("-d"), s("--stop-signal"), s("KILL")];
        for (k, v) in &spec.labels {
            args.extend([s("--label"), format!("{k}={v}")]);
        }
        args.extend([s("--label"), format!("{}={owner}", label::OWNER)]);
        if let Some(c) = spec.cpus {
            args.extend([s("--cpus"), format!("{c}")]);
        }
        if let Some(m) = spec.memory_mb {
            args.extend([s("--memory"), format!("{m}m")]);
        }
        if let Some(p) = spec.pids_limit {
            args.extend([s("--pids-limit"), p.to_string()]);
        }
        if !spec.network {
            args.extend([s("--network"), s("none")]);
        }
        if let Some(w) = &spec.workdir {
            args.extend([s("-w"), w.clone()]);
        }
        for (k, v) in &spec.env {
            args.extend([s("--env"), format!("{k}={v}")]);
        }
        args.extend([spec.image.clone(), s("sh"), s("-c"), s("sleep infinity")]);
        let out = cli(rt, &args, Duration::from_secs(300), 64 << 10)?;
        let id = out.stdout_text().lines().last().unwrap_or_default().trim().to_string();
        if !out.status.success() || out.timed_out || id.is_empty() {
            if !id.is_empty() {
                force_remove(&rt.binary, &[id]);
            }
            return Err(out.ok(&format!("starting a container from {}", spec.image)).err().unwrap_or_else(|| ContainerError::Command {
                what: format!("starting a container from {}", spec.image),
                detail: "the runtime printed no container id".into(),
            }));
        }
        if let Ok(mut m) = live().lock() {
            m.insert(id.clone(), rt.binary.clone());
        }
        let c = Container { rt: rt.clone(), id, workdir: spec.workdir.clone(), removed: false };
        if super::process::runs_abandoned() {
            // Interrupted while starting: remove_all may have run before this one was listed.
            drop(c);
            return Err(ContainerError::Interrupted);
        }
        Ok(c)
    }

    /// The container's id (full).
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The runtime it runs under.
    #[must_use]
    pub fn runtime(&self) -> &RuntimeInfo {
        &self.rt
    }

    /// Runs `script` with `bash -c` from the working directory, with `env` added, under
    /// `timeout`; at the deadline every process the script started is killed (found by an
    /// environment marker, from the host when it sees them, and from inside the container).
    /// Output is merged and capped at `max_output` bytes (head and tail).
    pub fn exec(&self, script: &str, timeout: Duration, max_output: usize, env: &[(String, String)]) -> Result<ExecOutput, ContainerError> {
        // One pipe inside the container: the runtime carries stdout and stderr apart, which
        // would lose their order.
        let argv = [s("bash"), s("-c"), s(r#"exec 2>&1; exec bash -c "$1""#), s("bash"), s(script)];
        let head = max_output / 2;
        self.exec_argv(&argv, timeout, OutputCapture::new(head, max_output - head), env)
    }

    fn exec_argv(&self, argv: &[String], timeout: Duration, capture: OutputCapture, env: &[(String, String)]) -> Result<ExecOutput, ContainerError> {
        use std::os::unix::process::CommandExt;
        let n = EXEC_COUNTER.fetch_add(1, Ordering::Relaxed);
        let token = format!("{}-{}-{n}", std::process::id(), &self.id[..self.id.len().min(12)]);
        let marker = format!("EVALGRID_EXEC={token}");
        let mut args = vec![s("exec")];
        if let Some(w) = &self.workdir {
            args.extend([s("-w"), w.clone()]);
        }
        args.extend([s("--env"), marker.clone()]);
        for (k, v) in env {
            args.extend([s("--env"), format!("{k}={v}")]);
        }
        args.push(self.id.clone());
        args.extend(argv.iter().cloned());
        let mut cmd = Command::new(&self.rt.binary);
        cmd.args(&args).process_group(0);
        let cleanup = |pid: u32, alive: bool| {
            if alive {
                // The deadline passed (or the run was interrupted): the script's processes
                // live in the container, not under the client; kill them by their marker.
                ReapTarget { marker: Some(marker.clone()), ..ReapTarget::default() }.reap(killer(), Duration::from_secs(2));
                self.kill_inside(&marker);
            }
            ReapTarget { group: Some(pid), tree_root: alive.then_some(pid), ..ReapTarget::default() }.reap(killer(), Duration::from_millis(500))
        };
        let start = Instant::now();
        let w = run_watched(cmd, timeout, capture, None, &cleanup).map_err(io_err("running a command in the container"))?;
        let exit_code = if w.timed_out { None } else { w.status.code() };
        if exit_code.is_none_or(|c| c == 125) && !w.timed_out {
            // 125 is the runtime's own failure (or the script's exit 125): look at the container.
            self.check_running()?;
        }
        Ok(ExecOutput { output: w.output, exit_code, timed_out: w.timed_out, wall_s: start.elapsed().as_secs_f64() })
    }

    /// Kills, from inside the container, every process whose environment holds `marker`
    /// (for runtimes whose processes the host cannot see, e.g. a remote docker daemon).
    fn kill_inside(&self, marker: &str) {
        const KILL: &str =
            r#"for d in /proc/[0-9]*; do case "$(tr '\0' '\n' < "$d/environ" 2>/dev/null)" in *"$1"*) kill -9 "${d#/proc/}" 2>/dev/null;; esac; done"#;
        let _ = Command::new(&self.rt.binary)
            .args(["exec", &self.id, "sh", "-c", KILL, "evalgrid-kill", marker])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }

    /// `Err(Gone)` unless the container is running.
    fn check_running(&self) -> Result<(), ContainerError> {
        let out = cli(
            &self.rt,
            &[s("inspect"), s("--format"), s("{{.State.Status}} {{.State.OOMKilled}} {{.State.ExitCode}}"), self.id.clone()],
            Duration::from_secs(60),
            4096,
        )?;
        let state = out.stdout_text().trim().to_string();
        if out.status.success() && state.starts_with("running") {
            return Ok(());
        }
        let detail = if state.is_empty() { last_lines(&out.stderr, 3) } else { format!("state {state} (status, out of memory, exit code)") };
        Err(ContainerError::Gone { id: self.id[..self.id.len().min(12)].to_string(), detail })
    }

    /// Copies the contents of `host_dir` to `dest` in the container (created if missing;
    /// modes, the exec bit included, are kept).
    pub fn copy_in(&self, host_dir: &Path, dest: &str) -> Result<(), ContainerError> {
        let src = format!("{}/.", host_dir.to_string_lossy().trim_end_matches('/'));
        let out = cli(&self.rt, &[s("cp"), src, format!("{}:{dest}", self.id)], Duration::from_secs(600), 64 << 10)?;
        if out.status.success() && !out.timed_out {
            return Ok(());
        }
        self.check_running()?;
        out.ok(&format!("copying {} to {dest} in the container", host_dir.display())).map(|_| ())
    }

    /// The first `max` bytes of the regular file at `path` in the container; `None` when
    /// there is no such file.
    pub fn read_file(&self, path: &str, max: usize) -> Result<Option<Vec<u8>>, ContainerError> {
        const READ: &str = r#"[ -f "$1" ] || exit 3; head -c "$2" "$1""#;
        let argv = [s("sh"), s("-c"), s(READ), s("evalgrid-read"), s(path), max.to_string()];
        let o = self.exec_argv(&argv, Duration::from_secs(60), OutputCapture::new(max, 0), &[])?;
        match o.exit_code {
            Some(0) => Ok(Some(o.output.head)),
            Some(3) => Ok(None),
            _ => Err(ContainerError::Command { what: format!("reading {path} in the container"), detail: last_lines(&o.text(), 5) }),
        }
    }

    /// Removes the container now, reporting failure (`Drop` does the same silently).
    pub fn remove(mut self) -> Result<(), ContainerError> {
        self.removed = true;
        if let Ok(mut m) = live().lock() {
            m.remove(&self.id);
        }
        let out = cli(&self.rt, &[s("rm"), s("-f"), self.id.clone()], Duration::from_secs(120), 4096)?;
        out.ok("removing the container").map(|_| ())
    }
}

impl Drop for Container {
    fn drop(&mut self) {
        if self.removed {
            return;
        }
        if let Ok(mut m) = live().lock() {
            m.remove(&self.id);
        }
        if !force_remove(&self.rt.binary, std::slice::from_ref(&self.id)) {
            tracing::warn!("could not remove container {}; the next run on this cache removes it", &self.id[..self.id.len().min(12)]);
        }
    }
}

/// Removes the containers labelled with `cache_label` whose owning process is gone (a run
/// killed with `kill -9`, a crashed machine); containers of live runs stay. Returns how many
/// were removed.
pub fn reap_orphans(rt: &RuntimeInfo, cache_label: &str) -> Result<usize, ContainerError> {
    let filter = format!("label={}={cache_label}", label::CACHE);
    let ids = cli(rt, &[s("ps"), s("-a"), s("-q"), s("--no-trunc"), s("--filter"), filter], Duration::from_secs(60), 1 << 20)?.ok("listing containers")?;
    let ids: Vec<String> = ids.stdout_text().split_whitespace().map(str::to_string).collect();
    if ids.is_empty() {
        return Ok(0);
    }
    let mut args = vec![s("inspect"), s("--format"), format!("{{{{.Id}}}} {{{{index .Config.Labels \"{}\"}}}}", label::OWNER)];
    args.extend(ids);
    // A container removed between the two commands makes inspect fail for it alone.
    let out = cli(rt, &args, Duration::from_secs(60), 1 << 20)?;
    let dead: Vec<String> = out
        .stdout_text()
        .lines()
        .filter_map(|l| {
            let (id, owner) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
            (!id.is_empty() && !owner_alive(owner)).then(|| id.to_string())
        })
        .collect();
    if dead.is_empty() {
        return Ok(0);
    }
    let mut args = vec![s("rm"), s("-f")];
    args.extend(dead.iter().cloned());
    cli(rt, &args, Duration::from_secs(300), 1 << 20)?.ok("removing containers of runs that are gone")?;
    Ok(dead.len())
}

/// `localhost/evalgrid-harbor:x`, `docker.io/library/evalgrid-harbor:x` → `evalgrid-harbor:x`.
fn short_image_name(name: &str) -> &str {
    name.strip_prefix("localhost/").or_else(|| name.strip_prefix("docker.io/library/")).unwrap_or(name)
}

/// Removes the images of [`IMAGE_REPO`] whose tag is not in `keep` (no pipeline in the cache
/// uses them); images a container still uses stay. Returns how many were removed.
pub fn prune_images(rt: &RuntimeInfo, keep: &BTreeSet<String>) -> Result<usize, ContainerError> {
    let out = cli(rt, &[s("images"), s("--format"), s("{{.Repository}}:{{.Tag}}")], Duration::from_secs(60), 4 << 20)?.ok("listing images")?;
    let keep: BTreeSet<&str> = keep.iter().map(|k| short_image_name(k)).collect();
    let mut removed = 0;
    let names: BTreeSet<String> = out.stdout_text().lines().map(|l| l.trim().to_string()).collect();
    for name in names {
        let short = short_image_name(&name);
        if !short.starts_with(&format!("{IMAGE_REPO}:")) || keep.contains(short) {
            continue;
        }
        if cli(rt, &[s("rmi"), name.clone()], Duration::from_secs(120), 4096)?.status.success() {
            removed += 1;
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests;
