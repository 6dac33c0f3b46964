//! The Linux calls: one `syncfs(2)` per batch, `PR_SET_DUMPABLE`, and `statfs` magic numbers.
//! Public so that the fallback in [`super::portable`] can be forced and compared on Linux.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// The durability path's name, for benchmark output.
pub const DURABILITY: &str = "syncfs";

/// `syncfs` covers the whole filesystem: a batch need not name its files.
pub const TRACKS_FILES: bool = false;

/// `statfs` magic numbers of local filesystems, where a cache file operation is a few
/// microseconds: ext2/3/4, XFS, Btrfs, tmpfs, overlayfs, ZFS, F2FS, ramfs. NFS, Lustre,
/// GPFS, BeeGFS, CephFS, SMB and FUSE are not in it: there one operation is a round trip.
const LOCAL_FILESYSTEMS: [u64; 8] = [0xEF53, 0x5846_5342, 0x9123_683E, 0x0102_1994, 0x794C_7630, 0x2FC1_2FC1, 0xF2F5_2010, 0x8584_58F6];

/// One `syncfs(2)` of the filesystem holding the cache: a single journal commit for the
/// whole batch, where per-file `fsync` costs one each.
pub fn sync_batch(root_handle: &File, _root: &Path, _files: &[PathBuf]) -> io::Result<()> {
    rustix::fs::syncfs(root_handle).map_err(io::Error::from)
}

/// One `syncfs(2)` of the filesystem holding `path`: everything written there is on disk.
pub fn sync_filesystem_of(path: &Path) -> io::Result<()> {
    rustix::fs::syncfs(File::open(path)?).map_err(io::Error::from)
}

/// Non-dumpable: other processes of our uid (model code run unsandboxed, or anything else)
/// cannot read /proc/<pid>/environ (the API keys) nor ptrace us.
pub fn protect_secrets() {
    let _ = rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable);
}

/// `PR_SET_PDEATHSIG`: the kernel sends this process SIGTERM when the thread that started
/// it ends (evalgrid's main thread, so: when evalgrid ends, even by `kill -9`).
pub fn terminate_with_parent() {
    let _ = rustix::process::set_parent_process_death_signal(Some(rustix::process::Signal::TERM));
}

/// Whether `path` is on a filesystem whose `statfs` magic number is in [`LOCAL_FILESYSTEMS`].
pub fn is_local_filesystem(path: &Path) -> bool {
    #[expect(clippy::cast_sign_loss, reason = "a magic number: its bits, not its value")]
    rustix::fs::statfs(path).is_ok_and(|fs| is_local_magic(fs.f_type as u64))
}

/// Whether `magic` (a `statfs` `f_type`, possibly sign-extended) names a local filesystem.
fn is_local_magic(magic: u64) -> bool {
    LOCAL_FILESYSTEMS.contains(&(magic & 0xFFFF_FFFF))
}

/// Reserves `len` bytes of `file` with `fallocate` (the blocks are allocated, nothing is
/// written); zeros where the filesystem cannot (`EOPNOTSUPP`, e.g. some network filesystems).
pub fn reserve(file: &File, len: u64) -> io::Result<()> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => super::portable::reserve(file, len),
        Err(e) => Err(e.into()),
    }
}

/// nice 19 for the calling thread alone: on Linux `setpriority(PRIO_PROCESS, 0)` is per thread.
pub fn lowest_thread_priority() -> io::Result<()> {
    rustix::process::setpriority_process(None, 19).map_err(io::Error::from)
}

/// The calling thread's nice value.
pub fn thread_priority() -> io::Result<i32> {
    rustix::process::getpriority_process(None).map_err(io::Error::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_local_disk_filesystems_take_cache_io_inline() {
        for local in [0xEF53_u64, 0x0102_1994, 0x9123_683E, 0xFFFF_FFFF_9123_683E] {
            assert!(is_local_magic(local), "{local:#x}");
        }
        // NFS, Lustre, GPFS, FUSE, CephFS, SMB2.
        for network in [0x6969_u64, 0x0BD0_0BD0, 0x4750_4653, 0x6573_5546, 0x00C3_6400, 0xFE53_4D42] {
            assert!(!is_local_magic(network), "{network:#x}");
        }
    }
}
