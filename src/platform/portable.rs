//! The portable fallbacks (macOS, and Linux with the `portable-platform` feature): `fsync` of
//! exactly a batch's files and their directories (then one `F_FULLFSYNC` on macOS, where
//! `fsync` stops at the drive's cache), no core dumps, and local filesystems named by
//! `f_fstypename`.
//! Compiled on Linux too, so its tests run in every build.

use std::collections::BTreeSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The durability path's name, for benchmark output.
pub const DURABILITY: &str = "fsync";

/// A batch syncs exactly the files it names.
pub const TRACKS_FILES: bool = true;

/// What one batch synced: how many files and directories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Synced {
    /// Files synced (a file removed since it was written is skipped: nothing to keep).
    pub files: usize,
    /// Distinct directories synced: each file's parent and every one above it up to `root`.
    pub dirs: usize,
}

/// Syncs each of `files`, then each directory holding one of them, up to and including
/// `root`: the file's bytes first, then the names (renames, new shard folders) that lead to
/// it; on macOS one `F_FULLFSYNC` then flushes the drive's cache for the whole batch (one per
/// file would flush it once per file). A crash before this returns loses or tears only files
/// of this batch, which every reader checks by checksum and treats as a miss.
pub fn sync_batch(root_handle: &File, root: &Path, files: &[PathBuf]) -> io::Result<()> {
    sync_files(root, files)?;
    flush_drive_cache(root_handle)
}

/// [`sync_batch`], saying how much it synced (for tests).
pub fn sync_files(root: &Path, files: &[PathBuf]) -> io::Result<Synced> {
    let mut dirs = BTreeSet::new();
    let mut synced = Synced::default();
    for file in files {
        if sync_path(file)? {
            synced.files += 1;
        }
        for dir in file.ancestors().skip(1) {
            if !dir.starts_with(root) || !dirs.insert(dir) {
                break;
            }
        }
    }
    // Deepest first: a new shard folder's own entry is synced after what is in it.
    for dir in dirs.iter().rev() {
        if sync_path(dir)? {
            synced.dirs += 1;
        }
    }
    Ok(synced)
}

/// Syncs the file or directory at `path`; `false` when it is gone (removed, or its folder
/// replaced by a file: `cache gc` or damage repair, where nothing is left to keep).
fn sync_path(path: &Path) -> io::Result<bool> {
    match File::open(path) {
        Ok(handle) => rustix::fs::fsync(&handle).map(|()| true).map_err(io::Error::from),
        Err(e) if matches!(e.kind(), io::ErrorKind::NotFound | io::ErrorKind::NotADirectory) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `F_FULLFSYNC` on macOS: what `fsync` handed to the drive leaves its volatile cache for the
/// medium. Where the filesystem refuses it (network volumes), the `fsync`s already done are
/// all there is.
#[cfg(target_vendor = "apple")]
fn flush_drive_cache(handle: &File) -> io::Result<()> {
    rustix::fs::fcntl_fullfsync(handle).or_else(|_| rustix::fs::fsync(handle)).map_err(io::Error::from)
}

/// Elsewhere `fsync(2)` already reaches the medium (Linux sends the flush with it).
#[cfg(not(target_vendor = "apple"))]
fn flush_drive_cache(_handle: &File) -> io::Result<()> {
    Ok(())
}

/// Syncs the directory `path` itself (its entries, including removals in it).
pub fn sync_filesystem_of(path: &Path) -> io::Result<()> {
    let handle = File::open(path)?;
    rustix::fs::fsync(&handle).map_err(io::Error::from)?;
    flush_drive_cache(&handle)
}

/// No core dumps, so the API keys never land in a core file. Without `PR_SET_DUMPABLE` there
/// is no unprivileged, `unsafe`-free way to hide the environment from the same user: macOS's
/// `PT_DENY_ATTACH` is `ptrace(2)`, which rustix does not offer (and `libc` would need
/// `unsafe`), so on macOS a same-user process can still read our environment (`ps -E`).
pub fn protect_secrets() {
    let old = rustix::process::getrlimit(rustix::process::Resource::Core);
    let _ = rustix::process::setrlimit(rustix::process::Resource::Core, rustix::process::Rlimit { current: Some(0), maximum: old.maximum });
}

/// Local filesystems by `statfs`'s `f_fstypename` on macOS: APFS and HFS+.
#[cfg(target_vendor = "apple")]
pub fn is_local_filesystem(path: &Path) -> bool {
    rustix::fs::statfs(path).is_ok_and(|fs| is_local_type_name(&fs.f_fstypename.map(|c| u8::from_ne_bytes(c.to_ne_bytes()))))
}

/// Unknown here (Linux with the portable path forced, other systems): the safe path.
#[cfg(not(target_vendor = "apple"))]
pub fn is_local_filesystem(_path: &Path) -> bool {
    false
}

/// Whether a NUL-padded `f_fstypename` names a local disk filesystem (APFS, HFS+); SMB, NFS,
/// WebDAV, FUSE (macFUSE) and anything unknown are not.
pub fn is_local_type_name(name: &[u8]) -> bool {
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    matches!(&name[..end], b"apfs" | b"hfs")
}

/// No parent-death signal outside Linux: the server guard notices a new parent id instead
/// (it polls, so it stops the server within a fraction of a second).
pub fn terminate_with_parent() {}

/// Reserves `len` bytes of `file` by writing zeros (what every filesystem understands).
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    use std::io::Write as _;
    let zeros = vec![0u8; 1024 * 1024];
    let (mut left, mut writer) = (len, file);
    while left > 0 {
        let n = usize::try_from(left.min(zeros.len() as u64)).unwrap_or(zeros.len());
        writer.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}
