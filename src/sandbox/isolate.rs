//! Building blocks of the sandbox: the embedded launcher and its JSON plan, bubblewrap
//! arguments, per-run unprivileged uids, the data copy, hostile-proof reading of the
//! predictions file, and limit-hit inference.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::Read;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::process::list_processes;
use super::provenance::PythonInfo;
use super::{ExitInfo, LimitKind, Predictions};

/// The launcher run as `python -I -S -c LAUNCHER <json>` right before the submission.
pub(super) const LAUNCHER: &str = include_str!("py/launcher.py");

/// Where things live inside the bubblewrap sandbox.
pub(super) const SANDBOX_WORK: &str = "/workspace";
pub(super) const SANDBOX_CODE: &str = "/code";

/// What the launcher does before `execve`.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct LaunchPlan {
    /// Leave the caller's session (rlimits-only; bwrap has `--new-session`).
    pub(super) setsid: bool,
    /// `(RLIMIT_NAME, soft, hard)`, -1 = infinity.
    pub(super) rlimits: Vec<(String, i64, i64)>,
    /// Set PR_SET_NO_NEW_PRIVS (setuid binaries cannot regain privileges).
    pub(super) no_new_privs: bool,
    /// Empty the capability bounding set before exec (rlimits-only: root keeps no caps).
    pub(super) clear_bounding_set: bool,
    /// Drop to this uid (= gid) when running as root.
    pub(super) drop: Option<DropTo>,
    /// Program and arguments.
    pub(super) argv: Vec<String>,
    /// Complete environment of the program.
    pub(super) env: BTreeMap<String, String>,
    /// Fork, wait, and hand this file back over stderr (bubblewrap's tmpfs workspace).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) collect: Option<Collect>,
}

/// A result file the launcher reads after the command exits and writes to its stderr.
#[derive(Debug, Clone, serde::Serialize)]
pub(super) struct Collect {
    /// Path relative to `/workspace`.
    pub(super) path: String,
    /// Largest file handed back.
    pub(super) cap: u64,
}

/// First bytes of the launcher's collect channel: `EVALGRID-COLLECT <kind> <reason>\n`.
pub(super) const COLLECT_HEADER: &[u8] = b"EVALGRID-COLLECT ";

/// Splits the collect channel into (text that is not ours, e.g. bwrap's own errors, and the
/// result file `rel` as the supervisor found it); `Missing` when no header came (killed,
/// timed out); `Invalid` when more than `cap` bytes came (the shell hands back cap + 1).
pub(super) fn parse_collected(bytes: &[u8], rel: &str, cap: u64) -> (Vec<u8>, Predictions) {
    let at = (0..bytes.len()).find(|&i| (i == 0 || bytes[i - 1] == b'\n') && bytes[i..].starts_with(COLLECT_HEADER));
    let Some(at) = at else {
        return (bytes.to_vec(), Predictions::Missing);
    };
    let rest = &bytes[at + COLLECT_HEADER.len()..];
    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
        return (bytes[..at].to_vec(), Predictions::Invalid("result cut short".into()));
    };
    let line = String::from_utf8_lossy(&rest[..nl]);
    let (kind, reason) = line.split_once(' ').unwrap_or((&line, ""));
    let body = &rest[nl + 1..];
    let found = match kind {
        "present" if body.len() as u64 > cap => Predictions::Invalid(format!("{rel} is larger than {cap} bytes")),
        "present" => Predictions::Present(body.to_vec()),
        "missing" => Predictions::Missing,
        _ => Predictions::Invalid(reason.to_string()),
    };
    (bytes[..at].to_vec(), found)
}

/// Target ids of a privilege drop.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub(super) struct DropTo {
    pub(super) uid: u32,
    pub(super) gid: u32,
}

impl LaunchPlan {
    /// The `-I -S -c LAUNCHER json` tail for `python`.
    pub(super) fn command_tail(&self, python: &str) -> Vec<String> {
        let json = serde_json::to_string(self).unwrap_or_default();
        vec![python.into(), "-I".into(), "-S".into(), "-c".into(), LAUNCHER.into(), json]
    }
}

static NEXT_UID: AtomicU32 = AtomicU32::new(0);

/// A uid no live process uses, from a per-evalgrid-process block above `base`, so that
/// RLIMIT_NPROC is counted per submission and the reaper can kill by uid.
pub(super) fn allocate_uid(base: u32) -> u32 {
    let block = (std::process::id() % 1024) * 4096;
    let procs = list_processes();
    let mut uid = base;
    for _ in 0..4096 {
        let n = NEXT_UID.fetch_add(1, Ordering::Relaxed) % 4096;
        uid = base.saturating_add(block + n);
        if !procs.iter().any(|p| p.uids.contains(&uid)) {
            break;
        }
    }
    uid
}

