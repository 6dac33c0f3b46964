//! Small records published whole and synced at once, not batched with the group commit: the
//! background-response and batch ledgers, whose loss to a crash means paying twice.

use std::io::Write;
use std::path::Path;

use super::store::{CacheError, io};

/// Writes `bytes` to `path` in `dir` (created if needed) through a temp file and a rename,
/// syncing the file and then the directory, so the record survives a crash whole or not at all.
pub(super) fn write_synced(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), CacheError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io(dir))?;
    tmp.write_all(bytes).map_err(io(tmp.path()))?;
    tmp.as_file().sync_all().map_err(io(tmp.path()))?;
    tmp.persist(path).map_err(|e| CacheError::Io { path: path.to_owned(), source: e.error })?;
    // The rename itself is durable only once its directory is.
    std::fs::File::open(dir).and_then(|dir| dir.sync_all()).map_err(io(dir))
}

/// Removes the record at `path`; one already gone is fine.
pub(super) fn remove_record(path: &Path) -> Result<(), CacheError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(CacheError::Io { path: path.to_owned(), source: e }),
    }
}

/// Now, in Unix seconds (when a record was made).
#[must_use]
pub fn now_s() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}
