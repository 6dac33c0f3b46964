//! Backend selection for [`Sandbox::new`]: probe the interpreter, try bubblewrap (with the
//! root privilege drop when applicable) through the real run path, fall back loudly to
//! rlimits-only, and write down what is and is not guaranteed.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{
    Backend, BackendChoice, Duration, Isolation, IsolationReport, Killer, PrivilegeDrop, RunResult, RunSpec, Sandbox, SandboxConfig, SandboxError, Slot,
    effective_uid, io_err, probe_python, run_probe, which,
};

const PROBE_CODE: &str = "import os\nprint('evalgrid-probe-ok', os.getuid())\n";

/// Runs a tiny program through the exact production path.
fn probe_run(sb: &Sandbox, code: &str) -> Result<RunResult, SandboxError> {
    let data = tempfile::tempdir().map_err(io_err("probe data dir"))?;
    let slot = Slot::Cpu { id: 0, threads: 1 };
    let spec = RunSpec {
        code,
        data_dir: data.path(),
        predictions_file: "results/test_preds.txt",
        time_limit: Duration::from_secs(sb.cfg.probe_timeout_s.max(1)),
        slot: &slot,
    };
    sb.run(&spec)
}

fn bwrap_version_of(path: &Path, killer: &Killer) -> Option<String> {
    let mut c = Command::new(path);
    c.arg("--version");
    let (st, text, _) = run_probe(c, Duration::from_secs(10), killer).ok()?;
    st.success().then(|| text.trim().to_string())
}

fn resolve(cfg: &SandboxConfig, name: &Path) -> Option<PathBuf> {
    which(name, cfg.path_var.as_deref())
}

/// Runs the probe program; `Ok(uid)` when it printed the marker and exited 0.
fn probe(sb: &Sandbox) -> Result<u32, String> {
    let r = probe_run(sb, PROBE_CODE).map_err(|e| e.to_string())?;
    let text = r.output.log_text();
    let uid = text.lines().find_map(|l| l.strip_prefix("evalgrid-probe-ok ")).and_then(|u| u.trim().parse::<u32>().ok());
    match uid {
        Some(u) if r.exit.success() => Ok(u),
        _ => {
            let shown: String = text.chars().take(1500).collect();
            Err(format!("probe exited {:?}/{:?}: {}", r.exit.code, r.exit.signal, shown.trim()))
        }
    }
}

/// [`probe`] under bubblewrap; when the shell supervisor fails it, again with the Python
/// launcher (noted), so that a host whose tools differ still runs submissions.
fn probe_supervised(sb: &mut Sandbox, notes: &mut Vec<String>) -> Result<u32, String> {
    match probe(sb) {
        Err(reason) if sb.tools.is_some() => {
            sb.tools = None;
            let second = probe(sb);
            if second.is_ok() {
                notes.push(format!("the shell supervisor failed its probe, the Python launcher runs submissions: {reason}"));
            }
            second
        }
        other => other,
    }
}

pub(super) fn build(cfg: SandboxConfig) -> Result<Sandbox, SandboxError> {
    let killer = Killer::new(&cfg.kill, cfg.path_var.as_deref());
    let mut notes = Vec::new();
    if !killer.available() {
        notes.push("`kill` not found: timeouts kill only the direct child; stragglers may survive".to_string());
    }
    let timeout = Duration::from_secs(cfg.probe_timeout_s.max(1));
    let python = probe_python(&cfg.python, cfg.path_var.as_deref(), &killer, timeout)?;
    let is_root = effective_uid() == Some(0);
    let want_drop = is_root && cfg.privilege_drop == PrivilegeDrop::Auto;
    let choice = cfg.backend;
    let placeholder = IsolationReport {
        isolation: Isolation::RlimitsOnly,
        per_run_uid: false,
        nproc_enforced: false,
        network_isolated: false,
        filesystem_isolated: false,
        notes: Vec::new(),
    };
    let tools = super::supervisor::Tools::find(cfg.path_var.as_deref());
    let mut sb = Sandbox { cfg, python, backend: Backend::RlimitsOnly, bwrap_version: None, report: placeholder, killer, is_root, drop: false, tools };
    let nproc_note = |drop: bool| {
        if drop {
            None
        } else if is_root {
            Some("submissions run as uid 0: RLIMIT_NPROC does not bind root, fork bombs are NOT contained".to_string())
        } else {
            Some("RLIMIT_NPROC counts every task of the caller's uid (limit raised by the current count)".to_string())
        }
    };

    let mut bwrap_failure = None;
    if choice != BackendChoice::RlimitsOnly {
        match resolve(&sb.cfg, &sb.cfg.bwrap) {
            None => bwrap_failure = Some(format!("{} not found", sb.cfg.bwrap.display())),
            Some(path) => {
                sb.backend = Backend::Bwrap(path.clone());
                sb.drop = want_drop;
                match probe_supervised(&mut sb, &mut notes) {
                    Ok(uid) if !sb.drop || uid != 0 => {
                        sb.bwrap_version = bwrap_version_of(&path, &sb.killer);
                        notes.extend(nproc_note(sb.drop));
                        sb.report = IsolationReport {
                            isolation: Isolation::Bwrap,
                            per_run_uid: sb.drop,
                            nproc_enforced: sb.drop || !is_root,
                            network_isolated: true,
                            filesystem_isolated: true,
                            notes,
                        };
                        return Ok(sb);
                    }
                    Ok(_) => bwrap_failure = Some("privilege drop inside bwrap did not take effect".into()),
                    Err(reason) => bwrap_failure = Some(reason),
                }
            }
        }
    }
    let reason = bwrap_failure.unwrap_or_else(|| "backend rlimits-only requested".into());
    if choice == BackendChoice::Bwrap {
        return Err(SandboxError::BwrapUnavailable(reason));
    }
    if choice == BackendChoice::Auto && !super::unsandboxed_allowed() {
        return Err(SandboxError::Required(reason));
    }
    sb.backend = Backend::RlimitsOnly;
    notes.push(format!("WARNING rlimits-only: {reason}"));
    notes.push("NO network isolation: submissions can open sockets (bwrap is required for that)".into());
    notes.push("NO filesystem isolation: submissions can read (hidden labels included) and write whatever their uid can".into());
    if want_drop {
        sb.drop = true;
        match probe(&sb) {
            Ok(uid) if uid != 0 => {}
            Ok(_) => {
                sb.drop = false;
                notes.push("privilege drop did not take effect".into());
            }
            Err(reason) => {
                sb.drop = false;
                notes.push(format!("interpreter not usable by an unprivileged uid: {reason}"));
            }
        }
    }
    if !sb.drop {
        probe(&sb).map_err(SandboxError::Python)?;
        notes.push(
            "NO pid namespace and no private uid: a process that leaves the group and clears the marker from its \
             environment can outlive cleanup"
                .into(),
        );
    }
    notes.extend(nproc_note(sb.drop));
    sb.report = IsolationReport {
        isolation: Isolation::RlimitsOnly,
        per_run_uid: sb.drop,
        nproc_enforced: sb.drop || !is_root,
        network_isolated: false,
        filesystem_isolated: false,
        notes,
    };
    Ok(sb)
}