static NEXT_CHILD_UID: AtomicU32 = AtomicU32::new(0);

/// A uid for one child of a zygote: from a per-evalgrid-process block above those of
/// [`allocate_uid`], cycling through 4,096 (no scan of /proc: a child lives for one task
/// and dies with its zygote's pid namespace).
pub(super) fn child_uid(base: u32) -> u32 {
    let block = (1024 + std::process::id() % 1024) * 4096;
    base.saturating_add(block + NEXT_CHILD_UID.fetch_add(1, Ordering::Relaxed) % 4096)
}

/// Directories the interpreter needs (prefixes, `sys.path`), minimal and outside `/usr`.
pub(super) fn python_bind_paths(py: &PythonInfo) -> Vec<PathBuf> {
    let mut cands: Vec<PathBuf> = [&py.prefix, &py.base_prefix, &py.exec_prefix]
        .into_iter()
        .chain(py.paths.iter())
        .chain(py.user_site.iter())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute() && p.is_dir())
        .collect();
    for exe in [&py.executable, &py.real_executable] {
        if let Some(dir) = Path::new(exe).parent() {
            cands.push(dir.to_path_buf());
        }
    }
    let mut all = Vec::new();
    for p in cands {
        if let Ok(c) = p.canonicalize()
            && c != p
        {
            all.push(c);
        }
        all.push(p);
    }
    all.sort();
    all.dedup();
    let mut out: Vec<PathBuf> = Vec::new();
    for p in all {
        if p.starts_with("/usr") || p == Path::new("/") || out.iter().any(|q| p.starts_with(q)) {
            continue;
        }
        out.push(p);
    }
    out
}

/// Inputs of [`bwrap_args`].
pub(super) struct BwrapLayout<'a> {
    pub(super) python: &'a PythonInfo,
    pub(super) code_dir: &'a Path,
    /// Host directory bound writable at `/workspace`; `None` = a `workspace_bytes` tmpfs there.
    pub(super) work_dir: Option<&'a Path>,
    /// Size of the `/workspace` tmpfs.
    pub(super) workspace_bytes: u64,
    /// Directories (relative) made writable inside a tmpfs `/workspace`.
    pub(super) workspace_dirs: &'a [String],
    /// Host directory bound read-only at `/workspace/data`, if any.
    pub(super) data_dir: Option<&'a Path>,
    pub(super) tmpfs_bytes: u64,
    pub(super) gpu: bool,
    /// Caller is not root: bwrap needs its own user namespace.
    pub(super) unprivileged: bool,
    /// Keep CAP_SETUID/CAP_SETGID (all others dropped) for the launcher's privilege drop.
    pub(super) drop: bool,
    /// Also keep CAP_KILL (a zygote that kills its children, which run as other uids).
    pub(super) kill: bool,
    pub(super) marker: (&'a str, &'a str),
    /// The command's whole environment, set by bubblewrap (the shell supervisor passes its
    /// own on); `None` = the marker only (the launcher sets the command's).
    pub(super) env: Option<&'a BTreeMap<String, String>>,
}

fn push(args: &mut Vec<OsString>, items: &[&str]) {
    args.extend(items.iter().map(OsString::from));
}

fn push_bind(args: &mut Vec<OsString>, flag: &str, src: &Path, dst: &Path) {
    args.push(flag.into());
    args.push(src.into());
    args.push(dst.into());
}

