//! A small memo of file hashes beside the cache (`v1/memo/<hash of path>.json`), so a big
//! weights file that did not change is not read again on every command: an entry is reused
//! only while the file's path, size, modification time, inode and status-change time
//! (ctime) are those it was hashed at.
//!
//! It is a convenience, never a source of answers: a missing, unreadable or mismatched
//! entry just means hashing the file again. A file replaced by a rename has a new inode, and
//! one rewritten in place a new ctime, even when its size and mtime were put back (ctime
//! cannot be set by a user), so both are re-hashed. `evalgrid cache verify --weights`
//! re-hashes every remembered file for the cases no metadata shows (a clock set back, a
//! file system without ctime).

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
    /// Inode and device (0 where the platform has none).
    inode: u64,
    device: u64,
    /// Status-change time (0 where the platform has none).
    ctime_ns: i128,
    blake3: String,
}

/// What identifies one version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    size: u64,
    mtime_ns: u128,
    inode: u64,
    device: u64,
    ctime_ns: i128,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        let mtime_ns = meta.modified().ok().and_then(|t| t.duration_since(UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
        #[cfg(unix)]
        let (inode, device, ctime_ns) = {
            use std::os::unix::fs::MetadataExt as _;
            (meta.ino(), meta.dev(), i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()))
        };
        #[cfg(not(unix))]
        let (inode, device, ctime_ns) = (0, 0, 0);
        Self { size: meta.len(), mtime_ns, inode, device, ctime_ns }
    }

    fn matches(&self, r: &Remembered) -> bool {
        self.mtime_ns != 0 && (r.size, r.mtime_ns, r.inode, r.device, r.ctime_ns) == (self.size, self.mtime_ns, self.inode, self.device, self.ctime_ns)
    }
}

/// One remembered file as `evalgrid cache verify --weights` found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Rehashed {
    /// The file.
    pub path: String,
    /// The hash remembered.
    pub remembered: String,
    /// The hash of its bytes now; `None` when it can no longer be read.
    pub now: Option<String>,
}

impl Rehashed {
    /// Whether the memo held another hash than the file's bytes.
    #[must_use]
    pub fn stale(&self) -> bool {
        self.now.as_ref().is_some_and(|n| *n != self.remembered)
    }
}

