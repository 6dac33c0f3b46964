//! Long-lived sandboxed helpers that talk over stdin/stdout (the Eleusis judge worker):
//! the same jail as a one-shot run (bubblewrap namespaces, per-process uid as root, no
//! capabilities, empty environment, rlimits) with a size-capped tmpfs as `/workspace` and
//! nothing of the host's but the system and the interpreter. One worker serves one cell;
//! dropping the handle kills its whole process group, pid namespace and uid.

use std::collections::BTreeMap;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::isolate::{self, DropTo, LaunchPlan};
use super::process::ReapTarget;
use super::{Backend, Sandbox, SandboxError, io_err};

/// Limits of one worker process (for its whole life, not per request).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerLimits {
    /// RLIMIT_AS bytes.
    pub address_space_bytes: u64,
    /// RLIMIT_CPU seconds over the worker's life.
    pub cpu_time_s: u64,
    /// RLIMIT_NPROC (the worker needs one; a fork bomb gets no further).
    pub processes: u64,
    /// RLIMIT_FSIZE bytes.
    pub file_size_bytes: u64,
    /// RLIMIT_NOFILE.
    pub open_files: u64,
    /// Size of the `/workspace` and `/tmp` tmpfs mounts.
    pub tmpfs_bytes: u64,
}

impl Default for WorkerLimits {
    fn default() -> Self {
        Self { address_space_bytes: 1 << 30, cpu_time_s: 600, processes: 16, file_size_bytes: 1 << 20, open_files: 64, tmpfs_bytes: 8 << 20 }
    }
}

/// What to start: interpreter arguments (after the interpreter itself) and environment.
#[derive(Debug, Clone, Default)]
pub struct WorkerSpec {
    /// Arguments after `python`, e.g. `["-s", "-S", "-B", "-c", SOURCE]`.
    pub args: Vec<String>,
    /// The complete environment of the worker (nothing else is inherited).
    pub env: BTreeMap<String, String>,
    /// Limits.
    pub limits: WorkerLimits,
    /// The worker is a zygote that forks one child per task: where evalgrid runs as root
    /// under bubblewrap it keeps uid 0 with only CAP_SETUID, CAP_SETGID and CAP_KILL, so
    /// that each child can drop to its own uid ([`SandboxedWorker::next_child_uid`]).
    pub zygote: bool,
}

/// A running sandboxed worker with piped stdin, stdout and stderr.
#[derive(Debug)]
pub struct SandboxedWorker {
    /// The spawned process (bwrap or the launcher); take its pipes.
    pub child: Child,
    target: ReapTarget,
    killer: super::process::Killer,
    grace: Duration,
    killed: bool,
    child_uids: bool,
    uid_base: u32,
    dir: Option<tempfile::TempDir>,
}

impl SandboxedWorker {
    /// Kills every process of the worker (group, pid namespace, uid) and reaps it; idempotent.
    pub fn kill(&mut self) {
        if std::mem::replace(&mut self.killed, true) {
            return;
        }
        let _ = self.child.kill();
        self.target.reap(&self.killer, self.grace);
        let _ = self.child.wait();
    }

    /// The worker's exit status if it has exited (reaping it). Once reaped its pid may be
    /// reused, so the later kill no longer walks the tree under that pid.
    pub fn try_exit(&mut self) -> std::io::Result<Option<std::process::ExitStatus>> {
        let st = self.child.try_wait()?;
        if st.is_some() {
            self.target.tree_root = None;
        }
        Ok(st)
    }

    /// A fresh uid for the zygote's next child (`None`: children share the worker's uid,
    /// because evalgrid is not root or bubblewrap is missing). Never one of
    /// [`isolate::allocate_uid`]'s, and reused only after 4,096 children of this process.
    pub fn next_child_uid(&self) -> Option<u32> {
        self.child_uids.then(|| isolate::child_uid(self.uid_base))
    }

    /// Removes the worker's scratch folder now (its mounts are made once it has answered),
    /// so that a worker kept until evalgrid exits leaves nothing behind.
    pub fn release_folder(&mut self) {
        self.dir = None;
    }

    /// Processes of this worker still alive (empty once killed).
    pub fn survivors(&self) -> Vec<u32> {
        self.target.survivors()
    }
}

