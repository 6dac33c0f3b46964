//! Process plumbing without libc: tool lookup on a PATH, the effective uid from `/proc`,
//! spawning with one merged stdout+stderr pipe read incrementally into a bounded capture, a
//! wall-clock deadline, and killing (via the `kill` command) plus a `/proc`-scanning reaper
//! for everything a submission left behind (process group, descendants, sandbox uid, marker).

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsStr;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::output::{CapturedOutput, OutputCapture};

/// Resolves `name` like a shell: a name with a `/` is taken as a path, otherwise the first
/// executable file named `name` in `path_var` (default: this process's `PATH`).
pub fn which(name: &Path, path_var: Option<&OsStr>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let is_exec = |p: &Path| p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0);
    if name.as_os_str().is_empty() {
        return None;
    }
    if name.components().count() > 1 || name.is_absolute() {
        return is_exec(name).then(|| name.to_path_buf());
    }
    let own = std::env::var_os("PATH");
    let path_var = path_var.or(own.as_deref())?;
    std::env::split_paths(path_var).map(|d| d.join(name)).find(|p| is_exec(p))
}

/// Effective uid of this process (second field of `Uid:` in `/proc/self/status`).
pub fn effective_uid() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Uid:"))?;
    line.split_whitespace().nth(2)?.parse().ok()
}

/// What the reaper needs to know about one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Process group id.
    pub pgid: u32,
    /// Real, effective, saved and filesystem uids.
    pub uids: [u32; 4],
}

/// One process from `/proc/<pid>/status` alone (`PPid`, `Uid`, and the first `NSpgid`, the
/// group as our pid namespace sees it); `/proc/<pid>/stat` only on kernels without `NSpgid`.
fn read_proc(pid: u32) -> Option<ProcInfo> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
    let ppid = field("PPid:")?.trim().parse().ok()?;
    let pgid = match field("NSpgid:") {
        Some(v) => v.split_whitespace().next()?.parse().ok()?,
        None => stat_pgid(pid)?,
    };
    let mut uids = [0u32; 4];
    for (slot, v) in uids.iter_mut().zip(field("Uid:")?.split_whitespace()) {
        *slot = v.parse().ok()?;
    }
    Some(ProcInfo { pid, ppid, pgid, uids })
}

/// The process group from `/proc/<pid>/stat` (the fifth field).
fn stat_pgid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may contain anything.
    stat[stat.rfind(')')? + 1..].split_whitespace().nth(2)?.parse().ok()
}

/// Snapshot of all processes visible in `/proc` (vanishing ones are skipped).
pub fn list_processes() -> Vec<ProcInfo> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()).filter_map(read_proc).collect()
}

/// Tasks (threads) of all processes whose real uid is `uid`: what RLIMIT_NPROC counts.
pub fn tasks_of_uid(uid: u32) -> u64 {
    let threads = |pid: u32| -> Option<u64> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        s.lines().find_map(|l| l.strip_prefix("Threads:")?.trim().parse().ok())
    };
    let procs = list_processes().into_iter().filter(|p| p.uids[0] == uid);
    procs.map(|p| threads(p.pid).unwrap_or(1)).sum()
}

/// True when process `pid` started with the exact environment entry `marker` (`K=V`).
pub fn environ_has(pid: u32, marker: &str) -> bool {
    let Ok(env) = std::fs::read(format!("/proc/{pid}/environ")) else {
        return false;
    };
    env.split(|&b| b == 0).any(|e| e == marker.as_bytes())
}

/// Sends SIGKILL through the `kill` command (no libc); a missing binary degrades to
/// `Child::kill` on the direct child only.
#[derive(Debug, Clone)]
pub struct Killer {
    kill: Option<PathBuf>,
}

impl Killer {
    /// Uses the `kill` binary found on `path_var` (or the given path).
    pub fn new(kill: &Path, path_var: Option<&OsStr>) -> Self {
        Self { kill: which(kill, path_var) }
    }

    /// Whether a `kill` binary was found.
    pub fn available(&self) -> bool {
        self.kill.is_some()
    }