/// bubblewrap arguments up to (not including) the command: fresh pid/net/ipc/uts
/// namespaces, read-only system and interpreter directories, private /proc, /dev and a
/// size-capped /tmp, writable `/workspace` only, read-only `/workspace/data` and `/code`.
pub(super) fn bwrap_args(l: &BwrapLayout<'_>) -> Vec<OsString> {
    let mut a: Vec<OsString> = Vec::new();
    push(&mut a, &["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]);
    if l.unprivileged {
        push(&mut a, &["--unshare-user"]);
    }
    push(&mut a, &["--die-with-parent", "--new-session", "--hostname", "evalgrid-sandbox"]);
    push_bind(&mut a, "--ro-bind", Path::new("/usr"), Path::new("/usr"));
    for d in ["/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"] {
        let p = Path::new(d);
        match std::fs::symlink_metadata(p) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(p) {
                    push_bind(&mut a, "--symlink", &target, p);
                }
            }
            Ok(m) if m.is_dir() => push_bind(&mut a, "--ro-bind", p, p),
            _ => {}
        }
    }
    let mut etc: Vec<String> = ["alternatives", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime", "passwd", "group", "nsswitch.conf", "hosts"]
        .iter()
        .map(|s| format!("/etc/{s}"))
        .collect();
    if let Ok(rd) = std::fs::read_dir("/etc") {
        etc.extend(rd.filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            name.starts_with("python").then(|| format!("/etc/{name}"))
        }));
    }
    for e in etc {
        push_bind(&mut a, "--ro-bind-try", Path::new(&e), Path::new(&e));
    }
    let mut made: Vec<PathBuf> = Vec::new();
    for p in python_bind_paths(l.python) {
        let mut ancestors: Vec<&Path> = p.ancestors().skip(1).filter(|x| x.parent().is_some()).collect();
        ancestors.reverse();
        for anc in ancestors {
            if !made.iter().any(|m| m == anc) {
                push(&mut a, &["--perms", "0755", "--dir"]);
                a.push(anc.into());
                made.push(anc.to_path_buf());
            }
        }
        push_bind(&mut a, "--ro-bind", &p, &p);
    }
    push(&mut a, &["--proc", "/proc", "--dev", "/dev", "--perms", "1777", "--size"]);
    a.push(l.tmpfs_bytes.max(1 << 20).to_string().into());
    push(&mut a, &["--tmpfs", "/tmp"]);
    if l.gpu {
        if let Ok(rd) = std::fs::read_dir("/dev") {
            let mut devs: Vec<PathBuf> = rd
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("nvidia")))
                .collect();
            devs.sort();
            for d in devs {
                push_bind(&mut a, "--dev-bind", &d, &d);
            }
        }
        push_bind(&mut a, "--ro-bind-try", Path::new("/sys"), Path::new("/sys"));
    }
    push_bind(&mut a, "--ro-bind", l.code_dir, Path::new(SANDBOX_CODE));
    match l.work_dir {
        Some(dir) => push_bind(&mut a, "--bind", dir, Path::new(SANDBOX_WORK)),
        None => {
            push(&mut a, &["--perms", "0777", "--size"]);
            a.push(l.workspace_bytes.max(1 << 20).to_string().into());
            push(&mut a, &["--tmpfs", SANDBOX_WORK]);
            for d in l.workspace_dirs {
                push(&mut a, &["--perms", "0777", "--dir"]);
                a.push(Path::new(SANDBOX_WORK).join(d).into());
            }
        }
    }
    if let Some(data) = l.data_dir {
        push_bind(&mut a, "--ro-bind", data, &Path::new(SANDBOX_WORK).join("data"));
    }
    push(&mut a, &["--chdir", SANDBOX_WORK, "--clearenv", "--setenv", l.marker.0, l.marker.1]);
    for (k, v) in l.env.into_iter().flatten() {
        push(&mut a, &["--setenv", k, v]);
    }
    if !l.unprivileged {
        // bwrap run by real root keeps every capability unless told otherwise.
        push(&mut a, &["--cap-drop", "ALL"]);
        if l.drop {
            push(&mut a, &["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]);
        }
        if l.kill {
            push(&mut a, &["--cap-add", "CAP_KILL"]);
        }
    }
    a.push("--".into());
    a
}

/// Copies a data directory (following symlinks) as dirs 0755 / files 0644 owned by us.
pub(super) fn copy_dir(src: &Path, dst: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dst)?;
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(0o755))?;
    for entry in std::fs::read_dir(src)? {
        let entry = entry?;
        let from = entry.path();
        let to = dst.join(entry.file_name());
        let meta = std::fs::metadata(&from)?;
        if meta.is_dir() {
            copy_dir(&from, &to)?;
        } else if meta.is_file() {
            std::fs::copy(&from, &to)?;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o644))?;
        }
    }
    Ok(())
}

