//! Provenance probed once per evalgrid run (not per submission), spec §3 and lessons §9:
//! interpreter and package versions, GPU model/driver/CUDA, kernel, isolation level and the
//! limits in force, so every result row can say what it ran on.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::gpu::{GpuInfo, GpuPool, PoolConfig};
use super::process::{Killer, run_probe, which};
use super::{IsolationReport, Limits, Sandbox, SandboxError};

const PROBE: &str = include_str!("py/probe.py");

/// What the interpreter reported about itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PythonInfo {
    /// `sys.executable` (kept unresolved so a venv stays a venv).
    pub executable: String,
    /// `realpath(sys.executable)`.
    pub real_executable: String,
    /// `sys.version` number, e.g. `3.11.7`.
    pub version: String,
    /// `sys.implementation.name`.
    pub implementation: String,
    /// `sys.prefix`.
    pub prefix: String,
    /// `sys.base_prefix`.
    pub base_prefix: String,
    /// `sys.exec_prefix`.
    pub exec_prefix: String,
    /// Absolute existing `sys.path` directories (bound read-only into bwrap).
    pub paths: Vec<String>,
    /// User site-packages directory when it exists (exported as `PYTHONPATH`).
    pub user_site: Option<String>,
    /// Installed versions by distribution name (`None` = not installed); from metadata,
    /// not import-tested.
    pub packages: BTreeMap<String, Option<String>>,
}

/// Runs the probe script with `python` (found on `path_var`); the environment is reduced to
/// PATH/HOME/LANG so it matches what submissions see.
pub fn probe_python(python: &Path, path_var: Option<&OsStr>, killer: &Killer, timeout: Duration) -> Result<PythonInfo, SandboxError> {
    let exe = which(python, path_var).ok_or_else(|| SandboxError::Python(format!("{} not found", python.display())))?;
    let mut cmd = Command::new(exe);
    cmd.arg("-c").arg(PROBE).env_clear().env("LANG", "C.UTF-8");
    if let Some(p) = path_var.map(OsStr::to_os_string).or_else(|| std::env::var_os("PATH")) {
        cmd.env("PATH", p);
    }
    if let Some(h) = std::env::var_os("HOME") {
        cmd.env("HOME", h);
    }
    let (status, text, timed_out) = run_probe(cmd, timeout, killer).map_err(|e| SandboxError::Python(e.to_string()))?;
    let line = text.lines().find_map(|l| l.strip_prefix("EVALGRID-PROBE "));
    match line {
        Some(json) if status.success() && !timed_out => serde_json::from_str(json).map_err(|e| SandboxError::Python(format!("probe output: {e}"))),
        _ => Err(SandboxError::Python(format!(
            "probe failed ({status}{}): {}",
            if timed_out { ", timeout" } else { "" },
            text.chars().take(2000).collect::<String>()
        ))),
    }
}

/// Everything recorded once per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// Interpreter facts.
    pub python: PythonInfo,
    /// GPUs in the pool (empty in CPU mode).
    pub gpus: Vec<GpuInfo>,
    /// "CUDA Version" from the `nvidia-smi` banner (driver API version), if any.
    pub cuda_driver_version: Option<String>,
    /// `bwrap --version`, when bwrap is the backend.
    pub bwrap_version: Option<String>,
    /// `/proc/sys/kernel/osrelease`.
    pub kernel: Option<String>,
    /// Isolation actually achieved (callers must warn on `rlimits-only`).
    pub isolation: IsolationReport,
    /// Resource limits in force.
    pub limits: Limits,
    /// Number of execution slots.
    pub slots: usize,
}

/// Parses `CUDA Version: 12.4` out of `nvidia-smi`'s banner.
pub fn parse_cuda_version(banner: &str) -> Option<String> {
    let rest = &banner[banner.find("CUDA Version:")? + "CUDA Version:".len()..];
    let v: String = rest.trim_start().chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
    (!v.is_empty()).then_some(v)
}

impl Provenance {
    /// Collects provenance from a ready sandbox and pool (calls `nvidia-smi` once if GPUs).
    pub fn collect(sandbox: &Sandbox, pool: &GpuPool, pool_cfg: &PoolConfig) -> Self {
        let gpus = pool.gpus();
        let cuda_driver_version = if gpus.is_empty() {
            None
        } else {
            which(&pool_cfg.nvidia_smi, pool_cfg.path_var.as_deref()).and_then(|smi| {
                let killer = Killer::new("kill".as_ref(), None);
                let r = run_probe(Command::new(smi), Duration::from_secs(20), &killer).ok()?;
                parse_cuda_version(&r.1)
            })
        };
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok().map(|s| s.trim().to_string());
        Self {
            python: sandbox.python().clone(),
            gpus,
            cuda_driver_version,
            bwrap_version: sandbox.bwrap_version().map(str::to_string),
            kernel,
            isolation: sandbox.report().clone(),
            limits: sandbox.limits().clone(),
            slots: pool.slots().len(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuda_banner() {
        let banner = "| NVIDIA-SMI 550.54.15   Driver Version: 550.54.15   CUDA Version: 12.4     |";
        assert_eq!(parse_cuda_version(banner).as_deref(), Some("12.4"));
        assert_eq!(parse_cuda_version("no gpu"), None);
    }
}
