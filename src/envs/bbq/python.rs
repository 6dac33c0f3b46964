//! `execute_python` for BBQ-Bench (spec §4.8): the model's code runs in the WeirdML sandbox
//! (bubblewrap when it works, else rlimits-only, reported; rlimits always; the process group
//! killed at the wall-clock limit) with the task's time and memory limits, the standard
//! library only, and stdout and stderr each cut to the first + last half of the cap.
//!
//! The sandbox merges stdout and stderr into one pipe, so a small wrapper points fd 2 at
//! `stderr.txt` in the run directory before the model's code starts; that file is read back
//! through the sandbox's result-file channel. Infrastructure failures are errors (the cell
//! fails); everything the code does is a [`PythonRun`] shown to the model.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

use super::task::TaskParams;
use crate::exec::{BoxFuture, StepError};
use crate::sandbox::gpu::Slot;
use crate::sandbox::output::truncate_view;
use crate::sandbox::{BackendChoice, IsolationReport, LimitKind, Limits, OutputLimits, Predictions, RunSpec, Sandbox, SandboxConfig, SandboxError};

/// Where the wrapper sends stderr, relative to the run's working directory.
const STDERR_FILE: &str = "stderr.txt";
/// Largest stderr file written (RLIMIT_FSIZE) and read back.
const FILE_CAP_BYTES: u64 = 16 << 20;

/// The limits of one `execute_python` run, from [`TaskParams`] (or smaller, in tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PythonLimits {
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Address-space limit in MiB.
    pub memory_mib: u32,
    /// Cap on each of stdout and stderr, in characters (first half + last half kept).
    pub output_cap_chars: usize,
    /// Whether numpy may be imported (otherwise the standard library only).
    pub numpy: bool,
    /// Interpreter name or path.
    pub python: PathBuf,
    /// Sandbox backend (auto = bubblewrap when it works).
    pub backend: BackendChoice,
}

impl PythonLimits {
    /// The spec's limits as configured in the task parameters.
    pub fn from_params(params: &TaskParams) -> Self {
        PythonLimits {
            timeout: Duration::from_secs(u64::from(params.python_timeout_s.max(1))),
            memory_mib: params.python_memory_mib,
            output_cap_chars: params.python_output_cap_chars,
            numpy: params.python_numpy,
            python: PathBuf::from("python3"),
            backend: BackendChoice::Auto,
        }
    }

    /// The sandbox configuration enforcing these limits.
    pub fn sandbox_config(&self) -> SandboxConfig {
        let head = self.output_cap_chars / 2;
        SandboxConfig {
            python: self.python.clone(),
            backend: self.backend,
            limits: Limits {
                cpu_time_s: Some(self.timeout.as_secs() + 2),
                address_space_bytes: Some(u64::from(self.memory_mib) << 20),
                processes: Some(64),
                file_size_bytes: Some(FILE_CAP_BYTES),
                open_files: Some(256),
                tmpfs_bytes: 64 << 20,
                workspace_bytes: 64 << 20,
            },
            output: OutputLimits { view_head_chars: head, view_tail_chars: self.output_cap_chars - head, log_head_bytes: 0, log_tail_bytes: 0 },
            max_predictions_bytes: FILE_CAP_BYTES,
            kill_grace_ms: 1000,
            probe_timeout_s: 20,
            ..SandboxConfig::default()
        }
    }
}

/// What one run did, as recorded and (via [`PythonRun::tool_result`]) shown to the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PythonRun {
    /// Standard output, cut to the cap.
    pub stdout: String,
    /// Standard error, cut to the cap.
    pub stderr: String,
    /// Exit code (`None` when killed by a signal).
    pub exit_code: Option<i32>,
    /// Terminating signal, if any.
    pub signal: Option<i32>,
    /// Killed at the wall-clock limit.
    pub timed_out: bool,
    /// The resource limit that probably ended the run.
    pub limit: Option<LimitKind>,
    /// Whether stdout or stderr was cut.
    pub truncated: bool,
    /// Spawn-to-exit seconds (logs only; never shown to the model).
    pub wall_s: f64,
}

impl PythonRun {
    /// A run that exited 0 within the time limit (the phase's one successful call).
    pub fn succeeded(&self) -> bool {
        self.exit_code == Some(0) && self.signal.is_none() && !self.timed_out
    }

    /// Why the run counts as a failed attempt (§4.9), for the failure log.
    pub fn failure_cause(&self) -> String {
        let limit = self.limit.map(|l| format!(" ({l:?} limit)")).unwrap_or_default();
        if self.timed_out {
            return "execute_python timed out".into();
        }
        let last = self.stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim();
        let last: String = last.chars().take(200).collect();
        match (self.exit_code, self.signal) {
            (_, Some(sig)) => format!("execute_python killed by signal {sig}{limit}"),
            (Some(code), None) if last.is_empty() => {
                format!("execute_python exited with code {code}{limit}")
            }
            (Some(code), None) => format!("execute_python exited with code {code}{limit}: {last}"),
            (None, None) => format!("execute_python ended abnormally{limit}"),
        }
    }

    /// The tool result (§4.8): `{stdout, stderr, exit_code, timed_out}` plus notes on cuts
    /// and limits.
    pub fn tool_result(&self) -> Value {
        let mut v = json!({
            "stdout": self.stdout, "stderr": self.stderr,
            "exit_code": self.exit_code.or(self.signal.map(|s| -s)), "timed_out": self.timed_out,
        });
        if self.truncated {
            v["note"] = json!("output cut to its first and last characters");
        }
        if let Some(l) = self.limit {
            v["limit"] = json!(l);
        }
        v
    }
}

