//! The one sandbox for all model-written code (WeirdML submissions, BBQ-Bench
//! `execute_python`, Eleusis guessed rules): bubblewrap with fresh pid, network, ipc, uts
//! and mount namespaces, a per-run unprivileged uid when evalgrid runs as root (a user
//! namespace otherwise), no capabilities, a read-only system, an empty environment, a
//! size-capped writable work dir, rlimits, a wall-clock deadline that kills the whole
//! process group / pid namespace / uid, and bounded output capture. The cache and data
//! directories are never visible inside. Without bubblewrap nothing runs unless the user
//! opted out explicitly (`sandbox: none` / `--unsafe-no-sandbox`).

pub mod container;
pub mod gpu;
mod isolate;
pub mod output;
pub mod process;
pub mod provenance;
pub(crate) mod scratch;
mod supervisor;
pub mod worker;

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use self::gpu::Slot;
use self::isolate::{BwrapLayout, DropTo, LaunchPlan, SANDBOX_CODE, SANDBOX_WORK};
use self::output::{CapturedOutput, OutputCapture};
use self::process::{Killer, ReapTarget, Watched, effective_uid, run_probe, run_watched, tasks_of_uid, which};
use self::provenance::{PythonInfo, probe_python};

/// Which backend to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum BackendChoice {
    /// bubblewrap if installed and its probe passes, else rlimits-only (reported).
    #[default]
    Auto,
    /// bubblewrap or an error.
    Bwrap,
    /// Never bubblewrap (tests, hosts without user namespaces).
    RlimitsOnly,
}

/// Isolation actually achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Isolation {
    /// bubblewrap namespaces + rlimits.
    Bwrap,
    /// rlimits (and possibly a uid drop) only: no network or filesystem isolation.
    RlimitsOnly,
}

/// What the sandbox guarantees, for provenance and loud warnings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationReport {
    /// Backend level.
    pub isolation: Isolation,
    /// True when submissions run under a fresh unprivileged uid per run.
    pub per_run_uid: bool,
    /// Whether RLIMIT_NPROC binds (never for uid 0).
    pub nproc_enforced: bool,
    /// No network namespace access (bwrap `--unshare-net`).
    pub network_isolated: bool,
    /// Only `/workspace` (+ `/tmp` tmpfs) writable, hidden labels not reachable.
    pub filesystem_isolated: bool,
    /// Human-readable caveats.
    pub notes: Vec<String>,
}

/// Whether to drop root privileges for submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum PrivilegeDrop {
    /// When evalgrid runs as root, run each submission under a fresh unprivileged uid.
    #[default]
    Auto,
    /// Keep the caller's uid.
    Never,
}

/// Resource limits applied with setrlimit before the submission starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// RLIMIT_CPU seconds; `None` = ceil(time limit × cores) + 5.
    pub cpu_time_s: Option<u64>,
    /// RLIMIT_AS bytes for CPU slots (skipped on GPU slots: CUDA reserves huge VA ranges).
    pub address_space_bytes: Option<u64>,
    /// RLIMIT_NPROC (threads count too).
    pub processes: Option<u64>,
    /// RLIMIT_FSIZE bytes.
    pub file_size_bytes: Option<u64>,
    /// RLIMIT_NOFILE.
    pub open_files: Option<u64>,
    /// Size of the bwrap `/tmp` tmpfs.
    pub tmpfs_bytes: u64,
    /// Size of the bwrap `/workspace` tmpfs (the only other writable place): a disk cap.
    pub workspace_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            cpu_time_s: None,
            address_space_bytes: Some(16 << 30),
            processes: Some(512),
            file_size_bytes: Some(4 << 30),
            open_files: Some(4096),
            tmpfs_bytes: 1 << 30,
            workspace_bytes: 2 << 30,
        }
    }
}