/// An engine's version as last probed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct EngineRecord {
    engine: String,
    version: String,
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
        let stamp = Stamp::of(&std::fs::metadata(path).map_err(fail)?);
        let shown = path.display().to_string();
        let slot = self.dir.join(format!("{}.json", blake3::hash(shown.as_bytes()).to_hex()));
        if let Some(known) = std::fs::read(&slot).ok().and_then(|b| serde_json::from_slice::<Remembered>(&b).ok())
            && known.path == shown
            && stamp.matches(&known)
        {
            return Ok((known.blake3, false));
        }
        let blake3 = hash_file(path).map_err(fail)?;
        self.store(&slot, shown, stamp, &blake3);
        Ok((blake3, true))
    }

    /// Reads and hashes again every file the memo remembers, and remembers what it finds:
    /// each with the hash remembered and the hash now (`None`: gone or unreadable, and
    /// forgotten).
    ///
    /// # Errors
    /// The memo's folder cannot be listed.
    pub fn rehash_all(&self) -> std::io::Result<Vec<Rehashed>> {
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let mut out = Vec::new();
        for entry in entries {
            let slot = entry?.path();
            // Only file hashes: the engine versions (`engine-*.json`) live beside them.
            if slot.extension().is_none_or(|e| e != "json") || slot.file_name().is_some_and(|n| n.to_string_lossy().starts_with("engine-")) {
                continue;
            }
            let Some(known) = std::fs::read(&slot).ok().and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok()) else {
                let _ = std::fs::remove_file(&slot);
                continue;
            };
            let text = |k: &str| known.get(k).and_then(serde_json::Value::as_str).unwrap_or_default().to_owned();
            let (path, remembered) = (text("path"), text("blake3"));
            let file = PathBuf::from(&path);
            // The stamp taken before reading: a change while hashing is seen next time.
            let now = std::fs::metadata(&file).ok().and_then(|meta| hash_file(&file).ok().map(|h| (Stamp::of(&meta), h)));
            match &now {
                Some((stamp, hash)) => self.store(&slot, path.clone(), *stamp, hash),
                None => {
                    let _ = std::fs::remove_file(&slot);
                }
            }
            out.push(Rehashed { path, remembered, now: now.map(|(_, h)| h) });
        }
        out.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(out)
    }

    /// Best effort: a memo that cannot be written costs a re-hash next time, nothing else.
    fn store(&self, slot: &Path, path: String, stamp: Stamp, blake3: &str) {
        let record = Remembered {
            path,
            size: stamp.size,
            mtime_ns: stamp.mtime_ns,
            inode: stamp.inode,
            device: stamp.device,
            ctime_ns: stamp.ctime_ns,
            blake3: blake3.to_owned(),
        };
        let _ = self.remember(slot, &record);
    }

    /// The version of `engine` (`llama.cpp`, `vllm`) last probed on this cache's runs, so
    /// commands that only read results (`status`, `report`, `show`, `diff`, `export`,
    /// `run --dry-run`) can key served models on a machine without the engine.
    #[must_use]
    pub fn engine_version(&self, engine: &str) -> Option<String> {
        let bytes = std::fs::read(self.engine_slot(engine)).ok()?;
        let record: EngineRecord = serde_json::from_slice(&bytes).ok()?;
        (record.engine == engine).then_some(record.version)
    }

    /// Records the version `engine` reported when probed (best effort).
    pub fn record_engine_version(&self, engine: &str, version: &str) {
        if self.engine_version(engine).as_deref() == Some(version) {
            return;
        }
        let record = EngineRecord { engine: engine.to_owned(), version: version.to_owned() };
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(&self.dir)?;
            let mut tmp = tempfile::NamedTempFile::new_in(&self.dir)?;
            std::io::Write::write_all(&mut tmp, &serde_json::to_vec(&record).unwrap_or_default())?;
            tmp.persist(self.engine_slot(engine)).map_err(|e| e.error)?;
            Ok(())
        };
        let _ = write();
    }

    fn engine_slot(&self, engine: &str) -> PathBuf {
        self.dir.join(format!("engine-{}.json", blake3::hash(engine.as_bytes()).to_hex()))
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

    /// Issue 45 item 5: other bytes of the same size with the mtime put back are read again
    /// (the ctime moved; a rename also changes the inode), and `rehash_all` corrects a memo
    /// that holds a wrong hash.
    #[test]
    fn a_file_with_its_size_and_mtime_put_back_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("w.gguf");
        std::fs::write(&file, b"weights one").unwrap();
        let mtime = std::fs::metadata(&file).unwrap().modified().unwrap();
        let memo = HashMemo::new(&dir.path().join("cache"));
        let (first, _) = memo.file_hash(&file).unwrap();
        // Rewritten in place: same inode, same size, mtime restored.
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&file, b"weights two").unwrap();
        std::fs::File::options().write(true).open(&file).unwrap().set_modified(mtime).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().modified().unwrap(), mtime);
        let (second, read) = memo.file_hash(&file).unwrap();
        assert!(read && second == blake3::hash(b"weights two").to_hex().to_string(), "the rewritten file is hashed again");
        // Replaced by a rename: a new inode.
        let other = dir.path().join("other");
        std::fs::write(&other, b"weights 333").unwrap();
        std::fs::File::options().write(true).open(&other).unwrap().set_modified(mtime).unwrap();
        std::fs::rename(&other, &file).unwrap();
        let (third, read) = memo.file_hash(&file).unwrap();
        assert!(read && third == blake3::hash(b"weights 333").to_hex().to_string());
        assert_ne!(first, third);

        // A memo entry whose hash is wrong (as if no metadata had moved): rehash_all says so
        // and remembers the truth.
        let slot = std::fs::read_dir(dir.path().join("cache/v1/memo")).unwrap().next().unwrap().unwrap().path();
        let mut record: serde_json::Value = serde_json::from_slice(&std::fs::read(&slot).unwrap()).unwrap();
        record["blake3"] = serde_json::json!(first);
        std::fs::write(&slot, serde_json::to_vec(&record).unwrap()).unwrap();
        assert_eq!(memo.file_hash(&file).unwrap(), (first.clone(), false), "the memo is trusted while the stamp holds");
        let checked = memo.rehash_all().unwrap();
        assert_eq!(checked, vec![Rehashed { path: file.display().to_string(), remembered: first, now: Some(third.clone()) }]);
        assert!(checked[0].stale());
        assert_eq!(memo.file_hash(&file).unwrap(), (third, false));
        std::fs::remove_file(&file).unwrap();
        assert_eq!(memo.rehash_all().unwrap()[0].now, None);
        assert!(memo.rehash_all().unwrap().is_empty(), "a gone file is forgotten");
    }
}