impl Drop for SandboxedWorker {
    fn drop(&mut self) {
        self.kill();
    }
}

static WORKER_COUNTER: AtomicU64 = AtomicU64::new(0);

impl Sandbox {
    /// Starts `python <spec.args>` inside the sandbox with piped stdio.
    pub fn spawn_worker(&self, spec: &WorkerSpec) -> Result<SandboxedWorker, SandboxError> {
        use std::os::unix::fs::PermissionsExt;
        let dir = super::scratch::folder("worker", None).map_err(io_err("creating worker directory"))?;
        let root = dir.path();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o711)).map_err(io_err("chmod worker directory"))?;
        let code = root.join("code");
        let work = root.join("work");
        for d in [&code, &work] {
            std::fs::create_dir(d).map_err(io_err("creating worker directory"))?;
        }
        std::fs::set_permissions(&code, std::fs::Permissions::from_mode(0o755)).map_err(io_err("chmod worker directory"))?;
        let bwrap = matches!(self.backend, Backend::Bwrap(_));
        // A zygote under bubblewrap stays root (with three capabilities) to give each child a uid.
        let zygote_root = spec.zygote && bwrap && self.drop;
        let uid = (self.drop && !zygote_root).then(|| isolate::allocate_uid(self.cfg.uid_base));
        if let Some(u) = uid {
            std::os::unix::fs::chown(&work, Some(u), Some(u)).map_err(io_err("chown to sandbox uid"))?;
        }
        let n = WORKER_COUNTER.fetch_add(1, Ordering::Relaxed);
        let marker_key = "EVALGRID_SANDBOX_TOKEN";
        let token = format!("worker-{}-{n}-{}", std::process::id(), root.file_name().and_then(|s| s.to_str()).unwrap_or("w"));
        let mut env = spec.env.clone();
        env.insert(marker_key.into(), token.clone());
        let l = &spec.limits;
        let clamp = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let mut processes = l.processes;
        if !self.drop && !self.is_root && !bwrap {
            // Without a private uid the count includes all of the caller's tasks.
            processes = processes.saturating_add(super::process::effective_uid().map_or(0, super::process::tasks_of_uid));
        }
        let rlimits = vec![
            ("RLIMIT_CPU".to_string(), clamp(l.cpu_time_s), clamp(l.cpu_time_s.saturating_add(5))),
            ("RLIMIT_CORE".into(), 0, 0),
            ("RLIMIT_AS".into(), clamp(l.address_space_bytes), clamp(l.address_space_bytes)),
            ("RLIMIT_NPROC".into(), clamp(processes), clamp(processes)),
            ("RLIMIT_FSIZE".into(), clamp(l.file_size_bytes), clamp(l.file_size_bytes)),
            ("RLIMIT_NOFILE".into(), clamp(l.open_files), clamp(l.open_files)),
        ];
        let py = self.python.executable.clone();
        let mut argv = vec![py.clone()];
        argv.extend(spec.args.iter().cloned());
        let plan = LaunchPlan {
            setsid: !bwrap,
            rlimits,
            no_new_privs: true,
            clear_bounding_set: !bwrap,
            drop: uid.map(|u| DropTo { uid: u, gid: u }),
            argv,
            env,
            collect: None,
        };
        let jail = super::Jail {
            code_dir: &code,
            work_dir: None,
            data_dir: None,
            workspace_dirs: &[],
            workspace_bytes: l.tmpfs_bytes,
            gpu: false,
            zygote_caps: zygote_root,
            host_cwd: &work,
            marker: (marker_key, &token),
        };
        let mut cmd = self.jail_command(&jail, &plan);
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = cmd.spawn().map_err(io_err("starting sandboxed worker"))?;
        let pid = child.id();
        let target = ReapTarget { group: Some(pid), tree_root: Some(pid), uid, marker: Some(format!("{marker_key}={token}")) };
        Ok(SandboxedWorker {
            child,
            target,
            killer: self.killer.clone(),
            grace: Duration::from_millis(self.cfg.kill_grace_ms),
            killed: false,
            child_uids: zygote_root,
            uid_base: self.cfg.uid_base,
            dir: Some(dir),
        })
    }
}