/// Reads `work/rel` without following symlinks in any component, only as a regular file of
/// at most `cap` bytes; the submission is dead by now, so there is no race with it.
pub(super) fn read_predictions(work: &Path, rel: &str, cap: u64) -> Predictions {
    let mut path = work.to_path_buf();
    let comps: Vec<Component<'_>> = Path::new(rel).components().collect();
    for (i, c) in comps.iter().enumerate() {
        let Component::Normal(name) = c else {
            return Predictions::Invalid(format!("bad predictions path {rel:?}"));
        };
        path.push(name);
        let last = i + 1 == comps.len();
        match std::fs::symlink_metadata(&path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Predictions::Missing,
            Err(e) => return Predictions::Invalid(format!("cannot stat {rel}: {e}")),
            Ok(m) if m.file_type().is_symlink() => {
                return Predictions::Invalid(format!("{} is a symlink", path.strip_prefix(work).unwrap_or(&path).display()));
            }
            Ok(m) if last && !m.is_file() => {
                return Predictions::Invalid(format!("{rel} is not a regular file"));
            }
            Ok(m) if !last && !m.is_dir() => return Predictions::Missing,
            Ok(_) => {}
        }
    }
    let mut file = match std::fs::File::open(&path) {
        Ok(f) => f,
        Err(e) => return Predictions::Invalid(format!("cannot open {rel}: {e}")),
    };
    match file.metadata() {
        Ok(m) if !m.is_file() => {
            return Predictions::Invalid(format!("{rel} is not a regular file"));
        }
        Ok(m) if m.len() > cap => {
            return Predictions::Invalid(format!("{rel} is larger than {cap} bytes"));
        }
        Err(e) => return Predictions::Invalid(format!("cannot stat {rel}: {e}")),
        Ok(_) => {}
    }
    let mut bytes = Vec::new();
    match (&mut file).take(cap + 1).read_to_end(&mut bytes) {
        Ok(_) if bytes.len() as u64 > cap => Predictions::Invalid(format!("{rel} is larger than {cap} bytes")),
        Ok(_) => Predictions::Present(bytes),
        Err(e) => Predictions::Invalid(format!("cannot read {rel}: {e}")),
    }
}

const SIGXCPU: i32 = 24;
const SIGXFSZ: i32 = 25;

/// Which limit most likely ended the run: signals for CPU time / file size, Python's error
/// text for memory, file size and processes
/// (Python turns those failures into exceptions; a heuristic, documented as such).
pub(super) fn infer_limit(exit: &ExitInfo, timed_out: bool, tail: &str) -> Option<LimitKind> {
    if timed_out || exit.success() {
        return None;
    }
    match exit.signal {
        Some(SIGXCPU) => return Some(LimitKind::CpuTime),
        Some(SIGXFSZ) => return Some(LimitKind::FileSize),
        _ => {}
    }
    if tail.contains("MemoryError") || tail.contains("Cannot allocate memory") {
        Some(LimitKind::AddressSpace)
    } else if tail.contains("File too large") {
        Some(LimitKind::FileSize)
    } else if tail.contains("Resource temporarily unavailable") {
        Some(LimitKind::Processes)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_collected_t(bytes: &[u8]) -> (Vec<u8>, Predictions) {
        parse_collected(bytes, "results/p.txt", 8)
    }

    #[test]
    fn collect_channel_is_split_into_stray_text_and_the_result() {
        let (stray, p) = parse_collected_t(b"EVALGRID-COLLECT present \n0\n1\n");
        assert!(stray.is_empty());
        assert_eq!(p, Predictions::Present(b"0\n1\n".to_vec()));
        let (stray, p) = parse_collected_t(b"bwrap: warning\nEVALGRID-COLLECT invalid results/p.txt is a symlink\n");
        assert_eq!(stray, b"bwrap: warning\n");
        assert_eq!(p, Predictions::Invalid("results/p.txt is a symlink".into()));
        let (stray, p) = parse_collected_t(b"bwrap: Can't mount tmpfs\n");
        assert_eq!(stray, b"bwrap: Can't mount tmpfs\n");
        assert_eq!(p, Predictions::Missing);
        // A header not at a line start is not ours; a header without its newline was cut.
        assert_eq!(parse_collected_t(b"xEVALGRID-COLLECT present \nz").1, Predictions::Missing);
        assert!(matches!(parse_collected_t(b"EVALGRID-COLLECT present").1, Predictions::Invalid(_)));
        assert_eq!(parse_collected_t(b"EVALGRID-COLLECT missing \n").1, Predictions::Missing);
        // The shell hands back one byte over the cap: too large, whatever came.
        assert_eq!(parse_collected_t(b"EVALGRID-COLLECT present \n12345678").1, Predictions::Present(b"12345678".to_vec()));
        assert_eq!(parse_collected_t(b"EVALGRID-COLLECT present \n123456789").1, Predictions::Invalid("results/p.txt is larger than 8 bytes".into()));
    }
}