/// Output capture caps (bytes kept for the log) and the feedback view (chars).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OutputLimits {
    /// First chars of the feedback view (v2: 4000).
    pub view_head_chars: usize,
    /// Last chars of the feedback view (v2: 4000).
    pub view_tail_chars: usize,
    /// Bytes kept from the start of the log (raised to ≥ 4 × view head).
    pub log_head_bytes: usize,
    /// Bytes kept from the end of the log (raised to ≥ 4 × view tail).
    pub log_tail_bytes: usize,
}

impl Default for OutputLimits {
    fn default() -> Self {
        Self { view_head_chars: 4000, view_tail_chars: 4000, log_head_bytes: 1 << 20, log_tail_bytes: 1 << 20 }
    }
}

/// Sandbox configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Interpreter name or path (resolved once, then `sys.executable` is used).
    pub python: PathBuf,
    /// Backend choice.
    pub backend: BackendChoice,
    /// bubblewrap name or path.
    pub bwrap: PathBuf,
    /// `kill` name or path.
    pub kill: PathBuf,
    /// PATH for resolving tools (default: this process's PATH); not serialised.
    #[serde(skip)]
    pub path_var: Option<OsString>,
    /// Resource limits.
    pub limits: Limits,
    /// Output caps.
    pub output: OutputLimits,
    /// Largest predictions file read.
    pub max_predictions_bytes: u64,
    /// Where per-run directories are created (default: the system temp dir).
    pub scratch_dir: Option<PathBuf>,
    /// Root privilege drop policy.
    pub privilege_drop: PrivilegeDrop,
    /// First uid of the per-run uid range.
    pub uid_base: u32,
    /// How long cleanup may keep killing stragglers.
    pub kill_grace_ms: u64,
    /// Deadline of the one-off probes.
    pub probe_timeout_s: u64,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            python: PathBuf::from("python3"),
            backend: BackendChoice::Auto,
            bwrap: PathBuf::from("bwrap"),
            kill: PathBuf::from("kill"),
            path_var: None,
            limits: Limits::default(),
            output: OutputLimits::default(),
            max_predictions_bytes: 16 << 20,
            scratch_dir: None,
            privilege_drop: PrivilegeDrop::Auto,
            uid_base: 1_900_000_000,
            kill_grace_ms: 2000,
            probe_timeout_s: 30,
        }
    }
}

/// Infrastructure failures (never counted against the model).
#[derive(Debug, Error)]
pub enum SandboxError {
    /// The interpreter could not be found or probed.
    #[error("python: {0}")]
    Python(String),
    /// bubblewrap was required but is missing or failed its probe.
    #[error("bubblewrap unavailable: {0}")]
    BwrapUnavailable(String),
    /// Model-written code would run without isolation and the user did not opt out.
    #[error(
        "model-written code needs a sandbox, but bubblewrap is unavailable ({0}); install the \
         `bubblewrap` package (e.g. `apt-get install bubblewrap`), or opt out explicitly with \
         `sandbox: none` in the pipeline or `--unsafe-no-sandbox`"
    )]
    Required(String),
    /// Preparing or running the submission failed.
    #[error("{what}: {source}")]
    Io {
        /// Step that failed.
        what: String,
        /// Underlying error.
        source: std::io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> SandboxError {
    let what = what.into();
    move |source| SandboxError::Io { what, source }
}

/// How the process ended. Under bwrap, exit codes 129..=192 are read as 128 + signal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExitInfo {
    /// Exit code, if it exited.
    pub code: Option<i32>,
    /// Terminating signal, if any.
    pub signal: Option<i32>,
}

impl ExitInfo {
    /// Exit code 0.
    pub fn success(&self) -> bool {
        self.code == Some(0) && self.signal.is_none()
    }
}

/// Limit that (probably) ended the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LimitKind {
    /// RLIMIT_CPU (SIGXCPU).
    CpuTime,
    /// RLIMIT_AS (MemoryError).
    AddressSpace,
    /// RLIMIT_NPROC (fork/thread creation failed).
    Processes,
    /// RLIMIT_FSIZE (SIGXFSZ / "File too large").
    FileSize,
}