    /// SIGKILLs the given pids and process groups (negative targets), ignoring errors.
    pub fn kill(&self, pids: &[u32], groups: &[u32]) {
        let Some(kill) = &self.kill else { return };
        let own = std::process::id();
        let mut args: Vec<String> = vec!["-s".into(), "KILL".into(), "--".into()];
        args.extend(pids.iter().filter(|&&p| p > 1 && p != own).map(u32::to_string));
        args.extend(groups.iter().filter(|&&g| g > 1 && g != own).map(|g| format!("-{g}")));
        if args.len() == 3 {
            return;
        }
        let _ = Command::new(kill).args(&args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status();
    }
}

/// What belongs to one submission: its process group / subtree, sandbox uid and env marker.
#[derive(Debug, Clone, Default)]
pub struct ReapTarget {
    /// Process group to kill (the spawned process's pid when it leads a group). Safe after
    /// the leader was reaped: a pid is not reused while its number is still a live pgid.
    pub group: Option<u32>,
    /// Root of a process subtree to kill; only set while that root is not yet reaped
    /// (afterwards its pid could be reused by an unrelated process).
    pub tree_root: Option<u32>,
    /// Unprivileged uid the submission ran as (never 0 nor our own uid).
    pub uid: Option<u32>,
    /// Exact `KEY=VALUE` environment entry every submission process inherits.
    pub marker: Option<String>,
}

impl ReapTarget {
    fn matches(&self, procs: &[ProcInfo], own_uid: Option<u32>) -> Vec<u32> {
        let own = std::process::id();
        let mut hit = BTreeSet::new();
        if let Some(root) = self.tree_root {
            let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
            for p in procs {
                children.entry(p.ppid).or_default().push(p.pid);
            }
            let mut seen = BTreeSet::new();
            let mut stack = vec![root];
            while let Some(p) = stack.pop() {
                if seen.insert(p) {
                    hit.insert(p);
                    stack.extend(children.get(&p).into_iter().flatten().copied());
                }
            }
        }
        let uid = self.uid.filter(|&u| u != 0 && Some(u) != own_uid);
        for p in procs {
            if self.group.is_some_and(|g| p.pgid == g)
                || uid.is_some_and(|u| p.uids.contains(&u))
                || self.marker.as_deref().is_some_and(|m| environ_has(p.pid, m))
            {
                hit.insert(p.pid);
            }
        }
        hit.into_iter().filter(|&p| p != own && p > 1).collect()
    }

    /// Live (non-zombie) processes currently matching this target.
    pub fn survivors(&self) -> Vec<u32> {
        self.live(effective_uid())
    }

    /// The matching processes that are alive: zombies awaiting their parent's wait() are dead.
    fn live(&self, own_uid: Option<u32>) -> Vec<u32> {
        self.matches(&list_processes(), own_uid).into_iter().filter(|&p| !is_zombie(p)).collect()
    }

    /// SIGKILLs the group and every matching process until none is left or `within` passes;
    /// returns the pids still alive (empty on success). When nothing matches (a run whose pid
    /// namespace died with it), nothing is signalled: no group member is left to fork one.
    pub fn reap(&self, killer: &Killer, within: Duration) -> Vec<u32> {
        let deadline = Instant::now() + within;
        let own_uid = effective_uid();
        let groups: Vec<u32> = self.group.into_iter().collect();
        let mut left = self.live(own_uid);
        while !left.is_empty() {
            killer.kill(&left, &groups);
            std::thread::sleep(Duration::from_millis(5));
            left = self.live(own_uid);
            if Instant::now() >= deadline {
                break;
            }
        }
        left
    }
}

fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rfind(')').map(|i| s[i + 1..].trim_start().starts_with(['Z', 'X'])))
        .unwrap_or(true)
}

/// Result of [`run_watched`].
#[derive(Debug, Clone)]
pub struct Watched {
    /// Exit status of the spawned process.
    pub status: ExitStatus,
    /// True when the deadline passed and the process was killed.
    pub timed_out: bool,
    /// Spawn-to-exit wall time.
    pub wall: Duration,
    /// Merged stdout+stderr, bounded.
    pub output: CapturedOutput,
    /// False when some escaped process still held the pipe after cleanup.
    pub output_complete: bool,
    /// Pids the cleanup could not kill (should be empty).
    pub survivors: Vec<u32>,
    /// Bytes read from stderr when it had its own pipe (at most the cap asked for).
    pub collected: Option<Vec<u8>>,
}

/// Reads `r` to its end on a thread, keeping the first `cap` bytes (the rest is drained so
/// the writer never blocks); the flag turns true at end of file.
fn read_capped(mut r: std::io::PipeReader, cap: usize, eof: Sender<()>) -> (Arc<Mutex<Vec<u8>>>, Arc<AtomicBool>) {
    let kept = Arc::new(Mutex::new(Vec::new()));
    let done = Arc::new(AtomicBool::new(false));
    let (kept2, done2) = (Arc::clone(&kept), Arc::clone(&done));
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Ok(mut k) = kept2.lock() {
                        let room = cap.saturating_sub(k.len()).min(n);
                        k.extend_from_slice(&buf[..room]);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        done2.store(true, Ordering::SeqCst);
        let _ = eof.send(());
    });
    (kept, done)
}

/// Spawns `cmd` with stdin from /dev/null and stdout+stderr on one pipe (stderr on its own,
/// read up to `collect_cap` bytes, when that is given), reads it into `capture` as it arrives, and on `timeout` calls `cleanup(pid, true)` (child not yet
/// reaped) before killing it; after exit it always calls `cleanup(pid, false)` (kill group,
/// reap stragglers; returns survivors). `cmd` is consumed so the parent's write
/// end of the pipe is closed after spawning.
/// Set once the run is interrupted: submissions still running are killed at once (their
/// run folders then removed as usual), and none starts.
static ABANDON: AtomicBool = AtomicBool::new(false);

