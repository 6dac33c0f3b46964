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
}

impl KeyLock {
    /// Takes the lock if nobody holds it; `Ok(None)` when another process does.
    pub fn try_acquire(path: &Path) -> std::io::Result<Option<Self>> {
        let file = open(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Some(Self { file, path: path.to_owned() })),
            Err(TryLockError::WouldBlock) => Ok(None),
            Err(TryLockError::Error(e)) => Err(e),
        }
    }

    /// Waits until the lock is free, then takes it (blocking call).
    pub fn acquire(path: &Path) -> std::io::Result<Self> {
        let file = open(path)?;
        file.lock()?;
        Ok(Self { file, path: path.to_owned() })
    }

    /// Lock file path (for diagnostics).
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for KeyLock {
    fn drop(&mut self) {
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
    fn second_holder_is_refused_until_release() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("k.lock");
        let a = KeyLock::try_acquire(&p).unwrap().expect("first lock");
        assert!(KeyLock::try_acquire(&p).unwrap().is_none());
        drop(a);
        assert!(KeyLock::try_acquire(&p).unwrap().is_some());
    }
}