/// The predictions file as found after the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Predictions {
    /// Not written.
    Missing,
    /// Its bytes.
    Present(Vec<u8>),
    /// Symlink, not a regular file, too large or unreadable (scored as bad format).
    Invalid(String),
}

/// One execution request.
#[derive(Debug, Clone, Copy)]
pub struct RunSpec<'a> {
    /// Python source to run.
    pub code: &'a str,
    /// Task data directory, visible as `data/`.
    pub data_dir: &'a Path,
    /// Predictions path relative to the working directory.
    pub predictions_file: &'a str,
    /// Wall-clock limit.
    pub time_limit: Duration,
    /// Slot leased for this run.
    pub slot: &'a Slot,
}

/// Everything observed about one execution.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunResult {
    /// Exit code / signal.
    pub exit: ExitInfo,
    /// Killed at the wall-clock limit.
    pub timed_out: bool,
    /// Limit that probably ended it (signal or Python error text).
    pub killed_by_limit: Option<LimitKind>,
    /// Bounded log (head + tail bytes).
    pub output: CapturedOutput,
    /// Feedback view (≤ head + tail chars).
    pub output_view: String,
    /// Whether the view was cut.
    pub output_truncated: bool,
    /// False when an escaped process kept the pipe open past cleanup.
    pub output_complete: bool,
    /// Spawn-to-exit seconds.
    pub wall_s: f64,
    /// Predictions file.
    pub predictions: Predictions,
    /// Isolation in force.
    pub isolation: Isolation,
    /// Slot label.
    pub slot: String,
    /// Processes cleanup failed to kill (empty unless something escaped).
    pub survivors: Vec<u32>,
}

/// Resolved backend.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// bubblewrap at this path.
    Bwrap(PathBuf),
    /// rlimits only.
    RlimitsOnly,
}

/// A configured, probed sandbox; cheap to share between threads.
#[derive(Debug)]
pub struct Sandbox {
    cfg: SandboxConfig,
    python: PythonInfo,
    backend: Backend,
    bwrap_version: Option<String>,
    report: IsolationReport,
    killer: Killer,
    is_root: bool,
    drop: bool,
    /// The shell supervisor's tools; `None` = the Python launcher supervises bubblewrap runs.
    tools: Option<supervisor::Tools>,
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// Set once by the command line (`--unsafe-no-sandbox`, `sandbox: none`): whether model
/// code may run with rlimits only when bubblewrap is missing. Off unless asked for.
static ALLOW_UNSANDBOXED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Lets `BackendChoice::Auto` fall back to rlimits only (the user opted out explicitly).
pub fn allow_unsandboxed(allow: bool) {
    ALLOW_UNSANDBOXED.store(allow, Ordering::SeqCst);
}

/// Whether the user opted out of the sandbox requirement for this process (the flag, or
/// `EVALGRID_UNSAFE_NO_SANDBOX=1` in the environment, which the command line also reads).
#[must_use]
pub fn unsandboxed_allowed() -> bool {
    ALLOW_UNSANDBOXED.load(Ordering::SeqCst) || std::env::var_os("EVALGRID_UNSAFE_NO_SANDBOX").is_some_and(|v| !v.is_empty() && v != "0" && v != "false")
}

/// The process-wide sandbox for `python` with default limits, probed once; used for
/// short-lived helpers (the Eleusis judge) that bring their own per-process limits.
pub fn shared(python: &Path) -> Result<&'static Sandbox, SandboxError> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    static SHARED: Mutex<Option<HashMap<PathBuf, &'static Sandbox>>> = Mutex::new(None);
    let mut guard = SHARED.lock().map_err(|_| SandboxError::Python("sandbox registry poisoned".into()))?;
    let map = guard.get_or_insert_with(HashMap::new);
    if let Some(sb) = map.get(python) {
        return Ok(sb);
    }
    // Failures are not remembered: the next cell retries (and reports) the probe.
    let sb: &'static Sandbox = Box::leak(Box::new(Sandbox::new(SandboxConfig { python: python.to_path_buf(), ..SandboxConfig::default() })?));
    map.insert(python.to_path_buf(), sb);
    Ok(sb)
}