/// The wrapper around the model's code: stderr to a file, standard-library-only imports,
/// tracebacks that start at the model's code.
fn wrapper(code: &str, numpy: bool) -> String {
    let src = serde_json::to_string(code).expect("serialising a string to JSON cannot fail");
    let extra = if numpy { "{'numpy'}" } else { "set()" };
    format!(
        r#"import os as _os, sys as _sys, linecache as _lc, traceback as _tb
_fd = _os.open({STDERR_FILE:?}, _os.O_WRONLY | _os.O_CREAT | _os.O_TRUNC, 0o644)
_os.dup2(_fd, 2)
_os.close(_fd)
_allowed = set(getattr(_sys, 'stdlib_module_names', ())) | {extra}
class _StdlibOnly:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if not _allowed or name.partition('.')[0] in _allowed:
            return None
        raise ModuleNotFoundError('No module named %r (execute_python offers the standard library only)' % name, name=name)
_sys.meta_path.insert(0, _StdlibOnly)
_src = {src}
_lc.cache['<code>'] = (len(_src), None, _src.splitlines(True), '<code>')
try:
    exec(compile(_src, '<code>', 'exec'), {{'__name__': '__main__', '__builtins__': __builtins__}})
except SystemExit:
    raise
except BaseException as _e:
    _sys.stdout.flush()
    _tb.print_exception(type(_e), _e, _e.__traceback__.tb_next if _e.__traceback__ else None)
    _sys.exit(1)
"#
    )
}

/// A probed sandbox with fixed limits.
#[derive(Debug)]
pub struct PythonSandbox {
    sandbox: Sandbox,
    limits: PythonLimits,
}

impl PythonSandbox {
    /// Probes the interpreter and the backend (once; runs are then cheap to start).
    pub fn new(limits: PythonLimits) -> Result<Self, SandboxError> {
        let sandbox = Sandbox::new(limits.sandbox_config())?;
        Ok(PythonSandbox { sandbox, limits })
    }

    /// What the sandbox guarantees on this host (network and filesystem isolation, nproc).
    pub fn report(&self) -> &IsolationReport {
        self.sandbox.report()
    }

    /// Runs `code`; `Err` only for infrastructure failures.
    pub fn run(&self, code: &str) -> Result<PythonRun, SandboxError> {
        let slot = Slot::Cpu { id: 0, threads: 1 };
        let program = wrapper(code, self.limits.numpy);
        // An empty data folder per run (the sandbox copies one in): the sandbox itself lives as
        // long as the process, which never drops it, so a folder it held would be left behind.
        let empty =
            crate::sandbox::scratch::folder("empty", None).map_err(|source| SandboxError::Io { what: "creating an empty data folder".into(), source })?;
        let spec = RunSpec { code: &program, data_dir: empty.path(), predictions_file: STDERR_FILE, time_limit: self.limits.timeout, slot: &slot };
        let r = self.sandbox.run(&spec)?;
        let head = self.limits.output_cap_chars / 2;
        let tail = self.limits.output_cap_chars - head;
        let raw_stderr = match &r.predictions {
            Predictions::Present(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            Predictions::Missing => String::new(),
            Predictions::Invalid(why) => format!("[stderr unavailable: {why}]"),
        };
        let (stderr, err_cut) = truncate_view(&raw_stderr, head, tail);
        let limit = r.killed_by_limit.or_else(|| {
            let failed = !r.exit.success() && !r.timed_out;
            (failed && raw_stderr.contains("MemoryError")).then_some(LimitKind::AddressSpace)
        });
        Ok(PythonRun {
            stdout: r.output_view,
            stderr,
            exit_code: r.exit.code,
            signal: r.exit.signal,
            timed_out: r.timed_out,
            limit,
            truncated: r.output_truncated || err_cut,
            wall_s: r.wall_s,
        })
    }
}

/// Runs `execute_python` code for the episode driver (a trait so tests can fake it).
pub trait PythonRunner: Send + Sync {
    /// Runs `code`; `Err` fails the cell (infrastructure, never the model's fault).
    fn run<'a>(&'a self, code: &'a str) -> BoxFuture<'a, Result<PythonRun, StepError>>;
}

/// Sandboxes shared by all episodes of the process, one per distinct limits.
static SHARED: Mutex<Vec<Arc<PythonSandbox>>> = Mutex::new(Vec::new());

/// The process-wide sandbox for `limits`, probed on first use.
pub fn shared(limits: &PythonLimits) -> Result<Arc<PythonSandbox>, StepError> {
    let poisoned = || StepError::worker_msg("python sandbox registry poisoned");
    if let Some(sb) = SHARED.lock().map_err(|_| poisoned())?.iter().find(|s| &s.limits == limits) {
        return Ok(Arc::clone(sb));
    }
    let sb = Arc::new(PythonSandbox::new(limits.clone()).map_err(|e| StepError::episode_in("cannot set up the execute_python sandbox", e))?);
    SHARED.lock().map_err(|_| poisoned())?.push(Arc::clone(&sb));
    Ok(sb)
}

/// The production runner: the shared sandbox for the task's limits, set up lazily so that
/// episodes in which the model never runs Python need no interpreter.
#[derive(Debug, Clone)]
pub struct SandboxRunner {
    /// Limits of every run.
    pub limits: PythonLimits,
}

impl PythonRunner for SandboxRunner {
    fn run<'a>(&'a self, code: &'a str) -> BoxFuture<'a, Result<PythonRun, StepError>> {
        let (limits, code) = (self.limits.clone(), code.to_owned());
        Box::pin(async move {
            tokio::task::spawn_blocking(move || shared(&limits)?.run(&code).map_err(|e| StepError::episode_in("execute_python sandbox failed", e)))
                .await
                .map_err(StepError::worker)?
        })
    }
}

#[cfg(test)]
pub(crate) mod tests;
