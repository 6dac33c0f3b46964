//! A small memo of file hashes beside the cache (`v1/memo/<hash of path>.json`), so a big
//! weights file that did not change is not read again on every command: an entry is reused
//! only while the file's path, size and modification time are those it was hashed at.
//!
//! It is a convenience, never a source of answers: a missing, unreadable or mismatched
//! entry just means hashing the file again, and a replaced file (new size or mtime) is
//! always re-hashed.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

/// Why a file could not be hashed.
#[derive(Debug, thiserror::Error)]
#[error("cannot read `{path}`")]
pub struct MemoError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    #[source]
    pub source: std::io::Error,
}

/// What is remembered about one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Remembered {
    path: String,
    size: u64,
    mtime_ns: u128,
    blake3: String,
}

/// File hashes remembered under a cache directory.
#[derive(Debug, Clone)]
pub struct HashMemo {
    dir: PathBuf,
}

impl HashMemo {
    /// The memo of the cache at `cache_dir` (created on first write).
    #[must_use]
    pub fn new(cache_dir: &Path) -> Self {
        Self { dir: cache_dir.join("v1").join("memo") }
    }

    /// The blake3 of the file at `path` (hex), from the memo when its size and mtime are
    /// unchanged, else read and hashed (and remembered); the bool says whether it was read.
    ///
    /// # Errors
    /// The file cannot be read.
    pub fn file_hash(&self, path: &Path) -> Result<(String, bool), MemoError> {
        let fail = |source| MemoError { path: path.to_owned(), source };
        let meta = std::fs::metadata(path).map_err(fail)?;
        let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        let shown = path.display().to_string();
        let slot = self.dir.join(format!("{}.json", blake3::hash(shown.as_bytes()).to_hex()));
        if let Some(known) = std::fs::read(&slot).ok().and_then(|b| serde_json::from_slice::<Remembered>(&b).ok())
            && known.path == shown
            && known.size == meta.len()
            && known.mtime_ns == mtime_ns
            && mtime_ns != 0
        {
            return Ok((known.blake3, false));
        }
        let blake3 = hash_file(path).map_err(fail)?;
        let record = Remembered { path: shown, size: meta.len(), mtime_ns, blake3: blake3.clone() };
        // Best effort: a memo that cannot be written costs a re-hash next time, nothing else.
        let _ = self.remember(&slot, &record);
        Ok((blake3, true))
    }

    fn remember(&self, slot: &Path, record: &Remembered) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
        std::io::Write::write_all(&mut tmp, &serde_json::to_vec(record).unwrap_or_default())?;
        tmp.persist(slot).map_err(|e| e.error)?;
        Ok(())
    }
}

/// blake3 of a file's bytes (hex), read in 1 MiB pieces.
///
/// # Errors
/// The file cannot be read.
pub fn hash_file(path: &Path) -> std::io::Result<String> {
    let mut file = std::fs::File::open(path)?;
    let mut hasher = blake3::Hasher::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        match file.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                hasher.update(&buf[..n]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(hasher.finalize().to_hex().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_file_is_not_read_again_and_a_replaced_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.gguf");
        std::fs::write(&file, b"weights one").unwrap();
        let memo = HashMemo::new(&dir.path().join("cache"));
        let (first, read) = memo.file_hash(&file).unwrap();
        assert!(read);
        assert_eq!(first, blake3::hash(b"weights one").to_hex().to_string());
        assert_eq!(memo.file_hash(&file).unwrap(), (first.clone(), false));
        std::fs::write(&file, b"weights two!").unwrap();
        let (second, read) = memo.file_hash(&file).unwrap();
        assert!(read, "a new size is read again");
        assert_ne!(second, first);
        assert!(memo.file_hash(&dir.path().join("missing")).is_err());
    }
}