mod setup;

/// Where one jailed command runs; see [`Sandbox::jail_command`].
struct Jail<'a> {
    /// Read-only at `/code`.
    code_dir: &'a Path,
    /// Bound at `/workspace` (rlimits-only runs there); `None` = a size-capped tmpfs.
    work_dir: Option<&'a Path>,
    /// Read-only at `/workspace/data`.
    data_dir: Option<&'a Path>,
    /// Writable directories made inside a tmpfs `/workspace`.
    workspace_dirs: &'a [String],
    /// Size of a tmpfs `/workspace`.
    workspace_bytes: u64,
    /// Bind the GPU devices.
    gpu: bool,
    /// Keep CAP_SETUID, CAP_SETGID and CAP_KILL without a uid drop (a zygote that gives
    /// each child its own uid; bubblewrap run by root only).
    zygote_caps: bool,
    /// Working directory without bubblewrap.
    host_cwd: &'a Path,
    /// `(name, value)` set in the environment of every process of the run, for the reaper.
    marker: (&'a str, &'a str),
}

impl Sandbox {
    /// The one place a sandboxed command is assembled: bubblewrap (or, opted out, nothing)
    /// around the shell supervisor or the launcher that applies `plan`, with an empty
    /// environment but the marker (and, for the supervisor, the command's own).
    fn jail_command(&self, j: &Jail<'_>, plan: &LaunchPlan) -> Command {
        let py = &self.python.executable;
        let bwrap = matches!(self.backend, Backend::Bwrap(_));
        let supervised = self.tools.as_ref().filter(|_| bwrap).and_then(|t| t.command_tail(plan));
        let env = supervised.is_some().then_some(&plan.env);
        let tail = supervised.unwrap_or_else(|| plan.command_tail(py));
        let mut cmd = match &self.backend {
            Backend::Bwrap(path) => {
                let layout = BwrapLayout {
                    python: &self.python,
                    code_dir: j.code_dir,
                    work_dir: j.work_dir,
                    workspace_bytes: j.workspace_bytes,
                    workspace_dirs: j.workspace_dirs,
                    data_dir: j.data_dir,
                    tmpfs_bytes: self.cfg.limits.tmpfs_bytes,
                    gpu: j.gpu,
                    unprivileged: !self.is_root,
                    drop: plan.drop.is_some() || j.zygote_caps,
                    kill: j.zygote_caps,
                    marker: j.marker,
                    env,
                };
                let mut c = Command::new(path);
                c.args(isolate::bwrap_args(&layout)).args(&tail).process_group(0);
                c
            }
            Backend::RlimitsOnly => {
                let mut c = Command::new(&tail[0]);
                c.args(&tail[1..]).current_dir(j.host_cwd);
                c
            }
        };
        cmd.env_clear().env(j.marker.0, j.marker.1).env("PATH", "/usr/bin:/bin");
        cmd
    }

    /// Probes the interpreter and the backend once; see [`IsolationReport`] for the outcome.
    pub fn new(cfg: SandboxConfig) -> Result<Self, SandboxError> {
        // Scratch folders of earlier runs that were killed before they could remove them.
        scratch::sweep(cfg.scratch_dir.as_deref());
        setup::build(cfg)
    }

    /// The isolation actually achieved.
    pub fn report(&self) -> &IsolationReport {
        &self.report
    }

    /// Interpreter facts from the probe.
    pub fn python(&self) -> &PythonInfo {
        &self.python
    }

