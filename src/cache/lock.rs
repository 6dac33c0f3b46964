//! Per-key advisory locks so two evalgrid processes never compute the same
//! step at once.
//!
//! Uses OS file locks (`flock` on Unix through `std::fs::File::lock`), which
//! the kernel releases when the holder dies, even by `kill -9`; lock files
//! left behind are harmless and removed by `cache gc`.

use std::fs::{File, OpenOptions, TryLockError};
use std::path::{Path, PathBuf};

/// A held lock on one key; released on drop.
#[derive(Debug)]
pub struct KeyLock {
    file: File,
    path: PathBuf,
    /// Whether the lock file is removed on release (one-off claims, which would otherwise
    /// leave a file per model call behind).
    remove: bool,
}

impl KeyLock {
    /// Takes the lock if nobody holds it; `Ok(None)` when another process does.
    pub fn try_acquire(path: &Path) -> std::io::Result<Option<Self>> {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Self { file, path: path.to_owned(), remove: false })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// Waits until the lock is free, then takes it (blocking call).
    pub fn acquire(path: &Path) -> std::io::Result<Self> {
        let file = open(path)?;
        file.lock()?;
        Ok(Self { file, path: path.to_owned(), remove: false })
    }

    /// Like [`try_acquire`](Self::try_acquire), but the lock file is removed on release.
    /// The holder removes the file before unlocking, so a waiter can end up locking a removed
    /// file: taking the lock counts only when the path still names the locked file.
    pub fn try_acquire_removable(path: &Path) -> std::io::Result<Option<Self>> {
        use std::os::unix::fs::MetadataExt;
        loop {
            let file = open(path)?;
            match file.try_lock() {
                Ok(()) => {}
                Err(TryLockError::WouldBlock) => return Ok(None),
                Err(TryLockError::Error(e)) => return Err(e),
            }
            let held = file.metadata()?;
            match std::fs::metadata(path) {
                Ok(named) if (named.dev(), named.ino()) == (held.dev(), held.ino()) => {
                    return Ok(Some(Self { file, path: path.to_owned(), remove: true }));
                }
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Lock file path (for diagnostics).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for KeyLock {
    fn drop(&mut self) {
        // Removed while still held, so nobody can take a lock on a file about to vanish.
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
        // Unlocking can only fail if the descriptor is already gone; the
        // kernel drops the lock with the descriptor in that case anyway.
        let _ = self.file.unlock();
    }
}

fn open(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().create(true).truncate(false).write(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_removable_lock_is_exclusive_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.lock");
        let a = KeyLock::try_acquire_removable(&p).unwrap().expect("first claim");
        assert!(KeyLock::try_acquire_removable(&p).unwrap().is_none());
        // A waiter that opened the file before the holder removed it must not hold a lock on
        // the removed file: its next try gets the file the path names.
        let stale = open(&p).unwrap();
        drop(a);
        assert!(!p.exists(), "the lock file is removed on release");
        assert!(stale.try_lock().is_ok(), "the removed file is free");
        let b = KeyLock::try_acquire_removable(&p).unwrap().expect("claim after release");
        assert!(KeyLock::try_acquire_removable(&p).unwrap().is_none());
        drop(b);
    }

    #[test]
    fn second_holder_is_refused_until_release() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.lock");
        let a = KeyLock::try_acquire(&p).unwrap().expect("first lock");
        assert!(KeyLock::try_acquire(&p).unwrap().is_none());
        drop(a);
        assert!(KeyLock::try_acquire(&p).unwrap().is_some());
    }
}
