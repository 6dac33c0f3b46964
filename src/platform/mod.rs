//! Every operating-system-specific call of evalgrid, each with a portable fallback, so that
//! evalgrid builds on macOS and the fallbacks can be tested on Linux (issue 26).
//!
//! [`linux`] holds the Linux-only calls (`syncfs`, `PR_SET_DUMPABLE`, `statfs` magic numbers);
//! [`portable`] the fallbacks (`fsync` of a batch's files and directories, `F_FULLFSYNC` on
//! macOS; no core dumps; `f_fstypename` on macOS). Linux uses [`linux`] unless the
//! `portable-platform` feature (set only by tests and CI) forces [`portable`]; every other OS
//! uses [`portable`]. Nothing outside this module calls `rustix` or `libc` (a test enforces it).

#[cfg(target_os = "linux")]
pub mod linux;
pub mod portable;

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

#[cfg(all(target_os = "linux", not(feature = "portable-platform")))]
use linux as active;
#[cfg(not(all(target_os = "linux", not(feature = "portable-platform"))))]
use portable as active;

/// The name of the durability path in use (`syncfs` or `fsync`), for benchmark output.
pub const DURABILITY: &str = active::DURABILITY;

/// Whether a group commit must name the files of a batch: the portable path syncs exactly
/// those; `syncfs` syncs the whole filesystem, so on Linux nothing is tracked.
pub const TRACKS_FILES: bool = active::TRACKS_FILES;

/// Makes the files written since the last batch survive a machine crash: one `syncfs` of the
/// filesystem holding `root` (an open handle of the cache root), or an `fsync` of each file in
/// `files` and of each directory between them and `root`.
pub fn sync_batch(root_handle: &File, root: &Path, files: &[PathBuf]) -> io::Result<()> {
    active::sync_batch(root_handle, root, files)
}

/// Makes everything written under the directory `path` (including removals in it) durable.
pub fn sync_filesystem_of(path: &Path) -> io::Result<()> {
    active::sync_filesystem_of(path)
}

/// Protects the API keys in this process's memory and environment from other processes of
/// the same user as far as the OS allows: non-dumpable on Linux (no `/proc/<pid>/environ`,
/// no ptrace), no core dumps elsewhere. Best effort: a failure leaves the process as it was.
pub fn protect_secrets() {
    active::protect_secrets();
}

/// Whether the directory `path` is on a local disk filesystem, where a cache file operation
/// takes microseconds; `false` (the safe path: cache I/O on blocking threads) when unknown.
#[must_use]
pub fn is_local_filesystem(path: &Path) -> bool {
    active::is_local_filesystem(path)
}

/// Whether process `pid` exists: a POSIX signal-0 probe (a process of another user exists
/// too), the same on every Unix. Used to tell a killed run's scratch folders from a live one's.
#[must_use]
pub fn process_exists(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) else { return true };
    !matches!(rustix::process::test_kill_process(pid), Err(rustix::io::Errno::SRCH))
}

/// Gives `file` `len` bytes of disk that later writes inside it cannot fail to find (the
/// answer journal): Linux `fallocate` (no data written), else zeros written out.
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    active::reserve(file, len)
}

/// Bytes an unprivileged process may still write on the filesystem holding `path`
/// (POSIX `statvfs`, the same on every Unix); `None` when it cannot be asked.
#[must_use]
pub fn free_bytes(path: &Path) -> Option<u64> {
    rustix::fs::statvfs(path).ok().map(|s| s.f_bavail.saturating_mul(s.f_frsize))
}

/// Asks the OS to send this process SIGTERM when its parent ends (Linux `PR_SET_PDEATHSIG`;
/// nothing elsewhere): how a server evalgrid started dies with evalgrid, even after `kill -9`.
pub fn terminate_with_parent() {
    active::terminate_with_parent();
}

/// This process's hard limit of the rlimit `name` (`RLIMIT_CPU`, `RLIMIT_AS`, …): a child
/// cannot be given more. `None` when unlimited or not a limit asked about here.
#[must_use]
pub fn hard_rlimit(name: &str) -> Option<u64> {
    use rustix::process::Resource;
    let resource = match name {
        "RLIMIT_CPU" => Resource::Cpu,
        "RLIMIT_CORE" => Resource::Core,
        "RLIMIT_AS" => Resource::As,
        "RLIMIT_NPROC" => Resource::Nproc,
        "RLIMIT_FSIZE" => Resource::Fsize,
        "RLIMIT_NOFILE" => Resource::Nofile,
        _ => return None,
    };
    rustix::process::getrlimit(resource).maximum
}

/// Blocks until the child `pid` of this process has exited, leaving it to be reaped by its
/// `Child` (POSIX `waitid` with `WNOWAIT`): a run's end is seen at once, not at the next poll.
/// An error (not our child, already reaped) returns at once.
pub fn wait_for_exit(pid: u32) -> io::Result<()> {
    use rustix::process::{Pid, WaitId, WaitIdOptions, waitid};
    let pid = i32::try_from(pid).ok().and_then(Pid::from_raw).ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
    waitid(WaitId::Pid(pid), WaitIdOptions::EXITED | WaitIdOptions::NOWAIT).map(drop).map_err(io::Error::from)
}

/// This process's parent id: a guard whose parent changed has lost evalgrid.
#[must_use]
pub fn parent_pid() -> u32 {
    rustix::process::getppid().map_or(1, |p| p.as_raw_nonzero().get().unsigned_abs())
}

/// Sends SIGTERM (or SIGKILL with `kill`) to every process of group `pgid`; errors (no such
/// group any more) are ignored. Group 0 and 1 are never signalled.
pub fn signal_group(pgid: u32, kill: bool) {
    let Some(pid) = i32::try_from(pgid).ok().filter(|&p| p > 1).and_then(rustix::process::Pid::from_raw) else { return };
    let signal = if kill { rustix::process::Signal::KILL } else { rustix::process::Signal::TERM };
    let _ = rustix::process::kill_process_group(pid, signal);
}

/// Sends SIGTERM (or SIGKILL with `kill`) to process `pid`; errors are ignored.
pub fn signal_process(pid: u32, kill: bool) {
    let Some(pid) = i32::try_from(pid).ok().filter(|&p| p > 1).and_then(rustix::process::Pid::from_raw) else { return };
    let signal = if kill { rustix::process::Signal::KILL } else { rustix::process::Signal::TERM };
    let _ = rustix::process::kill_process(pid, signal);
}

#[cfg(test)]
mod tests;

/// Gives the calling thread the lowest CPU priority (nice 19), so work it does (report pages
/// during a run) takes only CPU the rest leaves idle; `false` where that cannot be done for
/// one thread alone (outside Linux a nice value is the whole process's), and nothing changed.
pub fn lowest_thread_priority() -> bool {
    #[cfg(target_os = "linux")]
    return linux::lowest_thread_priority().is_ok();
    #[cfg(not(target_os = "linux"))]
    false
}

/// Makes `options` open without blocking (`O_NONBLOCK`), so a FIFO swapped in for a data file
/// after its check cannot hang the open; a no-op where the flag does not exist.
pub fn open_nonblocking(options: &mut std::fs::OpenOptions) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed());
    }
    #[cfg(not(unix))]
    let _ = options;
}

/// Makes a FIFO at `path` (tests of readers that must refuse one).
///
/// # Errors
/// The FIFO cannot be made.
#[cfg(unix)]
pub fn make_fifo(path: &Path) -> io::Result<()> {
    rustix::fs::mknodat(rustix::fs::CWD, path, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o600), 0).map_err(io::Error::from)
}