    /// Limits in force.
    pub fn limits(&self) -> &Limits {
        &self.cfg.limits
    }

    /// `bwrap --version` when bwrap is the backend.
    pub fn bwrap_version(&self) -> Option<&str> {
        self.bwrap_version.as_deref()
    }

    /// Resolved backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    /// The rlimits for one run.
    fn rlimits(&self, time_limit: Duration, gpu: bool) -> Vec<(String, i64, i64)> {
        let l = &self.cfg.limits;
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get) as f64;
        let cpu = l.cpu_time_s.unwrap_or_else(|| (time_limit.as_secs_f64() * cores).ceil() as u64 + 5);
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut out = vec![("RLIMIT_CPU".to_string(), clamp(cpu), clamp(cpu.saturating_add(5)))];
        out.push(("RLIMIT_CORE".into(), 0, 0));
        if let (Some(a), false) = (l.address_space_bytes, gpu) {
            out.push(("RLIMIT_AS".into(), clamp(a), clamp(a)));
        }
        if let Some(mut n) = l.processes {
            if !self.drop && !self.is_root {
                // Without a private uid the count includes all of the caller's tasks.
                n = n.saturating_add(effective_uid().map_or(0, tasks_of_uid));
            }
            out.push(("RLIMIT_NPROC".into(), clamp(n), clamp(n)));
        }
        if let Some(f) = l.file_size_bytes {
            out.push(("RLIMIT_FSIZE".into(), clamp(f), clamp(f)));
        }
        if let Some(f) = l.open_files {
            out.push(("RLIMIT_NOFILE".into(), clamp(f), clamp(f)));
        }
        out
    }

    /// Runs one submission; `Err` only for infrastructure failures.
    pub fn run(&self, spec: &RunSpec<'_>) -> Result<RunResult, SandboxError> {
        let bwrap = matches!(self.backend, Backend::Bwrap(_));
        let dirs = self.run_dirs(spec, bwrap)?;
        let uid = dirs.uid;
        let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
        let token = format!("{}-{}-{n}", std::process::id(), dirs.tmp.path().file_name().and_then(|s| s.to_str()).unwrap_or("run"));
        let marker_key = "EVALGRID_SANDBOX_TOKEN";
        let marker = format!("{marker_key}={token}");
        let (script, cwd, env) = self.submission_env(spec, &dirs, bwrap, (marker_key, &token));
        let plan = LaunchPlan {
            setsid: !bwrap,
            rlimits: self.rlimits(spec.time_limit, spec.slot.is_gpu()),
            no_new_privs: true,
            clear_bounding_set: !bwrap,
            drop: uid.map(|u| DropTo { uid: u, gid: u }),
            argv: vec![self.python.executable.clone(), "-u".into(), "-B".into(), script],
            env,
            // Under bubblewrap /workspace is a size-capped tmpfs that dies with the run.
            collect: bwrap.then(|| isolate::Collect { path: spec.predictions_file.to_string(), cap: self.cfg.max_predictions_bytes }),
        };
        let workspace_dirs = workspace_dirs(spec.predictions_file);
        let jail = Jail {
            code_dir: &dirs.code,
            work_dir: (!bwrap).then_some(dirs.work.as_path()),
            data_dir: Some(&dirs.data),
            workspace_dirs: &workspace_dirs,
            workspace_bytes: self.cfg.limits.workspace_bytes,
            gpu: spec.slot.is_gpu(),
            zygote_caps: false,
            host_cwd: &cwd,
            marker: (marker_key, &token),
        };
        let cmd = self.jail_command(&jail, &plan);

        let grace = Duration::from_millis(self.cfg.kill_grace_ms);
        let killer = &self.killer;
        let cleanup = |pid: u32, alive: bool| {
            let target = ReapTarget { group: Some(pid), tree_root: alive.then_some(pid), uid, marker: Some(marker.clone()) };
            target.reap(killer, grace)
        };
        let o = &self.cfg.output;
        let capture = OutputCapture::new(o.log_head_bytes.max(4 * o.view_head_chars), o.log_tail_bytes.max(4 * o.view_tail_chars));
        let collect_cap = bwrap.then(|| usize::try_from(self.cfg.max_predictions_bytes).unwrap_or(usize::MAX).saturating_add(64 << 10));
        let watched = run_watched(cmd, spec.time_limit, capture, collect_cap, &cleanup).map_err(io_err("running submission"))?;
        Ok(self.result(spec, watched, bwrap, &dirs.work))
    }

    /// A fresh run directory: the submission (read-only), a copy of the data, and `work/`,
    /// `home/`, `tmp/` owned by the sandbox uid when it drops to one.
    fn run_dirs(&self, spec: &RunSpec<'_>, bwrap: bool) -> Result<RunDirs, SandboxError> {
        use std::os::unix::fs::PermissionsExt;
        let tmp = scratch::folder("run", self.cfg.scratch_dir.as_deref()).map_err(io_err("creating run directory"))?;
        let root = tmp.path().to_owned();
        let set_mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
        set_mode(&root, 0o711).map_err(io_err("chmod run directory"))?;
        let code_dir = root.join("code");
        let work = root.join("work");
        let data_copy = if bwrap { root.join("data") } else { work.join("data") };
        let (home, tmpdir) = (root.join("home"), root.join("tmp"));
        for d in [&code_dir, &work, &work.join("results"), &home, &tmpdir] {
            std::fs::create_dir_all(d).map_err(io_err(format!("creating {}", d.display())))?;
        }
        set_mode(&code_dir, 0o755).map_err(io_err("chmod code dir"))?;
        std::fs::write(code_dir.join("submission.py"), spec.code).map_err(io_err("writing submission"))?;
        set_mode(&code_dir.join("submission.py"), 0o644).map_err(io_err("chmod submission"))?;
        isolate::copy_dir(spec.data_dir, &data_copy).map_err(io_err(format!("copying {}", spec.data_dir.display())))?;
        if bwrap {
            std::fs::create_dir_all(work.join("data")).map_err(io_err("creating data mount point"))?;
        }
        let uid = self.drop.then(|| isolate::allocate_uid(self.cfg.uid_base));
        if let Some(u) = uid {
            for d in [&work, &work.join("results"), &home, &tmpdir] {
                std::os::unix::fs::chown(d, Some(u), Some(u)).map_err(io_err("chown to sandbox uid"))?;
            }
            // 0711: bwrap (root without capabilities) must chdir in before the uid drop.
            set_mode(&work, 0o711).map_err(io_err("chmod work dir"))?;
        }
        Ok(RunDirs { tmp, code: code_dir, work, data: data_copy, home, tmp_dir: tmpdir, uid })
    }

    /// The script path, working directory and whole environment of the submission (nothing
    /// inherited): paths as the process sees them, inside bubblewrap or not.
    fn submission_env(&self, spec: &RunSpec<'_>, dirs: &RunDirs, bwrap: bool, marker: (&str, &str)) -> (String, PathBuf, BTreeMap<String, String>) {
        let (script, cwd, home_in, tmp_in) = if bwrap {
            (format!("{SANDBOX_CODE}/submission.py"), PathBuf::from(SANDBOX_WORK), "/tmp".to_string(), "/tmp".to_string())
        } else {
            let s = dirs.code.join("submission.py").to_string_lossy().into_owned();
            (s, dirs.work.clone(), dirs.home.to_string_lossy().into_owned(), dirs.tmp_dir.to_string_lossy().into_owned())
        };
        let py = &self.python.executable;
        let bin_dir = Path::new(py).parent().map(|p| p.to_string_lossy().into_owned()).unwrap_or_default();
        let mut env: BTreeMap<String, String> = BTreeMap::new();
        env.insert("PATH".into(), format!("{bin_dir}:/usr/local/bin:/usr/bin:/bin"));
        env.insert("HOME".into(), home_in);
        env.insert("TMPDIR".into(), tmp_in);
        env.insert("LANG".into(), "C.UTF-8".into());
        env.insert("LC_ALL".into(), "C.UTF-8".into());
        env.insert("PYTHONUNBUFFERED".into(), "1".into());
        env.insert("PYTHONDONTWRITEBYTECODE".into(), "1".into());
        env.insert("PYTHONHASHSEED".into(), "0".into());
        if let Some(us) = &self.python.user_site {
            env.insert("PYTHONPATH".into(), us.clone());
        }
        env.insert(marker.0.into(), marker.1.to_owned());
        for (k, v) in spec.slot.env() {
            env.insert(k, v);
        }
        (script, cwd, env)
    }

    /// What the run amounts to: its predictions (collected from the tmpfs or read from
    /// `work/`), exit, log view and whether a limit killed it.
    fn result(&self, spec: &RunSpec<'_>, mut watched: Watched, bwrap: bool, work: &Path) -> RunResult {
        let predictions = match watched.collected.take() {
            Some(bytes) => {
                let (stray, found) = isolate::parse_collected(&bytes, spec.predictions_file, self.cfg.max_predictions_bytes);
                if !stray.is_empty() {
                    // bubblewrap's or the launcher's own complaints belong in the log.
                    watched.output = watched.output.with_appended(&stray);
                }
                found
            }
            None => isolate::read_predictions(work, spec.predictions_file, self.cfg.max_predictions_bytes),
        };
        let mut exit = ExitInfo { code: watched.status.code(), signal: watched.status.signal() };
        if let (true, Some(c @ 129..=192)) = (bwrap, exit.code) {
            exit.signal = Some(c - 128);
        }
        let o = &self.cfg.output;
        let (output_view, output_truncated) = watched.output.view(o.view_head_chars, o.view_tail_chars);
        // Only the end of the log (where a traceback is) feeds the limit heuristic.
        let log_end: Vec<u8> = {
            let o = &watched.output;
            let all = o.head.iter().chain(o.tail.iter());
            let n = o.head.len() + o.tail.len();
            all.skip(n.saturating_sub(4096)).copied().collect()
        };
        let tail_text = String::from_utf8_lossy(&log_end).into_owned();
        let killed_by_limit = isolate::infer_limit(&exit, watched.timed_out, &tail_text);
        RunResult {
            exit,
            timed_out: watched.timed_out,
            killed_by_limit,
            output: watched.output,
            output_view,
            output_truncated,
            output_complete: watched.output_complete,
            wall_s: watched.wall.as_secs_f64(),
            predictions,
            isolation: self.report.isolation,
            slot: spec.slot.label(),
            survivors: watched.survivors,
        }
    }
}

/// The folders of one run; the temporary root is removed when this is dropped.
struct RunDirs {
    /// The run's root (removed on drop).
    tmp: tempfile::TempDir,
    /// The submission's folder.
    code: PathBuf,
    /// The submission's working directory.
    work: PathBuf,
    /// The copy of the task's data.
    data: PathBuf,
    /// `HOME` outside bubblewrap.
    home: PathBuf,
    /// `TMPDIR` outside bubblewrap.
    tmp_dir: PathBuf,
    /// The uid the submission runs as, when it drops to one.
    uid: Option<u32>,
}

/// The folders bubblewrap's tmpfs work dir needs: `results/` and each folder above the
/// predictions file, sorted.
fn workspace_dirs(predictions_file: &str) -> Vec<String> {
    let mut dirs = vec!["results".to_string()];
    let mut parent = Path::new(predictions_file).parent();
    while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
        dirs.push(p.to_string_lossy().into_owned());
        parent = p.parent();
    }
    dirs.sort();
    dirs.dedup();
    dirs
}