/// Kills every submission of this process that is running, and refuses new ones: the run
/// was interrupted, and a blocking thread left running would outlive the process's exit
/// with its run folder in place.
pub fn abandon_runs() {
    ABANDON.store(true, Ordering::SeqCst);
}

/// Whether [`abandon_runs`] was called: nothing new (a submission, a container) may start.
pub fn runs_abandoned() -> bool {
    ABANDON.load(Ordering::SeqCst)
}

fn abandoned() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Interrupted, "the run was interrupted")
}

pub fn run_watched(
    mut cmd: Command,
    timeout: Duration,
    capture: OutputCapture,
    collect_cap: Option<usize>,
    cleanup: &dyn Fn(u32, bool) -> Vec<u32>,
) -> std::io::Result<Watched> {
    if ABANDON.load(Ordering::SeqCst) {
        return Err(abandoned());
    }
    let (mut reader, writer) = std::io::pipe()?;
    let mut collect = None;
    cmd.stdin(Stdio::null());
    match collect_cap {
        Some(cap) => {
            let (r, w) = std::io::pipe()?;
            cmd.stdout(writer).stderr(w);
            collect = Some((r, cap));
        }
        None => {
            cmd.stdout(writer.try_clone()?).stderr(writer);
        }
    }
    let start = Instant::now();
    let spawned = cmd.spawn();
    drop(cmd);
    let mut child: Child = spawned?;
    let pid = child.id();
    // Wakes the loop below the moment the child exits (it stays for `try_wait` to reap).
    let (exited_tx, exited) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        if crate::platform::wait_for_exit(pid).is_ok() {
            let _ = exited_tx.send(());
        }
    });
    let (eof_tx, eof) = mpsc::channel::<()>();
    let collect = collect.map(|(r, cap)| read_capped(r, cap, eof_tx.clone()));
    let cap = Arc::new(Mutex::new(capture));
    let done = Arc::new(AtomicBool::new(false));
    let (cap2, done2) = (Arc::clone(&cap), Arc::clone(&done));
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    if let Ok(mut c) = cap2.lock() {
                        c.push(&buf[..n]);
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        done2.store(true, Ordering::SeqCst);
        let _ = eof_tx.send(());
    });
    let deadline = start + timeout;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) => {}
            Err(e) => {
                // Never leave a submission running behind an error.
                cleanup(pid, true);
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        }
        if ABANDON.load(Ordering::SeqCst) {
            cleanup(pid, true);
            let _ = child.kill();
            let _ = child.wait();
            cleanup(pid, false);
            return Err(abandoned());
        }
        if Instant::now() >= deadline {
            timed_out = true;
            cleanup(pid, true);
            let _ = child.kill();
            break child.wait()?;
        }
        // Until the child exits, the deadline, or the next look at an interruption.
        let slice = deadline.saturating_duration_since(Instant::now()).min(Duration::from_millis(50));
        if let Err(RecvTimeoutError::Disconnected) = exited.recv_timeout(slice) {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let wall = start.elapsed();
    let survivors = cleanup(pid, false);
    let drain_deadline = Instant::now() + Duration::from_secs(1);
    let all_done = || done.load(Ordering::SeqCst) && collect.as_ref().is_none_or(|(_, d)| d.load(Ordering::SeqCst));
    while !all_done() {
        let left = drain_deadline.saturating_duration_since(Instant::now());
        if left.is_zero() || matches!(eof.recv_timeout(left), Err(RecvTimeoutError::Disconnected)) {
            break;
        }
    }
    let output_complete = all_done();
    let collected = collect.map(|(kept, _)| match kept.lock() {
        Ok(k) => k.clone(),
        Err(poisoned) => poisoned.into_inner().clone(),
    });
    let output = match cap.lock() {
        Ok(c) => c.finish(),
        Err(poisoned) => poisoned.into_inner().finish(),
    };
    Ok(Watched { status, timed_out, wall, output, output_complete, survivors, collected })
}

/// Runs a short helper command (probes, nvidia-smi) with a deadline; returns (status,
/// merged output text, timed_out).
pub fn run_probe(mut cmd: Command, timeout: Duration, killer: &Killer) -> std::io::Result<(ExitStatus, String, bool)> {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
    let cleanup = |pid: u32, alive: bool| {
        let target = ReapTarget { group: Some(pid), tree_root: alive.then_some(pid), ..ReapTarget::default() };
        target.reap(killer, Duration::from_millis(500))
    };
    let w = run_watched(cmd, timeout, OutputCapture::new(1 << 20, 1 << 16), None, &cleanup)?;
    Ok((w.status, w.output.log_text(), w.timed_out))
}
